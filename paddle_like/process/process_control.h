// Process control for programs that start other processes (launchers, benchmarks,
// integration tests): spawn a command with arguments and environment, its output
// captured to a file; kill by pid; wait with a timeout; pick a free port; wait for a
// port file; temp dirs.
//
// Every wait takes a timeout. A ChildProcess SIGKILLs (its whole process group) and
// reaps its child when destroyed, so a test that holds its children in
// std::unique_ptr cleans up even when an assertion fails half-way.
//
//   pl::process::TempDir dir;
//   auto master = pl::process::Spawn({*pl::process::ExecutableIn(bin_dir, "pl-master"), "--port", "0",
//                                     "--port_file", dir.path() + "/m.port", ...},
//                                    dir.path() + "/master.log");
//   ASSERT_TRUE(master.ok()) << master.status();
//   auto port = pl::process::WaitForPortFile(dir.path() + "/m.port", std::chrono::seconds(10),
//                                           master->get());
//
// Thread-safety: the functions are thread-safe; each ChildProcess / TempDir is used by
// one thread.
#ifndef PADDLE_LIKE_PROCESS_PROCESS_CONTROL_H_
#define PADDLE_LIKE_PROCESS_PROCESS_CONTROL_H_

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/process/child_process.h"

namespace pl::process {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// Starts `argv` (argv[0] a path, or a name looked up in PATH) with `env` added to this
// process's environment; stdout and stderr are appended to `output_file`. The child
// runs in its own process group and dies with this process.
StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                              const std::string& output_file, const EnvVars& env = {});
// Spawn({"/bin/sh", "-c", script}, ...).
StatusOr<std::unique_ptr<ChildProcess>> SpawnShell(const std::string& script,
                                                   const std::string& output_file, const EnvVars& env = {});

// kill(pid, sig). NOT_FOUND when no such process exists.
Status KillPid(pid_t pid, int sig = SIGKILL);
// True while `pid` exists and is not a zombie.
bool PidAlive(pid_t pid);

// Waits for `child` to exit. DEADLINE_EXCEEDED naming its pid and command on timeout.
StatusOr<ExitInfo> WaitForExit(ChildProcess& child, std::chrono::milliseconds timeout);

// Polls `pred` every few milliseconds; true once it holds, false after `timeout`.
bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// A TCP port that was free on 127.0.0.1 a moment ago. Another process may take it
// before it is used: prefer starting servers with --port 0 and reading a port file.
StatusOr<int> PickFreePort();

// Waits until `path` holds a port number (decimal, optional whitespace). When `child`
// is given and exits first, fails at once with UNAVAILABLE naming how it ended.
// DEADLINE_EXCEEDED naming the file on timeout.
StatusOr<int> WaitForPortFile(const std::string& path, std::chrono::milliseconds timeout,
                              ChildProcess* child = nullptr);

// The whole file, or "" when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// <dir>/<name> when it is an executable file; NOT_FOUND naming the path otherwise.
StatusOr<std::string> ExecutableIn(const std::string& dir, const std::string& name);

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "pl-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Empty when the directory could not be created.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pl::process

#endif  // PADDLE_LIKE_PROCESS_PROCESS_CONTROL_H_
