#include "paddle_like/data/record_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "paddle_like/io/crc32c.h"

namespace pl {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "frames are little-endian");

constexpr size_t kFrameHeader = 12;  // uint64 length + uint32 masked crc(length)
constexpr size_t kFrameFooter = 4;   // uint32 masked crc(data)
constexpr size_t kWriteBuffer = 1 << 20;
constexpr size_t kReadBuffer = 1 << 18;
constexpr char kIndexMagic[8] = {'P', 'L', 'C', 'H', 'U', 'N', 'K', 'S'};
constexpr uint32_t kIndexVersion = 1;
constexpr size_t kIndexHeader = 8 + 4 + 4 + 8;
constexpr size_t kIndexEntry = 24;

template <typename T>
void AppendLE(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

template <typename T>
T LoadLE(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string IndexPath(const std::string& record_path) { return record_path + ".index"; }

}  // namespace

// ---------------------------------------------------------------- RecordWriter

RecordWriter::~RecordWriter() { file_.Abandon(); }

Status RecordWriter::Open(const std::string& path, int64_t records_per_chunk) {
  if (open_) return absl::FailedPreconditionError(absl::StrCat("RecordWriter: '", path_, "' is still open"));
  if (records_per_chunk < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("RecordWriter '", path, "': records_per_chunk must be >= 1, got ",
                     records_per_chunk));
  }
  path_ = path;
  records_per_chunk_ = records_per_chunk;
  error_ = absl::OkStatus();
  buffer_.clear();
  buffer_.reserve(kWriteBuffer + 4096);
  offset_ = 0;
  num_records_ = 0;
  chunks_.clear();
  current_ = ChunkInfo{path, 0, 0, 0, 0};
  PL_RETURN_IF_ERROR(file_.Open(path));
  open_ = true;
  return absl::OkStatus();
}

Status RecordWriter::Flush() {
  if (buffer_.empty()) return absl::OkStatus();
  Status s = file_.Append(buffer_);
  buffer_.clear();
  return s;
}

Status RecordWriter::Write(absl::string_view record) {
  if (!open_) return absl::FailedPreconditionError("RecordWriter: Write before Open");
  if (!error_.ok()) return error_;
  uint64_t len = record.size();
  char len_bytes[8];
  std::memcpy(len_bytes, &len, 8);
  buffer_.append(len_bytes, 8);
  AppendLE<uint32_t>(&buffer_, MaskCrc(Crc32c(len_bytes, 8)));
  if (record.size() >= kWriteBuffer) {
    // Large records go straight to the file rather than through the buffer.
    error_ = Flush();
    if (error_.ok()) error_ = file_.Append(record);
  } else {
    buffer_.append(record.data(), record.size());
  }
  AppendLE<uint32_t>(&buffer_, MaskCrc(Crc32c(record.data(), record.size())));
  if (error_.ok() && buffer_.size() >= kWriteBuffer) error_ = Flush();
  if (!error_.ok()) return error_;
  const int64_t frame = static_cast<int64_t>(kFrameHeader + len + kFrameFooter);
  offset_ += frame;
  current_.length += frame;
  ++current_.num_records;
  ++num_records_;
  if (current_.num_records == records_per_chunk_) FinishChunk();
  return absl::OkStatus();
}

void RecordWriter::FinishChunk() {
  if (current_.num_records == 0) return;
  chunks_.push_back(current_);
  current_ = ChunkInfo{path_, static_cast<int32_t>(chunks_.size()), offset_, 0, 0};
}

Status RecordWriter::Close() {
  if (!open_) return absl::FailedPreconditionError("RecordWriter: Close before Open");
  open_ = false;
  if (!error_.ok()) {
    file_.Abandon();
    return error_;
  }
  FinishChunk();
  Status s = Flush();
  if (s.ok()) s = file_.Commit();
  if (!s.ok()) {
    file_.Abandon();
    return error_ = s;
  }
  std::string index(kIndexMagic, sizeof(kIndexMagic));
  AppendLE<uint32_t>(&index, kIndexVersion);
  AppendLE<uint32_t>(&index, static_cast<uint32_t>(chunks_.size()));
  AppendLE<uint64_t>(&index, static_cast<uint64_t>(offset_));
  for (const ChunkInfo& c : chunks_) {
    AppendLE<int64_t>(&index, c.offset);
    AppendLE<int64_t>(&index, c.length);
    AppendLE<int64_t>(&index, c.num_records);
  }
  AppendLE<uint32_t>(&index, MaskCrc(Crc32c(index.data(), index.size())));
  return error_ = WriteFileAtomically(IndexPath(path_), index);
}

// ---------------------------------------------------------------- RecordReader

RecordReader::~RecordReader() { CloseFile(); }

void RecordReader::CloseFile() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status RecordReader::Open(const std::string& path) {
  return OpenRange(path, 0, -1, -1);
}

