#include "pserver/checkpoint/checkpoint.h"

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
#include "absl/strings/strip.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/io/crc32c.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'P', 'L', 'P', 'S', 'C', 'K', 'P', 'T'};
constexpr uint32_t kFormat = 1;
constexpr size_t kBufferBytes = 1 << 20;

constexpr char kFullSuffix[] = ".bin";
constexpr char kDeltaSuffix[] = ".delta";

// Sequence number of "ckpt-<seq>.bin" or "ckpt-<seq>.delta", or -1.
int64_t SeqOf(const std::string& filename) {
  if (!absl::StartsWith(filename, "ckpt-")) return -1;
  absl::string_view rest = absl::string_view(filename).substr(5);
  if (!absl::ConsumeSuffix(&rest, kFullSuffix) && !absl::ConsumeSuffix(&rest, kDeltaSuffix)) return -1;
  int64_t seq = -1;
  if (!absl::SimpleAtoi(rest, &seq)) return -1;
  return seq;
}
bool IsDelta(const std::string& path) { return absl::EndsWith(path, kDeltaSuffix); }

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

Checkpointer::Checkpointer(std::string dir, int index, int keep, int full_every)
    : shard_dir_((fs::path(dir) / absl::StrCat("pserver-", index)).string()),
      index_(index),
      keep_(std::max(keep, 1)),
      full_every_(std::max(full_every, 1)) {}

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
      if (absl::StartsWith(name, "ckpt-") && absl::StrContains(name, ".tmp")) fs::remove(entry.path(), ec);
    }
  }
  // From here on the shard marks what pushes change: the next save may be a delta.
  if (!shard.tables().tracking_changes()) {
    shard.tables().TrackChanges();
    need_full_ = true;
  }
  // Change marks follow rows in memory; a row the cap spilled to the disk tier carries
  // its changes there, so with a disk tier every checkpoint is a whole one.
  const bool full = need_full_ || saves_since_full_ + 1 >= full_every_ || shard.tables().has_disk_tier();
  const std::string path = (fs::path(shard_dir_) /
                            absl::StrFormat("ckpt-%010d%s", next_seq_, full ? kFullSuffix : kDeltaSuffix))
                               .string();
  // Whatever happens below, the marks taken so far are in no file unless it commits.
  need_full_ = true;
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
  PL_RETURN_IF_ERROR(shard.SaveState(
      write, full ? ShardStore::Rows::kAllTakingChanges : ShardStore::Rows::kChangedTakingChanges));
  PL_RETURN_IF_ERROR(flush());
  PL_RETURN_IF_ERROR(file.Append(absl::string_view(reinterpret_cast<const char*>(&crc), sizeof(crc))));
  PL_RETURN_IF_ERROR(file.Commit());
  ++next_seq_;
  need_full_ = false;
  saves_since_full_ = full ? 0 : saves_since_full_ + 1;
  Prune();
  return path;
}

void Checkpointer::Prune() {
  const std::vector<std::string> all = List();  // newest first
  int fulls = 0;
  size_t keep_until = all.size();  // index of the oldest file to keep, + 1
  for (size_t i = 0; i < all.size(); ++i) {
    if (!IsDelta(all[i]) && ++fulls == keep_) {
      keep_until = i + 1;
      break;
    }
  }
  std::error_code ec;
  for (size_t i = keep_until; i < all.size(); ++i) fs::remove(all[i], ec);
}

Status Checkpointer::Load(const std::string& path, ParameterShard* shard) {
  if (IsDelta(path)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is an incremental checkpoint: load its chain"));
  }
  PL_RETURN_IF_ERROR(Verify(path));
  return Parse(path, /*delta=*/false, shard);
}

Status Checkpointer::LoadChain(const std::vector<std::string>& chain, ParameterShard* shard) {
  if (chain.empty()) return absl::InvalidArgumentError("an empty checkpoint chain");
  PL_RETURN_IF_ERROR(Load(chain[0], shard));
  for (size_t i = 1; i < chain.size(); ++i) {
    PL_RETURN_IF_ERROR(Verify(chain[i]));
    PL_RETURN_IF_ERROR(Parse(chain[i], /*delta=*/true, shard));
  }
  return absl::OkStatus();
}

Status Checkpointer::Verify(const std::string& path) {
  // The checksum, before any byte is trusted.
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
  return absl::OkStatus();
}

Status Checkpointer::Parse(const std::string& path, bool delta, ParameterShard* shard) {
  // Reads no further than the checksum.
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
  if (s.ok()) s = delta ? shard->ApplyStateDelta(read) : shard->LoadState(read);
  if (s.ok() && (left != 0 || pos != buffer.size())) s = absl::DataLossError("trailing bytes after the shard state");
  return Annotate(s, absl::StrCat("checkpoint '", path, "'"));
}

StatusOr<Checkpointer::Restored> Checkpointer::RestoreLatest(int num_shards,
                                                             const std::function<Status(ParameterShard*)>& prepare) {
  Restored restored;
  const std::vector<std::string> all = List();  // newest first
  auto skip = [&restored](const std::string& path, absl::string_view why) {
    log::Warning(absl::StrCat("skipping checkpoint ", path, ": ", why));
    restored.skipped.push_back(absl::StrCat(path, ": ", why));
  };
  size_t newer_full = 0;  // all[newer_full, i): the deltas newer than the full one all[i]
  for (size_t i = 0; i < all.size(); ++i) {
    if (IsDelta(all[i])) continue;
    // all[i] is a full checkpoint; its deltas are the files between it and the next
    // newer full one, oldest first, each one sequence number after the one before.
    std::vector<std::string> chain = {all[i]};
    bool broken = false;
    for (size_t j = i; j-- > newer_full;) {
      const std::string& d = all[j];
      if (broken) {
        skip(d, "comes after a delta that cannot be used");
        continue;
      }
      const int64_t expected = SeqOf(fs::path(chain.back()).filename().string()) + 1;
      Status ok = SeqOf(fs::path(d).filename().string()) == expected
                      ? Verify(d)
                      : absl::DataLossError(absl::StrCat("checkpoint ", expected, " of the chain is missing"));
      if (!ok.ok()) {
        skip(d, ok.message());
        broken = true;
        continue;
      }
      chain.push_back(d);
    }
    newer_full = i + 1;
    // Parse the chain; a delta that parses badly ends it where the state was good.
    while (!chain.empty()) {
      auto shard = std::make_unique<ParameterShard>(index_, num_shards);
      if (prepare) PL_RETURN_IF_ERROR(prepare(shard.get()));
      Status s = LoadChain(chain, shard.get());
      if (s.ok()) {
        restored.shard = std::move(shard);
        restored.path = chain.back();
        restored.chain = std::move(chain);
        return restored;
      }
      if (absl::IsFailedPrecondition(s)) return s;
      if (chain.size() == 1) {
        skip(chain[0], s.message());
        break;
      }
      skip(chain.back(), s.message());
      chain.pop_back();
    }
  }
  return restored;
}

}  // namespace pl::pserver
