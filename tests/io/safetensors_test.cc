#include "paddle_like/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "paddle_like/io/crc32c.h"
#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

using testing::ScratchDir;

// 8-byte little-endian length, header, data: the container as the spec describes it.
std::string Container(std::string header, const std::string& data) {
  uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(SafetensorsTest, RoundTripWithMetadata) {
  ScratchDir dir;
  const std::string path = dir.File("t.safetensors");
  Tensor w = Tensor::FromVector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor ids = Tensor::FromIds({3}, {7, -1, int64_t{1} << 40});
  Tensor scalar = Tensor::FromVector({}, {2.5f});
  Tensor empty = Tensor::Zeros({0, 4});
  ASSERT_TRUE(SaveTensors(path, {{"z.w", w}, {"a.ids", ids}, {"s", scalar}, {"e", empty}},
                          {{"step", "42"}, {"note", "quote \" and \\ and \xc3\xa9"}})
                  .ok());
  // The data starts 8-byte aligned.
  uint64_t header_len = 0;
  std::memcpy(&header_len, testing::Slurp(path).data(), 8);
  EXPECT_EQ(header_len % 8, 0u);

  auto f = LoadTensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->order, std::vector<std::string>({"z.w", "a.ids", "s", "e"}));
  EXPECT_EQ(f->metadata.at("step"), "42");
  EXPECT_EQ(f->metadata.at("note"), "quote \" and \\ and \xc3\xa9");
  EXPECT_EQ(f->metadata.at(kSafetensorsCrcKey).size(), 8u);
  const Tensor& w2 = f->tensors.at("z.w");
  EXPECT_EQ(w2.shape(), Shape({2, 3}));
  EXPECT_EQ(w2.dtype(), DType::kFloat32);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w2.f32()[i], i + 1.0f);
  const Tensor& ids2 = f->tensors.at("a.ids");
  EXPECT_EQ(ids2.dtype(), DType::kInt64);
  EXPECT_EQ(ids2.i64()[1], -1);
  EXPECT_EQ(ids2.i64()[2], int64_t{1} << 40);
  EXPECT_EQ(f->tensors.at("s").shape(), Shape({}));
  EXPECT_EQ(f->tensors.at("s").f32()[0], 2.5f);
  EXPECT_EQ(f->tensors.at("e").shape(), Shape({0, 4}));
}

