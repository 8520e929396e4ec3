#include "paddle_like/testing/test_bed.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pl::netbed {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr char kPrefix[] = "plnb";  // of every name a bed gives
constexpr char kLockFile[] = "/tmp/pl-netbed.lock";
constexpr milliseconds kCommandTimeout{10000};
constexpr milliseconds kKillTimeout{5000};

std::atomic<int> next_bed{0};

// The tools a bed runs, as absolute paths (ctest's PATH may lack the sbin folders).
StatusOr<std::string> Tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  // Beside the running binary: a bundle (benchmarks/portable_bundle.sh) carries ip and
  // tc in its bin/ for machines that have none.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    const std::string path = absl::StrCat(dir, "/", name);
    if (!dir.empty() && access(path.c_str(), X_OK) == 0) return path;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no ", name, " in /usr/sbin, /usr/bin, /sbin, /bin or beside this binary"));
}

// Runs argv[0] (a tool name) with the rest of argv to completion; its combined output.
// INTERNAL naming the command and what it printed when it fails.
StatusOr<std::string> Run(std::vector<std::string> argv) {
  PL_ASSIGN_OR_RETURN(argv[0], Tool(argv[0]));
  ChildSpec spec;
  spec.argv = argv;
  spec.output = ChildSpec::Output::kPipe;
  PL_ASSIGN_OR_RETURN(auto child, ChildProcess::Start(spec));
  std::string out;
  const auto deadline = Clock::now() + kCommandTimeout;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p = {child->output_fd(), POLLIN, 0};
    poll(&p, 1, 100);
    const ssize_t n = read(child->output_fd(), buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, n);
    } else if (n == 0) {
      break;  // EOF: the command closed its output
    }
  }
  const std::string command = absl::StrJoin(argv, " ");
  if (!child->WaitFor(milliseconds(2000))) {
    return absl::DeadlineExceededError(absl::StrCat(command, ": still running after ", kCommandTimeout.count(), " ms"));
  }
  if (!child->exit_info().success()) {
    return absl::InternalError(absl::StrCat(command, ": ", child->exit_info().Describe(), ": ", out));
  }
  return out;
}

Status Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv).status();
}

// Writes `value` to /proc/sys/<key> as seen from namespace `netns_path`.
Status WriteSysctl(const std::string& netns_path, const std::string& key, const std::string& value) {
  return InNetns(netns_path,
                 [&]() -> StatusOr<int> {
                   std::ofstream f("/proc/sys/" + key);
                   f << value;
                   f.close();
                   if (!f) return absl::InternalError(absl::StrCat("cannot write /proc/sys/", key));
                   return 0;
                 })
      .status();
}

// The pid in a bed name ("plnb-<pid>-..." or "plnb<pid>-..."), 0 when there is none.
pid_t OwnerPid(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return 0;
  size_t at = sizeof(kPrefix) - 1;
  if (at < name.size() && name[at] == '-') ++at;
  size_t end = at;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  pid_t pid = 0;
  if (end == at || !absl::SimpleAtoi(name.substr(at, end - at), &pid)) return 0;
  return pid;
}

// The inode of namespace file `path` (what /proc/<pid>/ns/net links to), 0 if none.
ino_t NamespaceInode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Live processes whose network namespace has inode `ino` (zombies have none).
std::vector<pid_t> PidsInNamespace(ino_t ino) {
  std::vector<pid_t> pids;
  if (ino == 0) return pids;
  const std::string want = absl::StrCat("net:[", ino, "]");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    char link[64];
    const ssize_t n = readlink(absl::StrCat("/proc/", pid, "/ns/net").c_str(), link, sizeof(link) - 1);
    if (n > 0 && std::string(link, n) == want) pids.push_back(pid);
  }
  return pids;
}

