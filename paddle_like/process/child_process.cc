#include "paddle_like/process/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace pl {

std::string ExitInfo::Describe() const {
  if (!exited) return "running";
  if (signal != 0) return absl::StrCat("signal ", signal);
  return absl::StrCat("status ", code);
}

namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Resolves a program name without '/' against PATH in the parent, so the child only
// needs execve (async-signal-safe) after fork.
StatusOr<std::string> ResolveProgram(const ChildSpec& spec) {
  const std::string& prog = spec.argv[0];
  if (prog.find('/') != std::string::npos) return prog;
  std::string path_var;
  if (const char* p = std::getenv("PATH")) path_var = p;
  for (const auto& [k, v] : spec.env) {
    if (k == "PATH") path_var = v;
  }
  for (absl::string_view dir : absl::StrSplit(path_var, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", prog);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("cannot start '", prog, "': not found in PATH"));
}

std::vector<std::string> MergedEnvironment(const ChildSpec& spec) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    absl::string_view entry(*e);
    absl::string_view key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& kv : spec.env) overridden |= (kv.first == key);
    if (!overridden) out.emplace_back(entry);
  }
  for (const auto& [k, v] : spec.env) out.push_back(absl::StrCat(k, "=", v));
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

}  // namespace

StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(const ChildSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("ChildProcess::Start: empty command line");
  }
  PL_ASSIGN_OR_RETURN(std::string program, ResolveProgram(spec));
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = MergedEnvironment(spec);
  std::vector<char*> argv = CStrings(argv_strings);
  std::vector<char*> envp = CStrings(env_strings);

  int out_fd = -1;      // what the child gets as stdout/stderr
  int read_fd = -1;     // our end of the pipe
  if (spec.output == ChildSpec::Output::kPipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe2");
    read_fd = fds[0];
    out_fd = fds[1];
    ::fcntl(read_fd, F_SETFL, ::fcntl(read_fd, F_GETFL) | O_NONBLOCK);
  } else if (spec.output == ChildSpec::Output::kFile) {
    out_fd = ::open(spec.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out_fd < 0) return ErrnoStatus(errno, "cannot open output file " + spec.output_file);
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    if (read_fd >= 0) ::close(read_fd);
    if (out_fd >= 0) ::close(out_fd);
    if (null_fd >= 0) ::close(null_fd);
    return ErrnoStatus(err, "pipe2");
  }
  const pid_t parent = ::getpid();
  const char* workdir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();

  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to execve.
    if (spec.own_process_group) ::setpgid(0, 0);
    if (spec.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    }
    // Ignored dispositions and the signal mask survive exec; give the program defaults.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (out_fd >= 0) {
      ::dup2(out_fd, 1);
      ::dup2(out_fd, 2);
    }
    int err = 0;
    if (workdir != nullptr && ::chdir(workdir) != 0) {
      err = errno;
    } else {
      ::execve(program.c_str(), argv.data(), envp.data());
      err = errno;
    }
    ssize_t ignored = ::write(err_pipe[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(127);
  }
  int fork_errno = errno;
  ::close(err_pipe[1]);
  if (out_fd >= 0) ::close(out_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (pid < 0) {
    ::close(err_pipe[0]);
    if (read_fd >= 0) ::close(read_fd);
    return ErrnoStatus(fork_errno, "fork");
  }
  // Also from the parent, so a signal to the group right after Start cannot miss it.
  if (spec.own_process_group) ::setpgid(pid, pid);

  // The error pipe closes on a successful exec (CLOEXEC) or carries exec's errno.
  int child_err = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child_err, sizeof(child_err));
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == sizeof(child_err)) {
    int st;
    ::waitpid(pid, &st, 0);
    if (read_fd >= 0) ::close(read_fd);
    return ErrnoStatus(child_err, workdir != nullptr
                                      ? absl::StrCat("cannot start '", program, "' in ", spec.working_dir)
                                      : absl::StrCat("cannot start '", program, "'"));
  }

  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->spec_ = spec;
  child->pid_ = pid;
  child->output_fd_ = read_fd;
#ifdef SYS_pidfd_open
  // Close-on-exec by the kernel's rule for pidfds; -1 (ENOSYS) leaves callers on timers.
  child->exit_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#endif
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_.exited) {
    Signal(SIGKILL).IgnoreError();
    WaitFor(std::chrono::seconds(5));
  }
  CloseOutput();
  if (exit_fd_ >= 0) ::close(exit_fd_);
}

void ChildProcess::CloseOutput() {
  if (output_fd_ >= 0) ::close(output_fd_);
  output_fd_ = -1;
}

Status ChildProcess::Signal(int sig) {
  if (pid_ <= 0 || exit_.exited) return absl::OkStatus();
  if (spec_.own_process_group && ::kill(-pid_, sig) == 0) return absl::OkStatus();
  if (::kill(pid_, sig) != 0 && errno != ESRCH) {
    return ErrnoStatus(errno, absl::StrCat("kill(", pid_, ", ", sig, ")"));
  }
  return absl::OkStatus();
}

bool ChildProcess::Poll() {
  if (exit_.exited) return true;
  if (pid_ <= 0) return false;
  siginfo_t info;
  info.si_pid = 0;
  // WNOWAIT: look without reaping, so the pid (and its group id) cannot be reused while
  // we sweep what is left of its group.
  if (::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno == ECHILD) {  // reaped by someone else: its status is lost
      exit_.exited = true;
      exit_.code = -1;
      if (exit_fd_ >= 0) ::close(exit_fd_);
      exit_fd_ = -1;
      return true;
    }
    return false;
  }
  if (info.si_pid == 0) return false;
  // A `sh -c` wrapper's background children die with it, as in a container.
  if (spec_.own_process_group) ::kill(-pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  exit_.exited = true;
  if (exit_fd_ >= 0) ::close(exit_fd_);
  exit_fd_ = -1;
  if (WIFSIGNALED(st)) {
    exit_.signal = WTERMSIG(st);
  } else {
    exit_.code = WEXITSTATUS(st);
  }
  return true;
}

bool ChildProcess::WaitFor(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Poll()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

ExitInfo ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (Poll()) return exit_;
  Signal(SIGTERM).IgnoreError();
  if (!WaitFor(grace)) {
    Signal(SIGKILL).IgnoreError();
    WaitFor(std::chrono::seconds(10));
  }
  return exit_;
}

}  // namespace pl
