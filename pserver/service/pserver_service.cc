#include "pserver/service/pserver_service.h"

#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/request_limits.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/bf16.h"

namespace pl::pserver {


namespace {
// Counts a Push or Pull when it starts and again when it ends, so that a long call
// still counts as traffic while it runs.
class DataCall {
 public:
  explicit DataCall(std::atomic<int64_t>* counter) : counter_(counter) { ++*counter_; }
  ~DataCall() { ++*counter_; }

 private:
  std::atomic<int64_t>* counter_;
};

absl::Time DeadlineOf(const grpc::ServerContextBase& context) {
  const auto d = context.deadline();
  // gRPC reports "no deadline" as the far future; keep absl's arithmetic in range.
  if (d >= std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) return absl::InfiniteFuture();
  return absl::FromChrono(d);
}
}  // namespace

PserverService::PserverService(ParameterShard* shard, Checkpointer* checkpointer,
                               std::string restored_from, SharedRegionOptions shm)
    : shard_(shard),
      checkpointer_(checkpointer),
      restored_from_(std::move(restored_from)),
      regions_(shm),
      arrivals_(&regions_, shard) {
  // The restored file already holds this state: no need to write it again.
  if (!restored_from_.empty()) checkpointed_version_ = shard_->version();
}

grpc::Status PserverService::Init(grpc::ServerContext* context, const proto::InitRequest* request,
                                  proto::InitResponse* response) {
  if (grpc::Status s = rpc::CheckProtocol(context); !s.ok()) return s;
  if (grpc::Status s = rpc::LogIfRefused(context, rpc::Authorize(context, {rpc::kTrainers}, "Init")); !s.ok()) return s;
  if (Status s = rpc::CheckStringLengths(*request); !s.ok()) return rpc::ToGrpc(s);
  StatusOr<proto::InitResponse> result = shard_->Init(*request);
  if (!result.ok()) {
    log::Warning(absl::StrCat("Init refused: ", result.status().message()));
    return rpc::ToGrpc(result.status());
  }
  if (result->restored()) {
    log::Warning(absl::StrCat("restored ", request->restore_size(), " dense blocks from a trainer's copy (of version ",
                              request->learned_version(), ") in place of the seed's values: this shard had lost every "
                              "copy; its optimizer state and sparse rows start over"));
  } else if (result->created()) {
    log::Info(absl::StrCat("initialised ", request->params_size(),
                          " parameters (", request->sync() ? "sync" : "async", ", seed ",
                          request->seed(), ")"));
  }
  *response = *std::move(result);
  return grpc::Status::OK;
}

template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* PserverService::Serve(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response, Handler handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The message limit that follows the model: nothing this shard holds needs more.
  const int64_t limit = shard_->largest_request_bytes();
  if (const auto size = static_cast<int64_t>(request->Length()); limit > 0 && size > limit) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("a request of ", size, " bytes is larger than this shard's parameters allow (", limit,
                     " bytes: every value it holds and at most ", ShardStore::kRowsPerPushBound,
                     " rows per table, plus a margin)")));
    return reactor;
  }
  // gRPC keeps context, request and response until Finish. A parsed frame holds its
  // own references to the received slices, so a deferred push outlives the call.
  auto parsed = std::make_shared<Request>();
  grpc::ByteBuffer in(*request);  // shares the received slices; parsing consumes it
  if (grpc::Status s = grpc::SerializationTraits<Request>::Deserialize(&in, parsed.get()); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  auto run = [context, response, reactor, handler, parsed] {
    Response reply;
    grpc::Status s = handler(*context, *parsed, &reply);
    if (s.ok()) {
      bool own_buffer;
      s = grpc::SerializationTraits<Response>::Serialize(reply, response, &own_buffer);
    }
    reactor->Finish(s);
  };
  // A sync shard's Pull waits for the other trainers' pushes (and a push may wait at the
  // barrier, or for a backup): on gRPC's threads that could starve the calls it waits
  // for. Any other shard's calls wait on nothing but locks (a deferred push on its
  // bounded queue).
  if (shard_->calls_may_wait()) {
    handler_threads_.Run(std::move(run));
  } else {
    run();
  }
  return reactor;
}

grpc::ServerUnaryReactor* PserverService::Pull(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return Serve<proto::PullRequest, PullFrame>(
      context, request, response,
      [this](const grpc::ServerContextBase& c, const proto::PullRequest& r, PullFrame* out) {
        return HandlePull(c, r, out);
      });
}

