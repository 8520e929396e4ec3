// PrimaryWatch: ends a trainer's calls to a shard's old primary as soon as the master
// names another. A primary whose host died (power, kernel, a cut cable) sends no FIN
// or RST: a call to it would wait for gRPC's keepalive to fail it (seconds), while the
// master promotes a backup within its lease (under a second). So while some call has
// been out longer than `slow`, the watch asks the master for the primaries (every
// `every`; after 6 asks, doubling up to 1.6 s while nothing moves) and cancels each
// call whose shard the master now places elsewhere; the caller's retry (a cancelled
// call is retryable) then goes to the new primary. Costs nothing while calls are
// quick; a cancel that was not needed costs one retry (pushes carry ids, so a retried
// push is applied once).
//
// Thread-safety: thread-safe. Calls register from any thread; the watch's own thread
// asks `resolve` (which must be safe to call from it) and cancels.
#ifndef PADDLE_LIKE_CLIENT_PRIMARY_WATCH_H_
#define PADDLE_LIKE_CLIENT_PRIMARY_WATCH_H_

#include <grpcpp/client_context.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"

namespace pl {

class PrimaryWatch {
 public:
  // Every shard's primary address, by shard index (the master's Membership).
  using Resolver = std::function<StatusOr<std::vector<std::string>>()>;

  explicit PrimaryWatch(Resolver resolve, absl::Duration slow = absl::Milliseconds(300),
                        absl::Duration every = absl::Milliseconds(200));
  ~PrimaryWatch();
  PrimaryWatch(const PrimaryWatch&) = delete;
  PrimaryWatch& operator=(const PrimaryWatch&) = delete;

  // One call's context (deadline `timeout` from now) to shard `shard` at `address`,
  // watched while this object lives; with a null `watch`, just the context.
  class Call {
   public:
    Call(PrimaryWatch* watch, int shard, std::string address, absl::Duration timeout);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    grpc::ClientContext* get() const { return context_.get(); }

   private:
    PrimaryWatch* const watch_;
    const std::unique_ptr<grpc::ClientContext> context_;
  };

  // Calls cancelled because their shard's primary moved.
  int64_t cancelled() const { return cancelled_.load(); }

 private:
  struct Watched {
    grpc::ClientContext* context;
    int shard;
    std::string address;
    absl::Time started;
    bool cancelled = false;
  };
  void Run();

  const Resolver resolve_;
  const absl::Duration slow_;
  const absl::Duration every_;
  absl::Mutex mu_;
  std::vector<Watched> calls_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> cancelled_{0};
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_PRIMARY_WATCH_H_
