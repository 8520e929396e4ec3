#include "pserver/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/io/crc32c.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'P', 'L', 'P', 'S', 'C', 'K', 'P', 'T'};
constexpr uint32_t kFormat = 1;
constexpr size_t kBufferBytes = 1 << 20;

// Sequence number of "ckpt-<seq>.bin", or -1.
int64_t SeqOf(const std::string& filename) {
  if (!absl::StartsWith(filename, "ckpt-") || !absl::EndsWith(filename, ".bin")) return -1;
  int64_t seq = -1;
  if (!absl::SimpleAtoi(filename.substr(5, filename.size() - 9), &seq)) return -1;
  return seq;
}

// A read-only file descriptor closed on scope exit.
class InFile {
 public:
  ~InFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return ErrnoStatus("cannot open checkpoint", path, errno);
    off_t size = ::lseek(fd_, 0, SEEK_END);
    if (size < 0 || ::lseek(fd_, 0, SEEK_SET) < 0) return ErrnoStatus("cannot seek", path, errno);
    size_ = static_cast<uint64_t>(size);
    return absl::OkStatus();
  }
  // Reads exactly n bytes.
  Status Read(void* data, size_t n) {
    char* p = static_cast<char*>(data);
    while (n > 0) {
      ssize_t got = ::read(fd_, p, n);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return ErrnoStatus("cannot read", path_, errno);
      if (got == 0) return absl::DataLossError(absl::StrCat("checkpoint '", path_, "' is truncated"));
      p += got;
      n -= static_cast<size_t>(got);
    }
    return absl::OkStatus();
  }
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};
}  // namespace

Checkpointer::Checkpointer(std::string dir, int index, int keep)
    : shard_dir_((fs::path(dir) / absl::StrCat("pserver-", index)).string()),
      index_(index),
      keep_(std::max(keep, 1)) {}

std::vector<std::string> Checkpointer::List() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(shard_dir_, ec)) {
    const int64_t seq = SeqOf(entry.path().filename().string());
    if (seq >= 0) found.emplace_back(seq, entry.path().string());
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> paths;
  for (auto& [seq, path] : found) paths.push_back(std::move(path));
  return paths;
}

