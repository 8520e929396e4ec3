#include "trainer/pipelined_exchange.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pl {

PipelinedExchange::PipelinedExchange(Module* model, Module* mirror, ParameterClient* client)
    : model_(model), mirror_(mirror), client_(client) {}

PipelinedExchange::~PipelinedExchange() {
  if (in_flight_.valid()) (void)in_flight_.get();
}

bool PipelinedExchange::Supports(Module& model) {
  for (const NamedParameter& np : model.NamedParameters()) {
    if (np.param->kind != ParamKind::kDense) return false;
  }
  return true;
}

Status PipelinedExchange::CopyParameters(Module& from, Module& to, bool gradients) {
  std::vector<NamedParameter> src = from.NamedParameters(), dst = to.NamedParameters();
  if (src.size() != dst.size()) {
    return absl::InternalError(absl::StrCat("pipelined exchange: the mirror has ", dst.size(), " parameters, the model ",
                                            src.size()));
  }
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i].name != dst[i].name || src[i].param->kind != ParamKind::kDense ||
        dst[i].param->kind != ParamKind::kDense) {
      return absl::InternalError(absl::StrCat("pipelined exchange: parameter ", i, " is '", src[i].name,
                                              "' in one model and '", dst[i].name, "' in the other"));
    }
    const Variable& s = src[i].param->var;
    const Variable& d = dst[i].param->var;
    if (gradients) {
      if (s.grad().defined()) {
        PL_RETURN_IF_ERROR(d.MutableGrad().CopyFrom(s.grad()));
        s.grad().SetZero();
      } else if (d.grad().defined()) {
        d.grad().SetZero();
      }
    } else {
      PL_RETURN_IF_ERROR(d.value().CopyFrom(s.value()));
    }
  }
  return absl::OkStatus();
}

Status PipelinedExchange::PullNow() {
  PL_RETURN_IF_ERROR(Drain());
  PL_RETURN_IF_ERROR(client_->Pull({}));
  return CopyParameters(*mirror_, *model_, /*gradients=*/false);
}

Status PipelinedExchange::Drain() {
  if (!in_flight_.valid()) return absl::OkStatus();
  PL_RETURN_IF_ERROR(in_flight_.get());
  return CopyParameters(*mirror_, *model_, /*gradients=*/false);
}

Status PipelinedExchange::Submit(int64_t num_samples) {
  PL_RETURN_IF_ERROR(Drain());
  PL_RETURN_IF_ERROR(CopyParameters(*model_, *mirror_, /*gradients=*/true));
  ParameterClient* client = client_;
  // Push, then pull: the parameters pulled include this push (with the client's
  // defer_apply off), so a step's gradient misses only the previous step's update.
  in_flight_ = std::async(std::launch::async, [client, num_samples] {
    return client->PushThenPull(num_samples, {});
  });
  return absl::OkStatus();
}

}  // namespace pl
