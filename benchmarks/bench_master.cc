// pl-bench-master: the master under load (issue 39). A real pl-master (--insecure, on
// 127.0.0.1) serves a job of --tasks tasks (one record a chunk, one chunk a task, passes
// enough never to end); --trainers simulated trainers register, then for --seconds
// each loops as pl-trainer does, a GetTask that reports the task leased before
// (GetTaskRequest.finished; --noreport_with_lease: GetTask then TaskFinished, two calls
// a task), with a Heartbeat every third round, spread over --threads client threads
// sharing --channels gRPC channels. Reported per master mode (the event log, and
// --noevent_log's whole-state writes as the reference, in the same run): events/s
// (changes of the state: a lease, a finish counted, a heartbeat) and calls/s, p50/p99
// call latency, the bytes the
// master wrote per event (/proc/PID/io: its log lines too), its resident memory per task, and its
// restore time: SIGKILL, restart on the same state, until it answers JobStatus.
//
// Mode etcd: the job's state in a real etcd member (paddle_like/testing/etcd_server.h)
// with a standby master beside the leader; bytes per event are the master's and etcd's
// writes together, and instead of a restart the leader is SIGKILLed and the time until
// the standby leases a task (through the clients' list of both addresses) is the
// failover time (lease 1 s).
//
//   pl-bench-master [--trainers 10,100,1000] [--tasks 100000] [--seconds 5]
//                   [--threads 32] [--channels 4] [--modes log,whole,etcd]
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "master/master_service.h"
#include "paddle_like/data/record_file.h"
#include "paddle_like/store/local_dir_store.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"
#include "paddle_like/testing/etcd_server.h"
#include "paddle_like/testing/process.h"
#include "proto/master.grpc.pb.h"

ABSL_FLAG(std::string, trainers, "10,100,1000", "simulated trainer counts, one run each");
ABSL_FLAG(int64_t, tasks, 100000, "tasks of the job (one record each)");
ABSL_FLAG(double, seconds, 5, "load time per run");
ABSL_FLAG(int, threads, 32, "client threads");
ABSL_FLAG(int, channels, 4, "gRPC channels the threads share");
ABSL_FLAG(bool, report_with_lease, true,
          "each task reported finished in the call that leases the next (GetTaskRequest.finished), as pl-trainer "
          "does; false: GetTask and TaskFinished apart, two calls a task");
ABSL_FLAG(std::string, modes, "log,whole",
          "log: the event log (default pl-master); whole: --noevent_log; etcd: the state in etcd, a standby beside "
          "the leader, failover instead of restore; inproc: the master's own ceiling, the same calls made on a Master "
          "object in this process (its event log on disk, no gRPC)");

namespace pl {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Bytes the process has written through write() and its kin (/proc/PID/io wchar).
int64_t BytesWritten(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/io"));
  std::string line;
  while (std::getline(in, line)) {
    int64_t n = 0;
    if (line.rfind("wchar:", 0) == 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6)), &n)) return n;
  }
  return 0;
}

int64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    int64_t kb = 0;
    if (line.rfind("VmRSS:", 0) == 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 9)), &kb)) {
      return kb * 1024;
    }
  }
  return 0;
}

// Lets the load run for --seconds, stops and joins `pool`, and gathers the latencies.
struct Load {
  double elapsed_s = 0;
  std::vector<double> sorted_ms;
  double Percentile(double q) const {
    return sorted_ms.empty() ? 0.0 : sorted_ms[std::min(sorted_ms.size() - 1, static_cast<size_t>(q * sorted_ms.size()))];
  }
};
Load RunFor(std::vector<std::thread>& pool, std::atomic<bool>& stop, const std::vector<std::vector<double>>& latencies,
            Clock::time_point start) {
  std::this_thread::sleep_for(std::chrono::duration<double>(absl::GetFlag(FLAGS_seconds)));
  stop = true;
  for (std::thread& th : pool) th.join();
  Load load;
  load.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& l : latencies) load.sorted_ms.insert(load.sorted_ms.end(), l.begin(), l.end());
  std::sort(load.sorted_ms.begin(), load.sorted_ms.end());
  return load;
}

struct MasterProcess {
  std::unique_ptr<ChildProcess> process;
  std::string address;
};

