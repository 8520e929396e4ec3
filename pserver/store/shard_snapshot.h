// A primary's snapshot of its shard for a joining replica (ParameterShard::
// RequestSnapshot), in the byte layout ParameterShard::LoadSnapshot reads: a copied
// head (header, push ledger, the state but its dense floats), then the dense floats,
// which stay in the shard's own blocks, pinned (ShardStore::PinDense) rather than
// copied. Taking one under the order lock so costs the head alone, where a copy of a
// 206 MB shard held the shard's pushes for about 150 ms; a block updated before it is
// sent is copied then, by that update (DenseBlock::Writable), and each block is released
// as soon as its last byte is sent, so the primary holds a second copy only of the
// blocks updated while still unsent.
//
// Thread-safety: Send may run concurrently for disjoint ranges (the lanes of
// snapshot_lanes.h); Release and destruction must not race Send. The store the blocks
// belong to must outlive the snapshot (or its Release).
#ifndef PSERVER_STORE_SHARD_SNAPSHOT_H_
#define PSERVER_STORE_SHARD_SNAPSHOT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "pserver/store/shard_serializer.h"
#include "pserver/store/shard_store.h"

namespace pl::pserver {

class ShardSnapshot {
 public:
  ShardSnapshot() = default;  // empty: an in-sync backup needs none
  ShardSnapshot(std::string head, std::vector<ShardStore::DensePin> pins);
  ~ShardSnapshot() { Release(); }
  ShardSnapshot(ShardSnapshot&&) = default;
  ShardSnapshot& operator=(ShardSnapshot&& other) noexcept;
  ShardSnapshot(const ShardSnapshot&) = delete;
  ShardSnapshot& operator=(const ShardSnapshot&) = delete;

  bool empty() const { return size_ == 0; }
  uint64_t size() const { return size_; }
  // The dense floats: the last payload_bytes() of the snapshot.
  uint64_t payload_bytes() const { return size_ - head_.size(); }

  // Hands bytes [from, to) to `write`, in order, in as few calls as they are stored;
  // a block whose every byte has been handed over (by any call) is released.
  Status Send(uint64_t from, uint64_t to, const ByteWriter& write);
  // The whole snapshot, copied (the blocks stay pinned).
  std::string Bytes() const;
  // Lets go of every block still pinned.
  void Release();
  // How long taking it held the shard's updates (the order lock), for the logs.
  absl::Duration taken_in() const { return taken_in_; }
  void set_taken_in(absl::Duration d) { taken_in_ = d; }

 private:
  struct Part {
    ShardStore::DensePin pin;
    uint64_t at = 0;  // its offset in the payload
    std::atomic<uint64_t> unsent{0};
  };
  std::string head_;
  std::vector<std::unique_ptr<Part>> parts_;
  uint64_t size_ = 0;
  absl::Duration taken_in_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SHARD_SNAPSHOT_H_
