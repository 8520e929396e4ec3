// A primary's stream calls to a backup on its own host, rung through the shared-memory
// region that already carries their dense blocks (ShmDenseChannel::Replicate, pserver/
// replication/replica_stream.h) instead of made as
// gRPC calls. The primary writes the call's header (the ReplicateRequest naming the blocks)
// into the region after the blocks and wakes the backup through a futex word in the
// mailbox of the region's header page; the backup's thread runs what the gRPC call
// would have run and answers in the mailbox, holding the entries without copying them
// out (kHalf0 below). Each entry then costs no socket, no cipher, no HTTP/2 framing, no
// copy on the backup and two thread hand-offs fewer: what a second replica added to a
// step through shared memory was mostly that one small TLS call and that copy
// (benchmarks/README.md, bench_replication.py).
//
// Who may ring: only a process that maps the region, which the backup opened on an
// Attach call authorised as one of the shard's replicas; the stream's epochs fence a
// stale primary as on gRPC. A backup that dies never answers, so the caller watches its
// process (a pidfd) while it waits; where it cannot (another pid namespace) there is no
// doorbell and the stream keeps its gRPC calls.
//
// Thread-safety: a DoorbellCaller serves one stream's thread (one call at a time); a
// DoorbellServer's own thread runs the handler, one call at a time.
#ifndef PADDLE_LIKE_DIST_STREAM_DOORBELL_H_
#define PADDLE_LIKE_DIST_STREAM_DOORBELL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/shared_region.h"
#include "proto/pserver.pb.h"

namespace pl {

// The halves of a region's payload a call's blocks lie in. The backup answers a call as
// soon as it holds the call's entries, before it has applied them, and applies them
// straight from the region: so the primary writes the next call into the other half,
// and comes back to a half only once the backup released the call that used it.
inline constexpr uint32_t kHalf0 = 1, kHalf1 = 2;
// A stream region's room beyond its blocks for a rung call's header: a push's takes tens
// of bytes a block, so a batch of a few KB fits (a longer one goes over gRPC).
inline constexpr int64_t kDoorbellRoom = 8 << 10;

// The backup's end: answers the calls rung in `region`'s mailbox on a thread of its own.
class DoorbellServer {
 public:
  // Runs one call: the header of a stream call whose blocks are in `region`; returns
  // the version to answer, or the status that refuses the call. Whatever keeps reading
  // the blocks after it returns keeps a copy of `hold` meanwhile: the primary writes
  // over them only once every copy is gone.
  using Handler = std::function<StatusOr<int64_t>(proto::ReplicateRequest header,
                                                  const std::shared_ptr<SharedRegion>& region,
                                                  const std::shared_ptr<const void>& hold)>;

  // Writes this process's id into the mailbox (for the caller's watch) and starts.
  DoorbellServer(std::shared_ptr<SharedRegion> region, Handler handler);
  // Marks the mailbox closed (a caller waiting, or ringing later, gets ABORTED and
  // attaches again), wakes the caller, and joins the thread after its current call.
  ~DoorbellServer();
  DoorbellServer(const DoorbellServer&) = delete;
  DoorbellServer& operator=(const DoorbellServer&) = delete;

  // When the last call was rung (or the server started): the region is in use.
  absl::Time last_rung() const;

 private:
  // Answers every call rung after the `seen`th.
  void Run(uint32_t seen);

  const std::shared_ptr<SharedRegion> region_;
  const Handler handler_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> last_rung_ns_;
  std::thread thread_;  // last: starts once the rest exists
};

// The primary's end.
class DoorbellCaller {
 public:
  // Once the backup's Attach answered that it serves a doorbell on `region`: watches
  // its process from here on. FAILED_PRECONDITION when it runs in another pid namespace
  // or cannot be watched (the stream keeps its gRPC calls).
  static StatusOr<std::unique_ptr<DoorbellCaller>> Connect(std::shared_ptr<SharedRegion> region);
  ~DoorbellCaller();
  DoorbellCaller(const DoorbellCaller&) = delete;
  DoorbellCaller& operator=(const DoorbellCaller&) = delete;

  // Returns once the backup released the last call whose blocks lay in `halves`
  // (kHalf0 | kHalf1): write a call's blocks there only after it. Fails as Call does.
  Status AwaitFree(uint32_t halves, absl::Duration timeout, const std::atomic<bool>& cancel);
  // One call, its blocks already written in `halves` of the payload, the header going in
  // [free_from, free_to): the backup's answer (its version), or its refusal as it gave
  // it. UNIMPLEMENTED: the header does not fit there (make the call over gRPC; the
  // backup copies the blocks out before it answers one); ABORTED: the backup closed
  // the mailbox (attach again); UNAVAILABLE: its process ended; DEADLINE_EXCEEDED
  // after `timeout`; CANCELLED once `cancel` is set.
  StatusOr<int64_t> Call(const proto::ReplicateRequest& header, absl::Duration timeout, const std::atomic<bool>& cancel,
                         uint32_t halves, int64_t free_from, int64_t free_to);

 private:
  DoorbellCaller(std::shared_ptr<SharedRegion> region, int pidfd);
  bool BackupExited() const;
  // Waits until done(*word) (a futex word of the mailbox), watching the backup's
  // process, the mailbox's closing, `cancel` and `deadline`; `awaited` names it.
  Status Await(std::atomic<uint32_t>* word, const std::function<bool(uint32_t)>& done, absl::Time deadline,
               const std::atomic<bool>& cancel, absl::string_view awaited) const;

  const std::shared_ptr<SharedRegion> region_;
  const int pidfd_;
  uint32_t last_use_[2] = {0, 0};  // the last call rung with its blocks in each half
};

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_STREAM_DOORBELL_H_
