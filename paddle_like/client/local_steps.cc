#include "paddle_like/client/local_steps.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/parallel_for.h"

namespace pl {

constexpr int64_t kPiece = 1 << 16;  // floats

Status ValidateLocalSteps(int k, const KeyStore& keys, bool pipelined) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("--local_steps must be >= 1, got ", k));
  if (k == 1) return absl::OkStatus();
  for (const NamedParameter& np : keys.keys()) {
    if (np.param->kind != ParamKind::kDense) {
      return absl::InvalidArgumentError(absl::StrCat("--local_steps ", k, " needs a model of dense parameters only; '",
                                                     np.name, "' is a sparse table (its rows change with each batch)"));
    }
  }
  if (pipelined) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local_steps ", k, " cannot be combined with --pipeline (a round's change is pushed after its K-th step)"));
  }
  return absl::OkStatus();
}

LocalSteps::LocalSteps(ParameterClient* client, int k, bool overlap)
    : client_(client), k_(k < 1 ? 1 : k), overlap_(overlap) {}

namespace {
// fn(from, to) over [0, n) in pieces of a block, on several threads: a round's passes
// over a large model are memory-bound.
void OverPieces(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t pieces = (n + kPiece - 1) / kPiece;
  ParallelFor(pieces, ThreadsForDense(n), [&](int64_t p) { fn(p * kPiece, std::min(n, (p + 1) * kPiece)); });
}
}  // namespace

void LocalSteps::KeepBase() {
  size_t i = 0;
  for (const NamedParameter& np : client_->keys().keys()) {
    if (np.param->kind != ParamKind::kDense) continue;
    const Tensor& value = np.param->var.value();
    if (i == base_.size()) {  // kept from round to round
      base_.push_back(Tensor::Zeros(value.shape()));
      base_index_[np.param] = i;
    }
    const float* v = value.f32();
    float* b = base_[i++].f32();
    OverPieces(value.numel(), [&](int64_t from, int64_t to) { std::memcpy(b + from, v + from, (to - from) * 4); });
  }
}

float* LocalSteps::BaseOf(Parameter* param) {
  auto it = base_index_.find(param);
  return it == base_index_.end() ? nullptr : base_[it->second].f32();
}

void LocalSteps::ChangeIntoGradients() {
  size_t i = 0;
  for (const NamedParameter& np : client_->keys().keys()) {
    if (np.param->kind != ParamKind::kDense) continue;
    // The gradient tensor carries the change: the push sends it as it sends gradients.
    const Tensor& grad = np.param->var.MutableGrad();
    const float* v = np.param->var.value().f32();
    const float* b = base_[i++].f32();
    float* g = grad.f32();
    const float scale = merge_scale_;
    OverPieces(grad.numel(), [&](int64_t from, int64_t to) {
      if (scale == 1.0f) {
        for (int64_t j = from; j < to; ++j) g[j] = v[j] - b[j];
      } else {
        for (int64_t j = from; j < to; ++j) g[j] = (v[j] - b[j]) * scale;
      }
    });
  }
}

Status LocalSteps::Start() {
  PL_RETURN_IF_ERROR(client_->Pull(SparseIds()));
  KeepBase();
  taken_ = 0;
  samples_ = 0;
  return absl::OkStatus();
}

StatusOr<bool> LocalSteps::EndStep(int64_t num_samples) {
  ++taken_;
  samples_ += num_samples;
  if (taken_ < k_) return false;
  PL_RETURN_IF_ERROR(EndRound());
  return true;
}

StatusOr<bool> LocalSteps::Finish() {
  if (taken_ == 0 && !client_->exchange_in_flight()) return false;
  if (overlap_) {
    // The last round waits for its push and pull: the task ends with everything pushed.
    // Nothing is computed after it, so its pull simply becomes the parameters.
    if (taken_ > 0) PL_RETURN_IF_ERROR(EndOverlappedRound());
    if (client_->exchange_in_flight()) PL_RETURN_IF_ERROR(client_->FinishExchange());
    KeepBase();
    return true;
  }
  PL_RETURN_IF_ERROR(EndRound());
  return true;
}

Status LocalSteps::EndRound() {
  if (base_.empty()) return absl::FailedPreconditionError("LocalSteps: a round ended before Start pulled its base");
  if (overlap_) return EndOverlappedRound();
  ChangeIntoGradients();
  PL_RETURN_IF_ERROR(client_->PushChangesThenPull(samples_));
  ++rounds_;
  taken_ = 0;
  samples_ = 0;
  KeepBase();
  return absl::OkStatus();
}

Status LocalSteps::EndOverlappedRound() {
  ChangeIntoGradients();
  if (client_->exchange_in_flight()) {
    // parameters = pulled + change; the base follows them (the next round's change is
    // measured from here, so what the pull brought is never pushed back).
    PL_RETURN_IF_ERROR(client_->FinishExchange([this](Parameter* p, int64_t offset, const FloatPieces& pulled) {
      float* v = p->var.value().f32() + offset;
      const float* g = p->var.grad().f32() + offset;
      float* b = BaseOf(p) + offset;
      pulled.ForEachChunk([&](int64_t at, const float* x, int64_t n) {
        for (int64_t j = at; j < at + n; ++j) {
          v[j] = x[j - at] + g[j];
          b[j] = v[j];
        }
      });
    }));
  } else {
    KeepBase();
  }
  PL_RETURN_IF_ERROR(client_->StartChangesExchange(samples_));
  ++rounds_;
  taken_ = 0;
  samples_ = 0;
  return absl::OkStatus();
}

}  // namespace pl
