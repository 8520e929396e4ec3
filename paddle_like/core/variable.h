// Variable: a tensor in the autograd graph. Ops that take Variables record, on their
// output, the inputs and a backward function; Backward() on a scalar loss walks the
// graph in reverse topological order and accumulates gradients into every Variable
// that requires them. Sparse parameters (embedding tables) receive their gradient
// through the op's backward function directly (see nn/embedding.h), so a Variable's
// own grad is always dense.
//
// Thread-safety: a graph belongs to one thread; independent graphs may be built and
// run in parallel.
#ifndef PADDLE_LIKE_CORE_VARIABLE_H_
#define PADDLE_LIKE_CORE_VARIABLE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "paddle_like/core/tensor.h"

namespace pl {

class Variable;

struct VariableNode {
  Tensor value;
  Tensor grad;  // allocated (zeros) on the first accumulation
  bool requires_grad = false;
  std::vector<Variable> inputs;
  // Given this node's gradient, adds the contribution to each input's gradient.
  std::function<void(const Tensor& grad_out)> backward;
};

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor value, bool requires_grad = false);

  // An op's output: depends on `inputs`, differentiated by `backward`. The result
  // requires a gradient when any input does; otherwise `backward` is dropped.
  static Variable FromOp(Tensor value, std::vector<Variable> inputs,
                         std::function<void(const Tensor& grad_out)> backward);

  bool defined() const { return node_ != nullptr; }
  const Tensor& value() const { return node_->value; }
  const Shape& shape() const { return node_->value.shape(); }
  bool requires_grad() const { return node_ && node_->requires_grad; }
  // The accumulated gradient; undefined until a backward pass reached this Variable.
  const Tensor& grad() const { return node_->grad; }
  // Adds `g` (same shape as value) into grad, allocating it on first use.
  void AccumulateGrad(const Tensor& g) const;
  // Returns grad, allocated as zeros if needed, for ops that write into it in place.
  const Tensor& MutableGrad() const;
  void ZeroGrad() const;

  // Runs back-propagation from this Variable, which must be a scalar (numel 1)
  // unless `seed` (its gradient, same shape) is given.
  Status Backward(const Tensor& seed = Tensor()) const;

  // Drops the graph behind this Variable (inputs and backward) to free activations.
  void Detach() const;

  VariableNode* node() const { return node_.get(); }

 private:
  std::shared_ptr<VariableNode> node_;
};

// While a NoGradScope lives on a thread, ops on that thread record no graph: their
// outputs neither require a gradient nor keep their inputs alive, so a forward pass
// frees each activation as soon as the next layer has consumed it (evaluation,
// inference). Scopes nest; the destructor restores the previous state.
class NoGradScope {
 public:
  NoGradScope();
  ~NoGradScope();
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;

 private:
  bool previous_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CORE_VARIABLE_H_
