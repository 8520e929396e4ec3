// pl-convert: imports datasets into paddle_like record files.
//
//   pl-convert idx --images train-images-idx3-ubyte.gz
//                  --labels train-labels-idx1-ubyte.gz
//                  --out data/train.plrec [--records_per_chunk 1000]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/log.h"
#include "paddle_like/data/idx_convert.h"

ABSL_FLAG(std::string, images, "", "IDX image file (N, rows, cols), plain or .gz");
ABSL_FLAG(std::string, labels, "", "IDX label file (N), plain or .gz");
ABSL_FLAG(std::string, out, "", "record file to write (its index goes to <out>.index)");
ABSL_FLAG(int64_t, records_per_chunk, 1000, "records per chunk (the master's unit of work)");

namespace {

int Fail(const std::string& cause) {
  pl::log::Error(cause);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const pl::cli::Program program = {
      "pl-convert", "idx --images X --labels Y --out DIR/train.plrec [--records_per_chunk N]",
      "Imports a dataset into a record file. Subcommand idx: MNIST-style IDX image and label files.",
      {},
      /*max_positional=*/1};
  const pl::cli::CommandLine line = pl::cli::ParseOrExit(program, argc, argv);
  if (line.positional.size() != 1 || line.positional[0] != "idx") {
    pl::cli::ExitWithUsageError(program, "expected one subcommand: idx");
  }
  const std::string images = absl::GetFlag(FLAGS_images);
  const std::string labels = absl::GetFlag(FLAGS_labels);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (images.empty() || labels.empty() || out.empty()) {
    pl::cli::ExitWithUsageError(program, "--images, --labels and --out are required");
  }
  const int64_t records_per_chunk = absl::GetFlag(FLAGS_records_per_chunk);
  pl::cli::CheckOrExit(program, {pl::cli::CheckAtLeast<int64_t>("records_per_chunk", records_per_chunk, 1)});
  auto stats = pl::ConvertIdxToRecords(images, labels, out, records_per_chunk);
  if (!stats.ok()) return Fail(std::string(stats.status().ToString()));
  pl::log::Info(absl::StrFormat("wrote %s: %lld records of %dx%d images in %lld chunks, %lld bytes (+ %s.index)",
              out.c_str(), static_cast<long long>(stats->num_records), stats->rows, stats->cols,
              static_cast<long long>(stats->num_chunks), static_cast<long long>(stats->bytes),
              out.c_str()));
  return 0;
}
