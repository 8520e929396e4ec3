#include "paddle_like/data/idx.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/io/atomic_file.h"

namespace pl {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
// Caps what a corrupt header can make us reserve up front; the data still grows to
// its true size as it arrives.
constexpr size_t kMaxReserve = 64u << 20;

class GzFile {
 public:
  explicit GzFile(gzFile f) : f_(f) {}
  ~GzFile() {
    if (f_) gzclose(f_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  gzFile get() const { return f_; }

 private:
  gzFile f_;
};

// Reads up to n bytes; returns how many (fewer only at the end of the stream).
StatusOr<size_t> ReadUpTo(gzFile f, void* dst, size_t n, const std::string& path) {
  size_t total = 0;
  char* p = static_cast<char*>(dst);
  while (total < n) {
    unsigned want = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
    int got = gzread(f, p + total, want);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      return absl::DataLossError(absl::StrCat("'", path, "': cannot decompress: ", msg));
    }
    if (got == 0) break;
    total += static_cast<size_t>(got);
  }
  return total;
}

}  // namespace

StatusOr<IdxArray> ReadIdx(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open IDX file", path, errno);
  gzFile raw = gzdopen(fd, "rb");  // reads plain files transparently
  if (raw == nullptr) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("cannot open IDX file '", path, "' (zlib)"));
  }
  GzFile file(raw);
  uint8_t magic[4];
  PL_ASSIGN_OR_RETURN(size_t got, ReadUpTo(file.get(), magic, 4, path));
  const uint32_t magic_value = got == 4 ? (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) |
                                              (uint32_t{magic[2]} << 8) | magic[3]
                                        : 0;
  if (got < 4 || magic[0] != 0 || magic[1] != 0 || magic[3] == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not an IDX file: magic %s (expected 0x000008NN)", path,
        got < 4 ? absl::StrCat("missing (", got, " bytes)") : absl::StrFormat("0x%08x", magic_value)));
  }
  if (magic[2] != kUnsignedByte) {
    return absl::UnimplementedError(absl::StrFormat(
        "IDX file '%s' has data type 0x%02x (magic 0x%08x); only unsigned bytes (0x08) are read",
        path, magic[2], magic_value));
  }
  IdxArray out;
  const int ndims = magic[3];
  uint64_t total = 1;
  bool overflow = false;
  for (int i = 0; i < ndims; ++i) {
    uint8_t b[4];
    PL_ASSIGN_OR_RETURN(size_t n, ReadUpTo(file.get(), b, 4, path));
    if (n < 4) {
      return absl::DataLossError(absl::StrCat("IDX file '", path, "' is truncated in its header"));
    }
    uint64_t d = (uint64_t{b[0]} << 24) | (uint64_t{b[1]} << 16) | (uint64_t{b[2]} << 8) | b[3];
    out.dims.push_back(static_cast<int64_t>(d));
    if (d != 0 && total > (uint64_t{1} << 48) / d) overflow = true;
    total *= d;
  }
  if (overflow) {
    return absl::DataLossError(absl::StrCat("IDX file '", path, "': dimensions are implausibly large"));
  }
  out.data.reserve(std::min<uint64_t>(total, kMaxReserve));
  // Grow as data arrives so a corrupt size costs no more memory than the file holds.
  constexpr size_t kStep = 1 << 20;
  while (out.data.size() < total) {
    size_t old = out.data.size();
    size_t want = std::min<uint64_t>(kStep, total - old);
    out.data.resize(old + want);
    PL_ASSIGN_OR_RETURN(size_t n, ReadUpTo(file.get(), out.data.data() + old, want, path));
    if (n < want) {
      return absl::DataLossError(absl::StrCat("IDX file '", path, "' is truncated: ", old + n,
                                              " of ", total, " data bytes"));
    }
  }
  uint8_t extra;
  PL_ASSIGN_OR_RETURN(size_t n, ReadUpTo(file.get(), &extra, 1, path));
  if (n != 0) {
    return absl::DataLossError(
        absl::StrCat("IDX file '", path, "' has bytes after its ", total, " data bytes"));
  }
  return out;
}

}  // namespace pl
