// The storage records behind ShardStore, and a push once the store has validated it
// (private to the shard's parts: shard_store, async_applier, shard).
//
//   S = NumSlots(optimizer kind), D = a table's row width, n = a block's length.
//
// Thread-safety: a DenseBlock's and a RowStripe's mutable fields are guarded by the
// record's own mutex (ShardStore takes them); everything else is fixed at creation.
// Blocks, tables and stripes are never removed while their store lives, so pointers to
// them stay valid; a row may be evicted (its slot is then reused), so a row's pointer
// is good only while its stripe's lock is held.
#ifndef PSERVER_STORE_SHARD_STORAGE_H_
#define PSERVER_STORE_SHARD_STORAGE_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "paddle_like/dist/page_warmer.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.pb.h"
#include "pserver/store/hot_rows.h"
#include "pserver/store/norm_guard.h"
#include "pserver/store/row_index.h"

namespace pl::pserver {

// Where dense block i of a pull or push (with `n` floats) is to be written (a trainer's
// shared-memory region), or an error naming the bad span.
using DenseDestination = std::function<StatusOr<float*>(int i, int64_t n)>;

// Rows of a table are spread over this many independently locked stripes.
inline constexpr int kRowStripes = 64;
// A row slot is (slab << kSlabShift) | position; slabs grow from 16 rows to 4096, so a
// small table wastes little and a large one allocates in big pieces.
inline uint32_t SlabRows(size_t slab) {
  return 16u << std::min<size_t>(slab, kSlabShift - 4);
}
// Independent of ShardOfRow's hash, so the rows one shard owns fill every stripe.
inline int StripeOf(int64_t id) {
  return static_cast<int>(MixSeed(0x2545f4914f6cdd1dULL, static_cast<uint64_t>(id)) % kRowStripes);
}

struct DenseBlock {
  // The (1 + S) * n floats of a block, uninitialised; a large one on huge pages
  // (paddle_like/dist/page_warmer.h), which a joiner's snapshot or a restore faults in
  // five times faster.
  static std::shared_ptr<float[]> Allocate(int64_t floats) {
    std::shared_ptr<float[]> data(new float[floats]);
    AdviseHugePages(data.get(), static_cast<size_t>(floats) * sizeof(float));
    return data;
  }

  absl::Mutex mu;
  int64_t block = 0;
  int64_t offset = 0;
  int64_t n = 0;
  int64_t step ABSL_GUARDED_BY(mu) = 0;  // updates applied to this block (a schedule's count)
  // The step a trainer's copy restored this block at (DenseStore::Restore), 0 if never:
  // the optimizer's own count (Adam's bias correction) runs from there, with its state.
  int64_t restarted_at ABSL_GUARDED_BY(mu) = 0;
  // (1 + S) * n: value (n), then S slots of n. Shared: an async pull sends the values
  // in place, and gRPC may hold them a little longer than the shard exists.
  std::shared_ptr<float[]> data;
  std::unique_ptr<float[]> accum;        // sync: (n) gradient sum of the current step
  // Virtual trainers: the (n) values the last step replaced, for a pull of that step's
  // version exactly (PullRequest.exact_version); has_previous false: the last step left
  // the block as it was.
  std::unique_ptr<float[]> previous;
  bool has_previous ABSL_GUARDED_BY(mu) = false;
  bool has_accum ABSL_GUARDED_BY(mu) = false;
  bool accum_delta ABSL_GUARDED_BY(mu) = false;  // accum sums changes (PushRequest.delta), not gradients
  // Snapshots (ShardSnapshot) holding `data` as it is now: an update gives the block a
  // copy of its own first (Writable), so that theirs stays as it was when taken.
  int pins ABSL_GUARDED_BY(mu) = 0;

  // The (1 + S) * n floats an update may change in place: `data`, copied first if a
  // snapshot holds it. (A pull sending the old buffer keeps it alive, as before.)
  float* Writable(int slots) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (pins > 0) {
      const int64_t floats = (1 + slots) * n;
      std::shared_ptr<float[]> own = Allocate(floats);
      std::memcpy(own.get(), data.get(), floats * sizeof(float));
      data = std::move(own);
      pins = 0;
    }
    return data.get();
  }
};

