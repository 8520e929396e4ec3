#include "paddle_like/dist/wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/dist/sharding.h"

namespace pl {

namespace {

// The optimizers of the old message form, by their old `kind` number. Frozen: new
// optimizers travel by name only.
constexpr const char* kOldKinds[] = {"sgd", "momentum", "adagrad", "adam"};

}  // namespace

StatusOr<OptimizerSpec> OptimizerFromProto(const proto::OptimizerConfig& c) {
  OptimizerSpec s;
  s.learning_rate = c.learning_rate();
  s.weight_decay = c.weight_decay();
  if (!c.name().empty()) {
    PL_ASSIGN_OR_RETURN(s.kind, ParseOptimizerKind(c.name()));
    PL_ASSIGN_OR_RETURN(const OptimizerDef* def, FindOptimizer(s.kind.name()));
    for (const auto& [name, value] : c.hyper_params()) {
      // Defaults are left out: the per-call update functions compare specs, and an
      // empty map compares fastest (the pserver's hot path, update_rules.cc).
      const int i = def->HyperIndex(name);
      if (i < 0 || value != def->hyper_params[i].default_value) s.hyper[name] = value;
    }
  } else {
    const int n = static_cast<int>(std::size(kOldKinds));
    if (c.kind() < 0 || c.kind() >= n) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer kind ", c.kind(), " is unknown (known: 0 sgd, 1 momentum, 2 adagrad, 3 adam)"));
    }
    PL_ASSIGN_OR_RETURN(s.kind, ParseOptimizerKind(kOldKinds[c.kind()]));
    PL_ASSIGN_OR_RETURN(const OptimizerDef* def, FindOptimizer(s.kind.name()));
    const std::pair<const char*, float> old_fields[] = {
        {"momentum", c.momentum()}, {"beta1", c.beta1()}, {"beta2", c.beta2()},
        {"epsilon", c.epsilon()}, {"initial_accumulator", c.initial_accumulator()}};
    for (const auto& [name, value] : old_fields) {
      const int i = def->HyperIndex(name);
      if (i >= 0 && value != def->hyper_params[i].default_value) s.hyper[name] = value;
    }
  }
  PL_RETURN_IF_ERROR(ValidateOptimizerSpec(s));
  return s;
}

proto::OptimizerConfig OptimizerToProto(const OptimizerSpec& s) {
  proto::OptimizerConfig c;
  c.set_name(s.kind.name());
  c.set_learning_rate(s.learning_rate);
  c.set_weight_decay(s.weight_decay);
  // Every hyper-parameter, defaults included, so the reader's defaults do not matter.
  auto rule = ResolveOptimizer(s, /*check_ranges=*/false);
  if (rule.ok()) {
    const OptimizerDef& d = rule->def();
    for (size_t i = 0; i < d.hyper_params.size(); ++i) {
      (*c.mutable_hyper_params())[d.hyper_params[i].name] = rule->params().hyper[i];
    }
    // The learning-rate schedule's keys (lr_schedule.h), as they are.
    for (const auto& [name, value] : s.hyper) {
      if (IsLrScheduleKey(name)) (*c.mutable_hyper_params())[name] = value;
    }
  } else {  // the reader reports what is wrong
    for (const auto& [name, value] : s.hyper) (*c.mutable_hyper_params())[name] = value;
  }
  return c;
}

Status ValidateParamSpec(const proto::ParamSpec& spec) {
  if (spec.name().empty()) return absl::InvalidArgumentError("parameter spec with an empty name");
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name(), "': ", why));
  };
  if (spec.init_kind() < 0 || spec.init_kind() > static_cast<int>(InitSpec::Kind::kNormal)) {
    return bad(absl::StrCat("unknown init_kind ", spec.init_kind()));
  }
  if (!std::isfinite(spec.init_scale())) return bad("init_scale is not finite");
  if (spec.kind() == proto::ParamSpec::DENSE) {
    for (int64_t d : spec.shape()) {
      if (d <= 0) return bad(absl::StrCat("shape [", absl::StrJoin(spec.shape(), ", "), "] has a non-positive dimension"));
    }
    if (spec.has_optimizer()) return bad("a dense parameter takes the job's optimizer (a table may have its own)");
    if (spec.block_size() < 0) return bad(absl::StrCat("block_size ", spec.block_size(), " is negative"));
    if (NumBlocks(DenseNumel(spec), BlockSizeOf(spec)) > (int64_t{1} << 31) - 1) {
      return bad("too many blocks (block index must fit int32)");
    }
  } else if (spec.kind() == proto::ParamSpec::SPARSE) {
    if (spec.dim() <= 0) return bad(absl::StrCat("sparse dim ", spec.dim(), " must be > 0"));
    if (spec.num_rows() < 0) return bad(absl::StrCat("num_rows ", spec.num_rows(), " is negative"));
    if (spec.admit_after() < 0 || spec.admit_after() > kMaxAdmitAfter) {
      return bad(absl::StrCat("admit_after ", spec.admit_after(), " is outside [0, ", kMaxAdmitAfter, "]"));
    }
    if (spec.evict_after_s() < 0 || spec.evict_after_s() > kMaxEvictAfterSeconds) {
      return bad(absl::StrCat("evict_after_s ", spec.evict_after_s(), " is outside [0, ", kMaxEvictAfterSeconds, "]"));
    }
    if (spec.has_optimizer()) {
      if (StatusOr<OptimizerSpec> opt = OptimizerFromProto(spec.optimizer()); !opt.ok()) {
        return bad(absl::StrCat("its optimizer: ", opt.status().message()));
      }
    }
  } else {
    return bad(absl::StrCat("unknown kind ", static_cast<int>(spec.kind())));
  }
  return absl::OkStatus();
}

