// The Launcher's hands-on elasticity: the control FIFO's commands and the
// --kill_trainer_after_s / --add_trainer_after_s timers (see launcher.h).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/pserver.grpc.pb.h"
#include "trainer/launcher/launcher.h"

namespace pl {

void Launcher::HandleControl() {
  char buf[4096];
  while (true) {
    ssize_t n = ::read(control_fd_, buf, sizeof(buf));
    if (n <= 0) break;
    control_partial_.append(buf, n);
  }
  size_t nl;
  while ((nl = control_partial_.find('\n')) != std::string::npos) {
    std::string line(absl::StripAsciiWhitespace(control_partial_.substr(0, nl)));
    control_partial_.erase(0, nl + 1);
    if (!line.empty()) RunCommand(line);
  }
}

void Launcher::SignalTrainer(const std::string& rank_arg, int sig, const std::string& source) {
  const char* sig_name = sig == SIGKILL ? "SIGKILL" : "SIGTERM";
  std::string name;
  if (rank_arg.empty()) {
    std::vector<std::string> running = RunningTrainers();
    if (running.empty()) {
      supervisor_->Log(absl::StrCat(source, ": no trainer is running"));
      return;
    }
    name = running.back();  // the newest one
  } else {
    int rank = -1;
    if (!absl::SimpleAtoi(rank_arg, &rank) || rank < 0) {
      supervisor_->Log(absl::StrCat(source, ": '", rank_arg, "' is not a trainer rank"));
      return;
    }
    name = absl::StrCat("trainer-", rank);
  }
  pid_t pid = supervisor_->Pid(name);
  Status s = supervisor_->Signal(name, sig);
  if (!s.ok()) {
    supervisor_->Log(absl::StrCat(source, ": cannot signal ", name, ": ", s.message()));
    return;
  }
  supervisor_->Log(absl::StrCat(source, ": ", sig_name, " ", name, " (pid ", pid, ")"));
}

void Launcher::ScaleJob(const std::string& arg, const std::string& source) {
  int trainers = -1;
  if (!absl::SimpleAtoi(arg, &trainers) || trainers < 0) {
    supervisor_->Log(absl::StrCat(source, ": '", arg, "' is not a trainer count (0 or more)"));
    return;
  }
  if (!master_) {
    supervisor_->Log(absl::StrCat(source, ": the master has not started"));
    return;
  }
  proto::ScaleTrainersRequest req;
  req.set_trainers(trainers);
  req.set_reason("pl-launch control");
  StatusOr<proto::ScaleTrainersResponse> resp = master_->ScaleTrainers(
      req, MasterCallPolicy::Once(absl::Milliseconds(std::chrono::milliseconds(options_.rpc_timeout).count())));
  if (!resp.ok()) {
    supervisor_->Log(absl::StrCat(source, ": the master refused: ", resp.status().message()));
    return;
  }
  supervisor_->Log(absl::StrCat(source, ": the job's trainer target is now ", trainers));
  next_status_ = Clock::now();  // follow it at once
}

void Launcher::RunCommand(const std::string& line) {
  std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
  const std::string source = absl::StrCat("control '", line, "'");
  const std::string& cmd = words[0];
  const std::string arg = words.size() > 1 ? words[1] : "";
  if (cmd == "add-trainer" && words.size() == 1) {
    supervisor_->Log(absl::StrCat(source, ": adding a trainer"));
    StartTrainer("(added)").IgnoreError();
  } else if (cmd == "scale" && words.size() == 2) {
    ScaleJob(arg, source);
  } else if (cmd == "kill-trainer" && words.size() <= 2) {
    SignalTrainer(arg, SIGKILL, source);
  } else if (cmd == "stop-trainer" && words.size() <= 2) {
    SignalTrainer(arg, SIGTERM, source);
  } else if (cmd == "kill-pserver" && (words.size() == 2 || (words.size() == 3 && words[2] == "backup"))) {
    // The pservers of which this node runs a copy (several machines: node_role.h).
    const std::vector<int> local = layout_.LocalPservers();
    int index = -1;
    if (!absl::SimpleAtoi(arg, &index) || std::find(local.begin(), local.end(), index) == local.end()) {
      supervisor_->Log(absl::StrCat(source, ": pserver index must be one this node runs a copy of: ",
                                    absl::StrJoin(local, ", ")));
      return;
    }
    // "backup": a copy that is not the primary (a backup, or one still joining).
    const bool backup = words.size() == 3;
    std::string name = PserverServing(index);
    if (backup) {
      const std::string primary = name;
      name.clear();
      // Without a primary known now (the master restarting) a copy could be the primary.
      if (primary.empty()) {
        supervisor_->Log(absl::StrCat(source, ": the master names no primary of shard ", index,
                                      " now, so no copy is known to be another; nothing killed"));
        return;
      }
      for (const std::string& copy : layout_.PserverNames(index)) {
        if (copy != primary && supervisor_->Pid(copy) > 0) {
          name = copy;
          break;
        }
      }
    }
    if (name.empty()) {
      supervisor_->Log(absl::StrCat(source, ": the master names no ", backup ? "copy but the primary" : "primary",
                                    " of shard ", index, " running on this node"));
      return;
    }
    pid_t pid = supervisor_->Pid(name);
    Status s = supervisor_->Signal(name, SIGKILL);
    supervisor_->Log(s.ok() ? absl::StrCat(source, ": SIGKILL ", name, " (pid ", pid, ")")
                            : absl::StrCat(source, ": cannot signal ", name, ": ", s.message()));
  } else if (cmd == "checkpoint-pserver" && words.size() == 2) {
    int index = -1;
    if (!absl::SimpleAtoi(arg, &index) || index < 0) {
      supervisor_->Log(absl::StrCat(source, ": '", arg, "' is not a pserver index"));
      return;
    }
    CheckpointPserver(index, source);
  } else if (cmd == "kill-master" && words.size() == 1 && !runs_master()) {
    supervisor_->Log(absl::StrCat(source, ": the master runs on node 0"));
  } else if (cmd == "kill-master" && words.size() == 1) {
    pid_t pid = supervisor_->Pid("master");
    Status s = supervisor_->Signal("master", SIGKILL);
    supervisor_->Log(s.ok() ? absl::StrCat(source, ": SIGKILL master (pid ", pid, ")")
                            : absl::StrCat(source, ": cannot signal master: ", s.message()));
  } else {
    supervisor_->Log(absl::StrCat(source, ": unknown command (known: add-trainer, scale N, kill-trainer [rank], "
                                          "stop-trainer [rank], kill-pserver INDEX [backup], checkpoint-pserver INDEX, "
                                          "kill-master)"));
  }
}

void Launcher::CheckTimers() {
  const double since = std::chrono::duration<double>(Clock::now() - trainers_started_).count();
  if (!kill_timer_done_ && options_.kill_trainer_after_s >= 0 && since >= options_.kill_trainer_after_s) {
    kill_timer_done_ = true;
    SignalTrainer("", SIGKILL, absl::StrCat("--kill_trainer_after_s ", options_.kill_trainer_after_s));
  }
  if (!add_timer_done_ && options_.add_trainer_after_s >= 0 && since >= options_.add_trainer_after_s) {
    add_timer_done_ = true;
    StartTrainer(absl::StrCat("(--add_trainer_after_s ", options_.add_trainer_after_s, ")")).IgnoreError();
  }
}

std::string Launcher::PrimaryAddress(int index) {
  const StatusOr<proto::MembershipResponse> membership = master_->Membership(MasterCallPolicy::Once(absl::Seconds(2)));
  if (!membership.ok()) return "";
  for (const proto::PserverInfo& p : membership->pservers()) {
    if (p.index() == index) return p.address();
  }
  return "";
}

void Launcher::CheckpointPserver(int index, const std::string& source) {
  const std::string address = PrimaryAddress(index);
  if (address.empty()) {
    supervisor_->Log(absl::StrCat(source, ": the master names no primary of shard ", index));
    return;
  }
  // As pl-launch (its certificate's identity may ask any of the job's processes).
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(address));
  proto::CheckpointResponse written;
  auto ctx = rpc::MakeContext(std::chrono::seconds(30), /*wait_for_ready=*/true);
  const grpc::Status s = stub->Checkpoint(ctx.get(), proto::CheckpointRequest(), &written);
  supervisor_->Log(s.ok() ? absl::StrCat(source, ": shard ", index, " at ", address, " wrote ", written.path())
                          : absl::StrCat(source, ": shard ", index, " at ", address, ": ", s.error_message()));
}