enum class Mode { kLog, kWhole, kEtcd };
const char* ModeName(Mode m) { return m == Mode::kLog ? "log" : m == Mode::kWhole ? "whole" : "etcd"; }

// `etcd`: its endpoint (mode etcd); `port` 0 picks one, `name` tells the masters' files apart.
StatusOr<MasterProcess> StartMaster(const std::string& bin, const std::string& dir, const std::string& data, Mode mode,
                                    const std::string& etcd = "", int port = 0, const std::string& name = "m",
                                    bool wait = true) {
  const std::string port_file = dir + "/port-" + name;
  std::filesystem::remove(port_file);
  std::vector<std::string> args = {bin, "--insecure", "--port", std::to_string(port), "--port_file", port_file,
                                   "--state_dir", dir + "/state", "--data", data, "--passes", "1000",
                                   "--num_pservers", "0", "--lease_ms", "600000"};
  if (mode == Mode::kWhole) args.push_back("--noevent_log");
  if (mode == Mode::kEtcd) {
    args.insert(args.end(), {"--etcd_endpoints", etcd, "--etcd_prefix", absl::StrCat("/bench/", getpid()),
                             "--leader_ttl_s", "1"});
  }
  PL_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> p, testing::Spawn(args, dir + "/master-" + name + ".log"));
  if (!wait) return MasterProcess{std::move(p), absl::StrCat("127.0.0.1:", port)};
  PL_ASSIGN_OR_RETURN(int bound, testing::WaitForPortFile(port_file, std::chrono::seconds(120), p.get()));
  return MasterProcess{std::move(p), absl::StrCat("127.0.0.1:", bound)};
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
  auto ctx = rpc::MakeContext(std::chrono::seconds(30), /*wait_for_ready=*/true);
  if (!token.empty()) ctx->AddMetadata(rpc::kTrainerTokenKey, token);
  return ctx;
}