struct DenseParam {
  proto::ParamSpec spec;
  InitSpec init;
  int64_t numel = 0;
  int64_t block_size = 0;
  std::map<int64_t, std::unique_ptr<DenseBlock>> blocks;  // owned blocks only
};

// Row record (stride floats): value (D) | slots (S*D) | step (int64 in 2 floats).
struct RowStripe {
  absl::Mutex mu;
  // Per slab, the id of each slot's row; the index hashes through it (row_index.h).
  std::vector<std::unique_ptr<int64_t[]>> ids_in ABSL_GUARDED_BY(mu);
  RowIndex index ABSL_GUARDED_BY(mu){&ids_in};  // id -> slot
  std::vector<std::unique_ptr<float[]>> slabs ABSL_GUARDED_BY(mu);
  uint32_t used_in_last ABSL_GUARDED_BY(mu) = 0;
  // Incremental checkpoints (SparseStore::TrackChanges): the rows updated since the
  // marks were last taken, as (id, slot), each once: a row's entry in `marked_in` (per
  // slab, made while tracking) says in which generation it was last marked. An array
  // read per update, no hashing: marking costs a few percent of a sparse push.
  std::vector<std::pair<int64_t, uint32_t>> changed ABSL_GUARDED_BY(mu);
  std::vector<std::unique_ptr<uint32_t[]>> marked_in ABSL_GUARDED_BY(mu);
  uint32_t generation ABSL_GUARDED_BY(mu) = 1;
  HotRows hot ABSL_GUARDED_BY(mu);  // the stripe's most pushed rows
  // Virtual trainers: what a pull read of each row the last step updated, before it did
  // (PullRequest.exact_version); cleared by every step.
  absl::flat_hash_map<int64_t, std::vector<float>> previous ABSL_GUARDED_BY(mu);
  // Admission (SparseTable::admit_after > 1): how often each id without a row was pushed,
  // a count-min sketch of kSketchDepth x kSketchWidth saturating counters (8 KB per
  // stripe, whatever the number of ids). Part of the state (snapshots, checkpoints), so
  // replicas that apply the same pushes admit the same ids.
  static constexpr int kSketchDepth = 4;
  static constexpr int kSketchWidth = 1024;
  std::unique_ptr<uint16_t[]> sightings ABSL_GUARDED_BY(mu);
  // The sum of the sketch's first row, derived from the counters (-1: to be summed).
  int64_t sightings_sum ABSL_GUARDED_BY(mu) = -1;
  // Counts one more sighting of `id` and returns the estimate, which never undercounts
  // the sightings since the counters were last halved. Every counter of the id grows
  // (saturating), not only the smallest ones: the plain update does not depend on the
  // order of the ids, which a sync step's map does not fix. Once the counters average
  // 2 x admit_after they are all halved, so the sketch counts recent sightings and never
  // fills up: a table of millions of ids would otherwise soon admit every id. The
  // trigger is a function of the counters alone, so every replica halves at the same
  // sighting.
  int64_t Sight(int64_t id, int64_t admit_after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    constexpr int kCounters = kSketchDepth * kSketchWidth;
    if (!sightings) {
      sightings.reset(new uint16_t[kCounters]());
      sightings_sum = 0;
    }
    if (sightings_sum < 0) sightings_sum = SumOfFirstRow();
    uint16_t least = UINT16_MAX;
    for (int d = 0; d < kSketchDepth; ++d) {
      const uint64_t h = MixSeed(0x9e3779b97f4a7c15ULL * (d + 1), static_cast<uint64_t>(id));
      uint16_t& c = sightings[d * kSketchWidth + h % kSketchWidth];
      if (c < UINT16_MAX) {
        ++c;
        if (d == 0) ++sightings_sum;
      }
      least = std::min(least, c);
    }
    if (sightings_sum >= 2 * admit_after * kSketchWidth) {
      for (int i = 0; i < kCounters; ++i) sightings[i] >>= 1;
      sightings_sum = SumOfFirstRow();
    }
    return least;
  }
  int64_t SumOfFirstRow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int64_t sum = 0;
    for (int i = 0; i < kSketchWidth; ++i) sum += sightings[i];
    return sum;
  }
  // Eviction (ShardStore::EnableEviction): per slab, the clock tick at which each row was
  // last pulled or pushed (allocated once a row is touched with eviction on; a row
  // without one counts as touched at tick 0); the slots of evicted rows, which Insert
  // reuses before a slab grows; the ids evicted since the change marks were last taken
  // (while tracking changes, for incremental checkpoints), and whether any row was
  // evicted since then (entries of `changed` may then name a slot another row now has).
  std::vector<std::unique_ptr<uint32_t[]>> touched_in ABSL_GUARDED_BY(mu);
  std::vector<uint32_t> free_slots ABSL_GUARDED_BY(mu);
  std::vector<int64_t> evicted ABSL_GUARDED_BY(mu);
  bool evicted_since_take ABSL_GUARDED_BY(mu) = false;
  void Touch(uint32_t slot, uint32_t tick) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const uint32_t slab = slot >> kSlabShift;
    while (touched_in.size() <= slab) touched_in.emplace_back(new uint32_t[SlabRows(touched_in.size())]());
    touched_in[slab][slot & kSlabPosMask] = tick;
  }
  uint32_t TouchedAt(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const uint32_t slab = slot >> kSlabShift;
    return slab < touched_in.size() ? touched_in[slab][slot & kSlabPosMask] : 0;
  }
  // Removes row `id` (false if it has none); its slot goes to the free list.
  bool Erase(int64_t id, bool track) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const std::optional<uint32_t> erased = index.Erase(id);
    if (!erased) return false;
    const uint32_t slot = *erased;
    free_slots.push_back(slot);
    // The slot's next row must be marked afresh when it changes.
    if (const uint32_t slab = slot >> kSlabShift; slab < marked_in.size()) marked_in[slab][slot & kSlabPosMask] = 0;
    if (track) evicted.push_back(id);
    evicted_since_take = true;
    return true;
  }
  // Sync: id -> offset into accum (D floats each), gradient sums of the current step.
  absl::flat_hash_map<int64_t, uint32_t> accum_index ABSL_GUARDED_BY(mu);
  std::vector<float> accum ABSL_GUARDED_BY(mu);

  float* At(uint32_t slot, int64_t stride) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return slabs[slot >> kSlabShift].get() + static_cast<int64_t>(slot & kSlabPosMask) * stride;
  }
  void MarkChanged(int64_t id, uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const uint32_t slab = slot >> kSlabShift;
    while (marked_in.size() <= slab) marked_in.emplace_back(new uint32_t[SlabRows(marked_in.size())]());
    uint32_t& mark = marked_in[slab][slot & kSlabPosMask];
    if (mark == generation) return;
    mark = generation;
    changed.emplace_back(id, slot);
  }
  void TakeChanges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    changed.clear();
    evicted.clear();
    evicted_since_take = false;
    if (++generation == 0) {  // after 2^32 - 1 checkpoints: forget every mark, start again
      for (size_t i = 0; i < marked_in.size(); ++i) std::fill_n(marked_in[i].get(), SlabRows(i), 0u);
      generation = 1;
    }
  }
  // A fresh, uninitialised record for `id`: an evicted row's slot, else a new one.
  float* Insert(int64_t id, int64_t stride) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!free_slots.empty()) {
      const uint32_t slot = free_slots.back();
      free_slots.pop_back();
      ids_in[slot >> kSlabShift][slot & kSlabPosMask] = id;
      index.Insert(slot);
      return At(slot, stride);
    }
    if (slabs.empty() || used_in_last == SlabRows(slabs.size() - 1)) {
      slabs.emplace_back(new float[static_cast<size_t>(SlabRows(slabs.size())) * stride]);
      ids_in.emplace_back(new int64_t[SlabRows(ids_in.size())]);
      used_in_last = 0;
    }
    const uint32_t slot = (static_cast<uint32_t>(slabs.size() - 1) << kSlabShift) | used_in_last++;
    ids_in[slot >> kSlabShift][slot & kSlabPosMask] = id;
    index.Insert(slot);
    return At(slot, stride);
  }
};

