// Replicator: one pserver process's part in a replicated shard (--replicas R > 1).
//
// It heartbeats the master (RegisterPserver every `heartbeat_every`) and acts on the
// shard map it gets back (master/shard_replicas.h):
//   primary  serves trainers; every update goes, in order, to a ReplicaStream per
//            other replica; a push is acknowledged once every backup in sync has it
//            (WaitAcked). It may act as primary only until its lease (the master's
//            pserver lease from when it sent its last answered heartbeat) runs out, so
//            a primary cut off from the master stops taking pushes before the master
//            promotes another. A joining replica gets a snapshot, then the stream;
//            once the snapshot is in, updates wait for it too (so it cannot fall
//            further behind), and once it acknowledged everything up to there the
//            primary vouches for it (caught_up). A stream that fails is
//            reported (dropped), and waited for until the master confirms the drop.
//   backup   holds the primary's stream in order (OnEntry), acknowledging an
//            entry once held, and applies it on its StreamApplier's thread; it
//            refuses trainers; an entry from an older epoch is refused (fencing), a
//            gap in the stream is refused (the primary then drops this replica).
//   joining  installs the snapshot (OnSnapshotChunk: in pieces, or read off a socket
//            the primary's first call opens), then follows as a backup.
// A backup promoted to primary first applies everything it held (refusing pushes
// meanwhile), then takes over the stream from there. The
// master's REMOVED, or anything that leaves this replica's state untrustworthy, sets
// fatal(): the process exits and its supervisor restarts it, to join afresh.
//
// Thread-safety: thread-safe. Lock order: the shard's order lock, then mu_, then a
// stream's; follow_mu_ serialises a backup's receipt of the stream and is taken
// before the shard's locks and the applier's.
#ifndef PSERVER_REPLICATION_REPLICATOR_H_
#define PSERVER_REPLICATION_REPLICATOR_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "paddle_like/client/master_client.h"
#include "proto/master.grpc.pb.h"
#include "pserver/replication/replica_stream.h"
#include "pserver/replication/snapshot_receiver.h"
#include "pserver/replication/stream_applier.h"
#include "pserver/store/faults.h"
#include "pserver/store/replication_hook.h"
#include "pserver/store/shard.h"

namespace pl::pserver {

// "primary", "backup", ... (the generated enum names, lower case), for logs.
std::string ReplicaRoleName(proto::ReplicaInfo::Role role);

// A joiner whose stream holds more than this unacknowledged is waited for even before
// its snapshot is in: the trainers slow down rather than the primary run out of memory.
inline constexpr int64_t kMaxJoinerBacklogBytes = int64_t{1} << 30;

struct ReplicatorOptions {
  int index = 0;
  std::string master_address;
  std::string address;  // what other replicas and trainers dial
  // A backup promoted by the master acts on it from its next heartbeat: part of every
  // failover's time.
  absl::Duration heartbeat_every = absl::Milliseconds(100);
  absl::Duration rpc_timeout = absl::Seconds(1);
  // What a test asks this replica to do wrong on purpose (none in the product).
  Faults faults;
  // A joiner's snapshot goes in pieces of this size (tests make them small, to send many).
  int64_t snapshot_piece_bytes = 8 << 20;
  // Whether a snapshot may come over TCP sockets of its own (paddle_like/rpc/bulk_socket.h, with
  // the job's TLS when gRPC has it), as a joiner and as a primary. Off: gRPC pieces.
  bool snapshot_socket = true;
  // On up to this many connections at once (snapshot_lanes.h); the joiner takes the
  // smaller of its own and the primary's number.
  int snapshot_lanes = 4;
  // The stream's dense blocks over a dense link to each backup of this many
  // connections each way (replica_stream.h; 0: inline in the gRPC calls),
  int stream_link_lanes = 0;
  // and, to a backup on this host, through shared memory (tried first),
  bool stream_shm = false;
  // a joiner's snapshot too (off: sockets or pieces, as above),
  bool snapshot_shm = true;
  // ringing it there instead of calling it over gRPC (paddle_like/dist/stream_doorbell.h).
  bool stream_doorbell = false;
  // Where a joiner's snapshot socket listens: the interfaces gRPC serves on.
  std::string listen_host = "127.0.0.1";
};

class Replicator : public ReplicationHook {
 public:
  using Role = proto::ReplicaInfo::Role;
  explicit Replicator(ReplicatorOptions options);
  ~Replicator() override;  // Stop()

