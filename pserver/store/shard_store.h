// ShardStore: the part of every parameter that parameter server `index` of
// `num_shards` owns, with its optimizer state, and the update rules over it.
//
//   dense:  block b of parameter p (elements [b*block_size, min(numel, (b+1)*block_size)))
//           when ShardOfDenseBlock(p, b, P) == index; one allocation per block holding
//           value (n) then NumSlots(kind) state slots (n each), plus its step count.
//   sparse: row r of a table when ShardOfRow(r, P) == index, created on first touch
//           (pull or push) from RowStreamSeed(seed, table, r); each row is one record
//           [value (dim) | slots (S*dim) | step (int64)] inside a slab shared by many
//           rows, indexed by a flat hash map, so a row costs little beyond its floats.
//           A row may be evicted (a table's time to live, the pserver's memory cap):
//           its slot is reused, and it comes back from the initializer when touched.
//
// It knows nothing of versions, barriers or queues: ParameterShard decides when a
// push is applied (Apply) or summed into a sync step (Accumulate, ApplyAccumulated).
//
// Thread-safety: thread-safe. mu_ guards the configuration and the parameter maps:
// Init and Load hold it exclusively, everything else shared (the mode, fixed once
// initialised, is read without it). Each dense block and each
// stripe of a table's rows has its own mutex, taken one at a time after mu_, so work
// on different blocks and stripes proceeds in parallel. Blocks and tables are never
// removed, so a ResolvedPush stays valid without any lock. A sync step's update is
// not atomic by itself: the caller keeps readers out meanwhile (SyncBarrier).
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
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.pb.h"
#include "pserver/store/disk_tier.h"
#include "pserver/store/page_warmer.h"
#include "pserver/store/shard_storage.h"

namespace pl::pserver {

class ShardStore {
 public:
  ShardStore(int index, int num_shards) : index_(index), num_shards_(num_shards) {}
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  int index() const { return index_; }
  int num_shards() const { return num_shards_; }

  // Creates the blocks and tables this shard owns that do not exist yet; returns
  // whether this call initialised the store. The first call fixes the optimizer, seed
  // and mode; a later call with a different one, or a parameter of the same name with
  // another shape/dim, is FAILED_PRECONDITION. A bad request changes nothing.
  StatusOr<bool> Init(const proto::InitRequest& request);
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
  // Async: applies a resolved push with each block's and row's own step count, and
  // writes each block's new values to its write_back, if any.
  void Apply(const ResolvedPush& push);
  // Sync: adds a resolved push's gradients to the current step's sums.
  void Accumulate(const ResolvedPush& push);
  // Sync: applies the step's sums divided by `contributors`, and clears them.
  void ApplyAccumulated(int contributors);

  // Fills `frame` with the requested blocks and rows (rows are created on first
  // touch), after checking the whole request; a bad one creates no rows. Async blocks
  // are sent in place; sync ones are copied under their lock. With `dense_out`, block
  // i goes to dense_out(i, n) instead of into the frame. Sets no version.
  Status Read(const proto::PullRequest& request, PullFrame* frame, const DenseDestination& dense_out);

  int64_t dense_elements() const { return dense_elements_.load(); }
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
  static constexpr int64_t kRowsPerPushBound = int64_t{1} << 20;
  int64_t sparse_rows() const;
  // Each table's rows, bytes and `hottest` most updated rows (most first).
  std::vector<proto::TableStats> Tables(int hottest = 10) const;

  // What a saver sees of the store (Visit), in a stable order: the configuration; each
  // dense parameter and its blocks, each block under its lock; each table and its rows
  // stripe by stripe, each stripe under its lock. An error from the visitor stops the
  // visit and is returned. Visit is FAILED_PRECONDITION on an uninitialised store.
  class Visitor {
   public:
    virtual ~Visitor() = default;
    virtual Status Config(const proto::OptimizerConfig& optimizer, uint64_t seed, bool sync,
                          size_t dense_params) = 0;
    virtual Status Param(const proto::ParamSpec& spec, size_t blocks) = 0;
    // data: value (n) then S slots of n.
    virtual Status Block(int64_t block, int64_t n, int64_t step, absl::Span<const float> data) = 0;
    virtual Status Tables(size_t tables) = 0;
    virtual Status Table(const proto::ParamSpec& spec, int stripes) = 0;
    virtual Status Stripe(size_t rows) = 0;
    virtual Status Row(int64_t id, absl::Span<const float> record) = 0;
    // Before a stripe's rows in an incremental visit: the rows evicted since the marks
    // were last taken (an id may also be among the rows, if it came back since).
    virtual Status Evicted(absl::Span<const int64_t> ids) = 0;
    // After a stripe's rows, for a table with admission (admit_after > 1): its sighting
    // counters (kSketchDepth x kSketchWidth, zeros when none yet).
    virtual Status Sightings(absl::Span<const uint16_t> counters) = 0;
  };
  // Which rows a visit shows: all of them; all, taking the change marks (a full
  // checkpoint); or only the rows changed since the marks were last taken (an
  // incremental one). Taking the marks clears them stripe by stripe as it goes.
  enum class Rows { kAll, kAllTakingChanges, kChangedTakingChanges };
  Status Visit(Visitor* visitor, Rows rows = Rows::kAll) const;

