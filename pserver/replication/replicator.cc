// Replicator: joining the shard, the heartbeat and what its answers change (roles,
// promotion, the streams to the backups and joiners' snapshots), and leaving. The
// primary's side of each update: replicator_primary.cc; a backup's:
// replicator_backup.cc. See replicator.h.
#include "pserver/replication/replicator.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/log.h"
#include "paddle_like/rpc/rpc.h"

namespace pl::pserver {

std::string ReplicaRoleName(proto::ReplicaInfo::Role role) {
  return absl::AsciiStrToLower(proto::ReplicaInfo::Role_Name(role));
}

namespace {

uint64_t NewReplicaId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{rd()} << 32) | rd();
  return id;
}

}  // namespace

Replicator::Replicator(ReplicatorOptions options)
    : options_(std::move(options)),
      replica_id_(NewReplicaId()),
      master_(options_.master_address) {
  applier_ = std::make_unique<StreamApplier>(
      [this](StreamApplier::Update& update) { return ApplyFollowed(update); },
      [this](const Status& s) { SetFatal(absl::StrCat("cannot apply the primary's stream: ", s.message())); });
  SnapshotReceiver::Options receiving;
  receiving.index = options_.index;
  receiving.socket = options_.snapshot_socket;
  receiving.lanes = options_.snapshot_lanes;
  receiving.listen_host = options_.listen_host;
  receiving.slow_joiner = options_.faults.slow_joiner;
  SnapshotReceiver::Hooks hooks;
  hooks.accept = [this](const proto::SnapshotChunk& chunk) { return AcceptSnapshot(chunk); };
  hooks.check_offer = [this](const proto::SnapshotChunk& chunk) { return CheckSnapshotOffer(chunk); };
  hooks.installed = [this](int64_t position) {
    absl::MutexLock l(&mu_);
    position_ = position;
  };
  hooks.fatal = [this](const std::string& why) { SetFatal(why); };
  snapshots_ = std::make_unique<SnapshotReceiver>(std::move(receiving), std::move(hooks), &follow_mu_);
}

Replicator::~Replicator() {
  Stop();
  applier_.reset();  // after the server stopped: nothing enqueues any more
}

void Replicator::HeartbeatSoon() {
  absl::MutexLock l(&beat_mu_);
  beat_now_ = true;
}

void Replicator::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  HeartbeatSoon();  // wakes the loop to see stop_
  if (heartbeat_.joinable()) heartbeat_.join();
  std::vector<std::thread> snapshotters;
  {
    absl::MutexLock l(&mu_);
    snapshotters.swap(snapshot_threads_);
  }
  for (std::thread& t : snapshotters) t.join();  // no lock held: they take mu_ when done
  snapshots_->Stop();  // no lock held: its thread takes follow_mu_ and mu_
  applier_->Drain();  // a backup's final checkpoint holds every update it acknowledged
  std::map<uint64_t, std::unique_ptr<ReplicaStream>> streams;
  {
    absl::MutexLock l(&mu_);
    streams.swap(streams_);
    progress_.SignalAll();
  }
  streams.clear();  // joins their threads, with no lock held (they call on_progress)
}

void Replicator::Leave(absl::Duration timeout) {
  int64_t last = 0;
  bool primary = false;
  {
    absl::MutexLock l(&mu_);
    leaving_ = true;
    last = position_;
    primary = role_ == proto::ReplicaInfo::PRIMARY;
  }
  // The updates already forwarded finish (their trainers get their answers); later ones
  // are refused and go to the master for the next primary.
  if (primary) {
    if (Status s = WaitAcked(last, absl::Now() + timeout); !s.ok()) {
      log::Warning(absl::StrCat("shard ", options_.index, ": leaving before the backups acknowledged position ", last,
                                ": ", s.message()));
    }
  }
  Stop();
  proto::RegisterPserverRequest req;
  {
    absl::MutexLock l(&mu_);
    req = HeartbeatRequestLocked();
  }
  req.set_leaving(true);
  const StatusOr<proto::RegisterPserverResponse> told =
      master_.RegisterPserver(req, MasterCallPolicy::Once(options_.rpc_timeout));
  log::Info(told.ok() ? absl::StrCat("shard ", options_.index, ": left the shard (", primary ? "primary" : "not the primary",
                                     ", position ", last, "); the master took this replica out")
                      : absl::StrCat("shard ", options_.index, ": could not tell the master this replica leaves (",
                                     told.status().message(), "); its lease will"));
}

