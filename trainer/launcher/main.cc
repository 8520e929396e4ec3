// pl-launch: runs a training job as a local cluster (master, pservers, trainers) on
// 127.0.0.1, or this machine's share of a job on several machines (--nnodes). See
// launcher.h for what it does and launch_options.h for its flags.
//
// Exit status: 0 job done; 1 job failed (one-line cause on stderr); 2 bad input (also
// a --nnodes that differs from node 0's); 3 job done with losses (tasks set aside as
// failed in some pass, a shard restarted from its seed or an older checkpoint, pushes
// refused as out of bounds; --allow_losses makes that 0);
// with --make_ca DIR: 0 written, 1
// not (DIR holds a CA already, or cannot be written);
// 130 / 143 stopped by SIGINT / SIGTERM.
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "paddle_like/core/cli.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/rpc/certificates.h"
#include "trainer/launcher/launch_options.h"
#include "trainer/launcher/launcher.h"

namespace {

pl::Launcher* g_launcher = nullptr;

void OnSignal(int signo) {
  if (g_launcher != nullptr) g_launcher->RequestStop(signo);
}

// The directory of this executable: pl-master and pl-pserver are installed beside it.
std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// pl-launch --make_ca DIR: one CA for the nodes of a job on several machines.
int MakeCa(const std::string& dir) {
  std::error_code ec;
  const std::string absolute = std::filesystem::absolute(dir, ec).string();
  pl::Status made = pl::rpc::MakeCa(dir, "paddle-like job CA " + (ec ? dir : absolute));
  if (!made.ok()) {
    std::fprintf(stderr, "pl-launch: error: --make_ca: %s\n", std::string(made.message()).c_str());
    return 1;
  }
  std::printf("pl-launch: wrote the job's CA to %s (ca.crt, ca.key: keep ca.key secret); copy the directory to "
              "every machine of the job and pass --tls_ca %s there\n",
              dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pl::SkipMutexDeadlockChecks();
  const pl::cli::CommandLine line = pl::cli::ParseOrExit(pl::LaunchProgram(), argc, argv);
  pl::StatusOr<std::string> ca_dir = pl::MakeCaDirFromFlags(line);
  if (!ca_dir.ok()) pl::cli::ExitWithUsageError(pl::LaunchProgram(), ca_dir.status().message());
  if (!ca_dir->empty()) return MakeCa(*ca_dir);
  pl::StatusOr<pl::LaunchOptions> options = pl::LaunchOptionsFromFlags(line);
  if (!options.ok()) pl::cli::ExitWithUsageError(pl::LaunchProgram(), options.status().message());
  options->bin_dir = SelfDir();
  pl::log::SetProcessName("launch");

  // Each line is written whole, so children's lines never interleave mid-line.
  pl::Launcher launcher(*std::move(options), [](const std::string& line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  });
  if (pl::Status s = launcher.Validate(); !s.ok()) pl::cli::ExitWithUsageError(pl::LaunchProgram(), s.message());

  g_launcher = &launcher;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed stdout reader must not kill us before cleanup

  pl::Status result = launcher.Run();
  g_launcher = nullptr;
  if (result.ok()) return 0;
  pl::log::Error(std::string(result.message()));
  if (absl::IsCancelled(result)) return 128 + (launcher.stop_signal() != 0 ? launcher.stop_signal() : SIGINT);
  if (absl::IsDataLoss(result)) return pl::kLaunchLossExitCode;  // done, but work was lost (--allow_losses)
  // Bad input found only once running, e.g. a node started with another --nnodes than node 0.
  if (absl::IsInvalidArgument(result)) return pl::cli::kUsageExitCode;
  return 1;
}