Status RecordReader::OpenChunk(const ChunkInfo& chunk) {
  if (IsIndexChunk(chunk)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk ", chunk.index, " holds sample indices [", chunk.offset, ", ", chunk.offset + chunk.num_records,
        "), not records: the job was cut with --data indices:N, for a trainer script that reads its own dataset "
        "(paddle_like.distributed.tasks())"));
  }
  if (chunk.offset < 0 || chunk.length < 0 || chunk.num_records < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", chunk.index, " of '", chunk.path, "' has a negative offset (",
                     chunk.offset, "), length (", chunk.length, ") or count"));
  }
  return OpenRange(chunk.path, chunk.offset, chunk.length, chunk.num_records);
}

Status RecordReader::OpenRange(const std::string& path, int64_t begin, int64_t length,
                               int64_t expected) {
  CloseFile();
  path_ = path;
  error_ = absl::OkStatus();
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return ErrnoStatus("cannot open record file", path, errno);
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus("cannot stat record file", path, errno);
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (length < 0) length = size - begin;
  if (begin + length > size) {
    int64_t b = begin;
    CloseFile();
    return absl::DataLossError(absl::StrCat("'", path, "' is truncated: the chunk spans bytes [",
                                            b, ", ", b + length, ") but the file has ", size));
  }
  pos_ = begin;
  end_ = begin + length;
  expected_records_ = expected;
  records_read_ = 0;
  buf_.resize(kReadBuffer);
  buf_begin_ = begin;
  buf_len_ = 0;
  return absl::OkStatus();
}

Status RecordReader::Corrupt(int64_t frame_offset, absl::string_view what) const {
  return absl::DataLossError(
      absl::StrCat("'", path_, "': corrupt record at byte ", frame_offset, ": ", what));
}

Status RecordReader::ReadExact(char* dst, size_t n) {
  while (n > 0) {
    int64_t buf_end = buf_begin_ + static_cast<int64_t>(buf_len_);
    if (pos_ >= buf_begin_ && pos_ < buf_end) {
      size_t take = std::min(n, static_cast<size_t>(buf_end - pos_));
      std::memcpy(dst, buf_.data() + (pos_ - buf_begin_), take);
      dst += take;
      n -= take;
      pos_ += static_cast<int64_t>(take);
      continue;
    }
    // Refill from pos_, never past the range end.
    size_t want = std::min(buf_.size(), static_cast<size_t>(end_ - pos_));
    char* target = buf_.data();
    bool direct = n >= buf_.size();  // big record: read straight into the destination
    if (direct) {
      want = n;
      target = dst;
    }
    ssize_t got = ::pread(fd_, target, want, static_cast<off_t>(pos_));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot read record file", path_, errno);
    }
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat("'", path_, "' is truncated: unexpected end of file at byte ", pos_));
    }
    if (direct) {
      dst += got;
      n -= static_cast<size_t>(got);
      pos_ += got;
      buf_len_ = 0;
    } else {
      buf_begin_ = pos_;
      buf_len_ = static_cast<size_t>(got);
    }
  }
  return absl::OkStatus();
}

StatusOr<bool> RecordReader::Next(std::string* record) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return absl::FailedPreconditionError("RecordReader: Next before Open");
  const int64_t frame = pos_;
  const int64_t left = end_ - pos_;
  if (left == 0) {
    if (expected_records_ >= 0 && records_read_ != expected_records_) {
      return absl::DataLossError(absl::StrCat("'", path_, "': the chunk ending at byte ", end_,
                                              " held ", records_read_,
                                              " records but its index says ", expected_records_));
    }
    return false;
  }
  Status s = [&]() -> Status {
    if (left < static_cast<int64_t>(kFrameHeader + kFrameFooter)) {
      return Corrupt(frame, absl::StrCat("truncated frame: ", left,
                                         " bytes left, a frame needs at least 16"));
    }
    char header[kFrameHeader];
    PL_RETURN_IF_ERROR(ReadExact(header, kFrameHeader));
    const uint64_t len = LoadLE<uint64_t>(header);
    if (UnmaskCrc(LoadLE<uint32_t>(header + 8)) != Crc32c(header, 8)) {
      return Corrupt(frame, "length checksum mismatch");
    }
    const uint64_t room = static_cast<uint64_t>(left) - kFrameHeader - kFrameFooter;
    if (len > room) {
      return Corrupt(frame, absl::StrCat("truncated frame: record length ", len, " but only ",
                                         room, " bytes left"));
    }
    record->resize(len);
    PL_RETURN_IF_ERROR(ReadExact(record->data(), len));
    char footer[kFrameFooter];
    PL_RETURN_IF_ERROR(ReadExact(footer, kFrameFooter));
    if (UnmaskCrc(LoadLE<uint32_t>(footer)) != Crc32c(record->data(), len)) {
      return Corrupt(frame, "data checksum mismatch");
    }
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    // A damaged frame leaves the position meaningless; later calls repeat the error.
    CloseFile();
    error_ = s;
    return s;
  }
  ++records_read_;
  return true;
}

