// ParameterShard: what parameter server `index` of `num_shards` serves, composed of
// parts with one lock domain each:
//
//   ShardStore     (shard_store.h)     the dense blocks and sparse rows this pserver
//                                      owns, their optimizer state and update rules
//   VersionClock   (version_clock.h)   the version, and waiting for one
//   SyncBarrier    (sync_barrier.h)    sync mode: which trainers a step waits for, and
//                                      keeping a step's update atomic for readers
//   AsyncApplier   (async_applier.h)   async pushes with defer_apply: a queue and the
//                                      thread that applies it
//   shard_serializer.h                 the state as bytes, for checkpoints
//   PushLedger     (push_ledger.h)     exactly once: the last push id applied per client
//   ReplicationHook (replication_hook.h) a replicated primary's backups (shard_replication.cc)
//
// A push goes through one pipeline (Push): validate it whole, so that a rejected push
// leaves the shard exactly as it was; then apply it (async), queue it (async with
// defer_apply) or sum it into its step (sync); then acknowledge it with a version.
// Async: a push is applied with each block's or row's own step count, and the
// version counts applied pushes. Sync: see sync_barrier.h; the version counts steps.
//
// Virtual trainers (pushes with step_expects, docs/consistent-training.md): a sync
// step's pushes are each one virtual trainer's micro-batch; they are kept as they come
// (MicroBatchStash) and summed in virtual-trainer order at the step's end, and the step
// keeps the values it replaced, so a trainer that takes a task over mid-step can still
// pull the step's values exactly (PullRequest.exact_version) from a shard already past it.
//
// Replicated (SetReplicationHook): the primary forwards every update to its backups
// in the order it applies it, under order_mu_ (so async pushes apply one at a time),
// and acknowledges a push once the backups have it. A backup (Following) applies that
// stream through Follow* instead of taking pushes, and its sync barrier completes a
// step only when the stream says so, so both hold bit-identical state.
//
// Thread-safety: thread-safe. The parts lock themselves; this class has no lock of
// its own (its counters are atomic). No part's lock is held while another part is
// called, except the clock's, taken last (SyncBarrier and AsyncApplier read it). In
// sync mode a push or read holds the barrier's step (a count, not a lock) while it
// works in the store, which keeps the step's update out.
#ifndef PSERVER_STORE_SHARD_H_
#define PSERVER_STORE_SHARD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "proto/pserver.pb.h"
#include "pserver/store/async_applier.h"
#include "pserver/store/push_ledger.h"
#include "pserver/store/replication_hook.h"
#include "pserver/store/restore_ticket.h"
#include "pserver/store/shard_serializer.h"
#include "pserver/store/shard_snapshot.h"
#include "pserver/store/shard_storage.h"
#include "pserver/store/shard_store.h"
#include "pserver/store/micro_batch_stash.h"
#include "pserver/store/norm_guard.h"
#include "pserver/store/sync_barrier.h"
#include "pserver/store/version_clock.h"

namespace pl::pserver {

struct ShardCounters {
  int64_t version = 0;
  int64_t dense_elements = 0;   // values held (not counting optimizer state)
  int64_t sparse_rows = 0;
  int64_t pushes_applied = 0;   // sync: pushes accepted into a step
  int64_t pushes_rejected = 0;  // invalid, plus sync pushes for a finished step
  int64_t pushes_refused_norm = 0;  // of those, refused by the NormGuard (out-of-bounds gradients)
  int64_t pulls = 0;  // Pull calls served
  int64_t sparse_rows_pulled = 0;
  int64_t sparse_rows_pushed = 0;
};

class ParameterShard {
 public:
  ParameterShard(int index, int num_shards);
  ~ParameterShard();  // Shutdown()
  ParameterShard(const ParameterShard&) = delete;
  ParameterShard& operator=(const ParameterShard&) = delete;

  int index() const { return store_.index(); }
  int num_shards() const { return store_.num_shards(); }
  // What a primary's pushes must stay within (norm_guard.h); set before serving.
  NormGuard& norm_guard() { return norm_guard_; }
  // ShardStore::set_memory_budget: what an Init may make this shard hold, and whether
  // its sparse rows are capped within it.
  void set_memory_budget(int64_t bytes, bool cap_sparse_rows = false) {
    store_.set_memory_budget(bytes, cap_sparse_rows);
  }

  // Creates the blocks and rows' tables this shard owns that do not exist yet. The
  // first call fixes the optimizer, seed and mode; a later call with a different one,
  // or a parameter of the same name with another shape/dim, is FAILED_PRECONDITION.
  // Once it is created, the first call from a trainer whose copy learned something
  // gets a restore ticket (restore_ticket.h); a request with that ticket and `restore`
  // blocks puts that copy of the values in place of the seed's (response.restored),
  // once, checked whole first.
  StatusOr<proto::InitResponse> Init(const proto::InitRequest& request);