StatusOr<std::string> Checkpointer::Save(const ParameterShard& shard) {
  absl::MutexLock l(&mu_);
  std::error_code ec;
  fs::create_directories(shard_dir_, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create '", shard_dir_, "': ", ec.message()));
  if (next_seq_ < 0) {
    next_seq_ = 1;
    for (const std::string& p : List()) next_seq_ = std::max(next_seq_, SeqOf(fs::path(p).filename().string()) + 1);
    // Temporary files of a save that crashed are dead weight.
    for (const auto& entry : fs::directory_iterator(shard_dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (absl::StartsWith(name, "ckpt-") && absl::StrContains(name, ".bin.tmp")) fs::remove(entry.path(), ec);
    }
  }
  const std::string path =
      (fs::path(shard_dir_) / absl::StrFormat("ckpt-%010d.bin", next_seq_)).string();
  AtomicFileWriter file;
  PL_RETURN_IF_ERROR(file.Open(path));
  std::string buffer;
  buffer.reserve(kBufferBytes);
  uint32_t crc = 0;
  auto flush = [&]() -> Status {
    crc = Crc32c(buffer.data(), buffer.size(), crc);
    Status s = file.Append(buffer);
    buffer.clear();
    return s;
  };
  auto write = [&](const void* data, size_t n) -> Status {
    if (buffer.size() + n > kBufferBytes) PL_RETURN_IF_ERROR(flush());
    if (n >= kBufferBytes) {  // a large block goes straight through
      crc = Crc32c(data, n, crc);
      return file.Append(absl::string_view(static_cast<const char*>(data), n));
    }
    buffer.append(static_cast<const char*>(data), n);
    return absl::OkStatus();
  };
  PL_RETURN_IF_ERROR(write(kMagic, sizeof(kMagic)));
  PL_RETURN_IF_ERROR(write(&kFormat, sizeof(kFormat)));
  PL_RETURN_IF_ERROR(shard.SaveState(write));
  PL_RETURN_IF_ERROR(flush());
  PL_RETURN_IF_ERROR(file.Append(absl::string_view(reinterpret_cast<const char*>(&crc), sizeof(crc))));
  PL_RETURN_IF_ERROR(file.Commit());
  ++next_seq_;
  const std::vector<std::string> all = List();
  for (size_t i = keep_; i < all.size(); ++i) fs::remove(all[i], ec);
  return path;
}

Status Checkpointer::Load(const std::string& path, ParameterShard* shard) {
  // Pass 1: the checksum, before any byte is trusted.
  {
    InFile in;
    PL_RETURN_IF_ERROR(in.Open(path));
    if (in.size() < sizeof(kMagic) + sizeof(kFormat) + sizeof(uint32_t)) {
      return absl::DataLossError(absl::StrCat("checkpoint '", path, "' is truncated (", in.size(), " bytes)"));
    }
    std::string buffer(kBufferBytes, '\0');
    uint64_t left = in.size() - sizeof(uint32_t);
    uint32_t crc = 0;
    while (left > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, kBufferBytes));
      PL_RETURN_IF_ERROR(in.Read(buffer.data(), n));
      crc = Crc32c(buffer.data(), n, crc);
      left -= n;
    }
    uint32_t stored = 0;
    PL_RETURN_IF_ERROR(in.Read(&stored, sizeof(stored)));
    if (stored != crc) {
      return absl::DataLossError(absl::StrFormat("checkpoint '%s' fails its checksum (stored %08x, computed %08x)",
                                                 path, stored, crc));
    }
  }
  // Pass 2: parse, reading no further than the checksum.
  InFile in;
  PL_RETURN_IF_ERROR(in.Open(path));
  uint64_t left = in.size() - sizeof(uint32_t);
  std::string buffer;
  size_t pos = 0;
  auto read = [&](void* data, size_t n) -> Status {
    char* out = static_cast<char*>(data);
    while (n > 0) {
      if (pos == buffer.size()) {
        if (left == 0) return absl::DataLossError("shard state runs past the end of the file");
        buffer.resize(static_cast<size_t>(std::min<uint64_t>(left, kBufferBytes)));
        PL_RETURN_IF_ERROR(in.Read(buffer.data(), buffer.size()));
        left -= buffer.size();
        pos = 0;
      }
      const size_t take = std::min(n, buffer.size() - pos);
      std::memcpy(out, buffer.data() + pos, take);
      pos += take;
      out += take;
      n -= take;
    }
    return absl::OkStatus();
  };
  char magic[sizeof(kMagic)];
  uint32_t format = 0;
  Status s = read(magic, sizeof(magic));
  if (s.ok() && std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    s = absl::DataLossError("not a pserver checkpoint (bad magic)");
  }
  if (s.ok()) s = read(&format, sizeof(format));
  if (s.ok() && format != kFormat) s = absl::DataLossError(absl::StrCat("unknown checkpoint format ", format));
  if (s.ok()) s = shard->LoadState(read);
  if (s.ok() && (left != 0 || pos != buffer.size())) s = absl::DataLossError("trailing bytes after the shard state");
  return Annotate(s, absl::StrCat("checkpoint '", path, "'"));
}

StatusOr<Checkpointer::Restored> Checkpointer::RestoreLatest(int num_shards) {
  Restored restored;
  for (const std::string& path : List()) {
    auto shard = std::make_unique<ParameterShard>(index_, num_shards);
    Status s = Load(path, shard.get());
    if (s.ok()) {
      restored.shard = std::move(shard);
      restored.path = path;
      return restored;
    }
    if (absl::IsFailedPrecondition(s)) return s;
    log::Warning(absl::StrCat("skipping corrupt checkpoint ", path, ": ", s.message()));
    restored.skipped.push_back(absl::StrCat(path, ": ", s.message()));
  }
  return restored;
}

}  // namespace pl::pserver
