#include "trainer/launcher/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "paddle_like/etcd/etcd_member.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"
#include "trainer/launcher/node_role.h"

namespace pl {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool InPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    if (IsExecutableFile(absl::StrCat(dir, "/", program))) return true;
  }
  return false;
}

}  // namespace

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Launcher::Launcher(LaunchOptions options, LineSink sink)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      telemetry_(&options_, &layout_, [this](const std::string& line) { supervisor_->Log(line); }) {
  supervisor_ = std::make_unique<Supervisor>(SupervisorOptions{}, sink_);
  if (::pipe2(signal_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) signal_pipe_[0] = signal_pipe_[1] = -1;
}

Launcher::~Launcher() {
  supervisor_.reset();  // kills whatever is still running
  for (int fd : {signal_pipe_[0], signal_pipe_[1], control_fd_, control_write_fd_}) {
    if (fd >= 0) ::close(fd);
  }
  if (created_fifo_) ::unlink(options_.control_fifo.c_str());
  if (tls_.configured()) rpc::UseInsecureTransport();  // this process's channels were the job's
}

void Launcher::RequestStop(int signo) {
  int expected = 0;
  stop_signal_.compare_exchange_strong(expected, signo);
  if (signal_pipe_[1] >= 0) {
    char b = 1;
    ssize_t ignored = ::write(signal_pipe_[1], &b, 1);
    (void)ignored;
  }
}

Status Launcher::Validate() {
  if (multi_node()) {
    if (options_.node_rank < 0 || options_.node_rank >= options_.num_nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("node rank ", options_.node_rank, " is not in [0, ", options_.num_nodes, ")"));
    }
    PL_ASSIGN_OR_RETURN(std::vector<HostPort> masters, ParseMasterAddrs(options_.master_addr, options_.num_nodes));
    // A master node listens at its own entry; the others find their interface towards
    // the first master.
    master_hp_ = masters[runs_master() ? options_.node_rank : 0];
    if (layout_.standby_masters()) {
      for (const HostPort& m : masters) etcd_hosts_.push_back(m.host);
      if (runs_master() && !InPath("etcd")) {
        return absl::NotFoundError("a node of several masters (--master_addr A,B,C) runs an etcd member: etcd is not "
                                   "in PATH (Debian's etcd-server)");
      }
    }
  }
  for (const char* name : {"pl-master", "pl-pserver"}) {
    std::string path = absl::StrCat(options_.bin_dir, "/", name);
    if (!IsExecutableFile(path)) {
      return absl::NotFoundError(absl::StrCat("missing binary ", path, " (build the ", name, " target)"));
    }
  }
  if (options_.trainer_command.empty() || options_.trainer_command[0].empty()) {
    return absl::InvalidArgumentError("no trainer command: put it after '--'");
  }
  trainer_argv_ = options_.trainer_command;
  const std::string& prog = trainer_argv_[0];
  if (prog.find('/') != std::string::npos) {
    if (!IsExecutableFile(prog)) {
      return absl::NotFoundError(absl::StrCat("trainer command '", prog, "' is not an executable file"));
    }
  } else if (std::string local = absl::StrCat(options_.bin_dir, "/", prog); IsExecutableFile(local)) {
    trainer_argv_[0] = local;  // our own binaries win over PATH
  } else if (!InPath(prog)) {
    return absl::NotFoundError(absl::StrCat("trainer command '", prog, "' is found neither in ",
                                            options_.bin_dir, " nor in PATH"));
  }
  return absl::OkStatus();
}

Status Launcher::PrepareWorkdir() {
  if (options_.workdir.empty()) {
    char tmpl[] = "/tmp/pl-launch-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a work directory under /tmp: ", strerror(errno)));
    }
    layout_.set_workdir(tmpl);
    created_workdir_ = true;
  } else {
    layout_.set_workdir(fs::absolute(options_.workdir).lexically_normal().string());
  }
  std::error_code ec;
  std::vector<std::string> dirs = {layout_.workdir() + "/ports"};
  if (runs_master()) dirs.push_back(layout_.workdir() + "/master");
  for (const ShardCopy& copy : layout_.LocalCopies()) dirs.push_back(layout_.CheckpointDir(layout_.PserverName(copy)));
  for (const std::string& d : dirs) {
    fs::create_directories(d, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", d, ": ", ec.message()));
  }
  return absl::OkStatus();
}

