// pl-autoscale: the elastic controller for jobs launched with pl-launch (on one machine
// or several). Sizes every job of a cluster file to the slots the cluster leaves to
// training, through each job's master (docs/elastic.md).
//
//   pl-autoscale --cluster FILE [--period_ms 250] [--cooldown_ms 5000] [--settle_ms 1000]
//                [--http_port P [--http_port_file F]] [--logdir DIR] [--tls_dir DIR]
//
// The cluster file (proto/elastic.proto, text format) is re-read when it changes; one
// that does not parse or check is reported (log, status page) and the last good one
// stays in force. A bad file at start is one line and exit status 2. Runs until
// SIGTERM or SIGINT, then exits 0.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/elastic/autoscale_page.h"
#include "paddle_like/elastic/autoscaler.h"
#include "paddle_like/elastic/cluster_file.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/metrics/event_file_writer.h"
#include "paddle_like/metrics/http_server.h"
#include "paddle_like/metrics/telemetry_flags.h"
#include "paddle_like/rpc/tls_flags.h"

ABSL_FLAG(std::string, cluster, "", "the cluster file: slots, reserved_slots and the elastic jobs (required)");
ABSL_FLAG(int64_t, period_ms, 250, "one observe-decide-act period (>= 10)");
ABSL_FLAG(int64_t, cooldown_ms, 5000, "after a job's target changes, it neither grows nor rebalances for this long");
ABSL_FLAG(int64_t, settle_ms, 1000,
          "a job grows into spare slots (or gives slots back to rebalance) only after its fair share has differed "
          "from its target this long");
ABSL_FLAG(int64_t, rpc_timeout_ms, 500, "each call to a job's master (>= 10)");
ABSL_FLAG(std::string, http_host, "127.0.0.1", "address of the status page (0.0.0.0 for every interface)");
ABSL_FLAG(int, http_port, -1, "serve /, /status.json, /metrics and /healthz on this port (-1: off; 0: any free)");
ABSL_FLAG(std::string, http_port_file, "", "write the bound status page port here (atomically) once serving");

