#include "paddle_like/client/dense_channel_attach.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/link_dense_channel.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/dense_link_dial.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {
namespace {

Status CallAttach(proto::ParameterServer::Stub& stub, const ChannelOffer& offer, const proto::AttachRequest& request,
                  proto::AttachResponse* response) {
  if (offer.attach_call) return offer.attach_call(request, response);
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(offer.call_timeout)));
  return rpc::FromGrpc(stub.Attach(ctx.get(), request, response));
}

// The request's common part: who offers a region of how many bytes.
proto::AttachRequest RequestFor(const ChannelOffer& offer, const SharedRegion& region) {
  proto::AttachRequest request;
  request.set_trainer_id(offer.trainer_id);
  request.set_client_id(offer.client_id);
  request.set_shm_bytes(static_cast<int64_t>(region.total_bytes()));
  request.set_replica_stream(offer.replica_stream);
  return request;
}

}  // namespace

ChannelAttach AttachSharedMemory(proto::ParameterServer::Stub& stub, const ChannelOffer& offer) {
  ChannelAttach out;
  StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::Create(static_cast<size_t>(2 * offer.area_bytes));
  if (!region.ok()) {
    out.refusal = std::string(region.status().message());
    return out;
  }
  proto::AttachRequest request = RequestFor(offer, **region);
  request.set_shm_name((*region)->name());
  request.set_nonce((*region)->nonce());
  request.set_stream_doorbell(offer.replica_stream && offer.doorbell);
  proto::AttachResponse response;
  const Status attached = CallAttach(stub, offer, request, &response);
  (*region)->Unlink();  // both sides map it now (or never will): the name has done its job
  if (!attached.ok()) {
    // Unreachable now: offer it again with the next call. Anything else is an answer.
    if (!rpc::IsRetryable(attached)) out.refusal = std::string(attached.message());
    return out;
  }
  if ((*region)->answer() != response.region()) {
    out.refusal = "the pserver's answer did not appear in the shared memory";
    return out;
  }
  auto channel = std::make_unique<ShmDenseChannel>(offer.slots, *std::move(region), response.region());
  if (offer.replica_stream) {
    channel->SetStreamAbilities({response.stream_batches(), response.link_bf16()});
    if (response.stream_doorbell()) {
      StatusOr<std::unique_ptr<DoorbellCaller>> doorbell = DoorbellCaller::Connect(channel->region());
      if (doorbell.ok()) {
        channel->RingThrough(*std::move(doorbell), offer.call_timeout, offer.cancel);
      } else {
        log::Info(absl::StrCat("pserver ", offer.index, " (", offer.address, "): no doorbell (",
                               doorbell.status().message(), "); the stream's calls go over gRPC"));
      }
    }
  }
  out.channel = std::move(channel);
  return out;
}

ChannelAttach AttachLink(proto::ParameterServer::Stub& stub, const ChannelOffer& offer) {
  ChannelAttach out;
  StatusOr<std::shared_ptr<SharedRegion>> region =
      SharedRegion::CreatePrivate(static_cast<size_t>(2 * offer.area_bytes));
  if (!region.ok()) {
    out.refusal = std::string(region.status().message());
    return out;
  }
  proto::AttachRequest request = RequestFor(offer, **region);
  request.set_link_lanes(offer.link_lanes);
  proto::AttachResponse response;
  const Status attached = CallAttach(stub, offer, request, &response);
  if (!attached.ok()) {
    // Unreachable now: asked again with the next call. Anything else is an answer, but
    // a full pserver may have room later.
    if (!rpc::IsRetryable(attached)) out.refusal = std::string(attached.message());
    out.room = absl::IsResourceExhausted(attached);
    return out;
  }
  const bool bf16 = offer.wire == WireDtype::kBfloat16;
  if (bf16 && !response.link_bf16()) {
    // An older pserver reads only float32 from a link: bfloat16 goes over gRPC, as before.
    out.refusal = "the pserver takes no bfloat16 over a dense link (an older build)";
    return out;
  }
  StatusOr<std::unique_ptr<DenseLink>> link =
      DialDenseLink(offer.address, response, offer.link_lanes, rpc::PserverIdentity(offer.index), *region, offer.cancel);
  if (!link.ok()) {
    out.refusal = absl::StrCat("no dense link: ", link.status().message());
    log::Warning(absl::StrCat("pserver ", offer.index, " (", offer.address, "): ", out.refusal,
                              "; its dense blocks go over gRPC"));
    return out;
  }
  out.channel = std::make_unique<LinkDenseChannel>(offer.slots, *std::move(region), response.region(),
                                                   *std::move(link), bf16, offer.residuals, offer.call_timeout);
  if (offer.replica_stream) out.channel->SetStreamAbilities({response.stream_batches(), response.link_bf16()});
  return out;
}

}  // namespace pl
