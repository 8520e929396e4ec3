// pl-bench-ps --only apply: what a pserver's apply of one cnn-sized Adam push costs, on
// one thread and on every core (pl-pserver --apply_threads), against the memory traffic
// Adam needs at the copy bandwidth of the same run.
#ifndef BENCHMARKS_BENCH_PS_APPLY_H_
#define BENCHMARKS_BENCH_PS_APPLY_H_

namespace pl::bench {

// Prints its lines (bench_util.h's ReportLine); `quick`: fewer repetitions.
void RunApplyBenchmark(bool quick);

}  // namespace pl::bench

#endif  // BENCHMARKS_BENCH_PS_APPLY_H_
