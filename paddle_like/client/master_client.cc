#include "paddle_like/client/master_client.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/request_limits.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {

MasterClient::MasterClient(const std::string& address, std::string name, absl::Duration give_up_after)
    : address_(address),
      stub_(proto::Master::NewStub(rpc::MakeChannel(address))),
      dialled_(absl::Now()),
      name_(std::move(name)),
      give_up_after_(give_up_after) {}

std::shared_ptr<proto::Master::Stub> MasterClient::stub() const {
  std::lock_guard<std::mutex> lock(stub_mu_);
  return stub_;
}

void MasterClient::Redial(const std::shared_ptr<proto::Master::Stub>& failed) {
  std::lock_guard<std::mutex> lock(stub_mu_);
  if (stub_ != failed || absl::Now() - dialled_ < absl::Milliseconds(200)) return;
  stub_ = proto::Master::NewStub(rpc::MakeChannel(address_));
  dialled_ = absl::Now();
}

// With wait_for_ready, each attempt waits for the channel to be ready (bounded by its
// deadline). A sync client advances a reconnect only while some call waits on the
// channel: failing fast and sleeping between attempts left the new connection to gRPC's
// 5 s backup poller, so a restarted master was reached 5-12 s late, after the trainers'
// leases had run out.
template <typename Request, typename Response>
Status MasterClient::Call(grpc::Status (proto::Master::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                          const Request& request, Response* response, const MasterCallPolicy& policy,
                          const std::string& token, const char* what) {
  Backoff backoff(policy.give_up_after);
  while (true) {
    std::unique_ptr<grpc::ClientContext> ctx =
        rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(policy.attempt_timeout)));
    ctx->set_wait_for_ready(policy.wait_for_ready);
    if (!token.empty()) ctx->AddMetadata(rpc::kTrainerTokenKey, token);
    const std::shared_ptr<proto::Master::Stub> s = stub();
    Status st = rpc::FromGrpc(((*s).*method)(ctx.get(), request, response));
    if (st.ok() || !rpc::IsRetryable(st)) return st;
    Redial(s);
    if (policy.give_up_after <= absl::ZeroDuration()) return st;
    if (backoff.Expired() || (stop_ && stop_->load())) {
      return Annotate(st, absl::StrCat("master ", what, ": gave up retrying"));
    }
    backoff.Wait();
  }
}

int64_t MasterClient::trainer_id() const { return credential().trainer_id; }

MasterClient::Credential MasterClient::credential() const {
  std::lock_guard<std::mutex> lock(credential_mu_);
  return credential_;
}