  // A snapshot's hold on every dense block's floats as they are now, in the order Visit
  // shows the blocks, without a copy: the block's next update copies them first
  // (DenseBlock::Writable), until Unpin. The caller keeps updates out while it pins (a
  // shard's order lock), and unpins before the store goes.
  struct DensePin {
    DenseBlock* block = nullptr;
    std::shared_ptr<const float[]> data;
    size_t bytes = 0;
  };
  std::vector<DensePin> PinDense() const;
  static void Unpin(const DensePin& pin);

  // From now on, every row a push updates is marked as changed (for incremental
  // checkpoints; RowStripe::MarkChanged). Idempotent.
  void TrackChanges() const { track_changes_.store(true, std::memory_order_relaxed); }
  bool tracking_changes() const { return track_changes_.load(std::memory_order_relaxed); }

  // ---- eviction (shard_store_eviction.cc) ----
  // From now on every pull and push notes when it touched each row (RowStripe::Touch),
  // so rows can be evicted; `cap_bytes` > 0 caps what sparse_bytes() counts. A table
  // with evict_after_s turns the notes on by itself. May be called again (a new cap).
  void EnableEviction(int64_t cap_bytes);
  bool evicting() const { return evicting_.load(std::memory_order_relaxed); }
  int64_t memory_cap_bytes() const { return cap_bytes_.load(std::memory_order_relaxed); }
  // The clock of those notes, in ticks of kEvictionTick (0 is before any tick: restored
  // rows not touched since count as touched then). Set by the sweeper.
  static constexpr absl::Duration kEvictionTick = absl::Milliseconds(100);
  void SetTick(uint32_t tick) { tick_.store(tick, std::memory_order_relaxed); }
  uint32_t tick() const { return tick_.load(std::memory_order_relaxed); }
  // What the cap counts: each table's rows times RowCost (record, index entry, marks).
  int64_t sparse_bytes() const;
  static int64_t RowCost(const SparseTable& t);
  // The cap evicts once sparse_bytes passes kHighWater of it, down to kLowWater.
  static constexpr double kHighWater = 0.95, kLowWater = 0.85;

  // Which rows a sweep evicts: those of a table with evict_after_s untouched for longer,
  // and, while the tables are over the cap, the least frequently updated (a row's step
  // count, which its record holds) and among those the least recently touched. By
  // frequency first because a click log's ids are drawn from a skewed law: the rows
  // worth keeping are the often-updated ones, which recency alone cannot tell from the
  // rows a batch touched once a moment ago. Rows that were hot and went cold are the
  // time to live's to evict.
  struct SweepPlan {
    std::map<std::string, uint32_t> expired_before;  // per table: rows touched before this tick
    bool cap = false;           // over the cap: rows with fewer than cap_steps updates go,
    int64_t cap_steps = 0;      // and of the rows with exactly cap_steps, those touched
    uint32_t cap_before = 0;    // before tick cap_before, and at cap_before until
    int64_t cap_bytes_at = 0;   // cap_bytes_at bytes are taken
    bool empty() const { return expired_before.empty() && !cap; }
  };
  // Steps beyond this count as equal (a row updated that often is hot enough).
  static constexpr int64_t kMaxCountedSteps = 1 << 20;
  // `ttl_due`: plan the time-to-live part too (it needs a scan of the rows, so the
  // sweeper asks for it about once a second; the cap is checked without a scan).
  SweepPlan PlanSweep(bool ttl_due) const;
  std::vector<std::string> TableNames() const;
  // Stripe `stripe` of `table`: the ids of the rows `plan` evicts (it counts down the
  // plan's cap_bytes_at), those past their time to live and those beyond the cap. With
  // `erase` they go at once, under the same lock (the cap's to the disk tier if there
  // is one); else the caller evicts them (Evict), having first sent them to its backups.
  struct Victims {
    std::vector<int64_t> expired, over_cap;
  };
  Victims SweepStripe(const std::string& table, int stripe, SweepPlan* plan, bool erase);
  // Evicts these rows of `table` (those it has), to the disk tier when `to_disk`;
  // returns how many it had. FAILED_PRECONDITION for `to_disk` without a disk tier.
  StatusOr<int64_t> Evict(const std::string& table, absl::Span<const int64_t> ids, bool to_disk = false);

