// pl-bench-dist: the distributed runtime end to end, on real processes on loopback.
//
//   Throughput  samples/s of `mlp` over one pass of the training set with
//               1 trainer + 1 pserver and with 2 trainers + 2 pservers (pl-launch,
//               async, --threads 1 per trainer), / the single-process figure on
//               1 thread (pl-trainer local, 1 epoch) measured just before each. Two
//               views: the trainers' own training-loop rate, and the whole command's
//               wall clock (start-up, data loading and the final evaluation included).
//               1 + 1 is measured again with --pipeline (traffic overlapped with
//               the next step's computation) and with --shm=false (gRPC only, as
//               between hosts).
//   Recovery    a cluster with --lease_ms 2000 whose pass is one task: SIGKILL the
//               trainer holding it, time until the master leases it again to a standby
//               trainer (/ the lease period, the design's detection bound), then until
//               the standby's first push is applied.
//   Join        a fresh trainer joining a running master + pserver: time from its
//               start to its registration, its first task, its first applied push.
//
//   Job         one process against the job on the same machine in the same run, each
//               job's samples/s as a ratio of the one process's, with the step's
//               split (compute; exchange waited for; exchange hidden behind the steps)
//               and the test accuracy: the mlp on the CPU always (1 trainer + 1
//               pserver: default, --pipeline, --local_steps 4), the cnn on the GPU
//               when nvidia-smi finds one (1 trainer + 2 pservers, the same three,
//               and 4 trainers sharing the GPU).
//
//   pl-bench-dist [--data DIR] [--quick] [--only throughput,job,recovery] [--passes N]
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <tuple>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/bench_util.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/testing/process.h"
#include "paddle_like/core/runtime.h"

ABSL_FLAG(std::string, data, "", "prepared fashion-mnist records (empty: <build>/data/fashion-mnist beside bin/)");
ABSL_FLAG(bool, quick, false, "smaller runs");
ABSL_FLAG(std::vector<std::string>, only, {}, "run only these parts: throughput, job, recovery (empty: all)");
ABSL_FLAG(int, passes, 1, "job: passes over the training set, for one process and for each job");

