// Evaluation metrics over whole prediction sets.
//
// Thread-safety: pure functions.
#ifndef PADDLE_LIKE_NN_METRICS_H_
#define PADDLE_LIKE_NN_METRICS_H_

#include <vector>

namespace pl {

// Exact area under the ROC curve for binary labels (label > 0.5 is positive): the
// probability that a random positive scores above a random negative, a tie counting
// one half (the Mann-Whitney U statistic over mid-ranks). O(n log n).
// Returns NaN when there are no positives or no negatives (AUC is undefined) or when
// the two vectors differ in length.
double BinaryAuc(const std::vector<float>& scores, const std::vector<float>& labels);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_METRICS_H_
