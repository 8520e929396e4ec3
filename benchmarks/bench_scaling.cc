// pl-bench-scaling: how the distributed runtime scales across hosts (issue #12).
//
// On the multi-host test bed (paddle_like/testing/test_bed.h: hosts as network namespaces,
// each with its own address and /dev/shm, joined by a bridge) the master, every
// pserver and every trainer run on a host of their own, so all parameter traffic goes
// over gRPC through the hosts' links. Every link is shaped (tc tbf, each direction) to
// each rate of --rates_mbit, and for each rate the `mlp` job (async, Adam, batch 64,
// --threads 1 per trainer, one pass over a subset of Fashion-MNIST) runs with every
// combination of --trainers x --pservers. Per point, from the trainers' closing lines:
// aggregate samples/s, per-step computing / exchanging / other ms, and bytes per sample
// (bytes pulled + pushed ÷ samples); from the pservers' Stats: each one's share of the
// dense elements.
//
// The machine has 2 cores: it cannot show compute scaling (4 trainers share them), so
// each point is also predicted by a bandwidth model of machines with a core each:
//   c  = compute ms per step: the smallest a 1-trainer point measured (a trainer alone)
//   u, d = bytes pushed (up) and pulled (down) per step by one trainer (measured)
//   k  = steps per task (measured: 4 at --chunks_per_task 2); R = the link's bytes/s
//   trainer link   t_t = ((k-1) max(u, d) + u + d) / (k R): the default (overlapped)
//                  exchange of async training sends a step's push and the next step's
//                  pull in one PushAndPull, both directions of the link at once, except
//                  that a task's first pull and its last push go alone
//   pserver link   t_p = T s max(u, d) / R, s the busiest pserver's share of the dense
//                  elements: every trainer's step passes through it, pushes in and
//                  pulls out on the two directions of its link
//   step           S = max(c + t_t, t_p): a trainer's own compute and exchange add up
//                  (one after the other: no --pipeline), while the shared pserver link
//                  serves the other trainers during that compute, so it bounds only as
//                  a rate. With --pipeline a step's exchange runs under the next step's
//                  compute, its push and pull at once: S = max(c, max(u, d) / R, t_p)
//   --rates_mbit 0 leaves the links unshaped (veth at memory speed): no link term
//   predicted samples/s = T batch / S; predicted exchange ms = S - c
// The model leaves out the CPU time of the exchange (gRPC serialisation and copies,
// the pserver's Adam update), and every process here shares the same 2 cores. That
// CPU time is measured instead: each trainer's closing "cpu per step" line (user and
// kernel time of its loop, every thread) and each pserver's /proc times over the job,
// per step of all trainers. Their sum bounds the job on this machine's cores (the
// "CPU ceiling": cores x batch / CPU per step, an upper bound since the bed's own
// kernel work outside the processes is not counted); a 1-trainer point's ceiling over
// one process says whether "1x1 >= 0.7" is within this machine's reach at all.
// Each point is reported as measured ÷ predicted, and all of them go to a CSV
// (benchmarks/plot_scaling.py draws it). Each 1-trainer point is also reported against
// one process (issue 12's reference): pl-trainer training the same subset alone, on a
// host of the bed, run just before each of that point's runs.
//
//   pl-bench-scaling [--data DIR] [--quick] [--trainers 1,2,4] [--pservers 1,2,4]
//                    [--rates_mbit 10000,1000] [--samples N] [--reps N] [--csv FILE] [--bin_dir DIR]
//                    [--wire_dtype float32|bfloat16] [--dense_link_lanes K] [--pipeline] [--tls]
//                    [--chunks_per_task N]
//
// Needs root (the bed's namespaces); without it the benchmark says so and exits 0.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/bench_util.h"
#include "paddle_like/process/cpu_times.h"
#include "paddle_like/testing/cluster.h"
#include "paddle_like/testing/bed_placement.h"
#include "paddle_like/testing/test_bed.h"