namespace pl::bench {
namespace {

using std::chrono::milliseconds;

struct Options {
  std::string data = DefaultFashionDir();
  bool quick = false;
  int passes = 1;
  std::set<std::string> only;
  bool Want(const std::string& part) const { return only.empty() || only.count(part) > 0; }
};

std::string Bin(const std::string& name) { return SelfBinDir() + "/" + name; }

// Every "(<x> samples/s)" figure following `marker` in `text`, in order.
std::vector<double> RatesAfter(const std::string& text, const std::string& marker, std::vector<double>* samples) {
  std::vector<double> rates;
  const std::regex re(marker + R"(.*?(\d+) samples \((\d+(?:\.\d+)?) samples/s\))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    if (samples != nullptr) samples->push_back(std::stod((*it)[1]));
    rates.push_back(std::stod((*it)[2]));
  }
  return rates;
}

// A job's samples/s from its trainers' own figures: all samples over the longest
// trainer's loop time.
double AggregateRate(const std::vector<double>& rates, const std::vector<double>& samples) {
  double total = 0, longest = 0;
  for (size_t i = 0; i < rates.size(); ++i) {
    total += samples[i];
    if (rates[i] > 0) longest = std::max(longest, samples[i] / rates[i]);
  }
  return total / std::max(longest, 1e-9);
}

// Runs a pl-launch `command` with its output in `log` (into *text); the trainers'
// aggregate samples/s (AggregateRate), or nothing, having said why, when it failed.
std::optional<double> RunJob(const std::vector<std::string>& command, const std::string& log, std::string* text,
                             ChildRun* measured = nullptr) {
  const ChildRun run = RunAndMeasure(command, log);
  if (measured != nullptr) *measured = run;
  *text = ReadWholeFile(log);
  std::vector<double> samples;
  const std::vector<double> rates = RatesAfter(*text, "job done after", &samples);
  if (run.exit_code != 0 || rates.empty()) {
    std::cout << "  job failed (exit " << run.exit_code << "), see " << log << std::endl;
    return std::nullopt;
  }
  return AggregateRate(rates, samples);
}

struct RunResult {
  bool ok = false;
  double loop_rate = 0;  // training-loop samples/s (trainers' own figure, aggregate)
  double wall_rate = 0;  // samples / the command's wall clock
};

RunResult LocalRun(const Options& o, int64_t train_n) {
  RunResult r;
  const std::string log = "/tmp/pl-bench-dist-local.log";
  ChildRun run = RunAndMeasure({Bin("pl-trainer"), "--model", "mlp", "--data", o.data, "--epochs", "1", "--threads",
                                "1", "--train_limit", std::to_string(train_n), "--test_limit", "1000",
                                "--log_every_s", "1000"},
                               log);
  const std::string text = ReadWholeFile(log);
  std::smatch m;
  if (run.exit_code != 0 || !std::regex_search(text, m, std::regex(R"(trained \d+ steps in [\d.]+s: (\d+) samples/s)"))) {
    std::cout << "  local run failed (exit " << run.exit_code << "), see " << log << std::endl;
    return r;
  }
  r.ok = true;
  r.loop_rate = std::stod(m[1]);
  r.wall_rate = train_n / run.seconds;
  return r;
}

RunResult ClusterRun(const Options& o, int trainers, int pservers, int64_t train_n,
                     const std::vector<std::string>& trainer_flags = {}) {
  RunResult r;
  const std::string log = "/tmp/pl-bench-dist-" + std::to_string(trainers) + "x" + std::to_string(pservers) +
                          (trainer_flags.empty() ? "" : "-" + trainer_flags[0].substr(2)) + ".log";
  std::vector<std::string> command = {Bin("pl-launch"), "--pservers", std::to_string(pservers), "--trainers",
                                      std::to_string(trainers), "--data", o.data + "/train.plrec", "--passes", "1",
                                      "--progress_every_s", "1000", "--", Bin("pl-trainer"), "--model", "mlp",
                                      "--threads", "1", "--test_data", o.data + "/test.plrec", "--test_limit", "1000",
                                      "--log_every_s", "1000"};
  command.insert(command.end(), trainer_flags.begin(), trainer_flags.end());
  std::string text;
  ChildRun run;
  const std::optional<double> rate = RunJob(command, log, &text, &run);
  if (!rate) return r;
  r.ok = true;
  r.loop_rate = *rate;
  r.wall_rate = train_n / run.seconds;
  return r;
}

void RunThroughput(const Options& o) {
  if (!FileExists(o.data + "/train.plrec")) {
    std::cout << "  skipped: no " << o.data << "/train.plrec" << std::endl;
    return;
  }
  // The master cuts the whole file into tasks; local mode gets the same count. This
  // machine's speed drifts by tens of percent over a minute, so each cluster run is
  // compared with a single-process run made just before it.
  const int64_t n = 60000;
  // The defaults, then 1 + 1 with traffic overlapped with computation (--pipeline), and
  // 1 + 1 over gRPC only (as across hosts: --shm=false).
  const std::vector<std::string> overlapped = {"--pipeline"}, grpc_only = {"--shm=false"};
  for (auto [t, p, flags] : {std::make_tuple(1, 1, std::vector<std::string>{}),
                             std::make_tuple(2, 2, std::vector<std::string>{}), std::make_tuple(1, 1, overlapped),
                             std::make_tuple(1, 1, grpc_only)}) {
    const RunResult local = LocalRun(o, n);
    if (!local.ok) return;
    std::printf("  single process, 1 thread: %.0f samples/s (training loop), %.0f samples/s (wall)\n",
                local.loop_rate, local.wall_rate);
    const RunResult c = ClusterRun(o, t, p, n, flags);
    if (!c.ok) continue;
    const std::string name = std::to_string(t) + " trainer(s) + " + std::to_string(p) + " pserver(s)" +
                             (flags.empty() ? "" : ", " + flags[0]);
    ReportLine(name + ", training loop", c.loop_rate, "samples/s", local.loop_rate, "samples/s",
               "1 process, 1 thread", c.loop_rate / local.loop_rate);
    ReportLine(name + ", wall clock", c.wall_rate, "samples/s", local.wall_rate, "samples/s", "1 process, 1 thread",
               c.wall_rate / local.wall_rate);
  }
}

// ---- one process against the job, side by side (issue 36) -----------------------------

// What one run printed: its samples/s (the trainers' training loops, aggregate), the
// per-step split (compute, exchange the trainer waited for, exchange in the background,
// i.e. hidden behind the steps) and the final test accuracy.
struct SideRun {
  bool ok = false;
  double rate = 0;
  double compute_ms = 0, exchange_ms = 0, hidden_ms = 0;
  double other_ms = 0, data_ms = 0, master_ms = 0;  // other: what is neither (of it: reading tasks, the master)
  double accuracy = -1;
};

double LastNumberAfter(const std::string& text, const std::string& pattern) {
  std::smatch m;
  double value = -1;
  std::string::const_iterator from = text.begin();
  const std::regex re(pattern);
  while (std::regex_search(from, text.end(), m, re)) {
    value = std::stod(m[1]);
    from = m[0].second;
  }
  return value;
}

SideRun OneProcess(const Options& o, const std::vector<std::string>& model_flags, int passes, const std::string& tag) {
  SideRun r;
  const std::string log = "/tmp/pl-bench-dist-one-" + tag + ".log";
  std::vector<std::string> command = {Bin("pl-trainer"), "--data", o.data, "--epochs", std::to_string(passes),
                                      "--log_every_s", "1000"};
  command.insert(command.end(), model_flags.begin(), model_flags.end());
  ChildRun run = RunAndMeasure(command, log);
  const std::string text = ReadWholeFile(log);
  r.rate = LastNumberAfter(text, R"(trained \d+ steps in [\d.]+s: (\d+) samples/s)");
  r.accuracy = LastNumberAfter(text, R"(final test accuracy: ([\d.]+))");
  r.ok = run.exit_code == 0 && r.rate > 0;
  if (!r.ok) std::cout << "  one process failed (exit " << run.exit_code << "), see " << log << std::endl;
  return r;
}

SideRun Job(const Options& o, int trainers, int pservers, const std::vector<std::string>& trainer_flags, int passes,
            const std::string& tag) {
  SideRun r;
  const std::string log = "/tmp/pl-bench-dist-job-" + tag + ".log";
  std::vector<std::string> command = {Bin("pl-launch"), "--pservers", std::to_string(pservers), "--trainers",
                                      std::to_string(trainers), "--data", o.data + "/train.plrec", "--passes",
                                      std::to_string(passes), "--progress_every_s", "1000", "--", Bin("pl-trainer"),
                                      "--test_data", o.data + "/test.plrec", "--log_every_s", "1000"};
  command.insert(command.end(), trainer_flags.begin(), trainer_flags.end());
  std::string text;
  const std::optional<double> rate = RunJob(command, log, &text);
  if (!rate) return r;
  r.ok = true;
  r.rate = *rate;
  // Per-step figures of the last trainer to finish (they are alike across trainers).
  r.compute_ms = LastNumberAfter(text, R"(per step: ([\d.]+) ms computing)");
  r.exchange_ms = LastNumberAfter(text, R"(ms computing, ([\d.]+) ms exchanging)");
  r.hidden_ms = std::max(0.0, LastNumberAfter(text, R"(([\d.]+) ms exchanging in the background)"));
  r.other_ms = LastNumberAfter(text, R"(ms exchanging parameters, (-?[\d.]+) ms other)");
  r.data_ms = LastNumberAfter(text, R"(ms other \(([\d.]+) ms reading task data)");
  r.master_ms = LastNumberAfter(text, R"(ms reading task data; ([\d.]+) ms in the master)");
  r.accuracy = LastNumberAfter(text, R"(final test accuracy: ([\d.]+))");
  return r;
}

bool HasGpu() { return std::system("nvidia-smi -L > /dev/null 2>&1") == 0; }

// For `model` on `device`: one process, then each job, every job's ratio against that
// one process of the same run, with the step's split and the test accuracy.
void RunSideBySide(const Options& o) {
  if (!FileExists(o.data + "/train.plrec")) {
    std::cout << "  skipped: no " << o.data << "/train.plrec" << std::endl;
    return;
  }
  struct Case {
    std::string title;
    std::vector<std::string> model_flags;
    std::vector<std::tuple<int, int, std::vector<std::string>>> jobs;  // trainers, pservers, extra trainer flags
  };
  std::vector<Case> cases;
  cases.push_back({"mlp on the CPU (1 thread a trainer)",
                   {"--model", "mlp", "--threads", "1"},
                   {{1, 1, {}}, {1, 1, {"--pipeline"}}, {1, 1, {"--local_steps", "4"}}}});
  if (HasGpu()) {
    cases.push_back({"cnn on the GPU",
                     {"--model", "cnn", "--device", "gpu"},
                     {{1, 2, {}},
                      {1, 2, {"--pipeline"}},
                      {1, 2, {"--local_steps", "4"}},
                      {4, 2, {}},
                      {4, 2, {"--local_steps", "4"}}}});
  } else {
    std::cout << "  (no GPU here, nvidia-smi -L: the cnn on the GPU is skipped)" << std::endl;
  }
  for (const Case& c : cases) {
    std::cout << "  " << c.title << ", " << o.passes << " pass(es) of " << o.data << "/train.plrec" << std::endl;
    const std::string model = c.model_flags[1];
    const SideRun one = OneProcess(o, c.model_flags, o.passes, model);
    if (!one.ok) continue;
    std::printf("    one process: %.0f samples/s, test accuracy %.4f\n", one.rate, one.accuracy);
    for (const auto& [t, p, extra] : c.jobs) {
      std::vector<std::string> flags = c.model_flags;
      flags.insert(flags.end(), extra.begin(), extra.end());
      std::string name = absl::StrCat(t, " trainer(s) + ", p, " pserver(s)");
      for (const std::string& f : extra) absl::StrAppend(&name, " ", f);
      std::string tag = absl::StrCat(model, "-", t, "x", p);
      for (const std::string& f : extra) absl::StrAppend(&tag, f[0] == '-' ? f.substr(2) : f);
      const SideRun job = Job(o, t, p, flags, o.passes, tag);
      if (!job.ok) continue;
      ReportLine("    " + name, job.rate, "samples/s", one.rate, "samples/s", "one process, same run", job.rate / one.rate);
      std::printf("      per step: %.2f ms computing, %.2f ms exchanging, %.2f ms exchanging hidden, %.2f ms other "
                  "(%.2f reading tasks, %.2f in the master's calls); test accuracy %.4f (one process %.4f, %+.4f)\n",
                  job.compute_ms, job.exchange_ms, job.hidden_ms, job.other_ms, job.data_ms, job.master_ms,
                  job.accuracy, one.accuracy, job.accuracy - one.accuracy);
    }
  }
}

// ---- a hand-started cluster, for the timing of recovery and joining ----------------

class Cluster {
 public:
  // Master (one pass, `chunks_per_task`, `lease_ms`) and one pserver.
  Status Start(const Options& o, int chunks_per_task, int lease_ms) {
    if (dir_.path().empty()) return absl::InternalError("cannot create a temp dir");
    PL_ASSIGN_OR_RETURN(master_, testing::Spawn({Bin("pl-master"), "--port", "0", "--port_file", dir_.path() + "/m.port",
                                                 "--state_dir", dir_.path() + "/master", "--data",
                                                 o.data + "/train.plrec", "--passes", "1", "--chunks_per_task",
                                                 std::to_string(chunks_per_task), "--lease_ms",
                                                 std::to_string(lease_ms), "--num_pservers", "1"},
                                                dir_.path() + "/master.log"));
    PL_ASSIGN_OR_RETURN(int mport, testing::WaitForPortFile(dir_.path() + "/m.port", milliseconds(20000), master_.get()));
    master_address_ = "127.0.0.1:" + std::to_string(mport);
    master_stub_ = proto::Master::NewStub(rpc::MakeChannel(master_address_));
    PL_ASSIGN_OR_RETURN(pserver_, testing::Spawn({Bin("pl-pserver"), "--index", "0", "--num_pservers", "1", "--master",
                                                  master_address_, "--port", "0", "--port_file",
                                                  dir_.path() + "/p.port", "--checkpoint_every_s", "0"},
                                                 dir_.path() + "/pserver.log"));
    PL_ASSIGN_OR_RETURN(int pport, testing::WaitForPortFile(dir_.path() + "/p.port", milliseconds(20000), pserver_.get()));
    pserver_stub_ = proto::ParameterServer::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(pport)));
    return absl::OkStatus();
  }
  StatusOr<std::unique_ptr<ChildProcess>> StartTrainer(int rank) {
    return testing::Spawn({Bin("pl-trainer"), "--model", "mlp", "--threads", "1", "--log_every_s", "1000"},
                          dir_.path() + "/trainer-" + std::to_string(rank) + ".log",
                          {{"PL_MASTER_ADDR", master_address_},
                           {"PL_TRAINER_RANK", std::to_string(rank)},
                           {"PL_NUM_PSERVERS", "1"}});
  }
  StatusOr<proto::MembershipResponse> Membership() {
    proto::MembershipResponse r;
    auto ctx = rpc::MakeContext(milliseconds(2000));
    PL_RETURN_IF_ERROR(rpc::FromGrpc(master_stub_->Membership(ctx.get(), proto::MembershipRequest(), &r)));
    return r;
  }
  int64_t PushesApplied() {
    proto::StatsResponse r;
    auto ctx = rpc::MakeContext(milliseconds(2000));
    if (!pserver_stub_->Stats(ctx.get(), proto::StatsRequest(), &r).ok()) return -1;
    return r.pushes_applied();
  }
  const std::string& dir() const { return dir_.path(); }

