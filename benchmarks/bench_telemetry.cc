// pl-bench-telemetry: what seeing a job costs. Each figure is a ratio against a
// reference measured in the same run (benchmarks/README.md):
//   step       the mlp's training step (batch 64, one thread, CPU) with TrainerTelemetry
//              recording every step (TensorBoard event + Prometheus instruments) and a
//              scraper reading /metrics 10 times a second, against the same step without;
//              blocks of steps alternate between the two so drift hits both alike
//   on_step    the training thread's part (TrainerTelemetry::OnStep: a ring push) and the
//              telemetry thread's (instruments + one event per step), against the step
//   events     event-file bytes per 1,000 steps, against one float32 copy of the model
//   job        a real job (pl-launch, 1 pserver + 1 trainer, 2 passes) with --logdir,
//              --metrics_port 0 and --http_port 0, against the same job without
//              (samples/s the trainer reports; runs alternate)
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/bench_util.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/metrics/http_server.h"
#include "paddle_like/metrics/trainer_telemetry.h"
#include "paddle_like/optim/optimizer.h"
#include "trainer/batching.h"
#include "trainer/example_data.h"
#include "trainer/models.h"
#include "trainer/step_backend.h"

ABSL_FLAG(std::string, data, "", "prepared fashion-mnist records (empty: <build>/data/fashion-mnist beside bin/)");
ABSL_FLAG(int, rounds, 12, "alternating blocks of each kind (>= 2)");
ABSL_FLAG(int, block, 100, "steps per block (>= 10)");
ABSL_FLAG(int, job_runs, 2, "runs of the job of each kind (0: skip the job)");
ABSL_FLAG(bool, quick, false, "fewer rounds, no job");

