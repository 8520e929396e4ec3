#include "benchmarks/bench_ps_apply.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/bench_util.h"
#include "paddle_like/core/parallel_for.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/dist/wire.h"
#include "pserver/store/shard.h"

namespace pl::bench {

// A pserver applying one cnn-sized Adam push (fc1: 3136 x 1024 floats, 12.8 MB, 49
// blocks) in process, on one thread and on --apply_threads' default (one per core);
// the reference is the memory traffic Adam needs (read p, m, v, g; write p, m, v: 28
// bytes a float) at the copy bandwidth memcpy reaches in the same run.
void RunApplyBenchmark(bool quick) {
  const int64_t rows = 3136, cols = 1024, n = rows * cols;
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 1e-3f;
  proto::InitRequest init;
  proto::ParamSpec* spec = init.add_params();
  spec->set_name("fc1.weight");
  spec->set_kind(proto::ParamSpec::DENSE);
  spec->add_shape(rows);
  spec->add_shape(cols);
  *init.mutable_optimizer() = OptimizerToProto(adam);
  std::vector<float> grad(n);
  for (int64_t i = 0; i < n; ++i) grad[i] = 1e-3f * static_cast<float>(i % 97);
  proto::PushRequest push;
  for (int64_t b = 0; b < NumBlocks(n, kDefaultBlockSize); ++b) {
    proto::DenseBlock* blk = push.add_dense();
    blk->set_param("fc1.weight");
    blk->set_block(static_cast<int32_t>(b));
    const int64_t off = b * kDefaultBlockSize, len = std::min<int64_t>(kDefaultBlockSize, n - off);
    SetFloats(blk->mutable_values(), grad.data() + off, len);
  }
  const int reps = quick ? 5 : 20;
  auto time_apply = [&](int threads) {
    SetApplyThreads(threads);
    pserver::ParameterShard shard(0, 1);
    if (Status s = shard.Init(init).status(); !s.ok()) {
      std::cout << "  init: " << s << std::endl;
      return 0.0;
    }
    const double t = BestSecondsPerCall([&] { (void)shard.Push(PushFrame::FromProtoRef(push)); }, reps, 0.3);
    SetApplyThreads(0);
    return t;
  };
  std::vector<float> a(n, 1.0f), b(n);
  const double t_copy = BestSecondsPerCall([&] { std::memcpy(b.data(), a.data(), n * 4); }, 5, 0.2);
  const double copy_gbs = 2.0 * n * 4 / t_copy / 1e9;  // read + write
  const double limit_s = 28.0 * n / (copy_gbs * 1e9);
  const double one = time_apply(1), many = time_apply(0);
  ReportLine("Adam push of 12.8 MB (fc1), 1 thread", one * 1e3, "ms", limit_s * 1e3, "ms",
             "28 B/float at memcpy's bandwidth", limit_s / one);
  ReportLine(absl::StrCat("  the same, --apply_threads default (", ApplyThreads(), ")"), many * 1e3, "ms",
             one * 1e3, "ms", "1 thread, same run", one / many);
  std::printf("    (memcpy %.1f GB/s read+write; target: <= 4 ms on 2 cores, <= 1 ms on 16; validation included)\n",
              copy_gbs);
}

}  // namespace pl::bench