Status Launcher::OpenControlFifo() {
  if (options_.control_fifo.empty()) return absl::OkStatus();
  const std::string& path = options_.control_fifo;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISFIFO(st.st_mode)) {
      return absl::AlreadyExistsError(absl::StrCat("--control ", path, " exists and is not a FIFO"));
    }
  } else if (::mkfifo(path.c_str(), 0600) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create FIFO ", path, ": ", strerror(errno)));
  } else {
    created_fifo_ = true;
  }
  control_fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  // Holding a write end ourselves means a writer that closes does not make the FIFO
  // report EOF (and poll report POLLHUP) forever after.
  control_write_fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (control_fd_ < 0 || control_write_fd_ < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot open FIFO ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

std::vector<std::string> Launcher::MasterCommand(int port) const {
  // Several machines: the port of --master_addr, on every interface.
  if (multi_node() && port == 0) port = master_hp_.port;
  std::vector<std::string> argv = {absl::StrCat(options_.bin_dir, "/pl-master"),
                                   "--host", multi_node() ? "0.0.0.0" : "127.0.0.1",
                                   "--port", std::to_string(port),
                                   "--port_file", layout_.PortFile("master"),
                                   "--state_dir", layout_.workdir() + "/master"};
  if (!options_.data.empty()) {
    argv.insert(argv.end(), {"--data", options_.data});
  }
  argv.insert(argv.end(), {"--passes", std::to_string(options_.passes),
                           "--chunks_per_task", std::to_string(options_.chunks_per_task),
                           "--lease_ms", std::to_string(options_.lease_ms),
                           "--num_pservers", std::to_string(layout_.total_pservers()),
                           "--seed", std::to_string(options_.seed)});
  if (multi_node()) argv.insert(argv.end(), {"--num_nodes", std::to_string(options_.num_nodes)});
  if (layout_.standby_masters()) {
    // The job's state in the nodes' etcd; this master leads or stands by.
    std::vector<std::string> endpoints;
    for (const std::string& host : etcd_hosts_) endpoints.push_back(absl::StrCat(host, ":", options_.etcd_port));
    // Node 0's master leads at the start, as it does without standbys: the others give
    // it a head start of a second per rank.
    argv.insert(argv.end(), {"--etcd_endpoints", absl::StrJoin(endpoints, ","), "--etcd_prefix", "/paddle_like/launch",
                             "--campaign_delay_ms", std::to_string(1000 * options_.node_rank)});
    // etcd admits the masters' certificate only (etcd_member.h).
    if (const std::string dir = tls_.Dir("master"); !dir.empty()) argv.insert(argv.end(), {"--etcd_tls_dir", dir});
  }
  argv.insert(argv.end(), {"--replicas", std::to_string(options_.replicas)});
  if (!options_.overlap_passes) argv.push_back("--overlap_passes=false");
  if (options_.virtual_trainers > 0) argv.insert(argv.end(), {"--virtual_trainers", std::to_string(options_.virtual_trainers)});
  const std::vector<std::string> telemetry = telemetry_.Args("master");
  argv.insert(argv.end(), telemetry.begin(), telemetry.end());
  const std::vector<std::string> tls = tls_.Args("master");
  argv.insert(argv.end(), tls.begin(), tls.end());
  return argv;
}

std::vector<std::string> Launcher::EtcdCommand() const {
  etcd::EtcdMemberSpec spec;
  spec.name = absl::StrCat("node", options_.node_rank);
  spec.data_dir = layout_.workdir() + "/etcd";
  spec.host = master_hp_.host;
  spec.listen_host = "0.0.0.0";
  spec.client_port = options_.etcd_port;
  spec.peer_port = options_.etcd_port + 1;
  spec.tls_dir = tls_.Dir(etcd::kEtcdIdentity);  // mutual TLS unless --insecure
  std::vector<std::string> members;
  for (size_t i = 0; i < etcd_hosts_.size(); ++i) {
    members.push_back(absl::StrCat("node", i, spec.tls_dir.empty() ? "=http://" : "=https://", etcd_hosts_[i], ":",
                                   spec.peer_port));
  }
  spec.initial_cluster = absl::StrJoin(members, ",");
  return etcd::EtcdMemberArgv(spec);
}

Status Launcher::StartMasterWithStandbys() {
  // Both are restarted whenever they exit: a master that lost its lease exits and comes
  // back as a standby; neither writes a port file before it leads, so nothing waits.
  for (auto [name, argv] : {std::pair<std::string, std::vector<std::string>>{"etcd", EtcdCommand()},
                            {"master", MasterCommand(0)}}) {
    ProcessSpec spec;
    spec.name = name;
    spec.child.argv = argv;
    spec.restart = RestartPolicy::kAlways;
    spec.restart_note = name == "master" ? "(it stands by until it leads)" : "(its data in WORKDIR/etcd)";
    PL_RETURN_IF_ERROR(supervisor_->Start(spec));
    // An exit is a restart, not a failed launch: a master that lost its lease exits by
    // design (the supervisor still gives up on one that fails quickly, again and again).
    served_.insert(name);
    supervisor_->Log(absl::StrCat("started ", name, " (pid ", supervisor_->Pid(name), ")"));
  }
  return absl::OkStatus();
}

std::vector<std::string> Launcher::PserverCommand(int index, const std::string& name, int port) const {
  std::vector<std::string> argv = {absl::StrCat(options_.bin_dir, "/pl-pserver"),
                                   "--index", std::to_string(index),
                                   "--num_pservers", std::to_string(layout_.total_pservers()),
                                   "--master", master_addr_,
                                   "--host", multi_node() ? "0.0.0.0" : "127.0.0.1",
                                   "--port", std::to_string(port),
                                   "--port_file", layout_.PortFile(name),
                                   "--checkpoint_dir", layout_.CheckpointDir(name),
                                   "--checkpoint_every_s", std::to_string(options_.checkpoint_every_s),
                                   "--replicas", std::to_string(options_.replicas)};
  // Each replica checkpoints into a directory of its own, as on separate machines: the
  // copy that outlives the others restores its own newest state. Its id file lets this
  // launcher tell the master the moment the process dies (ReportReplicaExit).
  if (options_.replicas > 1) argv.insert(argv.end(), {"--replica_checkpoints", "--replica_id_file", layout_.ReplicaIdFile(name)});
  if (options_.sparse_memory_mb > 0) argv.insert(argv.end(), {"--sparse_memory_mb", std::to_string(options_.sparse_memory_mb)});
  if (options_.sparse_disk) argv.insert(argv.end(), {"--sparse_disk_dir", absl::StrCat(layout_.workdir(), "/sparse-disk/", name)});
  if (multi_node()) argv.insert(argv.end(), {"--advertise_host", node_addr_});
  // Each replica's own /metrics port and port file (its process name); its certificate
  // is the shard's.
  const std::vector<std::string> telemetry = telemetry_.Args(name);
  argv.insert(argv.end(), telemetry.begin(), telemetry.end());
  const std::vector<std::string> tls = tls_.Args(absl::StrCat("pserver-", index));
  argv.insert(argv.end(), tls.begin(), tls.end());
  return argv;
}

StatusOr<int> Launcher::StartServer(const std::string& name, const std::string& restart_note,
                                    const std::function<std::vector<std::string>(int)>& command) {
  const std::string port_file = layout_.PortFile(name);
  ::unlink(port_file.c_str());
  telemetry_.Watch(name);
  ProcessSpec spec;
  spec.name = name;
  spec.child.argv = command(0);
  // Not restarted until it has served once: an exit before that means bad flags or
  // state, and restarting would only loop.
  spec.restart = RestartPolicy::kNever;
  spec.restart_note = restart_note;
  PL_RETURN_IF_ERROR(supervisor_->Start(spec));
  supervisor_->Log(absl::StrCat("started ", name, " (pid ", supervisor_->Pid(name), ")"));
  const auto deadline = Clock::now() + options_.port_file_timeout;
  while (Clock::now() < deadline) {
    Step(milliseconds(50));
    if (outcome_ == Outcome::kCancelled) return absl::CancelledError(cause_);
    if (outcome_ == Outcome::kFailed) return absl::UnavailableError(cause_);
    if (int port = ReadPortFile(port_file); port > 0) {
      // Restarts bind the same port, so addresses handed out stay valid (and the same
      // metrics and status ports: those files are written before the port file).
      telemetry_.Announce(!multi_node() || node_addr_.empty() ? "127.0.0.1" : node_addr_);
      PL_RETURN_IF_ERROR(supervisor_->SetCommand(name, command(port)));
      server_ports_[name] = port;
      PL_RETURN_IF_ERROR(supervisor_->SetRestartPolicy(name, RestartPolicy::kAlways));
      served_.insert(name);
      const std::string host = !multi_node() ? "127.0.0.1" : name == "master" ? "0.0.0.0" : node_addr_;
      supervisor_->Log(absl::StrCat(name, " serving on ", host, ":", port));
      return port;
    }
  }
  return absl::DeadlineExceededError(absl::StrCat(
      name, " did not write its port file ", port_file, " within ",
      std::chrono::duration_cast<std::chrono::seconds>(options_.port_file_timeout).count(), " s"));
}

Status Launcher::StartTrainer(const std::string& why) {
  const int rank = TrainerRank(options_.num_nodes, options_.node_rank, options_.num_trainers, next_rank_++);
  trainer_ranks_.push_back(rank);
  ProcessSpec spec;
  spec.name = absl::StrCat("trainer-", rank);
  spec.child.argv = trainer_argv_;
  spec.child.env = {{"PL_MASTER_ADDR", master_addr_},
                    {"PL_ROLE", "trainer"},
                    {"PL_TRAINER_RANK", std::to_string(rank)},
                    {"PL_NUM_PSERVERS", std::to_string(layout_.total_pservers())},
                    {"PL_SYNC", options_.sync ? "1" : "0"}};
  for (auto& kv : telemetry_.Env(spec.name)) spec.child.env.push_back(std::move(kv));
  // A trainer's command may be any program (a Python script): its certificate comes by
  // the environment. Every trainer is "trainer".
  spec.child.env.push_back({"PL_TLS_DIR", tls_.Dir("trainer")});
  // Its master-assigned id, for ReportTrainerExit.
  const std::string id_file = layout_.TrainerIdFile(spec.name);
  ::unlink(id_file.c_str());
  spec.child.env.push_back({"PL_TRAINER_ID_FILE", id_file});
  telemetry_.Watch(spec.name);
  spec.restart = RestartPolicy::kNever;
  Status s = supervisor_->Start(spec);
  if (!s.ok()) {
    supervisor_->Log(absl::StrCat("cannot start ", spec.name, ": ", s.message()));
    return s;
  }
  idle_hint_logged_ = false;
  supervisor_->Log(absl::StrCat("started ", spec.name, " (pid ", supervisor_->Pid(spec.name), ")",
                                why.empty() ? "" : " ", why));
  return absl::OkStatus();
}

std::vector<std::string> Launcher::RunningTrainers() const {
  std::vector<std::string> out;
  for (int r : trainer_ranks_) {
    std::string name = absl::StrCat("trainer-", r);
    if (supervisor_->IsRunning(name)) out.push_back(name);
  }
  return out;
}

Status Launcher::Run() {
  start_time_ = Clock::now();
  if (trainer_argv_.empty()) PL_RETURN_IF_ERROR(Validate());
  PL_RETURN_IF_ERROR(PrepareWorkdir());
  PL_RETURN_IF_ERROR(tls_.Prepare(options_, layout_, [this](const std::string& line) { supervisor_->Log(line); }));
  PL_RETURN_IF_ERROR(OpenControlFifo());
  supervisor_->Log(absl::StrCat("workdir ", layout_.workdir(), "; ", options_.num_pservers, " pserver(s)",
                                options_.replicas > 1 ? absl::StrCat(" of ", options_.replicas, " copies") : "",
                                multi_node() ? absl::StrCat(" (this node runs ", layout_.LocalCopies().size(), " copies)") : "",
                                ", ", options_.num_trainers, " trainer(s), ",
                                options_.virtual_trainers > 0
                                    ? absl::StrCat("sync steps of ", options_.virtual_trainers, " virtual trainers")
                                    : options_.sync ? "sync updates" : "async updates", control_fd_ >= 0 ? "; control FIFO " + options_.control_fifo : "",
                                multi_node() ? absl::StrCat("; node ", options_.node_rank, " of ", options_.num_nodes,
                                                            ", master at ", options_.master_addr)
                                             : ""));

  Status started = [&]() -> Status {
    if (runs_master() && layout_.standby_masters()) {
      PL_RETURN_IF_ERROR(StartMasterWithStandbys());
      master_addr_ = options_.master_addr;
      master_ = std::make_unique<MasterClient>(master_addr_);
      PL_RETURN_IF_ERROR(WaitForMaster());
    } else if (runs_master()) {
      PL_ASSIGN_OR_RETURN(master_port_, StartServer("master", "from " + layout_.workdir() + "/master",
                                                    [this](int port) { return MasterCommand(port); }));
      master_addr_ = multi_node() ? options_.master_addr : absl::StrCat("127.0.0.1:", master_port_);
      master_ = std::make_unique<MasterClient>(absl::StrCat("127.0.0.1:", master_port_));
    } else {
      master_addr_ = options_.master_addr;
      master_ = std::make_unique<MasterClient>(master_addr_);
      PL_RETURN_IF_ERROR(WaitForMaster());
    }
    if (multi_node()) PL_RETURN_IF_ERROR(ResolveNodeAddr());
    if (multi_node() && options_.replicas > options_.num_nodes) {
      supervisor_->Log(absl::StrCat("warning: --replicas ", options_.replicas, " on ", options_.num_nodes,
                                    " nodes: some copies of a shard share a machine, and losing it loses both"));
    }
    for (const ShardCopy& copy : layout_.LocalCopies()) {
      const int i = copy.index;
      const std::string name = layout_.PserverName(copy);
      PL_RETURN_IF_ERROR(StartServer(name, absl::StrCat("at index ", i),
                                     [this, i, name](int port) { return PserverCommand(i, name, port); })
                             .status());
    }
    for (int r = 0; r < options_.num_trainers; ++r) PL_RETURN_IF_ERROR(StartTrainer(""));
    if (options_.num_trainers == 0) {
      supervisor_->Log("no trainer started (--trainers 0): waiting for a trainer target "
                       "(pl-autoscale, or 'scale N' on the control FIFO)");
    }
    return absl::OkStatus();
  }();
  started_ = true;
  if (!started.ok() && outcome_ == Outcome::kRunning) {
    outcome_ = Outcome::kFailed;
    cause_ = std::string(started.message());
    bad_input_ = absl::IsInvalidArgument(started);
  }
  trainers_started_ = Clock::now();
  master_ok_at_ = trainers_started_;
  next_status_ = trainers_started_;
  next_progress_ = trainers_started_ + milliseconds(static_cast<int64_t>(options_.progress_every_s * 1000));
  last_progress_time_ = trainers_started_;
  while (outcome_ == Outcome::kRunning) Step(milliseconds(100));

  StopEverything();
  const double took = Seconds(Clock::now() - start_time_);
  switch (outcome_) {
    case Outcome::kFinished:
      supervisor_->Log(absl::StrCat("job done in ", absl::StrFormat("%.1f", took), " s: ",
                                    DescribeStatus(status_), "; ", trainers_ok_, " trainer(s) exited 0"));
      if (created_workdir_) {
        std::error_code ec;
        fs::remove_all(layout_.workdir(), ec);
      }
      return absl::OkStatus();
    case Outcome::kCancelled:
      supervisor_->Log(absl::StrCat(cause_, "; every process stopped; workdir kept at ", layout_.workdir()));
      return absl::CancelledError(cause_);
    case Outcome::kLost:
      supervisor_->Log(absl::StrCat(cause_, "; ", DescribeStatus(status_), "; workdir kept at ", layout_.workdir()));
      return absl::DataLossError(cause_);
    default:
      supervisor_->Log(absl::StrCat("job failed: ", cause_, "; workdir kept at ", layout_.workdir()));
      return bad_input_ ? absl::InvalidArgumentError(cause_) : absl::AbortedError(cause_);
  }
}

void Launcher::StopEverything() {
  std::vector<std::string> trainers = RunningTrainers();
  if (!trainers.empty()) {
    supervisor_->Log(absl::StrCat("stopping ", trainers.size(), " trainer(s) (SIGTERM)"));
    HandleEvents(supervisor_->Stop(trainers, options_.stop_grace));
  }
  std::vector<std::string> servers;
  for (const ShardCopy& copy : layout_.LocalCopies()) servers.push_back(layout_.PserverName(copy));
  supervisor_->Log(runs_master() ? "stopping pservers and master (SIGTERM)" : "stopping pservers (SIGTERM)");
  HandleEvents(supervisor_->Stop(servers, options_.stop_grace));
  if (runs_master()) HandleEvents(supervisor_->Stop({"master"}, options_.stop_grace));
  if (runs_master() && layout_.standby_masters()) HandleEvents(supervisor_->Stop({"etcd"}, options_.stop_grace));
  // Anything else (e.g. a trainer started while stopping) goes too.
  HandleEvents(supervisor_->StopAll(options_.stop_grace));
}

void Launcher::Step(milliseconds timeout) {
  std::vector<int> watch;
  if (signal_pipe_[0] >= 0) watch.push_back(signal_pipe_[0]);
  if (control_fd_ >= 0) watch.push_back(control_fd_);
  std::vector<int> ready;
  HandleEvents(supervisor_->Pump(timeout, watch, &ready));
  if (int sig = stop_signal_.load(); sig != 0 && outcome_ != Outcome::kCancelled) {
    char buf[64];
    while (::read(signal_pipe_[0], buf, sizeof(buf)) > 0) {
    }
    outcome_ = Outcome::kCancelled;
    cause_ = absl::StrCat("interrupted by ", sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM"
                                                                                        : absl::StrCat("signal ", sig));
    return;
  }
  for (int fd : ready) {
    if (fd == control_fd_) HandleControl();
  }
  telemetry_.Announce(!multi_node() || node_addr_.empty() ? "127.0.0.1" : node_addr_);
  if (outcome_ != Outcome::kRunning || !started_) return;  // still starting up
  CheckTimers();
  ExpireLeaves();
  PollStatus();
  CheckEnd();
}

void Launcher::HandleEvents(const std::vector<ProcessEvent>& events) {
  for (const ProcessEvent& e : events) {
    if (absl::StartsWith(e.name, "trainer-")) {
      ++trainers_exited_;
      if (stopping_.erase(e.name) > 0) {
        // Stopped to follow a lower target: its task went back; nothing lost.
        if (e.exit.success()) ++trainers_ok_;
        continue;
      }
      if (e.exit.success()) ++trainers_ok_;
      if (outcome_ == Outcome::kRunning && !e.exit.success()) ReportTrainerExit(e);
      if (outcome_ == Outcome::kRunning && !e.exit.success() && have_status_ && status_.has_trainer_target()) {
        // FollowTarget replaces it; a command that fails at once must not loop forever.
        const auto now = Clock::now();
        target_failures_.push_back(now);
        while (!target_failures_.empty() && now - target_failures_.front() > std::chrono::seconds(30)) {
          target_failures_.erase(target_failures_.begin());
        }
        if (target_failures_.size() >= 5) {
          outcome_ = Outcome::kFailed;
          cause_ = absl::StrCat("5 trainers started for the trainer target failed within 30 s (the last: ", e.name, ", ",
                                e.exit.Describe(), "); see their lines above");
        }
      }
      if (outcome_ == Outcome::kRunning && !e.exit.success()) {
        supervisor_->Log(absl::StrCat(e.name, " is not restarted (elastic: the job goes on); ",
                                      RunningTrainers().size(), " trainer(s) running"));
      }
      continue;
    }
    if (outcome_ == Outcome::kRunning) ReportReplicaExit(e);
    // A server that exits before it ever served has bad flags or state (StartServer
    // does not restart it yet).
    if (!served_.count(e.name) && outcome_ == Outcome::kRunning) {
      outcome_ = Outcome::kFailed;
      cause_ = absl::StrCat(e.name, " exited (", e.exit.Describe(), ") before it served; see its [",
                            e.name, "] lines above");
      continue;
    }
    if (e.gave_up && outcome_ == Outcome::kRunning) {
      outcome_ = Outcome::kFailed;
      cause_ = absl::StrCat(e.name, " keeps failing (last exit: ", e.exit.Describe(), ")");
    }
  }
}

}  // namespace pl