StatusOr<InitSpec> InitSpecFromProto(const proto::ParamSpec& spec) {
  PL_RETURN_IF_ERROR(ValidateParamSpec(spec));
  InitSpec init;
  init.kind = static_cast<InitSpec::Kind>(spec.init_kind());
  init.scale = spec.init_scale();
  return init;
}

int64_t DenseNumel(const proto::ParamSpec& spec) {
  int64_t n = 1;
  for (int64_t d : spec.shape()) n *= d;
  return n;
}

int64_t BlockSizeOf(const proto::ParamSpec& spec) {
  return spec.block_size() > 0 ? spec.block_size() : kDefaultBlockSize;
}

int64_t BlockOffset(const proto::ParamSpec& spec, int64_t block) { return block * BlockSizeOf(spec); }

int64_t BlockLength(const proto::ParamSpec& spec, int64_t block) {
  const int64_t begin = BlockOffset(spec, block);
  return std::max<int64_t>(0, std::min(DenseNumel(spec), begin + BlockSizeOf(spec)) - begin);
}

std::string DescribeSpec(const proto::ParamSpec& spec) {
  if (spec.kind() == proto::ParamSpec::SPARSE) {
    return absl::StrCat("sparse rows of dim ", spec.dim(), " (num_rows ", spec.num_rows(), ")");
  }
  return absl::StrCat("dense shape [", absl::StrJoin(spec.shape(), ", "), "] in blocks of ",
                      BlockSizeOf(spec));
}

std::vector<proto::ParamSpec> ParamSpecsOf(Module& module, int64_t block_size) {
  return ParamSpecsOf(module.NamedParameters(), block_size);
}

std::vector<proto::ParamSpec> ParamSpecsOf(const std::vector<NamedParameter>& params, int64_t block_size) {
  std::vector<proto::ParamSpec> specs;
  for (const NamedParameter& np : params) {
    proto::ParamSpec s;
    s.set_name(np.name);
    s.set_init_kind(static_cast<int>(np.param->init.kind));
    s.set_init_scale(np.param->init.scale);
    if (np.param->kind == ParamKind::kDense) {
      s.set_kind(proto::ParamSpec::DENSE);
      for (int64_t d : np.param->var.value().shape()) s.add_shape(d);
      s.set_block_size(block_size > 0 ? block_size : kDefaultBlockSize);
    } else {
      s.set_kind(proto::ParamSpec::SPARSE);
      s.set_dim(np.param->table->dim());
      s.set_num_rows(np.param->table->num_rows());
      s.set_admit_after(np.param->table->policy().admit_after);
      s.set_evict_after_s(np.param->table->policy().evict_after_s);
      if (const auto& opt = np.param->table->policy().optimizer) *s.mutable_optimizer() = OptimizerToProto(*opt);
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

void SetFloats(std::string* bytes, const float* values, int64_t n) {
  bytes->resize(static_cast<size_t>(n) * sizeof(float));
  if (n > 0) std::memcpy(bytes->data(), values, bytes->size());
}

StatusOr<FloatView> FloatView::Of(const std::string& bytes, absl::string_view what) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", bytes.size(),
                                                   " bytes is not a whole number of float32 values"));
  }
  FloatView v;
  v.n_ = static_cast<int64_t>(bytes.size() / sizeof(float));
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    v.data_ = reinterpret_cast<const float*>(bytes.data());
  } else {
    v.copy_.reset(new float[std::max<int64_t>(v.n_, 1)]);
    std::memcpy(v.copy_.get(), bytes.data(), bytes.size());
    v.data_ = v.copy_.get();
  }
  return v;
}

int64_t FirstNonFinite(const float* v, int64_t n) {
  return FirstNonFiniteBytes(reinterpret_cast<const char*>(v), n);
}

int64_t FirstNonFiniteBytes(const char* bytes, int64_t n) {
  // A branch-free scan first, the position only when something is wrong. The scan
  // tests the exponent bits (all ones: Inf or NaN) as integers, a max-reduction the
  // compiler vectorises; a loop over std::isfinite compiles to scalar compares. The
  // loads are memcpy's, so any alignment is fine.
  auto exponent = [bytes](int64_t i) {
    uint32_t bits;
    std::memcpy(&bits, bytes + 4 * i, sizeof bits);
    return bits & 0x7f800000u;
  };
  uint32_t max_exponent = 0;
  for (int64_t i = 0; i < n; ++i) max_exponent = std::max(max_exponent, exponent(i));
  if (max_exponent != 0x7f800000u) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (exponent(i) == 0x7f800000u) return i;
  }
  return -1;
}

double SumOfSquares(const float* v, int64_t n) {
  // Independent lanes: one running sum is a chain of dependent adds (4 cycles each, a
  // float every 4 cycles); 16 lanes let the compiler use vector registers and keep the
  // adders busy, about 10x faster on a long gradient.
  constexpr int kLanes = 16;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lane[k] += static_cast<double>(v[i + k]) * v[i + k];
  }
  for (int k = 0; i < n; ++i, ++k) lane[k] += static_cast<double>(v[i]) * v[i];
  double sum = 0;
  for (int k = 0; k < kLanes; ++k) sum += lane[k];
  return sum;
}

}  // namespace pl