ABSL_FLAG(std::string, data, "", "prepared fashion-mnist records (empty: <build>/data/fashion-mnist beside bin/)");
ABSL_FLAG(std::string, bin_dir, "",
          "where pl-master, pl-pserver and pl-trainer are (empty: beside this binary); a copy keeps a "
          "long run safe from a rebuild");
ABSL_FLAG(bool, quick, false, "a few points only: 1 and 4 trainers x 1 pserver at each rate, 4096 samples");
ABSL_FLAG(std::vector<std::string>, trainers, {}, "trainer counts (empty: 1,2,4; --quick: 1,4)");
ABSL_FLAG(std::vector<std::string>, pservers, {}, "pserver counts (empty: 1,2,4; --quick: 1)");
ABSL_FLAG(std::vector<std::string>, rates_mbit, (std::vector<std::string>{"10000", "1000"}),
          "link rates in Mbit/s, every host's link (0: unshaped)");
ABSL_FLAG(int64_t, samples, 0, "training samples per point, one pass (0: 8192; --quick: 4096)");
ABSL_FLAG(std::string, wire_dtype, "float32",
          "the trainers' --wire_dtype: how dense values cross the links (float32 or bfloat16)");
ABSL_FLAG(int32_t, dense_link_lanes, -1,
          "the trainers' --dense_link_lanes: dense blocks over links of this many connections each way "
          "(-1: the trainer's default; 0: over gRPC)");
ABSL_FLAG(bool, tls, false, "every process on mutual TLS (certificates of a CA made for each point)");
ABSL_FLAG(bool, pipeline, false, "the trainers' --pipeline: push and pull while the next step computes");
ABSL_FLAG(int, reps, 0, "runs per point, the fastest kept (0: 3; --quick: 1)");
ABSL_FLAG(int32_t, chunks_per_task, 2,
          "record chunks of 128 samples per task (2: a task is 4 steps, so task hand-offs weigh; a real "
          "job's tasks are longer)");
ABSL_FLAG(std::string, csv, "", "write every point here (empty: <build>/bench-scaling.csv beside bin/)");

