// MasterService: the master's gRPC face. Each call: the protocol check, the caller's
// rights, the request's string limits (rpc/request_limits.h), then the Master.
//
// Thread-safety: as the Master's (all methods thread-safe).
#ifndef PADDLE_LIKE_MASTER_MASTER_GRPC_SERVICE_H_
#define PADDLE_LIKE_MASTER_MASTER_GRPC_SERVICE_H_

#include "absl/strings/string_view.h"
#include "master/master_service.h"
#include "proto/master.grpc.pb.h"

namespace pl {

// The gRPC service: protocol check, the caller's rights (rpc/caller.h: RegisterPserver i
// only from pserver-i; a trainer's calls only from trainers, with its token; Membership
// and JobStatus from any of the job's processes), then the Master.
class MasterService final : public proto::Master::Service {
 public:
  explicit MasterService(Master* master) : master_(master) {}

  grpc::Status RegisterTrainer(grpc::ServerContext* ctx, const proto::RegisterTrainerRequest* req,
                               proto::RegisterTrainerResponse* resp) override;
  grpc::Status RegisterPserver(grpc::ServerContext* ctx, const proto::RegisterPserverRequest* req,
                               proto::RegisterPserverResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const proto::HeartbeatRequest* req,
                         proto::HeartbeatResponse* resp) override;
  grpc::Status GetTask(grpc::ServerContext* ctx, const proto::GetTaskRequest* req, proto::GetTaskResponse* resp) override;
  grpc::Status TaskFinished(grpc::ServerContext* ctx, const proto::TaskFinishedRequest* req,
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
  grpc::Status ScaleTrainers(grpc::ServerContext* ctx, const proto::ScaleTrainersRequest* req,
                             proto::ScaleTrainersResponse* resp) override;

 private:
  grpc::Status AuthorizeTrainerCall(const grpc::ServerContext* ctx, int64_t trainer_id, absl::string_view method) const;

  Master* const master_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_MASTER_GRPC_SERVICE_H_