grpc::ServerUnaryReactor* PserverService::Push(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return Serve<PushFrame, proto::PushResponse>(
      context, request, response,
      [this](const grpc::ServerContextBase& c, PushFrame& frame, proto::PushResponse* out) {
        return HandlePush(c, std::move(frame), out);
      });
}

grpc::Status PserverService::HandlePull(const grpc::ServerContextBase& context, const proto::PullRequest& request,
                                        PullFrame* response) {
  if (grpc::Status s = rpc::CheckProtocol(&context); !s.ok()) return s;
  if (grpc::Status s = rpc::LogIfRefused(&context, rpc::Authorize(&context, {rpc::kTrainers}, "Pull")); !s.ok()) return s;
  if (Status s = rpc::CheckStringLengths(request); !s.ok()) return rpc::ToGrpc(s);
  DataCall counted(&data_calls_);
  const absl::Time deadline = DeadlineOf(context);
  return rpc::ToGrpc(arrivals_.ServePull(
      request, [&](const DenseDestination& to) { return shard_->Pull(request, deadline, response, to); }));
}

grpc::ServerUnaryReactor* PserverService::Replicate(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Serve<ReplicateFrame, proto::ReplicateResponse>(
      context, request, response,
      [this](const grpc::ServerContextBase& c, ReplicateFrame& frame, proto::ReplicateResponse* out) {
        if (grpc::Status s = rpc::CheckProtocol(&c); !s.ok()) return s;
        // Only the shard's own pservers: a trainer's certificate cannot write the stream.
        if (grpc::Status s = rpc::LogIfRefused(&c, rpc::Authorize(&c, {rpc::PserverOf(shard_->index())}, "Replicate"));
            !s.ok()) {
          return s;
        }
        DataCall counted(&data_calls_);
        StatusOr<int64_t> version = ServeStreamCall(std::move(frame), DeadlineOf(c));
        if (!version.ok()) return rpc::ToGrpc(version.status());
        out->set_version(*version);
        return grpc::Status::OK;
      });
}

StatusOr<int64_t> PserverService::ServeStreamCall(ReplicateFrame call, absl::Time deadline,
                                                  std::shared_ptr<SharedRegion> rung_in,
                                                  std::shared_ptr<const void> hold) {
  if (replicator_ == nullptr) return absl::InvalidArgumentError("this pserver is not replicated");
  if (const absl::Duration d = replicator_->slow_stream_call(); d > absl::ZeroDuration()) absl::SleepFor(d);
  const int64_t epoch = call.header().epoch();
  PL_ASSIGN_OR_RETURN(std::vector<StreamApplier::Update> updates,
                      arrivals_.ReceiveStream(std::move(call), deadline, std::move(rung_in), std::move(hold)));
  // In stream order; one refused stops the call, and the primary gives up on this
  // replica (the entries before it are held, and a retry would not apply them twice).
  int64_t version = 0;
  for (StreamApplier::Update& update : updates) {
    PL_ASSIGN_OR_RETURN(version, replicator_->OnEntry(epoch, std::move(update)));
  }
  return version;
}

grpc::Status PserverService::HandlePush(const grpc::ServerContextBase& context, PushFrame frame,
                                        proto::PushResponse* response) {
  if (grpc::Status s = rpc::CheckProtocol(&context); !s.ok()) return s;
  if (grpc::Status s = rpc::LogIfRefused(&context, rpc::Authorize(&context, {rpc::kTrainers}, "Push")); !s.ok()) {
    return s;
  }
  DataCall counted(&data_calls_);
  const absl::Time deadline = DeadlineOf(context);
  StatusOr<std::unique_ptr<ArrivedPush>> arrived = arrivals_.ReceivePush(std::move(frame), deadline);
  if (!arrived.ok()) return rpc::ToGrpc(arrived.status());
  StatusOr<int64_t> version = shard_->Push(std::move((*arrived)->frame()), deadline, (*arrived)->write_back());
  if (!version.ok()) return rpc::ToGrpc(version.status());
  if (Status sent = (*arrived)->Finish(); !sent.ok()) return rpc::ToGrpc(sent);
  response->set_version(*version);
  return grpc::Status::OK;
}

