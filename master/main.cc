// pl-master: serves the master of one training job.
//
//   pl-master --port 0 --port_file PATH --state_dir DIR --data DIR_OR_FILE --passes N
//             --chunks_per_task K [--virtual_trainers V] --lease_ms 3000 --max_failures 3 --num_pservers P --seed S
//             [--host 127.0.0.1] [--num_nodes N] [--replicas R] [--logdir DIR] [--metrics_port P]
//             [--http_port P --http_port_file PATH]
//             [--etcd_endpoints H:P,... --etcd_prefix /paddle_like/JOB --leader_ttl_s 2]
//
// Environment fallbacks (used when the flag is absent, read here only): PL_MASTER_PORT,
// PL_STATE_DIR, PL_NUM_PSERVERS. If the state dir holds a job it is resumed (the data is
// not read); otherwise the job's tasks are cut from the record files under --data. The
// bound port is written to --port_file (atomically) once serving. The master keeps
// serving after the job is done, so trainers and the launcher can read JOB_DONE, until
// SIGTERM or SIGINT, then exits 0. On an error it prints one line and exits non-zero.
//
// With --etcd_endpoints the job's state lives in etcd and any number of masters may be
// started for it (master/master_storage.h): one leads and serves, the others stand by
// without listening until it is gone, then one of them reads the state and serves on its
// own port. Clients given every master's address ("--master A:P,B:P") reach whichever
// serves. A leader that loses its etcd lease exits 1 at once.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "master/master_grpc_service.h"
#include "master/status_page.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/data/chunk_index.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/metrics/job_events.h"
#include "paddle_like/metrics/job_sampler.h"
#include "paddle_like/metrics/progress_board.h"
#include "paddle_like/metrics/telemetry_flags.h"
#include "paddle_like/metrics/ticker.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls_flags.h"
#include "master/master_storage.h"

ABSL_FLAG(std::string, host, "127.0.0.1",
          "address to listen on (default: this host only; 0.0.0.0 for every interface, as other hosts need)");
ABSL_FLAG(int, port, 0, "port to listen on (0: any free port; see --port_file)");
ABSL_FLAG(std::string, port_file, "", "write the bound port here (atomically) once serving");
ABSL_FLAG(std::string, state_dir, "",
          "directory of the job's state (required without --etcd_endpoints); a job found there is resumed");
ABSL_FLAG(std::string, etcd_endpoints, "",
          "keep the job's state in etcd (host:port,...) and lead it only while elected there: start the same master "
          "on other machines as standbys, and one of them takes over when the leader is gone");
ABSL_FLAG(std::string, etcd_prefix, "/paddle_like/job",
          "the job's keys in etcd (one prefix per job: its leader key, state and event log)");
ABSL_FLAG(std::string, etcd_tls_dir, "",
          "etcd: speak mutual TLS to it with this certificate directory (tls.crt, tls.key, ca.crt; pl-launch passes "
          "the master's own, which its etcd members alone admit); empty: plaintext");
ABSL_FLAG(int64_t, campaign_delay_ms, 0,
          "etcd: once etcd answers, wait this long before first campaigning to lead, so that of masters started "
          "together the one without a delay leads (pl-launch gives node r's master r seconds; >= 0)");
ABSL_FLAG(int64_t, leader_ttl_s, 2,
          "etcd: the leader's lease in seconds; a standby takes over this long after the leader dies (>= 1; etcd "
          "may grant more)");
ABSL_FLAG(bool, event_log, true,
          "store each change as one event appended to STATE_DIR/master-events.log, calls in flight sharing an fsync, "
          "and the whole state every 64 MB of log (--noevent_log: the whole state on every change, as before; "
          "for comparison)");
ABSL_FLAG(std::string, data, "", "record file, or directory of *.plrec files, to cut a new job's tasks from; or indices:N[:K] (sample indices 0..N-1 of a dataset the trainers hold, K per chunk)");
ABSL_FLAG(int, passes, 1, "passes over the data (>= 1)");
ABSL_FLAG(int, chunks_per_task, 1, "record chunks per task (>= 1)");
ABSL_FLAG(int, virtual_trainers, 0,
          "> 0: a job of this many virtual trainers, whose parameters are the same bits however many trainers "
          "compute them and whoever joins or leaves (docs/consistent-training.md): the data is cut into this many "
          "tasks (--chunks_per_task is ignored) and the pservers run sync steps; a new job only");
