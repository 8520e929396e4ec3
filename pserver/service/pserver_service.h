// PserverService: the ParameterServer gRPC service (proto/pserver.proto) over one
// ParameterShard, with the counters StatsResponse reports and on-demand checkpoints.
// Every handler first checks the caller's protocol version (rpc::CheckProtocol) and its
// rights (rpc/caller.h): Init, Push, Pull and Attach only from the job's trainers (Init
// and Push also from this shard's other replicas, as the primary's stream),
// InstallSnapshot only from this shard's replicas, Stats and Checkpoint from any of the
// job's processes.
// Trainers on this host may attach a shared-memory region (Attach); their Push and
// Pull then name blocks in it instead of carrying the floats (shared_regions.h).
// Trainers on other hosts may ask for a dense link instead: the region lives here and
// its blocks travel over TCP connections of their own (dense_link_listener.h). Whatever
// carried a push or a pull, DenseArrivals (dense_arrivals.h) turns it into the blocks
// the shard applies and the places their values go.
//
// It is the generated Service (so every RPC of the proto is known at compile time)
// with Push and Pull taken as raw bytes (WithRawCallbackMethod_*): they read and write
// their dense payloads as DenseFrames (no protobuf copy of the tensors); the bytes on
// the wire are the same, so generated stubs still work. A sync shard's handlers run on
// HandlerThreads, since a sync-mode Pull blocks until the step is complete; an async
// shard's run on gRPC's callback thread (no hop: small calls cost ~40 us less).
//
// Thread-safety: thread-safe; gRPC's threads and HandlerThreads call the handlers
// concurrently.
#ifndef PSERVER_SERVICE_PSERVER_SERVICE_H_
#define PSERVER_SERVICE_PSERVER_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <grpcpp/grpcpp.h>

#include "paddle_like/core/runtime.h"
#include "paddle_like/dist/dense_frame.h"
#include "pserver/checkpoint/checkpoint.h"
#include "pserver/service/dense_arrivals.h"
#include "pserver/service/dense_link_listener.h"
#include "pserver/service/handler_threads.h"
#include "pserver/replication/replicator.h"
#include "pserver/service/shared_regions.h"
#include "pserver/store/shard.h"
#include "proto/pserver.grpc.pb.h"

namespace pl::pserver {

using PserverServiceBase = proto::ParameterServer::WithRawCallbackMethod_Pull<
    proto::ParameterServer::WithRawCallbackMethod_Push<
        proto::ParameterServer::WithRawCallbackMethod_Replicate<proto::ParameterServer::Service>>>;

class PserverService final : public PserverServiceBase {
 public:
  // `checkpointer` may be null (no checkpoint directory): the Checkpoint RPC is then
  // FAILED_PRECONDITION. `restored_from` is the checkpoint loaded at start, if any.
  PserverService(ParameterShard* shard, Checkpointer* checkpointer, std::string restored_from = "",
                 SharedRegionOptions shm = {});

  grpc::Status Init(grpc::ServerContext* context, const proto::InitRequest* request,
                    proto::InitResponse* response) override;
  // Pull: PullRequest in, a PullFrame out. Push: a PushFrame in, PushResponse out.
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::Status Stats(grpc::ServerContext* context, const proto::StatsRequest* request,
                     proto::StatsResponse* response) override;
  grpc::Status Checkpoint(grpc::ServerContext* context, const proto::CheckpointRequest* request,
                          proto::CheckpointResponse* response) override;
  grpc::Status Attach(grpc::ServerContext* context, const proto::AttachRequest* request,
                      proto::AttachResponse* response) override;
  // The replication stream: a ReplicateFrame in from this shard's primary (only), a
  // ReplicateResponse out.
  grpc::ServerUnaryReactor* Replicate(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  // A joining replica receives its primary's snapshot (replicator.h).
  grpc::Status InstallSnapshot(grpc::ServerContext* context, const proto::SnapshotChunk* request,
                               proto::SnapshotAck* response) override;

  // A replicated shard (--replicas > 1): stream entries from the primary go to
  // `replicator`, and every Push and Pull runs on a handler thread (a primary waits
  // for its backups). Set before serving; it outlives the service's use of it.
  void SetReplicator(Replicator* replicator) { replicator_ = replicator; }
  // The checkpoint a replica restored after it started serving (as the primary).
  void SetRestoredFrom(const std::string& path);

  // Writes a checkpoint now (periodic timer, SIGTERM, the RPC); logs the outcome.
  StatusOr<std::string> CheckpointNow();
  // The shard's version when the last checkpoint was written (-1: none yet).
  int64_t checkpointed_version() const { return checkpointed_version_.load(); }
  proto::StatsResponse StatsNow() const;
  // Changes whenever a Push or Pull starts or ends (the main loop notices when traffic
  // pauses).
  int64_t data_calls() const { return data_calls_.load(); }
  // Takes dense links from trainers on other hosts, and from this shard's primary for
  // its stream when this process is a backup, on ports of `host` the OS picks
  // (dense_link_listener.h); before serving. Without it, Attach refuses them.
  Status OpenDenseLinks(const std::string& host);
  int dense_link_port() const { return links_ ? links_->port() : 0; }
  // Lets go of shared-memory regions their trainers stopped using.
  void DropIdleRegions() { regions_.DropIdle(); }

 private:
  // Parses `request` as a Request, runs handler(context, Request&, Response*) and
  // finishes the call with its status and serialised Response: on gRPC's thread when
  // the call cannot wait on other calls (async shard), else on a handler thread.
  template <typename Request, typename Response, typename Handler>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response, Handler handler);
  grpc::Status HandlePull(const grpc::ServerContextBase& context, const proto::PullRequest& request,
                          PullFrame* response);
  grpc::Status HandlePush(const grpc::ServerContextBase& context, PushFrame frame, proto::PushResponse* response);

  // A Replicate call of the primary's stream, made over gRPC or rung in `rung_in` (a
  // doorbell call's region, whose blocks are read in place under `hold`): its entries
  // held in order (Replicator::OnEntry); the version after the last.
  StatusOr<int64_t> ServeStreamCall(ReplicateFrame call, absl::Time deadline,
                                    std::shared_ptr<SharedRegion> rung_in = nullptr,
                                    std::shared_ptr<const void> hold = nullptr);
  ParameterShard* const shard_;
  Replicator* replicator_ = nullptr;
  Checkpointer* const checkpointer_;
  std::string restored_from_;  // set before serving, or once by SetRestoredFrom
  std::atomic<int64_t> checkpoints_written_{0};
  std::atomic<int64_t> checkpointed_version_{-1};
  std::atomic<int64_t> data_calls_{0};
  SharedRegionTable regions_;
  DenseArrivals arrivals_;  // turns what regions_ and the calls carry into blocks
  std::unique_ptr<DenseLinkListener> links_;  // after regions_: they hand lanes to them
  std::unique_ptr<DenseLinkListener> replica_links_;
  HandlerThreads handler_threads_;  // last: joined before the members its tasks use go
};

using ::pl::ResidentBytes;  // paddle_like/core/runtime.h

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_PSERVER_SERVICE_H_
