// Whole-file reads and crash-safe whole-file writes.
//
// WriteFileAtomically leaves either the old contents or the new ones at `path`, never
// a mix: it writes a temporary file in the same directory, fsyncs it, renames it over
// `path` and fsyncs the directory so the rename itself survives a crash. Writers that
// produce their data in pieces use AtomicFileWriter for the same guarantee.
//
// Thread-safety: the functions are thread-safe for distinct paths; concurrent writers
// of one path each leave a complete file, the last rename wins. An AtomicFileWriter is
// used by one thread.
#ifndef PADDLE_LIKE_IO_ATOMIC_FILE_H_
#define PADDLE_LIKE_IO_ATOMIC_FILE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"

namespace pl {

Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// The whole file. NOT_FOUND naming the path when it does not exist.
StatusOr<std::string> ReadFile(const std::string& path);

// Streams a file into place: Open() creates "<path>.tmp.<pid>.<n>", Append() writes,
// Commit() fsyncs, renames over `path` and fsyncs the directory. Destroying an
// uncommitted writer removes the temporary file, so a failed save leaves `path` as it was.
class AtomicFileWriter {
 public:
  AtomicFileWriter() = default;
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status Open(const std::string& path);
  Status Append(absl::string_view data);
  Status Commit();
  // Removes the temporary file without touching `path`.
  void Abandon();

 private:
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
};

// "<what> '<path>': <strerror(errno)>" as an absl status whose code follows errno
// (ENOENT -> NOT_FOUND, EACCES -> PERMISSION_DENIED, ...).
Status ErrnoStatus(absl::string_view what, const std::string& path, int err);

// The directory part of `path`: "." when it has none, "/" for a file in the root.
std::string DirectoryOf(const std::string& path);
// fsyncs directory `dir` so a rename or create in it survives a crash (filesystems
// that cannot fsync a directory are tolerated).
Status SyncDirectory(const std::string& dir);

}  // namespace pl

#endif  // PADDLE_LIKE_IO_ATOMIC_FILE_H_
