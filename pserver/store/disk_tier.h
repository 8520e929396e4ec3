// DiskTier: where a pserver keeps the sparse rows its memory cap pushed out, so that a
// table larger than the cap loses nothing (pl-pserver --sparse_disk_dir). A row lives
// either in memory (ShardStore's stripes) or here, never both: the cap spills a cold row
// here (Put) and the next pull or push of it takes it back (Take).
//
// Built on RocksDB (Debian's librocksdb): its index is per block of keys, held partly on
// disk, with a Bloom filter that answers "not here" for a new id without a read. An own
// log-structured file would need an in-memory index entry per row (id and offset, some
// 24 bytes), which for a table ten times the cap is itself larger than the cap. Its
// memory is bounded: write buffers and block cache are sized from the cap.
//
// Keys are the table's name, a 0 byte and the id (big-endian); values the row's record
// (value, optimizer slots, step). The directory is scratch: Open empties it, as the
// shard's state comes from checkpoints, which include the rows here.
//
// Thread-safety: thread-safe (RocksDB's own locking; the counters are atomic). A caller
// moving one row between memory and disk holds that row's stripe lock, so a row is never
// in both places as seen from the store.
#ifndef PSERVER_STORE_DISK_TIER_H_
#define PSERVER_STORE_DISK_TIER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "paddle_like/core/status.h"

namespace rocksdb {
class DB;
}

namespace pl::pserver {

class DiskTier {
 public:
  // Opens (and empties) `dir`; `memory_bytes` bounds RocksDB's write buffers and cache.
  static StatusOr<std::unique_ptr<DiskTier>> Open(const std::string& dir, int64_t memory_bytes);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const std::string& dir() const { return dir_; }
  // Stores row `id` of `table` (which must not be here already).
  Status Put(const std::string& table, int64_t id, absl::Span<const float> record);
  // Moves row `id` of `table` into `record` (its size) and removes it here; false when
  // it is not here.
  StatusOr<bool> Take(const std::string& table, int64_t id, absl::Span<float> record);
  // Calls fn(id, record) for every row of `table` here, in id order; an error from fn
  // stops it. Rows put or taken meanwhile may or may not be seen.
  Status ForEach(const std::string& table, int64_t record_floats,
                 const std::function<Status(int64_t id, absl::Span<const float> record)>& fn) const;
  // Rows of `table` here (exact: this class counts its puts and takes).
  int64_t rows(const std::string& table) const;
  int64_t rows() const { return rows_.load(std::memory_order_relaxed); }
  // The size of the database's files.
  int64_t bytes_on_disk() const;

  // A disk that fails under a shard cannot be worked around without losing rows: the
  // pserver stops, with a one-line cause (its replicas or checkpoints take over).
  [[noreturn]] static void StopOnFailure(const Status& s);

 private:
  DiskTier(std::string dir, std::unique_ptr<rocksdb::DB> db);
  void Count(const std::string& table, int64_t delta);

  const std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::atomic<int64_t> rows_{0};
  mutable absl::Mutex counts_mu_;
  absl::flat_hash_map<std::string, int64_t> table_rows_ ABSL_GUARDED_BY(counts_mu_);
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_DISK_TIER_H_
