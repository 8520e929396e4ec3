// Where each piece of a parameter lives among P parameter servers. Dense parameters
// are cut into blocks of `block_size` elements; block b of parameter p lives on shard
// (hash(p) + b) mod P: a parameter's blocks go round the pservers from a start its name
// picks, so a big matrix spreads evenly (a hash per block left 73% of the mlp on one of
// 2 pservers and 61% on one of 4, pl-bench-scaling). Row r of a sparse table lives on
// shard hash(r) mod P. Pure functions: trainers and pservers compute the same placement
// independently.
#ifndef PADDLE_LIKE_DIST_SHARDING_H_
#define PADDLE_LIKE_DIST_SHARDING_H_

#include <cstdint>
#include <string>

#include "paddle_like/core/random.h"

namespace pl {

// 64 Ki floats (256 KiB): large enough that per-block overhead is negligible, small
// enough that one big matrix spreads over every pserver.
inline constexpr int64_t kDefaultBlockSize = 1 << 16;

inline int64_t NumBlocks(int64_t numel, int64_t block_size) {
  return (numel + block_size - 1) / block_size;
}

inline int ShardOfDenseBlock(absl::string_view param, int64_t block, int num_shards) {
  const uint64_t start = NameHash(param) % static_cast<uint64_t>(num_shards);
  return static_cast<int>((start + static_cast<uint64_t>(block)) % static_cast<uint64_t>(num_shards));
}

inline int ShardOfRow(int64_t row, int num_shards) {
  return static_cast<int>(MixSeed(0x5bd1e995ULL, static_cast<uint64_t>(row)) %
                          static_cast<uint64_t>(num_shards));
}

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_SHARDING_H_