ABSL_FLAG(bool, overlap_passes, true,
          "while the last tasks of a pass are out, lease a trainer that asks a task of the next pass rather than "
          "let it wait (every task is still trained once per pass); a new job only, a resumed one keeps its own");
ABSL_FLAG(int64_t, lease_ms, 3000, "a task's lease: a trainer silent this long loses it (>= 1)");
ABSL_FLAG(int64_t, pserver_lease_ms, 800,
          "replicated shards: a replica silent this long leaves its shard, a lost primary's backup takes over (>= 1)");
ABSL_FLAG(int, max_failures, 3, "times a task may fail before it is dropped (>= 1)");
ABSL_FLAG(int, num_pservers, 1, "pservers the job waits for (>= 0)");
ABSL_FLAG(uint64_t, seed, 0, "seed of the task order");
ABSL_FLAG(int, http_port, -1, "serve the job's status page on this port (-1: off; 0: any free port)");
ABSL_FLAG(std::string, http_port_file, "", "write the bound status page port here (atomically) once serving");
ABSL_FLAG(int, num_nodes, 1, "machines the job runs on (pl-launch --nnodes; reported by JobStatus, >= 1)");
ABSL_FLAG(int, replicas, 0,
          "copies of each shard the job was launched with (pl-launch --replicas; reported by JobStatus so that "
          "every node can check it; 0: not told). Whatever replicas register are counted");

