// Supervisor: keeps a set of named child processes running the way a Kubernetes
// kubelet would, and streams their output.
//
// Each process has a name ("master", "pserver-1", "trainer-2") that prefixes every line
// of its merged stdout/stderr ("[pserver-1] ..."). Lines are passed to the sink whole,
// never interleaved with another process's partial line. A process with
// RestartPolicy::kAlways is started again with its current command line when it exits
// for any reason (after a delay that doubles while it keeps failing quickly, like
// CrashLoopBackOff), until it has failed `max_quick_failures` times in a row; kNever
// processes are only reported. Its own messages go to the sink as "[launch] " and a
// pl::log line of the process "launch" (timestamp, level, text).
//
// The owner drives it: Pump() waits for output, exits and due restarts, and returns
// what exited. The destructor SIGKILLs and reaps whatever is still running.
//
// Thread-safety: not thread-safe; one thread drives a Supervisor.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_SUPERVISOR_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_SUPERVISOR_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/process/child_process.h"

namespace pl {

// Receives one complete output line (prefix included, no trailing newline).
using LineSink = std::function<void(const std::string& line)>;

enum class RestartPolicy { kNever, kAlways };

struct ProcessSpec {
  std::string name;   // unique within a Supervisor; the output prefix
  ChildSpec child;    // its output is always piped to the Supervisor
  RestartPolicy restart = RestartPolicy::kNever;
  // Appended to the restart log line: "[launch] pserver-1 exited (signal 9); restarting <note>".
  std::string restart_note;
};

struct SupervisorOptions {
  // Delay before the first restart; doubles per quick failure in a row, up to the max.
  std::chrono::milliseconds restart_delay{200};
  std::chrono::milliseconds max_restart_delay{5000};
  // A run at least this long is healthy: it resets the delay and the failure count.
  std::chrono::milliseconds healthy_after{10000};
  // Quick failures in a row after which the process is given up (not restarted).
  int max_quick_failures = 8;
  // Output lines longer than this are cut and passed on in pieces.
  size_t max_line_bytes = 64 << 10;
};

// One exit seen by Pump() or Stop().
struct ProcessEvent {
  std::string name;
  ExitInfo exit;
  bool will_restart = false;  // a restart is scheduled
  bool gave_up = false;       // kAlways, but it failed too often in a row: not restarted
};

class Supervisor {
 public:
  Supervisor(SupervisorOptions options, LineSink sink);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts a new process. ALREADY_EXISTS when the name is taken; the ChildProcess::Start
  // error (naming the program) when it cannot be executed.
  Status Start(const ProcessSpec& spec);

  // Waits up to `timeout` for output from any child, or for one of `watch_fds` to
  // become readable (those are appended to `*ready_fds` when non-null); then reaps
  // exited children and starts due restarts. Returns the exits it saw.
  std::vector<ProcessEvent> Pump(std::chrono::milliseconds timeout,
                                 const std::vector<int>& watch_fds = {},
                                 std::vector<int>* ready_fds = nullptr);

  // Sends `sig` to a running process (its group). NOT_FOUND for an unknown name,
  // FAILED_PRECONDITION when it is not running.
  Status Signal(const std::string& name, int sig);

  // Replaces the command line used for the next restart of `name` (e.g. to pin the port
  // it chose at first start). NOT_FOUND for an unknown name.
  Status SetCommand(const std::string& name, std::vector<std::string> argv);

  // Changes whether `name` is restarted when it next exits. NOT_FOUND for an unknown name.
  Status SetRestartPolicy(const std::string& name, RestartPolicy policy);

  // Stops the named processes: restarts off, SIGTERM, SIGKILL after `grace`; keeps
  // streaming their output meanwhile. Returns their exits.
  std::vector<ProcessEvent> Stop(const std::vector<std::string>& names,
                                 std::chrono::milliseconds grace);
  std::vector<ProcessEvent> StopAll(std::chrono::milliseconds grace);

  bool IsRunning(const std::string& name) const;
  // Running or waiting for a restart.
  bool IsAlive(const std::string& name) const;
  // pid of the running process, -1 when not running.
  pid_t Pid(const std::string& name) const;
  int Restarts(const std::string& name) const;
  // Names of running processes whose name starts with `prefix`, in name order.
  std::vector<std::string> Running(const std::string& prefix = "") const;

  // Writes "[launch] <timestamp> INFO launch: <message>" to the sink.
  void Log(const std::string& message);

 private:
  enum class State { kRunning, kRestartPending, kExited, kGaveUp };
  struct Entry {
    ProcessSpec spec;
    std::unique_ptr<ChildProcess> child;
    State state = State::kExited;
    std::string partial;  // output read but not yet ended by a newline
    std::chrono::steady_clock::time_point started_at;
    std::chrono::steady_clock::time_point restart_at;
    std::chrono::milliseconds next_delay{0};
    int quick_failures = 0;
    int restarts = 0;
    bool stopping = false;  // Stop() was called: no restart
  };

  Status Launch(Entry* entry);
  // Reads what is available; on EOF flushes the partial line and closes the pipe.
  void ReadOutput(Entry* entry);
  void EmitLines(Entry* entry, bool flush_partial);
  // Handles a child that has exited: drains its output, decides on a restart.
  ProcessEvent OnExit(Entry* entry);
  void StartDueRestarts();

  SupervisorOptions options_;
  LineSink sink_;
  std::map<std::string, Entry> entries_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_SUPERVISOR_H_
