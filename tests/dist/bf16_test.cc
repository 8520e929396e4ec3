// bfloat16 on the wire (paddle_like/dist/bf16.h): rounding to nearest even against
// hand-computed bit patterns, error feedback losing nothing over many steps, and dense
// frames that carry bfloat16 in half the bytes and arrive as float32.
#include "paddle_like/dist/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "paddle_like/dist/dense_frame.h"

namespace pl {
namespace {

uint16_t Encode(float f) {
  uint16_t h;
  EncodeBf16(&f, 1, &h);
  return h;
}
float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(Bf16Test, RoundsToNearestTiesToEven) {
  EXPECT_EQ(Encode(1.0f), 0x3f80);
  EXPECT_EQ(Encode(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7: to 1. 1 + 3·2^-8 lies halfway
  // between 1 + 2^-7 (odd) and 1 + 2^-6: to 1 + 2^-6.
  EXPECT_EQ(Encode(Bits(0x3f808000)), 0x3f80);
  EXPECT_EQ(Encode(Bits(0x3f818000)), 0x3f82);
  EXPECT_EQ(Encode(Bits(0x3f808001)), 0x3f81);  // just above halfway: up
  EXPECT_EQ(Encode(Bits(0x3f807fff)), 0x3f80);  // just below: down
  EXPECT_EQ(Encode(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(Encode(std::numeric_limits<float>::max()), 0x7f80);  // beyond bf16's largest + half an ulp
  float back;
  const uint16_t nan = Encode(std::numeric_limits<float>::quiet_NaN());
  DecodeBf16(&nan, 1, &back);
  EXPECT_TRUE(std::isnan(back));
  const uint16_t h = Encode(Bits(0x7f800001));  // a NaN whose payload sits in the low bits only
  DecodeBf16(&h, 1, &back);
  EXPECT_TRUE(std::isnan(back)) << "must not become infinity";
  const uint16_t v = 0x3fc0;
  DecodeBf16(&v, 1, &back);
  EXPECT_EQ(back, 1.5f);
}

TEST(Bf16Test, ErrorFeedbackLosesNothingOverTime) {
  // 0.1 is not a bfloat16 (it rounds to 0.10009765625): sent 1000 times without
  // feedback the sum is off by 1000 roundings; with it, by at most the last one.
  const float g = 0.1f;
  float residual = 0.0f;
  double with = 0, without = 0;
  for (int k = 0; k < 1000; ++k) {
    uint16_t h;
    float sent;
    EncodeBf16(&g, 1, &h, &residual);
    DecodeBf16(&h, 1, &sent);
    with += sent;
    EncodeBf16(&g, 1, &h);
    DecodeBf16(&h, 1, &sent);
    without += sent;
  }
  EXPECT_GT(std::abs(without - 100.0), 0.09);
  EXPECT_LT(std::abs(with - 1000.0 * g), 4e-4);  // half a bf16 ulp at 0.1, and float sums
  EXPECT_LT(std::abs(residual), 4e-4f);
}

TEST(Bf16Test, ParsesItsNames) {
  EXPECT_EQ(*ParseWireDtype("bf16"), WireDtype::kBfloat16);
  EXPECT_EQ(*ParseWireDtype("float32"), WireDtype::kFloat32);
  StatusOr<WireDtype> bad = ParseWireDtype("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fp8': known are float32 and bfloat16"), std::string::npos);
}

TEST(Bf16Test, AFrameCarriesHalfTheBytesAndArrivesAsFloats) {
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * i) * 100;
  PushFrame f32, bf16;
  f32.AddDenseCopy("w", 0, values.data(), values.size());
  bf16.AddDenseBf16("w", 0, values.data(), values.size());
  grpc::ByteBuffer a, b;
  ASSERT_TRUE(f32.ToByteBuffer(&a).ok());
  ASSERT_TRUE(bf16.ToByteBuffer(&b).ok());
  EXPECT_LT(b.Length(), a.Length() / 2 + 16);
  PushFrame got;
  ASSERT_TRUE(got.FromByteBuffer(&b).ok());
  ASSERT_EQ(got.dense().size(), 1u);
  ASSERT_EQ(got.dense()[0].values.size(), 1000);
  EXPECT_FALSE(got.dense()[0].bf16);
  std::vector<uint16_t> expect(1000);
  EncodeBf16(values.data(), 1000, expect.data());
  std::vector<float> decoded(1000);
  DecodeBf16(expect.data(), 1000, decoded.data());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(got.dense()[0].values.At(i), decoded[i]) << i;
    ASSERT_LE(std::abs(decoded[i] - values[i]), std::abs(values[i]) * (1.0f / 256)) << i;
  }
  // The generated protobuf type reads the same bytes.
  proto::PushRequest as_proto = bf16.ToProto();
  ASSERT_EQ(as_proto.dense(0).bf16_values().size(), 2000u);
  PushFrame again = PushFrame::FromProtoRef(as_proto);
  EXPECT_EQ(again.dense()[0].values.At(7), decoded[7]);
}

}  // namespace
}  // namespace pl
