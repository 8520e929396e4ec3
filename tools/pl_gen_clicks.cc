// pl-gen-clicks: synthetic click logs from a known logistic model (see
// paddle_like/data/synthetic_clicks.h), with the best achievable test AUC.
//
//   pl-gen-clicks --out data/clicks --train 500000 --test 100000
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/log.h"
#include "paddle_like/data/synthetic_clicks.h"

namespace {
const pl::ClickOptions kDefaults;
}  // namespace

ABSL_FLAG(std::string, out, "", "output directory (train.plrec, test.plrec and their indexes)");
ABSL_FLAG(int64_t, train, kDefaults.num_train, "training samples");
ABSL_FLAG(int64_t, test, kDefaults.num_test, "test samples");
ABSL_FLAG(int32_t, fields, kDefaults.fields, "sparse fields F; field f uses ids [f*V, (f+1)*V)");
ABSL_FLAG(int64_t, vocab, kDefaults.vocab, "ids per field V");
ABSL_FLAG(double, zipf, kDefaults.zipf, "Zipf exponent of each field's id distribution");
ABSL_FLAG(double, sigma, kDefaults.sigma, "stddev of the true per-id weights");
ABSL_FLAG(double, bias, kDefaults.bias, "true bias of the logistic model");
ABSL_FLAG(uint64_t, seed, kDefaults.seed, "seed: the model and the samples are functions of it");
ABSL_FLAG(int64_t, records_per_chunk, kDefaults.records_per_chunk, "records per chunk");

int main(int argc, char** argv) {
  const pl::cli::Program program = {
      "pl-gen-clicks", "--out DIR [--train N] [--test M] [flags]",
      "Writes synthetic click logs (train.plrec, test.plrec) drawn from a known logistic model\n"
      "and prints the best test AUC any model can reach on them."};
  pl::cli::ParseOrExit(program, argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) pl::cli::ExitWithUsageError(program, "--out is required");
  pl::ClickOptions o;
  o.num_train = absl::GetFlag(FLAGS_train);
  o.num_test = absl::GetFlag(FLAGS_test);
  o.fields = absl::GetFlag(FLAGS_fields);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.zipf = absl::GetFlag(FLAGS_zipf);
  o.sigma = absl::GetFlag(FLAGS_sigma);
  o.bias = absl::GetFlag(FLAGS_bias);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.records_per_chunk = absl::GetFlag(FLAGS_records_per_chunk);
  auto stats = pl::GenerateClicks(out, o);
  if (!stats.ok()) {
    pl::log::Error(stats.status().ToString());
    return 1;
  }
  pl::log::Info(absl::StrFormat("wrote %s (%lld samples, click rate %.4f) and %s (%lld samples, click rate %.4f)",
              stats->train_path.c_str(), static_cast<long long>(stats->num_train), stats->train_ctr,
              stats->test_path.c_str(), static_cast<long long>(stats->num_test), stats->test_ctr));
  pl::log::Info(absl::StrFormat("fields %d, vocab %lld per field (ids in [0, %lld))", o.fields,
              static_cast<long long>(o.vocab), static_cast<long long>(o.fields * o.vocab)));
  pl::log::Info(absl::StrFormat("ideal test auc: %.4f", stats->ideal_test_auc));
  return 0;
}
