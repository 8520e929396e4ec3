// Membership: which trainers and pservers belong to the job.
//
// Trainers register and get an id that is never reused, even across master restarts
// (the counter is part of the persisted state); a heartbeat renews the trainer's lease,
// and a trainer whose lease runs out is dropped by ExpireTrainers (the caller then
// returns its tasks). Pservers own the fixed indexes [0, num_pservers); a pserver that
// restarts registers again at its index and the index's generation goes up, so clients
// can tell a fresh pserver from the one they knew.
//
// Time comes from the injected `now_ms` (unix milliseconds).
// Thread-safety: not thread-safe; the master serialises all calls under its mutex.
#ifndef PADDLE_LIKE_MASTER_MEMBERSHIP_H_
#define PADDLE_LIKE_MASTER_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "master/shard_replicas.h"
#include "paddle_like/core/status.h"
#include "proto/master.pb.h"
#include "proto/master_state.pb.h"

namespace pl {

// What a pserver that is not replicated tells with each registration
// (RegisterPserverRequest): which process it is, what it restored, what it serves now.
struct PserverReport {
  uint64_t incarnation = 0;       // 0: not told
  bool started_empty = false;     // began without state (nothing restored)
  int64_t restored_version = -1;  // the version of the checkpoint it restored (-1: none)
  int64_t version = 0;            // its shard's version now
  int64_t pushes_refused = 0;     // pushes it refused as out of bounds since it started

  static PserverReport From(const proto::RegisterPserverRequest& request);
};

struct MembershipOptions {
  int64_t lease_ms = 3000;   // > 0
  int32_t num_pservers = 1;  // >= 0
  int64_t pserver_lease_ms = 800;  // replicated shards: a member silent this long leaves the map (> 0)
};

class Membership {
 public:
  using Clock = std::function<int64_t()>;

  // INVALID_ARGUMENT for bad options.
  static StatusOr<Membership> Create(const MembershipOptions& options, Clock now_ms);
  // DATA_LOSS naming the inconsistency for a state that is not a valid membership.
  static StatusOr<Membership> Deserialize(const proto::MembershipState& state, Clock now_ms);
  proto::MembershipState Serialize() const;

  // A new trainer id (1, 2, ...), leased for lease_ms from now; `token_digest` is what
  // the trainer's later calls must prove (CheckToken).
  int64_t RegisterTrainer(const std::string& name, std::string token_digest = "");
  // OK when `token` is the one trainer_id's registration returned; PERMISSION_DENIED
  // naming the id otherwise; NOT_FOUND ("register again") for an id that is not
  // registered (dropped when its lease ran out, or never given), so that nothing is
  // reported in a dropped trainer's name, and for a trainer restored from a state
  // without a digest.
  Status CheckToken(int64_t trainer_id, absl::string_view token) const;
  // Renews the trainer's lease; false when the id is unknown or its lease has run out
  // (it must register again).
  bool Heartbeat(int64_t trainer_id);
  bool IsLive(int64_t trainer_id) const;
  // Removes the trainer; false when it was not known.
  bool Leave(int64_t trainer_id);
  // Drops every trainer whose lease has run out by `now_ms` (-1: the clock's now) and
  // returns their ids.
  std::vector<int64_t> ExpireTrainers(int64_t now_ms = -1);

