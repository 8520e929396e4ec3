// pl-pserver: one parameter server process. Parses flags (environment fallbacks
// PL_PSERVER_INDEX, PL_NUM_PSERVERS, PL_MASTER_ADDR, PL_CHECKPOINT_DIR,
// PL_ADVERTISE_HOST, read here only), restores the newest valid checkpoint, serves
// the ParameterServer service, registers with the master, checkpoints every N
// seconds, returns freed message buffers to the kernel when traffic pauses, and on
// SIGTERM/SIGINT stops serving, writes a final checkpoint and exits 0.
//
//   pl-pserver --index 0 --num_pservers 2 --master 127.0.0.1:7000 --port 0
//              --port_file /tmp/ps0.port --checkpoint_dir /tmp/ckpt --checkpoint_every_s 10
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/core/runtime.h"
#include "pserver/checkpoint.h"
#include "pserver/log.h"
#include "pserver/membership_watcher.h"
#include "pserver/pserver_service.h"
#include "pserver/shard.h"

namespace {

constexpr char kUsage[] =
    "usage: pl-pserver --index I --num_pservers P [--master HOST:PORT] [--host 0.0.0.0] "
    "[--port 0] [--advertise_host H] [--port_file PATH] [--checkpoint_dir DIR] "
    "[--checkpoint_every_s 10] [--max_message_mb 256] [--threads 0] [--trim_idle_ms 1000] [--shm true]";

// SIGTERM/SIGINT are noted by a handler (whichever thread takes them, including
// threads libraries start before main) and woken through a self-pipe.
int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) {
  g_signal = sig;
  const char byte = 1;
  (void)!write(g_signal_pipe[1], &byte, 1);
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "pl-pserver: %s\n", why.c_str());
  return 1;
}

struct Flags {
  std::map<std::string, std::string> values;
  std::string Get(const std::string& name, const char* env, const std::string& fallback) const {
    if (auto it = values.find(name); it != values.end()) return it->second;
    if (env != nullptr) {
      if (const char* v = std::getenv(env); v != nullptr && *v != '\0') return v;
    }
    return fallback;
  }
};

const char* const kKnownFlags[] = {"index", "num_pservers", "master", "host", "port", "advertise_host",
                                   "port_file", "checkpoint_dir", "checkpoint_every_s", "max_message_mb", "trim_idle_ms",
                                   "threads", "shm"};

pl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return absl::InvalidArgumentError(kUsage);
    if (!absl::StartsWith(arg, "--")) return absl::InvalidArgumentError("unexpected argument '" + arg + "'");
    arg = arg.substr(2);
    std::string value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError("flag --" + arg + " needs a value");
    }
    bool known = false;
    for (const char* k : kKnownFlags) known |= arg == k;
    if (!known) return absl::InvalidArgumentError("unknown flag --" + arg + " (" + kUsage + ")");
    flags.values[arg] = value;
  }
  return flags;
}