namespace {

std::atomic<bool> g_stop{false};

struct FileStamp {
  int64_t mtime_ns = -1;
  int64_t size = -1;
  bool operator==(const FileStamp& o) const { return mtime_ns == o.mtime_ns && size == o.size; }
};

FileStamp Stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, static_cast<int64_t>(st.st_size)};
}

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  pl::SkipMutexDeadlockChecks();
  const pl::cli::Program program = {
      "pl-autoscale", "--cluster FILE [flags]",
      "The elastic controller: sizes the jobs of a cluster file (pl-launch jobs, through their masters) to the\n"
      "slots the cluster leaves to training: minimums first, spare slots by how far each job is from its\n"
      "maximum, higher priority first, reclaimed slots freed within a period (docs/elastic.md).",
      pl::metrics::WithTelemetryEnv(pl::rpc::WithTlsEnv({{"cluster", "PL_CLUSTER_FILE"}}))};
  pl::cli::ParseOrExit(program, argc, argv);
  pl::log::SetProcessName("autoscale");
  pl::cli::CheckOrExit(program, {pl::cli::CheckAtLeast<int64_t>("period_ms", absl::GetFlag(FLAGS_period_ms), 10),
                                 pl::cli::CheckAtLeast<int64_t>("cooldown_ms", absl::GetFlag(FLAGS_cooldown_ms), 0),
                                 pl::cli::CheckAtLeast<int64_t>("settle_ms", absl::GetFlag(FLAGS_settle_ms), 0),
                                 pl::cli::CheckAtLeast<int64_t>("rpc_timeout_ms", absl::GetFlag(FLAGS_rpc_timeout_ms), 10),
                                 pl::cli::CheckRange("http_port", absl::GetFlag(FLAGS_http_port), -1, 65535)});
  pl::rpc::ConfigureTransportOrExit(program, "launch");
  const std::string path = absl::GetFlag(FLAGS_cluster);
  if (path.empty()) pl::cli::ExitWithUsageError(program, "no cluster file: pass --cluster FILE");
  FileStamp stamp = Stamp(path);
  auto first = pl::elastic::ReadClusterFile(path);
  if (!first.ok()) pl::cli::ExitWithUsageError(program, first.status().message());

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto telemetry = pl::metrics::OpenTelemetryOrExit(program, "autoscale", "0", absl::GetFlag(FLAGS_http_host));
  pl::elastic::MasterJobControl control(absl::GetFlag(FLAGS_rpc_timeout_ms));
  pl::elastic::AutoscalerOptions options;
  options.policy.cooldown_ms = absl::GetFlag(FLAGS_cooldown_ms);
  options.policy.settle_ms = absl::GetFlag(FLAGS_settle_ms);
  options.now_ms = MonotonicMs;
  options.log = [](const std::string& line) { pl::log::Info(line); };
  pl::elastic::Autoscaler autoscaler(options, &control);
  autoscaler.SetCluster(*first);

  std::unique_ptr<pl::metrics::HttpServer> http;
  if (const int port = absl::GetFlag(FLAGS_http_port); port >= 0) {
    auto started = pl::metrics::HttpServer::Start({absl::GetFlag(FLAGS_http_host), port}, [&](const std::string& p) {
      return pl::elastic::ServeAutoscalePage(autoscaler.view(), p);
    });
    if (!started.ok()) {
      pl::log::Error(absl::StrCat("--http_port: ", started.status().message()));
      return 1;
    }
    http = std::move(started).value();
    if (const std::string file = absl::GetFlag(FLAGS_http_port_file); !file.empty()) {
      if (pl::Status st = pl::WriteFileAtomically(file, absl::StrCat(http->port(), "\n")); !st.ok()) {
        pl::log::Error(absl::StrCat("cannot write the status page's port file: ", st.message()));
        return 1;
      }
    }
    pl::log::Info(absl::StrCat("status page: serving on ", absl::GetFlag(FLAGS_http_host), ":", http->port()));
  }

  const int64_t period = absl::GetFlag(FLAGS_period_ms);
  std::string last_error;
  int64_t step = 0;
  while (true) {
    const int64_t began = MonotonicMs();
    if (FileStamp now = Stamp(path); !(now == stamp)) {
      stamp = now;
      auto cluster = pl::elastic::ReadClusterFile(path);
      if (cluster.ok()) {
        autoscaler.SetCluster(*cluster);
        last_error.clear();
      } else if (cluster.status().message() != last_error) {
        last_error = std::string(cluster.status().message());
        pl::log::Error(absl::StrCat(last_error, " (the last good cluster file stays in force)"));
        autoscaler.SetClusterError(last_error);
      }
    }
    const pl::elastic::Plan plan = autoscaler.Tick();
    if (pl::metrics::EventFileWriter* tb = telemetry->events(); tb != nullptr) {
      std::vector<pl::metrics::Scalar> scalars = {{"autoscale/capacity", static_cast<double>(plan.capacity)},
                                                  {"autoscale/assigned", static_cast<double>(plan.assigned)}};
      for (const pl::elastic::JobDecision& d : plan.jobs) {
        scalars.push_back({"autoscale/target/" + d.name, static_cast<double>(d.target)});
        scalars.push_back({"autoscale/running/" + d.name, static_cast<double>(std::max(d.running, 0))});
      }
      (void)tb->AddScalars(step, scalars);
    }
    ++step;
    const int64_t wait = std::max<int64_t>(1, period - (MonotonicMs() - began));
    timespec ts{static_cast<time_t>(wait / 1000), static_cast<long>((wait % 1000) * 1000000)};
    int sig = sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      pl::log::Info(absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT", ", stopping (the jobs keep their targets)"));
      break;
    }
  }
  if (pl::metrics::EventFileWriter* tb = telemetry->events(); tb != nullptr) (void)tb->Close();
  return 0;
}
