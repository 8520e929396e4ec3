#include "paddle_like/io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/io/crc32c.h"
#include "paddle_like/io/json_lite.h"

namespace pl {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this code writes host memory as is");

// The reference implementation refuses larger headers; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

const char* SafetensorsDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "F32";
    case DType::kInt64: return "I64";
  }
  return "?";
}

// Every dtype name the format defines; only F32 and I64 map to our tensors.
bool IsKnownSafetensorsDType(absl::string_view name) {
  static const std::set<std::string, std::less<>> kKnown = {
      "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
      "I32",  "U32", "F32", "F64", "I64", "U64"};
  return kKnown.count(name) > 0;
}

// Closes the descriptor on every return path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly n bytes at `offset`; a short read means the file is shorter than
// its header claims.
Status PreadFully(int fd, void* buf, size_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot read", path, errno);
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat("'", path, "': truncated at byte ", offset));
    }
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("'", path, "' is not a valid safetensors file: ", what));
}

StatusOr<Entry> ParseEntry(const std::string& path, const std::string& name,
                           const JsonValue& v) {
  auto bad = [&](absl::string_view what) {
    return Corrupt(path, absl::StrCat("tensor \"", name, "\": ", what));
  };
  if (!v.is_object()) return bad("entry is not an object");
  const JsonValue* dtype = v.Find("dtype");
  const JsonValue* shape = v.Find("shape");
  const JsonValue* offsets = v.Find("data_offsets");
  if (!dtype || !dtype->is_string()) return bad("missing string \"dtype\"");
  if (!shape || !shape->is_array()) return bad("missing array \"shape\"");
  if (!offsets || !offsets->is_array() || offsets->array.size() != 2) {
    return bad("missing \"data_offsets\" [begin, end]");
  }
  for (const auto& [key, unused] : v.object) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return bad(absl::StrCat("unexpected field \"", key, "\""));
    }
  }
  Entry e;
  e.name = name;
  if (dtype->string == "F32") {
    e.dtype = DType::kFloat32;
  } else if (dtype->string == "I64") {
    e.dtype = DType::kInt64;
  } else if (IsKnownSafetensorsDType(dtype->string)) {
    return absl::UnimplementedError(absl::StrCat("'", path, "': tensor \"", name, "\" has dtype ",
                                                 dtype->string, "; paddle_like reads F32 and I64"));
  } else {
    return bad(absl::StrCat("unknown dtype \"", dtype->string, "\""));
  }
  for (const JsonValue& d : shape->array) {
    if (!d.is_int() || d.integer < 0) return bad("shape entries must be non-negative integers");
    e.shape.push_back(d.integer);
  }
  for (const JsonValue& o : offsets->array) {
    if (!o.is_int() || o.integer < 0) return bad("data_offsets must be non-negative integers");
  }
  e.begin = static_cast<uint64_t>(offsets->array[0].integer);
  e.end = static_cast<uint64_t>(offsets->array[1].integer);
  if (e.end < e.begin) return bad("data_offsets end before begin");
  // Element count times size must equal the byte range; divide rather than multiply
  // so a hostile shape cannot overflow.
  uint64_t bytes = e.end - e.begin;
  uint64_t elem = DTypeSize(e.dtype);
  uint64_t max_elems = bytes / elem;
  uint64_t count = 1;
  for (int64_t d : e.shape) {
    if (d == 0) {
      count = 0;
      break;
    }
    if (count > max_elems / static_cast<uint64_t>(d)) {
      return bad(absl::StrCat("shape ", ShapeToString(e.shape), " does not fit data_offsets [",
                              e.begin, ", ", e.end, "]"));
    }
    count *= static_cast<uint64_t>(d);
  }
  if (count * elem != bytes) {
    return bad(absl::StrCat("shape ", ShapeToString(e.shape), " of ", dtype->string, " needs ",
                            count * elem, " bytes but data_offsets [", e.begin, ", ", e.end,
                            "] hold ", bytes));
  }
  return e;
}

}  // namespace

