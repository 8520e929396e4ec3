#include "pserver/replication/replica_stream.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/client/dense_channel_attach.h"
#include "paddle_like/core/log.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"

namespace pl::pserver {

namespace {

bool HasDense(const StreamEntry& entry) { return entry.push != nullptr && !entry.push->dense().empty(); }

// The entry as a Replicate call names it, its push's dense blocks left out (they go
// inline beside it or through a region).
proto::ReplicaEntry EntryMessage(const StreamEntry& entry) {
  proto::ReplicaEntry e;
  e.set_position(entry.position);
  if (entry.push) {
    *e.mutable_push() = entry.push->header();
  } else if (entry.init) {
    *e.mutable_init() = *entry.init;
  } else if (entry.eviction) {
    *e.mutable_eviction() = *entry.eviction;
  } else {
    e.set_step_end(entry.step_end);
  }
  return e;
}

}  // namespace

ReplicaStream::ReplicaStream(Options options, ShardSnapshot snapshot, int64_t start, int64_t epoch)
    : options_(std::move(options)),
      counters_(options_.counters != nullptr ? options_.counters : &own_counters_),
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
  cancel_ = true;
  {
    absl::MutexLock l(&calls_mu_);
    for (grpc::ClientContext* call : calls_) call->TryCancel();
  }
  thread_.join();
  region_channel_.reset();  // a link's lanes poll cancel_: gone before it is
}

ReplicaStream::Call::Call(ReplicaStream* stream)
    : stream_(stream),
      context_(rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(stream->options_.call_timeout)))) {
  absl::MutexLock l(&stream_->calls_mu_);
  stream_->calls_.insert(context_.get());
  // The destructor set cancel_ before it cancelled the calls it found: one made since
  // cancels itself.
  if (stream_->cancel_) context_->TryCancel();
}

ReplicaStream::Call::~Call() {
  absl::MutexLock l(&stream_->calls_mu_);
  stream_->calls_.erase(context_.get());
}

int64_t StreamEntryBytes(const StreamEntry& entry) {
  int64_t bytes = 0;
  if (entry.push) {
    bytes += static_cast<int64_t>(entry.push->header().ByteSizeLong());
    for (const DenseFramePayload& d : entry.push->dense()) bytes += d.values.num_bytes();
  }
  if (entry.init) bytes += static_cast<int64_t>(entry.init->ByteSizeLong());
  return bytes;
}

void ReplicaStream::Append(StreamEntry entry) {
  absl::MutexLock l(&mu_);
  backlog_bytes_ += entry.bytes;
  queue_.push_back(std::move(entry));
}

