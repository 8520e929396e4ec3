// ParameterClient's attempts (see param_client.h): one push or pull to one pserver,
// over gRPC, through a shared-memory region or over a dense link, what each does when
// its region or link fails (the call goes again over gRPC), and ExchangeShard, which
// runs a step's push and pull to one pserver one after the other or at once.
#include <future>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/param_client_shard.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {

std::function<Status(ParameterClient::Shard&)> ParameterClient::PullAttempt(PullFrame* response, bool fall_back) {
  return [this, response, fall_back](Shard& s) {
    const PrimaryWatch::Call ctx = WatchedCall(s);
    if (!s.region || s.pull.dense_size() != static_cast<int>(s.slots.size())) {
      return rpc::FromGrpc(s.frames->Pull(ctx.get(), s.pull, response));
    }
    const std::shared_ptr<SharedRegion> region = s.region;
    s.shm_pull = s.pull;
    s.shm_pull.set_shm_region(s.region_id);
    s.shm_pull.set_bf16(s.link_bf16);  // shared memory on one host takes float32
    for (const Shard::Slot& slot : s.slots) s.shm_pull.add_shm_offsets(slot.value_offset);
    const uint64_t seq = s.link ? ++s.link_seq : 0;
    const bool bf16 = s.link_bf16;  // DropLink clears it
    s.shm_pull.set_link_seq(seq);
    Status st = rpc::FromGrpc(s.frames->Pull(ctx.get(), s.shm_pull, response));
    if (st.ok() && s.link) st = LinkLanded(s.link->WaitFor(seq, absl::Now() + options_.call_timeout));
    // The pserver forgot the region, or the link failed: gRPC until offered again.
    if (absl::IsAborted(st) && fall_back) DropLink(s, st);
    if (st.ok()) AddRegionValues(s, region, bf16, response);
    return st;
  };
}

void ParameterClient::PushOverGrpcFromNowOn(Shard& s, const Status& why) {
  // The pserver forgot the region or the link failed: the gradients go again over
  // gRPC, from the region where they still are (a push that was applied is known by
  // its number and not applied twice).
  // Where this push's gradients are was decided when it was built: the link may be
  // gone already (a new address drops it), the gradients are still in the tensors.
  const bool in_region = s.link_grads_in_region;
  DropLink(s, why);
  if (in_region) {
    PushFromRegion(s);
  } else {
    s.shm_ready = false;  // the push frame still references the gradients
  }
}

PrimaryWatch::Call ParameterClient::WatchedCall(const Shard& s) const {
  return PrimaryWatch::Call(watch_.get(), s.index, s.address, options_.call_timeout);
}

Status ParameterClient::LinkLanded(const Status& link_status) {
  if (link_status.ok()) return link_status;
  return absl::AbortedError(absl::StrCat("dense link: ", link_status.message()));
}

std::function<Status(ParameterClient::Shard&)> ParameterClient::PushAttempt(proto::PushResponse* response,
                                                                            bool fall_back) {
  return [this, response, fall_back](Shard& s) {
    const PrimaryWatch::Call ctx = WatchedCall(s);
    Status st;
    if (!s.shm_ready) {
      st = rpc::FromGrpc(s.frames->Push(ctx.get(), s.push, response));
    } else {
      s.shm_push.header().set_shm_write_back(s.one_call);
      const uint64_t seq = s.link ? ++s.link_seq : 0;
      if (s.link) {
        // The call goes while the gradients travel: the pserver waits for them to land.
        s.shm_push.header().set_link_seq(seq);
        st = LinkLanded(s.link->StartSend(seq, s.link_spans));
      }
      if (st.ok()) {
        st = rpc::FromGrpc(s.frames->Push(ctx.get(), s.shm_push, response));
        if (s.link) {
          // An answered push had its gradients; a link that broke after is found so next.
          const Status sent = s.link->FinishSend();
          if (!st.ok() && !sent.ok()) st = LinkLanded(sent);
        }
      }
      if (st.ok() && s.link && s.one_call) st = LinkLanded(s.link->WaitFor(seq, absl::Now() + options_.call_timeout));
      if (absl::IsAborted(st) && fall_back) PushOverGrpcFromNowOn(s, st);
    }
    // The push was built on the parameters of version `step`; the shard answers with
    // its version after applying it, so the difference less this push is what others
    // applied in between (a deferred push answers before it applies: a lower bound).
    if (st.ok()) s.staleness = std::max<int64_t>(0, response->version() - s.push.header().step() - 1);
    return st;
  };
}

Status ParameterClient::ExchangeShard(int i, bool overlap, proto::PushResponse* pushed, PullFrame* pulled) {
  Shard& s = *shards_[i];
  // A dense link carries both directions at once, as gRPC does: its push and pull
  // overlap, and a failure of either is handled once both are back.
  const bool link_overlap = overlap && s.shm_ready && s.link && !s.one_call;
  if ((s.shm_ready && !link_overlap) || !overlap) {
    // Push, then pull parameters that include it: in one call where the pserver writes
    // the new values back into the region, else in two.
    PL_RETURN_IF_ERROR(CallWithRetry(i, PushAttempt(pushed), "push"));
    if (s.one_call && s.shm_ready) {
      pulled->header().set_version(pushed->version());
      AddRegionValues(s, s.exchange_region, /*bf16=*/false, pulled);
      return absl::OkStatus();
    }
    return CallWithRetry(i, PullAttempt(pulled), "pull");
  }
  // One attempt of each at the same time (TCP carries both directions at once); a
  // failed one is then retried on its own, so retries never race on a shard.
  if (!s.push_thread) s.push_thread = std::make_unique<TaskThread>();
  std::future<Status> push = s.push_thread->Run([&] { return PushAttempt(pushed, !link_overlap)(s); });
  Status pull_status = PullAttempt(pulled, !link_overlap)(s);
  Status push_status = push.get();
  if (link_overlap && (absl::IsAborted(push_status) || absl::IsAborted(pull_status))) {
    const Status& why = absl::IsAborted(push_status) ? push_status : pull_status;
    if (push_status.ok()) {
      DropLink(s, why);
    } else {
      PushOverGrpcFromNowOn(s, why);
    }
  }
  if (rpc::IsRetryable(push_status) || rpc::IsRetryable(pull_status)) {
    // Both attempts went to the address the shard had: a pserver that died may be back
    // elsewhere, so the retries start from the master's current address, not the old one.
    std::lock_guard<std::mutex> lock(resolve_mu_);
    (void)Resolve(i);  // a failed lookup is retried with the calls
  }
  if (!push_status.ok()) PL_RETURN_IF_ERROR(CallWithRetry(i, PushAttempt(pushed), "push"));
  if (!pull_status.ok()) PL_RETURN_IF_ERROR(CallWithRetry(i, PullAttempt(pulled), "pull"));
  return absl::OkStatus();
}

}  // namespace pl
