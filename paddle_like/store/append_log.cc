#include "paddle_like/store/append_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "paddle_like/io/crc32c.h"

namespace pl {
namespace {

constexpr size_t kHeaderBytes = 8;

Status Errno(const std::string& what, const std::string& path, int err) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

uint32_t LoadU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return absl::UnavailableError(std::strerror(w < 0 ? errno : ENOSPC));
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<LogContents> ParseRecordFrames(absl::string_view bytes, const std::string& where) {
  LogContents c;
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < kHeaderBytes) break;  // a header cut short: torn
    const uint32_t length = LoadU32(bytes.data() + at);
    const uint32_t crc = LoadU32(bytes.data() + at + 4);
    if (length > bytes.size() - at - kHeaderBytes) break;  // runs past the end: torn
    const char* payload = bytes.data() + at + kHeaderBytes;
    const size_t end = at + kHeaderBytes + length;
    if (Crc32c(payload, length) != crc) {
      if (end < bytes.size()) {
        return absl::DataLossError(absl::StrCat(where, ": the record at byte ", at, " (", length,
                                                " bytes) fails its checksum and ", bytes.size() - end,
                                                " bytes of records follow it: the log is corrupt, not torn"));
      }
      break;  // the last record, half written: torn
    }
    c.records.emplace_back(payload, length);
    at = end;
  }
  c.valid_bytes = static_cast<int64_t>(at);
  c.torn_bytes = static_cast<int64_t>(bytes.size() - at);
  return c;
}

std::string FrameRecord(absl::string_view payload) {
  std::string frame(kHeaderBytes + payload.size(), '\0');
  const uint32_t length = static_cast<uint32_t>(payload.size());
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  std::memcpy(frame.data(), &length, 4);
  std::memcpy(frame.data() + 4, &crc, 4);
  std::memcpy(frame.data() + kHeaderBytes, payload.data(), payload.size());
  return frame;
}

StatusOr<LogContents> AppendLog::Read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no log at ", path));
    return Errno("cannot open", path, errno);
  }
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return Errno("cannot read", path, err);
    }
    if (r == 0) break;
    bytes.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return ParseRecordFrames(bytes, absl::StrCat("log ", path));
}

StatusOr<std::unique_ptr<AppendLog>> AppendLog::Open(const std::string& path, int64_t valid_bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open", path, errno);
  if (::ftruncate(fd, valid_bytes) != 0 || ::lseek(fd, valid_bytes, SEEK_SET) != valid_bytes || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Errno("cannot prepare", path, err);
  }
  // The file's entry itself must survive a crash.
  const std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  if (const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return std::unique_ptr<AppendLog>(new AppendLog(path, fd, valid_bytes));
}

AppendLog::~AppendLog() { ::close(fd_); }

StatusOr<int64_t> AppendLog::Append(absl::string_view payload) {
  const std::string frame = FrameRecord(payload);
  std::lock_guard<std::mutex> l(mu_);
  Status st = WriteAll(fd_, frame.data(), frame.size());
  if (!st.ok()) {
    // Nothing of a record that did not make it stays behind.
    (void)::ftruncate(fd_, written_ - base_);
    (void)::lseek(fd_, written_ - base_, SEEK_SET);
    return absl::UnavailableError(absl::StrCat("cannot append to ", path_, ": ", st.message()));
  }
  written_ += static_cast<int64_t>(frame.size());
  return written_;
}

Status AppendLog::Sync(int64_t offset) {
  std::unique_lock<std::mutex> l(mu_);
  while (synced_ < offset) {
    if (syncing_) {
      synced_cv_.wait(l);
      continue;
    }
    syncing_ = true;
    const int64_t target = written_;
    l.unlock();
    const int rc = ::fdatasync(fd_);
    const int err = errno;
    l.lock();
    syncing_ = false;
    if (rc == 0) synced_ = std::max(synced_, target);
    synced_cv_.notify_all();
    if (rc != 0) return Errno("cannot fsync", path_, err);
  }
  return absl::OkStatus();
}

Status AppendLog::Reset() {
  std::lock_guard<std::mutex> l(mu_);
  if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0 || ::fsync(fd_) != 0) {
    return Errno("cannot empty", path_, errno);
  }
  // What was written before is durable another way (the snapshot): its waiters are done.
  base_ = written_;
  synced_ = written_;
  synced_cv_.notify_all();
  return absl::OkStatus();
}

int64_t AppendLog::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return written_ - base_;
}

}  // namespace pl
