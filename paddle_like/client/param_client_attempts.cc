// ParameterClient's attempts (see param_client.h): one push or pull to one pserver over
// its channel (dense_channel.h), what happens when a region channel fails (the call
// goes again over gRPC), ExchangeShard, which runs a step's push and pull to one pserver
// one after the other or at once, and offering pservers region channels.
#include <algorithm>
#include <future>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/dense_channel_attach.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/param_client_shard.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"

namespace pl {

std::function<Status(ParameterClient::Shard&)> ParameterClient::PullAttempt(PullFrame* response, bool fall_back) {
  return [this, response, fall_back](Shard& s) {
    const PrimaryWatch::Call ctx = WatchedCall(s);
    Status st = s.channel().Pull(*s.frames, ctx.get(), s.pull, response);
    // The pserver forgot the region, or the link failed: gRPC until offered again.
    if (absl::IsAborted(st) && fall_back && s.region) DropRegion(s, st);
    return st;
  };
}

std::function<Status(ParameterClient::Shard&)> ParameterClient::PushAttempt(proto::PushResponse* response,
                                                                            PullFrame* values, bool fall_back) {
  return [this, response, values, fall_back](Shard& s) {
    const PrimaryWatch::Call ctx = WatchedCall(s);
    DenseChannel& channel = *s.pushing;
    const bool bring_values = s.one_call && values != nullptr && channel.push_brings_values();
    Status st = channel.Push(*s.frames, ctx.get(), s.push, bring_values, response, values);
    if (st.ok()) s.values_came = bring_values;
    // The pserver forgot the region or the link failed: the gradients go again over
    // gRPC (a push that was applied is known by its number and not applied twice).
    if (absl::IsAborted(st) && fall_back && channel.has_region()) DropRegion(s, st);
    // The push was built on the parameters of version `step`; the shard answers with
    // its version after applying it, so the difference less this push is what others
    // applied in between (a deferred push answers before it applies: a lower bound).
    if (st.ok()) s.staleness = std::max<int64_t>(0, response->version() - s.push.header().step() - 1);
    return st;
  };
}

void ParameterClient::DropRegion(Shard& s, const Status& why) {
  if (!s.region) return;
  if (absl::IsAborted(why) && s.region->duplex()) {
    log::Warning(absl::StrCat("pserver ", s.index, " (", s.address, "): the dense link failed (", why.message(),
                              "); this step goes over gRPC, a new link is asked for with the next"));
  }
  // A push prepared in the region: its gradients as a gRPC frame, sent as they are.
  if (s.pushing == s.region.get()) {
    s.region->TakePushForGrpc(s.push);
    s.pushing = &s.grpc;
  }
  s.region.reset();  // offered again on the next call (a frame keeps the memory it names)
}

PrimaryWatch::Call ParameterClient::WatchedCall(const Shard& s) const {
  return PrimaryWatch::Call(watch_.get(), s.index, s.address, options_.call_timeout);
}

Status ParameterClient::ExchangeShard(int i, bool overlap, proto::PushResponse* pushed, PullFrame* pulled) {
  Shard& s = *shards_[i];
  // A duplex channel carries both directions at once: its push and pull overlap, and a
  // failure of either is handled once both are back. A push that brings the values back
  // is the whole exchange.
  const bool at_once = overlap && s.pushing->duplex() && !s.one_call;
  if (!at_once) {
    // Push, then pull parameters that include it: in one call where the pserver writes
    // the new values back into the region, else in two.
    PL_RETURN_IF_ERROR(CallWithRetry(i, PushAttempt(pushed, pulled), "push"));
    if (s.values_came) {
      pulled->header().set_version(pushed->version());
      return absl::OkStatus();
    }
    return CallWithRetry(i, PullAttempt(pulled), "pull");
  }
  // One attempt of each at the same time (TCP carries both directions at once); a
  // failed one is then retried on its own, so retries never race on a shard.
  if (!s.push_thread) s.push_thread = std::make_unique<TaskThread>();
  const bool region = s.pushing->has_region();
  std::future<Status> push = s.push_thread->Run([&] { return PushAttempt(pushed, nullptr, !region)(s); });
  Status pull_status = PullAttempt(pulled, !region)(s);
  Status push_status = push.get();
  if (region && (absl::IsAborted(push_status) || absl::IsAborted(pull_status))) {
    DropRegion(s, absl::IsAborted(push_status) ? push_status : pull_status);
  }
  if (rpc::IsRetryable(push_status) || rpc::IsRetryable(pull_status)) {
    // Both attempts went to the address the shard had: a pserver that died may be back
    // elsewhere, so the retries start from the master's current address, not the old one.
    std::lock_guard<std::mutex> lock(resolve_mu_);
    (void)Resolve(i);  // a failed lookup is retried with the calls
  }
  if (!push_status.ok()) PL_RETURN_IF_ERROR(CallWithRetry(i, PushAttempt(pushed, nullptr), "push"));
  if (!pull_status.ok()) PL_RETURN_IF_ERROR(CallWithRetry(i, PullAttempt(pulled), "pull"));
  return absl::OkStatus();
}

void ParameterClient::TryAttach(Shard& s) {
  if (s.region || !s.stub) return;
  if (s.slots.empty()) {
    s.shm_refusal = "no dense blocks";
    return;
  }
  ChannelOffer offer;
  offer.index = s.index;
  offer.address = s.address;
  offer.trainer_id = trainer_id_;
  offer.client_id = client_id_;
  offer.slots = s.slots;
  offer.area_bytes = s.slot_bytes;
  offer.call_timeout = options_.call_timeout;
  offer.wire = options_.wire_dtype;
  offer.residuals = &residuals_;
  ChannelAttach attached;
  if (options_.shared_memory && s.shm_refusal.empty()) {
    attached = AttachSharedMemory(*s.stub, offer);
    s.shm_refusal = attached.refusal;
    if (!attached.channel && s.shm_refusal.empty()) return;  // offered again next call
  }
  if (!attached.channel) {
    if (!s.link_refusal.empty() && absl::Now() >= s.link_retry_at) {
      s.link_refusal.clear();
      s.link_retry_at = absl::InfiniteFuture();
    }
    if (options_.dense_link_lanes == 0 || !s.link_refusal.empty()) return;
    offer.link_lanes = options_.dense_link_lanes > 0 ? std::min(options_.dense_link_lanes, kMaxDenseLinkLanes)
                                                     : DefaultDenseLinkLanes(rpc::TransportIsSecure());
    attached = AttachLink(*s.stub, offer);
    s.link_refusal = attached.refusal;
    if (attached.room) s.link_retry_at = absl::Now() + options_.link_retry_after;
    if (!attached.channel) return;
  }
  s.region = std::move(attached.channel);
  ++shm_attaches_;
  // A bfloat16 region cannot hold the tensors: they stay where they are.
  if (options_.bind_parameters_to_shared_memory && s.region->WireBytes(1) == 4) {
    bound_parameters_ += s.region->BindParameters(*keys_);
  }
}

std::vector<std::string> ParameterClient::Transports() const {
  std::vector<std::string> out;
  for (const auto& sh : shards_) {
    if (sh->region) {
      out.push_back(sh->region->Describe());
      continue;
    }
    std::string why = sh->shm_refusal;
    if (!sh->link_refusal.empty()) why = absl::StrCat(why.empty() ? "" : why + "; ", sh->link_refusal);
    out.push_back(absl::StrCat(sh->grpc.Describe(), why.empty() ? "" : " (" + why + ")"));
  }
  return out;
}

}  // namespace pl
