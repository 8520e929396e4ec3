// ParameterClient's dense links (see param_client.h): asking a pserver on another host
// for one, opening its lanes, and what the calls through it send and await.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/param_client_shard.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/dense_link_dial.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"

namespace pl {

void ParameterClient::AttachLink(Shard& s) {
  const int lanes = options_.dense_link_lanes > 0 ? std::min(options_.dense_link_lanes, kMaxDenseLinkLanes)
                                                  : DefaultDenseLinkLanes(rpc::TransportIsSecure());
  StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::CreatePrivate(static_cast<size_t>(2 * s.slot_bytes));
  if (!region.ok()) {
    s.link_refusal = std::string(region.status().message());
    return;
  }
  proto::AttachRequest request;
  request.set_trainer_id(trainer_id_);
  request.set_client_id(client_id_);
  request.set_shm_bytes(static_cast<int64_t>((*region)->total_bytes()));
  request.set_link_lanes(lanes);
  proto::AttachResponse response;
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.call_timeout)));
  const Status attached = rpc::FromGrpc(s.stub->Attach(ctx.get(), request, &response));
  if (!attached.ok()) {
    // Unreachable now: asked again with the next call. Anything else is an answer, but
    // a full pserver may have room later.
    if (!rpc::IsRetryable(attached)) s.link_refusal = std::string(attached.message());
    if (absl::IsResourceExhausted(attached)) s.link_retry_at = absl::Now() + options_.link_retry_after;
    return;
  }
  if (options_.wire_dtype == WireDtype::kBfloat16 && !response.link_bf16()) {
    // An older pserver reads only float32 from a link: bfloat16 goes over gRPC, as before.
    s.link_refusal = "the pserver takes no bfloat16 over a dense link (an older build)";
    return;
  }
  StatusOr<std::unique_ptr<DenseLink>> link =
      DialDenseLink(s.address, response, lanes, rpc::PserverIdentity(s.index), *region);
  if (!link.ok()) {
    s.link_refusal = absl::StrCat("no dense link: ", link.status().message());
    log::Warning(absl::StrCat("pserver ", s.index, " (", s.address, "): ", s.link_refusal,
                              "; its dense blocks go over gRPC"));
    return;
  }
  s.link = *std::move(link);
  s.link_seq = 0;
  s.link_bf16 = options_.wire_dtype == WireDtype::kBfloat16;
  s.region = *std::move(region);
  s.region_id = response.region();
  ++shm_attaches_;
  // A bfloat16 region cannot hold the tensors: they stay where they are.
  if (options_.bind_parameters_to_shared_memory && !s.link_bf16) BindParameters(s);
}

void ParameterClient::DropLink(Shard& s, const Status& why) {
  if (s.link) {
    log::Warning(absl::StrCat("pserver ", s.index, " (", s.address, "): the dense link failed (", why.message(),
                              "); this step goes over gRPC, a new link is asked for with the next"));
  }
  s.link.reset();
  s.link_bf16 = false;
  s.region.reset();
}

}  // namespace pl
