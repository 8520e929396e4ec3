// The built-in example models of pl-trainer, also a showcase of the model API:
//   mlp: Flatten, 784-512-256-10 with ReLU                  (Fashion-MNIST)
//   cnn: the TensorFlow tutorial network                     (Fashion-MNIST)
//        conv5x5x32 same, ReLU, maxpool2, conv5x5x64 same, ReLU, maxpool2,
//        fc1024, ReLU, dropout 0.4, fc10
//   ctr: one embedding table over all sparse fields + an MLP (synthetic click log)
// mlp and cnn are Sequentials with named layers; ctr is a Module with a custom
// forward over named sub-layers.
//
// Thread-safety: a model is used by one thread at a time.
#ifndef PADDLE_LIKE_TRAINER_MODELS_H_
#define PADDLE_LIKE_TRAINER_MODELS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/client/sparse_ids.h"
#include "paddle_like/core/registry.h"
#include "paddle_like/nn/nn.h"

namespace pl {

enum class TaskKind { kClassification, kClickThrough };

struct ModelOptions {
  uint64_t seed = 1;
  int64_t ctr_fields = 8;       // sparse ids per sample
  int64_t ctr_embedding_dim = 8;
  int64_t ctr_num_rows = 0;     // id bound of the embedding table (0: unbounded)
  int64_t ctr_admit_after = 0;  // the embedding table's admission on the pservers (TablePolicy)
  int64_t ctr_evict_after_s = 0;  // its rows' time to live there (TablePolicy)
};

// A model plus what the training loop needs to know about it.
class ExampleModel {
 public:
  virtual ~ExampleModel() = default;
  virtual Module& module() = 0;
  virtual TaskKind task() const = 0;
  // inputs: float images (B, 1, 28, 28) or int64 ids (B, F). Returns logits:
  // (B, 10) for classification, (B, 1) for click-through.
  virtual StatusOr<Variable> Forward(const Tensor& inputs) = 0;
  // The mean loss of `logits` against labels: int64 (B) classes or float (B) clicks.
  StatusOr<Variable> Loss(const Variable& logits, const Tensor& labels) const;
  // The distinct sparse-table rows `inputs` touch, so a distributed trainer pulls
  // only those. Dense-only models touch none.
  virtual SparseIds SparseInputs(const Tensor& inputs) const { return {}; }
};

// Makes a model (parameters not yet drawn) from its options.
using ModelFactory = std::function<std::unique_ptr<ExampleModel>(const ModelOptions&)>;

// The built-in models: "mlp", "cnn", "ctr". A new one is a class and one Register call
// in models.cc.
const Registry<ModelFactory>& ExampleModels();

// ExampleModels()'s `name`, parameters drawn from options.seed; NOT_FOUND naming the
// known models otherwise.
StatusOr<std::unique_ptr<ExampleModel>> MakeExampleModel(const std::string& name,
                                                         const ModelOptions& options);

// The Sequential behind mlp/cnn (for the GPU runner); nullptr for ctr.
Sequential* AsSequential(ExampleModel& model);

// A click model's parts, for the GPU runner: ids (B, F) -> `embedding` -> flattened
// (B, F * D) -> `tower`, a Sequential sharing its layers (and so their parameters) with
// the model. The embedding's rows stay in its table; the tower runs on the device.
struct EmbeddingTower {
  Embedding* embedding = nullptr;
  Sequential* tower = nullptr;
  int64_t fields = 0;
};
// ctr's parts; nullopt for the other models.
std::optional<EmbeddingTower> AsEmbeddingTower(ExampleModel& model);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_MODELS_H_