  // Fills `response` with the requested blocks and rows, after waiting (until
  // `deadline`, else DEADLINE_EXCEEDED) for version >= request.min_version. Async
  // blocks are sent in place; sync ones are copies of the finished step. With
  // `dense_out` (a trainer's shared-memory region), block i is written to
  // dense_out(i, n) instead of into the frame.
  Status Pull(const proto::PullRequest& request, absl::Time deadline, PullFrame* response,
              const DenseDestination& dense_out = nullptr);
  // The same as one protobuf message (copies; for tests and tools).
  Status Pull(const proto::PullRequest& request, absl::Time deadline, proto::PullResponse* response) {
    PullFrame frame;
    PL_RETURN_IF_ERROR(Pull(request, deadline, &frame));
    *response = frame.ToProto();
    return absl::OkStatus();
  }

  // Applies (async) or accumulates (sync) one trainer's gradients; returns the version.
  // Dense gradients are read where the frame holds them. An async push with
  // defer_apply is queued and answered at once (the frame is kept until applied).
  // With `write_back` (async only; FAILED_PRECONDITION in sync mode), the push is
  // applied at once and each dense block's new values are written to write_back(i, n)
  // while they are still in cache: a push and the pull of its result. A sync push for
  // a later step waits, until `deadline`, for that step.
  StatusOr<int64_t> Push(PushFrame frame, absl::Time deadline = absl::InfiniteFuture(),
                         const DenseDestination& write_back = nullptr);

  // Sync mode: the trainers the barrier waits for (from the master's membership).
  void SetLiveTrainers(const std::vector<int64_t>& trainer_ids);

  // Wakes waiting pulls/pushes with UNAVAILABLE, for a server that is going down, and
  // applies the queued pushes (so a checkpoint written afterwards holds them).
  void Shutdown();
  // Waits until every queued push is applied.
  void WaitForQueuedPushes() { applier_.WaitUntilIdle(); }

  // The sparse tables' half of the store: their statistics, the memory cap and eviction
  // clock (RowEvictor drives them), the disk tier (set before serving), the change marks
  // of incremental checkpoints (sparse_store.h).
  SparseStore& tables() { return store_.tables(); }
  const SparseStore& tables() const { return store_.tables(); }
  RowEviction& eviction() { return store_.eviction(); }
  const RowEviction& eviction() const { return store_.eviction(); }

  // ---- eviction (shard_eviction.cc) ----
  // One sweep (RowEviction::Plan; `ttl_due` includes the times to live); returns the
  // rows evicted. Stripe by stripe, so pushes wait at most for one stripe's. A
  // replicated primary sends each stripe's evictions to its backups in its stream,
  // ordered with its pushes; a backup evicts only what its stream says (0 here).
  int64_t SweepRows(bool ttl_due);
  // A backup applies an eviction of the primary's stream (`to_disk`: rows the cap moved
  // to the disk tier, which this replica must have too).
  Status FollowEviction(const proto::SparseRowsMsg& evicted, bool to_disk);

  // ---- replication (shard_replication.cc) ----
  // Set before serving; `hook` outlives the shard's use of it. Null: not replicated.
  void SetReplicationHook(ReplicationHook* hook) { hook_ = hook; }
  // A backup: the barrier completes steps only through FollowStepComplete. Promote
  // ends it (the process became the primary) and completes a step that is ready.
  void SetFollowing(bool following);
  void Promote() { SetFollowing(false); }
  // A backup applies the primary's stream, entry by entry in order: a push (async:
  // applied and its id recorded; sync: admitted and summed into the step), an Init,
  // and (sync) the end of a step with its number of contributors.
  StatusOr<int64_t> FollowPush(PushFrame frame);
  Status FollowInit(const proto::InitRequest& request);
  void FollowStepComplete(int contributors);
  // A primary's snapshot of the shard for a joining replica: the state and the push
  // ledger, at a point of the stream (async: now; sync: at the end of the next step,
  // so that no step is half summed). `take` is called once, on the thread that
  // reaches that point, with the snapshot (its dense floats pinned in the shard, not
  // copied: shard_snapshot.h) and the stream position it holds.
  using SnapshotTaker = std::function<void(StatusOr<ShardSnapshot> snapshot, int64_t position)>;
  void RequestSnapshot(SnapshotTaker take);
  // A joining replica installs what RequestSnapshot made (on a fresh shard): whole, or
  // read as it arrives (a socket), straight into the shard's blocks and rows; the dense
  // floats, the snapshot's last SnapshotPayloadBytes, through `scatter` when given
  // (several connections at once: snapshot_lanes.h). An error while the state is read
  // leaves the shard fresh again.
  Status LoadSnapshot(std::string_view bytes);
  Status LoadSnapshot(const pl::ByteReader& read, const pl::ScatterReader& scatter = nullptr);
  // How many of a snapshot's last bytes (ShardSnapshot::Bytes) are its dense floats;
  // DATA_LOSS for bytes that are not a snapshot.
  static StatusOr<uint64_t> SnapshotPayloadBytes(std::string_view snapshot);
  int64_t ledger_clients() const;

