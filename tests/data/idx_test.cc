#include "paddle_like/data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "paddle_like/data/dataset.h"
#include "paddle_like/data/idx_convert.h"
#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

const char kFashion[] = "/usr/share/datasets/fashion-mnist";


TEST(IdxTest, RealFashionMnistTrainLabels) {
  auto labels = ReadIdx(std::string(kFashion) + "/train-labels-idx1-ubyte.gz");
  ASSERT_TRUE(labels.ok()) << labels.status();
  ASSERT_EQ(labels->dims, std::vector<int64_t>({60000}));
  ASSERT_EQ(labels->data.size(), 60000u);
  int counts[10] = {0};
  for (uint8_t v : labels->data) {
    ASSERT_LT(v, 10);
    ++counts[v];
  }
  for (int c : counts) EXPECT_EQ(c, 6000);  // Fashion-MNIST is balanced
}

TEST(IdxTest, PlainAndGzipFilesMadeByHand) {
  testing::ScratchDir dir;
  // magic 0x00000803, dims 2 x 1 x 3, six bytes.
  const std::string bytes("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x03"
                          "\x01\x02\x03\xfd\xfe\xff", 22);
  testing::Spit(dir.File("a.idx"), bytes);
  auto a = ReadIdx(dir.File("a.idx"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dims, std::vector<int64_t>({2, 1, 3}));
  EXPECT_EQ(a->data, std::vector<uint8_t>({1, 2, 3, 253, 254, 255}));

  gzFile gz = gzopen(dir.File("a.idx.gz").c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  gzclose(gz);
  auto b = ReadIdx(dir.File("a.idx.gz"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data, a->data);

  // Truncated data and trailing bytes are both DATA_LOSS.
  testing::Spit(dir.File("short.idx"), bytes.substr(0, 20));
  EXPECT_EQ(ReadIdx(dir.File("short.idx")).status().code(), absl::StatusCode::kDataLoss);
  testing::Spit(dir.File("long.idx"), bytes + "x");
  EXPECT_EQ(ReadIdx(dir.File("long.idx")).status().code(), absl::StatusCode::kDataLoss);
  // A huge claimed size (2^31 x 4096 x 1) with no data behind it fails quickly,
  // without allocating what the header claims.
  testing::Spit(dir.File("huge.idx"),
                std::string("\x00\x00\x08\x03\x7f\xff\xff\xff\x00\x00\x10\x00\x00\x00\x00\x01", 16));
  EXPECT_EQ(ReadIdx(dir.File("huge.idx")).status().code(), absl::StatusCode::kDataLoss);
}

TEST(IdxTest, WrongMagicNamesFileAndMagic) {
  testing::ScratchDir dir;
  testing::Spit(dir.File("bad.idx"), "PK\x03\x04 not idx at all");
  auto r = ReadIdx(dir.File("bad.idx"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(dir.File("bad.idx")), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("0x504b0304"), std::string::npos) << r.status();

  testing::Spit(dir.File("float.idx"), std::string("\x00\x00\x0d\x01\x00\x00\x00\x00", 8));
  EXPECT_EQ(ReadIdx(dir.File("float.idx")).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(IdxTest, MissingPathIsNotFound) {
  auto r = ReadIdx("/nonexistent/dir/train-images-idx3-ubyte.gz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/train-images-idx3-ubyte.gz"),
            std::string::npos);
}

TEST(IdxTest, ConvertRealTestSetAndLoadIt) {
  testing::ScratchDir dir;
  const std::string out = dir.File("test.plrec");
  auto stats = ConvertIdxToRecords(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz",
                                   std::string(kFashion) + "/t10k-labels-idx1-ubyte.gz", out, 1000);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->num_records, 10000);
  EXPECT_EQ(stats->num_chunks, 10);
  auto ex = LoadRecordsFrom(dir.path(), SampleLayout::Image());
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(ex->features.shape(), Shape({10000, 1, 28, 28}));
  EXPECT_EQ(ex->labels.shape(), Shape({10000}));
  auto labels = *ReadIdx(std::string(kFashion) + "/t10k-labels-idx1-ubyte.gz");
  auto images = *ReadIdx(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz");
  for (int64_t i = 0; i < 10000; i += 997) {
    EXPECT_EQ(ex->labels.i64()[i], labels.data[i]);
    for (int p = 0; p < 784; p += 50) {
      EXPECT_FLOAT_EQ(ex->features.f32()[i * 784 + p], images.data[i * 784 + p] / 255.0f);
    }
  }
  float lo = 1, hi = 0;
  for (int64_t k = 0; k < ex->features.numel(); ++k) {
    lo = std::min(lo, ex->features.f32()[k]);
    hi = std::max(hi, ex->features.f32()[k]);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);

  // Mismatched label count is refused, naming both files.
  auto bad = ConvertIdxToRecords(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz",
                                 std::string(kFashion) + "/train-labels-idx1-ubyte.gz",
                                 dir.File("bad.plrec"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("train-labels"), std::string::npos);
}

}  // namespace
}  // namespace pl
