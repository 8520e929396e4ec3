// ShardReplicas: the master's versioned map of replicated shards (pl-pserver
// --replicas R > 1): for each shard index, which process is its primary, which are
// backups in sync with it, which are still copying it, and the shard's epoch.
//
// The epoch counts primaries: it goes up exactly when a shard gets a new primary.
// Replicas fence each other with it (a backup refuses a stream older than the epoch
// it knows), and trainers see it as the shard's generation. Members heartbeat through
// RegisterPserver; one whose lease runs out leaves the map, and when it was the
// primary the first backup in sync is promoted at once. With no backup left a shard
// has no primary until its processes come back: each registers as a CANDIDATE with
// the version of the newest checkpoint it holds (copies on separate machines hold
// different ones), and once as many have come back as the shard ever had members, or
// the restore wait is over, the one with the newest becomes primary and restores it;
// the others join it. A brand-new shard's first process is primary at once. A joining replica that lost its
// source, or any member taken out, is told REMOVED and exits (its supervisor restarts
// it, and it joins afresh).
//
// Leases are in memory only: Serialize keeps the map, and a map read back gives every
// member a full lease from the reading master's clock.
//
// Thread-safety: not thread-safe; the master serialises all calls under its mutex.
#ifndef PADDLE_LIKE_MASTER_SHARD_REPLICAS_H_
#define PADDLE_LIKE_MASTER_SHARD_REPLICAS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/core/status.h"
#include "proto/master.pb.h"
#include "proto/master_state.pb.h"

namespace pl {

class ShardReplicas {
 public:
  using Clock = std::function<int64_t()>;
  using Log = std::function<void(const std::string&)>;

  // `restore_wait_ms`: how long a shard that lost every replica waits for them to come
  // back before the best candidate so far restores it (default: 4 leases).
  ShardReplicas(int64_t lease_ms, Clock now_ms, int64_t restore_wait_ms = -1)
      : lease_ms_(lease_ms), restore_wait_ms_(restore_wait_ms >= 0 ? restore_wait_ms : 4 * lease_ms),
        now_ms_(std::move(now_ms)) {}

  // A replica's registration or heartbeat (request.replica_id() != 0); the caller has
  // checked the index. Fills the map's part of the response. Changes are logged. A
  // request with `leaving` takes the replica out (Exited) and answers REMOVED.
  void Heartbeat(const proto::RegisterPserverRequest& request, proto::RegisterPserverResponse* response,
                 const Log& log);
  // Drops members whose lease ran out, promoting a backup where the primary went, and
  // ends the restore waits that are over, as of `now_ms` (-1: the clock's now). False
  // when it changed nothing (no member gone, no shard gathering candidates).
  bool Expire(const Log& log, int64_t now_ms = -1);
  // Member `id` of shard `index` is known to be gone (its process was reaped, or it said
  // it is shutting down once it handed over): it is taken out now, as if its lease had
  // run out. False when it is not a member.
  bool Exited(int32_t index, uint64_t id, const std::string& why, const Log& log);
  // Gives every member a lease until at least `until_ms` (after a master restart).
  void ExtendLeases(int64_t until_ms);

  bool Has(int32_t index) const { return shards_.count(index) > 0; }
  // What trainers dial for shard `index`: its primary (generation = epoch, replica
  // counts), or nothing while it has none.
  std::optional<proto::PserverInfo> Primary(int32_t index) const;
  // Shards with fewer live replicas (primary + backups) than `wanted`, for the status.
  int degraded(int wanted) const;

  // Learned state lost since the last call, one line each: a shard that lost every
  // replica and restored a checkpoint older than what its primary had served (or none).
  std::vector<std::string> TakeLosses() { return std::exchange(losses_, {}); }

  void Serialize(proto::MembershipState* state) const;
  // DATA_LOSS naming what is wrong.
  static StatusOr<ShardReplicas> Deserialize(const proto::MembershipState& state, int64_t lease_ms, Clock now_ms);

 private:
  struct Member {
    uint64_t id = 0;
    std::string address;
    proto::ReplicaInfo::Role role = proto::ReplicaInfo::JOINING;
    int64_t deadline_ms = 0;
    int64_t version = 0;
    int64_t checkpoint_version = -1;  // a candidate's newest checkpoint
  };
  struct Shard {
    int64_t epoch = 0;
    std::vector<Member> members;  // the primary, if any, first
    std::set<uint64_t> removed;   // ids taken out: told REMOVED if they call again
    int64_t last_version = 0;     // the highest version a primary reported
    int64_t served_version = 0;   // the same since the shard last lost every replica
    size_t peak_members = 0;      // the most members in sync (primary + backups) it had at once
    int64_t restore_until_ms = 0; // candidates gathering: when the best of them restores
  };
  static Member* Find(Shard& shard, uint64_t id);
  static bool HasPrimary(const Shard& shard);
  // Takes member `id` out (it is told REMOVED from now on).
  static void Remove(Shard& shard, uint64_t id);
  // After the primary left: the first backup becomes primary (epoch + 1); without one,
  // the joining replicas lose their source and are removed.
  void Promote(int32_t index, Shard& shard, const std::string& why, const Log& log);
  // Candidates gathered: makes the one with the newest checkpoint primary once all the
  // shard's members are back or the wait is over.
  void MaybeRestore(int32_t index, Shard& shard, const Log& log);

  int64_t lease_ms_;
  int64_t restore_wait_ms_;
  Clock now_ms_;
  std::map<int32_t, Shard> shards_;
  std::vector<std::string> losses_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_SHARD_REPLICAS_H_
