// ChildProcess: one child started with fork/exec, owned by the object that started it.
//
// The child can get its stdout+stderr merged into a pipe (for a parent that streams it
// line by line), appended to a file (for tests), or inherited. By default it runs in its
// own process group (so a terminal Ctrl-C reaches only the parent, and a signal sent to
// the group also reaches anything a `sh -c` wrapper started) and gets PR_SET_PDEATHSIG
// SIGKILL, so a parent that is SIGKILLed leaves no orphan behind.
//
// Only this object reaps its child (waitpid on its own pid, never -1), so several owners
// in one process do not steal each other's exit statuses. The destructor SIGKILLs a child
// that is still running and reaps it.
//
// Thread-safety: a ChildProcess is used by one thread at a time.
#ifndef PADDLE_LIKE_PADDLE_LIKE_PROCESS_CHILD_PROCESS_H_
#define PADDLE_LIKE_PADDLE_LIKE_PROCESS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/core/status.h"

namespace pl {

// How a child ended.
struct ExitInfo {
  bool exited = false;  // false: still running (or never started)
  int code = 0;         // exit status when it exited normally
  int signal = 0;       // the signal that killed it, 0 when it exited normally

  bool success() const { return exited && signal == 0 && code == 0; }
  // "status 3", "signal 9", "running".
  std::string Describe() const;
};

struct ChildSpec {
  // argv[0] is the program: a path when it contains '/', else looked up in PATH.
  std::vector<std::string> argv;
  // Added to (or overriding) the parent's environment.
  std::vector<std::pair<std::string, std::string>> env;
  enum class Output { kInherit, kPipe, kFile };
  Output output = Output::kPipe;
  std::string output_file;       // kFile: stdout+stderr are appended here (created 0644)
  bool own_process_group = true; // setpgid(0, 0) in the child
  bool die_with_parent = true;   // PR_SET_PDEATHSIG(SIGKILL)
  std::string working_dir;       // empty: the parent's
};

class ChildProcess {
 public:
  // Forks and execs `spec`. Fails (NOT_FOUND / PERMISSION_DENIED / INTERNAL, naming the
  // program) when exec fails, so a wrong path is an error here rather than a child that
  // exits 127.
  static StatusOr<std::unique_ptr<ChildProcess>> Start(const ChildSpec& spec);

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const ChildSpec& spec() const { return spec_; }
  // Read end of the output pipe (non-blocking, CLOEXEC) for Output::kPipe; -1 otherwise
  // or after CloseOutput().
  int output_fd() const { return output_fd_; }
  void CloseOutput();
  // Readable once the child has exited (a pidfd), so a parent can wait for exits in the
  // same poll() as its other file descriptors instead of polling on a timer; -1 once
  // reaped, or where the kernel has no pidfd_open (before Linux 5.3).
  int exit_fd() const { return exit_fd_; }

  // Sends `sig` to the child's process group (or to the pid when it has none). OK and
  // no-op once the child has been reaped.
  Status Signal(int sig);

  // Reaps the child if it has exited; never blocks. True once it has exited.
  bool Poll();
  bool running() { return !Poll(); }
  // Waits up to `timeout` for the child to exit. True once it has exited.
  bool WaitFor(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL when still running after `grace`; reaps. Returns how it ended.
  ExitInfo Stop(std::chrono::milliseconds grace);

  // Valid once Poll()/WaitFor() returned true.
  const ExitInfo& exit_info() const { return exit_; }

 private:
  ChildProcess() = default;

  ChildSpec spec_;
  pid_t pid_ = -1;
  int output_fd_ = -1;
  int exit_fd_ = -1;
  ExitInfo exit_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_PADDLE_LIKE_PROCESS_CHILD_PROCESS_H_