  bool initialized() const { return store_.initialized(); }
  bool sync() const { return store_.sync(); }
  // Whether a Push or Pull may wait on others: a sync step's barrier, a backup's
  // acknowledgement. Such calls must not hold the RPC layer's own threads.
  bool calls_may_wait() const { return store_.sync() || hook_ != nullptr; }
  // ShardStore::largest_request_bytes: the limit on a Push or Pull once initialised.
  int64_t largest_request_bytes() const { return store_.largest_request_bytes(); }
  int64_t version() const { return clock_.version(); }
  ShardCounters Counters() const;
  // The version of the trainer's copy the shard's dense values were restored from
  // (Init with a restore, or a backup following one); 0: none.
  int64_t restored_from_trainer() const { return restored_from_trainer_.load(); }

  // The whole shard (shard_serializer.h) as a byte stream, and back. In sync mode the
  // saved state is exactly the state at its version. LoadState requires a fresh shard
  // and rejects data for another index or shard count with FAILED_PRECONDITION.
  using ByteWriter = pl::ByteWriter;
  using ByteReader = pl::ByteReader;
  // `rows`: ShardStore::Rows (kChangedTakingChanges: an incremental state).
  Status SaveState(const ByteWriter& write, ShardStore::Rows rows = ShardStore::Rows::kAll) const;
  // `scatter`: ReadShardState's, for a snapshot's state.
  Status LoadState(const ByteReader& read, const pl::ScatterReader& scatter = nullptr);
  // An incremental state onto the state it was taken after (shard_serializer.h).
  Status ApplyStateDelta(const ByteReader& read);

 private:
  friend class ShardSnapshotTestAccess;  // sizes a snapshot's buffer apart from taking it
  // Init with a restore ticket: the creator's values in place of the seed's.
  StatusOr<proto::InitResponse> Restore(const proto::InitRequest& request);
  // The push pipeline's steps.
  Status Validate(PendingPush* push, bool sync, const DenseDestination& write_back);
  int64_t ApplyNow(const PendingPush& push);
  StatusOr<int64_t> AddToStep(std::unique_ptr<PendingPush> push, absl::Time deadline);
  // Virtual trainers: the stashed pushes summed into the step, in virtual-trainer order;
  // returns whether there were any (the step is a virtual trainers' one).
  bool AccumulateStash();
  void CompleteStepIfReady();
  // Counts a push applied or accepted into a step.
  void CountApplied(const PendingPush& push);
  // Replicated primary: the async push path and the sync step's part of it.
  StatusOr<int64_t> PushReplicated(const PendingPush& push, absl::Time deadline);
  Status AccumulateReplicated(const PendingPush& push, int64_t* position);
  // The step's update; a replicated primary forwards its end and takes a requested
  // snapshot there.
  void ApplyStep(int contributors);
  // A buffer for a snapshot's head, sized from the state now and its pages faulted in,
  // made before the order lock so that the copy under it neither grows a string nor
  // faults a page (a table's rows are most of a head).
  std::string SnapshotBuffer() const;
  // Under the order lock: the head copied into `buffer` (grown only if the state grew
  // since it was sized), the dense blocks pinned.
  StatusOr<ShardSnapshot> TakeSnapshot(int64_t version, std::string buffer) const;

  // Lock-free counters.
  std::atomic<int64_t> pushes_applied_{0};
  std::atomic<int64_t> pushes_rejected_{0};
  NormGuard norm_guard_;
  RestoreTicket restore_ticket_;
  std::atomic<int64_t> restored_from_trainer_{0};
  std::atomic<int64_t> pulls_{0};
  std::atomic<int64_t> sparse_rows_pulled_{0};
  std::atomic<int64_t> sparse_rows_pushed_{0};

  // Exactly once and replication. order_mu_ orders a replicated primary's updates
  // (taken before any part's lock); ledger_mu_ guards the ledger otherwise.
  ReplicationHook* hook_ = nullptr;
  mutable absl::Mutex order_mu_;
  mutable absl::Mutex ledger_mu_;
  PushLedger ledger_ ABSL_GUARDED_BY(ledger_mu_);
  SnapshotTaker snapshot_taker_ ABSL_GUARDED_BY(order_mu_);  // sync: due at the next step's end
  std::string snapshot_buffer_ ABSL_GUARDED_BY(order_mu_);   // ... and the buffer made for it

  MicroBatchStash stash_;  // virtual trainers: the open step's pushes
  // The version whose values the last virtual trainers' step kept (-1: none).
  std::atomic<int64_t> previous_of_{-1};

  // The parts, each thread-safe on its own; in this order so that a part is destroyed
  // before those it uses (the applier's thread uses all the above).
  ShardStore store_;
  VersionClock clock_;
  mutable SyncBarrier barrier_;  // SaveState holds the step open
  AsyncApplier applier_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SHARD_H_