// A message's rows grouped by stripe, each group in the message's order: a push or pull
// takes each stripe's lock once, and different stripes can run on different threads.
// Every piece of a row's state (and the sketch and hot-row counts) is its stripe's, so
// the result is the message order's, bit for bit, whatever runs in parallel.
struct RowsByStripe {
  std::vector<uint32_t> order;                  // positions in the message, stripe by stripe
  std::array<uint32_t, kRowStripes + 1> begin{};  // stripe s: order[begin[s], begin[s + 1])

  explicit RowsByStripe(const proto::SparseRowsMsg& msg) {
    const int n = msg.ids_size();
    std::vector<uint8_t> stripe_of(n);
    for (int i = 0; i < n; ++i) {
      stripe_of[i] = static_cast<uint8_t>(StripeOf(msg.ids(i)));
      ++begin[stripe_of[i] + 1];
    }
    for (int s = 0; s < kRowStripes; ++s) begin[s + 1] += begin[s];
    std::array<uint32_t, kRowStripes> next;
    std::copy(begin.begin(), begin.end() - 1, next.begin());
    order.resize(n);
    for (int i = 0; i < n; ++i) order[next[stripe_of[i]]++] = static_cast<uint32_t>(i);
  }
};

struct SparseTable {
  proto::ParamSpec spec;
  InitSpec init;
  int64_t dim = 0;
  int64_t stride = 0;  // floats per row record: dim * (1 + S) + 2
  int64_t admit_after = 0;  // > 1: a new id gets its row at its admit_after-th pushed update
  int64_t evict_after_s = 0;  // > 0: a row neither pulled nor pushed for this long is evicted
  // The table's own optimizer (ParamSpec.optimizer) resolved, else unset: the store's.
  std::optional<OptimizerSpec> optimizer;
  std::optional<UpdateRule> rule;
  std::unique_ptr<RowStripe[]> stripes;
  std::atomic<int64_t> rows{0};
  std::atomic<int64_t> admitted{0};  // rows created by admission
  std::atomic<int64_t> evicted{0};   // rows evicted
  std::atomic<int64_t> spilled{0};   // rows the cap moved to the disk tier

