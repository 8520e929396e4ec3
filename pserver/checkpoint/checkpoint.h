// Checkpoints of one ParameterShard under <dir>/pserver-<index>/: full ones,
// ckpt-<seq>.bin, and incremental ones, ckpt-<seq>.delta, holding only the rows changed
// since the checkpoint before (every dense block still: they are small and every step
// changes them). Every `full_every`-th checkpoint is full, and so is the first of a
// process and the one after a failed save (the changes a failed delta took are written
// by none). The newest `keep` full ones are kept with the deltas after them. A file is
//
//   "PLPSCKPT" | u32 format (1) | shard state (shard_serializer.h) | u32 crc32c
//
// with the CRC-32C over everything before it. Written atomically (temporary file,
// fsync, rename, directory fsync), so a crash leaves the previous file intact.
//
// Restore: the newest full checkpoint whose checksum holds, then the deltas after it in
// order, each checked before any of it is read, up to the first corrupt or missing one
// (the state before it is used, and a line says what was passed over). A corrupt full
// one is passed over for the one before, with the deltas between the two.
//
// Checkpoint time grows with the rows changed, not the table: the shard marks the rows
// each push updates once Save has seen it (SparseStore::TrackChanges).
//
// Thread-safety: Save may be called from several threads (calls are serialised);
// RestoreLatest is meant for startup.
#ifndef PSERVER_CHECKPOINT_CHECKPOINT_H_
#define PSERVER_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "paddle_like/core/status.h"
#include "pserver/store/shard.h"

namespace pl::pserver {

class Checkpointer {
 public:
  // `dir` is the job's checkpoint root; this shard's files go under pserver-<index>.
  // full_every: 1 makes every checkpoint full.
  Checkpointer(std::string dir, int index, int keep = 2, int full_every = 10);

  const std::string& shard_dir() const { return shard_dir_; }

  // Writes the shard as the next checkpoint (full or incremental, see above) and removes
  // what is no longer needed. Returns the new file's path. Takes the shard's change
  // marks, so one Checkpointer saves a shard.
  StatusOr<std::string> Save(const ParameterShard& shard);

  struct Restored {
    std::unique_ptr<ParameterShard> shard;  // null when there is no valid checkpoint
    std::string path;                       // the newest file restored (the chain's last)
    std::vector<std::string> chain;         // the full checkpoint, then the deltas applied
    std::vector<std::string> skipped;       // "<path>: <why>" for each corrupt file passed over
  };
  // Loads the newest valid checkpoint into a new shard (index, num_shards). A file for
  // another shard count is FAILED_PRECONDITION (not skipped: resuming the job from an
  // older file would silently lose progress). `prepare`, if set, readies each new
  // shard before it loads (a disk tier, so a restore beyond the memory cap goes there).
  StatusOr<Restored> RestoreLatest(int num_shards, const std::function<Status(ParameterShard*)>& prepare = nullptr);

  // Checkpoint files present, newest first.
  std::vector<std::string> List() const;

  // Loads one full checkpoint into a fresh shard: DATA_LOSS naming the file when it is
  // corrupt.
  static Status Load(const std::string& path, ParameterShard* shard);
  // A full checkpoint and the deltas after it (Restored::chain) into a fresh shard.
  static Status LoadChain(const std::vector<std::string>& chain, ParameterShard* shard);

 private:
  // Checks a file's checksum without parsing it.
  static Status Verify(const std::string& path);
  // Parses a verified file into `shard`: a full one (fresh shard) or a delta.
  static Status Parse(const std::string& path, bool delta, ParameterShard* shard);
  // Removes what restoring no longer needs: all but the newest `keep_` full checkpoints
  // and the deltas after them.
  void Prune();

  const std::string shard_dir_;
  const int index_;
  const int keep_;
  const int full_every_;
  absl::Mutex mu_;
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = -1;
  int saves_since_full_ ABSL_GUARDED_BY(mu_) = 0;
  bool need_full_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace pl::pserver

#endif  // PSERVER_CHECKPOINT_CHECKPOINT_H_