namespace {

[[noreturn]] void Fail(const std::string& line) {
  pl::log::Error(line);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  pl::SkipMutexDeadlockChecks();
  const pl::cli::Program program = {
      "pl-master",
      "--state_dir DIR --data DIR_OR_FILE [--port 0] [--port_file PATH] [flags]",
      "The master of one training job: cuts the data into tasks, leases them to trainers,\n"
      "tracks the pservers and trainers, and keeps its state in --state_dir. Runs until SIGTERM.",
      pl::rpc::WithTlsEnv({{"port", "PL_MASTER_PORT"}, {"state_dir", "PL_STATE_DIR"}, {"num_pservers", "PL_NUM_PSERVERS"}})};
  pl::cli::ParseOrExit(program, argc, argv);
  pl::log::SetProcessName("master");
  pl::cli::CheckOrExit(program, {pl::cli::CheckRange("port", absl::GetFlag(FLAGS_port), 0, 65535),
                                   pl::cli::CheckAtLeast("passes", absl::GetFlag(FLAGS_passes), 1),
                                   pl::cli::CheckAtLeast("chunks_per_task", absl::GetFlag(FLAGS_chunks_per_task), 1),
                                   pl::cli::CheckRange("virtual_trainers", absl::GetFlag(FLAGS_virtual_trainers), 0,
                                                       pl::kMaxVirtualTrainers),
                                   pl::cli::CheckAtLeast<int64_t>("lease_ms", absl::GetFlag(FLAGS_lease_ms), 1),
                                 pl::cli::CheckAtLeast<int64_t>("pserver_lease_ms", absl::GetFlag(FLAGS_pserver_lease_ms), 1),
                                   pl::cli::CheckAtLeast("max_failures", absl::GetFlag(FLAGS_max_failures), 1),
                                   pl::cli::CheckAtLeast("num_pservers", absl::GetFlag(FLAGS_num_pservers), 0),
                                   pl::cli::CheckAtLeast("num_nodes", absl::GetFlag(FLAGS_num_nodes), 1),
                                   pl::cli::CheckAtLeast("replicas", absl::GetFlag(FLAGS_replicas), 0),
                                   pl::cli::CheckAtLeast<int64_t>("leader_ttl_s", absl::GetFlag(FLAGS_leader_ttl_s), 1),
                                   pl::cli::CheckAtLeast<int64_t>("campaign_delay_ms",
                                                                  absl::GetFlag(FLAGS_campaign_delay_ms), 0),
                                   pl::cli::CheckRange("http_port", absl::GetFlag(FLAGS_http_port), -1, 65535)});
  const std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  const std::string host = absl::GetFlag(FLAGS_host);
  const std::string etcd_endpoints = absl::GetFlag(FLAGS_etcd_endpoints);
  if (state_dir.empty() && etcd_endpoints.empty()) {
    pl::cli::ExitWithUsageError(program, "no state directory: pass --state_dir DIR (or set PL_STATE_DIR), or "
                                         "--etcd_endpoints");
  }
  if (!etcd_endpoints.empty() && absl::GetFlag(FLAGS_port) == 0) {
    pl::cli::ExitWithUsageError(program, "--etcd_endpoints needs a fixed --port: the trainers are given every "
                                         "master's address before any of them leads");
  }

  pl::MasterStorageOptions storage_options;
  storage_options.state_dir = state_dir;
  storage_options.event_log = absl::GetFlag(FLAGS_event_log);
  storage_options.etcd_endpoints = etcd_endpoints;
  storage_options.etcd_prefix = absl::GetFlag(FLAGS_etcd_prefix);
  // What the standbys' lines name as the leader: an address listening on every interface
  // says nothing, the machine's name does.
  std::string advertised_host = host;
  if (char name[256]; host == "0.0.0.0" && gethostname(name, sizeof(name)) == 0) advertised_host = name;
  storage_options.advertise = absl::StrCat(advertised_host, ":", absl::GetFlag(FLAGS_port));
  storage_options.leader_ttl_s = absl::GetFlag(FLAGS_leader_ttl_s);
  storage_options.campaign_delay_ms = absl::GetFlag(FLAGS_campaign_delay_ms);
  storage_options.etcd_tls_dir = absl::GetFlag(FLAGS_etcd_tls_dir);
  storage_options.log = [](const std::string& line) { pl::log::Info(line); };
  if (pl::Status st = pl::ValidateEtcdSettings(storage_options); !st.ok()) {
    pl::cli::ExitWithUsageError(program, std::string(st.message()));
  }
  // Flags are checked before the transport says anything: a refused one is one line.
  pl::rpc::ConfigureTransportOrExit(program, "master");

  // Signals are taken synchronously by this thread; block them before any thread starts
  // so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // --logdir, --metrics_port: a bad one ends the process here, before it serves. After
  // the mask: the /metrics thread must not take SIGTERM (its default action kills).
  auto telemetry = pl::metrics::OpenTelemetryOrExit(program, "master", "0", host);
  // The status page's port is taken now too, so a port in use fails before the job is
  // read; it answers 503 until the page exists (a standby's, until it leads).
  std::atomic<const pl::StatusPage*> page{nullptr};
  const bool may_stand_by = !etcd_endpoints.empty();
  std::unique_ptr<pl::metrics::HttpServer> status_server;
  if (const int http_port = absl::GetFlag(FLAGS_http_port); http_port >= 0) {
    auto started = pl::metrics::HttpServer::Start({host, http_port}, [&page, may_stand_by](const std::string& path) {
      const pl::StatusPage* p = page.load();
      if (p != nullptr) return p->Handle(path);
      return pl::metrics::HttpResponse{503, "text/plain",
                                       may_stand_by ? "standing by: another master leads this job, or none yet\n"
                                                    : "starting\n"};
    });
    if (!started.ok()) Fail(absl::StrCat("--http_port: ", started.status().message()));
    status_server = std::move(started).value();
  }

  // With etcd this blocks while another master leads; SIGTERM ends the wait.
  int stop_signal = 0;
  auto stop_requested = [&stop_signals, &stop_signal] {
    const timespec now{0, 0};
    if (stop_signal == 0) {
      const int sig = sigtimedwait(&stop_signals, nullptr, &now);
      if (sig > 0) stop_signal = sig;
    }
    return stop_signal != 0;
  };
  auto storage = pl::OpenMasterStorage(storage_options, stop_requested, [](const std::string& why) {
    // Memory may be ahead of what is stored, or another master leads: not one more
    // reply, and no destructors racing the threads that are serving.
    pl::log::Error(absl::StrCat("no longer the leader, exiting so that a standby takes over: ", why));
    std::_Exit(1);
  });
  if (!storage.ok()) {
    if (absl::IsCancelled(storage.status())) {
      pl::log::Info(absl::StrCat(stop_signal == SIGTERM ? "SIGTERM" : "SIGINT", " while standing by, exiting"));
      return 0;
    }
    Fail(std::string(storage.status().message()));
  }

  pl::MasterOptions options;
  options.queue.num_passes = absl::GetFlag(FLAGS_passes);
  options.queue.chunks_per_task = absl::GetFlag(FLAGS_chunks_per_task);
  options.queue.overlap_passes = absl::GetFlag(FLAGS_overlap_passes);
  options.queue.virtual_trainers = absl::GetFlag(FLAGS_virtual_trainers);
  options.queue.max_failures = absl::GetFlag(FLAGS_max_failures);
  options.queue.seed = absl::GetFlag(FLAGS_seed);
  options.num_pservers = absl::GetFlag(FLAGS_num_pservers);
  options.num_nodes = absl::GetFlag(FLAGS_num_nodes);
  options.replicas = absl::GetFlag(FLAGS_replicas);
  options.lease_ms = absl::GetFlag(FLAGS_lease_ms);
  options.pserver_lease_ms = absl::GetFlag(FLAGS_pserver_lease_ms);
  // Each change is one event appended to this log; the whole state is stored every
  // 64 MB of it (master/master_journal.h), every 8 MB in etcd (whose values are small).
  options.log_path = storage->log_path;
  options.event_log = storage->event_log;
  if (storage->event_log != nullptr) options.snapshot_bytes = int64_t{8} << 20;
  // The master's event lines, also kept for the status page and counted for /metrics.
  pl::metrics::JobEventLog events;
  options.log = [&events](const std::string& line) {
    events.Add(line);
    pl::log::Info(line);
  };
  const std::string data = absl::GetFlag(FLAGS_data);
  auto chunks = [&data]() -> pl::StatusOr<std::vector<pl::ChunkInfo>> {
    if (data.empty()) return absl::InvalidArgumentError("no job to resume and no data: pass --data DIR_OR_FILE");
    auto listed = pl::ListChunks(data);
    if (!listed.ok()) return pl::Annotate(listed.status(), "cannot cut the job into tasks (--data)");
    std::vector<pl::ChunkInfo> list = std::move(listed).value();
    if (list.empty()) return absl::NotFoundError(absl::StrCat("no record files (*.plrec) with chunks under '", data, "'"));
    return list;
  };
  auto master = pl::Master::Open(options, storage->store.get(), chunks);
  if (!master.ok()) Fail(std::string(master.status().message()));

  pl::MasterService service(master->get());
  pl::metrics::ProgressBoard board;  // trainers' curves, for the status page
  pl::metrics::JobSampler sampler(telemetry.get(), &events);
  auto sampling = std::make_unique<pl::metrics::Ticker>(absl::Seconds(1), [&sampler, m = master->get()] {
    if (auto status = m->JobStatus({}); status.ok()) sampler.Record(*status);
  });
  pl::rpc::ServerOptions server_options;
  server_options.address = absl::StrCat(host, ":", absl::GetFlag(FLAGS_port));
  // What the master is told never depends on the model: a registration, a task's end, a
  // trainer's progress points are bytes to kilobytes. Its answers (the membership of a
  // large job) may be larger.
  server_options.max_receive_bytes = pl::kMasterMaxRequestBytes;
  int bound_port = 0;
  pl::StatusPage status_page(master->get(), &events, &board, options.lease_ms);
  page.store(&status_page);
  if (status_server) {
    if (const std::string file = absl::GetFlag(FLAGS_http_port_file); !file.empty()) {
      pl::Status st = pl::WriteFileAtomically(file, absl::StrCat(status_server->port(), "\n"));
      if (!st.ok()) Fail(absl::StrCat("cannot write the status page's port file: ", st.message()));
    }
    pl::log::Info(absl::StrCat("status page: serving on ", host, ":", status_server->port()));
  }
  auto server = pl::rpc::StartServer(server_options, {&service, &board}, &bound_port);
  if (!server.ok()) Fail(std::string(server.status().message()));
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    pl::Status st = pl::WriteFileAtomically(port_file, absl::StrCat(bound_port, "\n"));
    if (!st.ok()) Fail(absl::StrCat("cannot write the port file: ", st.message()));
  }
  pl::log::Info(absl::StrCat("serving on ", host, ":", bound_port, " (", (*master)->Summary(), "; state in ",
                             storage->where, ")"));

  int sig = stop_signal;
  while (sig == 0 && sigwait(&stop_signals, &sig) != 0) {
  }
  (*master)->BeginStopping();
  pl::log::Info(absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT", ", stopping (", (*master)->Summary(), ")"));
  // gRPC's sync server waits out the whole deadline while any client keeps a connection
  // open, so the grace is short: every reply is already stored, and a cut call is retried.
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(250));
  server->reset();
  status_server.reset();
  sampling.reset();  // it reads the master
  master->reset();
  // Every reply is stored: a standby may lead at once rather than when the lease ends.
  if (storage->election) storage->election->Resign();
  return 0;
}
