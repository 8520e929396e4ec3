#include "paddle_like/optim/update_rules.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace pl {

const char* OptimizerName(OptimizerKind kind) { return kind.name(); }

StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto def = FindOptimizer(lower);
  if (!def.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", name, "' (known: ",
                                                   absl::StrJoin(OptimizerNames(), ", "), ")"));
  }
  return OptimizerKind((*def)->name.c_str());  // the registry keeps the name for good
}

std::string OptimizerSpec::ToString() const {
  auto rule = ResolveOptimizer(*this, /*check_ranges=*/false);
  std::vector<std::string> parts = {absl::StrFormat("lr=%g", learning_rate)};
  if (rule.ok()) {
    const OptimizerDef& d = rule->def();
    for (size_t i = 0; i < d.hyper_params.size(); ++i) {
      parts.push_back(absl::StrFormat("%s=%g", d.hyper_params[i].name, rule->params().hyper[i]));
    }
  } else {  // unregistered, or a foreign hyper-parameter: what was set
    for (const auto& [name, value] : hyper) parts.push_back(absl::StrFormat("%s=%g", name, value));
  }
  parts.push_back(absl::StrFormat("wd=%g", weight_decay));
  if (rule.ok() && rule->schedule() != nullptr) parts.push_back("schedule=" + rule->schedule()->ToString());
  return absl::StrCat(kind.name(), "(", absl::StrJoin(parts, ", "), ")");
}

Status ParseHyperParams(const std::string& text, OptimizerSpec* spec) {
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    const absl::string_view name = absl::StripAsciiWhitespace(kv.first);
    float value = 0;
    if (name.empty() || !absl::SimpleAtof(absl::StripAsciiWhitespace(kv.second), &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer argument '", entry, "' is not name=number (e.g. beta2=0.99)"));
    }
    spec->hyper[std::string(name)] = value;
  }
  return absl::OkStatus();
}

Status ValidateOptimizerSpec(const OptimizerSpec& spec) { return UpdateRule::Create(spec).status(); }

int NumSlots(OptimizerKind kind) {
  auto def = FindOptimizer(kind.name());
  return def.ok() ? static_cast<int>((*def)->slots.size()) : 0;
}

namespace {

// The functions below resolve their spec on every call, and the parameter server calls
// them once per sparse row with the same spec: each thread keeps its last resolution
// (a spec compares equal field by field far faster than it resolves).
const UpdateRule* Resolved(const OptimizerSpec& s) {
  thread_local OptimizerSpec last;
  thread_local std::optional<UpdateRule> rule;
  if (rule.has_value() && s.kind == last.kind && s.learning_rate == last.learning_rate &&
      s.weight_decay == last.weight_decay && s.hyper == last.hyper) {
    return &*rule;
  }
  auto fresh = ResolveOptimizer(s, /*check_ranges=*/false);
  if (!fresh.ok()) return nullptr;
  last = s;
  rule = *fresh;
  return &*rule;
}

}  // namespace

void InitSlots(const OptimizerSpec& spec, float* state, int64_t n) {
  if (const UpdateRule* rule = Resolved(spec)) rule->InitSlots(state, n);
}

void ApplyUpdate(const OptimizerSpec& s, float* param, const float* grad, float* state, int64_t n,
                 int64_t step) {
  ApplyUpdate(s, param, grad, state, n, step, n);
}

void ApplyUpdate(const OptimizerSpec& s, float* param, const float* grad, float* state, int64_t n,
                 int64_t step, int64_t state_stride) {
  if (const UpdateRule* rule = Resolved(s)) rule->Apply(param, grad, state, n, step, state_stride);
}

}  // namespace pl
