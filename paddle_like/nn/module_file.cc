#include "paddle_like/nn/module_file.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/io/safetensors.h"

namespace pl {
namespace {

std::string IdsName(const std::string& table) { return table + ".ids"; }

// One parameter's new contents, checked and ready to install.
struct Pending {
  Parameter* param;
  Tensor values;  // dense: same shape as the parameter; sparse: (rows, dim)
  Tensor ids;     // sparse only: (rows)
};

}  // namespace

Status SaveModule(const std::string& path, Module& module) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const NamedParameter& np : module.NamedParameters()) {
    const Parameter& p = *np.param;
    if (p.kind == ParamKind::kDense) {
      tensors.emplace_back(np.name, p.var.value());
      continue;
    }
    // Rows sorted by id make the file a function of the table's contents alone.
    const SparseRows& rows = p.table->rows();
    const int64_t n = static_cast<int64_t>(rows.size());
    const int64_t dim = p.table->dim();
    std::vector<size_t> perm(rows.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::sort(perm.begin(), perm.end(),
              [&](size_t a, size_t b) { return rows.ids()[a] < rows.ids()[b]; });
    Tensor values({n, dim}, DType::kFloat32);  // (rows, dim)
    Tensor ids({n}, DType::kInt64);            // (rows)
    for (int64_t i = 0; i < n; ++i) {
      ids.i64()[i] = rows.ids()[perm[i]];
      std::memcpy(values.f32() + i * dim, rows.values().data() + perm[i] * dim,
                  dim * sizeof(float));
    }
    tensors.emplace_back(np.name, values);
    tensors.emplace_back(IdsName(np.name), ids);
  }
  for (const auto& [name, buffer] : module.NamedBuffers()) tensors.emplace_back(name, buffer);
  return Annotate(SaveTensors(path, tensors, {{"pl.kind", "module"}}),
                  absl::StrCat("SaveModule (", module.type_name(), ")"));
}

Status LoadModule(const std::string& path, Module& module) {
  PL_ASSIGN_OR_RETURN(TensorFile file, LoadTensors(path));
  return LoadModuleTensors(file.tensors, module, absl::StrCat("LoadModule '", path, "'"));
}

Status LoadModuleTensors(const std::map<std::string, Tensor>& tensors, Module& module,
                         const std::string& source, MissingParameters missing) {
  std::vector<std::string> problems;
  absl::StatusCode code = absl::StatusCode::kOk;
  auto problem = [&](absl::StatusCode c, std::string what) {
    if (code == absl::StatusCode::kOk) code = c;
    problems.push_back(std::move(what));
  };
  auto find = [&](const std::string& name, const char* what = "parameter") -> const Tensor* {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      problem(absl::StatusCode::kNotFound, absl::StrCat(what, " '", name, "' is missing"));
      return nullptr;
    }
    return &it->second;
  };
  auto mismatch = [&](const std::string& name, const Shape& want, DType want_dtype,
                      const Tensor& got) {
    problem(absl::StatusCode::kInvalidArgument,
            absl::StrCat("parameter '", name, "': the module has ", ShapeToString(want), " ",
                         DTypeName(want_dtype), ", given ", got.ShapeString(), " ",
                         DTypeName(got.dtype())));
  };
  // Under kKeep a parameter wholly absent is skipped; a table needs both its tensors.
  auto skip = [&](const std::string& name, bool sparse) {
    if (missing != MissingParameters::kKeep || tensors.count(name) > 0) return false;
    return !sparse || tensors.count(IdsName(name)) == 0;
  };

  std::vector<Pending> pending;
  for (const NamedParameter& np : module.NamedParameters()) {
    Parameter& p = *np.param;
    if (skip(np.name, p.kind == ParamKind::kSparse)) continue;
    if (p.kind == ParamKind::kDense) {
      const Tensor* t = find(np.name);
      if (t == nullptr) continue;
      const Tensor& cur = p.var.value();
      if (t->shape() != cur.shape() || t->dtype() != cur.dtype()) {
        mismatch(np.name, cur.shape(), cur.dtype(), *t);
        continue;
      }
      pending.push_back({&p, *t, Tensor()});
      continue;
    }
    const Tensor* values = find(np.name);
    const Tensor* ids = find(IdsName(np.name));
    if (values == nullptr || ids == nullptr) continue;
    const int64_t dim = p.table->dim();
    const int64_t rows = values->rank() == 2 ? values->dim(0) : -1;
    if (rows < 0 || values->dim(1) != dim || values->dtype() != DType::kFloat32) {
      mismatch(np.name, {rows < 0 ? -1 : rows, dim}, DType::kFloat32, *values);
      continue;
    }
    if (ids->rank() != 1 || ids->dim(0) != rows || ids->dtype() != DType::kInt64) {
      mismatch(IdsName(np.name), {rows}, DType::kInt64, *ids);
      continue;
    }
    Status in_range = p.table->CheckIds(ids->i64(), rows);
    if (!in_range.ok()) {
      problem(absl::StatusCode::kInvalidArgument, std::string(in_range.message()));
      continue;
    }
    std::set<int64_t> seen(ids->i64(), ids->i64() + rows);
    if (static_cast<int64_t>(seen.size()) != rows) {
      problem(absl::StatusCode::kInvalidArgument,
              absl::StrCat("parameter '", IdsName(np.name), "' repeats a row id"));
      continue;
    }
    pending.push_back({&p, *values, *ids});
  }
  std::vector<std::pair<Tensor, Tensor>> pending_buffers;  // (module's buffer, new values)
  for (const auto& [name, buffer] : module.NamedBuffers()) {
    if (skip(name, /*sparse=*/false)) continue;
    const Tensor* t = find(name, "buffer");
    if (t == nullptr) continue;
    if (t->shape() != buffer.shape() || t->dtype() != buffer.dtype()) {
      problem(absl::StatusCode::kInvalidArgument,
              absl::StrCat("buffer '", name, "': the module has ", buffer.ShapeString(), " ",
                           DTypeName(buffer.dtype()), ", given ", t->ShapeString(), " ",
                           DTypeName(t->dtype())));
      continue;
    }
    pending_buffers.emplace_back(buffer, *t);
  }
  if (!problems.empty()) {
    return Status(code, absl::StrCat(source, " into ", module.type_name(), ": ",
                                     absl::StrJoin(problems, "; ")));
  }
  // Every check passed; nothing below can fail.
  for (Pending& u : pending) {
    if (u.param->kind == ParamKind::kDense) {
      PL_RETURN_IF_ERROR(u.param->var.value().CopyFrom(u.values));
      continue;
    }
    SparseTable& table = *u.param->table;
    table.rows().Clear();
    table.rows().Reserve(static_cast<size_t>(u.ids.numel()));
    for (int64_t i = 0; i < u.ids.numel(); ++i) {
      table.SetRow(u.ids.i64()[i], u.values.f32() + i * table.dim());
    }
  }
  for (auto& [buffer, values] : pending_buffers) PL_RETURN_IF_ERROR(buffer.CopyFrom(values));
  return absl::OkStatus();
}

}  // namespace pl