StatusOr<Replicator::Role> Replicator::Join(absl::Duration timeout, int64_t checkpoint_version) {
  {
    absl::MutexLock l(&mu_);
    checkpoint_version_ = checkpoint_version;
  }
  absl::Time give_up = absl::Now() + timeout;
  while (!Heartbeat()) {
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(absl::StrCat("shard ", options_.index, ": no answer from the master at ",
                                                 options_.master_address, " within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  absl::MutexLock l(&mu_);
  // A replica renews its lease only when it heartbeats: at a period near the lease, a
  // late heartbeat or two lose it, and the master drops this replica again and again.
  if (lease_ > absl::ZeroDuration() && options_.heartbeat_every * 2 > lease_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", options_.index, ": --heartbeat_ms ", absl::ToInt64Milliseconds(options_.heartbeat_every),
        " is too slow for the master's pserver lease of ", absl::ToInt64Milliseconds(lease_),
        " ms (pl-master --pserver_lease_ms): heartbeat at most every half lease, better a quarter"));
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  if (role_ == proto::ReplicaInfo::CANDIDATE) {
    log::Info(absl::StrCat("shard ", options_.index, " lost every replica: waiting while the master gathers those "
                           "that come back, to restore the newest checkpoint among them (this one's: ",
                           checkpoint_version < 0 ? std::string("none") : absl::StrCat("version ", checkpoint_version),
                           ")"));
    give_up = absl::Now() + timeout;
    auto decided = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return role_ != proto::ReplicaInfo::CANDIDATE || fatal_.has_value();
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&decided), give_up)) {
      return absl::UnavailableError(absl::StrCat("shard ", options_.index, ": the master chose no primary within ",
                                                 absl::FormatDuration(timeout)));
    }
    if (fatal_) return absl::FailedPreconditionError(*fatal_);
  }
  return role_;
}

void Replicator::Attach(ParameterShard* shard) {
  absl::MutexLock l(&mu_);
  shard_ = shard;
}

ParameterShard* Replicator::AttachedShardLocked() {
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](ParameterShard** shard) { return *shard != nullptr; }, &shard_),
                       kAttachWait);
  return shard_;
}

Replicator::Role Replicator::role() const {
  absl::MutexLock l(&mu_);
  return role_;
}

int64_t Replicator::epoch() const {
  absl::MutexLock l(&mu_);
  return epoch_;
}

int64_t Replicator::last_known_version() const {
  absl::MutexLock l(&mu_);
  return last_known_version_;
}

std::optional<std::string> Replicator::fatal() const {
  absl::MutexLock l(&mu_);
  return fatal_;
}

void Replicator::SetFatal(const std::string& why) {
  absl::MutexLock l(&mu_);
  if (!fatal_) fatal_ = why;
  progress_.SignalAll();
}

std::string Replicator::Describe() const {
  absl::MutexLock l(&mu_);
  return absl::StrCat(ReplicaRoleName(role_), " of shard ", options_.index, " (replica ", absl::Hex(replica_id_), ", epoch ",
                      epoch_, ", stream position ", position_, ", ", required_.size() - catching_up_.size(),
                      " backup(s) in sync, ", streams_.size() - required_.size() + catching_up_.size(), " catching up)");
}

// ------------------------------------------------------------------ heartbeat

void Replicator::HeartbeatLoop() {
  while (true) {
    {
      absl::MutexLock l(&beat_mu_);
      beat_mu_.AwaitWithTimeout(absl::Condition(&beat_now_), options_.heartbeat_every);
      beat_now_ = false;
    }
    if (stop_.HasBeenNotified()) return;
    (void)Heartbeat();
  }
}

proto::RegisterPserverRequest Replicator::HeartbeatRequestLocked() const {
  proto::RegisterPserverRequest req;
  req.set_index(options_.index);
  req.set_address(options_.address);
  req.set_replica_id(replica_id_);
  req.set_version(shard_ != nullptr ? shard_->version() : 0);
  if (shard_ != nullptr) {
    req.set_pushes_refused(shard_->norm_guard().refused());
    req.set_restored_from_trainer(shard_->restored_from_trainer());
  }
  req.set_epoch(epoch_);
  req.set_checkpoint_version(checkpoint_version_);
  for (uint64_t id : report_caught_up_) req.add_caught_up(id);
  for (uint64_t id : report_dropped_) req.add_dropped(id);
  return req;
}

bool Replicator::Heartbeat() {
  proto::RegisterPserverRequest req;
  {
    absl::MutexLock l(&mu_);
    req = HeartbeatRequestLocked();
  }
  const absl::Time sent = absl::Now();
  const StatusOr<proto::RegisterPserverResponse> resp =
      master_.RegisterPserver(req, MasterCallPolicy::Once(options_.rpc_timeout));
  if (!resp.ok()) return false;
  Apply(*resp, sent);
  return true;
}

