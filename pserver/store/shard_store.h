// ShardStore: the part of every parameter that parameter server `index` of
// `num_shards` owns, with its optimizer state, and the update rules over it, in two
// halves by kind: the dense blocks (dense_store.h) and the sparse tables' rows
// (sparse_store.h, with their disk tier; which rows leave memory: row_eviction.h).
// This class holds what the halves share: the configuration the first Init fixes
// (optimizer, seed, mode), Init itself, which checks a whole request before either
// half creates anything, and the calls that span both (a push, a pull, a visit, a
// restore).
//
// It knows nothing of versions, barriers or queues: ParameterShard decides when a
// push is applied (Apply) or summed into a sync step (Accumulate, ApplyAccumulated).
//
// Thread-safety: thread-safe. mu_ guards the configuration: Init and Load hold it
// exclusively, everything else shared (the mode, fixed once initialised, is read
// without it); each half then locks its own map, and each block and stripe its own
// mutex. A sync step's update is not atomic by itself: the caller keeps readers out
// meanwhile (SyncBarrier).
#ifndef PSERVER_STORE_SHARD_STORE_H_
#define PSERVER_STORE_SHARD_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "paddle_like/dist/page_warmer.h"
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.pb.h"
#include "pserver/store/dense_store.h"
#include "pserver/store/row_eviction.h"
#include "pserver/store/shard_storage.h"
#include "pserver/store/shard_visitor.h"
#include "pserver/store/sparse_store.h"

namespace pl::pserver {

class ShardStore {
 public:
  using Visitor = ShardVisitor;
  using Rows = VisitRows;
  using DensePin = pserver::DensePin;

  ShardStore(int index, int num_shards) : index_(index), num_shards_(num_shards), dense_(index, num_shards),
                                          sparse_(index, num_shards) {}
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  int index() const { return index_; }
  int num_shards() const { return num_shards_; }

  // Creates the blocks and tables this shard owns that do not exist yet; returns
  // whether this call initialised the store. The first call fixes the optimizer, seed
  // and mode; a later call with a different one, or a parameter of the same name with
  // another shape/dim, is FAILED_PRECONDITION. A bad request changes nothing.
  StatusOr<bool> Init(const proto::InitRequest& request);
  // The most bytes the dense parameters and their optimizer state may take here (0: no
  // limit): an Init that would pass it is RESOURCE_EXHAUSTED before anything is made.
  // With `cap_sparse_rows`, the sparse rows are capped (RowEviction) at what the dense
  // parameters leave of the budget (at least a sixteenth of it), again after every
  // Init and Load: a job that sets no cap of its own cannot grow its tables past the
  // host's memory.
  void set_memory_budget(int64_t bytes, bool cap_sparse_rows = false);
  // Lock-free.
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }
  // The mode fixed by the first Init (false before it). Lock-free.
  bool sync() const { return initialized() && sync_; }
  // FAILED_PRECONDITION until Init (or Load) succeeded. Lock-free.
  Status CheckInitialized() const;

  // Checks the whole push (every block and row is this shard's, sizes match, and with
  // `check_finite` every gradient is finite) and says where each payload goes. Changes
  // nothing. A backup passes false for its primary's stream: the primary checked and
  // applied each push, so a replica must apply it as is, never refuse it.
  Status Resolve(const PushFrame& frame, ResolvedPush* out, bool check_finite = true) const;
  // DenseStore::Restore on this shard's blocks, after Init: a trainer's copy of their
  // values in place of the seed's, as of its `learned_version`. Returns the floats written.
  StatusOr<int64_t> RestoreDense(const google::protobuf::RepeatedPtrField<proto::DenseBlock>& blocks,
                                 int64_t learned_version);
  // Async: applies a resolved push with each block's and row's own step count, and
  // writes each block's new values to its write_back, if any.
  void Apply(const ResolvedPush& push);
  // Sync: adds a resolved push's gradients to the current step's sums.
  void Accumulate(const ResolvedPush& push);
  // Sync: applies the step's sums divided by `contributors`, and clears them.
  // `keep_previous`: the values the update replaces are kept for Read's `previous`.
  void ApplyAccumulated(int contributors, bool keep_previous = false);

  // Fills `frame` with the requested blocks and rows (rows are created on first
  // touch), after checking the whole request; a bad one creates no rows. Async blocks
  // are sent in place; sync ones are copied under their lock. With `dense_out`, block
  // i goes to dense_out(i, n) instead of into the frame. Sets no version.
  // `previous` (sync): the values before the last step, as ApplyAccumulated kept them.
  Status Read(const proto::PullRequest& request, PullFrame* frame, const DenseDestination& dense_out,
              bool previous = false);

  int64_t dense_elements() const { return dense_.elements(); }
  // The size of the largest push (or pull request) this shard's parameters allow, as
  // serialized: every dense block it holds in float32, and for each table as many rows
  // as it can hold here (at most kRowsPerPushBound), plus a margin. 0 until initialised.
  int64_t largest_request_bytes() const {
    // Only once initialised: a push that races a (re-)Init must not meet the sum of the
    // parameters added so far (it is refused as uninitialised instead, and retried).
    if (!initialized()) return 0;
    const int64_t payload = request_payload_bytes_.load();
    return payload == 0 ? 0 : payload + payload / 8 + (64 << 10);
  }
  static constexpr int64_t kRowsPerPushBound = SparseStore::kRowsPerPushBound;
  // The tables' half: their rows, statistics and disk tier; and which rows leave it.
  SparseStore& tables() { return sparse_; }
  const SparseStore& tables() const { return sparse_; }
  RowEviction& eviction() { return eviction_; }
  const RowEviction& eviction() const { return eviction_; }

