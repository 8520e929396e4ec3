#include "pserver/replica_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/rpc.h"

namespace pl::pserver {

ReplicaStream::ReplicaStream(Options options, std::string snapshot, int64_t start, int64_t epoch)
    : options_(std::move(options)),
      epoch_(epoch),
      snapshot_bytes_(static_cast<int64_t>(snapshot.size())),
      snapshot_(std::move(snapshot)) {
  std::shared_ptr<grpc::Channel> channel = rpc::MakeChannel(options_.address);
  stub_ = proto::ParameterServer::NewStub(channel);
  frames_ = std::make_unique<PserverFrameStub>(channel);
  acked_ = start;
  snapshot_sent_ = snapshot_.empty();
  thread_ = std::thread([this] { Run(); });
}

ReplicaStream::~ReplicaStream() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void ReplicaStream::Append(StreamEntry entry) {
  absl::MutexLock l(&mu_);
  queue_.push_back(std::move(entry));
}

int64_t ReplicaStream::acked() const {
  absl::MutexLock l(&mu_);
  return acked_;
}

bool ReplicaStream::snapshot_sent() const {
  absl::MutexLock l(&mu_);
  return snapshot_sent_;
}

Status ReplicaStream::failure() const {
  absl::MutexLock l(&mu_);
  return failure_;
}

absl::Duration ReplicaStream::snapshot_time() const {
  absl::MutexLock l(&mu_);
  return snapshot_time_;
}

void ReplicaStream::Run() {
  Status st;
  if (!snapshot_.empty()) {
    const absl::Time start = absl::Now();
    st = SendSnapshot();
    std::string().swap(snapshot_);
    absl::MutexLock l(&mu_);
    snapshot_sent_ = st.ok();
    snapshot_time_ = absl::Now() - start;
  }
  while (st.ok()) {
    StreamEntry entry;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      entry = std::move(queue_.front());
      queue_.pop_front();
    }
    st = Send(entry);
    if (st.ok()) {
      absl::MutexLock l(&mu_);
      acked_ = entry.position;
    }
    if (options_.on_progress) options_.on_progress();
  }
  {
    absl::MutexLock l(&mu_);
    failure_ = Annotate(st, absl::StrCat("replica ", absl::Hex(options_.replica_id), " at ", options_.address));
  }
  if (options_.on_progress) options_.on_progress();
}

Status ReplicaStream::SendSnapshot() {
  const int64_t total = static_cast<int64_t>(snapshot_.size());
  int64_t start = 0;
  {
    absl::MutexLock l(&mu_);
    start = acked_;
  }
  for (int64_t offset = 0; offset < total;) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return absl::CancelledError("stream stopped");
    }
    const int64_t n = std::min(options_.snapshot_piece_bytes, total - offset);
    proto::SnapshotChunk chunk;
    chunk.set_replica_epoch(epoch_);
    chunk.set_seq(start);
    chunk.set_offset(offset);
    chunk.set_data(snapshot_.data() + offset, n);
    chunk.set_last(offset + n == total);
    chunk.set_total(total);
    chunk.set_replica_id(options_.replica_id);
    proto::SnapshotAck ack;
    auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.call_timeout)));
    PL_RETURN_IF_ERROR(Annotate(rpc::FromGrpc(stub_->InstallSnapshot(ctx.get(), chunk, &ack)), "snapshot"));
    offset += n;
  }
  return absl::OkStatus();
}

Status ReplicaStream::Send(const StreamEntry& entry) {
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.call_timeout)));
  if (entry.init) {
    proto::InitResponse resp;
    return rpc::FromGrpc(stub_->Init(ctx.get(), *entry.init, &resp));
  }
  proto::PushResponse resp;
  return rpc::FromGrpc(frames_->Push(ctx.get(), *entry.push, &resp));
}

}  // namespace pl::pserver