proto::StatsResponse PserverService::StatsNow() const {
  const ShardCounters c = shard_->Counters();
  proto::StatsResponse r;
  r.set_index(shard_->index());
  r.set_version(c.version);
  r.set_dense_elements(c.dense_elements);
  r.set_sparse_rows(c.sparse_rows);
  r.set_pushes_applied(c.pushes_applied);
  r.set_pushes_rejected(c.pushes_rejected);
  r.set_pushes_refused_norm(c.pushes_refused_norm);
  r.set_pulls(c.pulls);
  r.set_sparse_rows_pulled(c.sparse_rows_pulled);
  r.set_sparse_rows_pushed(c.sparse_rows_pushed);
  r.set_checkpoints_written(checkpoints_written_.load());
  r.set_restored_from(restored_from_);
  r.set_rss_bytes(ResidentBytes());
  const SharedRegionTable::Totals shm = regions_.Count(/*linked=*/false), links = regions_.Count(/*linked=*/true);
  r.set_shm_regions(shm.regions);
  r.set_shm_bytes(shm.bytes);
  r.set_dense_links(links.regions);
  r.set_dense_link_bytes(links.bytes);
  if (replicator_ != nullptr) {
    r.set_replica_role(proto::ReplicaInfo::Role_Name(replicator_->role()));
    r.set_replica_epoch(replicator_->epoch());
    const StreamCounters& sent = replicator_->stream_counters();
    r.set_stream_entries_linked(sent.linked_entries.load());
    r.set_stream_entries_inline(sent.inline_entries.load());
    r.set_stream_entries_shm(sent.shm_entries.load());
    r.set_stream_calls(sent.calls.load());
    r.set_stream_calls_rung(sent.rung_calls.load());
    r.set_stream_dense_bytes(sent.dense_bytes.load());
  }
  r.set_push_clients(shard_->ledger_clients());
  r.set_largest_request_bytes(shard_->largest_request_bytes());
  r.set_sparse_memory_cap_bytes(shard_->eviction().cap_bytes());
  r.set_sparse_bytes(shard_->eviction().bytes());
  r.set_sparse_disk_bytes(shard_->tables().disk_bytes());
  for (proto::TableStats& t : shard_->tables().Stats()) *r.add_tables() = std::move(t);
  return r;
}

grpc::Status PserverService::Stats(grpc::ServerContext* context, const proto::StatsRequest*,
                                   proto::StatsResponse* response) {
  if (grpc::Status s = rpc::CheckProtocol(context); !s.ok()) return s;
  if (grpc::Status s = rpc::LogIfRefused(context, rpc::AuthorizeJobProcess(context, "Stats")); !s.ok()) return s;
  *response = StatsNow();
  return grpc::Status::OK;
}

grpc::Status PserverService::Attach(grpc::ServerContext* context, const proto::AttachRequest* request,
                                    proto::AttachResponse* response) {
  if (grpc::Status s = rpc::CheckProtocol(context); !s.ok()) return s;
  if (request->replica_stream()) {
    const rpc::Allowed replicas = rpc::PserverOf(shard_->index());
    if (grpc::Status s = rpc::LogIfRefused(context, rpc::Authorize(context, {replicas}, "Attach")); !s.ok()) return s;
  } else {
    if (grpc::Status s = rpc::LogIfRefused(context, rpc::Authorize(context, {rpc::kTrainers}, "Attach")); !s.ok()) {
      return s;
    }
  }
  if (Status s = rpc::CheckStringLengths(*request); !s.ok()) return rpc::ToGrpc(s);
  if (request->link_lanes() > 0 && request->shm_name().empty()) {
    const DenseLinkListener* listener = request->replica_stream() ? replica_links_.get() : links_.get();
    if (listener == nullptr) {
      return rpc::ToGrpc(absl::FailedPreconditionError("this pserver takes no dense links (--dense_link=false)"));
    }
    StatusOr<LinkedRegion> linked = regions_.AttachLinked(*request);
    if (!linked.ok()) return rpc::ToGrpc(linked.status());
    log::Info(absl::StrFormat("%s opens a dense link of %d lanes each way for %.1f MB (region %d)",
                              request->replica_stream() ? std::string("the primary's stream")
                                                        : absl::StrCat("trainer ", request->trainer_id()),
                              request->link_lanes(), request->shm_bytes() / 1e6, linked->id));
    response->set_region(linked->id);
    response->set_link_port(listener->port());
    response->set_link_bf16(true);
    response->set_stream_batches(request->replica_stream());
    response->set_link_token(listener->token());
    response->set_region_token(linked->token);
    return grpc::Status::OK;
  }
  DoorbellServer::Handler doorbell;
  if (request->replica_stream() && request->stream_doorbell()) {
    // The region's own calls: never through regions_.Find (see SharedRegionTable::Attach).
    doorbell = [this](proto::ReplicateRequest header, const std::shared_ptr<SharedRegion>& region,
                      const std::shared_ptr<const void>& hold) {
      DataCall counted(&data_calls_);
      ReplicateFrame call;
      call.header() = std::move(header);
      return ServeStreamCall(std::move(call), absl::InfiniteFuture(), region, hold);
    };
  }
  StatusOr<uint64_t> id = regions_.Attach(*request, std::move(doorbell));
  if (!id.ok()) return rpc::ToGrpc(id.status());
  log::Info(absl::StrFormat("%s attached %.1f MB of shared memory (region %d)",
                           request->replica_stream() ? std::string("the primary's stream")
                                                     : absl::StrCat("trainer ", request->trainer_id()),
                           request->shm_bytes() / 1e6, *id));
  response->set_region(*id);
  // The stream's bfloat16 entries are decoded from the region (DenseArrivals::FrameFromRegion).
  if (request->replica_stream()) {
    response->set_link_bf16(true);
    response->set_stream_batches(true);
    response->set_stream_doorbell(request->stream_doorbell());
  }
  return grpc::Status::OK;
}