template <typename T>
pl::Status ParseInt(const std::string& name, const std::string& text, T* out) {
  if (!absl::SimpleAtoi(text, out)) {
    return absl::InvalidArgumentError("--" + name + " '" + text + "' is not an integer");
  }
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  pl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) return Fail(std::string(flags.status().message()));
  int index = -1, num_pservers = 0, port = 0, every_s = 10, max_mb = 256, threads = 0, trim_idle_ms = 1000;
  pl::Status s;
  if (s.ok()) s = ParseInt("index", flags->Get("index", "PL_PSERVER_INDEX", "-1"), &index);
  if (s.ok()) s = ParseInt("num_pservers", flags->Get("num_pservers", "PL_NUM_PSERVERS", "0"), &num_pservers);
  if (s.ok()) s = ParseInt("port", flags->Get("port", nullptr, "0"), &port);
  if (s.ok()) s = ParseInt("checkpoint_every_s", flags->Get("checkpoint_every_s", nullptr, "10"), &every_s);
  if (s.ok()) s = ParseInt("trim_idle_ms", flags->Get("trim_idle_ms", nullptr, "1000"), &trim_idle_ms);
  if (s.ok()) s = ParseInt("max_message_mb", flags->Get("max_message_mb", nullptr, "256"), &max_mb);
  if (s.ok()) s = ParseInt("threads", flags->Get("threads", nullptr, "0"), &threads);
  if (!s.ok()) return Fail(std::string(s.message()));
  if (num_pservers <= 0) return Fail("--num_pservers (or PL_NUM_PSERVERS) must be >= 1");
  if (index < 0 || index >= num_pservers) {
    return Fail(absl::StrCat("--index (or PL_PSERVER_INDEX) ", index, " must be in [0, ", num_pservers, ")"));
  }
  if (port < 0 || port > 65535) return Fail(absl::StrCat("--port ", port, " is not a port"));
  if (trim_idle_ms < 0) return Fail(absl::StrCat("--trim_idle_ms ", trim_idle_ms, " must be >= 0 (0: never)"));
  if (max_mb <= 0 || max_mb > 2047) return Fail(absl::StrCat("--max_message_mb ", max_mb, " must be in [1, 2047]"));
  const std::string shm_text = flags->Get("shm", nullptr, "true");
  if (shm_text != "true" && shm_text != "false") return Fail("--shm '" + shm_text + "' must be true or false");
  const std::string master = flags->Get("master", "PL_MASTER_ADDR", "");
  const std::string host = flags->Get("host", nullptr, "0.0.0.0");
  const std::string checkpoint_dir = flags->Get("checkpoint_dir", "PL_CHECKPOINT_DIR", "");
  const std::string port_file = flags->Get("port_file", nullptr, "");
  const std::string tag = absl::StrCat("pserver ", index);

  if (pipe(g_signal_pipe) != 0) return Fail("cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  std::unique_ptr<pl::pserver::Checkpointer> checkpointer;
  std::unique_ptr<pl::pserver::ParameterShard> shard;
  std::string restored_from;
  if (!checkpoint_dir.empty()) {
    checkpointer = std::make_unique<pl::pserver::Checkpointer>(checkpoint_dir, index);
    auto restored = checkpointer->RestoreLatest(num_pservers);
    if (!restored.ok()) return Fail(std::string(restored.status().message()));
    if (restored->shard) {
      shard = std::move(restored->shard);
      restored_from = restored->path;
      pl::pserver::LogEvent(absl::StrCat(tag, ": restored ", restored_from, " (version ", shard->version(),
                                         shard->sync() ? ", sync)" : ", async)"));
    }
  }
  if (!shard) shard = std::make_unique<pl::pserver::ParameterShard>(index, num_pservers);

  // Trainers on this host may send their dense traffic through shared memory.
  pl::pserver::SharedRegionOptions shm;
  shm.enabled = shm_text == "true";
  pl::pserver::PserverService service(shard.get(), checkpointer.get(), restored_from, shm);
  pl::rpc::ServerOptions server_options;
  server_options.address = absl::StrCat(host, ":", port);
  server_options.max_message_bytes = max_mb << 20;
  server_options.num_threads = threads;
  int bound_port = 0;
  auto server = pl::rpc::StartServer(server_options, {&service}, &bound_port);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  std::string advertise_host = flags->Get("advertise_host", "PL_ADVERTISE_HOST", "");
  if (advertise_host.empty()) advertise_host = (host == "0.0.0.0" || host == "::") ? "127.0.0.1" : host;
  const std::string address = absl::StrCat(advertise_host, ":", bound_port);
  if (!port_file.empty()) {
    pl::Status written = pl::WriteFileAtomically(port_file, absl::StrCat(bound_port, "\n"));
    if (!written.ok()) return Fail(std::string(written.message()));
  }
  pl::pserver::LogEvent(absl::StrCat(tag, " of ", num_pservers, ": serving on ", host, ":", bound_port,
                                     " (advertised as ", address, ")"));

  std::unique_ptr<pl::pserver::MembershipWatcher> watcher;
  if (!master.empty()) {
    pl::pserver::MembershipWatcherOptions wo;
    wo.master_address = master;
    wo.register_index = index;
    wo.register_address = address;
    wo.num_pservers = num_pservers;
    pl::pserver::ParameterShard* shard_ptr = shard.get();
    watcher = std::make_unique<pl::pserver::MembershipWatcher>(
        wo, [shard_ptr](const std::vector<int64_t>& live) { shard_ptr->SetLiveTrainers(live); });
    watcher->Start();
  }

  // Main loop: signals, the checkpoint timer, and returning the message buffers of a
  // burst of traffic to the kernel once it has paused for --trim_idle_ms.
  const absl::Duration every = absl::Seconds(std::max(every_s, 1));
  absl::Time next_checkpoint = absl::Now() + every;
  int64_t calls_seen = 0;
  absl::Time last_traffic = absl::Now();
  bool trimmed = true;
  while (g_signal == 0) {
    pollfd wake{g_signal_pipe[0], POLLIN, 0};
    (void)poll(&wake, 1, trim_idle_ms > 0 ? std::min(200, trim_idle_ms) : 200);
    if (g_signal != 0) break;
    if (const int64_t calls = service.data_calls(); calls != calls_seen) {
      calls_seen = calls;
      last_traffic = absl::Now();
      trimmed = false;
    } else if (!trimmed && trim_idle_ms > 0 && absl::Now() - last_traffic >= absl::Milliseconds(trim_idle_ms)) {
      shard->WaitForQueuedPushes();
      const int64_t before = pl::pserver::ResidentBytes();
      pl::ReleaseFreeHeapMemory();
      trimmed = true;
      pl::pserver::LogEvent(absl::StrFormat("%s: traffic paused for %d ms: freed buffers returned (rss %.1f MB -> %.1f MB)",
                                            tag, trim_idle_ms, before / 1e6, pl::pserver::ResidentBytes() / 1e6));
    }
    service.DropIdleRegions();
    if (checkpointer && every_s > 0 && absl::Now() >= next_checkpoint) {
      next_checkpoint = absl::Now() + every;
      // Nothing new since the last file: skip writing an identical one.
      if (shard->initialized() && shard->version() != service.checkpointed_version()) {
        (void)service.CheckpointNow();  // failure is logged; the next tick retries
      }
    }
  }
  const int signal_number = g_signal;
  pl::pserver::LogEvent(absl::StrCat(tag, ": ", strsignal(signal_number), " received; shutting down"));
  if (watcher) watcher->Stop();
  shard->Shutdown();  // wakes pulls waiting for a version
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  if (checkpointer && shard->initialized() && shard->version() != service.checkpointed_version()) {
    if (!service.CheckpointNow().ok()) return 1;
  }
  pl::pserver::LogEvent(absl::StrCat(tag, ": stopped"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pl::KeepLargeBuffersInHeap();
  return Run(argc, argv);
}