namespace pl::bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// samples/s of the trainer's "job done after ... (N samples/s)" line; 0 when absent.
double JobSamplesPerSecond(const std::vector<std::string>& extra, const std::string& data, const std::string& dir,
                           int run) {
  const std::string log = absl::StrCat(dir, "/job-", run, ".log");
  std::vector<std::string> argv = {SelfBinDir() + "/pl-launch", "--pservers", "1", "--trainers", "1", "--data",
                                   data + "/train.plrec", "--passes", "2", "--workdir",
                                   absl::StrCat(dir, "/work-", run)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", SelfBinDir() + "/pl-trainer", "--model", "mlp", "--threads", "1"});
  const ChildRun r = RunAndMeasure(argv, log);
  std::smatch m;
  const std::string text = ReadWholeFile(log);
  if (r.exit_code != 0 || !std::regex_search(text, m, std::regex(R"(job done after .* \((\d+) samples/s\))"))) {
    std::printf("  job run %d failed (exit %d), see %s\n", run, r.exit_code, log.c_str());
    return 0;
  }
  return std::stod(m[1]);
}

int Main(int argc, char** argv) {
  const cli::Program program = {"pl-bench-telemetry", "[--data DIR] [--quick]",
                                "What TensorBoard events, /metrics and the status page cost a training step."};
  cli::ParseOrExit(program, argc, argv);
  const bool quick = absl::GetFlag(FLAGS_quick);
  const int rounds = quick ? 4 : absl::GetFlag(FLAGS_rounds);
  const int block = absl::GetFlag(FLAGS_block);
  cli::CheckOrExit(program, {cli::CheckAtLeast("rounds", rounds, 2), cli::CheckAtLeast("block", block, 10)});
  std::string data = absl::GetFlag(FLAGS_data);
  if (data.empty()) data = DefaultFashionDir();
  SetMathThreads(1);

  auto train = LoadExampleSet(data + "/train.plrec", TaskKind::kClassification, 64 * block);
  if (!train.ok()) cli::ExitWithUsageError(program, absl::StrCat("--data: ", train.status().message()));
  auto model = MakeExampleModel("mlp", {});
  std::ostringstream quiet;
  auto backend = MakeStepBackend("cpu", **model, quiet);
  auto opt = Optimizer::Create(&(*model)->module(), OptimizerSpec{OptimizerKind::kAdam, 1e-3f});
  if (!model.ok() || !backend.ok() || !opt.ok()) return 1;
  (void)(*backend)->ImportParameters();
  std::vector<int64_t> order(train->size());
  std::iota(order.begin(), order.end(), 0);
  Batcher batcher(&*train);

  const std::string dir = std::filesystem::temp_directory_path() / absl::StrCat("pl-bench-telemetry-", getpid());
  metrics::TelemetryOptions to;
  to.logdir = dir + "/logs";
  to.process_name = "trainer-0";
  to.role = "trainer";
  to.metrics_host = "127.0.0.1";
  to.metrics_port = 0;
  auto telemetry = metrics::ProcessTelemetry::Open(to);
  if (!telemetry.ok()) {
    std::fprintf(stderr, "pl-bench-telemetry: %s\n", std::string(telemetry.status().message()).c_str());
    return 1;
  }
  metrics::TrainerTelemetry recorder(telemetry->get());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> scrapes{0};
  std::thread scraper([&] {
    while (!stop.load()) {
      scrapes += metrics::HttpGet("127.0.0.1", (*telemetry)->metrics_port(), "/metrics").ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  int64_t step = 0;
  auto run_block = [&](bool record) {
    const double start = NowSeconds();
    for (int i = 0; i < block; ++i) {
      const size_t begin = (step * 64) % order.size();
      ExampleSet batch = batcher.Gather(order, begin, std::min(order.size(), begin + 64));
      const double t0 = NowSeconds();
      auto stats = (*backend)->ComputeGradients(**model, batch);
      const double t1 = NowSeconds();
      (void)(*backend)->ApplyOptimizer(**opt);
      ++step;
      if (record && stats.ok()) {
        recorder.OnStep({step, stats->loss, stats->correct, stats->samples, t1 - t0, NowSeconds() - t1,
                         NowSeconds() - t0});
      }
    }
    return (NowSeconds() - start) / block;
  };
  run_block(false);  // warm-up
  run_block(true);
  const int64_t bytes_before = (*telemetry)->events()->bytes();
  std::vector<double> off, on;
  for (int r = 0; r < rounds; ++r) {
    off.push_back(run_block(false));
    on.push_back(run_block(true));
  }
  const int64_t event_bytes = (*telemetry)->events()->bytes() - bytes_before;
  // The training thread's part: a push into the ring, batches of 1,000 drained in
  // between so the ring never fills (a full ring's drop would flatter the figure).
  double push_s = 1e300, drain_s = 1e300;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = NowSeconds();
    for (int i = 0; i < 1000; ++i) recorder.OnStep({++step, 0.5, 32, 64, 0.002, 0.0005, 0.0025});
    const double t1 = NowSeconds();
    recorder.Drain();  // the drain thread's part: instruments + one event per record
    const double t2 = NowSeconds();
    push_s = std::min(push_s, (t1 - t0) / 1000);
    drain_s = std::min(drain_s, (t2 - t1) / 1000);
  }
  stop.store(true);
  scraper.join();

  Header("telemetry: cost of a training step (mlp, batch 64, 1 thread)");
  std::printf("  %d blocks of %d steps each way, alternating; /metrics scraped %lld times (every 100 ms)\n",
              rounds, block, static_cast<long long>(scrapes.load()));
  const double step_off = Median(off), step_on = Median(on);
  ReportLine("step with events + metrics (median of blocks)", step_on * 1e3, "ms", step_off * 1e3, "ms",
             "same step without", step_on / step_off);
  ReportLine("TrainerTelemetry::OnStep (training thread)", push_s * 1e6, "us", step_off * 1e6, "us", "one step",
             push_s / step_off);
  ReportLine("recording a step (telemetry thread)", drain_s * 1e6, "us", step_off * 1e6, "us", "one step",
             drain_s / step_off);
  std::printf("  (OnStep: %.5f%% of a step on the training thread, %.4f%% more on the telemetry thread)\n",
              100 * push_s / step_off, 100 * drain_s / step_off);
  int64_t param_bytes = 4 * (*model)->module().NumParameterElements();
  ReportLine("event file bytes per 1,000 steps", event_bytes * 1000.0 / (rounds * block), "bytes", param_bytes,
             "bytes", "one float32 copy of the mlp", event_bytes * 1000.0 / (rounds * block) / param_bytes);

  const int job_runs = quick ? 0 : absl::GetFlag(FLAGS_job_runs);
  if (job_runs > 0) {
    Header("telemetry: a whole job (pl-launch, 1 pserver + 1 trainer, mlp, 2 passes)");
    std::vector<double> plain, seen;
    for (int r = 0; r < job_runs; ++r) {
      plain.push_back(JobSamplesPerSecond({}, data, dir, 2 * r));
      seen.push_back(JobSamplesPerSecond({"--logdir", dir + "/job-logs-" + std::to_string(r), "--metrics_port", "0",
                                          "--http_port", "0"},
                                         data, dir, 2 * r + 1));
    }
    for (int r = 0; r < job_runs; ++r) std::printf("  run %d: %.0f samples/s without, %.0f with\n", r, plain[r], seen[r]);
    const double a = *std::max_element(plain.begin(), plain.end());
    const double b = *std::max_element(seen.begin(), seen.end());
    ReportLine("job samples/s with --logdir --metrics_port --http_port (best)", b, "samples/s", a, "samples/s",
               "same job without", a > 0 ? b / a : 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace pl::bench

int main(int argc, char** argv) { return pl::bench::Main(argc, argv); }