  // ---- the disk tier (shard_store_disk.cc) ----
  // From now on the cap spills rows to `tier` instead of dropping them, and a pull or
  // push of a row there takes it back, so nothing the cap evicts is lost. Set before
  // serving (and before a Load, so a restore beyond the cap goes there directly).
  void AttachDiskTier(std::unique_ptr<DiskTier> tier);
  bool has_disk_tier() const { return disk_ != nullptr; }
  const DiskTier* disk_tier() const { return disk_.get(); }

  // What a restorer fills (Load). It runs while Load holds the store exclusively, so
  // what it returns may be written without further locks until `fill` returns.
  class Loader {
   public:
    // First: what the first Init fixes (an unknown optimizer is INVALID_ARGUMENT).
    Status Configure(const proto::OptimizerConfig& optimizer, uint64_t seed, bool sync);
    bool Holds(const std::string& name) const;
    // Creates a parameter or table as Init does; returns the blocks it owns here.
    StatusOr<size_t> Add(const proto::ParamSpec& spec);
    // Block b of dense parameter `name` with its step set to `step`: its value and
    // slots to fill, or an empty span when this shard holds no such block of n floats.
    absl::Span<float> Block(const std::string& name, int64_t b, int64_t n, int64_t step);
    // A new record for row `id` of `table`, to fill; empty when the row exists.
    absl::Span<float> NewRow(const std::string& table, int64_t id);
    // Row `id`'s record, new or existing, to overwrite (an incremental checkpoint's).
    absl::Span<float> Row(const std::string& table, int64_t id);
    // Evicts row `id` of `table` (an incremental checkpoint's deletions).
    void Erase(const std::string& table, int64_t id);
    // After a row of NewRow or Row was filled: with a disk tier, a row beyond the cap
    // goes there at once, so a restore never holds more than the cap in memory.
    Status Filled(const std::string& table, int64_t id);
    // Stripe `stripe`'s sighting counters of `table`, to fill (empty for an unknown table).
    absl::Span<uint16_t> Sightings(const std::string& table, int stripe);
    // The spec parameter or table `name` was created with, or null.
    const proto::ParamSpec* Spec(const std::string& name) const;
    // Blocks of dense parameter `name` held here (0 if none).
    size_t OwnedBlocks(const std::string& name) const;

   private:
    friend class ShardStore;
    explicit Loader(ShardStore* store) : store_(store) {}
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
  // Creates a parameter or table. Without initialize_values a dense block's floats are
  // left unset, for a Loader that writes every block next (the initializer's random
  // draws were most of the time a large snapshot took to install).
  Status AddParam(const proto::ParamSpec& spec, bool initialize_values = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StatusOr<DenseBlock*> FindBlock(const std::string& param, int64_t block) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Table `name` with its rows `msg` checked: in range, owned here, of its dim. With
  // `explain`, an unknown name says why (a dense parameter, or not initialised).
  StatusOr<SparseTable*> FindRows(const proto::SparseRowsMsg& msg, bool explain) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
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

  // sparse_bytes(), with mu_ held.
  int64_t SparseBytesLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Calls fn(table, its step count (at most kMaxCountedSteps), the tick it was touched
  // at) for every row, each stripe under its lock. Needs mu_ (shared).
  void ForEachRow(const std::function<void(const SparseTable&, int64_t, uint32_t)>& fn) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

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
  std::map<std::string, std::unique_ptr<DenseParam>> dense_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<SparseTable>> sparse_ ABSL_GUARDED_BY(mu_);

  // Lock-free.
  std::atomic<int64_t> dense_elements_{0};
  std::atomic<int64_t> request_payload_bytes_{0};  // largest_request_bytes without the margin
  mutable std::atomic<bool> track_changes_{false};
  std::atomic<bool> evicting_{false};
  std::unique_ptr<DiskTier> disk_;  // set before serving; then fixed
  // Moves between memory and the tier hold it shared; a whole visit (a checkpoint, a
  // snapshot) holds it exclusively, so no row is between the two places meanwhile.
  mutable absl::Mutex tier_mu_;
  std::atomic<int64_t> cap_bytes_{0};
  std::atomic<uint32_t> tick_{0};
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SHARD_STORE_H_
