// ReplicaStream: a replicated shard's primary sending its update stream to one other
// replica. The primary appends entries (pushes, Inits, ends of sync steps) in stream
// order; one thread per stream sends them in that order, one call at a time, and
// records the last position the replica acknowledged. A joining replica's stream first
// sends the shard's snapshot, then the entries after it, over the same channels
// (DenseChannel::SendSnapshot): through the shared memory of the stream to a joiner on
// this host, else over sockets the joiner opens (paddle_like/dist/snapshot_lanes.h) when
// it offers them, else in InstallSnapshot pieces.
//
// Each call is a Replicate (proto::ReplicateRequest) of one or more entries. Their dense
// blocks travel over the same channels as a trainer's (paddle_like/client/
// dense_channel.h): through a shared-memory region when the replica is on this host
// (one copy in, one copy out: no socket, no cipher; and the call itself rung through
// the region, paddle_like/dist/stream_doorbell.h), else over a dense link; else inline
// in the call. Through a region, the entries that queued while a call was out (several
// trainers' pushes) go in the next call together, as far as the region holds them.
//
// A call that fails ends the stream for good: the primary asks the master to drop
// that replica (which then exits and joins again from a fresh snapshot), because a
// replica that missed an entry can never be trusted with the ones after it.
//
// Thread-safety: thread-safe. `on_progress` is called on the stream's thread, with no
// lock of the stream held, after every acknowledgement and on failure.
#ifndef PSERVER_REPLICATION_REPLICA_STREAM_H_
#define PSERVER_REPLICATION_REPLICA_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "paddle_like/client/grpc_dense_channel.h"
#include "paddle_like/client/region_dense_channel.h"
#include "proto/pserver.grpc.pb.h"
#include "pserver/store/push_loan.h"
#include "pserver/store/shard_snapshot.h"

namespace pl::pserver {

// One update of the stream, shared by the streams of every replica: exactly one of
// push, init, step_end and eviction (proto::ReplicaEntry).
struct StreamEntry {
  int64_t position = 0;
  std::shared_ptr<const PushFrame> push;            // a trainer's push
  std::shared_ptr<const proto::InitRequest> init;   // or an Init
  int32_t step_end = 0;                             // or the end of a sync step
  std::shared_ptr<const proto::Eviction> eviction;  // or rows evicted
  // Set when the push's payloads are borrowed (push_loan.h): read them through it.
  std::shared_ptr<PushLoan> loan;
  int64_t bytes = 0;  // its size (StreamEntryBytes), counted in a stream's backlog
};
int64_t StreamEntryBytes(const StreamEntry& entry);

// What a primary's streams sent (StatsResponse.stream_*), counted by every stream of the
// process: entries by the way their dense blocks went (shared memory, a link, inline),
// their dense bytes, the calls that carried them and, of those, the ones rung through a
// region's doorbell. Thread-safety: atomics.
struct StreamCounters {
  std::atomic<int64_t> shm_entries{0};
  std::atomic<int64_t> linked_entries{0};
  std::atomic<int64_t> inline_entries{0};
  std::atomic<int64_t> dense_bytes{0};
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> rung_calls{0};
};

class ReplicaStream {
 public:
  struct Options {
    int index = 0;                // the shard, for logs
    uint64_t replica_id = 0;
    std::string address;
    absl::Duration call_timeout = absl::Seconds(5);
    int64_t snapshot_piece_bytes = 8 << 20;
    // Pieces in flight at once: each call's copies (into the message, onto the wire,
    // out of it) then run side by side on both ends.
    int snapshot_calls_in_flight = 4;
    // Offer the joiner to send the snapshot over sockets of its own (snapshot_lanes.h),
    bool snapshot_socket = true;
    // on up to this many at once (the joiner may take fewer).
    int snapshot_lanes = 4;
    // Send it through shared memory (with shared_memory, to a joiner on this host) first.
    bool snapshot_shm = false;
    // Send the entries' dense blocks over a dense link to the replica of this many
    // connections each way (paddle_like/dist/dense_link.h; 0: inline in the gRPC calls),
    // so their copies and, with TLS, the cipher run on several cores. A link that fails
    // is let go and the entry goes inline. bfloat16 pushes (a bfloat16 trainer's,
    // forwarded as they came) go over it too where the replica reads them, else inline
    // beside it; an entry larger than the link's region (sized from the first) brings a
    // larger one.
    int dense_link_lanes = 0;
    // Offer the replica a shared-memory region for the entries' dense blocks first. A
    // replica on another host (or with /dev/shm of its own, or --noshm) cannot open it,
    // and the stream asks for the link instead, once.
    bool shared_memory = false;
    // Ring the replica through such a region (paddle_like/dist/stream_doorbell.h) when it offers to.
    bool doorbell = false;
    std::function<void()> on_progress;
    // Where what it sends is counted (not owned; outlives the stream).
    StreamCounters* counters = nullptr;
  };
  // Sends `snapshot` (may be empty: an in-sync backup needs none) taken at stream
  // position `start`, then every appended entry after it.
  ReplicaStream(Options options, ShardSnapshot snapshot, int64_t start, int64_t epoch);
  ~ReplicaStream();  // stops the thread; unsent entries are dropped
  ReplicaStream(const ReplicaStream&) = delete;
  ReplicaStream& operator=(const ReplicaStream&) = delete;

