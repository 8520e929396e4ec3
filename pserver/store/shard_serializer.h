// The shard's state as a little-endian byte stream, for checkpoints (checkpoint.cc
// frames it and adds the checksum):
//
//   u32 'PLSH' | u32 layout (1) | i32 index | i32 num_shards | u8 sync | u64 seed |
//   i64 version | bytes OptimizerConfig |
//   u32 #dense  { bytes ParamSpec | u64 #blocks { i64 block | i64 n | i64 step |
//                                                 f32 value[n] | f32 slots[S*n] } }
//   u32 #sparse { bytes ParamSpec | u32 #stripes { u64 #rows { i64 id |
//                                   f32 value[D] | f32 slots[S*D] | i64 step }
//                                   [u16 sightings[4*1024] if ParamSpec.admit_after > 1] } }
//   u32 'END!'
//
// Layout 2, an incremental state, is the same with only the rows changed since the
// state it applies to (every dense block is in it still: dense parameters are small
// beside embedding tables, and every step changes them all). Layout 3, the incremental
// state written now, adds to each stripe, before its rows, the rows evicted since:
//                                   u64 #evicted { i64 id }
// (a row evicted and touched again since is in both: evict first, then the row).
//
// Layout 4, a joining replica's snapshot (shard_replication.cc), is layout 1 with every
// dense block's floats moved after the end tag, in the order of the blocks' headers:
//   ... { i64 block | i64 n | i64 step } ... u32 'END!' | f32 block data ...
// so that a reader knows where each byte of the bulk goes before it arrives, and can
// read it on several connections at once (snapshot_lanes.h).
//
// where "bytes" is u64 length + data. The layout is append-only: a new one gets a new
// number and the old one stays readable.
//
// Thread-safety: these functions hold no state; they take the store's locks through
// its Visit and Load (see shard_store.h).
#ifndef PSERVER_STORE_SHARD_SERIALIZER_H_
#define PSERVER_STORE_SHARD_SERIALIZER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/types/span.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/byte_io.h"
#include "pserver/store/shard_store.h"

namespace pl::pserver {

// Writes `store` as being at `version`. The caller keeps a sync step's update out
// meanwhile when the version must match the values exactly. `rows`: which rows, and
// whether the change marks are taken (ShardStore::Rows); kChangedTakingChanges writes
// layout 3.
Status WriteShardState(const ShardStore& store, int64_t version, const ByteWriter& write,
                       ShardStore::Rows rows = ShardStore::Rows::kAll);

// Layout 4 without its dense floats; a snapshot sends those after it from the blocks it
// pinned (ShardStore::PinDense, in the visit's order).
Status WriteShardStateHead(const ShardStore& store, int64_t version, const ByteWriter& write);

// Reads a stream written by WriteShardState (or a layout-4 one) into a fresh `store`;
// returns the saved version. DATA_LOSS for a stream that is not one;
// FAILED_PRECONDITION for a store that is not fresh, or a stream for another index or
// shard count. A layout-4 payload goes through `scatter` when given, else through
// `read`; either way the store counts as loaded only once the payload is in.
StatusOr<int64_t> ReadShardState(const ByteReader& read, ShardStore* store, const ScatterReader& scatter = nullptr);
// Applies an incremental state (layout 2 or 3) onto `store`, which holds the state it was
// taken after; returns its version. DATA_LOSS as above, or for a whole state; a store
// left half-changed by a DATA_LOSS must be loaded again from its base.
StatusOr<int64_t> ApplyShardDelta(const ByteReader& read, ShardStore* store);

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SHARD_SERIALIZER_H_
