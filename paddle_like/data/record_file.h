// Writing and reading record files (the format is described in chunk_index.h).
//
//   RecordWriter w;
//   PL_RETURN_IF_ERROR(w.Open("train.plrec", /*records_per_chunk=*/1000));
//   for (...) PL_RETURN_IF_ERROR(w.Write(sample.SerializeAsString()));
//   PL_RETURN_IF_ERROR(w.Close());   // the file and "train.plrec.index" appear now
//
//   RecordReader r;
//   PL_RETURN_IF_ERROR(r.OpenChunk(chunk));
//   std::string rec;
//   while (true) { PL_ASSIGN_OR_RETURN(bool more, r.Next(&rec)); if (!more) break; ... }
//
// The writer streams into a temporary file and renames it into place on Close(), then
// writes the index atomically, so readers never see a half-written dataset. Every
// frame's length and data are checked against their CRC-32C: a corrupt or truncated
// file is DATA_LOSS naming the file and the byte offset, never a crash, and a corrupt
// length never causes an allocation larger than the bytes actually left in the range.
//
// Index file ("<record file>.index", little-endian):
//   "PLCHUNKS" | uint32 version (1) | uint32 num_chunks | uint64 record file size |
//   num_chunks x { int64 offset, int64 length, int64 num_records } |
//   uint32 masked crc32c of everything before it
//
// Thread-safety: a writer or reader is used by one thread; distinct readers may read
// the same file concurrently.
#ifndef PADDLE_LIKE_DATA_RECORD_FILE_H_
#define PADDLE_LIKE_DATA_RECORD_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"
#include "paddle_like/data/chunk_index.h"
#include "paddle_like/io/atomic_file.h"

namespace pl {

class RecordWriter {
 public:
  RecordWriter() = default;
  ~RecordWriter();  // without Close(), nothing is left on disk
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // `records_per_chunk` >= 1: a chunk closes after this many records.
  Status Open(const std::string& path, int64_t records_per_chunk = 1000);
  // Appends one record. After any failure every later call fails the same way.
  Status Write(absl::string_view record);
  // Finishes the last chunk, renames the record file into place, writes the index.
  Status Close();

  int64_t num_records() const { return num_records_; }
  // Chunks completed so far (all of them after Close()).
  const std::vector<ChunkInfo>& chunks() const { return chunks_; }

 private:
  Status Flush();
  void FinishChunk();

  std::string path_;
  int64_t records_per_chunk_ = 0;
  AtomicFileWriter file_;
  bool open_ = false;
  Status error_;
  std::string buffer_;
  int64_t offset_ = 0;  // bytes framed so far
  int64_t num_records_ = 0;
  ChunkInfo current_;
  std::vector<ChunkInfo> chunks_;
};

class RecordReader {
 public:
  RecordReader() = default;
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Reads the whole file.
  Status Open(const std::string& path);
  // Reads one chunk; at its end, checks that it held `chunk.num_records` records.
  Status OpenChunk(const ChunkInfo& chunk);
  // The next record into `*record`: true, or false at the end of the file or chunk.
  StatusOr<bool> Next(std::string* record);

  const std::string& path() const { return path_; }
  int64_t offset() const { return pos_; }  // byte offset of the next frame

 private:
  Status OpenRange(const std::string& path, int64_t begin, int64_t length, int64_t expected);
  Status ReadExact(char* dst, size_t n);
  Status Corrupt(int64_t frame_offset, absl::string_view what) const;
  void CloseFile();

  std::string path_;
  int fd_ = -1;
  Status error_;     // a damaged frame ends the read; later calls repeat the error
  int64_t pos_ = 0;  // absolute offset of the next unread byte
  int64_t end_ = 0;  // absolute end of the range
  int64_t expected_records_ = -1;  // -1: whole file, no count to check
  int64_t records_read_ = 0;
  std::string buf_;
  int64_t buf_begin_ = 0;  // file offset of buf_[0]
  size_t buf_len_ = 0;
};

}  // namespace pl

#endif  // PADDLE_LIKE_DATA_RECORD_FILE_H_
