// A primary's stream calls to a backup on its own host, rung through the shared-memory
// region that already carries their dense blocks (replica_stream.h) instead of made as
// gRPC calls. The primary writes the call's header (the PushRequest naming the blocks)
// into the region after the blocks and wakes the backup through a futex word in the
// mailbox of the region's header page; the backup's thread runs what the gRPC call would have run and answers in
// the mailbox. Each entry then costs no socket, no cipher, no HTTP/2 framing and two
// thread hand-offs fewer: what a second replica added to a step through shared memory
// was mostly that one small TLS call (benchmarks/README.md, bench_replication.py).
//
// Who may ring: only a process that maps the region, which the backup opened on an
// Attach call authorised as one of the shard's replicas; the stream's epochs fence a
// stale primary as on gRPC. A backup that dies never answers, so the caller watches its
// process (a pidfd) while it waits; where it cannot (another pid namespace) there is no
// doorbell and the stream keeps its gRPC calls.
//
// Thread-safety: a DoorbellCaller serves one stream's thread (one call at a time); a
// DoorbellServer's own thread runs the handler, one call at a time.
#ifndef PSERVER_STREAM_DOORBELL_H_
#define PSERVER_STREAM_DOORBELL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/shared_region.h"
#include "proto/pserver.pb.h"

namespace pl::pserver {

// The backup's end: answers the calls rung in `region`'s mailbox on a thread of its own.
class DoorbellServer {
 public:
  // Runs one call: the header of a stream call whose blocks are in `region`; returns
  // the version to answer, or the status that refuses the call.
  using Handler =
      std::function<StatusOr<int64_t>(proto::PushRequest header, const std::shared_ptr<SharedRegion>& region)>;

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

  // One call, with its blocks already in the region's payload before `free_from`, where
  // the header goes: the backup's answer (its version), or its refusal as it gave it.
  // UNIMPLEMENTED: the header does not fit after the blocks (make the call over gRPC);
  // ABORTED: the backup closed the mailbox (attach again); UNAVAILABLE: its process
  // ended; DEADLINE_EXCEEDED after `timeout`; CANCELLED once `cancel` is set.
  StatusOr<int64_t> Call(const proto::PushRequest& header, absl::Duration timeout, const std::atomic<bool>& cancel,
                         int64_t free_from);

 private:
  DoorbellCaller(std::shared_ptr<SharedRegion> region, int pidfd);
  bool BackupExited() const;

  const std::shared_ptr<SharedRegion> region_;
  const int pidfd_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STREAM_DOORBELL_H_
