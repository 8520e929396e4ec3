// Reader for IDX files, the native format of MNIST and Fashion-MNIST
// (http://yann.lecun.com/exdb/mnist/): magic 0x00 0x00 <type> <ndims>, then ndims
// big-endian uint32 sizes, then the data, row-major. Plain or gzip-compressed
// (detected from the content, not the name). Only unsigned-byte data (type 0x08),
// which is what image and label files use.
//
// Thread-safety: pure function; thread-safe.
#ifndef PADDLE_LIKE_DATA_IDX_H_
#define PADDLE_LIKE_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"

namespace pl {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. (60000, 28, 28) for images, (60000) for labels
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// NOT_FOUND naming the path when missing; INVALID_ARGUMENT naming the file and the
// magic found when it is not an IDX file; UNIMPLEMENTED for non-byte IDX types;
// DATA_LOSS when truncated or followed by extra bytes, or the gzip stream is corrupt.
StatusOr<IdxArray> ReadIdx(const std::string& path);

}  // namespace pl

#endif  // PADDLE_LIKE_DATA_IDX_H_
