// The histogram TensorBoard draws for a set of values: TensorFlow's default buckets
// (limits ±1e-12 · 1.1^k up to 1e20, plus ±DBL_MAX and 0), so the distributions and
// histograms dashboards show our files exactly as they show TensorFlow's.
//
// Thread-safety: pure functions, thread-safe.
#ifndef PADDLE_LIKE_METRICS_SUMMARY_HISTOGRAM_H_
#define PADDLE_LIKE_METRICS_SUMMARY_HISTOGRAM_H_

#include <vector>

#include "absl/types/span.h"
#include "proto/tensorboard_event.pb.h"

namespace pl::metrics {

// The upper limits of TensorFlow's default histogram buckets, ascending (1,551 of them).
const std::vector<double>& DefaultBucketLimits();

// min, max, count, sum, sum of squares and the bucket counts of `values`. Runs of empty
// buckets are collapsed into one (as TensorFlow's Histogram::EncodeToProto does), so a
// histogram costs bytes in proportion to the buckets it fills, not to all 1,551.
// Non-finite values are skipped: one NaN must not poison a whole histogram.
proto::tb::HistogramProto BuildHistogram(absl::Span<const double> values);

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_SUMMARY_HISTOGRAM_H_