#define PL_MASTER_RPC(Method, req, resp) \
  Call(&proto::Master::Stub::Method, req, resp, TrainerPolicy(), "", #Method)
// A call about this trainer: its id and token from one credential `cred`.
#define PL_TRAINER_RPC(Method, cred, req, resp) \
  Call(&proto::Master::Stub::Method, req, resp, TrainerPolicy(), cred.token, #Method)

StatusOr<proto::RegisterTrainerResponse> MasterClient::Register() {
  proto::RegisterTrainerRequest req;
  req.set_name(name_);
  req.set_micro_batch(micro_batch_.load());
  proto::RegisterTrainerResponse resp;
  PL_RETURN_IF_ERROR(PL_MASTER_RPC(RegisterTrainer, req, &resp));
  {
    std::lock_guard<std::mutex> lock(credential_mu_);
    credential_ = Credential{resp.trainer_id(), resp.token()};
  }
  if (resp.lease_ms() > 0) lease_ms_ = resp.lease_ms();
  WriteTrainerIdFile(resp.trainer_id());
  return resp;
}

void MasterClient::WriteTrainerIdFile(int64_t trainer_id) {
  const char* path = std::getenv("PL_TRAINER_ID_FILE");
  if (path == nullptr || *path == '\0') return;
  // Whole or not at all: the launcher may read it the moment this process dies.
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << trainer_id << "\n";
    if (!out.good()) return;  // the lease still tells the master; nothing else depends on it
  }
  std::rename(tmp.c_str(), path);
}

StatusOr<proto::GetTaskResponse> MasterClient::GetTask(int32_t slot) { return GetTask(nullptr, 0, slot); }

StatusOr<proto::GetTaskResponse> MasterClient::FinishAndGetTask(const proto::Task& finished, int64_t num_samples,
                                                                int32_t slot) {
  return GetTask(&finished, num_samples, slot);
}

StatusOr<proto::GetTaskResponse> MasterClient::GetTask(const proto::Task* finished, int64_t num_samples,
                                                       int32_t slot) {
  Credential cred = credential();
  proto::GetTaskRequest req;
  req.set_trainer_id(cred.trainer_id);
  req.set_slot(slot);
  if (finished != nullptr) {
    proto::TaskFinishedRequest& report = *req.mutable_finished();
    report.set_trainer_id(cred.trainer_id);
    report.set_task_id(finished->id());
    report.set_pass(finished->pass());
    report.set_num_samples(num_samples);
  }
  proto::GetTaskResponse resp;
  Status s = PL_TRAINER_RPC(GetTask, cred, req, &resp);
  if (absl::IsNotFound(s)) {  // the master dropped us (lease ran out): join again
    PL_RETURN_IF_ERROR(RegisterAgain(req.trainer_id()));
    cred = credential();
    req.set_trainer_id(cred.trainer_id);
    // The report died with the old id: the task went back to the queue.
    const bool reported = req.has_finished();
    req.clear_finished();
    s = PL_TRAINER_RPC(GetTask, cred, req, &resp);
    if (s.ok() && reported) {
      resp.set_finish_refused("this trainer had been dropped by the master (its lease ran out) and registered again");
    }
  }
  PL_RETURN_IF_ERROR(s);
  lease_slots_.store(resp.lease_slots());
  return resp;
}

Status MasterClient::TaskFinished(const proto::Task& task, int64_t num_samples) {
  const Credential cred = credential();
  proto::TaskFinishedRequest req;
  req.set_trainer_id(cred.trainer_id);
  req.set_task_id(task.id());
  req.set_pass(task.pass());
  req.set_num_samples(num_samples);
  proto::TaskFinishedResponse resp;
  Status s = PL_TRAINER_RPC(TaskFinished, cred, req, &resp);
  // Dropped meanwhile: the report does not count (the task goes to another trainer);
  // this trainer joins again for the next one.
  if (absl::IsNotFound(s)) PL_RETURN_IF_ERROR(RegisterAgain(cred.trainer_id));
  return s;
}

Status MasterClient::TaskFailed(const proto::Task& task, const std::string& reason, bool returned,
                                int64_t samples_pushed, bool resumable) {
  const Credential cred = credential();
  proto::TaskFailedRequest req;
  req.set_trainer_id(cred.trainer_id);
  req.set_task_id(task.id());
  req.set_pass(task.pass());
  // The master refuses text over rpc::kMaxTextBytes; a long cause is cut, not lost whole.
  req.set_reason(reason.size() > rpc::kMaxTextBytes ? reason.substr(0, rpc::kMaxTextBytes - 3) + "..." : reason);
  req.set_returned(returned);
  req.set_samples_pushed(samples_pushed);
  req.set_resumable(resumable);
  proto::TaskFailedResponse resp;
  return PL_TRAINER_RPC(TaskFailed, cred, req, &resp);
}

Status MasterClient::Heartbeat(int64_t task_id) {
  const Credential cred = credential();
  proto::HeartbeatRequest req;
  req.set_trainer_id(cred.trainer_id);
  req.set_task_id(task_id);
  proto::HeartbeatResponse resp;
  Status s = PL_TRAINER_RPC(Heartbeat, cred, req, &resp);
  if (absl::IsNotFound(s)) return RegisterAgain(req.trainer_id());  // dropped: join again
  PL_RETURN_IF_ERROR(s);
  if (!resp.known()) return RegisterAgain(req.trainer_id());
  live_trainers_.store(resp.live_trainers());
  lease_slots_.store(resp.lease_slots());
  return absl::OkStatus();
}

Status MasterClient::RegisterAgain(int64_t forgotten_id) {
  // The heartbeat thread and the training loop both notice a forgotten id; only one of
  // them may register, or the loop leases a task under an id the other replaces at once.
  std::lock_guard<std::mutex> lock(register_mu_);
  if (trainer_id() != forgotten_id) return absl::OkStatus();  // the other one did
  return Register().status();
}

Status MasterClient::Leave() {
  const Credential cred = credential();
  proto::LeaveRequest req;
  req.set_trainer_id(cred.trainer_id);
  proto::LeaveResponse resp;
  // Best effort and quick: the lease would expire anyway.
  return Call(&proto::Master::Stub::Leave, req, &resp, MasterCallPolicy::Once(absl::Seconds(2)), cred.token, "Leave");
}

StatusOr<proto::MembershipResponse> MasterClient::Membership() {
  proto::MembershipRequest req;
  proto::MembershipResponse resp;
  PL_RETURN_IF_ERROR(PL_MASTER_RPC(Membership, req, &resp));
  return resp;
}

StatusOr<proto::JobStatusResponse> MasterClient::JobStatus() {
  proto::JobStatusRequest req;
  proto::JobStatusResponse resp;
  PL_RETURN_IF_ERROR(PL_MASTER_RPC(JobStatus, req, &resp));
  return resp;
}

#undef PL_MASTER_RPC
#undef PL_TRAINER_RPC

StatusOr<proto::RegisterPserverResponse> MasterClient::RegisterPserver(const proto::RegisterPserverRequest& request,
                                                                       const MasterCallPolicy& policy) {
  proto::RegisterPserverResponse resp;
  PL_RETURN_IF_ERROR(Call(&proto::Master::Stub::RegisterPserver, request, &resp, policy, "", "RegisterPserver"));
  return resp;
}

StatusOr<proto::MembershipResponse> MasterClient::Membership(const MasterCallPolicy& policy) {
  proto::MembershipResponse resp;
  PL_RETURN_IF_ERROR(Call(&proto::Master::Stub::Membership, proto::MembershipRequest(), &resp, policy, "", "Membership"));
  return resp;
}

StatusOr<proto::JobStatusResponse> MasterClient::JobStatus(const MasterCallPolicy& policy) {
  proto::JobStatusResponse resp;
  PL_RETURN_IF_ERROR(Call(&proto::Master::Stub::JobStatus, proto::JobStatusRequest(), &resp, policy, "", "JobStatus"));
  return resp;
}

StatusOr<proto::ReplicaExitedResponse> MasterClient::ReplicaExited(const proto::ReplicaExitedRequest& request,
                                                                   const MasterCallPolicy& policy) {
  proto::ReplicaExitedResponse resp;
  PL_RETURN_IF_ERROR(Call(&proto::Master::Stub::ReplicaExited, request, &resp, policy, "", "ReplicaExited"));
  return resp;
}

StatusOr<proto::TrainerExitedResponse> MasterClient::TrainerExited(const proto::TrainerExitedRequest& request,
                                                                   const MasterCallPolicy& policy) {
  proto::TrainerExitedResponse resp;
  PL_RETURN_IF_ERROR(Call(&proto::Master::Stub::TrainerExited, request, &resp, policy, "", "TrainerExited"));
  return resp;
}

StatusOr<proto::ScaleTrainersResponse> MasterClient::ScaleTrainers(const proto::ScaleTrainersRequest& request,
                                                                   const MasterCallPolicy& policy) {
  proto::ScaleTrainersResponse resp;
  PL_RETURN_IF_ERROR(Call(&proto::Master::Stub::ScaleTrainers, request, &resp, policy, "", "ScaleTrainers"));
  return resp;
}

StatusOr<std::vector<std::string>> MasterClient::PserverAddresses(int num_pservers) {
  PL_ASSIGN_OR_RETURN(proto::MembershipResponse m, Membership());
  std::vector<std::string> addresses(num_pservers);
  int found = 0;
  for (const proto::PserverInfo& p : m.pservers()) {
    if (p.index() >= 0 && p.index() < num_pservers && !p.address().empty()) {
      if (addresses[p.index()].empty()) ++found;
      addresses[p.index()] = p.address();
    }
  }
  if (found < num_pservers) {
    return absl::UnavailableError(absl::StrCat(found, " of ", num_pservers, " pservers registered"));
  }
  return addresses;
}

}  // namespace pl
