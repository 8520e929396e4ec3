// PserverShards: a parameter client's P pservers as its calls reach them. It resolves
// their addresses through the master (again after a failure: a restarted pserver may
// listen elsewhere), initialises them from the model's deterministic specs, offers each
// a region channel (dense_channel.h) and drops it when it fails, and makes calls with
// retries and backoff: a call to a primary the master replaced is ended early
// (primary_watch.h), a pserver that lost its parameters is initialised again, and in
// sync mode the pending push and pull follow a shard that came back at an earlier step.
// ParameterClient routes blocks and rows to these shards and installs what comes back;
// this class is its retry and channel half.
//
// Thread-safety: not thread-safe, as ParameterClient; ForEachShard runs a call on every
// shard at once, each on its own thread, and each shard is touched by one of them.
#ifndef PADDLE_LIKE_CLIENT_PSERVER_SHARDS_H_
#define PADDLE_LIKE_CLIENT_PSERVER_SHARDS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "paddle_like/client/dense_channel.h"
#include "paddle_like/client/key_store.h"
#include "paddle_like/client/primary_watch.h"
#include "paddle_like/client/pserver_shard.h"
#include "paddle_like/client/task_thread.h"
#include "paddle_like/core/status.h"
#include "proto/pserver.pb.h"

namespace pl {

struct ParameterClientOptions;

class PserverShards {
 public:
  // The P pserver addresses by index (from the master); it may wait for them to register.
  using Resolver = std::function<StatusOr<std::vector<std::string>>()>;
  // One attempt of a call to one shard.
  using Attempt = std::function<Status(PserverShard&)>;

  // `keys` (the model's parameters, laid out over the shards) and `options` outlive it.
  PserverShards(KeyStore* keys, const ParameterClientOptions* options, Resolver resolve,
                const std::atomic<bool>* stop);
  ~PserverShards();
  PserverShards(const PserverShards&) = delete;
  PserverShards& operator=(const PserverShards&) = delete;

  int size() const { return static_cast<int>(shards_.size()); }
  // Iterates the shards as unique_ptrs (for (auto& sh : shards) sh->...).
  auto begin() { return shards_.begin(); }
  auto end() { return shards_.end(); }
  auto begin() const { return shards_.begin(); }
  auto end() const { return shards_.end(); }
  PserverShard& operator[](int i) { return *shards_[i]; }
  const PserverShard& operator[](int i) const { return *shards_[i]; }
  void set_trainer_id(int64_t id) { trainer_id_ = id; }
  uint64_t client_id() const { return client_id_; }
  // Each dense parameter's bfloat16 rounding residuals (--wire_dtype bfloat16).
  Bf16Residuals* residuals() { return &residuals_; }

  // Resolves the addresses, initialises every pserver and offers each a region channel.
  Status Connect();
  // Runs fn(i) for every shard in parallel (shard 0 on the calling thread); the first
  // error wins.
  Status ForEachShard(const std::function<Status(int)>& fn);
  // `attempt` on shard i until it succeeds, fails for good or `give_up_after` passes.
  Status CallWithRetry(int i, const Attempt& attempt, const char* what);
  // One attempt of a pull or a push over the shard's channel. `fall_back`: a region
  // channel that answers ABORTED is let go at once (false: the caller does it, once the
  // other direction's attempt running beside this one is back). `values`: where a push
  // that brings the new values back puts them.
  Attempt PullAttempt(PullFrame* response, bool fall_back = true);
  Attempt PushAttempt(proto::PushResponse* response, PullFrame* values, bool fall_back = true);
  // Shard i's prepared push and its pull (overlap: at the same time where the channel
  // is duplex), each with retries.
  Status ExchangeShard(int i, bool overlap, proto::PushResponse* pushed, PullFrame* pulled);
  // Waits up to `timeout` for shard i to reach `version` (one call, no retries); returns
  // the version it answered with, or the one last known when it did not answer in time
  // (or at all: then its address is asked of the master again).
  StatusOr<int64_t> WaitForVersion(int i, int64_t version, absl::Duration timeout);
  // Offers the shard a shared-memory region unless it has a region channel or refused
  // one; failing that, asks it for a dense link.
  void TryAttach(PserverShard& shard);
  // How each pserver's dense traffic travels: "shared memory (N MB)" or "gRPC (why)".
  std::vector<std::string> Transports() const;

  int64_t retries() const { return retries_.load(); }
  int64_t region_attaches() const { return shm_attaches_.load(); }
  int64_t bound_parameters() const { return bound_parameters_.load(); }

 private:
  // Updates the address and stub of shard `only` (-1: all) from the master.
  Status Resolve(int only = -1);
  Status ResolveWithRetry();
  // `created`: whether this call created the shard's parameters (it had none). A shard
  // that lost every copy and was created again gives the first trainer with a learned
  // copy a ticket; that trainer sends its copy of the dense values (RestoreShard).
  Status InitShard(PserverShard& shard, bool* created = nullptr);
  // Sends the shard's dense blocks as this trainer holds them, with the ticket its
  // creating Init returned (`version`: what the copy had seen, for the pserver's log).
  Status RestoreShard(PserverShard& shard, uint64_t ticket, int64_t version);
  // Sync mode, after a shard was initialised again or found anew: the pending push and
  // pull follow the shard's step when it is behind this trainer's (beyond the one step
  // a replica that just took over may lag, unless `waited_in_vain`: a pull's deadline
  // passed with the shard not moving).
  void AlignSyncStep(int i, PserverShard& shard, bool waited_in_vain);
  // A push's or pull's context, ended early if the master moves the shard's primary.
  PrimaryWatch::Call WatchedCall(const PserverShard& s) const;
  // Lets go of the shard's region channel (a call through it failed, or the pserver
  // moved): a push prepared in it goes over gRPC; `why` logged for a link.
  void DropRegion(PserverShard& shard, const Status& why);

  KeyStore* const keys_;
  const ParameterClientOptions* const options_;
  Resolver resolve_;
  const std::atomic<bool>* stop_;
  Bf16Residuals residuals_;  // before the shards, whose channels point at it
  std::vector<std::unique_ptr<PserverShard>> shards_;
  proto::InitRequest init_request_;
  int64_t trainer_id_ = 0;
  uint64_t client_id_ = 0;  // tells this client's regions from other clients' on a pserver
  std::atomic<int64_t> retries_{0};
  std::atomic<int64_t> shm_attaches_{0};  // shards attach in parallel
  std::atomic<int64_t> bound_parameters_{0};
  // Connect has returned: a region channel attached from then on is logged (the trainer
  // logs each pserver's transport once connected).
  std::atomic<bool> connected_{false};
  std::mutex resolve_mu_;  // shards retry (and re-resolve) from parallel calls
  // Ends calls to a primary the master has replaced (null without a resolver); outlives
  // the threads that make calls (declared before them).
  std::unique_ptr<PrimaryWatch> watch_;
  std::vector<std::unique_ptr<TaskThread>> shard_threads_;  // run fn(i) for shards 1..P-1
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_PSERVER_SHARDS_H_
