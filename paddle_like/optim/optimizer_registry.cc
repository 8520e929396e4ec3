#include "paddle_like/optim/optimizer_registry.h"

#include <memory>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/registry.h"
#include "paddle_like/optim/builtin_optimizers.h"

namespace pl {
namespace {

// The process's optimizers. Built-ins arrive through RegisterBuiltinOptimizers (not a
// static initialiser); entries are never removed, so a found definition stays valid.
Registry<OptimizerDef>& Table() {
  static auto* const table = new Registry<OptimizerDef>("optimizer");
  return *table;
}

Status AddToTable(OptimizerDef def) {
  const std::string where = absl::StrCat("optimizer '", def.name, "'");
  if (def.apply == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, " has no update function"));
  if (def.hyper_params.size() > static_cast<size_t>(kMaxHyperParams)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has ", def.hyper_params.size(),
                                                   " hyper-parameters, at most ", kMaxHyperParams));
  }
  if (!def.slot_init_param.empty() && def.slot_init_param.size() != def.slots.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": slot_init_param needs one entry per slot"));
  }
  for (int p : def.slot_init_param) {
    if (p >= static_cast<int>(def.hyper_params.size())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": slot_init_param ", p, " is not a hyper-parameter"));
    }
  }
  std::string name = def.name, help = def.help;
  return Table().Register(name, std::move(def), std::move(help));
}

const char* RangeText(HyperParam::Range r) {
  switch (r) {
    case HyperParam::Range::kPositive: return "> 0";
    case HyperParam::Range::kNonNegative: return ">= 0";
    case HyperParam::Range::kUnitInterval: return "in [0, 1)";
  }
  return "?";
}

bool InRange(HyperParam::Range r, float v) {
  switch (r) {
    case HyperParam::Range::kPositive: return v > 0;
    case HyperParam::Range::kNonNegative: return v >= 0;
    case HyperParam::Range::kUnitInterval: return v >= 0 && v < 1;
  }
  return false;
}

Status OutOfRange(const char* field, float v, const char* want) {
  return absl::InvalidArgumentError(absl::StrFormat("optimizer %s = %g: must be %s", field, v, want));
}

}  // namespace

void RegisterBuiltinOptimizers() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    for (OptimizerDef (*make)() : {SgdOptimizer, MomentumOptimizer, AdagradOptimizer, AdamOptimizer}) {
      Status s = AddToTable(make());
      if (!s.ok()) {  // a programming error
        log::Error(absl::StrCat("built-in optimizer: ", s.ToString()));
        std::abort();
      }
    }
  });
}

Status RegisterOptimizer(OptimizerDef def) {
  RegisterBuiltinOptimizers();
  return AddToTable(std::move(def));
}

StatusOr<const OptimizerDef*> FindOptimizer(const std::string& name) {
  RegisterBuiltinOptimizers();
  return Table().Find(name);
}

std::vector<std::string> OptimizerNames() {
  RegisterBuiltinOptimizers();
  return Table().Names();
}

std::string OptimizerHelp() {
  RegisterBuiltinOptimizers();
  return Table().Help();
}

StatusOr<UpdateRule> ResolveOptimizer(const OptimizerSpec& spec, bool check_ranges) {
  auto def = FindOptimizer(spec.kind.name());
  if (!def.ok()) return absl::InvalidArgumentError(def.status().message());
  const OptimizerDef& d = **def;
  OptimizerParams p;
  p.learning_rate = spec.learning_rate;
  p.weight_decay = spec.weight_decay;
  for (size_t i = 0; i < d.hyper_params.size(); ++i) p.hyper[i] = d.hyper_params[i].default_value;
  for (const auto& [name, value] : spec.hyper) {
    if (IsLrScheduleKey(name)) continue;  // the schedule's, below
    const int index = d.HyperIndex(name);
    if (index < 0) {
      std::vector<std::string> has;
      for (const HyperParam& h : d.hyper_params) has.push_back(h.name);
      return absl::InvalidArgumentError(absl::StrCat("optimizer ", d.name, " has no hyper-parameter '", name,
                                                     "' (has: learning_rate, weight_decay",
                                                     has.empty() ? "" : ", ", absl::StrJoin(has, ", "), ")"));
    }
    p.hyper[index] = value;
  }
  if (check_ranges) {
    if (!(p.learning_rate > 0) || !std::isfinite(p.learning_rate)) {
      return OutOfRange("learning_rate", p.learning_rate, "> 0");
    }
    for (size_t i = 0; i < d.hyper_params.size(); ++i) {
      const HyperParam& h = d.hyper_params[i];
      if (!InRange(h.range, p.hyper[i])) return OutOfRange(h.name.c_str(), p.hyper[i], RangeText(h.range));
    }
    if (!(p.weight_decay >= 0)) return OutOfRange("weight_decay", p.weight_decay, ">= 0");
  }
  UpdateRule rule(&d, p);
  StatusOr<LrSchedule> schedule = DecodeLrSchedule(spec);
  if (!schedule.ok()) {
    if (check_ranges) return schedule.status();
  } else if (!schedule->is_constant()) {
    rule.schedule_ = std::make_shared<const LrSchedule>(*std::move(schedule));
  }
  return rule;
}

StatusOr<UpdateRule> UpdateRule::Create(const OptimizerSpec& spec) {
  return ResolveOptimizer(spec, /*check_ranges=*/true);
}

void UpdateRule::InitSlots(float* state, int64_t n) const {
  for (size_t k = 0; k < def_->slots.size(); ++k) {
    const int from = def_->slot_init_param.empty() ? -1 : def_->slot_init_param[k];
    std::fill(state + k * n, state + (k + 1) * n, from >= 0 ? params_.hyper[from] : 0.0f);
  }
}

void UpdateRule::RestartSlots(float* state, int64_t n) const {
  if (def_->restart == nullptr) {
    InitSlots(state, n);
    return;
  }
  def_->restart(state, n, n);
}

}  // namespace pl
