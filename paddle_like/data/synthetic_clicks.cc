#include "paddle_like/data/synthetic_clicks.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "paddle_like/data/record_file.h"
#include "paddle_like/core/random.h"
#include "paddle_like/nn/metrics.h"
#include "proto/data.pb.h"

namespace pl {
Status ValidateClickOptions(const ClickOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("click generator: ", what));
  };
  if (o.num_train < 0 || o.num_test < 0) return bad("sample counts must be >= 0");
  if (o.fields < 1) return bad(absl::StrCat("fields must be >= 1, got ", o.fields));
  if (o.vocab < 1) return bad(absl::StrCat("vocab must be >= 1, got ", o.vocab));
  if (o.vocab > (int64_t{1} << 40) / o.fields) return bad("fields x vocab is too large");
  if (!(o.zipf >= 0) || !std::isfinite(o.zipf)) return bad("zipf must be a finite value >= 0");
  if (!(o.sigma >= 0) || !std::isfinite(o.sigma)) return bad("sigma must be a finite value >= 0");
  if (!std::isfinite(o.bias)) return bad("bias must be finite");
  if (o.records_per_chunk < 1) return bad("records_per_chunk must be >= 1");
  return absl::OkStatus();
}

ClickModel::ClickModel(const ClickOptions& options) : options_(options) {
  const int64_t total = int64_t{options.fields} * options.vocab;
  weights_.resize(total);
  const uint64_t stream = MixSeed(options.seed, NameHash("synthetic_clicks.weights"));
  for (int64_t i = 0; i < total; ++i) {
    weights_[i] = static_cast<float>(NormalDraw(stream, static_cast<uint64_t>(i), static_cast<float>(options.sigma)));
  }
  cdf_.resize(options.vocab);
  double sum = 0;
  for (int64_t r = 0; r < options.vocab; ++r) {
    sum += std::pow(static_cast<double>(r + 1), -options.zipf);
    cdf_[r] = sum;
  }
  for (double& c : cdf_) c /= sum;
  cdf_.back() = 1.0;
}

double ClickModel::Probability(const int64_t* ids) const {
  double logit = options_.bias;
  for (int32_t f = 0; f < options_.fields; ++f) logit += weights_[ids[f]];
  return 1.0 / (1.0 + std::exp(-logit));
}

double ClickModel::Draw(int split, int64_t index, int64_t* ids, int64_t* label) const {
  const uint64_t stream =
      MixSeed(MixSeed(options_.seed, static_cast<uint64_t>(split) + 1), static_cast<uint64_t>(index));
  for (int32_t f = 0; f < options_.fields; ++f) {
    const double u = Uniform01(stream, static_cast<uint64_t>(f));
    const int64_t rank = std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
    ids[f] = int64_t{f} * options_.vocab + std::min<int64_t>(rank, options_.vocab - 1);
  }
  const double p = Probability(ids);
  *label = Uniform01(stream, static_cast<uint64_t>(options_.fields)) < p ? 1 : 0;
  return p;
}

StatusOr<ClickStats> GenerateClicks(const std::string& dir, const ClickOptions& options) {
  PL_RETURN_IF_ERROR(ValidateClickOptions(options));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(), absl::StrCat("cannot create directory '", dir, "'"));
  }
  const ClickModel model(options);
  ClickStats stats;
  std::vector<float> test_probs, test_labels;
  test_probs.reserve(options.num_test);
  test_labels.reserve(options.num_test);
  for (int split = 0; split < 2; ++split) {
    const int64_t n = split == 0 ? options.num_train : options.num_test;
    const std::string path = absl::StrCat(dir, "/", split == 0 ? "train" : "test", ".plrec");
    RecordWriter writer;
    PL_RETURN_IF_ERROR(writer.Open(path, options.records_per_chunk));
    proto::Sample sample;
    std::vector<int64_t> ids(options.fields);
    std::string record;
    int64_t clicks = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t label = 0;
      const double p = model.Draw(split, i, ids.data(), &label);
      sample.Clear();
      sample.set_label(label);
      sample.set_probability(static_cast<float>(p));
      for (int64_t id : ids) sample.add_sparse_ids(id);
      sample.SerializeToString(&record);
      PL_RETURN_IF_ERROR(writer.Write(record));
      clicks += label;
      if (split == 1) {
        // The AUC is taken over the values as stored, so a reader recomputes it exactly.
        test_probs.push_back(sample.probability());
        test_labels.push_back(static_cast<float>(label));
      }
    }
    PL_RETURN_IF_ERROR(writer.Close());
    const double ctr = n > 0 ? static_cast<double>(clicks) / n : 0.0;
    if (split == 0) {
      stats.num_train = n;
      stats.train_ctr = ctr;
      stats.train_path = path;
    } else {
      stats.num_test = n;
      stats.test_ctr = ctr;
      stats.test_path = path;
    }
  }
  stats.ideal_test_auc = BinaryAuc(test_probs, test_labels);
  return stats;
}

}  // namespace pl
