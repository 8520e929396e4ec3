// ParameterShard: the part of every parameter that parameter server `index` of
// `num_shards` owns, with its optimizer state, and the update logic over it.
//
//   dense:  block b of parameter p (elements [b*block_size, min(numel, (b+1)*block_size)))
//           when ShardOfDenseBlock(p, b, P) == index; one allocation per block holding
//           value (n) then NumSlots(kind) state slots (n each), plus its step count.
//   sparse: row r of a table when ShardOfRow(r, P) == index, created on first touch
//           (pull or push) from RowStreamSeed(seed, table, r); each row is one record
//           [value (dim) | slots (S*dim) | step (int64)] inside a slab shared by many
//           rows, indexed by a flat hash map, so a row costs little beyond its floats.
//
// Update modes. Async: each push is applied on arrival (ApplyUpdate with the block's or
// row's own step count). Sync: pushes carry (trainer_id, step); step k's gradients
// are summed until every participant has pushed k, then their mean is applied once
// and version becomes k + 1. The participants of a step are the live trainers
// (SetLiveTrainers) when its first push arrives; one that leaves the live set leaves
// the barrier, one that joins later takes part from the next step (its pushes for the
// current step still count in the mean). A push for a finished step is dropped
// (stale); a push for a later step waits, bounded by its deadline, for that step.
//
// A push is validated whole before anything is applied, so a rejected push leaves the
// shard exactly as it was. An async push with defer_apply is validated, queued and
// answered; one applier thread applies queued pushes in arrival order (at most
// kMaxQueuedPushes wait, further pushes block until there is room).
//
// Thread-safety: thread-safe. Pushes to different dense blocks and different row
// stripes proceed in parallel (a mutex per block, striped mutexes for rows); Init
// excludes everything else; a sync step's update excludes pushes and pulls.
#ifndef PSERVER_SHARD_H_
#define PSERVER_SHARD_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.pb.h"

namespace pl::pserver {

struct ShardCounters {
  int64_t version = 0;
  int64_t dense_elements = 0;   // values held (not counting optimizer state)
  int64_t sparse_rows = 0;
  int64_t pushes_applied = 0;   // sync: pushes accepted into a step
  int64_t pushes_rejected = 0;  // invalid, plus sync pushes for a finished step
  int64_t sparse_rows_pulled = 0;
  int64_t sparse_rows_pushed = 0;
};

class ParameterShard {
 public:
  ParameterShard(int index, int num_shards);
  ~ParameterShard();
  ParameterShard(const ParameterShard&) = delete;
  ParameterShard& operator=(const ParameterShard&) = delete;

  int index() const { return index_; }
  int num_shards() const { return num_shards_; }

  // Creates the blocks and rows' tables this shard owns that do not exist yet. The
  // first call fixes the optimizer, seed and mode; a later call with a different one,
  // or a parameter of the same name with another shape/dim, is FAILED_PRECONDITION.
  StatusOr<proto::InitResponse> Init(const proto::InitRequest& request);

  // Fills `response` with the requested blocks and rows, after waiting (until
  // `deadline`, else DEADLINE_EXCEEDED) for version >= request.min_version.
  // Each dense block is copied once, under its lock, into a buffer gRPC sends as is.
  Status Pull(const proto::PullRequest& request, absl::Time deadline, PullFrame* response);
  // Where dense block i of a pull (with `n` floats) is to be written instead of into
  // the frame (a trainer's shared-memory region), or an error naming the bad span.
  using DenseDestination = std::function<StatusOr<float*>(int i, int64_t n)>;
  Status Pull(const proto::PullRequest& request, absl::Time deadline, PullFrame* response,
              const DenseDestination& dense_out);
  // The same as one protobuf message (copies; for tests and tools).
  Status Pull(const proto::PullRequest& request, absl::Time deadline,
              proto::PullResponse* response);

  // Applies (async) or accumulates (sync) one trainer's gradients; returns the version.
  // Dense gradients are read where gRPC received them.
  StatusOr<int64_t> Push(const PushFrame& request, absl::Time deadline = absl::InfiniteFuture());
  // The same, then (async only) each dense block's new values written to
  // write_back(i, n) while they are still in cache: a push and the pull of its result.
  StatusOr<int64_t> Push(const PushFrame& request, absl::Time deadline, const DenseDestination& write_back);
  // The same, taking the frame over so that a deferred push can outlive the call.
  StatusOr<int64_t> Push(PushFrame&& request, absl::Time deadline = absl::InfiniteFuture());
  StatusOr<int64_t> Push(const proto::PushRequest& request,
                         absl::Time deadline = absl::InfiniteFuture());

  // Sync mode: the trainers the barrier waits for (from the master's membership).
  void SetLiveTrainers(const std::vector<int64_t>& trainer_ids);

  // Wakes waiting pulls/pushes with UNAVAILABLE, for a server that is going down, and
  // applies the queued pushes (so a checkpoint written afterwards holds them).
  void Shutdown();
  // Waits until every queued push is applied.
  void WaitForQueuedPushes();

