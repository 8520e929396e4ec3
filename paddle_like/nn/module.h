// Module: the unit models are built from. A module owns parameters and named child
// modules; NamedParameters() lists every parameter under a stable dotted name
// ("conv1.w") which parameter servers shard by, marked dense or sparse. Buffers are
// the rest of a module's state, tensors that are not trained (BatchNorm's running
// statistics): saved and loaded with the parameters (module_file.h), but never given
// to an optimizer or a parameter server.
// Layer is a module with one input and one output, which is what Sequential chains;
// a custom model derives from Module, registers its sub-layers by name and writes
// its own forward over them (see trainer/models.cc for examples).
//
// Thread-safety: a module is used by one thread at a time.
#ifndef PADDLE_LIKE_NN_MODULE_H_
#define PADDLE_LIKE_NN_MODULE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/core/variable.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/nn/sparse_table.h"

namespace pl {

enum class ParamKind : uint8_t { kDense = 0, kSparse = 1 };

// One parameter. Dense: `var` holds value and gradient. Sparse: `table` holds the
// rows and the sparse gradient.
struct Parameter {
  ParamKind kind = ParamKind::kDense;
  Variable var;                          // dense only
  std::shared_ptr<SparseTable> table;    // sparse only
  InitSpec init;
};

// A parameter with its full dotted name, as NamedParameters() returns it.
struct NamedParameter {
  std::string name;
  Parameter* param;
};

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // Every parameter of this module and its descendants, in registration order.
  std::vector<NamedParameter> NamedParameters();
  // Returns the parameter named `name` (dotted), or NOT_FOUND naming the known ones.
  StatusOr<Parameter*> FindParameter(const std::string& name);
  int64_t NumParameterElements();  // dense elements plus held sparse rows x dim

  // Re-draws every parameter deterministically from (seed, name); sparse tables
  // drop their rows, which are re-created on first touch from the same rule.
  void InitParameters(uint64_t seed);
  void ZeroGrad();
  // Training mode (dropout active) or evaluation mode; applies to all descendants.
  void Train(bool on);
  bool training() const { return training_; }

  // Registers a buffer holding `initial` (its storage is shared, not copied) and
  // returns the module's Tensor for it, whose address stays valid for the module's
  // life. Loading a module file copies into that storage, so views of it stay current.
  Tensor& RegisterBuffer(const std::string& name, Tensor initial);
  // Every buffer of this module and its descendants under dotted names ("bn1.running_mean"),
  // in registration order; each Tensor shares the buffer's storage.
  std::vector<std::pair<std::string, Tensor>> NamedBuffers();

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

 protected:
  // Registers a dense parameter of `shape`; returns its Variable (value + grad).
  Variable RegisterDense(const std::string& name, Shape shape, InitSpec init);
  std::shared_ptr<SparseTable> RegisterSparse(const std::string& name, int64_t dim,
                                              int64_t num_rows, InitSpec init);
  template <typename M>
  std::shared_ptr<M> RegisterModule(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }
  // A hook for modules that keep per-mode state (none do by default).
  virtual void OnTrainChanged() {}

 private:
  void CollectParameters(const std::string& prefix, std::vector<NamedParameter>* out);
  void CollectBuffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>* out);

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, std::unique_ptr<Parameter>>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// A module with a single input and a single output.
class Layer : public Module {
 public:
  using Module::Module;
  // Errors name the layer (its type and, inside a Sequential, its name) and the shapes.
  virtual StatusOr<Variable> Forward(const Variable& x) = 0;
};

// Runs its layers in order. Names default to "0", "1", ...; Add("conv1", ...) gives
// the layer's parameters names like "conv1.w".
class Sequential : public Layer {
 public:
  Sequential() : Layer("Sequential") {}
  Sequential& Add(std::shared_ptr<Layer> layer);
  Sequential& Add(const std::string& name, std::shared_ptr<Layer> layer);
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<Layer>& layer(size_t i) const { return layers_[i].second; }
  StatusOr<Variable> Forward(const Variable& x) override;

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Layer>>> layers_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_NN_MODULE_H_
