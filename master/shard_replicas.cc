#include "master/shard_replicas.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pl {
namespace {

// "primary", "backup", ... (the generated enum names, lower case).
std::string RoleName(proto::ReplicaInfo::Role role) {
  return absl::AsciiStrToLower(proto::ReplicaInfo::Role_Name(role));
}

std::string Who(uint64_t id, const std::string& address) {
  return absl::StrCat("replica ", absl::Hex(id), " (", address, ")");
}

}  // namespace

ShardReplicas::Member* ShardReplicas::Find(Shard& shard, uint64_t id) {
  for (Member& m : shard.members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

bool ShardReplicas::HasPrimary(const Shard& shard) {
  return !shard.members.empty() && shard.members.front().role == proto::ReplicaInfo::PRIMARY;
}

void ShardReplicas::Remove(Shard& shard, uint64_t id) {
  shard.members.erase(std::remove_if(shard.members.begin(), shard.members.end(),
                                     [id](const Member& m) { return m.id == id; }),
                      shard.members.end());
  shard.removed.insert(id);
}

void ShardReplicas::Promote(int32_t index, Shard& shard, const std::string& why, const Log& log) {
  auto backup = std::find_if(shard.members.begin(), shard.members.end(),
                             [](const Member& m) { return m.role == proto::ReplicaInfo::BACKUP; });
  if (backup == shard.members.end()) {
    std::vector<uint64_t> orphans;
    for (const Member& m : shard.members) orphans.push_back(m.id);
    for (uint64_t id : orphans) Remove(shard, id);
    log(absl::StrCat("shard ", index, ": ", why, "; no backup in sync is left",
                     orphans.empty() ? "" : absl::StrCat(" (", orphans.size(), " joining replica(s) removed)"),
                     ": the replicas that come back restore the newest checkpoint among them"));
    return;
  }
  Member promoted = *backup;
  shard.members.erase(backup);
  promoted.role = proto::ReplicaInfo::PRIMARY;
  shard.members.insert(shard.members.begin(), promoted);
  ++shard.epoch;
  log(absl::StrCat("shard ", index, ": ", why, "; ", Who(promoted.id, promoted.address),
                   " promoted to primary (epoch ", shard.epoch, ", version ", promoted.version, ")"));
}

void ShardReplicas::Heartbeat(const proto::RegisterPserverRequest& req, proto::RegisterPserverResponse* resp,
                              const Log& log) {
  const int32_t index = req.index();
  if (req.leaving()) {
    (void)Exited(index, req.replica_id(), "it is shutting down", log);
    resp->set_role(proto::ReplicaInfo::REMOVED);
    if (auto it = shards_.find(index); it != shards_.end()) resp->set_epoch(it->second.epoch);
    return;
  }
  Shard& shard = shards_[index];
  const int64_t now = now_ms_();
  Member* me = Find(shard, req.replica_id());
  if (me == nullptr && shard.removed.count(req.replica_id()) == 0) {
    Member m;
    m.id = req.replica_id();
    m.address = req.address();
    m.deadline_ms = now + lease_ms_;
    m.version = req.version();
    m.checkpoint_version = req.checkpoint_version();
    const bool candidates = !shard.members.empty() && shard.members.front().role == proto::ReplicaInfo::CANDIDATE;
    if (shard.epoch == 0 && shard.members.empty()) {
      // A new shard: nothing to restore, no one to wait for.
      m.role = proto::ReplicaInfo::PRIMARY;
      ++shard.epoch;
      shard.members.insert(shard.members.begin(), m);
      log(absl::StrCat("shard ", index, ": ", Who(m.id, m.address), " is the primary (epoch ", shard.epoch, ")"));
    } else if (shard.members.empty() || candidates) {
      // The shard lost every replica: gather the ones that come back.
      m.role = proto::ReplicaInfo::CANDIDATE;
      shard.members.push_back(m);
      if (shard.restore_until_ms == 0) shard.restore_until_ms = now + restore_wait_ms_;
      log(absl::StrCat("shard ", index, ": ", Who(m.id, m.address), " is back with ",
                       m.checkpoint_version < 0 ? std::string("no checkpoint")
                                                : absl::StrCat("a checkpoint of version ", m.checkpoint_version),
                       "; ", shard.members.size(),
                       shard.peak_members > 0 ? absl::StrCat(" of the shard's ", shard.peak_members) : std::string(),
                       " replica(s) back (waiting up to ", std::max<int64_t>(0, shard.restore_until_ms - now),
                       " ms for the others)"));
    } else {
      m.role = proto::ReplicaInfo::JOINING;
      shard.members.push_back(m);
      log(absl::StrCat("shard ", index, ": ", Who(m.id, m.address), " joins; it copies the shard from the primary"));
    }
    me = Find(shard, req.replica_id());
  }
  MaybeRestore(index, shard, log);
  me = Find(shard, req.replica_id());
  if (me != nullptr) {
    me->deadline_ms = now + lease_ms_;
    me->address = req.address();
    me->version = req.version();
    if (me->role == proto::ReplicaInfo::PRIMARY) {
      shard.last_version = std::max(shard.last_version, me->version);
      shard.served_version = std::max(shard.served_version, me->version);
    }
    if (me->role == proto::ReplicaInfo::PRIMARY && req.epoch() == shard.epoch) {
      for (uint64_t id : req.caught_up()) {
        Member* j = Find(shard, id);
        if (j != nullptr && j->role == proto::ReplicaInfo::JOINING) {
          j->role = proto::ReplicaInfo::BACKUP;
          log(absl::StrCat("shard ", index, ": ", Who(j->id, j->address), " caught up (version ", me->version,
                           "): now a backup in sync"));
        }
      }
      for (uint64_t id : req.dropped()) {
        Member* d = Find(shard, id);
        if (d == nullptr || d->role == proto::ReplicaInfo::PRIMARY) continue;
        log(absl::StrCat("shard ", index, ": the primary dropped ", Who(d->id, d->address),
                         " (it failed to follow the stream); the shard goes on without it"));
        Remove(shard, id);
      }
    }
  }
  // How many copies the shard holds at its fullest: the primary and backups in sync
  // (joiners may be restarts of members not yet expired, and would count twice).
  const size_t in_sync = std::count_if(shard.members.begin(), shard.members.end(), [](const Member& m) {
    return m.role == proto::ReplicaInfo::PRIMARY || m.role == proto::ReplicaInfo::BACKUP;
  });
  shard.peak_members = std::max(shard.peak_members, in_sync);
  resp->set_epoch(shard.epoch);
  resp->set_lease_ms(lease_ms_);
  resp->set_last_known_version(shard.last_version);
  me = Find(shard, req.replica_id());
  resp->set_role(me == nullptr ? proto::ReplicaInfo::REMOVED : me->role);
  for (const Member& m : shard.members) {
    proto::ReplicaInfo* info = resp->add_replicas();
    info->set_replica_id(m.id);
    info->set_address(m.address);
    info->set_role(m.role);
  }
}

bool ShardReplicas::Expire(const Log& log, int64_t now_ms) {
  const int64_t now = now_ms >= 0 ? now_ms : now_ms_();
  bool changed = false;
  for (auto& [index, shard] : shards_) {
    // A shard gathering candidates may restore (or start its wait) now.
    changed |= !shard.members.empty() && shard.members.front().role == proto::ReplicaInfo::CANDIDATE;
    bool primary_lost = false;
    std::vector<uint64_t> gone;
    for (const Member& m : shard.members) {
      if (m.deadline_ms > now) continue;
      gone.push_back(m.id);
      if (m.role == proto::ReplicaInfo::PRIMARY) primary_lost = true;
      log(absl::StrCat("shard ", index, ": ", RoleName(m.role), " ", Who(m.id, m.address), " lost its lease"));
    }
    changed |= !gone.empty();
    for (uint64_t id : gone) Remove(shard, id);
    if (primary_lost) Promote(index, shard, "its primary lost its lease", log);
    MaybeRestore(index, shard, log);
  }
  return changed;
}

bool ShardReplicas::Exited(int32_t index, uint64_t id, const std::string& why, const Log& log) {
  auto it = shards_.find(index);
  if (it == shards_.end()) return false;
  Shard& shard = it->second;
  const Member* m = Find(shard, id);
  if (m == nullptr) return false;
  const bool primary = m->role == proto::ReplicaInfo::PRIMARY;
  log(absl::StrCat("shard ", index, ": ", RoleName(m->role), " ", Who(m->id, m->address), " exited (", why, ")"));
  Remove(shard, id);
  if (primary) Promote(index, shard, absl::StrCat("its primary is gone (", why, ")"), log);
  MaybeRestore(index, shard, log);
  return true;
}

void ShardReplicas::MaybeRestore(int32_t index, Shard& shard, const Log& log) {
  if (shard.members.empty() || shard.members.front().role != proto::ReplicaInfo::CANDIDATE) {
    shard.restore_until_ms = 0;
    return;
  }
  const int64_t now = now_ms_();
  if (shard.restore_until_ms == 0) shard.restore_until_ms = now + restore_wait_ms_;  // a map read back
  // Not knowing how many it had (a map read back with none), it waits the whole time.
  const bool all_back = shard.peak_members > 0 && shard.members.size() >= shard.peak_members;
  if (!all_back && now < shard.restore_until_ms) return;
  // The newest checkpoint wins; among equals, the first back.
  auto best = shard.members.begin();
  for (auto it = shard.members.begin(); it != shard.members.end(); ++it) {
    if (it->checkpoint_version > best->checkpoint_version) best = it;
  }
  Member primary = *best;
  shard.members.erase(best);
  primary.role = proto::ReplicaInfo::PRIMARY;
  for (Member& m : shard.members) m.role = proto::ReplicaInfo::JOINING;
  shard.members.insert(shard.members.begin(), primary);
  shard.restore_until_ms = 0;
  ++shard.epoch;
  if (shard.served_version > 0 && primary.checkpoint_version < shard.served_version) {
    losses_.push_back(absl::StrCat(
        "shard ", index, " lost every replica and ",
        primary.checkpoint_version < 0 ? std::string("started over from its seed (no checkpoint)")
                                       : absl::StrCat("restored a checkpoint of version ", primary.checkpoint_version),
        "; its primary had served version ", shard.served_version, ": the updates in between are lost"));
    log("loss: " + losses_.back());
  }
  // The versions from here on count from what the new primary restores (a shard that
  // started over counts from 0 again).
  shard.served_version = std::max<int64_t>(0, primary.checkpoint_version);
  log(absl::StrCat("shard ", index, ": ", Who(primary.id, primary.address), " restores ",
                   primary.checkpoint_version < 0
                       ? std::string("no checkpoint (none of the replicas back has one)")
                       : absl::StrCat("its checkpoint of version ", primary.checkpoint_version),
                   " as the primary (epoch ", shard.epoch, "); ", shard.members.size() - 1,
                   " other replica(s) join it"));
}

void ShardReplicas::ExtendLeases(int64_t until_ms) {
  for (auto& [index, shard] : shards_) {
    for (Member& m : shard.members) m.deadline_ms = std::max(m.deadline_ms, until_ms);
  }
}

std::optional<proto::PserverInfo> ShardReplicas::Primary(int32_t index) const {
  auto it = shards_.find(index);
  if (it == shards_.end() || !HasPrimary(it->second)) return std::nullopt;
  proto::PserverInfo info;
  info.set_index(index);
  info.set_address(it->second.members.front().address);
  info.set_generation(it->second.epoch);
  for (const Member& m : it->second.members) {
    if (m.role == proto::ReplicaInfo::JOINING || m.role == proto::ReplicaInfo::CANDIDATE) {
      info.set_joining_replicas(info.joining_replicas() + 1);
    } else {
      info.set_live_replicas(info.live_replicas() + 1);
    }
  }
  return info;
}

int ShardReplicas::degraded(int wanted) const {
  int n = 0;
  for (const auto& [index, shard] : shards_) {
    auto p = Primary(index);
    if (!p || p->live_replicas() < wanted) ++n;
  }
  return n;
}

void ShardReplicas::Serialize(proto::MembershipState* state) const {
  for (const auto& [index, shard] : shards_) {
    proto::ShardReplicaState* s = state->add_shard_replicas();
    s->set_index(index);
    s->set_epoch(shard.epoch);
    s->set_last_version(shard.last_version);
    s->set_served_version_plus_one(shard.served_version + 1);
    for (const Member& m : shard.members) {
      proto::ReplicaInfo* info = s->add_replicas();
      info->set_replica_id(m.id);
      info->set_address(m.address);
      info->set_role(m.role);
    }
  }
}

StatusOr<ShardReplicas> ShardReplicas::Deserialize(const proto::MembershipState& state, int64_t lease_ms,
                                                   Clock now_ms) {
  ShardReplicas r(lease_ms, std::move(now_ms));
  const int64_t until = r.now_ms_() + lease_ms;
  for (const proto::ShardReplicaState& s : state.shard_replicas()) {
    if (s.index() < 0 || s.index() >= state.num_pservers() || r.shards_.count(s.index()) > 0) {
      return absl::DataLossError(absl::StrCat("membership state: replicated shard ", s.index(),
                                              " is outside [0, ", state.num_pservers(), ") or listed twice"));
    }
    Shard& shard = r.shards_[s.index()];
    shard.epoch = s.epoch();
    shard.last_version = s.last_version();
    shard.served_version = s.served_version_plus_one() > 0 ? s.served_version_plus_one() - 1 : s.last_version();
    for (const proto::ReplicaInfo& info : s.replicas()) {
      const bool primary = info.role() == proto::ReplicaInfo::PRIMARY;
      if (info.replica_id() == 0 || (primary && !shard.members.empty())) {
        return absl::DataLossError(absl::StrCat("membership state: shard ", s.index(),
                                                " has a replica with id 0 or a primary that is not first"));
      }
      // Candidates register again with their checkpoint's version, which the state lacks.
      if (info.role() == proto::ReplicaInfo::CANDIDATE) continue;
      Member m;
      m.id = info.replica_id();
      m.address = info.address();
      m.role = info.role();
      m.deadline_ms = until;
      shard.members.push_back(m);
    }
    shard.peak_members = std::count_if(shard.members.begin(), shard.members.end(), [](const Member& m) {
      return m.role == proto::ReplicaInfo::PRIMARY || m.role == proto::ReplicaInfo::BACKUP;
    });
  }
  return r;
}

}  // namespace pl
