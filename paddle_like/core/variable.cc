#include "paddle_like/core/variable.h"

#include <unordered_set>

#include "paddle_like/core/grad_mode.h"

namespace pl {
namespace {
thread_local bool g_grad_enabled = true;  // see grad_mode.h
}  // namespace

bool GradEnabled() { return g_grad_enabled; }

bool SetGradEnabled(bool enabled) {
  const bool previous = g_grad_enabled;
  g_grad_enabled = enabled;
  return previous;
}

NoGradScope::NoGradScope() : previous_(SetGradEnabled(false)) {}  // previous_: was it enabled
NoGradScope::~NoGradScope() { SetGradEnabled(previous_); }

Variable::Variable(Tensor value, bool requires_grad)
    : node_(std::make_shared<VariableNode>()) {
  node_->value = std::move(value);
  node_->requires_grad = requires_grad;
}

Variable Variable::FromOp(Tensor value, std::vector<Variable> inputs,
                          std::function<void(const Tensor&)> backward) {
  Variable out(std::move(value), false);
  if (!g_grad_enabled) return out;
  for (const Variable& in : inputs) {
    if (in.requires_grad()) out.node_->requires_grad = true;
  }
  if (out.node_->requires_grad) {
    out.node_->inputs = std::move(inputs);
    out.node_->backward = std::move(backward);
  }
  return out;
}

void Variable::AccumulateGrad(const Tensor& g) const {
  if (!node_->grad.defined()) {
    node_->grad = g.Clone();
  } else {
    node_->grad.flat() += g.flat();
  }
}

const Tensor& Variable::MutableGrad() const {
  if (!node_->grad.defined()) {
    node_->grad = Tensor::Zeros(node_->value.shape());
  }
  return node_->grad;
}

void Variable::ZeroGrad() const {
  if (node_->grad.defined()) node_->grad.SetZero();
}

void Variable::Detach() const {
  node_->inputs.clear();
  node_->backward = nullptr;
}

Status Variable::Backward(const Tensor& seed) const {
  if (!node_) return absl::FailedPreconditionError("Backward: undefined Variable");
  if (!node_->requires_grad) {
    return absl::FailedPreconditionError(
        "Backward: this Variable does not depend on anything that requires a gradient (was it "
        "computed while grad recording was off: NoGradScope, Python's no_grad()?)");
  }
  Tensor start = seed;
  if (!start.defined()) {
    if (node_->value.numel() != 1) {
      return absl::InvalidArgumentError("Backward: needs a seed gradient for a non-scalar of shape " +
                                        node_->value.ShapeString());
    }
    start = Tensor::Filled(node_->value.shape(), 1.0f);
  } else if (start.shape() != node_->value.shape()) {
    return absl::InvalidArgumentError("Backward: seed shape " + start.ShapeString() +
                                      " differs from value shape " + node_->value.ShapeString());
  }
  // Iterative post-order DFS gives a topological order without deep recursion.
  std::vector<VariableNode*> order;
  std::unordered_set<VariableNode*> visited;
  std::vector<std::pair<VariableNode*, size_t>> stack{{node_.get(), 0}};
  visited.insert(node_.get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      VariableNode* child = node->inputs[next++].node();
      if (child->requires_grad && visited.insert(child).second) stack.push_back({child, 0});
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  // Interior gradients are transient: clear them so a second Backward is correct.
  for (VariableNode* n : order) {
    if (n->backward) n->grad = Tensor();
  }
  AccumulateGrad(start);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    VariableNode* n = *it;
    if (n->backward && n->grad.defined()) n->backward(n->grad);
  }
  return absl::OkStatus();
}

}  // namespace pl
