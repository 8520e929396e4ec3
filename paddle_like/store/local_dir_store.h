// LocalDirStore: the embedded StateStore, one file per key under a directory. It needs
// no server, which makes it the default for local runs and for a master on a
// persistent volume.
//
// Each value is stored as "<dir>/<key>" in a framed file (magic, format version,
// length, CRC-32C of the value, CRC-32C of the header). Put writes a temporary file,
// fsyncs it, keeps the current copy as "<key>.prev" when that copy is valid, renames
// the new one into place and fsyncs the directory: a crash at any point leaves a
// valid newest-or-previous copy. Get returns the newest copy that passes its
// checksums; when it has to skip a corrupt one it says so through Options::warn and
// counts it (corrupt_copies_skipped).
//
// One process owns a directory at a time: Open takes an exclusive lock (flock on
// "<dir>/.lock") and fails with FAILED_PRECONDITION while another LocalDirStore,
// in this process or another, holds it.
//
// Thread-safety: all methods are thread-safe (one mutex per store).
#ifndef PADDLE_LIKE_STORE_LOCAL_DIR_STORE_H_
#define PADDLE_LIKE_STORE_LOCAL_DIR_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "paddle_like/store/state_store.h"

namespace pl {

class LocalDirStore final : public StateStore {
 public:
  struct Options {
    // Receives one line per problem that Get worked around (a corrupt newest copy).
    // Default: the line goes to stderr prefixed with "pl state store: ".
    std::function<void(const std::string&)> warn;
  };

  // Creates `dir` (and its parents) when missing, takes its lock and removes
  // temporary files left by a crashed writer.
  static StatusOr<std::unique_ptr<LocalDirStore>> Open(const std::string& dir, Options options = {});
  ~LocalDirStore() override;

  Status Put(const std::string& key, absl::string_view value) override;
  StatusOr<std::string> Get(const std::string& key) override;
  Status Delete(const std::string& key) override;
  StatusOr<std::vector<std::string>> List(const std::string& prefix) override;

  const std::string& dir() const { return dir_; }
  // Corrupt copies Get has skipped since Open.
  int64_t corrupt_copies_skipped() const { return corrupt_skipped_.load(); }

 private:
  LocalDirStore(std::string dir, Options options, int lock_fd);

  void Warn(const std::string& line);

  const std::string dir_;
  const Options options_;
  const int lock_fd_;
  std::atomic<int64_t> corrupt_skipped_{0};
  std::mutex mu_;  // serialises every file operation on dir_
  uint64_t tmp_counter_ = 0;  // guarded by mu_
};

// The on-disk frame, exposed for tests and tools that inspect a state directory.
std::string EncodeStoreFrame(absl::string_view value);
// The value inside `frame`; DATA_LOSS saying what is wrong (bad magic, unknown format
// version, truncated, checksum mismatch).
StatusOr<std::string> DecodeStoreFrame(absl::string_view frame);

}  // namespace pl

#endif  // PADDLE_LIKE_STORE_LOCAL_DIR_STORE_H_
