// MasterService: the master's gRPC face. Each call: the protocol check, the caller's
// rights, the request's string limits (rpc/request_limits.h), then the Master.
//
// Thread-safety: as the Master's (all methods thread-safe).
#ifndef PADDLE_LIKE_MASTER_MASTER_GRPC_SERVICE_H_
#define PADDLE_LIKE_MASTER_MASTER_GRPC_SERVICE_H_

#include "absl/strings/string_view.h"
#include "master/durable_replies.h"
#include "master/master_service.h"
#include "proto/master.grpc.pb.h"

namespace pl {

// The gRPC service: protocol check, the caller's rights (rpc/caller.h: RegisterPserver i
// only from pserver-i; a trainer's calls only from trainers, with its token; Membership
// and JobStatus from any of the job's processes), then the Master. A trainer's frequent
// calls (Heartbeat, GetTask, TaskFinished) are callback methods: made on gRPC's thread,
// answered by DurableReplies once their record is on disk.
using MasterServiceBase = proto::Master::WithCallbackMethod_Heartbeat<
    proto::Master::WithCallbackMethod_GetTask<proto::Master::WithCallbackMethod_TaskFinished<proto::Master::Service>>>;

class MasterService final : public MasterServiceBase {
 public:
  explicit MasterService(Master* master);

  grpc::Status RegisterTrainer(grpc::ServerContext* ctx, const proto::RegisterTrainerRequest* req,
                               proto::RegisterTrainerResponse* resp) override;
  grpc::Status RegisterPserver(grpc::ServerContext* ctx, const proto::RegisterPserverRequest* req,
                               proto::RegisterPserverResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx, const proto::HeartbeatRequest* req,
                                      proto::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* GetTask(grpc::CallbackServerContext* ctx, const proto::GetTaskRequest* req,
                                    proto::GetTaskResponse* resp) override;
  grpc::ServerUnaryReactor* TaskFinished(grpc::CallbackServerContext* ctx, const proto::TaskFinishedRequest* req,
                                         proto::TaskFinishedResponse* resp) override;
  grpc::Status TaskFailed(grpc::ServerContext* ctx, const proto::TaskFailedRequest* req,
                          proto::TaskFailedResponse* resp) override;
  grpc::Status Leave(grpc::ServerContext* ctx, const proto::LeaveRequest* req, proto::LeaveResponse* resp) override;
  grpc::Status Membership(grpc::ServerContext* ctx, const proto::MembershipRequest* req,
                          proto::MembershipResponse* resp) override;
  grpc::Status JobStatus(grpc::ServerContext* ctx, const proto::JobStatusRequest* req,
                         proto::JobStatusResponse* resp) override;
  grpc::Status ReplicaExited(grpc::ServerContext* ctx, const proto::ReplicaExitedRequest* req,
                             proto::ReplicaExitedResponse* resp) override;
  grpc::Status TrainerExited(grpc::ServerContext* ctx, const proto::TrainerExitedRequest* req,
                             proto::TrainerExitedResponse* resp) override;
  grpc::Status ScaleTrainers(grpc::ServerContext* ctx, const proto::ScaleTrainersRequest* req,
                             proto::ScaleTrainersResponse* resp) override;

 private:
  grpc::Status AuthorizeTrainerCall(const grpc::ServerContextBase* ctx, int64_t trainer_id,
                                    absl::string_view method) const;
  // Answers `reactor` with `done` once its record is durable.
  template <typename Resp>
  void ReplyWhenDurable(grpc::ServerUnaryReactor* reactor, Master::Unsynced<Resp> done, Resp* out);

  Master* const master_;
  DurableReplies replies_;  // last: its thread answers calls until it is gone
};

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_MASTER_GRPC_SERVICE_H_