  void Append(StreamEntry entry);
  uint64_t replica_id() const { return options_.replica_id; }
  const std::string& address() const { return options_.address; }
  // The last position the replica has applied (start until the snapshot is in).
  int64_t acked() const;
  bool snapshot_sent() const;
  // Bytes of the entries appended and not yet acknowledged.
  int64_t backlog_bytes() const;
  // OK while the stream works; the cause once a call failed.
  Status failure() const;
  int64_t snapshot_bytes() const { return snapshot_bytes_; }
  absl::Duration snapshot_time() const;
  // How the snapshot went ("through shared memory", "over 4 sockets", "in pieces").
  std::string snapshot_how() const;

 private:
  void Run();
  // Through the region channel when it takes it, else the gRPC channel (dense_channel.h).
  Status SendSnapshot();
  // Records how the snapshot went (snapshot_how) and returns `sent`.
  Status Sent(const Status& sent, const std::string& how);
  // The most entries one call carries.
  static constexpr size_t kMaxEntriesPerCall = 32;
  // One entry, through the region where it can, else inline; `count_bytes`: into
  // options_.dense_bytes (not when SendBatch counted it already).
  Status Send(const StreamEntry& entry, bool count_bytes = true);
  // Several entries in one call through the region; one by one if it cannot take them.
  Status SendBatch(const std::vector<StreamEntry>& entries);
  // Whether `next` may follow `first` (and those already batched behind it, their
  // region bytes in `payload`, 0 for none) in one call; if so adds it to `payload`.
  bool Batches(const StreamEntry& first, const StreamEntry& next, int64_t* payload) const;
  // The entries in one Replicate call through the region channel (opened, or grown,
  // first). ABORTED when the channel failed (the caller drops it and sends them
  // inline), UNIMPLEMENTED when these entries cannot use it (inline, the channel kept).
  Status SendThroughRegion(const std::vector<const StreamEntry*>& entries);
  // A region channel for entries of `payload_bytes`: shared memory, else (unless
  // `shm_only`) a link.
  Status OpenRegion(int64_t payload_bytes, bool shm_only = false);
  void DropRegion();
  // A gRPC call's context, registered with the stream while it lives: the destructor
  // cancels every call out, since a replica whose host is gone (no FIN, no RST) answers
  // nothing and the call would hold the destructor (and whoever destroys the stream,
  // such as the replicator's heartbeat) for its whole deadline.
  class Call {
   public:
    explicit Call(ReplicaStream* stream);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    grpc::ClientContext* get() const { return context_.get(); }

   private:
    ReplicaStream* const stream_;
    const std::unique_ptr<grpc::ClientContext> context_;
  };

  bool MayUseRegion() const {
    return region_channel_ != nullptr || (options_.shared_memory && !shm_refused_) ||
           (options_.dense_link_lanes > 0 && !link_refused_);
  }

  const Options options_;
  StreamCounters own_counters_;      // where a stream given none counts
  StreamCounters* const counters_;   // options_.counters, else own_counters_
  const int64_t epoch_;
  const int64_t snapshot_bytes_;
  ShardSnapshot snapshot_;  // released once sent
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
  std::unique_ptr<PserverFrameStub> frames_;
  // Where the entries' dense blocks go (the stream's thread alone uses these): the
  // channels of paddle_like/client/dense_channel.h, as a trainer's. A region channel
  // (shared memory with the replica, rung through its doorbell where it serves one, or
  // a link to another host) while there is one, else inline in the calls;
  // `*_refused`: not asked again.
  GrpcDenseChannel inline_{WireDtype::kFloat32, nullptr};
  std::unique_ptr<RegionDenseChannel> region_channel_;
  ShmDenseChannel* shm_channel_ = nullptr;  // region_channel_, when it is shared memory
  bool shm_refused_ = false;
  bool link_refused_ = false;

  mutable absl::Mutex mu_;
  std::deque<StreamEntry> queue_ ABSL_GUARDED_BY(mu_);
  int64_t backlog_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  bool snapshot_sent_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration snapshot_time_ ABSL_GUARDED_BY(mu_);
  std::string snapshot_how_ ABSL_GUARDED_BY(mu_);
  Status failure_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> cancel_{false};  // set with stop_: ends a socket's or a link's blocked send
  absl::Mutex calls_mu_;
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(calls_mu_);  // out now (Call)
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace pl::pserver

#endif  // PSERVER_REPLICATION_REPLICA_STREAM_H_