// flock on kLockFile while alive.
class CreateLock {
 public:
  CreateLock() {
    fd_ = open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ >= 0) (void)flock(fd_, LOCK_EX);
  }
  ~CreateLock() {
    if (fd_ >= 0) close(fd_);
  }

 private:
  int fd_ = -1;
};

// Removes the namespaces and root interfaces of beds whose process is gone.
void RemoveStaleBeds() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/var/run/netns", ec)) {
    const std::string ns = entry.path().filename().string();
    const pid_t owner = OwnerPid(ns);
    if (owner == 0 || process::PidAlive(owner)) continue;  // a zombie is dead
    for (pid_t pid : PidsInNamespace(NamespaceInode(entry.path().string()))) kill(pid, SIGKILL);
    Status s = Ip({"netns", "del", ns});
    std::cerr << "netbed: removed stale namespace " << ns << " of dead process " << owner
              << (s.ok() ? "" : absl::StrCat(" (", s.message(), ")")) << std::endl;
  }
  for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
    const std::string name = entry.path().filename().string();
    const pid_t owner = OwnerPid(name);
    if (owner == 0 || process::PidAlive(owner)) continue;  // a zombie is dead
    (void)Ip({"link", "del", name});
    std::cerr << "netbed: removed stale interface " << name << " of dead process " << owner << std::endl;
  }
  // The holders' folders (process::TempDir under $TMPDIR or /tmp).
  const char* tmp = std::getenv("TMPDIR");
  for (const auto& entry : fs::directory_iterator(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", ec)) {
    const pid_t owner = OwnerPid(entry.path().filename().string());
    if (owner != 0 && !process::PidAlive(owner)) fs::remove_all(entry.path(), ec);
  }
}

// A /24 in 10.213.0.0/16 that no address or route of the root namespace touches.
StatusOr<int> PickSubnet(int seed) {
  std::string taken;
  for (auto args : {std::vector<std::string>{"ip", "-4", "-o", "addr", "show"},
                    std::vector<std::string>{"ip", "-4", "-o", "route", "show", "table", "all"}}) {
    PL_ASSIGN_OR_RETURN(std::string out, Run(args));
    taken += out;
  }
  for (int i = 0; i < 254; ++i) {
    const int x = 1 + (seed + i) % 254;
    if (taken.find(absl::StrCat("10.213.", x, ".")) == std::string::npos) return x;
  }
  return absl::ResourceExhaustedError("every 10.213.X.0/24 is in use in the root namespace");
}

}  // namespace

Status TestBed::CheckSupported() {
  if (geteuid() != 0) return absl::FailedPreconditionError("the multi-host test bed needs root (CI runs as root)");
  for (const char* tool : {"ip", "tc", "nsenter", "unshare", "mount", "sh", "sleep"}) {
    PL_RETURN_IF_ERROR(Tool(tool).status());
  }
  // Can this process make namespaces at all (a container may forbid it)?
  const pid_t child = fork();
  if (child < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (child == 0) _exit(unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS) == 0 ? 0 : (errno & 0x7f));
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
    return absl::InternalError("the unshare probe did not exit normally");
  }
  if (WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create namespaces here: unshare: ", strerror(WEXITSTATUS(status))));
  }
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<TestBed>> TestBed::Create(int n_hosts) {
  if (n_hosts < 1 || n_hosts > 200) {
    return absl::InvalidArgumentError(absl::StrCat("TestBed: ", n_hosts, " hosts, want 1 to 200"));
  }
  PL_RETURN_IF_ERROR(CheckSupported());
  std::unique_ptr<TestBed> bed(new TestBed());
  const int k = next_bed++;
  bed->name_ = absl::StrCat(kPrefix, "-", getpid(), "-", k);
  bed->root_if_ = absl::StrCat(kPrefix, getpid(), "-", k % 100);
  CreateLock lock;
  RemoveStaleBeds();
  PL_ASSIGN_OR_RETURN(const int subnet, PickSubnet(static_cast<int>(getpid()) * 7 + k));
  Status built = bed->Build(n_hosts, subnet);
  // On failure the destructor removes whatever was made.
  if (!built.ok()) return Annotate(built, "TestBed::Create");
  return bed;
}

