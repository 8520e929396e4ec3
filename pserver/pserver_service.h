// PserverService: the ParameterServer gRPC service (proto/pserver.proto) over one
// ParameterShard, with the counters StatsResponse reports and on-demand checkpoints.
// Every handler first checks the caller's protocol version (rpc::CheckProtocol).
// Trainers on this host may attach a shared-memory region (Attach); their Push and
// Pull then name blocks in it instead of carrying the floats (shared_regions.h).
//
// It registers its methods itself rather than through the generated Service, so that
// Push and Pull read and write their dense payloads as DenseFrames (no protobuf copy
// of the tensors); the bytes on the wire are the same, so generated stubs still work.
//
// Thread-safety: thread-safe; gRPC's thread pool calls the handlers concurrently.
#ifndef PSERVER_PSERVER_SERVICE_H_
#define PSERVER_PSERVER_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/impl/method_handler_impl.h>
#include <grpcpp/impl/rpc_service_method.h>

#include "paddle_like/dist/dense_frame.h"
#include "pserver/checkpoint.h"
#include "pserver/shared_regions.h"
#include "pserver/shard.h"
#include "proto/pserver.grpc.pb.h"

namespace pl::pserver {

class PserverService final : public grpc::Service {
 public:
  // `checkpointer` may be null (no checkpoint directory): the Checkpoint RPC is then
  // FAILED_PRECONDITION. `restored_from` is the checkpoint loaded at start, if any.
  PserverService(ParameterShard* shard, Checkpointer* checkpointer, std::string restored_from = "",
                 SharedRegionOptions shm = {});

  grpc::Status Init(grpc::ServerContext* context, const proto::InitRequest* request,
                    proto::InitResponse* response);
  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    PullFrame* response);
  grpc::Status Push(grpc::ServerContext* context, const PushFrame* request,
                    proto::PushResponse* response);
  grpc::Status Stats(grpc::ServerContext* context, const proto::StatsRequest* request,
                     proto::StatsResponse* response);
  grpc::Status Checkpoint(grpc::ServerContext* context, const proto::CheckpointRequest* request,
                          proto::CheckpointResponse* response);
  grpc::Status Attach(grpc::ServerContext* context, const proto::AttachRequest* request,
                      proto::AttachResponse* response);

  // Writes a checkpoint now (periodic timer, SIGTERM, the RPC); logs the outcome.
  StatusOr<std::string> CheckpointNow();
  // The shard's version when the last checkpoint was written (-1: none yet).
  int64_t checkpointed_version() const { return checkpointed_version_.load(); }
  proto::StatsResponse StatsNow() const;
  // Changes whenever a Push or Pull starts or ends (the main loop notices when traffic
  // pauses).
  int64_t data_calls() const { return data_calls_.load(); }
  // Lets go of shared-memory regions their trainers stopped using.
  void DropIdleRegions() { regions_.DropIdle(); }

 private:
  template <typename Request, typename Response>
  void AddUnary(const char* method,
                grpc::Status (PserverService::*handler)(grpc::ServerContext*, const Request*, Response*)) {
    names_.push_back(std::make_unique<std::string>(PserverMethodName(method)));
    AddMethod(new grpc::internal::RpcServiceMethod(
        names_.back()->c_str(), grpc::internal::RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<PserverService, Request, Response>(
            [handler](PserverService* service, grpc::ServerContext* context, const Request* request,
                      Response* response) { return (service->*handler)(context, request, response); },
            this)));
  }

  // A shared-memory push as a frame whose payloads point into the region (copies when
  // the push is deferred: the trainer reuses the region once it has the reply).
  StatusOr<PushFrame> FrameFromRegion(proto::PushRequest header, std::shared_ptr<SharedRegion>* region);

  std::vector<std::unique_ptr<std::string>> names_;  // RpcServiceMethod keeps the pointers
  ParameterShard* const shard_;
  Checkpointer* const checkpointer_;
  const std::string restored_from_;
  std::atomic<int64_t> checkpoints_written_{0};
  std::atomic<int64_t> checkpointed_version_{-1};
  std::atomic<int64_t> data_calls_{0};
  SharedRegionTable regions_;
};

// Resident set size of this process in bytes (from /proc/self/statm), 0 if unknown.
int64_t ResidentBytes();

}  // namespace pl::pserver

#endif  // PSERVER_PSERVER_SERVICE_H_
