#include "paddle_like/metrics/summary_histogram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace pl::metrics {

const std::vector<double>& DefaultBucketLimits() {
  static const std::vector<double> limits = [] {
    // tensorflow/core/lib/histogram/histogram.cc, InitDefaultBuckets.
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    std::vector<double> all;
    all.reserve(2 * positive.size() + 1);
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

proto::tb::HistogramProto BuildHistogram(absl::Span<const double> values) {
  const std::vector<double>& limits = DefaultBucketLimits();
  std::vector<double> counts(limits.size(), 0.0);
  proto::tb::HistogramProto h;
  double min = DBL_MAX, max = -DBL_MAX, num = 0, sum = 0, sum_squares = 0;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    // Bucket i holds (limits[i-1], limits[i]].
    const size_t i = std::lower_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[std::min(i, limits.size() - 1)] += 1;
    min = std::min(min, v);
    max = std::max(max, v);
    num += 1;
    sum += v;
    sum_squares += v * v;
  }
  h.set_min(num > 0 ? min : 0);
  h.set_max(num > 0 ? max : 0);
  h.set_num(num);
  h.set_sum(sum);
  h.set_sum_squares(sum_squares);
  for (size_t i = 0; i < limits.size();) {
    double end = limits[i];
    double count = counts[i];
    ++i;
    if (count <= 0) {
      while (i < limits.size() && counts[i] <= 0) end = limits[i++];
    }
    h.add_bucket_limit(end);
    h.add_bucket(count);
  }
  return h;
}

}  // namespace pl::metrics