Status TestBed::Build(int n_hosts, int subnet) {
  prefix_ = absl::StrCat("10.213.", subnet, ".");
  dir_ = std::make_unique<process::TempDir>(name_);
  if (dir_->path().empty()) return absl::InternalError("cannot make a temporary directory");
  const std::string sw = SwitchNs();
  PL_RETURN_IF_ERROR(Ip({"netns", "add", sw}));
  made_netns_.push_back(sw);
  // IPv4 only: no IPv6 neighbour discovery chatter on the links.
  for (const char* conf : {"all", "default"}) {
    PL_RETURN_IF_ERROR(WriteSysctl(NetnsPath(sw), absl::StrCat("net/ipv6/conf/", conf, "/disable_ipv6"), "1"));
  }
  PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "add", "br0", "type", "bridge"}));
  PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", "br0", "up"}));

  for (int i = 0; i < n_hosts; ++i) {
    HostState h(Host(absl::StrCat(prefix_, i + 1), absl::StrCat(name_, "-h", i), absl::StrCat("host", i)));
    PL_RETURN_IF_ERROR(Ip({"netns", "add", h.info.netns()}));
    made_netns_.push_back(h.info.netns());
    for (const char* conf : {"all", "default"}) {
      PL_RETURN_IF_ERROR(
          WriteSysctl(NetnsPath(h.info.netns()), absl::StrCat("net/ipv6/conf/", conf, "/disable_ipv6"), "1"));
    }
    PL_RETURN_IF_ERROR(
        Ip({"-n", sw, "link", "add", Port(i), "type", "veth", "peer", "name", "eth0", "netns", h.info.netns()}));
    PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", Port(i), "master", "br0", "up"}));
    PL_RETURN_IF_ERROR(Ip({"-n", h.info.netns(), "addr", "add", h.info.address() + "/24", "dev", "eth0"}));
    PL_RETURN_IF_ERROR(Ip({"-n", h.info.netns(), "link", "set", "eth0", "up"}));
    PL_RETURN_IF_ERROR(Ip({"-n", h.info.netns(), "link", "set", "lo", "up"}));
    hosts_.push_back(std::move(h));
  }

  // The test process's own way in: the only interface in the root namespace.
  PL_RETURN_IF_ERROR(Ip({"link", "add", root_if_, "type", "veth", "peer", "name", "uplink", "netns", sw}));
  PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", "uplink", "master", "br0", "up"}));
  (void)WriteSysctl("/proc/self/ns/net", absl::StrCat("net/ipv6/conf/", root_if_, "/disable_ipv6"), "1");
  PL_RETURN_IF_ERROR(Ip({"addr", "add", prefix_ + "254/24", "dev", root_if_}));
  PL_RETURN_IF_ERROR(Ip({"link", "set", root_if_, "up"}));
  return absl::OkStatus();
}

TestBed::~TestBed() { Destroy(); }

void TestBed::Destroy() {
  auto warn = [&](const Status& s) {
    if (!s.ok()) std::cerr << "netbed " << name_ << ": cleanup: " << s << std::endl;
  };
  for (HostState& h : hosts_) h.relay.reset();
  for (HostState& h : hosts_) {
    warn(KillAllIn(h.info.netns(), kKillTimeout));
    h.holder.reset();  // reaps it
  }
  if (!root_if_.empty() && fs::exists("/sys/class/net/" + root_if_)) warn(Ip({"link", "del", root_if_}));
  for (auto it = made_netns_.rbegin(); it != made_netns_.rend(); ++it) {
    warn(KillAllIn(*it, kKillTimeout));
    warn(Ip({"netns", "del", *it}));
  }
  made_netns_.clear();
  hosts_.clear();
}

