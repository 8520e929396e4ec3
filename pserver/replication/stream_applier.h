// StreamApplier: a backup's application of its primary's update stream, on a thread
// of its own. The backup acknowledges an update as soon as it holds it, in order (the
// primary then answers its trainer: every live replica has the update), and this
// thread applies the updates in stream order while the next ones travel, so a push
// waits for the backup's copy and not for its optimizer step as well. Before a backup
// acts as primary it drains what it holds (Drain), so it serves from the state of
// every update it acknowledged.
//
// An update that cannot be applied leaves the replica untrustworthy: `on_failure` is
// called (the replicator then ends the process) and nothing after it is applied.
//
// Thread-safety: thread-safe; Enqueue from one thread at a time (the stream's order).
#ifndef PSERVER_REPLICATION_STREAM_APPLIER_H_
#define PSERVER_REPLICATION_STREAM_APPLIER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "proto/pserver.pb.h"

namespace pl::pserver {

class StreamApplier {
 public:
  // One update (proto::ReplicaEntry): a push, an Init, the end of a sync step or an
  // eviction.
  struct Update {
    int64_t position = 0;
    int64_t bytes = 0;  // what it holds in memory (its gradients), for the bound below
    std::unique_ptr<PushFrame> push;
    std::unique_ptr<proto::InitRequest> init;
    int32_t step_end = 0;  // contributors
    std::unique_ptr<proto::Eviction> eviction;
  };
  using ApplyFn = std::function<Status(Update&)>;
  using FailureFn = std::function<void(const Status&)>;

  // Holds at most `max_held` updates and `max_held_bytes` of them not yet applied (but
  // always one): Enqueue waits for room, which holds back the primary's stream rather
  // than the backup's memory growing.
  StreamApplier(ApplyFn apply, FailureFn on_failure, size_t max_held = 32, int64_t max_held_bytes = 256 << 20);
  ~StreamApplier();  // applies what it holds (unless an update failed), then stops
  StreamApplier(const StreamApplier&) = delete;
  StreamApplier& operator=(const StreamApplier&) = delete;

  void Enqueue(Update update);
  // Returns once every update enqueued before the call is applied (or one failed).
  void Drain();
  // The position of the last update applied (0 before any).
  int64_t applied() const;

 private:
  void Run();

  const ApplyFn apply_;
  const FailureFn on_failure_;
  const size_t max_held_;
  const int64_t max_held_bytes_;
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Mutex mu_;
  std::deque<Update> held_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;      // the thread is applying one it took
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace pl::pserver

#endif  // PSERVER_REPLICATION_STREAM_APPLIER_H_