void Replicator::Apply(const proto::RegisterPserverResponse& resp, absl::Time sent) {
  std::vector<std::unique_ptr<ReplicaStream>> gone;  // destroyed with no lock held
  ParameterShard* promote = nullptr;
  bool primary = false;
  {
    absl::MutexLock l(&mu_);
    const Role old = role_;
    if (resp.role() == proto::ReplicaInfo::REMOVED) {
      if (!fatal_) {
        fatal_ = absl::StrCat("the master took this replica out of shard ", options_.index, " (as ", ReplicaRoleName(old),
                              ", epoch ", epoch_, "); restart it to join the shard again");
      }
      progress_.SignalAll();
      return;
    }
    if (old == proto::ReplicaInfo::PRIMARY && resp.role() != proto::ReplicaInfo::PRIMARY) {
      if (!fatal_) fatal_ = absl::StrCat("shard ", options_.index, ": no longer the primary (epoch ", resp.epoch(), ")");
      progress_.SignalAll();
      return;
    }
    in_map_.clear();
    std::map<uint64_t, Role> roles;
    for (const proto::ReplicaInfo& r : resp.replicas()) {
      in_map_.insert(r.replica_id());
      roles[r.replica_id()] = r.role();
    }
    // Reports the master has acted on are done.
    auto done_caught_up = [&](uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !in_map_.count(id) || roles[id] == proto::ReplicaInfo::BACKUP;
    };
    auto done_dropped = [&](uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS { return !in_map_.count(id); };
    report_caught_up_.erase(std::remove_if(report_caught_up_.begin(), report_caught_up_.end(), done_caught_up),
                            report_caught_up_.end());
    report_dropped_.erase(std::remove_if(report_dropped_.begin(), report_dropped_.end(), done_dropped),
                          report_dropped_.end());
    role_ = resp.role();
    backup_in_sync_ = std::any_of(roles.begin(), roles.end(), [this](const auto& r) {
      return r.first != replica_id_ && r.second == proto::ReplicaInfo::BACKUP;
    });
    if (resp.epoch() > epoch_) epoch_ = resp.epoch();
    if (resp.lease_ms() > 0) lease_ = absl::Milliseconds(resp.lease_ms());
    last_known_version_ = std::max(last_known_version_, resp.last_known_version());
    if (role_ == proto::ReplicaInfo::PRIMARY) {
      primary = true;
      // Acting as primary is safe only while the master cannot have promoted another:
      // its lease runs from when it got this request, which is after `sent`.
      lease_until_ = sent + absl::Milliseconds(resp.lease_ms()) * 0.9;
      if (old != proto::ReplicaInfo::PRIMARY) {
        acked_as_primary_ = false;
        log::Info(absl::StrCat("shard ", options_.index, ": this replica is now the primary (epoch ", epoch_,
                               ", stream position ", position_, ")"));
        // A joiner too: the master may have counted it in sync, and promoted it, before
        // it heard it was a backup. Either way it follows the stream until now, and a
        // sync shard that stayed a follower would never end a step again.
        if (old == proto::ReplicaInfo::BACKUP || (old == proto::ReplicaInfo::JOINING && shard_ != nullptr)) {
          promote = shard_;
          draining_ = true;  // serves only once everything it acknowledged is applied
        }
        // Other backups may have seen more or less of the old primary's stream than
        // this one: they rejoin from a snapshot rather than risk diverging.
        for (const auto& [id, role] : roles) {
          if (id != replica_id_ && role == proto::ReplicaInfo::BACKUP) report_dropped_.push_back(id);
        }
      }
      // Streams of members the master no longer lists are done; failed ones are reported.
      for (auto it = streams_.begin(); it != streams_.end();) {
        if (!in_map_.count(it->first)) {
          required_.erase(it->first);
          catching_up_.erase(it->first);
          gone.push_back(std::move(it->second));
          it = streams_.erase(it);
          continue;
        }
        const Status failure = it->second->failure();
        if (!failure.ok() && std::find(report_dropped_.begin(), report_dropped_.end(), it->first) == report_dropped_.end()) {
          log::Warning(absl::StrCat("shard ", options_.index, ": dropping a replica: ", failure.message()));
          report_dropped_.push_back(it->first);
        } else if (failure.ok()) {
          // Once its snapshot is in (or its backlog grows too big), updates wait for a
          // joiner too: one slower than the trainers could otherwise never catch up, and
          // its stream would queue without bound. It is in sync once it acknowledged
          // everything up to where it started to be waited for.
          if (!required_.count(it->first) &&
              (it->second->snapshot_sent() || it->second->backlog_bytes() > kMaxJoinerBacklogBytes)) {
            required_.insert(it->first);
            catching_up_[it->first] = position_;
          }
          auto c = catching_up_.find(it->first);
          if (c != catching_up_.end() && it->second->snapshot_sent() && it->second->acked() >= c->second) {
            catching_up_.erase(c);
            report_caught_up_.push_back(it->first);
            log::Info(absl::StrFormat(
                "shard %d: replica %x at %s caught up at position %d (snapshot of %.1f MB in %s, %s)", options_.index,
                it->first, it->second->address(), it->second->acked(), it->second->snapshot_bytes() / 1e6,
                absl::FormatDuration(it->second->snapshot_time()), it->second->snapshot_how()));
          }
        }
        ++it;
      }
      for (auto it = required_.begin(); it != required_.end();) {
        it = in_map_.count(*it) ? std::next(it) : required_.erase(it);
      }
      for (auto it = catching_up_.begin(); it != catching_up_.end();) {
        it = in_map_.count(it->first) ? std::next(it) : catching_up_.erase(it);
      }
    }
    progress_.SignalAll();
  }
  gone.clear();
  if (promote != nullptr) {
    applier_->Drain();
    promote->Promote();
    absl::MutexLock l(&mu_);
    draining_ = false;
  }
  if (primary) StartStreams(resp);
}

void Replicator::StartStreams(const proto::RegisterPserverResponse& resp) {
  ParameterShard* shard = nullptr;
  std::vector<proto::ReplicaInfo> joiners;
  {
    absl::MutexLock l(&mu_);
    shard = shard_;
    if (shard == nullptr) return;
    for (const proto::ReplicaInfo& r : resp.replicas()) {
      if (r.replica_id() == replica_id_ || r.role() != proto::ReplicaInfo::JOINING) continue;
      if (streams_.count(r.replica_id()) || snapshot_pending_.count(r.replica_id())) continue;
      snapshot_pending_.insert(r.replica_id());
      joiners.push_back(r);
    }
  }
  for (const proto::ReplicaInfo& r : joiners) {
    // Not on this (the heartbeat's) thread: copying a large shard takes seconds, and
    // a primary that stops heartbeating for a lease is taken out of the shard.
    absl::MutexLock l(&mu_);
    snapshot_threads_.emplace_back([this, shard, r] { TakeSnapshotFor(shard, r); });
  }
}

void Replicator::TakeSnapshotFor(ParameterShard* shard, const proto::ReplicaInfo& r) {
  {
    // Called under the shard's order lock at a point of the stream: the joiner's
    // stream starts right after it.
    shard->RequestSnapshot([this, r](StatusOr<ShardSnapshot> bytes, int64_t position) {
      absl::MutexLock l(&mu_);
      snapshot_pending_.erase(r.replica_id());
      if (!bytes.ok()) {
        log::Warning(absl::StrCat("shard ", options_.index, ": no snapshot for a joining replica: ", bytes.status().message()));
        return;
      }
      if (role_ != proto::ReplicaInfo::PRIMARY || !in_map_.count(r.replica_id())) return;
      ReplicaStream::Options so;
      so.index = options_.index;
      so.replica_id = r.replica_id();
      so.address = r.address();
      so.snapshot_piece_bytes = options_.snapshot_piece_bytes;
      so.snapshot_socket = options_.snapshot_socket;
      so.snapshot_lanes = options_.snapshot_lanes;
      so.dense_link_lanes = options_.stream_link_lanes;
      so.shared_memory = options_.stream_shm;
      so.snapshot_shm = options_.stream_shm && options_.snapshot_shm;
      so.doorbell = options_.stream_doorbell;
      so.counters = &stream_counters_;
      so.on_progress = [this] {
        absl::MutexLock pl(&mu_);
        progress_.SignalAll();
      };
      log::Info(absl::StrFormat(
          "shard %d: sending a snapshot of %.1f MB (position %d; taking it held updates for %s) to joining "
          "replica %x at %s",
          options_.index, bytes->size() / 1e6, position, absl::FormatDuration(bytes->taken_in()), r.replica_id(),
          r.address()));
      streams_[r.replica_id()] = std::make_unique<ReplicaStream>(so, *std::move(bytes), position, epoch_);
    });
  }
}

}  // namespace pl::pserver