std::vector<std::string> TestBed::namespaces() const { return made_netns_; }

Status TestBed::KillAllIn(const std::string& ns, milliseconds timeout) {
  const ino_t ino = NamespaceInode("/var/run/netns/" + ns);
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const std::vector<pid_t> pids = PidsInNamespace(ino);
    if (pids.empty()) return absl::OkStatus();
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(pids.size(), " process(es) still in ", ns, " after SIGKILL, pid ", pids[0]));
    }
    for (pid_t pid : pids) kill(pid, SIGKILL);
    std::this_thread::sleep_for(milliseconds(5));
  }
}

std::vector<pid_t> TestBed::Pids(int host) const {
  return PidsInNamespace(NamespaceInode(NetnsPath(hosts_.at(host).info.netns())));
}

Status TestBed::EnsureHolder(HostState& h) {
  if (h.holder && h.holder->running()) return absl::OkStatus();
  static std::atomic<int> generation{0};
  const std::string ready = absl::StrCat(dir_->path(), "/", h.info.hostname(), "-", generation++, ".ready");
  const std::string log = absl::StrCat(dir_->path(), "/", h.info.hostname(), "-holder.log");
  PL_ASSIGN_OR_RETURN(const std::string ip, Tool("ip"));
  // `ip netns exec` joins the network namespace; unshare gives the host its own mount
  // and UTS namespaces; the shell names the host, mounts its /dev/shm and becomes
  // `sleep infinity`, which keeps the namespaces for the processes Start() adds.
  PL_ASSIGN_OR_RETURN(
      h.holder, process::Spawn({ip, "netns", "exec", h.info.netns(), "unshare", "--mount", "--uts", "--propagation",
                                "private", "sh", "-c",
                                "hostname \"$1\" && mount -t tmpfs -o mode=1777 netbed-shm /dev/shm && : > \"$2\" && "
                                "exec sleep infinity",
                                "sh", h.info.hostname(), ready},
                               log));
  const bool up = process::WaitUntil([&] { return fs::exists(ready) || !h.holder->running(); }, kCommandTimeout);
  if (!up || !h.holder->running()) {
    return absl::InternalError(absl::StrCat("the namespace holder of ", h.info.hostname(), " did not start (",
                                            h.holder->exit_info().Describe(), "): ", process::ReadFileOrEmpty(log)));
  }
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<ChildProcess>> TestBed::Start(int host, const std::vector<std::string>& argv,
                                                       const std::string& log_path, const process::EnvVars& env) {
  if (host < 0 || host >= num_hosts()) return absl::InvalidArgumentError(absl::StrCat("no host ", host));
  if (argv.empty()) return absl::InvalidArgumentError("Start: empty argv");
  HostState& h = hosts_[host];
  if (h.lost) return absl::FailedPreconditionError(absl::StrCat(h.info.hostname(), " is lost; Heal it first"));
  if (argv[0].find('/') != std::string::npos && access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(argv[0], " is not an executable file"));
  }
  PL_RETURN_IF_ERROR(EnsureHolder(h));
  PL_ASSIGN_OR_RETURN(const std::string nsenter, Tool("nsenter"));
  std::vector<std::string> full = {nsenter, "--target", std::to_string(h.holder->pid()), "--net", "--mount",
                                   "--uts", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return process::Spawn(full, log_path, env);
}

Status TestBed::CutOff(int host) {
  HostState& h = hosts_.at(host);
  PL_RETURN_IF_ERROR(Ip({"-n", SwitchNs(), "link", "set", Port(host), "down"}));
  h.cut = true;
  return absl::OkStatus();
}

Status TestBed::Heal(int host) {
  HostState& h = hosts_.at(host);
  PL_RETURN_IF_ERROR(Ip({"-n", SwitchNs(), "link", "set", Port(host), "up"}));
  h.cut = false;
  h.lost = false;
  return absl::OkStatus();
}

Status TestBed::Lose(int host) {
  HostState& h = hosts_.at(host);
  PL_RETURN_IF_ERROR(CutOff(host));
  h.lost = true;
  Status killed = KillAllIn(h.info.netns(), kKillTimeout);
  h.holder.reset();  // its tmpfs (the host's /dev/shm) goes with it
  return killed;
}

Status TestBed::Unshape(int host) {
  HostState& h = hosts_.at(host);
  const std::string sw = SwitchNs();
  h.relay.reset();
  if (h.relay_ports) {
    PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "del", absl::StrCat("r", host)}));  // and its peer s<i>
    PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", Port(host), "master", "br0"}));
    h.relay_ports = false;
  }
  if (h.shape.rate_mbit > 0) {
    // Best effort: a half-made shape may lack one of them.
    (void)Run({"tc", "-n", sw, "qdisc", "del", "dev", Port(host), "root"});
    (void)Run({"tc", "-n", h.info.netns(), "qdisc", "del", "dev", "eth0", "root"});
  }
  h.shape = LinkShape();
  return absl::OkStatus();
}