  int64_t step_offset() const { return stride - 2; }
  int64_t GetStep(const float* row) const {
    int64_t s;
    std::memcpy(&s, row + step_offset(), sizeof(s));
    return s;
  }
  void SetStep(float* row, int64_t s) const { std::memcpy(row + step_offset(), &s, sizeof(s)); }
};

// A validated push: where each payload goes and its floats, read in place.
// What an error says after a name a shard holds none of the kind asked for: "(it is a
// sparse table)", "(not initialised here)".
using WhyNot = std::function<const char*(const std::string& name)>;

struct ResolvedPush {
  struct Dense {
    DenseBlock* block;
    const FloatPieces* grad;      // (n), where gRPC received it
    float* write_back = nullptr;  // where the block's new values go once applied (n), if anywhere
  };
  struct Sparse {
    SparseTable* table;
    const proto::SparseRowsMsg* msg;
    FloatView grad;  // (ids, D)
  };
  std::vector<Dense> dense;
  std::vector<Sparse> sparse;
  int64_t rows = 0;
  bool delta = false;  // PushRequest.delta: the dense payloads are changes to add
  // With the finite check (a primary's validation): each parameter's and table's norm
  // in this push, for the NormGuard.
  std::vector<ParamNorm> norms;
};

// A push on its way through the shard: it owns the frame its resolved payloads point
// into, so it can wait in the applier's queue after its call returned.
struct PendingPush {
  explicit PendingPush(PushFrame f) : frame(std::move(f)) {}
  PushFrame frame;
  ResolvedPush resolved;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SHARD_STORAGE_H_