namespace pl::bench {
namespace {

using dist_testing::Cluster;
using dist_testing::ClusterOptions;
using dist_testing::BedPlacement;
using netbed::LinkShape;
using netbed::TestBed;
using std::chrono::seconds;

constexpr int kBatch = 64;
constexpr int kPerChunk = 128;  // --chunks_per_task 2: 4 full batches a task

// One point of the grid: what was measured, then what the model predicts.
// "10000 Mbit", or "unshaped" for 0.
std::string RateName(int rate_mbit) { return rate_mbit > 0 ? absl::StrCat(rate_mbit, " Mbit") : "unshaped"; }

struct Point {
  int rate_mbit = 0, trainers = 0, pservers = 0;
  int run = 0;  // of the point's repetitions
  bool ok = false;
  int64_t samples = 0, steps = 0, tasks = 0;
  double samples_per_s = 0;                              // all samples ÷ the longest trainer's loop
  double compute_ms = 0, exchange_ms = 0, other_ms = 0;  // per step, averaged over steps
  double pulled_per_step = 0, pushed_per_step = 0;       // bytes, one trainer
  double bytes_per_sample = 0;
  double busiest_share = 0;  // of the dense elements
  // CPU per step (of all trainers' steps), user and kernel: the trainers' own figures
  // for their loops, the pservers' from /proc between the job's start and end.
  double trainer_user_ms = 0, trainer_sys_ms = 0, pserver_user_ms = 0, pserver_sys_ms = 0;
  double cpu_ms() const { return trainer_user_ms + trainer_sys_ms + pserver_user_ms + pserver_sys_ms; }
  // The model.
  double trainer_link_ms = 0, pserver_link_ms = 0, pred_exchange_ms = 0, pred_samples_per_s = 0;
};

// What one trainer logged at its end; ok is false when a closing line is missing.
struct TrainerEnd {
  bool ok = false;
  int64_t tasks = 0, steps = 0, samples = 0, pulled = 0, pushed = 0;
  double rate = 0, compute_ms = 0, exchange_ms = 0, other_ms = 0;
  double cpu_user_ms = 0, cpu_sys_ms = 0;  // per step, every thread of the trainer
};

// "cpu per step: U ms user, K ms kernel" (process::CpuPerStepLine) in `log`, if there.
bool ParseCpuPerStep(const std::string& log, double* user_ms, double* sys_ms) {
  static const std::regex cpu(R"(cpu per step: ([\d.]+) ms user, ([\d.]+) ms kernel)");
  std::smatch m;
  if (!std::regex_search(log, m, cpu)) return false;
  *user_ms = std::stod(m[1]);
  *sys_ms = std::stod(m[2]);
  return true;
}

TrainerEnd ParseTrainerLog(const std::string& log) {
  static const std::regex done(R"(job done after (\d+) tasks, (\d+) steps, (\d+) samples \(([\d.]+) samples/s\))");
  static const std::regex step(
      R"(per step: ([\d.]+) ms computing, ([\d.]+) ms exchanging parameters, (-?[\d.]+) ms other)");
  static const std::regex traffic(R"(traffic: .*?(\d+) bytes pulled, (\d+) bytes pushed)");
  TrainerEnd t;
  std::smatch m;
  if (!std::regex_search(log, m, done)) return t;
  t.tasks = std::stoll(m[1]);
  t.steps = std::stoll(m[2]);
  t.samples = std::stoll(m[3]);
  t.rate = std::stod(m[4]);
  if (!std::regex_search(log, m, traffic)) return t;
  t.pulled = std::stoll(m[1]);
  t.pushed = std::stoll(m[2]);
  if (t.steps > 0) {  // a trainer that got no task logs no per-step line
    if (!std::regex_search(log, m, step)) return t;
    t.compute_ms = std::stod(m[1]);
    t.exchange_ms = std::stod(m[2]);
    t.other_ms = std::stod(m[3]);
    if (!ParseCpuPerStep(log, &t.cpu_user_ms, &t.cpu_sys_ms)) return t;
  }
  t.ok = true;
  return t;
}

// Runs the job once at the bed's current shape and fills the measured part of `p`.
// `parent`: a directory of this run, where the point's state and logs go.
void RunPoint(BedPlacement* placement, const std::string& train, const std::string& parent, Point* p) {
  const std::string name = absl::StrCat(p->trainers, "x", p->pservers, " @", RateName(p->rate_mbit), " run ", p->run + 1);
  const std::string dir = absl::StrCat(parent, "/", p->trainers, "x", p->pservers, "-", p->rate_mbit);
  std::error_code ec;
  if (!std::filesystem::create_directory(dir, ec)) {
    std::printf("  %-28s failed: cannot make %s: %s\n", name.c_str(), dir.c_str(), ec.message().c_str());
    return;
  }
  ClusterOptions o;
  o.data = train;
  o.num_pservers = p->pservers;
  o.passes = 1;
  o.chunks_per_task = absl::GetFlag(FLAGS_chunks_per_task);
  o.lease_ms = 30000;  // no failures here; a slow heartbeat on the busy 2 cores must not cost a task
  o.trainer_args = {"--model",     "mlp",  "--threads", "1",     "--batch_size",  std::to_string(kBatch),
                    "--optimizer", "adam", "--lr",      "0.001", "--log_every_s", "1000",
                    "--wire_dtype", absl::GetFlag(FLAGS_wire_dtype),
                    "--dense_link_lanes", std::to_string(absl::GetFlag(FLAGS_dense_link_lanes))};
  if (absl::GetFlag(FLAGS_pipeline)) o.trainer_args.push_back("--pipeline");
  o.placement = placement;
  o.tls = absl::GetFlag(FLAGS_tls);
  Cluster cluster(o, dir);
  auto fail = [&](const std::string& why) {
    // The first line: the Cluster's errors append every log, which go to the file.
    std::printf("  %-28s failed: %s\n", name.c_str(), why.substr(0, why.find('\n')).c_str());
    const std::string keep = absl::StrCat("/tmp/pl-bench-scaling-", p->trainers, "x", p->pservers, "-", p->rate_mbit,
                                          "-", p->run + 1, ".log");
    std::ofstream(keep) << cluster.AllLogs();
    std::printf("  %-28s logs: %s\n", "", keep.c_str());
  };
  if (Status s = cluster.Start(p->trainers); !s.ok()) return fail(s.ToString());
  std::vector<process::CpuTimes> pserver_cpu(p->pservers);
  for (int i = 0; i < p->pservers; ++i) {
    auto cpu = process::ProcessCpuTimes(cluster.pserver(i).pid());
    if (!cpu.ok()) return fail(cpu.status().ToString());
    pserver_cpu[i] = *cpu;
  }
  if (auto done = cluster.WaitForJobDone(seconds(240)); !done.ok()) return fail(done.status().ToString());
  if (Status s = cluster.WaitForTrainers(seconds(60)); !s.ok()) return fail(s.ToString());
  process::CpuTimes pservers_used;
  for (int i = 0; i < p->pservers; ++i) {
    auto cpu = process::ProcessCpuTimes(cluster.pserver(i).pid());
    if (!cpu.ok()) return fail(cpu.status().ToString());
    pservers_used.user_s += cpu->user_s - pserver_cpu[i].user_s;
    pservers_used.sys_s += cpu->sys_s - pserver_cpu[i].sys_s;
  }
  int64_t total_dense = 0, max_dense = 0;
  for (int i = 0; i < p->pservers; ++i) {
    auto stats = cluster.PserverStats(i);
    if (!stats.ok()) return fail(stats.status().ToString());
    total_dense += stats->dense_elements();
    max_dense = std::max(max_dense, stats->dense_elements());
  }
  double longest_s = 0, compute = 0, exchange = 0, other = 0, pulled = 0, pushed = 0, user = 0, sys = 0;
  for (int r = 0; r < p->trainers; ++r) {
    const TrainerEnd t = ParseTrainerLog(cluster.TrainerLog(r));
    if (!t.ok) return fail(absl::StrCat("trainer ", r, " logged no closing lines"));
    p->samples += t.samples;
    p->steps += t.steps;
    p->tasks += t.tasks;
    if (t.rate > 0) longest_s = std::max(longest_s, t.samples / t.rate);
    compute += t.compute_ms * t.steps;
    exchange += t.exchange_ms * t.steps;
    other += t.other_ms * t.steps;
    user += t.cpu_user_ms * t.steps;
    sys += t.cpu_sys_ms * t.steps;
    pulled += t.pulled;
    pushed += t.pushed;
  }
  if (p->steps == 0 || longest_s <= 0 || total_dense == 0) return fail("no steps trained");
  p->samples_per_s = p->samples / longest_s;
  p->compute_ms = compute / p->steps;
  p->exchange_ms = exchange / p->steps;
  p->other_ms = other / p->steps;
  p->pulled_per_step = pulled / p->steps;
  p->pushed_per_step = pushed / p->steps;
  p->bytes_per_sample = (pulled + pushed) / p->samples;
  p->busiest_share = static_cast<double>(max_dense) / total_dense;
  p->trainer_user_ms = user / p->steps;
  p->trainer_sys_ms = sys / p->steps;
  p->pserver_user_ms = pservers_used.user_s * 1e3 / p->steps;
  p->pserver_sys_ms = pservers_used.sys_s * 1e3 / p->steps;
  p->ok = true;
  std::printf(
      "  %-28s %8.0f samples/s   per step %6.2f ms computing %7.2f ms exchanging %6.2f ms other   "
      "%7.0f bytes/sample   busiest pserver %.0f%%\n",
      name.c_str(), p->samples_per_s, p->compute_ms, p->exchange_ms, p->other_ms, p->bytes_per_sample,
      100 * p->busiest_share);
  std::printf("  %-28s cpu per step %6.2f ms: trainers %.2f user + %.2f kernel, pservers %.2f user + %.2f kernel\n", "",
              p->cpu_ms(), p->trainer_user_ms, p->trainer_sys_ms, p->pserver_user_ms, p->pserver_sys_ms);
  std::fflush(stdout);
}

// The reference of issue 12's "1 trainer + 1 pserver >= 0.7 of one process": the same
// training (mlp, Adam, batch 64, one thread, one pass over the subset) in one process
// on `host`, with no pserver. Returns its training loop's samples/s and CPU per step,
// or 0 samples/s (said why). `dir` holds the subset's train.plrec; the final
// evaluation is cut to 1000 samples.
struct OneProcess {
  double samples_per_s = 0;
  double cpu_ms = 0;  // per step, user + kernel
};
OneProcess RunOneProcess(TestBed* bed, int host, const std::string& bin_dir, const std::string& data_dir,
                     const std::string& dir, int run) {
  const std::string log = absl::StrCat(dir, "/one-process-", run, ".log");
  std::vector<std::string> argv = {bin_dir + "/pl-trainer", "--model", "mlp", "--threads", "1",
                                   "--batch_size", std::to_string(kBatch), "--optimizer", "adam", "--lr", "0.001",
                                   "--epochs", "1", "--data", dir, "--test_data", data_dir + "/test.plrec",
                                   "--test_limit", "1000", "--log_every_s", "1000"};
  auto child = bed->Start(host, argv, log);
  if (!child.ok()) {
    std::printf("  %-28s failed: %s\n", "one process", child.status().ToString().c_str());
    return {};
  }
  if (!(*child)->WaitFor(std::chrono::minutes(4)) || !(*child)->exit_info().success()) {
    (*child)->Stop(std::chrono::seconds(1));
    std::printf("  %-28s failed: see %s\n", "one process", log.c_str());
    return {};
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const std::regex trained(R"(trained \d+ steps in [\d.]+s: ([\d.]+) samples/s)");
  std::smatch m;
  if (!std::regex_search(text, m, trained)) {
    std::printf("  %-28s failed: no closing line in %s\n", "one process", log.c_str());
    return {};
  }
  OneProcess out;
  out.samples_per_s = std::stod(m[1]);
  double user_ms = 0, sys_ms = 0;
  if (ParseCpuPerStep(text, &user_ms, &sys_ms)) out.cpu_ms = user_ms + sys_ms;
  std::printf("  %-28s %8.0f samples/s   (pl-trainer --epochs 1 --threads 1, no pserver; cpu per step %.2f ms)\n",
              absl::StrCat("one process run ", run + 1).c_str(), out.samples_per_s, out.cpu_ms);
  std::fflush(stdout);
  return out;
}

// Fills the model's part of every measured point; `compute_ms` is c of the header.
void Predict(double compute_ms, bool pipeline, std::vector<Point>* points) {
  for (Point& p : *points) {
    if (!p.ok) continue;
    // Unshaped (0): the link takes no time the model can name.
    const double ms_per_byte = p.rate_mbit > 0 ? 1 / (p.rate_mbit * 1e6 / 8 / 1e3) : 0;
    const double k = static_cast<double>(p.steps) / std::max<int64_t>(p.tasks, 1);
    const double u = p.pushed_per_step, d = p.pulled_per_step;
    p.trainer_link_ms = (pipeline ? std::max(u, d) : ((k - 1) * std::max(u, d) + u + d) / k) * ms_per_byte;
    p.pserver_link_ms = p.trainers * p.busiest_share * std::max(u, d) * ms_per_byte;
    const double step_ms = pipeline ? std::max({compute_ms, p.trainer_link_ms, p.pserver_link_ms})
                                    : std::max(compute_ms + p.trainer_link_ms, p.pserver_link_ms);
    p.pred_exchange_ms = step_ms - compute_ms;
    p.pred_samples_per_s = p.trainers * kBatch / (step_ms / 1e3);
  }
}

bool WriteCsv(const std::string& path, double compute_ms, const std::vector<Point>& points) {
  std::ofstream out(path);
  out << "rate_mbit,trainers,pservers,samples,steps,tasks,samples_per_s,compute_ms,exchange_ms,other_ms,"
         "bytes_pulled_per_step,bytes_pushed_per_step,bytes_per_sample,busiest_pserver_share,"
         "model_compute_ms,model_trainer_link_ms,model_pserver_link_ms,model_exchange_ms,model_samples_per_s,"
         "trainer_user_ms,trainer_kernel_ms,pserver_user_ms,pserver_kernel_ms\n";
  for (const Point& p : points) {
    if (!p.ok) continue;
    out << absl::StrCat(p.rate_mbit, ",", p.trainers, ",", p.pservers, ",", p.samples, ",", p.steps, ",", p.tasks, ",",
                        absl::StrFormat("%.1f,%.3f,%.3f,%.3f,%.0f,%.0f,%.1f,%.4f,%.3f,%.3f,%.3f,%.3f,%.1f",
                                        p.samples_per_s, p.compute_ms, p.exchange_ms, p.other_ms, p.pulled_per_step,
                                        p.pushed_per_step, p.bytes_per_sample, p.busiest_share, compute_ms,
                                        p.trainer_link_ms, p.pserver_link_ms, p.pred_exchange_ms, p.pred_samples_per_s),
                        absl::StrFormat(",%.3f,%.3f,%.3f,%.3f", p.trainer_user_ms, p.trainer_sys_ms,
                                        p.pserver_user_ms, p.pserver_sys_ms))
        << "\n";
  }
  return static_cast<bool>(out);
}

std::vector<int> IntList(const cli::Program& program, const char* flag, const std::vector<std::string>& values,
                         int least = 1) {
  std::vector<int> out;
  for (const std::string& v : values) {
    int n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < least) {
      cli::ExitWithUsageError(program, absl::StrCat("--", flag, ": '", v, "' is not ",
                                                    least == 0 ? "a whole number" : "a positive integer"));
    }
    out.push_back(n);
  }
  return out;
}

int Main(int argc, char** argv) {
  const cli::Program program = {
      "pl-bench-scaling",
      "[--data DIR] [--quick] [--trainers 1,2,4] [--pservers 1,2,4] [--rates_mbit 10000,1000] [--samples N]\n"
      "                        [--reps N] [--csv FILE] [--bin_dir DIR]",
      "Samples/s and exchange time of trainers x pservers, each process on a host of the multi-host\n"
      "test bed with shaped links, against a bandwidth model (see benchmarks/README.md). Needs root."};
  cli::ParseOrExit(program, argc, argv);
  const bool quick = absl::GetFlag(FLAGS_quick);
  std::vector<std::string> t_flag = absl::GetFlag(FLAGS_trainers), p_flag = absl::GetFlag(FLAGS_pservers);
  if (t_flag.empty()) t_flag = quick ? std::vector<std::string>{"1", "4"} : std::vector<std::string>{"1", "2", "4"};
  if (p_flag.empty()) p_flag = quick ? std::vector<std::string>{"1"} : std::vector<std::string>{"1", "2", "4"};
  const std::vector<int> trainers = IntList(program, "trainers", t_flag);
  const std::vector<int> pservers = IntList(program, "pservers", p_flag);
  const std::vector<int> rates = IntList(program, "rates_mbit", absl::GetFlag(FLAGS_rates_mbit), /*least=*/0);
  int64_t samples = absl::GetFlag(FLAGS_samples);
  if (samples == 0) samples = quick ? 4096 : 8192;
  if (samples < kPerChunk) cli::ExitWithUsageError(program, absl::StrCat("--samples: at least ", kPerChunk));
  int reps = absl::GetFlag(FLAGS_reps);
  if (reps == 0) reps = quick ? 1 : 3;
  if (reps < 0) cli::ExitWithUsageError(program, "--reps: must be 1 or more (0: the default)");
  if (absl::GetFlag(FLAGS_chunks_per_task) < 1) cli::ExitWithUsageError(program, "--chunks_per_task: at least 1");
  std::string data = absl::GetFlag(FLAGS_data);
  if (data.empty()) data = DefaultFashionDir();
  std::string csv = absl::GetFlag(FLAGS_csv);
  if (csv.empty()) csv = SelfBinDir() + "/../bench-scaling.csv";

  std::string bin_dir = absl::GetFlag(FLAGS_bin_dir);
  if (bin_dir.empty()) bin_dir = SelfBinDir();
  bin_dir = std::filesystem::absolute(bin_dir).string();  // the hosts' processes start elsewhere

  std::printf("pl-bench-scaling: load average at start %s; data %s\n", LoadAverage().c_str(), data.c_str());
  for (const char* b : {"pl-trainer", "pl-master", "pl-pserver"}) {
    if (!FileExists(bin_dir + "/" + b)) {
      std::cout << "  skipped: " << bin_dir << "/" << b << " is not built" << std::endl;
      return 1;
    }
  }
  if (!FileExists(data + "/train.plrec")) {
    std::cout << "  skipped: no " << data << "/train.plrec (run `make data`)" << std::endl;
    return 1;
  }
  if (Status s = TestBed::CheckSupported(); !s.ok()) {
    std::cout << "  skipped: the multi-host test bed cannot run here: " << s << std::endl;
    return 0;
  }
  // The Cluster helper finds pl-master, pl-pserver and pl-trainer through PL_BIN_DIR.
  setenv("PL_BIN_DIR", bin_dir.c_str(), /*overwrite=*/1);

  process::TempDir dir("pl-bench-scaling");
  if (dir.path().empty()) {
    std::cout << "  failed to make a temporary directory" << std::endl;
    return 1;
  }
  const std::string train = dir.path() + "/train.plrec";
  if (auto chunks = dist_testing::WriteSubset(data + "/train.plrec", train, samples, kPerChunk); !chunks.ok()) {
    std::cout << "  failed to write the subset: " << chunks.status() << std::endl;
    return 1;
  }
  for (int rep = 0; rep < reps; ++rep) std::filesystem::create_directory(absl::StrCat(dir.path(), "/", rep));
  const int max_t = *std::max_element(trainers.begin(), trainers.end());
  const int max_p = *std::max_element(pservers.begin(), pservers.end());
  auto bed = TestBed::Create(1 + max_p + max_t);
  if (!bed.ok()) {
    std::cout << "  failed to build the test bed: " << bed.status() << std::endl;
    return 1;
  }
  // Host 0 runs the master, hosts 1..max_p the pservers, the rest the trainers.
  BedPlacement placement(bed->get());
  for (int i = 0; i < max_p; ++i) placement.pserver_hosts.push_back(1 + i);
  for (int r = 0; r < max_t; ++r) placement.trainer_hosts.push_back(1 + max_p + r);

  std::vector<Point> points;
  OneProcess one_process;  // the fastest reference run
  int one_process_runs = 0;
  for (int rate : rates) {
    Header(absl::StrCat("mlp, ", samples, " samples, one pass, async, batch ", kBatch,
                        ", every process on its own host, every link ",
                        RateName(rate)));
    for (int h = 0; h < (*bed)->num_hosts(); ++h) {
      if (Status s = (*bed)->Shape(h, LinkShape{0, 0, rate}); !s.ok()) {
        std::cout << "  failed to shape host " << h << ": " << s << std::endl;
        return 1;
      }
    }
    for (int p : pservers) {
      for (int t : trainers) {
        // The fastest of `reps` runs: on a shared machine the noise only ever slows.
        Point best;
        for (int rep = 0; rep < reps; ++rep) {
          // Each 1-trainer run follows a reference run: this machine drifts within a minute.
          if (t == 1) {
            const OneProcess run = RunOneProcess(bed->get(), placement.trainer_hosts[0], bin_dir, data, dir.path(),
                                                 one_process_runs++);
            if (run.samples_per_s > one_process.samples_per_s) one_process = run;
          }
          Point point;
          point.rate_mbit = rate;
          point.trainers = t;
          point.pservers = p;
          point.run = rep;
          RunPoint(&placement, train, absl::StrCat(dir.path(), "/", rep), &point);
          if (point.ok && (!best.ok || point.samples_per_s > best.samples_per_s)) best = point;
        }
        points.push_back(best);
      }
    }
  }

  // c: the least contended compute time, a trainer alone on the CPU.
  double compute_ms = 0;
  for (bool alone : {true, false}) {
    for (const Point& p : points) {
      if (p.ok && (!alone || p.trainers == 1) && (compute_ms == 0 || p.compute_ms < compute_ms)) {
        compute_ms = p.compute_ms;
      }
    }
    if (compute_ms > 0) break;
  }
  if (compute_ms == 0) {
    std::cout << "  no point finished" << std::endl;
    return 1;
  }
  Predict(compute_ms, absl::GetFlag(FLAGS_pipeline), &points);
  const int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  Header(
      absl::StrFormat("measured vs the bandwidth model (compute %.2f ms per step; see the header of "
                      "benchmarks/bench_scaling.cc)",
                      compute_ms));
  for (const Point& p : points) {
    if (!p.ok) continue;
    const std::string name = absl::StrCat(p.trainers, "x", p.pservers, " @", RateName(p.rate_mbit));
    if (p.trainers == 1 && one_process.samples_per_s > 0) {
      ReportLine(name + " samples/s", p.samples_per_s, "samples/s", one_process.samples_per_s, "samples/s",
                 "one process (target: 1x1 >= 0.7)", p.samples_per_s / one_process.samples_per_s);
    }
    // The most this machine's cores allow at the CPU the job spent per step (every
    // process of it; the bed's own kernel work outside them not counted, so a ceiling).
    const double ceiling = cores * kBatch * 1e3 / std::max(p.cpu_ms(), 1e-9);
    ReportLine(name + " samples/s", p.samples_per_s, "samples/s", ceiling, "samples/s",
               absl::StrFormat("CPU ceiling: %d cores / %.2f ms a step", cores, p.cpu_ms()), p.samples_per_s / ceiling);
    if (p.trainers == 1 && one_process.samples_per_s > 0) {
      ReportLine(name + " CPU ceiling", ceiling, "samples/s", one_process.samples_per_s, "samples/s",
                 absl::StrFormat("one process (%.2f ms CPU a step)", one_process.cpu_ms),
                 ceiling / one_process.samples_per_s);
    }
    ReportLine(name + " samples/s", p.samples_per_s, "samples/s", p.pred_samples_per_s, "samples/s", "model",
               p.samples_per_s / p.pred_samples_per_s);
    // The trainer logs a task's first pull (and the task hand-offs) as "other".
    if (p.pred_exchange_ms <= 0) continue;  // unshaped: the model names no exchange time
    ReportLine(name + " exchange+other per step", p.exchange_ms + p.other_ms, "ms", p.pred_exchange_ms, "ms",
               absl::StrFormat("model: link %.2f, pserver link %.2f", p.trainer_link_ms, p.pserver_link_ms),
               (p.exchange_ms + p.other_ms) / std::max(p.pred_exchange_ms, 1e-9));
  }
  if (WriteCsv(csv, compute_ms, points)) {
    std::printf("\nCSV written to %s (plot: /usr/bin/python3 benchmarks/plot_scaling.py %s OUT.png)\n", csv.c_str(),
                csv.c_str());
  } else {
    std::printf("\nfailed to write %s\n", csv.c_str());
  }
  std::printf("load average at end %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace pl::bench

int main(int argc, char** argv) { return pl::bench::Main(argc, argv); }
