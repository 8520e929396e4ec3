#include "paddle_like/process/process_control.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace pl::process {

using Clock = std::chrono::steady_clock;

StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                              const std::string& output_file, const EnvVars& env) {
  ChildSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.output = ChildSpec::Output::kFile;
  spec.output_file = output_file;
  return ChildProcess::Start(spec);
}

StatusOr<std::unique_ptr<ChildProcess>> SpawnShell(const std::string& script,
                                                   const std::string& output_file, const EnvVars& env) {
  return Spawn({"/bin/sh", "-c", script}, output_file, env);
}

Status KillPid(pid_t pid, int sig) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("KillPid: bad pid ", pid));
  if (::kill(pid, sig) == 0) return absl::OkStatus();
  if (errno == ESRCH) return absl::NotFoundError(absl::StrCat("no process with pid ", pid));
  return absl::InternalError(absl::StrCat("kill(", pid, ", ", sig, "): ", strerror(errno)));
}

bool PidAlive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  // A zombie still answers kill(0); its state in /proc is 'Z'.
  std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  if (paren != std::string::npos && paren + 2 < stat.size()) return stat[paren + 2] != 'Z';
  return true;
}

StatusOr<ExitInfo> WaitForExit(ChildProcess& child, std::chrono::milliseconds timeout) {
  if (child.WaitFor(timeout)) return child.exit_info();
  return absl::DeadlineExceededError(absl::StrCat(
      "pid ", child.pid(), " (", absl::StrJoin(child.spec().argv, " "), ") still running after ",
      timeout.count(), " ms"));
}

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

StatusOr<int> PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot bind 127.0.0.1:0: ", strerror(err)));
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

StatusOr<int> WaitForPortFile(const std::string& path, std::chrono::milliseconds timeout,
                              ChildProcess* child) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int port = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOrEmpty(path)), &port) && port > 0 &&
        port < 65536) {
      return port;
    }
    if (child != nullptr && child->Poll()) {
      return absl::UnavailableError(absl::StrCat(absl::StrJoin(child->spec().argv, " "), " exited (",
                                                 child->exit_info().Describe(), ") before writing ", path));
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no port in ", path, " after ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<std::string> ExecutableIn(const std::string& dir, const std::string& name) {
  std::string path = absl::StrCat(dir, "/", name);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(path, " is not an executable file"));
  }
  return path;
}

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(base && *base ? base : "/tmp", "/", prefix, "-XXXXXX");
  if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace pl::process
