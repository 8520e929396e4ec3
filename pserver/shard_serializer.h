// The shard's state as a little-endian byte stream, for checkpoints (checkpoint.cc
// frames it and adds the checksum):
//
//   u32 'PLSH' | u32 layout (1) | i32 index | i32 num_shards | u8 sync | u64 seed |
//   i64 version | bytes OptimizerConfig |
//   u32 #dense  { bytes ParamSpec | u64 #blocks { i64 block | i64 n | i64 step |
//                                                 f32 value[n] | f32 slots[S*n] } }
//   u32 #sparse { bytes ParamSpec | u32 #stripes { u64 #rows { i64 id |
//                                   f32 value[D] | f32 slots[S*D] | i64 step } } }
//   u32 'END!'
//
// where "bytes" is u64 length + data. The layout is append-only: a new one gets a new
// number and the old one stays readable.
//
// Thread-safety: these functions hold no state; they take the store's locks through
// its Visit and Load (see shard_store.h).
#ifndef PSERVER_SHARD_SERIALIZER_H_
#define PSERVER_SHARD_SERIALIZER_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "paddle_like/core/status.h"
#include "pserver/shard_store.h"

namespace pl::pserver {

// Where the bytes go and come from; each call moves exactly n bytes or fails.
using ByteWriter = std::function<Status(const void* data, size_t n)>;
using ByteReader = std::function<Status(void* data, size_t n)>;

// Writes `store` as being at `version`. The caller keeps a sync step's update out
// meanwhile when the version must match the values exactly.
Status WriteShardState(const ShardStore& store, int64_t version, const ByteWriter& write);

// Reads a stream written by WriteShardState into a fresh `store`; returns the saved
// version. DATA_LOSS for a stream that is not one; FAILED_PRECONDITION for a store that
// is not fresh, or a stream for another index or shard count.
StatusOr<int64_t> ReadShardState(const ByteReader& read, ShardStore* store);

}  // namespace pl::pserver

#endif  // PSERVER_SHARD_SERIALIZER_H_