 private:
  testing::TempDir dir_{"pl-bench-dist"};
  std::unique_ptr<ChildProcess> master_, pserver_;
  std::string master_address_;
  std::unique_ptr<proto::Master::Stub> master_stub_;
  std::unique_ptr<proto::ParameterServer::Stub> pserver_stub_;
};

// Polls `pred` every 5 ms; the time it first held, in seconds since `since`, or -1.
double TimeUntil(const std::function<bool()>& pred, double since, double timeout_s) {
  while (NowSeconds() - since < timeout_s) {
    if (pred()) return NowSeconds() - since;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return -1;
}

// The id and task of the first trainer holding a task; {0, 0} when none.
std::pair<int64_t, int64_t> Holder(Cluster& c) {
  auto m = c.Membership();
  if (m.ok()) {
    for (const proto::TrainerInfo& t : m->trainers()) {
      if (t.task_id() != 0) return {t.id(), t.task_id()};
    }
  }
  return {0, 0};
}

void RunJoin(const Options& o) {
  Cluster c;
  if (Status s = c.Start(o, /*chunks_per_task=*/1, /*lease_ms=*/2000); !s.ok()) {
    std::cout << "  cluster: " << s << std::endl;
    return;
  }
  const double t0 = NowSeconds();
  auto trainer = c.StartTrainer(0);
  if (!trainer.ok()) {
    std::cout << "  trainer: " << trainer.status() << std::endl;
    return;
  }
  const double registered = TimeUntil([&] {
    auto m = c.Membership();
    return m.ok() && m->trainers_size() > 0;
  }, t0, 30);
  const double leased = TimeUntil([&] { return Holder(c).first != 0; }, t0, 30);
  const double pushed = TimeUntil([&] { return c.PushesApplied() > 0; }, t0, 30);
  std::printf("  new trainer (mlp, a task of 1000 records): registered %.3f s, first task %.3f s, "
              "first applied push %.3f s after its start\n",
              registered, leased, pushed);
  ReportLine("join: start -> first applied push", pushed, "s", 2.0, "s", "lease period", pushed / 2.0);
}

void RunRecovery(const Options& o) {
  const int lease_ms = 2000;
  Cluster c;
  // 60 chunks per task: the pass is one task, so the killed trainer's task is the only
  // one the standby can be given.
  if (Status s = c.Start(o, /*chunks_per_task=*/60, lease_ms); !s.ok()) {
    std::cout << "  cluster: " << s << std::endl;
    return;
  }
  auto victim = c.StartTrainer(0);
  if (!victim.ok()) {
    std::cout << "  trainer: " << victim.status() << std::endl;
    return;
  }
  const double t_start = NowSeconds();
  if (TimeUntil([&] { return Holder(c).first != 0 && c.PushesApplied() > 0; }, t_start, 60) < 0) {
    std::cout << "  the first trainer never started training; see " << c.dir() << std::endl;
    return;
  }
  const auto [victim_id, task_id] = Holder(c);
  auto standby = c.StartTrainer(1);
  if (!standby.ok()) {
    std::cout << "  standby: " << standby.status() << std::endl;
    return;
  }
  // The standby is registered (and gets WAIT) before the kill.
  if (TimeUntil([&] {
        auto m = c.Membership();
        return m.ok() && m->trainers_size() >= 2;
      }, NowSeconds(), 30) < 0) {
    std::cout << "  the standby trainer never registered" << std::endl;
    return;
  }
  std::this_thread::sleep_for(milliseconds(300));
  const double t_kill = NowSeconds();
  (void)(*victim)->Signal(SIGKILL);
  const double dropped = TimeUntil([&, id = victim_id] {
    auto m = c.Membership();
    if (!m.ok()) return false;
    for (const proto::TrainerInfo& t : m->trainers()) {
      if (t.id() == id) return false;
    }
    return true;
  }, t_kill, 30);
  const double released = TimeUntil([&, id = victim_id, task = task_id] {
    auto [holder, held] = Holder(c);
    return holder != 0 && holder != id && held == task;
  }, t_kill, 30);
  const int64_t pushes_at_release = c.PushesApplied();
  const double t_release = NowSeconds();
  const double first_push =
      TimeUntil([&] { return c.PushesApplied() > pushes_at_release; }, t_release, 30);
  if (dropped < 0 || released < 0) {
    std::cout << "  the task was not leased again within 30 s; see " << c.dir() << std::endl;
    return;
  }
  std::printf("  SIGKILL of the trainer holding task %lld: dropped from membership after %.3f s, "
              "task leased to the standby after %.3f s, its first push applied %.3f s later\n",
              static_cast<long long>(task_id), dropped, released, first_push);
  ReportLine("recovery: SIGKILL -> task leased again", released, "s", lease_ms / 1000.0, "s", "lease period",
             released / (lease_ms / 1000.0));
  ReportLine("recovery: re-lease -> standby's first push", first_push, "s", lease_ms / 1000.0, "s", "lease period",
             first_push / (lease_ms / 1000.0));
}

int Main(int argc, char** argv) {
  SkipMutexDeadlockChecks();
  const cli::Program program = {
      "pl-bench-dist", "[--data DIR] [--quick] [--only throughput,job,recovery] [--passes N]",
      "The distributed runtime end to end on real processes on loopback: throughput against one\n"
      "process, failure recovery and joining times (see benchmarks/README.md)."};
  cli::ParseOrExit(program, argc, argv);
  Options o;
  if (const std::string data = absl::GetFlag(FLAGS_data); !data.empty()) o.data = data;
  o.quick = absl::GetFlag(FLAGS_quick);
  o.only = OnlyParts(program, absl::GetFlag(FLAGS_only), {"throughput", "job", "recovery"});
  o.passes = absl::GetFlag(FLAGS_passes);
  if (o.passes < 1) cli::ExitWithUsageError(program, absl::StrCat("--passes must be >= 1, got ", o.passes));
  std::printf("pl-bench-dist: load average at start %s; data %s\n", LoadAverage().c_str(), o.data.c_str());
  for (const char* b : {"pl-trainer", "pl-master", "pl-pserver", "pl-launch"}) {
    if (!FileExists(Bin(b))) {
      std::cout << "  skipped: " << Bin(b) << " is not built" << std::endl;
      return 1;
    }
  }
  if (!FileExists(o.data + "/train.plrec")) {
    std::cout << "  skipped: no " << o.data << "/train.plrec (run `make data`)" << std::endl;
    return 1;
  }
  if (o.Want("throughput")) {
    Header("End-to-end mlp samples/s, one pass, async, 1 thread per trainer, vs one process");
    RunThroughput(o);
  }
  if (o.Want("job")) {
    Header("One process and the job side by side (cnn on the GPU when there is one, mlp on the CPU)");
    RunSideBySide(o);
  }
  if (o.Want("recovery")) {
    Header("Recovery and joining (lease 2000 ms)");
    RunRecovery(o);
    RunJoin(o);
  }
  std::printf("\nload average at end %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace pl::bench

int main(int argc, char** argv) { return pl::bench::Main(argc, argv); }
