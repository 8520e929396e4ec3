#include "paddle_like/client/pipelined_exchange.h"

namespace pl {

PipelinedExchange::PipelinedExchange(ParameterClient* client) : client_(client) {}

PipelinedExchange::~PipelinedExchange() { (void)Drain(); }

bool PipelinedExchange::Supports(Module& model) {
  for (const NamedParameter& np : model.NamedParameters()) {
    if (np.param->kind != ParamKind::kDense) return false;
  }
  return true;
}

Status PipelinedExchange::PullNow() { return client_->Pull({}); }  // finishes one in flight first

Status PipelinedExchange::Drain() {
  if (!client_->exchange_in_flight()) return absl::OkStatus();
  return client_->FinishExchange();
}

Status PipelinedExchange::Submit(int64_t num_samples) {
  PL_RETURN_IF_ERROR(Drain());
  return client_->StartExchange(num_samples);
}

}  // namespace pl
