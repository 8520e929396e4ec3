#include "paddle_like/io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pl {
std::string DirectoryOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Makes a completed rename durable: without this a crash can forget the new name.
Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open directory", dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some filesystems do not support fsync on directories; the rename is still done.
  if (rc != 0 && err != EINVAL && err != ENOTSUP) return ErrnoStatus("cannot fsync directory", dir, err);
  return absl::OkStatus();
}

namespace {

std::atomic<uint64_t> tmp_counter{0};

}  // namespace

Status ErrnoStatus(absl::string_view what, const std::string& path, int err) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " '", path, "'"));
}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

Status AtomicFileWriter::Open(const std::string& path) {
  Abandon();
  path_ = path;
  tmp_path_ = absl::StrCat(path, ".tmp.", ::getpid(), ".", tmp_counter.fetch_add(1));
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    int err = errno;
    tmp_path_.clear();
    return ErrnoStatus("cannot create temporary file for", path, err);
  }
  return absl::OkStatus();
}

Status AtomicFileWriter::Append(absl::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError("AtomicFileWriter: Append before Open");
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write", tmp_path_, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError("AtomicFileWriter: Commit before Open");
  if (::fsync(fd_) != 0) return ErrnoStatus("cannot fsync", tmp_path_, errno);
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return ErrnoStatus("cannot close", tmp_path_, errno);
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus(absl::StrCat("cannot rename '", tmp_path_, "' over"), path_, errno);
  }
  tmp_path_.clear();
  return SyncDirectory(DirectoryOf(path_));
}

void AtomicFileWriter::Abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!tmp_path_.empty()) {
    ::unlink(tmp_path_.c_str());
    tmp_path_.clear();
  }
}

Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  AtomicFileWriter writer;
  PL_RETURN_IF_ERROR(writer.Open(path));
  PL_RETURN_IF_ERROR(writer.Append(contents));
  return writer.Commit();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  std::string out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("cannot read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace pl