  // Registers the pserver at `index` and returns the index's generation (1 the first
  // time). INVALID_ARGUMENT for an index outside [0, num_pservers) or an empty address.
  // A new incarnation (report.incarnation) is a restarted process. It lost learned
  // state, recorded in losses(), when it began empty while `job_trained`, or restored a
  // checkpoint older than the version the index had reported. Its refused pushes are
  // recorded too (pushes_refused()).
  StatusOr<int64_t> RegisterPserver(int32_t index, const std::string& address, const PserverReport& report = {},
                                    bool job_trained = false);
  // Learned state the job lost, one line each, in order (kept in the state): shards
  // started over or restored from an older checkpoint.
  const std::vector<std::string>& losses() const { return losses_; }
  // Pushes refused as out of bounds, by pserver index (summed over its processes).
  std::map<int32_t, int64_t> pushes_refused() const;
  // Pserver `index` says its shard's dense values came back from a trainer's copy of
  // `version` (0: they did not): the last line that lost its state gets that appended,
  // once, or a line of its own when there was none (the shard went before the master
  // knew it had trained). Returns the line when it changed or was added.
  std::optional<std::string> NoteRestoredFromTrainer(int32_t index, int64_t version);
  // Every loss as one line: losses(), then a line per pserver that refused pushes.
  std::vector<std::string> LossLines() const;
  // A replica of a replicated shard registers or heartbeats (shard_replicas.h); the
  // same INVALID_ARGUMENT cases. Fills the response's map fields.
  Status HeartbeatReplica(const proto::RegisterPserverRequest& request, proto::RegisterPserverResponse* response,
                          const ShardReplicas::Log& log);
  // A replica's process is known to be gone (ShardReplicas::Exited).
  bool ReplicaExited(int32_t index, uint64_t id, const std::string& why, const ShardReplicas::Log& log) {
    const bool known = replicas_.Exited(index, id, why, log);
    TakeReplicaLosses();
    return known;
  }
  // Drops replicas whose lease ran out, promoting backups where a primary went.
  // False when nothing changed.
  bool ExpireReplicas(const ShardReplicas::Log& log, int64_t now_ms = -1) {
    const bool changed = replicas_.Expire(log, now_ms);
    TakeReplicaLosses();
    return changed;
  }
  const ShardReplicas& replicas() const { return replicas_; }
  // Extends every live-looking trainer lease to at least `until_ms`: after a master
  // restart no trainer could heartbeat while it was down, so none is judged by that gap.
  // Replicas' leases to `replicas_until_ms` (default: the same).
  void ExtendLeases(int64_t until_ms, int64_t replicas_until_ms = -1);
  // The generation of pserver `index`, 0 when it never registered.
  int64_t pserver_generation(int32_t index) const;

  std::vector<proto::TrainerInfo> live_trainers() const;
  int num_live_trainers() const;
  // What trainers dial, by index: registered pservers, and the primaries of replicated
  // shards (an index whose shard has no primary now is absent).
  std::vector<proto::PserverInfo> pservers() const;
  int32_t num_pservers() const { return options_.num_pservers; }
  int64_t lease_ms() const { return options_.lease_ms; }
  int64_t next_trainer_id() const { return next_trainer_id_; }
  std::string trainer_name(int64_t trainer_id) const;

 private:
  struct Trainer {
    std::string name;
    int64_t deadline_ms = 0;
    std::string token_digest;
  };
  Membership(MembershipOptions options, Clock now_ms)
      : options_(options), now_ms_(std::move(now_ms)), replicas_(options.pserver_lease_ms, now_ms_) {}

  MembershipOptions options_;
  Clock now_ms_;
  int64_t next_trainer_id_ = 1;
  std::map<int64_t, Trainer> trainers_;
  std::map<int32_t, proto::PserverInfo> pservers_;
  // Records what process (index, `process`) last said it refused; true the first time
  // the index refuses anything.
  bool RecordRefused(int32_t index, uint64_t process, int64_t count);
  // Moves the replicated shards' losses (logged as they happened) into losses_.
  void TakeReplicaLosses() {
    for (std::string& loss : replicas_.TakeLosses()) losses_.push_back(std::move(loss));
  }

  ShardReplicas replicas_;
  std::vector<std::string> losses_;
  std::map<std::pair<int32_t, uint64_t>, int64_t> refused_;  // (index, process) -> its count
  int64_t next_expiry_ms_ = 0;  // no trainer's lease ends before this (ExpireTrainers)
};

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_MEMBERSHIP_H_
