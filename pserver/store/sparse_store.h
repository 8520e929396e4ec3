// SparseStore: the sparse half of a parameter server's shard (shard_store.h): row r of a
// table when ShardOfRow(r, P) == index, created on first touch (pull or push) from
// RowStreamSeed(seed, table, r). Each row is one record [value (dim) | slots (S*dim) |
// step (int64)] inside a slab shared by many rows, indexed by a flat hash map, so a row
// costs little beyond its floats. Rows may be held back until seen often enough
// (admission), evicted (a table's time to live, the pserver's memory cap: the slot is
// reused, and the row comes back from the initializer when touched), or spilled to a
// disk tier and taken back when touched.
//
// Thread-safety: thread-safe. mu_ guards the configuration and the map of tables (Add,
// Configure and Clear hold it exclusively, everything else shared). Each stripe of a
// table's rows has its own mutex, taken one at a time after mu_, so work on different
// stripes proceeds in parallel; tier_mu_ comes before a stripe's. Tables are never
// removed but by Clear (of a store that never served), so a resolved table stays valid
// without a lock.
#ifndef PSERVER_STORE_SPARSE_STORE_H_
#define PSERVER_STORE_SPARSE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "paddle_like/core/status.h"
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.pb.h"
#include "pserver/store/disk_tier.h"
#include "pserver/store/shard_storage.h"
#include "pserver/store/shard_visitor.h"

namespace pl::pserver {

class SparseStore {
 public:
  SparseStore(int index, int num_shards) : index_(index), num_shards_(num_shards) {}
  SparseStore(const SparseStore&) = delete;
  SparseStore& operator=(const SparseStore&) = delete;

  // What new rows start from: `seed`'s streams, and the optimizer of tables without
  // their own. Set once, before any table is added.
  void Configure(uint64_t seed, const OptimizerSpec& optimizer, const UpdateRule& rule);
  // Adds table `spec`; returns the bytes a request of as many rows as it can hold here
  // (at most kRowsPerPushBound) takes, serialized.
  StatusOr<int64_t> Add(const proto::ParamSpec& spec, const InitSpec& init);
  static constexpr int64_t kRowsPerPushBound = int64_t{1} << 20;
  bool Holds(const std::string& name) const;
  // The spec table `name` was created with, or null.
  const proto::ParamSpec* Spec(const std::string& name) const;
  size_t size() const;
  int64_t rows() const;
  // Each table's rows, bytes and `hottest` most updated rows (most first).
  std::vector<proto::TableStats> Stats(int hottest = 10) const;

  // The push's rows, checked (each id in range and owned here, sizes; with
  // `check_finite` every gradient finite), into out->sparse.
  Status Resolve(const proto::PushRequest& request, bool check_finite, const WhyNot& why, ResolvedPush* out) const;
  // Async: applies resolved rows, each with its own step count (admission, the change
  // and touch notes, the hot-row counts).
  void Apply(const std::vector<ResolvedPush::Sparse>& sparse) const;
  // Sync: adds resolved rows' gradients to the current step's sums.
  static void Accumulate(const std::vector<ResolvedPush::Sparse>& sparse);
  // Sync: applies the step's sums times `scale`, and clears them. `keep_previous`: what a
  // pull read of each updated row before the update is kept (RowStripe::previous), for
  // Read's `previous`.
  void ApplyAccumulated(float scale, bool keep_previous = false) const;
  // The pull's rows into `response` (created on first touch) once every table and id is
  // checked; a bad request creates no rows. `previous` (sync): the rows as they were
  // before the last step.
  Status Read(const proto::PullRequest& request, proto::PullResponse* response, bool previous = false) const;
  // Checks the pull's rows (as Read does) without reading any.
  Status CheckRead(const proto::PullRequest& request) const;
  // Each table and its rows stripe by stripe, each stripe under its lock (ShardVisitor).
  Status Visit(ShardVisitor* visitor, VisitRows rows) const;

  // From now on every row a push updates is marked as changed (incremental
  // checkpoints; RowStripe::MarkChanged). Idempotent.
  void TrackChanges() const { track_changes_.store(true, std::memory_order_relaxed); }
  bool tracking_changes() const { return track_changes_.load(std::memory_order_relaxed); }

  // ---- what eviction (row_eviction.h) works with ----
  int index() const { return index_; }
  // From now on every pull and push notes when it touched each row (RowStripe::Touch);
  // a table with evict_after_s turns the notes on by itself.
  void NoteTouches() { evicting_.store(true, std::memory_order_relaxed); }
  bool evicting() const { return evicting_.load(std::memory_order_relaxed); }
  // The clock of those notes, in ticks of kEvictionTick (0 is before any tick: restored
  // rows not touched since count as touched then). Set by the sweeper.
  static constexpr absl::Duration kEvictionTick = absl::Milliseconds(100);
  void SetTick(uint32_t tick) { tick_.store(tick, std::memory_order_relaxed); }
  uint32_t tick() const { return tick_.load(std::memory_order_relaxed); }
  std::vector<std::string> TableNames() const;
  // The tables as they are now, by name (never removed while serving: the pointers stay
  // valid), and one of them (null if none).
  std::vector<std::pair<std::string, SparseTable*>> TablesNow() const;
  SparseTable* Table(const std::string& name) const;
  // Runs fn(stripe) under stripe `stripe`'s lock, after the disk tier's (shared) when
  // `tier` (a spill moves rows to the tier).
  void InStripe(SparseTable* table, int stripe, bool tier, const std::function<void(RowStripe&)>& fn) const;
  // Evicts row `id` (one the stripe holds) from memory: to the disk tier when `to_disk`
  // (InStripe with `tier`), else dropped and counted as evicted. Inside InStripe.
  Status EvictLocked(SparseTable* table, RowStripe* stripe, int64_t id, bool to_disk) const;