Status SaveTensors(const std::string& path,
                   const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  uint32_t crc = 0;
  uint64_t offset = 0;
  std::string entries;
  for (const auto& [name, t] : tensors) {
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("SaveTensors '", path, "': tensor \"", name, "\" ", what));
    };
    if (name.empty() || name == "__metadata__") return bad("has a reserved or empty name");
    if (!names.insert(name).second) return bad("appears twice");
    if (!t.defined()) return bad("is undefined");
    if (t.device() != Device::kCPU) return bad("is not on the CPU; copy it to the host first");
    crc = Crc32c(t.raw_data(), t.bytes(), crc);
    absl::StrAppend(&entries, ",", JsonQuote(name), ":{\"dtype\":\"", SafetensorsDType(t.dtype()),
                    "\",\"shape\":[", absl::StrJoin(t.shape(), ","), "],\"data_offsets\":[",
                    offset, ",", offset + t.bytes(), "]}");
    offset += t.bytes();
  }
  std::map<std::string, std::string> meta = metadata;
  meta[kSafetensorsCrcKey] = absl::StrFormat("%08x", crc);
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [k, v] : meta) {
    absl::StrAppend(&header, first ? "" : ",", JsonQuote(k), ":", JsonQuote(v));
    first = false;
  }
  absl::StrAppend(&header, "}", entries, "}");
  // Pad so the data starts on an 8-byte boundary, as the reference writer does.
  header.append((8 - header.size() % 8) % 8, ' ');
  uint64_t n = header.size();
  char len[8];
  std::memcpy(len, &n, 8);

  AtomicFileWriter writer;
  PL_RETURN_IF_ERROR(writer.Open(path));
  PL_RETURN_IF_ERROR(writer.Append(absl::string_view(len, 8)));
  PL_RETURN_IF_ERROR(writer.Append(header));
  for (const auto& [name, t] : tensors) {
    PL_RETURN_IF_ERROR(
        writer.Append(absl::string_view(static_cast<const char*>(t.raw_data()), t.bytes())));
  }
  return writer.Commit();
}

StatusOr<TensorFile> LoadTensors(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    return Corrupt(path, absl::StrCat("truncated: ", file_size, " bytes, the length alone is 8"));
  }
  uint64_t header_len = 0;
  PL_RETURN_IF_ERROR(PreadFully(fd.get(), &header_len, 8, 0, path));
  if (header_len > kMaxHeaderBytes) {
    return Corrupt(path, absl::StrCat("header length ", header_len, " exceeds the limit of ",
                                      kMaxHeaderBytes));
  }
  if (header_len > file_size - 8) {
    return Corrupt(path, absl::StrCat("truncated: header length ", header_len, " but only ",
                                      file_size - 8, " bytes follow"));
  }
  std::string header(header_len, '\0');
  PL_RETURN_IF_ERROR(PreadFully(fd.get(), header.data(), header_len, 8, path));
  if (header.empty() || header[0] != '{') return Corrupt(path, "header does not start with '{'");
  auto json = ParseJson(header);
  if (!json.ok()) return Corrupt(path, json.status().message());
  if (!json->is_object()) return Corrupt(path, "header is not a JSON object");

  TensorFile out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : json->object) {
    if (key == "__metadata__") {
      if (!value.is_object()) return Corrupt(path, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.object) {
        if (!mv.is_string()) {
          return Corrupt(path, absl::StrCat("__metadata__ value of \"", mk, "\" is not a string"));
        }
        out.metadata[mk] = mv.string;
      }
      continue;
    }
    PL_ASSIGN_OR_RETURN(Entry e, ParseEntry(path, key, value));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  uint64_t expect = 0;
  for (const Entry& e : entries) {
    if (e.begin != expect) {
      return Corrupt(path, absl::StrCat("tensor \"", e.name, "\" starts at data byte ", e.begin,
                                        ", expected ", expect, " (tensors must tile the data)"));
    }
    expect = e.end;
  }
  if (expect > data_size) {
    return Corrupt(path, absl::StrCat("truncated: the header describes ", expect,
                                      " data bytes but the file holds ", data_size));
  }
  if (expect < data_size) {
    return Corrupt(path, absl::StrCat(data_size - expect, " unexpected bytes after the data"));
  }

  uint32_t crc = 0;
  for (const Entry& e : entries) {
    Tensor t(e.shape, e.dtype);
    PL_RETURN_IF_ERROR(PreadFully(fd.get(), t.raw_data(), t.bytes(), data_start + e.begin, path));
    crc = Crc32c(t.raw_data(), t.bytes(), crc);
    out.order.push_back(e.name);
    out.tensors.emplace(e.name, std::move(t));
  }
  auto it = out.metadata.find(kSafetensorsCrcKey);
  if (it != out.metadata.end()) {
    uint32_t want = 0;
    if (it->second.size() != 8 || !absl::SimpleHexAtoi(it->second, &want)) {
      return Corrupt(path, absl::StrCat("bad ", kSafetensorsCrcKey, " \"", it->second, "\""));
    }
    if (want != crc) {
      return absl::DataLossError(absl::StrFormat(
          "'%s': checksum mismatch: the header records crc32c %08x, the data has %08x", path,
          want, crc));
    }
  }
  return out;
}

}  // namespace pl
