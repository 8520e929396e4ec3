// CRC-32C (Castagnoli), the checksum of TFRecord frames, record indexes and tensor
// files. Uses the SSE4.2 crc32 instruction when the build targets it, a slicing-by-8
// table otherwise; both give identical results.
//
// Thread-safety: all functions are pure and thread-safe.
#ifndef PADDLE_LIKE_IO_CRC32C_H_
#define PADDLE_LIKE_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace pl {

// CRC-32C of data[0..n). Pass a previous result as `init` to continue it over more
// bytes: Crc32c(b, m, Crc32c(a, n)) == Crc32c(a ++ b).
uint32_t Crc32c(const void* data, size_t n, uint32_t init = 0);
// The table-driven implementation, always compiled; tests check it against Crc32c.
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t init = 0);

// TFRecord stores a rotated, offset CRC so that a CRC of data that embeds CRCs stays
// well distributed.
inline uint32_t MaskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace pl

#endif  // PADDLE_LIKE_IO_CRC32C_H_
