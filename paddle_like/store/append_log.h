// AppendLog: an append-only file of records, each framed as
//
//   uint32 length | uint32 CRC-32C of the payload | payload[length]
//
// with group commit: Append writes a record (no fsync) and returns the offset it ends
// at; Sync(offset) returns once every byte up to there is on disk. Concurrent callers
// share fsyncs: one of them syncs everything written so far while the others wait for
// it, so N events in flight cost one fsync, not N.
//
// Read gives the records of a file and says what it found at the end: a record cut
// short by a crash (its length runs past the end of the file, or it is the last record
// and fails its checksum) is a torn tail, dropped and reported; a record that fails its
// checksum with more records after it is corruption in the middle, DATA_LOSS naming its
// offset, never skipped. Open then truncates the torn tail away before appending.
//
// Thread-safety: Append, Sync and Reset are thread-safe.
#ifndef PADDLE_LIKE_STORE_APPEND_LOG_H_
#define PADDLE_LIKE_STORE_APPEND_LOG_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"
#include "paddle_like/store/record_log.h"

namespace pl {

class AppendLog {
 public:
  using Contents = LogContents;
  // The records of `path` (NOT_FOUND when it does not exist); DATA_LOSS naming the
  // offset of a corrupt record that has records after it.
  static StatusOr<Contents> Read(const std::string& path);

  // Opens `path` for appending after its first `valid_bytes` (Read's), cutting off what
  // follows; creates it (and fsyncs its directory) when missing.
  static StatusOr<std::unique_ptr<AppendLog>> Open(const std::string& path, int64_t valid_bytes);
  ~AppendLog();
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;

  // Writes one record; returns the offset it ends at (for Sync: offsets count every
  // byte appended since Open, across Resets). On failure nothing of the record stays in
  // the file.
  StatusOr<int64_t> Append(absl::string_view payload);
  // Returns once the file is on disk up to `offset` (group commit).
  Status Sync(int64_t offset);
  // Empties the file (after a snapshot made its records redundant), durably; every
  // Sync waiting on what it held returns.
  Status Reset();
  // Bytes in the file now.
  int64_t size() const;
  const std::string& path() const { return path_; }

 private:
  AppendLog(std::string path, int fd, int64_t size) : path_(std::move(path)), fd_(fd), written_(size), synced_(size) {}

  const std::string path_;
  const int fd_;
  mutable std::mutex mu_;
  std::condition_variable synced_cv_;
  int64_t base_ = 0;  // guarded by mu_: the offset the file's first byte has
  int64_t written_;   // guarded by mu_
  int64_t synced_;    // guarded by mu_
  bool syncing_ = false;  // guarded by mu_: a caller is in fsync
};

}  // namespace pl

#endif  // PADDLE_LIKE_STORE_APPEND_LOG_H_
