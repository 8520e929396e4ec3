// PserverService: the ParameterServer gRPC service (proto/pserver.proto) over one
// ParameterShard, with the counters StatsResponse reports and on-demand checkpoints.
// Every handler first checks the caller's protocol version (rpc::CheckProtocol).
//
// Thread-safety: thread-safe; gRPC's thread pool calls the handlers concurrently.
#ifndef PSERVER_PSERVER_SERVICE_H_
#define PSERVER_PSERVER_SERVICE_H_

#include <atomic>
#include <string>

#include "pserver/checkpoint.h"
#include "pserver/shard.h"
#include "proto/pserver.grpc.pb.h"

namespace pl::pserver {

class PserverService final : public proto::ParameterServer::Service {
 public:
  // `checkpointer` may be null (no checkpoint directory): the Checkpoint RPC is then
  // FAILED_PRECONDITION. `restored_from` is the checkpoint loaded at start, if any.
  PserverService(ParameterShard* shard, Checkpointer* checkpointer, std::string restored_from = "");

  grpc::Status Init(grpc::ServerContext* context, const proto::InitRequest* request,
                    proto::InitResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    proto::PullResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context, const proto::PushRequest* request,
                    proto::PushResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context, const proto::StatsRequest* request,
                     proto::StatsResponse* response) override;
  grpc::Status Checkpoint(grpc::ServerContext* context, const proto::CheckpointRequest* request,
                          proto::CheckpointResponse* response) override;

  // Writes a checkpoint now (periodic timer, SIGTERM, the RPC); logs the outcome.
  StatusOr<std::string> CheckpointNow();
  // The shard's version when the last checkpoint was written (-1: none yet).
  int64_t checkpointed_version() const { return checkpointed_version_.load(); }
  proto::StatsResponse StatsNow() const;

 private:
  ParameterShard* const shard_;
  Checkpointer* const checkpointer_;
  const std::string restored_from_;
  std::atomic<int64_t> checkpoints_written_{0};
  std::atomic<int64_t> checkpointed_version_{-1};
};

// Resident set size of this process in bytes (from /proc/self/statm), 0 if unknown.
int64_t ResidentBytes();

}  // namespace pl::pserver

#endif  // PSERVER_PSERVER_SERVICE_H_