Status PserverService::OpenDenseLinks(const std::string& host) {
  PL_ASSIGN_OR_RETURN(links_, DenseLinkListener::Open(host, &regions_, rpc::kTrainerIdentity));
  PL_ASSIGN_OR_RETURN(replica_links_,
                      DenseLinkListener::Open(host, &regions_, rpc::PserverIdentity(shard_->index())));
  return absl::OkStatus();
}

void PserverService::SetRestoredFrom(const std::string& path) {
  restored_from_ = path;
  if (!path.empty()) checkpointed_version_ = shard_->version();
}

grpc::Status PserverService::InstallSnapshot(grpc::ServerContext* context, const proto::SnapshotChunk* request,
                                             proto::SnapshotAck* response) {
  if (grpc::Status s = rpc::CheckProtocol(context); !s.ok()) return s;
  if (grpc::Status s = rpc::LogIfRefused(context, rpc::Authorize(context, {rpc::PserverOf(shard_->index())}, "InstallSnapshot"));
      !s.ok()) {
    return s;
  }
  if (replicator_ == nullptr) return rpc::ToGrpc(absl::InvalidArgumentError("this pserver is not replicated"));
  // The primary's stream region on this host, when the snapshot comes through it.
  std::shared_ptr<SharedRegion> region;
  if (request->shm_region() != 0) {
    StatusOr<RegionRef> found = regions_.Find(request->shm_region());
    if (found.ok() && found->link == nullptr) region = found->region;
  }
  return rpc::ToGrpc(replicator_->OnSnapshotChunk(*request, std::move(region), response));
}

StatusOr<std::string> PserverService::CheckpointNow() {
  if (checkpointer_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("pserver ", shard_->index(), " has no checkpoint directory (--checkpoint_dir)"));
  }
  const int64_t version = shard_->version();
  const absl::Time start = absl::Now();
  StatusOr<std::string> path = checkpointer_->Save(*shard_);
  if (!path.ok()) {
    log::Error(absl::StrCat("checkpoint failed: ", path.status().message()));
    return path.status();
  }
  ++checkpoints_written_;
  checkpointed_version_ = version;
  log::Info(absl::StrCat("checkpoint ", *path, " written (version ",
                        version, ", ", absl::FormatDuration(absl::Now() - start), ")"));
  return path;
}

grpc::Status PserverService::Checkpoint(grpc::ServerContext* context, const proto::CheckpointRequest*,
                                        proto::CheckpointResponse* response) {
  if (grpc::Status s = rpc::CheckProtocol(context); !s.ok()) return s;
  if (grpc::Status s = rpc::LogIfRefused(context, rpc::AuthorizeJobProcess(context, "Checkpoint")); !s.ok()) return s;
  StatusOr<std::string> path = CheckpointNow();
  if (!path.ok()) return rpc::ToGrpc(path.status());
  response->set_path(*path);
  return grpc::Status::OK;
}

}  // namespace pl::pserver