int64_t ReplicaStream::backlog_bytes() const {
  absl::MutexLock l(&mu_);
  return backlog_bytes_;
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

std::string ReplicaStream::snapshot_how() const {
  absl::MutexLock l(&mu_);
  return snapshot_how_;
}

void ReplicaStream::Run() {
  Status st;
  if (!snapshot_.empty()) {
    const absl::Time start = absl::Now();
    st = SendSnapshot();
    snapshot_.Release();
    absl::MutexLock l(&mu_);
    snapshot_sent_ = st.ok();
    snapshot_time_ = absl::Now() - start;
  }
  while (st.ok()) {
    std::vector<StreamEntry> entries;
    int64_t bytes = 0;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      // The entries that queued while the last call was out go in one call when the
      // region takes them all: one round trip for several trainers' pushes.
      int64_t payload = 0;
      do {
        bytes += queue_.front().bytes;
        entries.push_back(std::move(queue_.front()));
        queue_.pop_front();
      } while (!queue_.empty() && entries.size() < kMaxEntriesPerCall &&
               Batches(entries.front(), queue_.front(), &payload));
    }
    // Borrowed payloads are read through their loans while this call sends them.
    std::vector<PushLoan::Reading> readings;
    for (StreamEntry& e : entries) {
      if (e.loan == nullptr) continue;
      readings.push_back(e.loan->Read());
      e.push = readings.back().frame();
    }
    st = entries.size() == 1 ? Send(entries.front()) : SendBatch(entries);
    const int64_t last = entries.back().position;
    // Let go of them before the acknowledgement: the pushes' calls settle their loans
    // once acknowledged, and one still held here would make them copy for nothing.
    readings.clear();
    entries.clear();
    {
      absl::MutexLock l(&mu_);
      backlog_bytes_ -= bytes;
      if (st.ok()) acked_ = last;
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
  SnapshotTransfer t;
  {
    absl::MutexLock l(&mu_);
    t.header.set_seq(acked_);
  }
  t.header.set_replica_epoch(epoch_);
  t.header.set_total(static_cast<int64_t>(snapshot_.size()));
  t.header.set_replica_id(options_.replica_id);
  t.payload = snapshot_.payload_bytes();
  t.read = [this](uint64_t from, uint64_t to, const ByteWriter& write) { return snapshot_.Send(from, to, write); };
  t.install = [this](const proto::SnapshotChunk& chunk, proto::SnapshotAck* ack) {
    Call call(this);
    return rpc::FromGrpc(stub_->InstallSnapshot(call.get(), chunk, ack));
  };
  t.lanes = options_.snapshot_socket ? options_.snapshot_lanes : 0;
  t.host = rpc::HostOf(options_.address);
  t.peer = rpc::PserverIdentity(options_.index);
  t.piece_bytes = options_.snapshot_piece_bytes;
  t.pieces_in_flight = options_.snapshot_calls_in_flight;
  t.timeout = options_.call_timeout;
  t.cancel = &cancel_;
  std::string how;
  t.how = &how;
  // Through the stream's own channel where it carries snapshots: shared memory with a
  // joiner on this host (a window in each half of the region). The region is let go
  // after it, for one sized by the entries (the replica drops the old one when the
  // stream attaches again), so catch-up's windows do not hold memory for the job's rest.
  // Else over the gRPC channel: sockets of its own, or pieces.
  if (options_.snapshot_shm && options_.shared_memory && !shm_refused_) {
    const int64_t window = std::min<int64_t>(ShmDenseChannel::kSnapshotWindowBytes, (t.header.total() + 63) & ~63);
    // The region holds twice what it is opened for: a window in each half.
    if (OpenRegion(window, /*shm_only=*/true).ok() && shm_channel_ != nullptr) {
      const Status sent = region_channel_->SendSnapshot(t);
      DropRegion();
      if (!absl::IsUnimplemented(sent)) return Sent(sent, how);
      log::Info(absl::StrCat("shard ", options_.index, ": the snapshot for replica ", absl::Hex(options_.replica_id),
                             " goes another way than shared memory: ", sent.message()));
    }
    DropRegion();
  }
  return Sent(inline_.SendSnapshot(t), how);
}

Status ReplicaStream::Sent(const Status& sent, const std::string& how) {
  absl::MutexLock l(&mu_);
  snapshot_how_ = how;
  return sent;
}

Status ReplicaStream::Send(const StreamEntry& entry, bool count_bytes) {
  if (count_bytes && entry.push) {
    for (const DenseFramePayload& d : entry.push->dense()) counters_->dense_bytes += d.values.num_bytes();
  }
  // A replica of an older build reads only float32 from a region: a bfloat16 entry goes
  // inline beside it (UNIMPLEMENTED), and the region stays for the entries around it.
  if (HasDense(entry) && MayUseRegion()) {
    const bool shm = region_channel_ != nullptr ? shm_channel_ != nullptr : options_.shared_memory && !shm_refused_;
    Status sent = SendThroughRegion({&entry});
    if (!absl::IsAborted(sent) && !absl::IsUnimplemented(sent)) {
      if (sent.ok()) ++(shm_channel_ != nullptr ? counters_->shm_entries : counters_->linked_entries);
      return sent;
    }
    if (absl::IsAborted(sent)) {
      // The link failed, or the replica let the region go (unused for its idle timeout):
      // the entry goes inline and the next one asks for a new region. A backup that
      // applied it already knows its position and does not apply it twice.
      if (region_channel_ != nullptr) {
        log::Warning(absl::StrCat("shard ", options_.index, ": the ", shm ? "shared memory" : "dense link",
                                  " to replica ", absl::Hex(options_.replica_id), " (", options_.address,
                                  ") failed: ", sent.message(), "; sending inline"));
      }
      DropRegion();
    }
  }
  ++counters_->inline_entries;
  ++counters_->calls;
  ReplicateFrame call_frame;
  call_frame.header().set_epoch(epoch_);
  *call_frame.header().add_entries() = EntryMessage(entry);
  std::vector<const PushFrame*> pushes;
  if (entry.push) pushes.push_back(entry.push.get());
  Call call(this);
  proto::ReplicateResponse resp;
  return inline_.Replicate(*frames_, call.get(), call_frame, pushes, &resp);
}

bool ReplicaStream::Batches(const StreamEntry& first, const StreamEntry& next, int64_t* payload) const {
  // Only behind an entry that goes through the region, and into a region that holds
  // them all (its thread alone touches the channel, and this is its thread).
  if (region_channel_ == nullptr || !region_channel_->stream_abilities().batches || !HasDense(first)) return false;
  if (*payload == 0) *payload = RegionDenseChannel::PackedBytes({first.push.get()});
  const int64_t aligned = (*payload + 3) & ~int64_t{3};  // where next's blocks would start
  const int64_t with_next = next.push ? aligned + RegionDenseChannel::PackedBytes({next.push.get()}) : *payload;
  if (with_next > region_channel_->stream_room()) return false;
  *payload = with_next;
  return true;
}

Status ReplicaStream::SendBatch(const std::vector<StreamEntry>& entries) {
  std::vector<const StreamEntry*> batch;
  for (const StreamEntry& e : entries) {
    batch.push_back(&e);
    if (e.push) {
      for (const DenseFramePayload& d : e.push->dense()) counters_->dense_bytes += d.values.num_bytes();
    }
  }
  const bool shm = shm_channel_ != nullptr;
  Status sent = SendThroughRegion(batch);
  if (sent.ok()) {
    (shm_channel_ != nullptr ? counters_->shm_entries : counters_->linked_entries) +=
        static_cast<int64_t>(entries.size());
    return sent;
  }
  if (!absl::IsAborted(sent) && !absl::IsUnimplemented(sent)) return sent;
  if (absl::IsAborted(sent)) {
    log::Warning(absl::StrCat("shard ", options_.index, ": the ", shm ? "shared memory" : "dense link", " to replica ",
                              absl::Hex(options_.replica_id), " (", options_.address, ") failed: ", sent.message(),
                              "; sending ", entries.size(), " entries one by one"));
    DropRegion();
  }
  // One by one, as they would have gone (a backup that holds some already knows their
  // positions and does not apply them twice); their bytes are counted once.
  for (const StreamEntry& e : entries) {
    sent = Send(e, /*count_bytes=*/false);
    if (!sent.ok()) break;
  }
  return sent;
}

void ReplicaStream::DropRegion() {
  shm_channel_ = nullptr;
  region_channel_.reset();
}

Status ReplicaStream::OpenRegion(int64_t payload_bytes, bool shm_only) {
  ChannelOffer offer;
  offer.index = options_.index;
  offer.address = options_.address;
  offer.client_id = options_.replica_id ^ 0x53545245414d4c4bULL;  // not a trainer's
  // Room for twice this entry (a shard's pushes carry its dense blocks, so they are
  // alike, and a somewhat larger one still fits), and for a rung call's header.
  offer.area_bytes = payload_bytes + kDoorbellRoom / 2;
  offer.call_timeout = options_.call_timeout;
  offer.link_lanes = options_.dense_link_lanes;
  offer.replica_stream = true;
  offer.doorbell = options_.doorbell;
  offer.cancel = &cancel_;
  offer.attach_call = [this](const proto::AttachRequest& request, proto::AttachResponse* response) {
    Call call(this);
    return rpc::FromGrpc(stub_->Attach(call.get(), request, response));
  };
  if (options_.shared_memory && !shm_refused_) {
    ChannelAttach attached = AttachSharedMemory(*stub_, offer);
    if (attached.channel != nullptr) {
      region_channel_ = std::move(attached.channel);
      shm_channel_ = static_cast<ShmDenseChannel*>(region_channel_.get());
      log::Info(absl::StrFormat("shard %d: the stream to replica %x goes through %.1f MB of shared memory, %s",
                                options_.index, options_.replica_id, shm_channel_->region()->total_bytes() / 1e6,
                                shm_channel_->rings() ? "its calls rung there too"
                                                      : "its calls over gRPC (the replica rings no doorbell)"));
      return absl::OkStatus();
    }
    if (attached.refusal.empty()) return absl::AbortedError("the replica could not be asked for shared memory now");
    // Refused for good (another host, say): said once, and the link is asked next.
    shm_refused_ = true;
    log::Info(absl::StrCat("shard ", options_.index, ": replica ", absl::Hex(options_.replica_id),
                           " shares no memory with this process (", attached.refusal, ")"));
  }
  if (shm_only) return absl::UnimplementedError("no shared memory with the replica");
  if (options_.dense_link_lanes <= 0 || link_refused_) {
    return absl::UnimplementedError("neither shared memory nor a dense link reaches the replica");
  }
  ChannelAttach attached = AttachLink(*stub_, offer);
  if (attached.channel != nullptr) {
    region_channel_ = std::move(attached.channel);
    return absl::OkStatus();
  }
  if (!attached.refusal.empty()) {
    // An older build, --dense_link=false, or no route to its port: inline for good.
    link_refused_ = true;
    log::Warning(absl::StrCat("shard ", options_.index, ": no dense link to replica ", absl::Hex(options_.replica_id),
                              " (", attached.refusal, "); its stream's dense blocks go inline"));
  }
  return absl::AbortedError(absl::StrCat("no dense link: ", attached.refusal));
}

Status ReplicaStream::SendThroughRegion(const std::vector<const StreamEntry*>& entries) {
  std::vector<const PushFrame*> pushes;
  for (const StreamEntry* e : entries) {
    if (e->push) pushes.push_back(e->push.get());
  }
  const int64_t payload = RegionDenseChannel::PackedBytes(pushes);
  if (region_channel_ != nullptr && payload > region_channel_->stream_room()) {
    // The region was sized from an earlier, smaller entry (a client pushing some of its
    // keys): a larger one replaces it, and the replica lets the old one go.
    log::Info(absl::StrCat("shard ", options_.index, ": the ", shm_channel_ ? "shared memory" : "dense link",
                           " to replica ", absl::Hex(options_.replica_id),
                           absl::StrFormat(" grows from %.2f to %.2f MB for a larger entry",
                                           region_channel_->stream_room() / 1e6, 2 * payload / 1e6)));
    DropRegion();
  }
  if (region_channel_ == nullptr) PL_RETURN_IF_ERROR(OpenRegion(payload));
  ReplicateFrame call_frame;
  call_frame.header().set_epoch(epoch_);
  for (const StreamEntry* e : entries) *call_frame.header().add_entries() = EntryMessage(*e);
  const int64_t rung_before = shm_channel_ != nullptr ? shm_channel_->rung_calls() : 0;
  Call call(this);
  proto::ReplicateResponse resp;
  const Status sent = region_channel_->Replicate(*frames_, call.get(), call_frame, pushes, &resp);
  if (!absl::IsUnimplemented(sent)) ++counters_->calls;
  if (shm_channel_ != nullptr && shm_channel_->rung_calls() > rung_before) ++counters_->rung_calls;
  return sent;
}

}  // namespace pl::pserver
