#include "paddle_like/optim/optimizer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/core/flush_denormals.h"

namespace pl {

StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(Module* module, const OptimizerSpec& spec) {
  PL_ASSIGN_OR_RETURN(UpdateRule rule, UpdateRule::Create(spec));
  if (module == nullptr) return absl::InvalidArgumentError("Optimizer: null module");
  return std::unique_ptr<Optimizer>(new Optimizer(module, spec, rule));
}

Status Optimizer::Step() {
  const ScopedFlushDenormals flush;  // once for every row below, not once a row
  const int slots = rule_.num_slots();
  for (auto& np : module_->NamedParameters()) {
    Parameter* p = np.param;
    if (p->kind == ParamKind::kDense) {
      const Tensor& grad = p->var.grad();
      if (!grad.defined()) continue;
      const Tensor& value = p->var.value();
      DenseState& st = dense_[np.name];
      if (!st.slots.defined()) {
        st.slots = Tensor({std::max<int64_t>(slots * value.numel(), 1)}, DType::kFloat32);
        rule_.InitSlots(st.slots.f32(), value.numel());
      }
      ++st.step;
      rule_.Apply(value.f32(), grad.f32(), st.slots.f32(), value.numel(), st.step, value.numel());
      grad.SetZero();
    } else {
      SparseTable& table = *p->table;
      PL_ASSIGN_OR_RETURN(const UpdateRule* rule, RuleFor(np.name, table));
      const int table_slots = rule->num_slots();
      const SparseRows& g = table.grad();
      auto& states = rows_[np.name];
      const int64_t dim = table.dim();
      for (size_t i = 0; i < g.size(); ++i) {
        const int64_t id = g.ids()[i];
        RowState& st = states[id];
        if (st.slots.empty() && table_slots > 0) {
          st.slots.resize(table_slots * dim);
          rule->InitSlots(st.slots.data(), dim);
        }
        ++st.step;
        rule->Apply(table.Row(id), g.values().data() + i * dim, st.slots.data(), dim, st.step, dim);
      }
      table.ZeroGrad();
    }
  }
  ++steps_;
  return absl::OkStatus();
}

StatusOr<const UpdateRule*> Optimizer::RuleFor(const std::string& name, const SparseTable& table) const {
  const std::optional<OptimizerSpec>& own = table.policy().optimizer;
  if (!own) return &rule_;
  const std::string key = own->ToString();
  auto it = table_rules_.find(name);
  if (it == table_rules_.end() || it->second.first != key) {
    auto rule = UpdateRule::Create(*own);
    PL_RETURN_IF_ERROR(Annotate(rule.status(), absl::StrCat("the optimizer of table '", name, "'")));
    it = table_rules_.insert_or_assign(name, std::make_pair(key, *rule)).first;
  }
  return &it->second.second;
}

OptimizerState Optimizer::ExportState() const {
  const int dense_slots = rule_.num_slots();
  OptimizerState out;
  out.spec = spec_;
  out.steps = steps_;
  for (const NamedParameter& np : module_->NamedParameters()) {
    if (np.param->kind == ParamKind::kDense) {
      auto it = dense_.find(np.name);
      if (it == dense_.end()) continue;
      const Tensor& value = np.param->var.value();
      OptimizerState::Dense d{np.name, it->second.step, {}};
      for (int k = 0; k < dense_slots; ++k) {
        Tensor slot(value.shape(), DType::kFloat32);
        std::memcpy(slot.f32(), it->second.slots.f32() + k * value.numel(), slot.bytes());
        d.slots.push_back(std::move(slot));
      }
      out.dense.push_back(std::move(d));
      continue;
    }
    auto it = rows_.find(np.name);
    if (it == rows_.end() || it->second.empty()) continue;
    const int64_t dim = np.param->table->dim();
    StatusOr<const UpdateRule*> rule = RuleFor(np.name, *np.param->table);
    const int slots = rule.ok() ? (*rule)->num_slots() : 0;  // Step() reported a bad one
    std::vector<int64_t> ids;
    for (const auto& [id, st] : it->second) ids.push_back(id);
    std::sort(ids.begin(), ids.end());  // the export is a function of the state alone
    const int64_t n = static_cast<int64_t>(ids.size());
    OptimizerState::Rows r{np.name, Tensor::FromIds({n}, ids), Tensor({n}, DType::kInt64), {}};
    for (int k = 0; k < slots; ++k) r.slots.emplace_back(Shape{n, dim}, DType::kFloat32);
    for (int64_t i = 0; i < n; ++i) {
      const RowState& st = it->second.at(ids[i]);
      r.steps.i64()[i] = st.step;
      for (int k = 0; k < slots; ++k) {
        std::memcpy(r.slots[k].f32() + i * dim, st.slots.data() + k * dim, dim * sizeof(float));
      }
    }
    out.rows.push_back(std::move(r));
  }
  return out;
}

Status Optimizer::ImportState(const OptimizerState& state) {
  const std::string where = absl::StrCat("optimizer state for ", module_->type_name());
  if (state.spec.kind != spec_.kind) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the state is of a ",
                                                   OptimizerName(state.spec.kind),
                                                   " optimizer, this one is ",
                                                   OptimizerName(spec_.kind)));
  }
  auto rule = UpdateRule::Create(state.spec);
  PL_RETURN_IF_ERROR(Annotate(rule.status(), where));
  if (state.steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": steps = ", state.steps, " < 0"));
  }
  const int slots = rule_.num_slots();
  absl::flat_hash_map<std::string, Parameter*> params;
  for (const NamedParameter& np : module_->NamedParameters()) params[np.name] = np.param;

  std::vector<std::string> problems;
  absl::StatusCode code = absl::StatusCode::kOk;
  auto problem = [&](absl::StatusCode c, std::string what) {
    if (code == absl::StatusCode::kOk) code = c;
    problems.push_back(std::move(what));
  };
  // The parameter `name` of `kind`, or nullptr after recording the problem.
  auto find = [&](const std::string& name, ParamKind kind) -> Parameter* {
    auto it = params.find(name);
    if (it == params.end() || it->second->kind != kind) {
      problem(absl::StatusCode::kNotFound,
              absl::StrCat("'", name, "' is not ",
                           kind == ParamKind::kDense ? "a dense parameter" : "an embedding table",
                           " of the module"));
      return nullptr;
    }
    return it->second;
  };
  // Whether `t` is `dtype` of `shape`; records the problem otherwise.
  auto check = [&](const std::string& what, const Tensor& t, const Shape& shape, DType dtype) {
    if (t.defined() && t.device() == Device::kCPU && t.dtype() == dtype && t.shape() == shape) {
      return true;
    }
    problem(absl::StatusCode::kInvalidArgument,
            absl::StrCat(what, ": expected ", ShapeToString(shape), " ", DTypeName(dtype), ", got ",
                         t.defined() ? absl::StrCat(t.ShapeString(), " ", DTypeName(t.dtype()))
                                     : std::string("nothing")));
    return false;
  };
  auto check_slot_count = [&](const std::string& name, size_t got, int expected, OptimizerKind kind) {
    if (got == static_cast<size_t>(expected)) return true;
    problem(absl::StatusCode::kInvalidArgument,
            absl::StrCat("'", name, "': ", got, " state slots, ", OptimizerName(kind), " keeps ", expected));
    return false;
  };

  absl::flat_hash_map<std::string, DenseState> dense;
  for (const OptimizerState::Dense& d : state.dense) {
    Parameter* p = find(d.name, ParamKind::kDense);
    if (p == nullptr || !check_slot_count(d.name, d.slots.size(), slots, spec_.kind)) continue;
    const Tensor& value = p->var.value();
    bool ok = true;
    for (int k = 0; k < slots; ++k) {
      ok &= check(absl::StrCat("slot ", k, " of '", d.name, "'"), d.slots[k], value.shape(),
                  DType::kFloat32);
    }
    if (d.step < 0) {
      problem(absl::StatusCode::kInvalidArgument, absl::StrCat("'", d.name, "': step ", d.step, " < 0"));
      ok = false;
    }
    if (dense.contains(d.name)) {
      problem(absl::StatusCode::kInvalidArgument, absl::StrCat("'", d.name, "' appears twice"));
      ok = false;
    }
    if (!ok) continue;
    DenseState& st = dense[d.name];
    st.step = d.step;
    if (slots > 0) {  // SGD's placeholder block is made by Step()
      st.slots = Tensor({slots * value.numel()}, DType::kFloat32);
      for (int k = 0; k < slots; ++k) {
        std::memcpy(st.slots.f32() + k * value.numel(), d.slots[k].f32(), d.slots[k].bytes());
      }
    }
  }

  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, RowState>> rows;
  for (const OptimizerState::Rows& r : state.rows) {
    Parameter* p = find(r.name, ParamKind::kSparse);
    if (p == nullptr) continue;
    // A table with its own optimizer keeps that one's slots.
    const std::optional<OptimizerSpec>& own = p->table->policy().optimizer;
    const int slots = own ? NumSlots(own->kind) : NumSlots(spec_.kind);
    if (!check_slot_count(r.name, r.slots.size(), slots, own ? own->kind : spec_.kind)) continue;
    const int64_t n = r.ids.defined() && r.ids.rank() == 1 ? r.ids.dim(0) : -1;
    if (!check(absl::StrCat("'", r.name, "' ids"), r.ids, {std::max<int64_t>(n, 0)}, DType::kInt64)) {
      continue;
    }
    const int64_t dim = p->table->dim();
    bool ok = check(absl::StrCat("'", r.name, "' steps"), r.steps, {n}, DType::kInt64);
    for (int k = 0; k < slots; ++k) {
      ok &= check(absl::StrCat("slot ", k, " of '", r.name, "'"), r.slots[k], {n, dim},
                  DType::kFloat32);
    }
    if (!ok) continue;
    Status in_range = p->table->CheckIds(r.ids.i64(), n);
    if (!in_range.ok()) {
      problem(absl::StatusCode::kInvalidArgument,
              absl::StrCat("'", r.name, "' ids: ", in_range.message()));
      continue;
    }
    if (rows.contains(r.name)) {
      problem(absl::StatusCode::kInvalidArgument, absl::StrCat("'", r.name, "' appears twice"));
      continue;
    }
    auto& states = rows[r.name];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = r.ids.i64()[i], step = r.steps.i64()[i];
      auto [it, inserted] = states.try_emplace(id);
      if (!inserted || step < 0) {
        problem(absl::StatusCode::kInvalidArgument,
                absl::StrCat("'", r.name, "' row ", id,
                             step < 0 ? absl::StrCat(": step ", step, " < 0") : " appears twice"));
        break;
      }
      RowState& st = it->second;
      st.step = step;
      st.slots.resize(slots * dim);
      for (int k = 0; k < slots; ++k) {
        std::memcpy(st.slots.data() + k * dim, r.slots[k].f32() + i * dim, dim * sizeof(float));
      }
    }
  }

  if (!problems.empty()) {
    return Status(code, absl::StrCat(where, ": ", absl::StrJoin(problems, "; ")));
  }
  // Every check passed: install.
  spec_ = state.spec;
  rule_ = *rule;
  steps_ = state.steps;
  dense_ = std::move(dense);
  rows_ = std::move(rows);
  return absl::OkStatus();
}

}  // namespace pl