  // ---- the disk tier (sparse_store_disk.cc) ----
  // From now on the cap spills rows to `tier` instead of dropping them, and a pull or
  // push of a row there takes it back, so nothing the cap evicts is lost. Set before
  // serving (and before a load, so a restore beyond the cap goes there directly).
  void AttachDiskTier(std::unique_ptr<DiskTier> tier);
  bool has_disk_tier() const { return disk_ != nullptr; }
  const DiskTier* disk_tier() const { return disk_.get(); }
  int64_t disk_bytes() const { return disk_ != nullptr ? disk_->bytes_on_disk() : 0; }

  // ---- for a restorer (ShardStore::Loader) ----
  // Row `id`'s record of `table`: `fresh` only a new one (empty when the row exists),
  // else new or existing, to overwrite. Empty for an unknown table.
  absl::Span<float> LoadRow(const std::string& table, int64_t id, bool fresh);
  void EraseRow(const std::string& table, int64_t id);
  absl::Span<uint16_t> LoadSightings(const std::string& table, int stripe);
  // Forgets every table (a Load that failed).
  void Clear();

 private:
  // Table `name` with its rows `msg` checked: in range, owned here, of its dim; `why`
  // (may be null) says more of an unknown name. Takes mu_: `why` may ask the other half,
  // never with this half's lock held.
  StatusOr<SparseTable*> FindRows(const proto::SparseRowsMsg& msg, const WhyNot* why) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The row's slot: in memory, else taken back from the disk tier, else none. Needs
  // mu_ (shared) and stripe->mu (which the disk tier's path releases for a while).
  std::optional<uint32_t> FindSlot(SparseTable* table, RowStripe* stripe, int64_t id) const;
  // A new row's slot, its record from the table's initializer. Needs mu_ and stripe->mu.
  uint32_t CreateSlot(SparseTable* table, RowStripe* stripe, int64_t id) const;
  // With a disk tier: row `id`'s slot once taken back from the tier, or none when it is
  // not there. Needs mu_ (shared) and stripe->mu, which it releases and takes again
  // (tier_mu_ comes before a stripe's lock): the caller re-checks the index after it.
  std::optional<uint32_t> TakeFromDisk(SparseTable* table, RowStripe* stripe, int64_t id) const;
  // Moves row `id` (in memory) to the tier. Needs tier_mu_ (shared) and stripe->mu.
  Status SpillRow(SparseTable* table, RowStripe* stripe, int64_t id) const;
  // A push's row: its slot, or none while admission still holds the id back (the
  // table's admit_after; the push counts as one more sighting). Needs stripe->mu.
  std::optional<uint32_t> AdmittedSlot(SparseTable* table, RowStripe* stripe, int64_t id) const;
  // What a row's update notes besides the step: the change mark (incremental
  // checkpoints) and the tick it was touched at (eviction). Read once per push.
  struct RowNotes {
    bool track = false;
    bool touch = false;
    uint32_t tick = 0;
  };
  RowNotes Notes() const { return {tracking_changes(), evicting(), tick()}; }
  // One row's update by `grad` (dim floats): admission, the optimizer step, the notes
  // and the hot-row count. Needs mu_ and stripe->mu.
  void UpdateRow(SparseTable* table, RowStripe* stripe, int64_t id, const float* grad, const RowNotes& notes) const;
  // What a pull reads of row `id` (dim floats into `dst`): its values, or those it would
  // start with, without making it. Needs mu_ and stripe->mu.
  void ReadRow(SparseTable* table, RowStripe* stripe, int64_t id, float* dst, const RowNotes& notes) const;

  const int index_;
  const int num_shards_;
  mutable absl::Mutex mu_;
  uint64_t seed_ ABSL_GUARDED_BY(mu_) = 0;
  OptimizerSpec optimizer_ ABSL_GUARDED_BY(mu_);
  std::optional<UpdateRule> rule_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<SparseTable>> tables_ ABSL_GUARDED_BY(mu_);
  mutable std::atomic<bool> track_changes_{false};
  std::atomic<bool> evicting_{false};
  std::atomic<uint32_t> tick_{0};
  std::unique_ptr<DiskTier> disk_;  // set before serving; then fixed
  // Moves between memory and the tier hold it shared; a whole visit (a checkpoint, a
  // snapshot) holds it exclusively, so no row is between the two places meanwhile.
  mutable absl::Mutex tier_mu_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SPARSE_STORE_H_