  bool initialized() const;
  bool sync() const;
  int64_t version() const;
  ShardCounters Counters() const;

  // The whole shard (config, values, optimizer state, step counts, version) as a byte
  // stream, and back. SaveState takes each block/stripe lock in turn; in sync mode the
  // result is exactly the state at `version`. LoadState requires a fresh shard and
  // rejects data for another index or shard count with FAILED_PRECONDITION.
  using ByteWriter = std::function<Status(const void* data, size_t n)>;
  using ByteReader = std::function<Status(void* data, size_t n)>;
  Status SaveState(const ByteWriter& write) const;
  Status LoadState(const ByteReader& read);

 private:
  struct DenseBlockState;
  struct DenseParam;
  struct RowStripe;
  struct SparseTableState;
  struct ResolvedPush;
  struct QueuedPush;

  Status CheckInitialized() const;
  Status CheckCompatible(const proto::InitRequest& request) const;
  StatusOr<DenseBlockState*> FindBlock(const std::string& param, int64_t block) const
      ABSL_SHARED_LOCKS_REQUIRED(params_mu_);
  Status AddParam(const proto::ParamSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(params_mu_);
  Status Resolve(const PushFrame& request, ResolvedPush* out) const
      ABSL_SHARED_LOCKS_REQUIRED(params_mu_);
  Status WaitForVersion(int64_t min_version, absl::Time deadline) const;
  void ApplyAsync(const ResolvedPush& push) ABSL_SHARED_LOCKS_REQUIRED(params_mu_);
  void Accumulate(const ResolvedPush& push) ABSL_SHARED_LOCKS_REQUIRED(params_mu_);
  // Sync: applies the mean of the current step if it is complete.
  void MaybeCompleteStep() ABSL_LOCKS_EXCLUDED(params_mu_, step_mu_, barrier_mu_);
  void ApplyStep(int contributors) ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_)
      ABSL_SHARED_LOCKS_REQUIRED(params_mu_);
  StatusOr<int64_t> Enqueue(std::unique_ptr<QueuedPush> push, absl::Time deadline);
  void ApplyQueued();  // the applier thread
  bool QueueIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) { return queue_.empty() && !applying_; }
  float* FindOrCreateRow(SparseTableState* table, RowStripe* stripe, int64_t id) const;
  void SetVersion(int64_t v);

  const int index_;
  const int num_shards_;

  // Guards the parameter maps and the configuration; Init holds it exclusively.
  mutable absl::Mutex params_mu_;
  bool initialized_ ABSL_GUARDED_BY(params_mu_) = false;
  bool sync_ ABSL_GUARDED_BY(params_mu_) = false;
  uint64_t seed_ ABSL_GUARDED_BY(params_mu_) = 0;
  OptimizerSpec optimizer_ ABSL_GUARDED_BY(params_mu_);
  proto::OptimizerConfig optimizer_proto_ ABSL_GUARDED_BY(params_mu_);
  std::map<std::string, std::unique_ptr<DenseParam>> dense_ ABSL_GUARDED_BY(params_mu_);
  std::map<std::string, std::unique_ptr<SparseTableState>> sparse_ ABSL_GUARDED_BY(params_mu_);

  // Sync: pushes accumulate holding it shared; a step's update holds it exclusively.
  mutable absl::Mutex step_mu_ ABSL_ACQUIRED_AFTER(params_mu_);

  // Sync barrier bookkeeping for the current step (= version).
  mutable absl::Mutex barrier_mu_ ABSL_ACQUIRED_AFTER(step_mu_);
  absl::flat_hash_set<int64_t> live_ ABSL_GUARDED_BY(barrier_mu_);
  absl::flat_hash_set<int64_t> participants_ ABSL_GUARDED_BY(barrier_mu_);
  absl::flat_hash_set<int64_t> pushed_ ABSL_GUARDED_BY(barrier_mu_);
  bool step_started_ ABSL_GUARDED_BY(barrier_mu_) = false;
  bool completing_ ABSL_GUARDED_BY(barrier_mu_) = false;

  // Version, with a condition for pulls waiting on it.
  mutable absl::Mutex version_mu_;
  mutable absl::CondVar version_cv_;
  int64_t version_ ABSL_GUARDED_BY(version_mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(version_mu_) = false;

  // Deferred async pushes, and the thread that applies them (started on first use).
  static constexpr size_t kMaxQueuedPushes = 2;
  absl::Mutex queue_mu_;
  std::deque<std::unique_ptr<QueuedPush>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool applying_ ABSL_GUARDED_BY(queue_mu_) = false;  // the applier holds a popped push
  bool queue_closed_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread applier_;

  std::atomic<int64_t> pushes_applied_{0};
  std::atomic<int64_t> pushes_rejected_{0};
  mutable std::atomic<int64_t> sparse_rows_pulled_{0};
  std::atomic<int64_t> sparse_rows_pushed_{0};
  std::atomic<int64_t> dense_elements_{0};
};

}  // namespace pl::pserver

#endif  // PSERVER_SHARD_H_