  uint64_t replica_id() const { return replica_id_; }
  // Registers until the master answers (UNAVAILABLE after `timeout`) and starts the
  // heartbeat; returns the role it was given: PRIMARY (restore the shard's checkpoint)
  // or JOINING (start empty and wait for the snapshot). A shard that lost every
  // replica first makes this one a CANDIDATE: Join waits (up to `timeout` more) while
  // the master gathers the others and picks the newest of `checkpoint_version`s (the
  // newest checkpoint this replica holds, -1: none).
  StatusOr<Role> Join(absl::Duration timeout, int64_t checkpoint_version = -1);
  // The shard this replica serves, once it exists (the heartbeat runs before it does).
  void Attach(ParameterShard* shard);
  void Stop();
  // Shutting down on purpose (SIGTERM: a preempted Pod, a drained node): takes no new
  // update, waits up to `timeout` until the backups hold every update already taken,
  // stops (Stop), then tells the master, which takes this replica out at once, and
  // promotes a backup if this was the primary, rather than waiting out its lease.
  void Leave(absl::Duration timeout);

  Role role() const;
  int64_t epoch() const;
  // What this process's streams sent (StatsResponse.stream_*).
  const StreamCounters& stream_counters() const { return stream_counters_; }
  absl::Duration slow_stream_call() const { return options_.faults.slow_stream_call; }
  // The highest version a primary of this shard reported to the master (what a
  // restore from a checkpoint falls short of).
  int64_t last_known_version() const;
  // Set when this process must exit (removed by the master, a bad snapshot, ...).
  std::optional<std::string> fatal() const;
  // One line on the replicas' state, for logs.
  std::string Describe() const;

  // Backup side: an entry of the primary's stream of `epoch` (a Replicate call's), held
  // in order and applied on the applier's thread; the shard's version. And a joiner's
  // snapshot.
  StatusOr<int64_t> OnEntry(int64_t epoch, StreamApplier::Update update);
  // `region`: the shared memory the chunk names (shm_region), when this process holds it.
  Status OnSnapshotChunk(const proto::SnapshotChunk& chunk, std::shared_ptr<SharedRegion> region,
                         proto::SnapshotAck* ack) {
    return snapshots_->OnChunk(chunk, std::move(region), ack);
  }

  // ReplicationHook (the primary side).
  Status CheckPrimary() const override;
  // A backup asked to serve heartbeats at once and waits up to kPromotionWait for the
  // master's answer: promoted, it serves (once it has applied what it held).
  Status AwaitPrimary() override;
  static constexpr absl::Duration kPromotionWait = absl::Milliseconds(200);
  StatusOr<int64_t> ForwardPush(const PushFrame& push) override;
  StatusOr<int64_t> ForwardBorrowedPush(const PushFrame& push, std::shared_ptr<PushLoan>* loan) override;
  StatusOr<int64_t> ForwardInit(const proto::InitRequest& request) override;
  StatusOr<int64_t> ForwardStepComplete(int contributors) override;
  StatusOr<int64_t> ForwardEviction(const proto::SparseRowsMsg& evicted, bool to_disk) override;
  int64_t last_position() const override;
  Status WaitAcked(int64_t position, absl::Time deadline) override;

