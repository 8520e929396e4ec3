// SnapshotReceiver: a joiner's side of its snapshot, in gRPC pieces, read off sockets
// (snapshot_lanes.h) that the primary's first InstallSnapshot call opens, or out of the
// windows of its stream's shared memory (snapshot_windows.h). See snapshot_receiver.h.
#include "pserver/replication/snapshot_receiver.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/snapshot_lanes.h"
#include "paddle_like/rpc/caller.h"

namespace pl::pserver {
namespace {

// The primary dials right after the call that opened the socket returns.
constexpr absl::Duration kSocketAcceptWithin = absl::Seconds(30);
// A sender that moves no byte for this long is taken for dead.
constexpr absl::Duration kSocketIdle = absl::Seconds(30);

}  // namespace

SnapshotReceiver::SnapshotReceiver(Options options, Hooks hooks, absl::Mutex* follow_mu)
    : options_(std::move(options)), hooks_(std::move(hooks)), follow_mu_(follow_mu) {}

SnapshotReceiver::~SnapshotReceiver() { Stop(); }

void SnapshotReceiver::Stop() {
  std::unique_ptr<Transfer> transfer;
  {
    absl::MutexLock l(&socket_mu_);
    transfer.swap(transfer_);
  }
  transfer.reset();  // no lock held: its thread takes follow_mu_
}

SnapshotReceiver::Transfer::~Transfer() {
  cancel = true;
  if (windows != nullptr) windows->Cancel();
  if (thread.joinable()) thread.join();
}

StatusOr<ParameterShard*> SnapshotReceiver::Accept(const proto::SnapshotChunk& chunk) {
  PL_ASSIGN_OR_RETURN(ParameterShard * shard, hooks_.accept(chunk));
  if (installed_) {
    hooks_.fatal("a second snapshot arrived after one was installed; restart to join afresh");
    return absl::FailedPreconditionError("snapshot already installed");
  }
  const int64_t total = chunk.total();
  if (total <= 0 || total >= (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("a snapshot announces a size of ", total, " bytes"));
  }
  return shard;
}

void SnapshotReceiver::Installed(const ParameterShard& shard, int64_t position) {
  joined_trained_ = shard.version() > 0;
  if (joined_trained_) absl::SleepFor(options_.slow_joiner * 40);
  hooks_.installed(position);
  installed_ = true;
}

Status SnapshotReceiver::OnChunk(const proto::SnapshotChunk& chunk, std::shared_ptr<SharedRegion> region,
                                 proto::SnapshotAck* ack) {
  if (chunk.open_socket()) return OpenSocket(chunk, ack);
  if (chunk.shm_open()) return OpenWindows(chunk, std::move(region), ack);
  if (chunk.shm_bytes() > 0) return DeliverWindow(chunk, ack);
  absl::MutexLock follow(follow_mu_);
  PL_ASSIGN_OR_RETURN(ParameterShard * shard, Accept(chunk));
  // Pieces come several at a time, in any order: each lands at its offset in a buffer
  // of the announced size, and the snapshot is installed once all its bytes are in.
  const int64_t total = chunk.total();
  if (total_ == 0) {
    buffer_.reset(new char[total]);  // not zeroed: every byte is written once
    total_ = total;
    received_ = 0;
    offsets_.clear();
  }
  const int64_t n = static_cast<int64_t>(chunk.data().size());
  if (total != total_ || chunk.offset() < 0 || n > total - chunk.offset() ||
      !offsets_.insert(chunk.offset()).second) {
    return absl::FailedPreconditionError(absl::StrCat("a snapshot piece of ", n, " bytes at ", chunk.offset(),
                                                      " does not fit the snapshot of ", total_,
                                                      " bytes under way (or came twice)"));
  }
  std::memcpy(buffer_.get() + chunk.offset(), chunk.data().data(), n);
  received_ += n;
  const int64_t received = received_;
  ack->set_received(received);
  if (received < total_) return absl::OkStatus();
  const absl::Time load_start = absl::Now();
  if (Status s = shard->LoadSnapshot(std::string_view(buffer_.get(), total_)); !s.ok()) {
    hooks_.fatal(absl::StrCat("cannot install the primary's snapshot: ", s.message()));
    return s;
  }
  buffer_.reset();
  total_ = 0;
  Installed(*shard, chunk.seq());
  log::Info(absl::StrFormat("shard %d: installed the primary's snapshot (%.1f MB in pieces, version %d, position %d; "
                            "loading it took %s)",
                            options_.index, received / 1e6, shard->version(), chunk.seq(),
                            absl::FormatDuration(absl::Now() - load_start)));
  return absl::OkStatus();
}

Status SnapshotReceiver::OpenSocket(const proto::SnapshotChunk& chunk, proto::SnapshotAck* ack) {
  if (!options_.socket) return absl::OkStatus();  // no port: the pieces follow
  PL_RETURN_IF_ERROR(hooks_.check_offer(chunk));
  absl::MutexLock socket(&socket_mu_);
  transfer_.reset();  // an earlier primary's offer: its wait (or its transfer) ends
  {
    absl::MutexLock follow(follow_mu_);
    PL_RETURN_IF_ERROR(Accept(chunk).status());
  }
  auto install = std::make_unique<Transfer>();
  PL_ASSIGN_OR_RETURN(install->listener, rpc::BulkListener::Open(options_.listen_host, &install->cancel,
                                                                         rpc::PserverIdentity(options_.index)));
  const int lanes = std::clamp(std::min(chunk.socket_lanes(), options_.lanes), 1, kMaxSnapshotLanes);
  ack->set_socket_port(install->listener->port());
  ack->set_socket_token(install->listener->token());
  ack->set_socket_lanes(lanes);
  Transfer* raw = install.get();
  install->thread = std::thread([this, raw, chunk, lanes] { InstallFromSocket(raw, chunk, lanes); });
  transfer_ = std::move(install);
  return absl::OkStatus();
}

Status SnapshotReceiver::InstallStreamed(const proto::SnapshotChunk& chunk, const ByteReader& read,
                                         const ScatterReader& scatter, int64_t* version) {
  absl::MutexLock follow(follow_mu_);
  PL_ASSIGN_OR_RETURN(ParameterShard * shard, Accept(chunk));  // still joining, still this epoch
  uint64_t left = static_cast<uint64_t>(chunk.total());
  auto take = [&](uint64_t n) -> Status {
    if (n > left) return absl::DataLossError(absl::StrCat("the snapshot runs past its ", chunk.total(), " bytes"));
    left -= n;
    return absl::OkStatus();
  };
  // Straight into the shard's blocks and rows: no buffer.
  Status s = shard->LoadSnapshot(
      [&](void* data, size_t n) -> Status {
        PL_RETURN_IF_ERROR(take(n));
        return read(data, n);
      },
      [&](const ByteSpans& spans) -> Status {
        uint64_t n = 0;
        for (const absl::Span<char>& span : spans) n += span.size();
        PL_RETURN_IF_ERROR(take(n));
        return scatter(spans);
      });
  if (s.ok() && left != 0) s = absl::DataLossError(absl::StrCat(left, " bytes of the snapshot were not read"));
  if (s.ok()) {
    *version = shard->version();
    Installed(*shard, chunk.seq());
  } else if (!absl::IsCancelled(s)) {
    // A shard half read, or a disk tier holding part of it: only a fresh start is clean.
    hooks_.fatal(absl::StrCat("cannot install the primary's snapshot: ", s.message()));
  }
  return s;
}

Status SnapshotReceiver::OpenWindows(const proto::SnapshotChunk& chunk, std::shared_ptr<SharedRegion> region,
                                     proto::SnapshotAck* ack) {
  // Not taken (the windows do not follow; the primary sends it another way): off here,
  // or a region this process does not hold (dropped as idle, say).
  if (!options_.shared_memory || region == nullptr) return absl::OkStatus();
  PL_RETURN_IF_ERROR(hooks_.check_offer(chunk));
  absl::MutexLock socket(&socket_mu_);
  transfer_.reset();  // an earlier primary's offer: its transfer ends
  {
    absl::MutexLock follow(follow_mu_);
    PL_RETURN_IF_ERROR(Accept(chunk).status());
  }
  auto install = std::make_unique<Transfer>();
  install->windows =
      std::make_shared<SnapshotWindows>(std::move(region), static_cast<uint64_t>(chunk.total()), kSocketIdle);
  SnapshotWindows* windows = install->windows.get();
  install->thread = std::thread([this, windows, chunk] { InstallFromWindows(windows, chunk); });
  transfer_ = std::move(install);
  ack->set_shm_taken(true);
  return absl::OkStatus();
}

void SnapshotReceiver::InstallFromWindows(SnapshotWindows* windows, const proto::SnapshotChunk& chunk) {
  const absl::Time start = absl::Now();
  int64_t version = 0;
  const Status s = InstallStreamed(
      chunk, [windows](void* data, size_t n) { return windows->Read(data, n); },
      [windows](const ByteSpans& spans) { return windows->Scatter(spans); }, &version);
  // The primary's last window returns with this.
  windows->Finish(s);
  if (s.ok()) {
    log::Info(absl::StrFormat(
        "shard %d: installed the primary's snapshot (%.1f MB through shared memory, version %d, "
        "position %d; receiving and loading it took %s)",
        options_.index, chunk.total() / 1e6, version, chunk.seq(), absl::FormatDuration(absl::Now() - start)));
  }
}

Status SnapshotReceiver::DeliverWindow(const proto::SnapshotChunk& chunk, proto::SnapshotAck* ack) {
  std::shared_ptr<SnapshotWindows> windows;
  {
    absl::MutexLock socket(&socket_mu_);
    if (transfer_ != nullptr) windows = transfer_->windows;
  }
  if (windows == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("a snapshot window at byte ", chunk.offset(),
                                                      " came with no transfer through shared memory open"));
  }
  PL_RETURN_IF_ERROR(hooks_.check_offer(chunk));
  PL_RETURN_IF_ERROR(windows->Deliver(static_cast<uint64_t>(chunk.offset()), static_cast<uint64_t>(chunk.shm_offset()),
                                      static_cast<uint64_t>(chunk.shm_bytes())));
  ack->set_received(chunk.offset() + chunk.shm_bytes());
  return absl::OkStatus();
}

