#include "paddle_like/nn/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace pl {

double BinaryAuc(const std::vector<float>& scores, const std::vector<float>& labels) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const size_t n = scores.size();
  if (labels.size() != n) return nan;
  // NaN scores have no order (and would break the sort): the metric is undefined.
  for (float s : scores) {
    if (std::isnan(s)) return nan;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, tie-averaged) ranks of the positives.
  double positive_rank_sum = 0;
  double positives = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double mid_rank = 0.5 * static_cast<double>(i + 1 + j);  // mean of i+1 .. j
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] > 0.5f) {
        positive_rank_sum += mid_rank;
        positives += 1;
      }
    }
    i = j;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0 || negatives == 0) return nan;
  return (positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

}  // namespace pl
