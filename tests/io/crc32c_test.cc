#include "paddle_like/io/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pl {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) appendix B.4.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(dec.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(inc.data(), 32), 0x46DD794Eu);
}

TEST(Crc32cTest, PortableMatchesAndExtendsAtEveryLengthAndSplit) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 131 + 7));
  for (size_t n = 0; n <= data.size(); n += 7) {
    const uint32_t whole = Crc32c(data.data(), n);
    EXPECT_EQ(Crc32cPortable(data.data(), n), whole) << n;
    const size_t cut = n / 3;
    EXPECT_EQ(Crc32c(data.data() + cut, n - cut, Crc32c(data.data(), cut)), whole) << n;
    EXPECT_EQ(Crc32cPortable(data.data() + cut, n - cut, Crc32cPortable(data.data(), cut)), whole);
  }
}

TEST(Crc32cTest, MaskRoundTripsAndMatchesTensorFlow) {
  for (uint32_t v : {0u, 1u, 0xE3069283u, 0xffffffffu}) EXPECT_EQ(UnmaskCrc(MaskCrc(v)), v);
  EXPECT_NE(MaskCrc(0xE3069283u), 0xE3069283u);
  // ((c >> 15) | (c << 17)) + 0xa282ead8, computed by hand for c = 1.
  EXPECT_EQ(MaskCrc(1u), (1u << 17) + 0xa282ead8u);
}

}  // namespace
}  // namespace pl
