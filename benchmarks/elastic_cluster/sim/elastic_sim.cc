// pl-sim-elastic: the elastic-cluster experiment on simulated time. Runs a job trace
// (benchmarks/elastic_cluster/make_trace.py) statically and/or under the ElasticPolicy of
// paddle_like/elastic (the code pl-autoscale runs, on a fake clock: Decide every period_s
// of the trace), with throughput and join/leave costs from measured curves
// (benchmarks/elastic_cluster/curves.json), and prints per mode: utilisation, mean and p90
// job completion time, jobs finished, shrinks (preemptions), the mean delay from a slot
// becoming free to a trainer using it, and for elastic the decision periods over-committed.
// The semantics, which the real-process harness shares, are in cluster_sim.h.
//
//   pl-sim-elastic --trace trace.json --curves curves.json [--mode both]
//                  [--cooldown_ms 2000] [--settle_ms 500] [--timeline out.csv] [--jobs_csv jobs.csv]
//
// --timeline writes one row per mode per decision period (columns in plot.py's header);
// --jobs_csv one row per job and mode: name, mode, arrival_s, start_s, finish_s, jct_s
// (-1 for never started / not finished).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/elastic_cluster/sim/cluster_sim.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/io/atomic_file.h"

ABSL_FLAG(std::string, trace, "", "the trace JSON (make_trace.py)");
ABSL_FLAG(std::string, curves, "", "the measured curves JSON (curves.json)");
ABSL_FLAG(std::string, mode, "both", "static, elastic or both");
ABSL_FLAG(int64_t, cooldown_ms, 2000, "ElasticPolicy cooldown_ms (>= 0)");
ABSL_FLAG(int64_t, settle_ms, 500, "ElasticPolicy settle_ms (>= 0)");
ABSL_FLAG(std::string, timeline, "", "where to write the timeline CSV (empty: none)");
ABSL_FLAG(std::string, jobs_csv, "", "where to write per-job outcomes as CSV (empty: none)");
ABSL_FLAG(double, max_drain_s, -1, "how long past horizon_s the queue may drain (< 0: 10 x horizon_s)");

