#include "paddle_like/data/synthetic_clicks.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "paddle_like/data/dataset.h"
#include "paddle_like/nn/metrics.h"
#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

using testing::ScratchDir;
using testing::Slurp;

ClickOptions Small() {
  ClickOptions o;
  o.num_train = 3000;
  o.num_test = 2000;
  o.fields = 4;
  o.vocab = 50;
  o.seed = 11;
  o.records_per_chunk = 500;
  return o;
}

TEST(ClicksTest, SameSeedSameFilesAndIdealAucMatchesRecomputation) {
  ScratchDir a, b, c;
  auto sa = GenerateClicks(a.path(), Small());
  auto sb = GenerateClicks(b.path(), Small());
  ASSERT_TRUE(sa.ok()) << sa.status();
  ASSERT_TRUE(sb.ok()) << sb.status();
  for (const char* f : {"train.plrec", "test.plrec", "train.plrec.index", "test.plrec.index"}) {
    EXPECT_EQ(Slurp(a.File(f)), Slurp(b.File(f))) << f;
  }
  ClickOptions other = Small();
  other.seed = 12;
  ASSERT_TRUE(GenerateClicks(c.path(), other).ok());
  EXPECT_NE(Slurp(a.File("test.plrec")), Slurp(c.File("test.plrec")));

  EXPECT_GT(sa->ideal_test_auc, 0.5);
  EXPECT_LT(sa->ideal_test_auc, 1.0);
  EXPECT_GT(sa->test_ctr, 0.05);
  EXPECT_LT(sa->test_ctr, 0.95);

  auto test = LoadRecordsFrom(a.File("test.plrec"), SampleLayout::Clicks(4));
  ASSERT_TRUE(test.ok()) << test.status();
  ASSERT_EQ(test->size(), 2000);
  std::vector<float> p(test->probabilities.f32(), test->probabilities.f32() + 2000);
  std::vector<float> y(test->labels.f32(), test->labels.f32() + 2000);
  EXPECT_DOUBLE_EQ(BinaryAuc(p, y), sa->ideal_test_auc);

  // Each id lies in its field's range, and the stored probability is the model's.
  ClickModel model(Small());
  for (int64_t i = 0; i < 2000; i += 37) {
    const int64_t* ids = test->ids.i64() + i * 4;
    for (int f = 0; f < 4; ++f) {
      EXPECT_GE(ids[f], f * 50);
      EXPECT_LT(ids[f], (f + 1) * 50);
    }
    EXPECT_FLOAT_EQ(p[i], static_cast<float>(model.Probability(ids)));
  }
}

TEST(ClicksTest, ZipfMakesLowRanksCommon) {
  ClickOptions o = Small();
  o.zipf = 1.1;
  ClickModel model(o);
  std::vector<int> count(o.fields * o.vocab, 0);
  std::vector<int64_t> ids(o.fields);
  int64_t label;
  for (int64_t i = 0; i < 20000; ++i) {
    model.Draw(0, i, ids.data(), &label);
    ++count[ids[0]];
  }
  // P(rank 1) / P(rank 2) = 2^1.1 ~ 2.14.
  EXPECT_NEAR(static_cast<double>(count[0]) / count[1], std::pow(2.0, 1.1), 0.25);
  EXPECT_GT(count[0], 10 * count[o.vocab - 1] + 1);
}

TEST(ClicksTest, RejectsBadOptions) {
  ScratchDir d;
  ClickOptions o = Small();
  o.fields = 0;
  auto s = GenerateClicks(d.path(), o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("fields"), std::string::npos);
}

TEST(ClicksTest, ToolPrintsTheIdealAuc) {
  const char* bin = std::getenv("PL_BIN_DIR");
  ASSERT_NE(bin, nullptr) << "PL_BIN_DIR is set by pl_add_test";
  ScratchDir d;
  const std::string cmd = std::string(bin) + "/pl-gen-clicks --out " + d.path() +
                          " --train 1000 --test 1500 --fields 4 --vocab 50 --zipf 1.1 --seed 11"
                          " --records_per_chunk 500 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out;
  const size_t at = out.find("ideal test auc: ");
  ASSERT_NE(at, std::string::npos) << out;
  const double printed = std::atof(out.c_str() + at + 16);

  auto test = LoadRecordsFrom(d.File("test.plrec"), SampleLayout::Clicks());
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->size(), 1500);
  std::vector<float> pr(test->probabilities.f32(), test->probabilities.f32() + 1500);
  std::vector<float> y(test->labels.f32(), test->labels.f32() + 1500);
  const double auc = BinaryAuc(pr, y);
  EXPECT_GT(printed, 0.5);
  EXPECT_NEAR(printed, auc, 0.00005);

  // Bad flags: non-zero exit with a one-line cause.
  FILE* q = popen((std::string(bin) + "/pl-gen-clicks --out " + d.path() + " --fields 0 2>&1").c_str(), "r");
  std::string err;
  while (fgets(buf, sizeof buf, q)) err += buf;
  EXPECT_NE(pclose(q), 0);
  EXPECT_NE(err.find("fields"), std::string::npos) << err;
}

}  // namespace
}  // namespace pl
