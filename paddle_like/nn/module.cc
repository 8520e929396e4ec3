#include "paddle_like/nn/module.h"

#include "absl/strings/str_join.h"

namespace pl {

Variable Module::RegisterDense(const std::string& name, Shape shape, InitSpec init) {
  auto p = std::make_unique<Parameter>();
  p->kind = ParamKind::kDense;
  p->var = Variable(Tensor::Zeros(std::move(shape)), /*requires_grad=*/true);
  p->init = init;
  InitializeValues(init, DenseStreamSeed(0, name), p->var.value().f32(), p->var.value().numel());
  Variable v = p->var;
  params_.emplace_back(name, std::move(p));
  return v;
}

std::shared_ptr<SparseTable> Module::RegisterSparse(const std::string& name, int64_t dim,
                                                    int64_t num_rows, InitSpec init) {
  auto p = std::make_unique<Parameter>();
  p->kind = ParamKind::kSparse;
  p->init = init;
  p->table = std::make_shared<SparseTable>(name, dim, num_rows, init);
  auto table = p->table;
  params_.emplace_back(name, std::move(p));
  return table;
}

void Module::CollectParameters(const std::string& prefix, std::vector<NamedParameter>* out) {
  for (auto& [name, p] : params_) out->push_back({prefix + name, p.get()});
  for (auto& [name, child] : children_) child->CollectParameters(prefix + name + ".", out);
}

std::vector<NamedParameter> Module::NamedParameters() {
  std::vector<NamedParameter> out;
  CollectParameters("", &out);
  // Sparse tables learn their full name here, since rows are seeded by it.
  for (auto& np : out) {
    if (np.param->kind == ParamKind::kSparse) np.param->table->set_name(np.name);
  }
  return out;
}

Tensor& Module::RegisterBuffer(const std::string& name, Tensor initial) {
  buffers_.emplace_back(name, std::make_unique<Tensor>(std::move(initial)));
  return *buffers_.back().second;
}

void Module::CollectBuffers(const std::string& prefix,
                            std::vector<std::pair<std::string, Tensor>>* out) {
  for (auto& [name, t] : buffers_) out->emplace_back(prefix + name, *t);
  for (auto& [name, child] : children_) child->CollectBuffers(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::NamedBuffers() {
  std::vector<std::pair<std::string, Tensor>> out;
  CollectBuffers("", &out);
  return out;
}

StatusOr<Parameter*> Module::FindParameter(const std::string& name) {
  std::vector<std::string> known;
  for (auto& np : NamedParameters()) {
    if (np.name == name) return np.param;
    known.push_back(np.name);
  }
  return absl::NotFoundError(absl::StrCat("no parameter named '", name, "' in ", type_name_,
                                          " (has: ", absl::StrJoin(known, ", "), ")"));
}

int64_t Module::NumParameterElements() {
  int64_t n = 0;
  for (auto& np : NamedParameters()) {
    if (np.param->kind == ParamKind::kDense) {
      n += np.param->var.value().numel();
    } else {
      n += static_cast<int64_t>(np.param->table->rows().size()) * np.param->table->dim();
    }
  }
  return n;
}

void Module::InitParameters(uint64_t seed) {
  for (auto& np : NamedParameters()) {
    Parameter* p = np.param;
    if (p->kind == ParamKind::kDense) {
      InitializeValues(p->init, DenseStreamSeed(seed, np.name), p->var.value().f32(),
                       p->var.value().numel());
    } else {
      p->table->Reset(seed);
    }
  }
}

void Module::ZeroGrad() {
  for (auto& np : NamedParameters()) {
    if (np.param->kind == ParamKind::kDense) {
      np.param->var.ZeroGrad();
    } else {
      np.param->table->ZeroGrad();
    }
  }
}

void Module::Train(bool on) {
  training_ = on;
  OnTrainChanged();
  for (auto& [name, child] : children_) child->Train(on);
}

Sequential& Sequential::Add(std::shared_ptr<Layer> layer) {
  return Add(std::to_string(layers_.size()), std::move(layer));
}

Sequential& Sequential::Add(const std::string& name, std::shared_ptr<Layer> layer) {
  RegisterModule(name, layer);
  layers_.emplace_back(name, std::move(layer));
  return *this;
}

StatusOr<Variable> Sequential::Forward(const Variable& x) {
  Variable h = x;
  for (auto& [name, layer] : layers_) {
    auto out = layer->Forward(h);
    if (!out.ok()) return Annotate(out.status(), absl::StrCat("layer '", name, "'"));
    h = std::move(out).value();
  }
  return h;
}

}  // namespace pl
