#include "paddle_like/dist/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pl {
namespace {

constexpr char kMagic[8] = {'P', 'L', 'S', 'H', 'M', '0', '0', '1'};
constexpr size_t kNonceAt = 8;
constexpr size_t kAnswerAt = 16;

std::string ErrnoText(int e) { return std::strerror(e); }

uint64_t RandomWord() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                          (static_cast<uint64_t>(::getpid()) << 32));
  return rng();
}

// Which machine and mount namespace this process is in: the kernel's boot id and the
// namespace's inode. A /proc path names a process of this host only; on another host
// (or in another test-bed "host") the same path is some other process's descriptor,
// which Open must not touch.
std::string HostKey() {
  static const std::string key = [] {
    std::string boot;
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof(buf), f) != nullptr) boot = buf;
      std::fclose(f);
    }
    boot.erase(std::remove_if(boot.begin(), boot.end(), [](char c) { return !absl::ascii_isxdigit(c); }),
               boot.end());
    struct stat st {};
    const uint64_t mnt = ::stat("/proc/self/ns/mnt", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
    return absl::StrFormat("%s-%x", boot, mnt);
  }();
  return key;
}

// Names Create makes: "/proc/<pid>/fd/<fd>@<host key>", the creator's sealed memfd.
bool IsRegionName(const std::string& full) {
  constexpr char kProc[] = "/proc/";
  if (!absl::StartsWith(full, kProc) || full.size() > 128) return false;
  const size_t at = full.find('@');
  if (at == std::string::npos) return false;
  for (char c : full.substr(at + 1)) {
    if (!absl::ascii_isxdigit(c) && c != '-') return false;
  }
  const std::string name = full.substr(0, at);
  const std::string rest = name.substr(sizeof(kProc) - 1);
  const size_t slash = rest.find("/fd/");
  if (slash == std::string::npos || slash == 0 || slash + 4 >= rest.size()) return false;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (i >= slash && i < slash + 4) continue;
    if (!absl::ascii_isdigit(rest[i])) return false;
  }
  return true;
}

constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW;

StatusOr<char*> Map(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot map shared memory ", name, " (", bytes,
                                                     " bytes): ", ErrnoText(errno)));
  }
  return static_cast<char*>(p);
}

}  // namespace

SharedRegion::SharedRegion(std::string name, char* base, size_t bytes, bool linked)
    : name_(std::move(name)), base_(base), bytes_(bytes), linked_(linked) {}

SharedRegion::~SharedRegion() {
  Unlink();
  ::munmap(base_, bytes_);
}

void SharedRegion::Unlink() {
  if (!linked_) return;
  linked_ = false;
  if (fd_ >= 0) ::close(fd_);  // the /proc name goes with the descriptor
  fd_ = -1;
}

StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::Create(size_t payload_bytes) {
  const size_t bytes = kHeaderBytes + payload_bytes;
  const int fd = ::memfd_create("pl-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create shared memory (memfd): ", ErrnoText(errno)));
  const std::string name = absl::StrFormat("/proc/%d/fd/%d@%s", ::getpid(), fd, HostKey());
  // Reserve every page now: tmpfs would otherwise grant the size and SIGBUS the first
  // write that finds no memory; then seal the size, so no one can shrink it under a
  // mapping.
  if (const int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e != 0) {
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot reserve %.1f MB of shared memory: %s", bytes / 1e6, ErrnoText(e)));
  }
  if (::fcntl(fd, F_ADD_SEALS, kRequiredSeals | F_SEAL_SEAL) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot seal shared memory: ", ErrnoText(e)));
  }
  StatusOr<char*> base = Map(fd, bytes, name);
  if (!base.ok()) {
    ::close(fd);
    return base.status();
  }
  std::shared_ptr<SharedRegion> region(new SharedRegion(name, *base, bytes, /*linked=*/true));
  region->fd_ = fd;
  std::memcpy(region->base_, kMagic, sizeof(kMagic));
  const uint64_t nonce = RandomWord() | 1;  // never 0, so an unset answer cannot match
  std::memcpy(region->base_ + kNonceAt, &nonce, sizeof(nonce));
  return region;
}