TEST(SafetensorsTest, WriterOutputIsExactlyTheSpecLayout) {
  ScratchDir dir;
  const std::string path = dir.File("exact.safetensors");
  std::vector<float> w = {1.0f, -2.0f};
  std::vector<int64_t> ids = {5};
  ASSERT_TRUE(SaveTensors(path, {{"w", Tensor::FromVector({2}, w)}, {"ids", Tensor::FromIds({1, 1}, ids)}})
                  .ok());
  const std::string data = Bytes(w) + Bytes(ids);
  std::string header = absl::StrFormat(
      "{\"__metadata__\":{\"pl.crc32c\":\"%08x\"},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"ids\":{\"dtype\":\"I64\",\"shape\":[1,1],\"data_offsets\":[8,16]}}",
      Crc32c(data.data(), data.size()));
  header.append((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(testing::Slurp(path), Container(header, data));
}

TEST(SafetensorsTest, LoadsAFileBuiltFromThePublishedSpec) {
  ScratchDir dir;
  const std::string path = dir.File("spec.safetensors");
  // As another writer might produce it: metadata last, no checksum, extra whitespace,
  // keys in another order, padding spaces after the JSON.
  std::vector<float> a = {0.5f, 1.5f, 2.5f, 3.5f};
  std::vector<int64_t> b = {1, 2, 3};
  const std::string header =
      "{\"b\": {\"dtype\": \"I64\", \"data_offsets\": [16, 40], \"shape\": [3]},\n"
      " \"a\": {\"shape\": [2, 2], \"dtype\": \"F32\", \"data_offsets\": [0, 16]},\n"
      " \"__metadata__\": {\"format\": \"pt\"}}    ";
  testing::Spit(path, Container(header, Bytes(a) + Bytes(b)));
  auto f = LoadTensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->order, std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(f->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(f->tensors.at("a").shape(), Shape({2, 2}));
  EXPECT_EQ(f->tensors.at("a").f32()[3], 3.5f);
  EXPECT_EQ(f->tensors.at("b").i64()[2], 3);
}

TEST(SafetensorsTest, ChecksumMismatchIsDataLoss) {
  ScratchDir dir;
  const std::string path = dir.File("c.safetensors");
  ASSERT_TRUE(SaveTensors(path, {{"w", Tensor::FromVector({4}, {1, 2, 3, 4})}}).ok());
  const size_t size = testing::Slurp(path).size();
  testing::FlipByte(path, size - 3);  // inside the data
  auto f = LoadTensors(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find(path), std::string::npos);
  EXPECT_NE(f.status().message().find("checksum"), std::string::npos);
}

TEST(SafetensorsTest, TruncatedOrMalformedIsDataLoss) {
  ScratchDir dir;
  const std::string path = dir.File("t.safetensors");
  ASSERT_TRUE(SaveTensors(path, {{"w", Tensor::FromVector({4}, {1, 2, 3, 4})}}).ok());
  const std::string good = testing::Slurp(path);
  for (size_t cut : {size_t{0}, size_t{5}, size_t{8}, size_t{20}, good.size() - 1}) {
    testing::Spit(path, good.substr(0, cut));
    auto f = LoadTensors(path);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << cut << " " << f.status();
    EXPECT_NE(f.status().message().find(path), std::string::npos);
  }
  testing::Spit(path, good + "extra");
  EXPECT_EQ(LoadTensors(path).status().code(), absl::StatusCode::kDataLoss);

  // Header lies: a length past the end, holes, overlaps, sizes not matching shapes.
  const std::string data(16, '\0');
  auto load = [&](const std::string& header) {
    testing::Spit(path, Container(header, data));
    return LoadTensors(path).status();
  };
  EXPECT_EQ(load("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}").code(),
            absl::StatusCode::kDataLoss);  // hole at the start
  EXPECT_EQ(load("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}")
                .code(),
            absl::StatusCode::kDataLoss);  // overlap
  EXPECT_EQ(load("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}").code(),
            absl::StatusCode::kDataLoss);  // 12 bytes of shape in 16
  EXPECT_EQ(load("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,16]}}")
                .code(),
            absl::StatusCode::kDataLoss);  // overflowing shape
  EXPECT_EQ(load("{\"a\":{\"dtype\":\"Q7\",\"shape\":[4],\"data_offsets\":[0,16]}}").code(),
            absl::StatusCode::kDataLoss);  // unknown dtype
  Status f16 = load("{\"a\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}");
  EXPECT_EQ(f16.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(f16.message().find("F16"), std::string::npos);
  EXPECT_EQ(load("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},}").code(),
            absl::StatusCode::kDataLoss);  // not JSON
  EXPECT_EQ(load("{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[4],"
                 "\"data_offsets\":[0,16]}}")
                .code(),
            absl::StatusCode::kDataLoss);  // metadata values are strings
  // A header length far beyond the file.
  std::string huge(8, '\xff');
  testing::Spit(path, huge + "{}");
  EXPECT_EQ(LoadTensors(path).status().code(), absl::StatusCode::kDataLoss);

  EXPECT_EQ(LoadTensors(dir.File("missing")).status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsTest, SaveRejectsBadNames) {
  ScratchDir dir;
  Tensor t = Tensor::Zeros({1});
  EXPECT_EQ(SaveTensors(dir.File("x"), {{"a", t}, {"a", t}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SaveTensors(dir.File("x"), {{"__metadata__", t}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.File("x")));
}

}  // namespace
}  // namespace pl
