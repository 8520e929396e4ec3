// ParameterClient's per-pserver state (private to paddle_like/client/param_client*.cc).
#ifndef PADDLE_LIKE_CLIENT_PARAM_CLIENT_SHARD_H_
#define PADDLE_LIKE_CLIENT_PARAM_CLIENT_SHARD_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "paddle_like/dist/dense_link.h"
#include "paddle_like/dist/shared_region.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/task_thread.h"

namespace pl {

struct ParameterClient::Shard {
  // A dense block this pserver owns and its two places in the shared-memory region:
  // the gradients a push sends, and the values a pull (or a push's write-back) brings.
  struct Slot {
    std::string param;
    int32_t block = 0;
    int64_t n = 0;
    int64_t grad_offset = 0;   // bytes into the region's payload
    int64_t value_offset = 0;
  };
  int index = 0;
  std::string address;
  std::unique_ptr<proto::ParameterServer::Stub> stub;  // Init, Attach
  std::unique_ptr<PserverFrameStub> frames;             // Push, Pull
  int64_t version = 0;        // last version seen
  int64_t pushes = 0;         // numbered pushes sent (PushRequest.push_id): a retry keeps its number
  int64_t wait_version = 0;   // sync: the version the next pull must see
  int64_t staleness = 0;      // async: the last push's (see ParameterClient::last_staleness)
  proto::PullRequest pull;    // per-step requests, reused to avoid reallocations
  PushFrame push;
  // Shared memory: the dense blocks in request order, the region once attached, or
  // why the pserver refused it (then it is not offered again until the address changes).
  std::vector<Slot> slots;
  int64_t slot_bytes = 0;     // one area's size (gradients, then values)
  std::shared_ptr<SharedRegion> region;
  uint64_t region_id = 0;
  std::string shm_refusal;
  // A pserver on another host: the region is this process's own memory, mirrored over
  // a dense link (paddle_like/dist/dense_link.h) whose sends are numbered link_seq; or
  // why the link could not be had (not tried again until the address changes, or until
  // link_retry_at when the pserver had no room).
  std::unique_ptr<DenseLink> link;
  // --wire_dtype bfloat16 over the link (its pserver said link_bf16): the region's
  // slots hold bfloat16 values, 2 bytes each, and no parameter is bound to them.
  bool link_bf16 = false;
  std::atomic<uint64_t> link_seq{0};  // a push and a pull may run at once
  // This exchange's gradients as the link sends them: from the region, or straight
  // from the tensors the push frame references (then not in the region at all).
  std::vector<DenseLink::Range> link_spans;
  bool link_grads_in_region = true;
  bool link_grads_bf16 = false;  // and they are bfloat16 there (link_bf16 when built)
  std::string link_refusal;
  absl::Time link_retry_at = absl::InfiniteFuture();
  // This exchange: its gradients were copied into the region and shm_push names them;
  // one_call: the push also brings the new values back (no separate pull).
  bool shm_ready = false;
  bool one_call = false;
  // The region this exchange's gradients are in; kept when `region` is dropped (the
  // pserver moved or forgot it) so they can still be sent over gRPC.
  std::shared_ptr<SharedRegion> exchange_region;
  PushFrame shm_push;
  proto::PullRequest shm_pull;
  // Runs the push of a push and pull that go at once (made at the first): a thread
  // started for every step costs more than a woken one.
  std::unique_ptr<TaskThread> push_thread;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_PARAM_CLIENT_SHARD_H_
