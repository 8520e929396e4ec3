#include "paddle_like/store/local_dir_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/io/crc32c.h"

namespace pl {
namespace {

// Frame layout, little-endian:
//   [0,4) magic "PLSS" | [4,8) format version | [8,16) value length
//   [16,20) crc32c(value) | [20,24) crc32c(bytes 0..20) | [24, 24+length) value
constexpr char kMagic[4] = {'P', 'L', 'S', 'S'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 24;

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// mkdir -p for `dir`, fsyncing each parent whose entry it adds.
Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(absl::StrCat("'", dir, "' is not a directory"));
    return absl::OkStatus();
  }
  std::string parent = DirectoryOf(dir);
  if (parent != dir && parent != "." && !parent.empty()) PL_RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("cannot create directory", dir, errno);
  return SyncDirectory(parent.empty() ? "/" : parent);
}

Status WriteAndSync(const std::string& path, absl::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", path, errno);
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("cannot write", path, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot fsync", path, err);
  }
  if (::close(fd) != 0) return ErrnoStatus("cannot close", path, errno);
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Every file under `root`/`rel`, relative to root, skipping hidden names.
void Walk(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  std::string dir = rel.empty() ? root : absl::StrCat(root, "/", rel);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string name = rel.empty() ? e->d_name : absl::StrCat(rel, "/", e->d_name);
    struct stat st;
    if (::lstat(absl::StrCat(root, "/", name).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      Walk(root, name, out);
    } else if (S_ISREG(st.st_mode)) {
      out->push_back(name);
    }
  }
  ::closedir(d);
}

}  // namespace

std::string EncodeStoreFrame(absl::string_view value) {
  std::string frame(kHeaderBytes + value.size(), '\0');
  char* h = frame.data();
  std::memcpy(h, kMagic, 4);
  PutU32(h + 4, kFormatVersion);
  PutU64(h + 8, value.size());
  PutU32(h + 16, Crc32c(value.data(), value.size()));
  PutU32(h + 20, Crc32c(h, 20));
  if (!value.empty()) std::memcpy(h + kHeaderBytes, value.data(), value.size());
  return frame;
}

StatusOr<std::string> DecodeStoreFrame(absl::string_view frame) {
  if (frame.size() < kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("truncated: ", frame.size(), " bytes, a header needs ", kHeaderBytes));
  }
  const char* h = frame.data();
  if (std::memcmp(h, kMagic, 4) != 0) return absl::DataLossError("bad magic (not a state store file)");
  if (GetU32(h + 20) != Crc32c(h, 20)) return absl::DataLossError("header checksum mismatch");
  uint32_t version = GetU32(h + 4);
  if (version != kFormatVersion) {
    return absl::DataLossError(absl::StrCat("unknown format version ", version, " (this build reads ", kFormatVersion, ")"));
  }
  uint64_t length = GetU64(h + 8);
  if (frame.size() - kHeaderBytes != length) {
    return absl::DataLossError(absl::StrCat("length mismatch: header says ", length, " value bytes, file has ",
                                            frame.size() - kHeaderBytes));
  }
  absl::string_view value = frame.substr(kHeaderBytes);
  if (GetU32(h + 16) != Crc32c(value.data(), value.size())) return absl::DataLossError("value checksum mismatch");
  return std::string(value);
}

StatusOr<std::unique_ptr<LocalDirStore>> LocalDirStore::Open(const std::string& dir, Options options) {
  if (dir.empty()) return absl::InvalidArgumentError("state store: empty directory name");
  std::string clean = dir;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  PL_RETURN_IF_ERROR(Annotate(MakeDirs(clean), "state store"));
  std::string lock_path = clean + "/.lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Annotate(ErrnoStatus("cannot create lock file", lock_path, errno), "state store");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("state store '", clean, "' is in use by another process (or another store object)"));
    }
    return Annotate(ErrnoStatus("cannot lock", lock_path, err), "state store");
  }
  // Temporary files belong to writes that never completed: we hold the lock, so no
  // live writer owns them.
  std::vector<std::string> files;
  Walk(clean, "", &files);
  for (const std::string& f : files) {
    if (absl::StrContains(f, ".tmp.")) ::unlink(absl::StrCat(clean, "/", f).c_str());
  }
  return std::unique_ptr<LocalDirStore>(new LocalDirStore(clean, std::move(options), fd));
}

LocalDirStore::LocalDirStore(std::string dir, Options options, int lock_fd)
    : dir_(std::move(dir)), options_(std::move(options)), lock_fd_(lock_fd) {}

