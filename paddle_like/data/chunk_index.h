// Record files and their chunk index (implemented in record_file.cc).
//
// A record file ("x.plrec") is a sequence of TFRecord frames:
//   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
// so TensorFlow's tools read it unchanged. The writer groups consecutive records into
// chunks and writes a sidecar index ("x.plrec.index") listing each chunk's byte offset,
// length and record count, itself checksummed, so the master cuts a dataset into tasks
// by reading only the indexes.
#ifndef PADDLE_LIKE_DATA_CHUNK_INDEX_H_
#define PADDLE_LIKE_DATA_CHUNK_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"

namespace pl {

struct ChunkInfo {
  std::string path;        // the record file
  int32_t index = 0;       // chunk number within the file
  int64_t offset = 0;      // byte offset of the chunk's first frame
  int64_t length = 0;      // bytes of all the chunk's frames
  int64_t num_records = 0;
};

// Reads "<record_path>.index". Errors name the file (NOT_FOUND, DATA_LOSS on a bad
// checksum or truncation).
StatusOr<std::vector<ChunkInfo>> ReadChunkIndex(const std::string& record_path);

// Every "*.plrec" file under `dir` (or `dir` itself if it is a record file), sorted
// by name, with its chunks; or, for "indices:N" / "indices:N:K", index chunks.
StatusOr<std::vector<ChunkInfo>> ListChunks(const std::string& dir_or_file);

// Index chunks: a job over a dataset the trainers' script holds itself (a Python
// Dataset of N samples) names no files; its chunks are ranges of sample indices,
// [offset, offset + num_records), K samples each (the last may hold fewer; K defaults
// to kDefaultIndexChunk). Their path is kIndexChunkPath, so a reader of record files
// refuses them by name instead of opening a file.
inline constexpr char kIndexChunkPath[] = "<indices>";
inline constexpr int64_t kDefaultIndexChunk = 256;
bool IsIndexSpec(const std::string& data);  // starts with "indices:"
StatusOr<std::vector<ChunkInfo>> IndexChunks(const std::string& spec);
inline bool IsIndexChunk(const ChunkInfo& c) { return c.path == kIndexChunkPath; }

}  // namespace pl

#endif  // PADDLE_LIKE_DATA_CHUNK_INDEX_H_