  // The whole store for a saver (ShardVisitor), in a stable order: the configuration,
  // the dense parameters, the tables. FAILED_PRECONDITION on an uninitialised store.
  Status Visit(Visitor* visitor, Rows rows = Rows::kAll) const;
  // A snapshot's hold on every dense block's floats as they are now, in the order Visit
  // shows the blocks, without a copy (DensePin). The caller keeps updates out while it
  // pins (a shard's order lock), and unpins before the store goes.
  std::vector<DensePin> PinDense() const;
  static void Unpin(const DensePin& pin) { DenseStore::Unpin(pin); }

  // What a restorer fills (Load). It runs while Load holds the store exclusively.
  class Loader {
   public:
    // First: what the first Init fixes (an unknown optimizer is INVALID_ARGUMENT).
    Status Configure(const proto::OptimizerConfig& optimizer, uint64_t seed, bool sync);
    bool Holds(const std::string& name) const;
    // Creates a parameter or table as Init does; returns the blocks it owns here.
    StatusOr<size_t> Add(const proto::ParamSpec& spec);
    // Block b of dense parameter `name` with its counts set from `step_record`
    // (DenseStore::StepRecord): its value and slots to fill, or an empty span when this
    // shard holds no such block of n floats, or the record is not one.
    absl::Span<float> Block(const std::string& name, int64_t b, int64_t n, int64_t step_record);
    // A new record for row `id` of `table`, to fill; empty when the row exists.
    absl::Span<float> NewRow(const std::string& table, int64_t id) { return sparse().LoadRow(table, id, true); }
    // Row `id`'s record, new or existing, to overwrite (an incremental checkpoint's).
    absl::Span<float> Row(const std::string& table, int64_t id) { return sparse().LoadRow(table, id, false); }
    // Evicts row `id` of `table` (an incremental checkpoint's deletions).
    void Erase(const std::string& table, int64_t id) { sparse().EraseRow(table, id); }
    // After a row of NewRow or Row was filled: with a disk tier, a row beyond the cap
    // goes there at once, so a restore never holds more than the cap in memory.
    Status Filled(const std::string& table, int64_t id) { return store_->eviction_.AfterRestore(table, id); }
    // Stripe `stripe`'s sighting counters of `table`, to fill (empty for an unknown table).
    absl::Span<uint16_t> Sightings(const std::string& table, int stripe) {
      return sparse().LoadSightings(table, stripe);
    }
    // The spec parameter or table `name` was created with, or null.
    const proto::ParamSpec* Spec(const std::string& name) const;
    // Blocks of dense parameter `name` held here (0 if none).
    size_t OwnedBlocks(const std::string& name) const { return store_->dense_.OwnedBlocks(name); }

   private:
    friend class ShardStore;
    explicit Loader(ShardStore* store) : store_(store) {}
    SparseStore& sparse() { return store_->sparse_; }
    ShardStore* const store_;
    // Faults in the blocks Add creates ahead of the fill (page_warmer.h); joined when
    // the Loader goes, before a failed fill's blocks are freed.
    std::unique_ptr<PageWarmer> warmer_;
  };
  // Runs fill on a fresh store (else FAILED_PRECONDITION); the store counts as
  // initialised when fill returns OK, and is fresh again (holds nothing) when not.
  Status Load(const std::function<Status(Loader*)>& fill);
  // Like Load, onto a store that holds a state already (an incremental checkpoint over
  // its base); FAILED_PRECONDITION on a fresh one.
  Status LoadMore(const std::function<Status(Loader*)>& fill);

 private:
  Status CheckCompatible(const proto::InitRequest& request) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Creates a parameter or table (into the half of its kind); without
  // initialize_values a dense block's floats are left unset (DenseStore::Add).
  // RESOURCE_EXHAUSTED when the request's new dense parameters would pass the budget.
  Status CheckFits(const proto::InitRequest& request, const OptimizerSpec& optimizer) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Status AddParam(const proto::ParamSpec& spec, bool initialize_values = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // set_memory_budget's cap on the sparse rows, for what the dense parameters hold now.
  void CapSparseRowsWithinBudget() ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // What an error says after a name that is not of the kind asked for.
  const char* WhyNotDense(const std::string& name) const;
  const char* WhyNotTable(const std::string& name) const;

  const int index_;
  const int num_shards_;

  // Set (release) by the first successful Init or Load, holding mu_ exclusively, after
  // the configuration below; never cleared. Whoever reads it true may read sync_
  // without mu_: the configuration is not written again.
  std::atomic<bool> initialized_{false};
  bool sync_ = false;  // written only under mu_ (exclusive) while !initialized_

  mutable absl::Mutex mu_;
  uint64_t seed_ ABSL_GUARDED_BY(mu_) = 0;
  OptimizerSpec optimizer_ ABSL_GUARDED_BY(mu_);
  // optimizer_ resolved once (set with it): applying a push looks nothing up per block.
  std::optional<UpdateRule> rule_ ABSL_GUARDED_BY(mu_);
  proto::OptimizerConfig optimizer_proto_ ABSL_GUARDED_BY(mu_);
  DenseStore dense_;
  SparseStore sparse_;
  RowEviction eviction_{&sparse_};
  std::atomic<int64_t> request_payload_bytes_{0};  // largest_request_bytes without the margin
  std::atomic<int64_t> memory_budget_{0};
  std::atomic<bool> sparse_cap_follows_budget_{false};
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SHARD_STORE_H_