LocalDirStore::~LocalDirStore() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void LocalDirStore::Warn(const std::string& line) {
  if (options_.warn) {
    options_.warn(line);
  } else {
    log::Warning(absl::StrCat("state store: ", line));
  }
}

Status LocalDirStore::Put(const std::string& key, absl::string_view value) {
  PL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string path = absl::StrCat(dir_, "/", key);
  const std::string dir = DirectoryOf(path);
  PL_RETURN_IF_ERROR(Annotate(MakeDirs(dir), "state store"));
  const uint64_t n = tmp_counter_++;
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", n);
  Status st = WriteAndSync(tmp, EncodeStoreFrame(value));
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return Annotate(st, absl::StrCat("state store put '", key, "'"));
  }
  // Keep the current copy as the previous one, unless it is corrupt: then the older
  // .prev is the last good copy and must survive.
  StatusOr<std::string> current = ReadFile(path);
  if (current.ok() && DecodeStoreFrame(*current).ok()) {
    const std::string prev = path + ".prev";
    const std::string prev_tmp = absl::StrCat(path, ".prev.tmp.", ::getpid(), ".", n);
    bool linked = ::link(path.c_str(), prev_tmp.c_str()) == 0;
    if (!linked) linked = WriteAndSync(prev_tmp, *current).ok();  // no hard links here
    if (linked && ::rename(prev_tmp.c_str(), prev.c_str()) != 0) {
      Status err = ErrnoStatus("cannot rename over", prev, errno);
      ::unlink(prev_tmp.c_str());
      ::unlink(tmp.c_str());
      return Annotate(err, absl::StrCat("state store put '", key, "'"));
    }
    if (!linked) {
      ::unlink(prev_tmp.c_str());
      ::unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("state store put '", key, "': cannot keep the previous copy of '", path, "'"));
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status err = ErrnoStatus("cannot rename into place", path, errno);
    ::unlink(tmp.c_str());
    return Annotate(err, absl::StrCat("state store put '", key, "'"));
  }
  return Annotate(SyncDirectory(dir), absl::StrCat("state store put '", key, "'"));
}

StatusOr<std::string> LocalDirStore::Get(const std::string& key) {
  PL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string path = absl::StrCat(dir_, "/", key);
  std::string problems;
  bool any_copy = false;
  for (const std::string& copy : {path, path + ".prev"}) {
    StatusOr<std::string> bytes = ReadFile(copy);
    if (!bytes.ok()) {
      if (absl::IsNotFound(bytes.status())) continue;
      absl::StrAppend(&problems, problems.empty() ? "" : "; ", bytes.status().message());
      any_copy = true;
      continue;
    }
    any_copy = true;
    StatusOr<std::string> value = DecodeStoreFrame(*bytes);
    if (value.ok()) {
      if (!problems.empty()) {
        Warn(absl::StrCat("skipped a corrupt copy of key '", key, "' (", problems, "); using '", copy, "'"));
      }
      return value;
    }
    corrupt_skipped_.fetch_add(1);
    absl::StrAppend(&problems, problems.empty() ? "" : "; ", "'", copy, "': ", value.status().message());
  }
  if (!any_copy) return absl::NotFoundError(absl::StrCat("state store '", dir_, "' has no key '", key, "'"));
  return absl::DataLossError(absl::StrCat("state store '", dir_, "': no valid copy of key '", key, "' (", problems, ")"));
}

Status LocalDirStore::Delete(const std::string& key) {
  PL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string path = absl::StrCat(dir_, "/", key);
  // The previous copy goes first so that a crash in between never resurrects an old value.
  for (const std::string& copy : {path + ".prev", path}) {
    if (::unlink(copy.c_str()) != 0 && errno != ENOENT) {
      return Annotate(ErrnoStatus("cannot remove", copy, errno), absl::StrCat("state store delete '", key, "'"));
    }
  }
  if (!Exists(DirectoryOf(path))) return absl::OkStatus();
  return Annotate(SyncDirectory(DirectoryOf(path)), absl::StrCat("state store delete '", key, "'"));
}

StatusOr<std::vector<std::string>> LocalDirStore::List(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> files;
  Walk(dir_, "", &files);
  std::set<std::string> keys;
  for (std::string f : files) {
    if (absl::StrContains(f, ".tmp.")) continue;
    if (absl::EndsWith(f, ".prev")) f.resize(f.size() - 5);
    if (absl::StartsWith(f, prefix) && ValidateKey(f).ok()) keys.insert(f);
  }
  return std::vector<std::string>(keys.begin(), keys.end());
}

}  // namespace pl