char* SharedRegion::shadow() const {
  std::call_once(shadow_once_, [this] { shadow_.reset(new char[std::max<size_t>(payload_bytes(), 1)]); });
  return shadow_.get();
}

StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::CreatePrivate(size_t payload_bytes) {
  const size_t bytes = kHeaderBytes + payload_bytes;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot map %.1f MB for a dense link's region: %s", bytes / 1e6, ErrnoText(errno)));
  }
  std::shared_ptr<SharedRegion> region(new SharedRegion("", static_cast<char*>(p), bytes, /*linked=*/false));
  std::memcpy(region->base_, kMagic, sizeof(kMagic));
  return region;
}

StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::Open(const std::string& name, size_t total_bytes) {
  if (!IsRegionName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a paddle_like shared-memory name"));
  }
  if (total_bytes < kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory ", name, ": size ", total_bytes,
                                                   " is smaller than its header"));
  }
  const size_t at = name.find('@');
  if (name.substr(at + 1) != HostKey()) {
    return absl::NotFoundError(absl::StrCat("cannot open shared memory ", name,
                                            ": its creator is on another host, or in /dev/shm of its own"));
  }
  const std::string path = name.substr(0, at);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    const std::string why = absl::StrCat("cannot open shared memory ", name, ": ", ErrnoText(e));
    return e == ENOENT ? absl::NotFoundError(why + " (its creator is on another host, or in /dev/shm of its own)")
                       : absl::PermissionDeniedError(why);
  }
  // Only memory whose size no one can change: a segment its creator could shrink would
  // SIGBUS this process at its next access.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kRequiredSeals) != kRequiredSeals) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("shared memory ", name,
                                                   " is not sealed against shrinking and growing; refused"));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != total_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("shared memory ", name, " holds ", st.st_size,
                                                   " bytes, the request says ", total_bytes));
  }
  StatusOr<char*> base = Map(fd, total_bytes, name);
  ::close(fd);
  if (!base.ok()) return base.status();
  std::shared_ptr<SharedRegion> region(new SharedRegion(name, *base, total_bytes, /*linked=*/false));
  if (std::memcmp(region->base_, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory ", name, " is not a paddle_like region"));
  }
  return region;
}

uint64_t SharedRegion::nonce() const {
  uint64_t v;
  std::memcpy(&v, base_ + kNonceAt, sizeof(v));
  return v;
}

uint64_t SharedRegion::answer() const {
  uint64_t v;
  std::memcpy(&v, base_ + kAnswerAt, sizeof(v));
  return v;
}

void SharedRegion::set_answer(uint64_t value) { std::memcpy(base_ + kAnswerAt, &value, sizeof(value)); }

StatusOr<float*> SharedRegion::Floats(int64_t offset, int64_t count) const {
  const int64_t size = static_cast<int64_t>(payload_bytes());
  if (offset < 0 || count < 0 || offset % 4 != 0 || offset > size || count > (size - offset) / 4) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory span [", offset, ", +", count,
                                                   " floats) is outside the region's ", size, " bytes"));
  }
  return reinterpret_cast<float*>(payload() + offset);
}

StatusOr<uint16_t*> SharedRegion::Halves(int64_t offset, int64_t count) const {
  const int64_t size = static_cast<int64_t>(payload_bytes());
  if (offset < 0 || count < 0 || offset % 2 != 0 || offset > size || count > (size - offset) / 2) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory span [", offset, ", +", count,
                                                   " bfloat16 values) is outside the region's ", size, " bytes"));
  }
  return reinterpret_cast<uint16_t*>(payload() + offset);
}

}  // namespace pl