void Launcher::ReportReplicaExit(const ProcessEvent& e) {
  if (options_.replicas <= 1 || !master_) return;
  int index = -1;
  for (const ShardCopy& copy : layout_.LocalCopies()) {
    if (layout_.PserverName(copy) == e.name) index = copy.index;
  }
  if (index < 0) return;
  // The file holds the id of the incarnation that exited: a restart comes only after
  // the supervisor's delay, and writes its own. Removed, so it is reported once.
  const std::string file = layout_.ReplicaIdFile(e.name);
  std::ifstream in(file);
  std::string hex;
  uint64_t id = 0;
  if (!(in >> hex) || !absl::SimpleHexAtoi(hex, &id) || id == 0) return;
  in.close();
  ::unlink(file.c_str());
  proto::ReplicaExitedRequest req;
  req.set_index(index);
  req.set_replica_id(id);
  req.set_why(absl::StrCat(e.name, " ", e.exit.Describe()));
  const StatusOr<proto::ReplicaExitedResponse> resp = master_->ReplicaExited(req, MasterCallPolicy::Once(absl::Seconds(1)));
  if (!resp.ok()) {
    supervisor_->Log(absl::StrCat("could not tell the master that ", e.name, " exited (its lease will tell it): ",
                                  resp.status().message()));
  } else if (resp->known()) {
    supervisor_->Log(absl::StrCat("told the master that ", e.name, " (replica ", hex, " of shard ", index,
                                  ") exited"));
  }
}