void SnapshotReceiver::InstallFromSocket(Transfer* install, const proto::SnapshotChunk& chunk, int lanes) {
  const absl::Time offered = absl::Now();
  StatusOr<std::unique_ptr<LaneReceiver>> receiver =
      LaneReceiver::Accept(install->listener.get(), lanes, absl::Now() + kSocketAcceptWithin);
  if (!receiver.ok()) {
    if (!absl::IsCancelled(receiver.status())) {
      log::Warning(absl::StrCat("shard ", options_.index, ": the primary never connected for its snapshot: ",
                                receiver.status().message()));
    }
    return;
  }
  LaneReceiver& in = **receiver;
  const absl::Time start = absl::Now();
  const absl::Duration connecting = start - offered;  // the primary's dial and every lane's handshake
  int64_t version = 0;
  const Status s = InstallStreamed(
      chunk, [&](void* data, size_t n) { return in.Read(data, n, kSocketIdle); },
      [&](const ByteSpans& spans) { return in.Scatter(spans, kSocketIdle); }, &version);
  // The primary starts the stream once it reads this.
  (void)in.Reply(s, kSocketIdle);
  if (s.ok()) {
    log::Info(absl::StrFormat("shard %d: installed the primary's snapshot (%.1f MB over %s, version %d, position %d; "
                              "connecting took %s, receiving and loading it %s)",
                              options_.index, chunk.total() / 1e6,
                              in.lanes() == 1 ? "a socket" : absl::StrCat(in.lanes(), " sockets"), version, chunk.seq(),
                              absl::FormatDuration(connecting), absl::FormatDuration(absl::Now() - start)));
  }
}

}  // namespace pl::pserver