Status TestBed::Shape(int host, const LinkShape& shape) {
  if (shape.latency_ms < 0 || shape.rate_mbit < 0 || shape.loss_pct < 0 || shape.loss_pct > 100) {
    return absl::InvalidArgumentError(absl::StrCat("bad link shape: latency ", shape.latency_ms, " ms, loss ",
                                                   shape.loss_pct, "%, rate ", shape.rate_mbit, " mbit"));
  }
  PL_RETURN_IF_ERROR(Unshape(host));
  HostState& h = hosts_.at(host);
  const std::string sw = SwitchNs();
  h.shape.rate_mbit = shape.rate_mbit;  // set first, so that Unshape undoes a half-made shape
  if (shape.rate_mbit > 0) {
    // The bucket holds at least two 64 KiB (GSO) frames, or 4 ms at the rate.
    const int64_t burst = std::max<int64_t>(int64_t{shape.rate_mbit} * 1000000 / 8 / 250, 2 * 65536 + 4096);
    for (const auto& [ns, dev] : {std::pair<std::string, std::string>{sw, Port(host)}, {h.info.netns(), "eth0"}}) {
      PL_RETURN_IF_ERROR(
          Run({"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
               absl::StrCat(shape.rate_mbit, "mbit"), "burst", std::to_string(burst), "latency", "100ms"})
              .status());
    }
  }
  if (shape.latency_ms > 0 || shape.loss_pct > 0) {
    // h<i> leaves the bridge; the relay carries its frames to r<i>, whose peer s<i>
    // takes its place on the bridge.
    const std::string r = absl::StrCat("r", host), s = absl::StrCat("s", host);
    PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "add", r, "type", "veth", "peer", "name", s}));
    h.relay_ports = true;
    PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", s, "master", "br0", "up"}));
    PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", r, "up"}));
    PL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", Port(host), "nomaster"}));
    ImpairedLink::Options o;
    o.netns_path = NetnsPath(sw);
    o.if_a = Port(host);
    o.if_b = r;
    o.latency = std::chrono::milliseconds(shape.latency_ms);
    o.loss_pct = shape.loss_pct;
    o.seed = 1000 + host;
    PL_ASSIGN_OR_RETURN(h.relay, ImpairedLink::Start(o));
  }
  h.shape = shape;
  return absl::OkStatus();
}

StatusOr<int> TestBed::Socket(int host, int type) const {
  return InNetns(NetnsPath(hosts_.at(host).info.netns()), [&]() -> StatusOr<int> {
    const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
    return fd;
  });
}

ImpairedLink::Counters TestBed::RelayCounters(int host) const {
  const HostState& h = hosts_.at(host);
  return h.relay ? h.relay->counters() : ImpairedLink::Counters();
}

}  // namespace pl::netbed