 private:
  void HeartbeatLoop();
  bool Heartbeat();  // false: the master did not answer
  proto::RegisterPserverRequest HeartbeatRequestLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Apply(const proto::RegisterPserverResponse& resp, absl::Time sent) ABSL_LOCKS_EXCLUDED(mu_);
  // Primary: start streams for members without one (joiners get a snapshot).
  void StartStreams(const proto::RegisterPserverResponse& resp) ABSL_LOCKS_EXCLUDED(mu_);
  // Snapshots the shard (at a point of its stream) and starts the joiner's stream from it.
  void TakeSnapshotFor(ParameterShard* shard, const proto::ReplicaInfo& joiner) ABSL_LOCKS_EXCLUDED(mu_);
  Status CheckPrimaryLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Status LeavingError() const;
  StatusOr<int64_t> Append(StreamEntry entry) ABSL_LOCKS_EXCLUDED(mu_);
  bool AckedLocked(int64_t position) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Status CheckEntry(int64_t epoch, int64_t position, bool* duplicate) ABSL_EXCLUSIVE_LOCKS_REQUIRED(follow_mu_);
  // A backup's application of one update of the stream (on the applier's thread).
  Status ApplyFollowed(StreamApplier::Update& update) ABSL_LOCKS_EXCLUDED(mu_);
  void SetFatal(const std::string& why);
  // Whether a joiner takes a snapshot of `chunk` now (for this replica, joining, an epoch
  // not older than its own, which it adopts), and the shard it goes into
  // (SnapshotReceiver's hooks).
  StatusOr<ParameterShard*> AcceptSnapshot(const proto::SnapshotChunk& chunk) ABSL_LOCKS_EXCLUDED(mu_);
  Status CheckSnapshotOffer(const proto::SnapshotChunk& chunk) const ABSL_LOCKS_EXCLUDED(mu_);

  const ReplicatorOptions options_;
  const uint64_t replica_id_;
  MasterClient master_;

  mutable absl::Mutex mu_;
  ParameterShard* shard_ ABSL_GUARDED_BY(mu_) = nullptr;
  // shard_, waiting up to kAttachWait for Attach: a joiner is in the master's map (and
  // may get the primary's first call) a moment before its startup attaches the shard;
  // refusing that call would end the stream and drop the joiner. Null if it never came.
  static constexpr absl::Duration kAttachWait = absl::Seconds(3);
  ParameterShard* AttachedShardLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Role role_ ABSL_GUARDED_BY(mu_) = proto::ReplicaInfo::UNKNOWN;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_known_version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t checkpoint_version_ ABSL_GUARDED_BY(mu_) = -1;  // told the master while not in the map
  absl::Time lease_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration lease_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();  // the master's, from its last answer
  int64_t position_ ABSL_GUARDED_BY(mu_) = 0;  // primary: last forwarded; backup: last held (applied or queued)
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // promoted, still applying what it held as a backup
  // Primary: the streams, by replica id; `required_` are waited for before an ack.
  // Declared before the streams, which count into them until they are destroyed.
  StreamCounters stream_counters_;
  std::map<uint64_t, std::unique_ptr<ReplicaStream>> streams_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> required_ ABSL_GUARDED_BY(mu_);
  // Joiners waited for since the position given, not yet reported in sync.
  std::map<uint64_t, int64_t> catching_up_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> in_map_ ABSL_GUARDED_BY(mu_);  // the members the master listed last
  std::set<uint64_t> snapshot_pending_ ABSL_GUARDED_BY(mu_);  // joiners whose snapshot is being taken
  std::vector<uint64_t> report_caught_up_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> report_dropped_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> fatal_ ABSL_GUARDED_BY(mu_);
  absl::CondVar progress_;  // with mu_: an ack, a failure, a new map
  int64_t acked_updates_ ABSL_GUARDED_BY(mu_) = 0;  // for faults.die_after_acked_updates
  std::vector<std::thread> snapshot_threads_ ABSL_GUARDED_BY(mu_);  // one per joiner served (joined by Stop)
  bool backup_in_sync_ ABSL_GUARDED_BY(mu_) = false;  // the master's last map lists one besides this
  bool acked_as_primary_ ABSL_GUARDED_BY(mu_) = false;  // logged the epoch's first acknowledged update
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;  // Leave: no new update is taken

  // Backup: application of the stream, one entry at a time.
  absl::Mutex follow_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<StreamApplier> applier_;  // set at construction, reset by the destructor
  // A joining replica's snapshot (after follow_mu_, which it holds to install one).
  std::unique_ptr<SnapshotReceiver> snapshots_;

  absl::Notification stop_;
  // A heartbeat wanted before the next period (AwaitPrimary, Stop).
  absl::Mutex beat_mu_ ABSL_ACQUIRED_AFTER(mu_);
  bool beat_now_ ABSL_GUARDED_BY(beat_mu_) = false;
  void HeartbeatSoon();
  std::thread heartbeat_;
};

}  // namespace pl::pserver

#endif  // PSERVER_REPLICATION_REPLICATOR_H_