// Waits until the master answers JobStatus.
bool WaitServing(proto::Master::Stub& stub, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    proto::JobStatusResponse status;
    if (stub.JobStatus(Ctx().get(), {}, &status).ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

void RunOne(const std::string& bin, const std::string& data, int64_t tasks, int trainers, Mode mode) {
  const std::string dir = std::filesystem::temp_directory_path() / absl::StrCat("pl-bench-master-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::unique_ptr<testing::EtcdServer> etcd;
  StatusOr<MasterProcess> master = absl::UnknownError("not started");
  StatusOr<MasterProcess> standby = absl::UnknownError("not started");
  if (mode == Mode::kEtcd) {
    auto started = testing::EtcdServer::Start(dir);
    auto ports = std::make_pair(testing::PickFreePort(), testing::PickFreePort());
    if (!started.ok() || !ports.first.ok() || !ports.second.ok()) {
      std::printf("etcd: cannot start etcd: %s\n", std::string(started.status().message()).c_str());
      return;
    }
    etcd = std::move(started).value();
    master = StartMaster(bin, dir, data, mode, etcd->endpoint(), *ports.first, "a");
    if (master.ok()) standby = StartMaster(bin, dir, data, mode, etcd->endpoint(), *ports.second, "b", false);
  } else {
    master = StartMaster(bin, dir, data, mode);
  }
  if (!master.ok()) {
    std::printf("%s: cannot start pl-master: %s\n", ModeName(mode), std::string(master.status().message()).c_str());
    return;
  }
  std::vector<std::unique_ptr<proto::Master::Stub>> stubs;
  for (int c = 0; c < absl::GetFlag(FLAGS_channels); ++c) {
    grpc::ChannelArguments args;
    args.SetInt("pl-bench-channel", c);  // a channel of its own, not a shared subchannel
    stubs.push_back(proto::Master::NewStub(grpc::CreateCustomChannel(master->address, grpc::InsecureChannelCredentials(), args)));
  }
  if (!WaitServing(*stubs[0], std::chrono::seconds(60))) return;
  struct Trainer {
    int64_t id = 0;
    std::string token;
    int64_t round = 0;
    proto::Task held;  // leased, reported with the next lease (--report_with_lease)
  };
  const bool combined = absl::GetFlag(FLAGS_report_with_lease);
  std::vector<Trainer> simulated(static_cast<size_t>(trainers));
  const int threads = std::min<int>(absl::GetFlag(FLAGS_threads), trainers);
  {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (size_t i = t; i < simulated.size(); i += threads) {
          proto::RegisterTrainerRequest r;
          r.set_name(absl::StrCat("sim-", i));
          proto::RegisterTrainerResponse resp;
          if (stubs[t % stubs.size()]->RegisterTrainer(Ctx().get(), r, &resp).ok()) {
            simulated[i].id = resp.trainer_id();
            simulated[i].token = resp.token();
          }
        }
      });
    }
    for (std::thread& th : pool) th.join();
  }
  auto written = [&] {
    return BytesWritten(master->process->pid()) + (etcd ? BytesWritten(etcd->process().pid()) : 0);
  };
  const int64_t bytes_before = written();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> events{0}, errors{0};
  std::atomic<int64_t> calls{0};
  std::vector<std::vector<double>> latencies(threads);
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      proto::Master::Stub& stub = *stubs[t % stubs.size()];
      std::vector<double>& lat = latencies[t];
      while (!stop.load()) {
        for (size_t i = t; i < simulated.size() && !stop.load(); i += threads) {
          Trainer& tr = simulated[i];
          auto timed = [&](auto call) {
            const auto t0 = Clock::now();
            const grpc::Status s = call();
            lat.push_back(Ms(Clock::now() - t0));
            ++calls;
            if (s.ok()) ++events;
            else ++errors;
            return s.ok();
          };
          proto::GetTaskRequest get;
          get.set_trainer_id(tr.id);
          if (combined && tr.held.id() != 0) {  // the last round's task, reported with this lease
            proto::TaskFinishedRequest& done = *get.mutable_finished();
            done.set_trainer_id(tr.id);
            done.set_task_id(tr.held.id());
            done.set_pass(tr.held.pass());
            done.set_num_samples(1);
          }
          proto::GetTaskResponse task;
          tr.held.Clear();
          if (!timed([&] { return stub.GetTask(Ctx(tr.token).get(), get, &task); })) continue;
          if (get.has_finished() && task.finish_refused().empty()) ++events;  // the finish, counted
          if (task.result() == proto::GetTaskResponse::TASK) {
            if (combined) {
              tr.held = task.task();
            } else {
              proto::TaskFinishedRequest done;
              done.set_trainer_id(tr.id);
              done.set_task_id(task.task().id());
              done.set_pass(task.task().pass());
              done.set_num_samples(1);
              proto::TaskFinishedResponse ok;
              timed([&] { return stub.TaskFinished(Ctx(tr.token).get(), done, &ok); });
            }
          }
          if (++tr.round % 3 == 0) {
            proto::HeartbeatRequest beat;
            beat.set_trainer_id(tr.id);
            proto::HeartbeatResponse hb;
            timed([&] { return stub.Heartbeat(Ctx(tr.token).get(), beat, &hb); });
          }
        }
      }
    });
  }
  const Load load = RunFor(pool, stop, latencies, start);
  const double elapsed = load.elapsed_s;
  auto pct = [&load](double q) { return load.Percentile(q); };
  const int64_t n = events.load();
  const int64_t grew = written() - bytes_before;
  const int64_t rss = RssBytes(master->process->pid());
  double restore_ms = -1, failover_ms = -1;
  if (mode == Mode::kEtcd && standby.ok()) {
    // Failover: SIGKILL the leader; the clients' channel lists both masters. Until the
    // standby leases a task to one of the simulated trainers (their tokens are in the
    // state it restores).
    const std::string both_addresses = absl::StrCat(master->address, ",", standby->address);
    auto both = proto::Master::NewStub(rpc::MakeChannel(both_addresses));
    (void)testing::KillPid(master->process->pid(), SIGKILL);
    const auto killed = Clock::now();
    (void)testing::WaitForExit(*master->process, std::chrono::seconds(10));
    auto dialled = Clock::now();
    for (size_t i = 0; failover_ms < 0 && Clock::now() - killed < std::chrono::seconds(60); i = (i + 1) % simulated.size()) {
      // As MasterClient does: a failing channel is dialled afresh, at most every 200 ms.
      if (Clock::now() - dialled >= std::chrono::milliseconds(200)) {
        both = proto::Master::NewStub(rpc::MakeChannel(both_addresses));
        dialled = Clock::now();
      }
      proto::GetTaskRequest get;
      get.set_trainer_id(simulated[i].id);
      proto::GetTaskResponse task;
      auto ctx = rpc::MakeContext(std::chrono::milliseconds(200), /*wait_for_ready=*/false);
      ctx->AddMetadata(rpc::kTrainerTokenKey, simulated[i].token);
      if (both->GetTask(ctx.get(), get, &task).ok() && task.result() == proto::GetTaskResponse::TASK) {
        failover_ms = Ms(Clock::now() - killed);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    (void)testing::KillPid(standby->process->pid(), SIGKILL);
    (void)testing::WaitForExit(*standby->process, std::chrono::seconds(10));
    // What the standby did meanwhile, with its timestamps.
    for (absl::string_view line : absl::StrSplit(testing::ReadFileOrEmpty(dir + "/master-b.log"), '\n')) {
      if (absl::StrContains(line, "leading") || absl::StrContains(line, "resumed") ||
          absl::StrContains(line, "serving on")) {
        std::printf("  standby: %s\n", std::string(line).c_str());
      }
    }
  } else {
    // Restore: SIGKILL, then a new master on the same state until it answers.
    (void)testing::KillPid(master->process->pid(), SIGKILL);
    (void)testing::WaitForExit(*master->process, std::chrono::seconds(10));
    const auto restart = Clock::now();
    auto again = StartMaster(bin, dir, data, mode);
    if (again.ok()) {
      auto stub = proto::Master::NewStub(rpc::MakeChannel(again->address));
      if (WaitServing(*stub, std::chrono::seconds(120))) restore_ms = Ms(Clock::now() - restart);
      for (absl::string_view line : absl::StrSplit(testing::ReadFileOrEmpty(dir + "/master-m.log"), '\n')) {
        if (absl::StrContains(line, "resumed:")) std::printf("  restart: %s\n", std::string(line).c_str());
      }
      (void)testing::KillPid(again->process->pid(), SIGKILL);
      (void)testing::WaitForExit(*again->process, std::chrono::seconds(10));
    }
  }
  std::printf("%-5s trainers %6d tasks %8lld: %9.0f events/s (%7.0f calls/s)  p50 %7.3f ms  p99 %8.3f ms  "
              "%7.1f bytes/event  RSS %6.1f MB (%5.0f B/task)  %s %7.0f ms  errors %lld\n",
              ModeName(mode), trainers, static_cast<long long>(tasks), n / elapsed, calls.load() / elapsed, pct(0.5),
              pct(0.99),
              n > 0 ? static_cast<double>(grew) / n : 0.0, rss / 1048576.0, static_cast<double>(rss) / tasks,
              mode == Mode::kEtcd ? "failover (SIGKILL -> standby leases a task)" : "restore",
              mode == Mode::kEtcd ? failover_ms : restore_ms, static_cast<long long>(errors.load()));
  std::fflush(stdout);
  etcd.reset();
  std::filesystem::remove_all(dir);
}

// The same load on a Master object in this process: what the master itself can do,
// without gRPC and with the client threads' cost reduced to a function call.
void RunInProcess(int64_t tasks, int trainers) {
  const std::string dir = std::filesystem::temp_directory_path() / absl::StrCat("pl-bench-master-inproc-", getpid());
  std::filesystem::remove_all(dir);
  auto store = LocalDirStore::Open(dir);
  if (!store.ok()) return;
  MasterOptions o;
  o.queue.num_passes = 1000;
  o.num_pservers = 0;
  o.lease_ms = 600000;
  o.log_path = dir + "/master-events.log";
  o.log = [](const std::string&) {};
  auto master = Master::Open(o, store->get(), [tasks]() -> StatusOr<std::vector<ChunkInfo>> {
    std::vector<ChunkInfo> chunks(static_cast<size_t>(tasks));
    for (int64_t i = 0; i < tasks; ++i) {
      chunks[i].path = "d.plrec";
      chunks[i].index = i;
      chunks[i].num_records = 1;
    }
    return chunks;
  });
  if (!master.ok()) {
    std::printf("inproc: %s\n", std::string(master.status().message()).c_str());
    return;
  }
  Master& m = **master;
  std::vector<int64_t> ids(static_cast<size_t>(trainers));
  for (int64_t& id : ids) {
    proto::RegisterTrainerRequest r;
    r.set_name("sim");
    id = m.RegisterTrainer(r)->trainer_id();
  }
  const int threads = std::min<int>(absl::GetFlag(FLAGS_threads), trainers);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> events{0};
  std::vector<std::vector<double>> latencies(threads);
  std::vector<std::thread> pool;
  const bool combined = absl::GetFlag(FLAGS_report_with_lease);
  std::vector<proto::Task> held(ids.size());  // reported with the next lease (combined)
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      int64_t round = 0;
      while (!stop.load()) {
        for (size_t i = t; i < ids.size() && !stop.load(); i += threads) {
          auto t0 = Clock::now();
          proto::GetTaskRequest get;
          get.set_trainer_id(ids[i]);
          if (combined && held[i].id() != 0) {
            proto::TaskFinishedRequest& done = *get.mutable_finished();
            done.set_trainer_id(ids[i]);
            done.set_task_id(held[i].id());
            done.set_pass(held[i].pass());
            done.set_num_samples(1);
          }
          held[i].Clear();
          auto task = m.GetTask(get);
          latencies[t].push_back(Ms(Clock::now() - t0));
          if (!task.ok()) continue;
          ++events;
          if (get.has_finished() && task->finish_refused().empty()) ++events;
          if (task->result() == proto::GetTaskResponse::TASK && combined) {
            held[i] = task->task();
          } else if (task->result() == proto::GetTaskResponse::TASK) {
            proto::TaskFinishedRequest done;
            done.set_trainer_id(ids[i]);
            done.set_task_id(task->task().id());
            done.set_pass(task->task().pass());
            done.set_num_samples(1);
            t0 = Clock::now();
            if (m.TaskFinished(done).ok()) ++events;
            latencies[t].push_back(Ms(Clock::now() - t0));
          }
          if (++round % 3 == 0) {
            proto::HeartbeatRequest beat;
            beat.set_trainer_id(ids[i]);
            t0 = Clock::now();
            if (m.Heartbeat(beat).ok()) ++events;
            latencies[t].push_back(Ms(Clock::now() - t0));
          }
        }
      }
    });
  }
  const Load load = RunFor(pool, stop, latencies, start);
  const double elapsed = load.elapsed_s;
  auto pct = [&load](double q) { return load.Percentile(q); };
  std::printf("%-6s trainers %6d tasks %8lld: %9.0f events/s  p50 %7.3f ms  p99 %8.3f ms\n", "inproc", trainers,
              static_cast<long long>(tasks), events.load() / elapsed, pct(0.5), pct(0.99));
  std::fflush(stdout);
  master->reset();
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  pl::rpc::UseInsecureTransport();
  auto bin = pl::testing::BinaryPath("pl-master");
  if (!bin.ok()) {
    std::fprintf(stderr, "pl-bench-master: %s\n", std::string(bin.status().message()).c_str());
    return 1;
  }
  const int64_t tasks = absl::GetFlag(FLAGS_tasks);
  const std::string data_dir = std::filesystem::temp_directory_path() / absl::StrCat("pl-bench-master-data-", getpid());
  std::filesystem::create_directories(data_dir);
  const std::string data = data_dir + "/tasks.plrec";
  {
    pl::RecordWriter w;
    pl::Status st = w.Open(data, /*records_per_chunk=*/1);
    for (int64_t i = 0; st.ok() && i < tasks; ++i) st = w.Write("r");
    if (st.ok()) st = w.Close();
    if (!st.ok()) {
      std::fprintf(stderr, "pl-bench-master: cannot write the data: %s\n", std::string(st.message()).c_str());
      return 1;
    }
  }
  std::printf("pl-bench-master: %lld tasks, %g s a run, %d threads, %d channels\n", static_cast<long long>(tasks),
              absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_channels));
  for (absl::string_view n : absl::StrSplit(absl::GetFlag(FLAGS_trainers), ',')) {
    int trainers = 0;
    if (!absl::SimpleAtoi(n, &trainers) || trainers <= 0) continue;
    for (absl::string_view mode : absl::StrSplit(absl::GetFlag(FLAGS_modes), ',')) {
      if (mode == "inproc") {
        pl::RunInProcess(tasks, trainers);
      } else {
        pl::RunOne(*bin, data, tasks, trainers,
                   mode == "log" ? pl::Mode::kLog : mode == "etcd" ? pl::Mode::kEtcd : pl::Mode::kWhole);
      }
    }
  }
  std::filesystem::remove_all(data_dir);
  return 0;
}