// ---------------------------------------------------------------- chunk index

StatusOr<std::vector<ChunkInfo>> ReadChunkIndex(const std::string& record_path) {
  const std::string path = IndexPath(record_path);
  PL_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  auto corrupt = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("chunk index '", path, "': ", what));
  };
  if (data.size() < kIndexHeader + 4) {
    return corrupt(absl::StrCat("truncated: ", data.size(), " bytes"));
  }
  if (std::memcmp(data.data(), kIndexMagic, sizeof(kIndexMagic)) != 0) {
    return corrupt("bad magic (not a paddle_like chunk index)");
  }
  const uint32_t version = LoadLE<uint32_t>(data.data() + 8);
  if (version != kIndexVersion) {
    return absl::UnimplementedError(absl::StrCat("chunk index '", path, "' has version ", version,
                                                 "; this build reads version ", kIndexVersion));
  }
  const uint64_t n = LoadLE<uint32_t>(data.data() + 12);
  const uint64_t file_size = LoadLE<uint64_t>(data.data() + 16);
  if (data.size() != kIndexHeader + n * kIndexEntry + 4) {
    return corrupt(absl::StrCat("size ", data.size(), " does not match its ", n, " chunks"));
  }
  const size_t body = data.size() - 4;
  if (UnmaskCrc(LoadLE<uint32_t>(data.data() + body)) != Crc32c(data.data(), body)) {
    return corrupt("checksum mismatch");
  }
  std::vector<ChunkInfo> chunks;
  chunks.reserve(n);
  int64_t expect = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const char* e = data.data() + kIndexHeader + i * kIndexEntry;
    ChunkInfo c{record_path, static_cast<int32_t>(i), LoadLE<int64_t>(e), LoadLE<int64_t>(e + 8),
                LoadLE<int64_t>(e + 16)};
    if (c.offset != expect || c.length < 0 || c.num_records < 0) {
      return corrupt(absl::StrCat("chunk ", i, " is out of place (offset ", c.offset,
                                  ", length ", c.length, ")"));
    }
    expect = c.offset + c.length;
    chunks.push_back(std::move(c));
  }
  if (static_cast<uint64_t>(expect) != file_size) {
    return corrupt(absl::StrCat("chunks cover ", expect, " bytes, the index says the file has ",
                                file_size));
  }
  struct stat st;
  if (::stat(record_path.c_str(), &st) != 0) {
    return ErrnoStatus("cannot stat record file", record_path, errno);
  }
  if (static_cast<uint64_t>(st.st_size) != file_size) {
    return absl::DataLossError(absl::StrCat("record file '", record_path, "' has ", st.st_size,
                                            " bytes but its index describes ", file_size,
                                            " (truncated or replaced)"));
  }
  return chunks;
}

bool IsIndexSpec(const std::string& data) { return absl::StartsWith(data, "indices:"); }

StatusOr<std::vector<ChunkInfo>> IndexChunks(const std::string& spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  int64_t n = 0, per_chunk = kDefaultIndexChunk;
  const bool ok = parts.size() >= 2 && parts.size() <= 3 && parts[0] == "indices" && absl::SimpleAtoi(parts[1], &n) &&
                  n >= 1 && (parts.size() == 2 || (absl::SimpleAtoi(parts[2], &per_chunk) && per_chunk >= 1));
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", spec, "' is not indices:N or indices:N:K (N samples >= 1, K samples per chunk >= 1)"));
  }
  std::vector<ChunkInfo> chunks;
  for (int64_t first = 0; first < n; first += per_chunk) {
    ChunkInfo c;
    c.path = kIndexChunkPath;
    c.index = static_cast<int32_t>(chunks.size());
    c.offset = first;
    c.num_records = std::min(per_chunk, n - first);
    chunks.push_back(std::move(c));
  }
  return chunks;
}

StatusOr<std::vector<ChunkInfo>> ListChunks(const std::string& dir_or_file) {
  if (IsIndexSpec(dir_or_file)) return IndexChunks(dir_or_file);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(dir_or_file, ec);
  if (ec || !fs::exists(st)) {
    return absl::NotFoundError(absl::StrCat("no record file or directory '", dir_or_file, "'"));
  }
  if (!fs::is_directory(st)) return ReadChunkIndex(dir_or_file);
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir_or_file, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (absl::EndsWith(name, ".plrec") && it->is_regular_file(ec)) {
      files.push_back(it->path().string());
    }
  }
  if (ec) return ErrnoStatus("cannot list directory", dir_or_file, ec.value());
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no *.plrec files in '", dir_or_file, "'"));
  }
  std::sort(files.begin(), files.end());
  std::vector<ChunkInfo> all;
  for (const std::string& f : files) {
    PL_ASSIGN_OR_RETURN(std::vector<ChunkInfo> chunks, ReadChunkIndex(f));
    all.insert(all.end(), chunks.begin(), chunks.end());
  }
  return all;
}

}  // namespace pl
