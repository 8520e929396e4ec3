// Checkpoints of one ParameterShard: <dir>/pserver-<index>/ckpt-<seq>.bin, the newest
// `keep` kept. A file is
//
//   "PLPSCKPT" | u32 format (1) | shard state (shard_serializer.h) | u32 crc32c
//
// with the CRC-32C over everything before it. Written atomically (temporary file,
// fsync, rename, directory fsync), so a crash leaves the previous file intact. Restore
// verifies a file's checksum before parsing any of it, and skips a corrupt newest
// file for the one before (logging a line naming it).
//
// Thread-safety: Save may be called from several threads (calls are serialised);
// RestoreLatest is meant for startup.
#ifndef PSERVER_CHECKPOINT_H_
#define PSERVER_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "paddle_like/core/status.h"
#include "pserver/shard.h"

namespace pl::pserver {

class Checkpointer {
 public:
  // `dir` is the job's checkpoint root; this shard's files go under pserver-<index>.
  Checkpointer(std::string dir, int index, int keep = 2);

  const std::string& shard_dir() const { return shard_dir_; }

  // Writes the shard as the next checkpoint and removes all but the newest `keep`.
  // Returns the new file's path.
  StatusOr<std::string> Save(const ParameterShard& shard);

  struct Restored {
    std::unique_ptr<ParameterShard> shard;  // null when there is no valid checkpoint
    std::string path;
    std::vector<std::string> skipped;       // "<path>: <why>" for each corrupt file passed over
  };
  // Loads the newest valid checkpoint into a new shard (index, num_shards). A file for
  // another shard count is FAILED_PRECONDITION (not skipped: resuming the job from an
  // older file would silently lose progress).
  StatusOr<Restored> RestoreLatest(int num_shards);

  // Checkpoint files present, newest first.
  std::vector<std::string> List() const;

  // Loads one file into a fresh shard: DATA_LOSS naming the file when it is corrupt.
  static Status Load(const std::string& path, ParameterShard* shard);

 private:
  const std::string shard_dir_;
  const int index_;
  const int keep_;
  absl::Mutex mu_;
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace pl::pserver

#endif  // PSERVER_CHECKPOINT_H_
