#include "paddle_like/metrics/summary_histogram.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

namespace pl::metrics {
namespace {

TEST(SummaryHistogramTest, DefaultLimitsAreTensorFlowsSymmetricLadder) {
  const std::vector<double>& l = DefaultBucketLimits();
  ASSERT_EQ(l.size(), 1551u);  // 774 positive, DBL_MAX, their negatives and 0
  EXPECT_EQ(l.front(), -DBL_MAX);
  EXPECT_EQ(l.back(), DBL_MAX);
  EXPECT_EQ(l[l.size() / 2], 0.0);
  EXPECT_DOUBLE_EQ(l[l.size() / 2 + 1], 1e-12);
  EXPECT_DOUBLE_EQ(l[l.size() / 2 + 2], 1.1e-12);
  for (size_t i = 1; i < l.size(); ++i) ASSERT_LT(l[i - 1], l[i]) << i;
  for (size_t i = 0; i < l.size(); ++i) ASSERT_EQ(l[i], -l[l.size() - 1 - i]) << i;
}

TEST(SummaryHistogramTest, CountsEveryFiniteValueInItsBucket) {
  const std::vector<double> values = {-3, -3, 0, 1e-5, 0.5, 0.5, 0.5, 7, std::nan(""),
                                      std::numeric_limits<double>::infinity()};
  const proto::tb::HistogramProto h = BuildHistogram(values);
  EXPECT_EQ(h.num(), 8);
  EXPECT_EQ(h.min(), -3);
  EXPECT_EQ(h.max(), 7);
  EXPECT_DOUBLE_EQ(h.sum(), -6 + 1e-5 + 1.5 + 7);
  EXPECT_DOUBLE_EQ(h.sum_squares(), 9 + 9 + 1e-10 + 0.75 + 49);
  ASSERT_EQ(h.bucket_size(), h.bucket_limit_size());
  double total = 0;
  for (int i = 0; i < h.bucket_size(); ++i) {
    total += h.bucket(i);
    if (i > 0) {
      EXPECT_LT(h.bucket_limit(i - 1), h.bucket_limit(i));
    }
  }
  EXPECT_EQ(total, 8);
  // The bucket holding 0.5 three times: (lower, upper] around it.
  for (int i = 1; i < h.bucket_size(); ++i) {
    if (h.bucket_limit(i - 1) < 0.5 && 0.5 <= h.bucket_limit(i)) {
      EXPECT_EQ(h.bucket(i), 3);
    }
  }
  // Empty runs collapse: far fewer buckets than limits.
  EXPECT_LT(h.bucket_size(), 20);
}

TEST(SummaryHistogramTest, EmptyInputIsAnEmptyHistogram) {
  const proto::tb::HistogramProto h = BuildHistogram({});
  EXPECT_EQ(h.num(), 0);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.bucket_size(), 1);  // one collapsed run of empty buckets
}

}  // namespace
}  // namespace pl::metrics