namespace pl::elastic_sim {
namespace {

std::string Seconds(double s) { return s >= 1000 ? absl::StrFormat("%.0f s", s) : absl::StrFormat("%.1f s", s); }

int Main(int argc, char** argv) {
  const cli::Program program = {
      "pl-sim-elastic",
      "--trace trace.json --curves curves.json [--mode static|elastic|both] [--cooldown_ms 2000] "
      "[--settle_ms 500] [--timeline out.csv] [--jobs_csv jobs.csv]",
      "Runs a job trace on a simulated cluster statically and under the ElasticPolicy, and prints\n"
      "utilisation, job completion times, preemptions and slot reuse delay per mode."};
  cli::ParseOrExit(program, argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (absl::GetFlag(FLAGS_trace).empty() || absl::GetFlag(FLAGS_curves).empty()) {
    cli::ExitWithUsageError(program, "--trace and --curves are required");
  }
  if (mode != "static" && mode != "elastic" && mode != "both") {
    cli::ExitWithUsageError(program, absl::StrCat("--mode: '", mode, "' is not static, elastic or both"));
  }
  cli::CheckOrExit(program, {cli::CheckAtLeast("cooldown_ms", absl::GetFlag(FLAGS_cooldown_ms), int64_t{0}),
                             cli::CheckAtLeast("settle_ms", absl::GetFlag(FLAGS_settle_ms), int64_t{0})});

  StatusOr<std::string> trace_text = ReadFile(absl::GetFlag(FLAGS_trace));
  StatusOr<std::string> curves_text = ReadFile(absl::GetFlag(FLAGS_curves));
  if (!trace_text.ok() || !curves_text.ok()) {
    std::fprintf(stderr, "pl-sim-elastic: %s\n",
                 (!trace_text.ok() ? trace_text.status() : curves_text.status()).ToString().c_str());
    return 1;
  }
  StatusOr<Trace> trace = ParseTrace(*trace_text);
  StatusOr<Curves> curves = ParseCurves(*curves_text);
  if (!trace.ok() || !curves.ok()) {
    std::fprintf(stderr, "pl-sim-elastic: %s\n", (!trace.ok() ? trace.status() : curves.status()).ToString().c_str());
    return 1;
  }

  if (Status s = CheckTrace(*trace, *curves); !s.ok()) {
    std::fprintf(stderr, "pl-sim-elastic: %s\n", s.ToString().c_str());
    return 1;
  }

  std::vector<Mode> modes;
  if (mode != "elastic") modes.push_back(Mode::kStatic);
  if (mode != "static") modes.push_back(Mode::kElastic);
  std::printf("pl-sim-elastic: %s: %d slots (static partition %d), horizon %.0f s, %zu jobs, period %g s; "
              "cooldown %lld ms, settle %lld ms\n",
              absl::GetFlag(FLAGS_trace).c_str(), trace->slots, trace->StaticCapacity(), trace->horizon_s,
              trace->jobs.size(), trace->period_s, static_cast<long long>(absl::GetFlag(FLAGS_cooldown_ms)),
              static_cast<long long>(absl::GetFlag(FLAGS_settle_ms)));
  if (!trace->source.empty()) std::printf("  trace source: %s\n", trace->source.c_str());

  std::vector<SimResult> results;
  std::vector<double> wall_s;
  for (Mode m : modes) {
    SimOptions options;
    options.mode = m;
    options.policy.cooldown_ms = absl::GetFlag(FLAGS_cooldown_ms);
    options.policy.settle_ms = absl::GetFlag(FLAGS_settle_ms);
    options.timeline = !absl::GetFlag(FLAGS_timeline).empty();
    options.max_drain_s = absl::GetFlag(FLAGS_max_drain_s);
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<SimResult> r = Simulate(*trace, *curves, options);
    wall_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!r.ok()) {
      std::fprintf(stderr, "pl-sim-elastic: %s: %s\n", ModeName(m), r.status().ToString().c_str());
      return 1;
    }
    results.push_back(std::move(*r));
  }

  std::printf("\n%-8s %7s %11s %11s %13s %8s %11s\n", "mode", "util", "mean JCT", "p90 JCT", "finished", "shrinks",
              "free->used");
  for (const SimResult& r : results) {
    std::printf("%-8s %7.3f %11s %11s %6d/%-6d %8lld %11s\n", ModeName(r.mode), r.utilisation,
                Seconds(r.mean_jct_s).c_str(), Seconds(r.p90_jct_s).c_str(), r.jobs_finished, r.jobs_total,
                static_cast<long long>(r.shrinks), Seconds(r.mean_free_to_used_s).c_str());
  }
  std::printf("\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const SimResult& r = results[i];
    std::printf("%s: %d jobs finished by the horizon, the last at %.0f s; busy %.0f slot-s, overlap %.1f slot-s; "
                "%lld free->used delays measured",
                ModeName(r.mode), r.jobs_finished_by_horizon, r.end_s, r.busy_slot_s, r.overlap_slot_s,
                static_cast<long long>(r.free_to_used_count));
    if (r.mode == Mode::kElastic) {
      std::printf("; %lld of %lld decision periods over-committed; %lld trainers stopped by shrinks",
                  static_cast<long long>(r.over_committed_periods), static_cast<long long>(r.decisions),
                  static_cast<long long>(r.trainers_stopped));
    }
    std::printf("; simulated in %.2f s\n", wall_s[i]);
  }

  if (!absl::GetFlag(FLAGS_timeline).empty()) {
    std::string csv = "t_s,mode,online_slots,training_capacity,trainers_busy,trainers_training,jobs_running,jobs_queued\n";
    for (const SimResult& r : results) {
      for (const TimelineRow& row : r.timeline) {
        absl::StrAppend(&csv, absl::StrFormat("%.3f", row.t_s), ",", ModeName(r.mode), ",", row.online_slots, ",",
                        row.training_capacity, ",", row.trainers_busy, ",", row.trainers_training, ",",
                        row.jobs_running, ",", row.jobs_queued, "\n");
      }
    }
    if (Status s = WriteFileAtomically(absl::GetFlag(FLAGS_timeline), csv); !s.ok()) {
      std::fprintf(stderr, "pl-sim-elastic: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (!absl::GetFlag(FLAGS_jobs_csv).empty()) {
    std::string csv = "name,mode,arrival_s,start_s,finish_s,jct_s\n";
    for (const SimResult& r : results) {
      for (const JobOutcome& j : r.jobs) {
        absl::StrAppend(&csv, j.name, ",", ModeName(r.mode), ",", absl::StrFormat("%.3f", j.arrival_s), ",",
                        absl::StrFormat("%.3f", j.start_s), ",", absl::StrFormat("%.3f", j.finish_s), ",",
                        absl::StrFormat("%.3f", j.finish_s >= 0 ? j.finish_s - j.arrival_s : -1.0), "\n");
      }
    }
    if (Status s = WriteFileAtomically(absl::GetFlag(FLAGS_jobs_csv), csv); !s.ok()) {
      std::fprintf(stderr, "pl-sim-elastic: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace pl::elastic_sim

int main(int argc, char** argv) { return pl::elastic_sim::Main(argc, argv); }
