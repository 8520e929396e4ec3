// pl-bench-checkpoint: how long a pserver's checkpoint takes, full against incremental
// (issue #15), in the same run on the same disk.
//
// One shard (pserver 0 of 1) holds an embedding table of --rows rows of --dim with
// Adam's two slots, every row trained, and a small dense layer. A full checkpoint of it
// is the reference; then --changed_percent of the rows get a push and an incremental
// checkpoint is written: its time and size / the full one's (and, between the two, an
// incremental one after every row changed). Also the cost of marking changed rows:
// sparse push rows/s with the marks / without. Both are
// written as pl-pserver writes them (pserver/checkpoint/checkpoint.h: buffered, CRC-32C, fsync,
// rename), under --dir.
//
//   pl-bench-checkpoint [--rows 1000000] [--dim 16] [--changed_percent 1] [--dir /tmp]
#include <filesystem>
#include <iostream>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/bench_util.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/nn/init.h"
#include "pserver/checkpoint/checkpoint.h"
#include "pserver/store/shard.h"

ABSL_FLAG(int64_t, rows, 1000000, "rows of the embedding table (>= 100)");
ABSL_FLAG(int64_t, dim, 16, "the table's dimension (>= 1)");
ABSL_FLAG(double, changed_percent, 1.0, "rows changed between the two checkpoints, percent (0, 100]");
ABSL_FLAG(std::string, dir, "/tmp", "where the checkpoints are written (removed afterwards)");

namespace pl::bench {
namespace {

namespace fs = std::filesystem;

proto::InitRequest Init(int64_t dim) {
  proto::InitRequest r;
  proto::ParamSpec* t = r.add_params();
  t->set_name("emb");
  t->set_kind(proto::ParamSpec::SPARSE);
  t->set_dim(dim);
  t->set_init_kind(static_cast<int>(InitSpec::Kind::kUniform));
  t->set_init_scale(0.01f);
  proto::ParamSpec* w = r.add_params();
  w->set_name("w");
  w->set_kind(proto::ParamSpec::DENSE);
  w->add_shape(256);
  w->add_shape(64);
  w->set_block_size(4096);
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 1e-3f;
  *r.mutable_optimizer() = OptimizerToProto(adam);
  r.set_seed(1);
  return r;
}

// Pushes a gradient into rows [first, first + n), in batches.
Status Touch(pserver::ParameterShard& shard, int64_t first, int64_t n, int64_t dim) {
  constexpr int64_t kBatch = 65536;
  for (int64_t b = first; b < first + n; b += kBatch) {
    const int64_t count = std::min(kBatch, first + n - b);
    proto::PushRequest push;
    proto::SparseRowsMsg* rows = push.add_sparse();
    rows->set_table("emb");
    rows->set_dim(dim);
    for (int64_t id = b; id < b + count; ++id) rows->add_ids(id);
    std::vector<float> g(count * dim, 1e-3f);
    SetFloats(rows->mutable_values(), g.data(), static_cast<int64_t>(g.size()));
    PL_RETURN_IF_ERROR(shard.Push(PushFrame::FromProtoRef(push)).status());
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  const cli::Program program = {
      "pl-bench-checkpoint", "[--rows 1000000] [--dim 16] [--changed_percent 1] [--dir /tmp]",
      "A pserver checkpoint's time and size, full against incremental after some rows changed,\n"
      "in the same run on the same disk."};
  cli::ParseOrExit(program, argc, argv);
  const int64_t rows = absl::GetFlag(FLAGS_rows), dim = absl::GetFlag(FLAGS_dim);
  const double percent = absl::GetFlag(FLAGS_changed_percent);
  cli::CheckOrExit(program, {cli::CheckAtLeast("rows", rows, int64_t{100}), cli::CheckAtLeast("dim", dim, int64_t{1})});
  if (!(percent > 0 && percent <= 100)) cli::ExitWithUsageError(program, "--changed_percent must be in (0, 100]");
  const std::string dir = absl::StrCat(absl::GetFlag(FLAGS_dir), "/pl-bench-checkpoint-", getpid());
  std::printf("pl-bench-checkpoint: load average at start %s\n", LoadAverage().c_str());

  pserver::ParameterShard shard(0, 1);
  Status s = shard.Init(Init(dim)).status();
  if (s.ok()) s = Touch(shard, 0, rows, dim);  // creates every row
  double t0 = NowSeconds();
  if (s.ok()) s = Touch(shard, 0, rows, dim);
  const double untracked_s = NowSeconds() - t0;
  pserver::Checkpointer ckpt(dir, 0, /*keep=*/2, /*full_every=*/10);
  t0 = NowSeconds();
  StatusOr<std::string> full = s.ok() ? ckpt.Save(shard) : StatusOr<std::string>(s);
  const double full_s = NowSeconds() - t0;
  // From the first save on, pushes mark the rows they change.
  t0 = NowSeconds();
  if (full.ok()) s = Touch(shard, 0, rows, dim);
  const double tracked_s = NowSeconds() - t0;
  t0 = NowSeconds();
  StatusOr<std::string> every = s.ok() && full.ok() ? ckpt.Save(shard) : StatusOr<std::string>(s);
  const double every_s = NowSeconds() - t0;
  const int64_t changed = std::max<int64_t>(1, static_cast<int64_t>(rows * percent / 100));
  if (every.ok()) s = Touch(shard, rows / 3, changed, dim);  // a block of rows in the middle
  t0 = NowSeconds();
  StatusOr<std::string> delta = s.ok() && every.ok() ? ckpt.Save(shard) : StatusOr<std::string>(s);
  const double delta_s = NowSeconds() - t0;
  if (!full.ok() || !every.ok() || !delta.ok()) {
    std::cout << (!full.ok() ? full.status() : !every.ok() ? every.status() : delta.status()) << std::endl;
    return 1;
  }
  const double full_mb = fs::file_size(*full) / 1e6, delta_mb = fs::file_size(*delta) / 1e6;
  Header(absl::StrCat("A shard of ", rows, " rows of dim ", dim, " (Adam), ", changed, " rows changed"));
  ReportLine("incremental checkpoint, time", delta_s * 1e3, "ms", full_s * 1e3, "ms", "full checkpoint",
             delta_s / full_s);
  ReportLine("incremental checkpoint, size", delta_mb, "MB", full_mb, "MB", "full checkpoint", delta_mb / full_mb);
  ReportLine("incremental, every row changed, time", every_s * 1e3, "ms", full_s * 1e3, "ms", "full checkpoint",
             every_s / full_s);
  std::printf("  (full: %.0f MB/s written)\n", full_mb / full_s);
  ReportLine("sparse push marking changed rows", rows / tracked_s / 1e6, "M rows/s", rows / untracked_s / 1e6,
             "M rows/s", "the same pushes unmarked", untracked_s / tracked_s);

  // Restoring the chain gives the state the shard has: checked on a sample of rows.
  pserver::Checkpointer reader(dir, 0);
  auto restored = reader.RestoreLatest(1);
  if (!restored.ok() || !restored->shard || restored->chain.size() != 3) {
    std::cout << "restore: " << (restored.ok() ? "not the chain of three" : restored.status().ToString()) << std::endl;
    return 1;
  }
  std::printf("  restored a full checkpoint + %zu deltas: version %lld (the shard's: %lld)\n",
              restored->chain.size() - 1, static_cast<long long>(restored->shard->version()),
              static_cast<long long>(shard.version()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  std::printf("\nload average at end %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace pl::bench

int main(int argc, char** argv) { return pl::bench::Main(argc, argv); }
