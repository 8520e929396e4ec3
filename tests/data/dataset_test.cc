#include "paddle_like/data/dataset.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "paddle_like/data/record_file.h"
#include "proto/data.pb.h"
#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

using testing::ScratchDir;

// Image i (2 x 2 x 3, stored HWC): pixel (h, w, c) = 10 * i + 4 * c + 2 * h + w.
proto::Sample ColorImage(int i) {
  proto::Sample s;
  s.set_rows(2);
  s.set_cols(2);
  s.set_channels(3);
  s.set_label(i % 10);
  std::string px;
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 2; ++w)
      for (int c = 0; c < 3; ++c) px.push_back(static_cast<char>(10 * i + 4 * c + 2 * h + w));
  s.set_pixels(px);
  return s;
}

Status WriteSamples(const std::string& path, const std::vector<proto::Sample>& samples, int per_chunk) {
  RecordWriter w;
  PL_RETURN_IF_ERROR(w.Open(path, per_chunk));
  for (const auto& s : samples) PL_RETURN_IF_ERROR(w.Write(s.SerializeAsString()));
  return w.Close();
}

TEST(DatasetTest, ImagesBecomeNchwFloats) {
  ScratchDir dir;
  std::vector<proto::Sample> samples;
  for (int i = 0; i < 7; ++i) samples.push_back(ColorImage(i));
  ASSERT_TRUE(WriteSamples(dir.File("img.plrec"), samples, 3).ok());
  auto ex = LoadRecordsFrom(dir.File("img.plrec"), SampleLayout::Image());
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(ex->features.shape(), Shape({7, 3, 2, 2}));
  EXPECT_EQ(ex->layout.channels, 3);
  EXPECT_EQ(ex->labels.dtype(), DType::kInt64);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(ex->labels.i64()[i], i % 10);
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          EXPECT_FLOAT_EQ(ex->features.f32()[((i * 3 + c) * 2 + h) * 2 + w],
                          (10 * i + 4 * c + 2 * h + w) / 255.0f);
  }
}

TEST(DatasetTest, MismatchedSampleNamesTheRecord) {
  ScratchDir dir;
  std::vector<proto::Sample> samples = {ColorImage(0), ColorImage(1), ColorImage(2)};
  samples[2].set_rows(3);
  ASSERT_TRUE(WriteSamples(dir.File("bad.plrec"), samples, 2).ok());
  auto ex = LoadRecordsFrom(dir.File("bad.plrec"), SampleLayout::Image());
  EXPECT_EQ(ex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ex.status().message().find("chunk 1 record 0"), std::string::npos) << ex.status();
  EXPECT_NE(ex.status().message().find("bad.plrec"), std::string::npos);

  // A record that is not a Sample at all.
  RecordWriter w;
  ASSERT_TRUE(w.Open(dir.File("junk.plrec"), 2).ok());
  ASSERT_TRUE(w.Write("\xff\xff\xff").ok());
  ASSERT_TRUE(w.Close().ok());
  EXPECT_EQ(LoadRecordsFrom(dir.File("junk.plrec"), SampleLayout::Image()).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(DatasetTest, ClicksAndShuffledBatches) {
  ScratchDir dir;
  std::vector<proto::Sample> samples;
  for (int i = 0; i < 10; ++i) {
    proto::Sample s;
    s.set_label(i % 2);
    s.set_probability(i / 10.0f);
    s.add_sparse_ids(i);
    s.add_sparse_ids(100 + i);
    samples.push_back(s);
  }
  ASSERT_TRUE(WriteSamples(dir.File("c.plrec"), samples, 4).ok());
  auto ex = LoadRecordsFrom(dir.path(), SampleLayout::Clicks(2));
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_FALSE(ex->features.defined());
  EXPECT_EQ(ex->ids.shape(), Shape({10, 2}));
  EXPECT_EQ(ex->labels.dtype(), DType::kFloat32);
  EXPECT_EQ(ex->ids.i64()[7 * 2 + 1], 107);
  EXPECT_FLOAT_EQ(ex->probabilities.f32()[3], 0.3f);

  BatchIterator it(&*ex, 4, /*seed=*/5);
  EXPECT_EQ(it.batches_per_pass(), 3);
  Batch b;
  std::multiset<int64_t> seen;
  std::vector<int64_t> first_pass;
  std::vector<int64_t> sizes;
  const void* buffer = nullptr;
  while (it.Next(&b)) {
    sizes.push_back(b.size);
    ASSERT_EQ(b.ids.shape(), Shape({b.size, 2}));
    if (buffer == nullptr) buffer = b.ids.raw_data();
    EXPECT_EQ(b.ids.raw_data(), buffer);  // the same buffer every batch
    for (int64_t k = 0; k < b.size; ++k) {
      const int64_t i = b.indices[k];
      seen.insert(i);
      first_pass.push_back(i);
      EXPECT_EQ(b.ids.i64()[k * 2], i);
      EXPECT_EQ(b.ids.i64()[k * 2 + 1], 100 + i);
      EXPECT_EQ(b.labels.f32()[k], static_cast<float>(i % 2));
      EXPECT_FLOAT_EQ(b.probabilities.f32()[k], i / 10.0f);
    }
  }
  EXPECT_EQ(sizes, std::vector<int64_t>({4, 4, 2}));
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 10u);

  // The same seed repeats the order; the next pass draws another.
  BatchIterator again(&*ex, 4, 5);
  std::vector<int64_t> replay;
  while (again.Next(&b)) replay.insert(replay.end(), b.indices.begin(), b.indices.end());
  EXPECT_EQ(replay, first_pass);
  again.NewPass();
  std::vector<int64_t> second;
  while (again.Next(&b)) second.insert(second.end(), b.indices.begin(), b.indices.end());
  EXPECT_NE(second, first_pass);

  BatchIterator drop(&*ex, 4, 5, /*shuffle=*/false, /*drop_last=*/true);
  int batches = 0;
  while (drop.Next(&b)) {
    EXPECT_EQ(b.indices[0], 4 * batches);
    ++batches;
  }
  EXPECT_EQ(batches, 2);
}

TEST(DatasetTest, GatherRowsChecksItsArguments) {
  Tensor src = Tensor::FromVector({3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor dst = Tensor::Zeros({2, 2});
  ASSERT_TRUE(GatherRows(src, {2, 0}, dst).ok());
  EXPECT_EQ(dst.f32()[0], 4);
  EXPECT_EQ(dst.f32()[3], 1);
  EXPECT_EQ(GatherRows(src, {3}, dst).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(GatherRows(src, {0, 1, 2}, dst).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(src, {0}, Tensor::Zeros({2, 3})).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pl