void Launcher::ReportTrainerExit(const ProcessEvent& e) {
  if (!master_) return;
  const std::string file = layout_.TrainerIdFile(e.name);
  std::ifstream in(file);
  int64_t id = 0;
  if (!(in >> id) || id <= 0) return;  // it never registered, or is not ours to name
  in.close();
  ::unlink(file.c_str());  // reported once
  proto::TrainerExitedRequest req;
  req.set_trainer_id(id);
  req.set_why(absl::StrCat(e.name, " ", e.exit.Describe()));
  const StatusOr<proto::TrainerExitedResponse> resp = master_->TrainerExited(req, MasterCallPolicy::Once(absl::Seconds(1)));
  if (!resp.ok()) {
    supervisor_->Log(absl::StrCat("could not tell the master that ", e.name, " exited (its lease will tell it): ",
                                  resp.status().message()));
  } else if (resp->known()) {
    supervisor_->Log(absl::StrCat("told the master that ", e.name, " (trainer ", id, ") exited"));
  }
}

std::string Launcher::PserverServing(int index) {
  const std::vector<std::string> names = layout_.PserverNames(index);
  if (options_.replicas <= 1) return names.empty() ? "" : names.front();
  const std::string address = PrimaryAddress(index);
  if (address.empty()) return "";
  const std::string port = address.substr(address.rfind(':') + 1);
  for (const std::string& name : names) {
    auto it = server_ports_.find(name);
    if (it != server_ports_.end() && std::to_string(it->second) == port) return name;
  }
  return "";
}

}  // namespace pl
