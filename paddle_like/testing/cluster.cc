#include "paddle_like/testing/cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "paddle_like/data/record_file.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"

namespace pl::dist_testing {

namespace fs = std::filesystem;

namespace {

constexpr milliseconds kRpcTimeout{3000};
constexpr milliseconds kStartTimeout{20000};

template <typename Stub, typename Req, typename Resp, typename Method>
StatusOr<Resp> Call(const std::string& address, Method method, const Req& req) {
  auto stub = Stub(rpc::MakeChannel(address));
  Resp resp;
  grpc::Status s = (stub.*method)(rpc::MakeContext(kRpcTimeout, /*wait_for_ready=*/true).get(), req, &resp);
  if (!s.ok()) return Annotate(rpc::FromGrpc(s), absl::StrCat("rpc to ", address));
  return resp;
}

}  // namespace

Cluster::Cluster(ClusterOptions options, std::string dir) : options_(std::move(options)), dir_(std::move(dir)) {
  pserver_incarnation_.assign(options_.num_pservers, 0);
  pservers_.resize(options_.num_pservers);
}

Cluster::~Cluster() {
  // Trainers first (they would otherwise retry against dead servers while we wait).
  for (auto& t : trainers_) t.reset();
  for (auto& p : pservers_) p.reset();
  master_.reset();
  for (auto& m : standbys_) m.reset();
  if (options_.tls) rpc::UseInsecureTransport();
}

// --tls_dir for `identity`'s process, made on first use (nothing when insecure).
StatusOr<std::vector<std::string>> Cluster::TlsArgs(const std::string& identity) {
  if (!options_.tls) return std::vector<std::string>{};
  const std::string dir = Path("tls");
  if (!std::filesystem::exists(dir + "/" + identity)) PL_RETURN_IF_ERROR(rpc::IssueCertificate(dir, identity));
  return std::vector<std::string>{"--tls_dir", dir + "/" + identity};
}

std::string Cluster::master_address() const {
  if (master_ports_.empty()) return absl::StrCat(HostOf(ProcessPlacement::Role::kMaster, 0), ":", master_port_);
  std::vector<std::string> all;
  for (size_t i = 0; i < master_ports_.size(); ++i) {
    all.push_back(absl::StrCat(HostOf(ProcessPlacement::Role::kMaster, static_cast<int>(i)), ":", master_ports_[i]));
  }
  return absl::StrJoin(all, ",");
}

std::string Cluster::HostOf(ProcessPlacement::Role role, int index) const {
  return options_.placement != nullptr ? options_.placement->Address(role, index) : "127.0.0.1";
}

StatusOr<std::unique_ptr<ChildProcess>> Cluster::Spawn(ProcessPlacement::Role role, int index,
                                                       const std::vector<std::string>& argv, const std::string& log,
                                                       const testing::EnvVars& env) {
  if (options_.placement != nullptr) return options_.placement->Spawn(role, index, argv, log, env);
  return testing::Spawn(argv, log, env);
}

Status Cluster::Start(int trainers) {
  for (auto [name, out] : {std::pair<const char*, std::string*>{"pl-master", &bin_master_},
                           {"pl-pserver", &bin_pserver_},
                           {"pl-trainer", &bin_trainer_}}) {
    PL_ASSIGN_OR_RETURN(*out, testing::BinaryPath(name));
  }
  if (options_.tls) {
    PL_RETURN_IF_ERROR(rpc::EnsureJobCa(Path("tls"), "cluster " + dir_));
    PL_RETURN_IF_ERROR(TlsArgs("launch").status());
    PL_RETURN_IF_ERROR(rpc::ConfigureTransportSecurity(Path("tls/launch")));
  }
  PL_RETURN_IF_ERROR(StartMaster());
  for (int i = 0; i < options_.num_pservers; ++i) PL_RETURN_IF_ERROR(StartPserver(i));
  // Trainers would wait for the pservers anyway; waiting here keeps their logs clean.
  bool registered = testing::WaitUntil(
      [&] {
        auto m = Membership();
        return m.ok() && m->pservers_size() == options_.num_pservers;
      },
      kStartTimeout);
  if (!registered) return absl::DeadlineExceededError("the pservers did not register with the master\n" + AllLogs());
  for (int t = 0; t < trainers; ++t) PL_RETURN_IF_ERROR(StartTrainer().status());
  return absl::OkStatus();
}

StatusOr<std::vector<std::string>> Cluster::MasterArgv(int index, int port, const std::string& stem) {
  if (bin_master_.empty()) {
    PL_ASSIGN_OR_RETURN(bin_master_, testing::BinaryPath("pl-master"));
  }
  std::vector<std::string> argv = {
      bin_master_, "--host", HostOf(ProcessPlacement::Role::kMaster, index), "--port", std::to_string(port),
      "--port_file", Path(stem + ".port"), "--state_dir", Path("master-state"), "--data", options_.data, "--passes",
      std::to_string(options_.passes), "--chunks_per_task", std::to_string(options_.chunks_per_task), "--lease_ms",
      std::to_string(options_.lease_ms), "--num_pservers", std::to_string(options_.num_pservers), "--seed",
      std::to_string(options_.seed)};
  if (!options_.etcd_endpoints.empty()) {
    const std::string endpoints = index < static_cast<int>(options_.etcd_endpoints_of_master.size()) &&
                                          !options_.etcd_endpoints_of_master[index].empty()
                                      ? options_.etcd_endpoints_of_master[index]
                                      : options_.etcd_endpoints;
    // One prefix per cluster directory: tests sharing an etcd never see each other's job.
    argv.insert(argv.end(), {"--etcd_endpoints", endpoints, "--etcd_prefix",
                             absl::StrCat("/pl-test/", std::hash<std::string>()(dir_)), "--leader_ttl_s",
                             std::to_string(options_.leader_ttl_s)});
  }
  PL_ASSIGN_OR_RETURN(std::vector<std::string> tls, TlsArgs("master"));
  argv.insert(argv.end(), tls.begin(), tls.end());
  return argv;
}

Status Cluster::StartMaster(int port) {
  if (!options_.etcd_endpoints.empty() && master_ports_.empty()) {
    for (int i = 0; i < std::max(options_.masters, 1); ++i) {
      PL_ASSIGN_OR_RETURN(int p, testing::PickFreePort());
      master_ports_.push_back(p);
    }
    standbys_.resize(master_ports_.size());
    standby_incarnation_.assign(master_ports_.size(), 0);
  }
  if (!master_ports_.empty() && port == 0) port = master_ports_[0];
  const std::string stem = absl::StrCat("master-", master_incarnation_);
  const std::string port_file = Path(stem + ".port");
  const std::string log = Path(stem + ".log");
  log_files_.push_back(log);
  PL_ASSIGN_OR_RETURN(std::vector<std::string> argv, MasterArgv(0, port, stem));
  PL_ASSIGN_OR_RETURN(master_, Spawn(ProcessPlacement::Role::kMaster, 0, argv, log));
  PL_ASSIGN_OR_RETURN(int bound, testing::WaitForPortFile(port_file, kStartTimeout, master_.get()));
  if (port != 0 && bound != port) {
    return absl::InternalError(absl::StrCat("master bound port ", bound, ", asked for ", port));
  }
  master_port_ = bound;
  ++master_incarnation_;
  return absl::OkStatus();
}

Status Cluster::StartStandbyMaster(int i) {
  if (i <= 0 || i >= static_cast<int>(master_ports_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no standby master ", i, " (masters: ", master_ports_.size(),
                                                   ", and only with etcd)"));
  }
  const std::string stem = absl::StrCat("master", i, "-", standby_incarnation_[i]++);
  log_files_.push_back(Path(stem + ".log"));
  PL_ASSIGN_OR_RETURN(std::vector<std::string> argv, MasterArgv(i, master_ports_[i], stem));
  PL_ASSIGN_OR_RETURN(standbys_[i], Spawn(ProcessPlacement::Role::kMaster, i, argv, Path(stem + ".log")));
  return absl::OkStatus();
}

Status Cluster::SpawnPserver(int i) {
  if (bin_pserver_.empty()) {
    PL_ASSIGN_OR_RETURN(bin_pserver_, testing::BinaryPath("pl-pserver"));
  }
  const int gen = pserver_incarnation_[i]++;
  const std::string port_file = Path(absl::StrCat("pserver-", i, "-", gen, ".port"));
  const std::string log = Path(absl::StrCat("pserver-", i, "-", gen, ".log"));
  log_files_.push_back(log);
  std::vector<std::string> argv = {bin_pserver_, "--index", std::to_string(i), "--num_pservers",
                                   std::to_string(options_.num_pservers), "--master", master_address(),
                                   "--host", HostOf(ProcessPlacement::Role::kPserver, i), "--port", "0",
                                   "--port_file", port_file};
  if (options_.checkpoint_every_s > 0) {
    argv.insert(argv.end(), {"--checkpoint_dir", Path("ckpt"), "--checkpoint_every_s",
                             std::to_string(options_.checkpoint_every_s)});
  }
  for (const std::string& arg : options_.pserver_args) argv.push_back(absl::StrReplaceAll(arg, {{"{i}", std::to_string(i)}}));
  PL_ASSIGN_OR_RETURN(std::vector<std::string> tls, TlsArgs(absl::StrCat("pserver-", i)));
  argv.insert(argv.end(), tls.begin(), tls.end());
  PL_ASSIGN_OR_RETURN(pservers_[i], Spawn(ProcessPlacement::Role::kPserver, i, argv, log));
  return testing::WaitForPortFile(port_file, kStartTimeout, pservers_[i].get()).status();
}

Status Cluster::StartPserver(int i) { return SpawnPserver(i); }

StatusOr<int> Cluster::StartTrainer(const std::vector<std::string>& extra_args) {
  if (bin_trainer_.empty()) {
    PL_ASSIGN_OR_RETURN(bin_trainer_, testing::BinaryPath("pl-trainer"));
  }
  const int rank = static_cast<int>(trainers_.size());
  std::vector<std::string> argv = {bin_trainer_, "--master", master_address()};
  argv.insert(argv.end(), options_.trainer_args.begin(), options_.trainer_args.end());
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  testing::EnvVars env = options_.trainer_env;
  env.emplace_back("PL_TRAINER_RANK", std::to_string(rank));
  PL_ASSIGN_OR_RETURN(std::vector<std::string> tls, TlsArgs("trainer"));
  if (!tls.empty()) env.emplace_back("PL_TLS_DIR", tls[1]);
  log_files_.push_back(TrainerLogPath(rank));
  PL_ASSIGN_OR_RETURN(auto child, Spawn(ProcessPlacement::Role::kTrainer, rank, argv, TrainerLogPath(rank), env));
  trainers_.push_back(std::move(child));
  return rank;
}

Status Cluster::KillMaster() {
  PL_RETURN_IF_ERROR(master_->Signal(SIGKILL));
  return testing::WaitForExit(*master_, milliseconds(5000)).status();
}

Status Cluster::KillPserver(int i) {
  PL_RETURN_IF_ERROR(pservers_[i]->Signal(SIGKILL));
  return testing::WaitForExit(*pservers_[i], milliseconds(5000)).status();
}

std::string Cluster::MasterLog() const {
  return testing::ReadFileOrEmpty(Path(absl::StrCat("master-", master_incarnation_ - 1, ".log")));
}
std::string Cluster::StandbyMasterLog(int i) const {
  return testing::ReadFileOrEmpty(Path(absl::StrCat("master", i, "-", standby_incarnation_[i] - 1, ".log")));
}
std::string Cluster::PserverLog(int i) const {
  return testing::ReadFileOrEmpty(Path(absl::StrCat("pserver-", i, "-", pserver_incarnation_[i] - 1, ".log")));
}
std::string Cluster::TrainerLogPath(int rank) const { return Path(absl::StrCat("trainer-", rank, ".log")); }
std::string Cluster::TrainerLog(int rank) const { return testing::ReadFileOrEmpty(TrainerLogPath(rank)); }

std::string Cluster::AllLogs() const {
  std::string all;
  for (const std::string& f : log_files_) {
    std::string text = testing::ReadFileOrEmpty(f);
    // Per-step progress lines make trainer logs long; the tail is what explains a failure.
    constexpr size_t kTail = 6000;
    if (text.size() > kTail) text = "...\n" + text.substr(text.size() - kTail);
    absl::StrAppend(&all, "==== ", fs::path(f).filename().string(), " ====\n", text);
  }
  return all;
}

StatusOr<proto::JobStatusResponse> Cluster::JobStatus() const {
  return Call<proto::Master::Stub, proto::JobStatusRequest, proto::JobStatusResponse>(
      master_address(), &proto::Master::Stub::JobStatus, proto::JobStatusRequest());
}

StatusOr<proto::MembershipResponse> Cluster::Membership() const {
  return Call<proto::Master::Stub, proto::MembershipRequest, proto::MembershipResponse>(
      master_address(), &proto::Master::Stub::Membership, proto::MembershipRequest());
}

StatusOr<proto::StatsResponse> Cluster::PserverStats(int i) const {
  const std::string port_file = Path(absl::StrCat("pserver-", i, "-", pserver_incarnation_[i] - 1, ".port"));
  int port = 0;
  std::string text = testing::ReadFileOrEmpty(port_file);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (!absl::SimpleAtoi(text, &port)) return absl::NotFoundError("no port file " + port_file);
  return Call<proto::ParameterServer::Stub, proto::StatsRequest, proto::StatsResponse>(
      absl::StrCat(HostOf(ProcessPlacement::Role::kPserver, i), ":", port), &proto::ParameterServer::Stub::Stats,
      proto::StatsRequest());
}

StatusOr<proto::JobStatusResponse> Cluster::WaitForJobDone(milliseconds timeout) const {
  const auto end = Clock::now() + timeout;
  StatusOr<proto::JobStatusResponse> last = absl::UnknownError("no JobStatus yet");
  while (Clock::now() < end) {
    last = JobStatus();
    if (last.ok() && last->job_done()) return last;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("job not done after ", timeout.count(), " ms; last JobStatus: ",
                   last.ok() ? last->ShortDebugString() : std::string(last.status().message())));
}

Status Cluster::WaitForTrainers(milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  for (size_t rank = 0; rank < trainers_.size(); ++rank) {
    ChildProcess& t = *trainers_[rank];
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
    PL_ASSIGN_OR_RETURN(ExitInfo info, testing::WaitForExit(t, std::max(left, milliseconds(1))));
    (void)info;
  }
  return absl::OkStatus();
}

// ---- data and logs ----

std::string FashionMnistFile(const std::string& name) {
  const char* dir = std::getenv("PL_DATA_DIR");
  if (dir == nullptr || *dir == '\0') return "";
  const std::string path = std::string(dir) + "/fashion-mnist/" + name;
  return fs::exists(path) ? path : "";
}

StatusOr<int64_t> WriteSubset(const std::string& src, const std::string& dst, int64_t n, int64_t per_chunk) {
  RecordReader reader;
  PL_RETURN_IF_ERROR(reader.Open(src));
  RecordWriter writer;
  PL_RETURN_IF_ERROR(writer.Open(dst, per_chunk));
  std::string record;
  for (int64_t i = 0; i < n; ++i) {
    PL_ASSIGN_OR_RETURN(bool more, reader.Next(&record));
    if (!more) return absl::OutOfRangeError(absl::StrCat(src, " has only ", i, " records, ", n, " asked"));
    PL_RETURN_IF_ERROR(writer.Write(record));
  }
  PL_RETURN_IF_ERROR(writer.Close());
  return static_cast<int64_t>(writer.chunks().size());
}

std::optional<double> LastNumberAfter(const std::string& text, const std::string& label) {
  const size_t at = text.rfind(label);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + label.size();
  size_t end = begin;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
                               text[end] == '-' || text[end] == 'e')) {
    ++end;
  }
  double v = 0;
  if (!absl::SimpleAtod(text.substr(begin, end - begin), &v)) return std::nullopt;
  return v;
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

Status SendControl(const std::string& fifo, const std::string& command, milliseconds timeout) {
  int fd = -1;
  // A FIFO opened for writing without blocking fails (ENXIO) until its reader has it open.
  if (!testing::WaitUntil([&] { return (fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK)) >= 0; }, timeout)) {
    return absl::UnavailableError(absl::StrCat("nobody reads the control FIFO ", fifo));
  }
  const std::string line = command + "\n";
  const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size())) {
    return absl::InternalError(absl::StrCat("wrote ", written, " of ", line.size(), " bytes to ", fifo));
  }
  return absl::OkStatus();
}

std::optional<Clock::time_point> WaitForText(const std::string& path, const std::string& needle,
                                             milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (true) {
    const auto now = Clock::now();
    if (testing::ReadFileOrEmpty(path).find(needle) != std::string::npos) return now;
    if (now >= end) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace pl::dist_testing
