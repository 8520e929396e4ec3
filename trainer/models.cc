#include "trainer/models.h"

#include <algorithm>
#include <cstdlib>

namespace pl {
namespace {

class SequentialModel : public ExampleModel {
 public:
  explicit SequentialModel(std::shared_ptr<Sequential> net) : net_(std::move(net)) {}
  Module& module() override { return *net_; }
  TaskKind task() const override { return TaskKind::kClassification; }
  StatusOr<Variable> Forward(const Tensor& inputs) override { return net_->Forward(Variable(inputs)); }
  Sequential* sequential() { return net_.get(); }

 private:
  std::shared_ptr<Sequential> net_;
};

std::shared_ptr<Sequential> MakeMlp() {
  auto net = std::make_shared<Sequential>();
  net->Add("flatten", std::make_shared<Flatten>())
      .Add("fc1", std::make_shared<Linear>(784, 512))
      .Add("relu1", std::make_shared<ReLU>())
      .Add("fc2", std::make_shared<Linear>(512, 256))
      .Add("relu2", std::make_shared<ReLU>())
      .Add("fc3", std::make_shared<Linear>(256, 10));
  return net;
}

std::shared_ptr<Sequential> MakeCnn(uint64_t seed) {
  // 28x28 -> conv(same) 28x28x32 -> pool 14x14x32 -> conv(same) 14x14x64 -> pool 7x7x64
  auto net = std::make_shared<Sequential>();
  net->Add("conv1", std::make_shared<Conv2D>(1, 32, 5, 5, /*stride=*/1, /*padding=*/2))
      .Add("relu1", std::make_shared<ReLU>())
      .Add("pool1", std::make_shared<MaxPool2D>(2, 2))
      .Add("conv2", std::make_shared<Conv2D>(32, 64, 5, 5, 1, 2))
      .Add("relu2", std::make_shared<ReLU>())
      .Add("pool2", std::make_shared<MaxPool2D>(2, 2))
      .Add("flatten", std::make_shared<Flatten>())
      .Add("fc1", std::make_shared<Linear>(7 * 7 * 64, 1024))
      .Add("relu3", std::make_shared<ReLU>())
      .Add("dropout", std::make_shared<Dropout>(0.4f, seed))
      .Add("fc2", std::make_shared<Linear>(1024, 10));
  return net;
}

// Click-through model: a custom forward over named sub-layers.
//   ids (B, F) -> emb (B, F, D) -> flatten (B, F*D) -> fc1 (B, H) -> relu -> fc2 (B, 1)
class CtrNet : public Module {
 public:
  explicit CtrNet(const ModelOptions& o) : Module("CtrNet"), fields_(o.ctr_fields) {
    emb_ = RegisterModule("emb", std::make_shared<Embedding>(o.ctr_num_rows, o.ctr_embedding_dim));
    emb_->table()->set_policy({.admit_after = o.ctr_admit_after, .evict_after_s = o.ctr_evict_after_s});
    fc1_ = RegisterModule("fc1", std::make_shared<Linear>(o.ctr_fields * o.ctr_embedding_dim, 64));
    fc2_ = RegisterModule("fc2", std::make_shared<Linear>(64, 1));
    // Not registered: its layers are fc1 and fc2 above, so no parameter appears twice.
    tower_.Add("fc1", fc1_).Add("relu", std::make_shared<ReLU>()).Add("fc2", fc2_);
  }
  EmbeddingTower Parts() { return {emb_.get(), &tower_, fields_}; }
  StatusOr<Variable> Forward(const Tensor& ids) {
    if (ids.rank() != 2 || ids.dim(1) != fields_) {
      return absl::InvalidArgumentError(absl::StrCat("ctr model: expects ids of shape [batch, ", fields_,
                                                     "], got ", ids.ShapeString()));
    }
    PL_ASSIGN_OR_RETURN(Variable e, emb_->Forward(Variable(ids)));
    PL_ASSIGN_OR_RETURN(Variable flat, flatten_.Forward(e));
    PL_ASSIGN_OR_RETURN(Variable h, fc1_->Forward(flat));
    PL_ASSIGN_OR_RETURN(Variable a, relu_.Forward(h));
    return fc2_->Forward(a);
  }

 private:
  int64_t fields_;
  std::shared_ptr<Embedding> emb_;
  std::shared_ptr<Linear> fc1_, fc2_;
  Flatten flatten_;
  ReLU relu_;
  Sequential tower_;  // fc1, a ReLU, fc2: what Forward runs after the flatten
};

class CtrModel : public ExampleModel {
 public:
  explicit CtrModel(const ModelOptions& o) : net_(o) {}
  Module& module() override { return net_; }
  TaskKind task() const override { return TaskKind::kClickThrough; }
  StatusOr<Variable> Forward(const Tensor& inputs) override { return net_.Forward(inputs); }
  EmbeddingTower Parts() { return net_.Parts(); }
  SparseIds SparseInputs(const Tensor& ids) const override {
    std::vector<int64_t> unique(ids.i64(), ids.i64() + ids.numel());
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    return {{"emb.table", std::move(unique)}};
  }

 private:
  CtrNet net_;
};

}  // namespace

StatusOr<Variable> ExampleModel::Loss(const Variable& logits, const Tensor& labels) const {
  if (task() == TaskKind::kClassification) return SoftmaxCrossEntropy(logits, labels);
  return SigmoidBinaryCrossEntropy(logits, labels);
}

const Registry<ModelFactory>& ExampleModels() {
  // Built on first use by explicit registrations; never destroyed (used until exit).
  static const Registry<ModelFactory>* const models = [] {
    auto* r = new Registry<ModelFactory>("model");
    auto must = [](Status s) {
      if (!s.ok()) std::abort();  // two example models of one name: a programming error
    };
    must(r->Register(
        "mlp", [](const ModelOptions&) { return std::make_unique<SequentialModel>(MakeMlp()); },
        "784-256-10 perceptron, Fashion-MNIST"));
    must(r->Register(
        "cnn", [](const ModelOptions& o) { return std::make_unique<SequentialModel>(MakeCnn(o.seed)); },
        "two conv layers, Fashion-MNIST"));
    must(r->Register(
        "ctr", [](const ModelOptions& o) { return std::make_unique<CtrModel>(o); },
        "embedding table + MLP, click logs"));
    return r;
  }();
  return *models;
}

StatusOr<std::unique_ptr<ExampleModel>> MakeExampleModel(const std::string& name,
                                                         const ModelOptions& options) {
  PL_ASSIGN_OR_RETURN(const ModelFactory* make, ExampleModels().Find(name));
  std::unique_ptr<ExampleModel> model = (*make)(options);
  model->module().InitParameters(options.seed);
  return model;
}

Sequential* AsSequential(ExampleModel& model) {
  auto* s = dynamic_cast<SequentialModel*>(&model);
  return s ? s->sequential() : nullptr;
}

std::optional<EmbeddingTower> AsEmbeddingTower(ExampleModel& model) {
  auto* ctr = dynamic_cast<CtrModel*>(&model);
  if (ctr == nullptr) return std::nullopt;
  return ctr->Parts();
}

}  // namespace pl
