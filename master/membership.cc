#include "master/membership.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/caller.h"

namespace pl {
namespace {

Status CheckOptions(const MembershipOptions& o) {
  if (o.lease_ms <= 0) return absl::InvalidArgumentError(absl::StrCat("membership: lease_ms must be > 0, got ", o.lease_ms));
  if (o.pserver_lease_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("membership: pserver_lease_ms must be > 0, got ", o.pserver_lease_ms));
  }
  if (o.num_pservers < 0) {
    return absl::InvalidArgumentError(absl::StrCat("membership: num_pservers must be >= 0, got ", o.num_pservers));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<Membership> Membership::Create(const MembershipOptions& options, Clock now_ms) {
  PL_RETURN_IF_ERROR(CheckOptions(options));
  if (!now_ms) return absl::InvalidArgumentError("membership: no clock");
  return Membership(options, std::move(now_ms));
}

int64_t Membership::RegisterTrainer(const std::string& name, std::string token_digest) {
  int64_t id = next_trainer_id_++;
  trainers_[id] = Trainer{name, now_ms_() + options_.lease_ms, std::move(token_digest)};
  next_expiry_ms_ = std::min(next_expiry_ms_, trainers_[id].deadline_ms);
  return id;
}

Status Membership::CheckToken(int64_t trainer_id, absl::string_view token) const {
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end()) {
    // A dropped trainer (its lease ran out) or an id never given: nothing it reports
    // counts, whoever sends it; a live trainer that was dropped registers again.
    return absl::NotFoundError(absl::StrCat("trainer ", trainer_id,
                                            " is not registered (dropped when its lease ran out, or never "
                                            "registered): register again"));
  }
  if (it->second.token_digest.empty()) {
    return absl::NotFoundError(absl::StrCat("trainer ", trainer_id, " holds no token (registered before tokens); register again"));
  }
  if (!rpc::TokenMatches(token, it->second.token_digest)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "trainer ", trainer_id, "'s calls must carry the token its registration returned; this call ",
        token.empty() ? "carries none" : "carries another"));
  }
  return absl::OkStatus();
}

bool Membership::IsLive(int64_t trainer_id) const {
  auto it = trainers_.find(trainer_id);
  return it != trainers_.end() && it->second.deadline_ms > now_ms_();
}

bool Membership::Heartbeat(int64_t trainer_id) {
  if (!IsLive(trainer_id)) return false;
  trainers_[trainer_id].deadline_ms = now_ms_() + options_.lease_ms;
  next_expiry_ms_ = std::min(next_expiry_ms_, trainers_[trainer_id].deadline_ms);  // a clock set back
  return true;
}

void Membership::ExtendLeases(int64_t until_ms, int64_t replicas_until_ms) {
  for (auto& [id, t] : trainers_) t.deadline_ms = std::max(t.deadline_ms, until_ms);
  replicas_.ExtendLeases(replicas_until_ms >= 0 ? replicas_until_ms : until_ms);
}

bool Membership::Leave(int64_t trainer_id) { return trainers_.erase(trainer_id) > 0; }

std::vector<int64_t> Membership::ExpireTrainers(int64_t now_ms) {
  const int64_t now = now_ms >= 0 ? now_ms : now_ms_();
  std::vector<int64_t> dropped;
  // Leases are given as now + lease_ms: none ends before next_expiry_ms_, so most calls
  // look at no trainer.
  if (now < next_expiry_ms_) return dropped;
  int64_t next = std::numeric_limits<int64_t>::max();
  for (auto it = trainers_.begin(); it != trainers_.end();) {
    if (it->second.deadline_ms <= now) {
      dropped.push_back(it->first);
      it = trainers_.erase(it);
    } else {
      next = std::min(next, it->second.deadline_ms);
      ++it;
    }
  }
  next_expiry_ms_ = next;
  return dropped;
}

namespace {

Status CheckPserver(int32_t index, const std::string& address, int32_t num_pservers) {
  if (index < 0 || index >= num_pservers) {
    return absl::InvalidArgumentError(absl::StrCat("register pserver: index ", index, " outside [0, ", num_pservers,
                                                   ") (the job has ", num_pservers, " pservers)"));
  }
  if (address.empty()) return absl::InvalidArgumentError(absl::StrCat("register pserver ", index, ": empty address"));
  return absl::OkStatus();
}

}  // namespace

std::optional<std::string> Membership::NoteRestoredFromTrainer(int32_t index, int64_t version) {
  if (version <= 0) return std::nullopt;
  const std::string replicated = absl::StrCat("shard ", index, " lost every replica");
  const std::string single = absl::StrCat("pserver ", index, " restarted without its state");
  constexpr absl::string_view kGivenBack = "; a trainer then gave it its copy of the dense values";
  const std::string given_back =
      absl::StrCat(kGivenBack, " (version ", version, "); its optimizer state and sparse rows stay lost");
  for (auto it = losses_.rbegin(); it != losses_.rend(); ++it) {
    if (!absl::StartsWith(*it, replicated) && !absl::StartsWith(*it, single)) continue;
    if (absl::StrContains(*it, kGivenBack)) return std::nullopt;
    absl::StrAppend(&*it, given_back);
    return *it;
  }
  // No line yet: the shard went before the master heard of a version or a finished
  // task, but a trainer's copy had learned from it, so it had.
  losses_.push_back(absl::StrCat(single, " (no checkpoint to restore): its shard started over from the seed",
                                 given_back));
  return losses_.back();
}

PserverReport PserverReport::From(const proto::RegisterPserverRequest& request) {
  PserverReport r;
  r.incarnation = request.incarnation();
  r.started_empty = request.started_empty();
  // An older pserver leaves restored_version unset (0): take "none" only from one that began empty.
  r.restored_version = request.started_empty() ? -1 : request.restored_version();
  r.version = request.version();
  r.pushes_refused = request.pushes_refused();
  return r;
}

Status Membership::HeartbeatReplica(const proto::RegisterPserverRequest& request,
                                    proto::RegisterPserverResponse* response, const ShardReplicas::Log& log) {
  PL_RETURN_IF_ERROR(CheckPserver(request.index(), request.address(), options_.num_pservers));
  replicas_.Heartbeat(request, response, log);
  TakeReplicaLosses();
  if (request.replica_id() != 0) RecordRefused(request.index(), request.replica_id(), request.pushes_refused());
  response->set_generation(response->epoch());
  return absl::OkStatus();
}

StatusOr<int64_t> Membership::RegisterPserver(int32_t index, const std::string& address, const PserverReport& report,
                                              bool job_trained) {
  PL_RETURN_IF_ERROR(CheckPserver(index, address, options_.num_pservers));
  proto::PserverInfo& p = pservers_[index];
  if (report.incarnation != 0 && p.incarnation() != report.incarnation) {
    // Another process at this index. One that began empty after the job trained starts
    // the shard over from its seed: whatever the old one held and no checkpoint kept is
    // gone. One that restored a checkpoint older than what the index served lost the
    // updates in between.
    if (p.incarnation() != 0 && report.started_empty && (job_trained || p.version() > 0)) {
      losses_.push_back(absl::StrCat("pserver ", index, " restarted without its state (no checkpoint to restore): "
                                     "its shard started over from the seed"));
    } else if (p.incarnation() != 0 && !report.started_empty && report.restored_version >= 0 &&
               report.restored_version < p.version()) {
      losses_.push_back(absl::StrCat("pserver ", index, " restarted from a checkpoint of version ",
                                     report.restored_version, ", older than the version ", p.version(),
                                     " it had served: the updates in between are lost"));
    }
    p.set_incarnation(report.incarnation);
    p.set_version(report.version);
  }
  p.set_version(std::max(p.version(), report.version));
  if (report.incarnation != 0) RecordRefused(index, report.incarnation, report.pushes_refused);
  // The same address again is a periodic re-registration of a running pserver, not a
  // new incarnation (a restarted pserver binds a new port, or says so by its address).
  if (p.address() == address && p.generation() > 0) return p.generation();
  p.set_index(index);
  p.set_address(address);
  p.set_generation(p.generation() + 1);
  return p.generation();
}

bool Membership::RecordRefused(int32_t index, uint64_t process, int64_t count) {
  if (count <= 0) return false;
  const bool first = pushes_refused()[index] == 0;
  int64_t& recorded = refused_[{index, process}];
  recorded = std::max(recorded, count);
  return first;
}

std::map<int32_t, int64_t> Membership::pushes_refused() const {
  std::map<int32_t, int64_t> by_index;
  for (const auto& [who, count] : refused_) by_index[who.first] += count;
  return by_index;
}

std::vector<std::string> Membership::LossLines() const {
  std::vector<std::string> lines = losses_;
  for (const auto& [index, count] : pushes_refused()) {
    if (count == 0) continue;
    lines.push_back(absl::StrCat("pserver ", index, " refused ", count,
                                 " push(es) whose gradients were out of bounds (its log names the parameter, "
                                 "the norms and the trainer): those updates were not applied"));
  }
  return lines;
}

int64_t Membership::pserver_generation(int32_t index) const {
  auto it = pservers_.find(index);
  return it == pservers_.end() ? 0 : it->second.generation();
}

int Membership::num_live_trainers() const {
  const int64_t now = now_ms_();
  // No lease ends before next_expiry_ms_: every trainer known is live (a trainer's
  // every heartbeat asks, so this must not walk the job's trainers).
  if (now < next_expiry_ms_) return static_cast<int>(trainers_.size());
  int n = 0;
  for (const auto& [id, t] : trainers_) n += t.deadline_ms > now;
  return n;
}

std::vector<proto::TrainerInfo> Membership::live_trainers() const {
  const int64_t now = now_ms_();
  std::vector<proto::TrainerInfo> out;
  for (const auto& [id, t] : trainers_) {
    if (t.deadline_ms <= now) continue;
    proto::TrainerInfo info;
    info.set_id(id);
    info.set_address(t.name);
    info.set_lease_deadline_ms(t.deadline_ms);
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<proto::PserverInfo> Membership::pservers() const {
  std::vector<proto::PserverInfo> out;
  for (int32_t index = 0; index < options_.num_pservers; ++index) {
    if (replicas_.Has(index)) {
      if (auto primary = replicas_.Primary(index)) out.push_back(*primary);
    } else if (auto it = pservers_.find(index); it != pservers_.end()) {
      out.push_back(it->second);
    }
  }
  return out;
}

std::string Membership::trainer_name(int64_t trainer_id) const {
  auto it = trainers_.find(trainer_id);
  return it == trainers_.end() ? std::string() : it->second.name;
}

proto::MembershipState Membership::Serialize() const {
  proto::MembershipState s;
  s.set_next_trainer_id(next_trainer_id_);
  s.set_lease_ms(options_.lease_ms);
  s.set_num_pservers(options_.num_pservers);
  for (const auto& [id, t] : trainers_) {
    proto::TrainerRecord* r = s.add_trainers();
    r->set_id(id);
    r->set_name(t.name);
    r->set_lease_deadline_ms(t.deadline_ms);
    r->set_token_digest(t.token_digest);
  }
  for (const auto& [index, p] : pservers_) *s.add_pservers() = p;
  s.set_pserver_lease_ms(options_.pserver_lease_ms);
  for (const std::string& loss : losses_) s.add_losses(loss);
  for (const auto& [who, count] : refused_) {
    proto::RefusedPushes* r = s.add_refused_pushes();
    r->set_index(who.first);
    r->set_process(who.second);
    r->set_count(count);
  }
  replicas_.Serialize(&s);
  return s;
}

StatusOr<Membership> Membership::Deserialize(const proto::MembershipState& s, Clock now_ms) {
  auto bad = [](const std::string& why) { return absl::DataLossError("membership state: " + why); };
  MembershipOptions o;
  o.lease_ms = s.lease_ms();
  o.num_pservers = s.num_pservers();
  if (s.pserver_lease_ms() > 0) o.pserver_lease_ms = s.pserver_lease_ms();
  Status st = CheckOptions(o);
  if (!st.ok()) return bad(std::string(st.message()));
  if (!now_ms) return absl::InvalidArgumentError("membership: no clock");
  if (s.next_trainer_id() < 1) return bad(absl::StrCat("next trainer id ", s.next_trainer_id(), " < 1"));
  Membership m(o, std::move(now_ms));
  m.next_trainer_id_ = s.next_trainer_id();
  for (const proto::TrainerRecord& r : s.trainers()) {
    if (r.id() < 1 || r.id() >= m.next_trainer_id_) {
      return bad(absl::StrCat("trainer id ", r.id(), " outside [1, next id ", m.next_trainer_id_, ")"));
    }
    if (!m.trainers_.emplace(r.id(), Trainer{r.name(), r.lease_deadline_ms(), r.token_digest()}).second) {
      return bad(absl::StrCat("trainer ", r.id(), " listed twice"));
    }
  }
  for (const proto::PserverInfo& p : s.pservers()) {
    if (p.index() < 0 || p.index() >= o.num_pservers) {
      return bad(absl::StrCat("pserver index ", p.index(), " outside [0, ", o.num_pservers, ")"));
    }
    if (!m.pservers_.emplace(p.index(), p).second) return bad(absl::StrCat("pserver ", p.index(), " listed twice"));
  }
  PL_ASSIGN_OR_RETURN(m.replicas_, ShardReplicas::Deserialize(s, o.pserver_lease_ms, m.now_ms_));
  m.losses_.assign(s.losses().begin(), s.losses().end());
  for (const proto::RefusedPushes& r : s.refused_pushes()) {
    if (r.index() < 0 || r.index() >= o.num_pservers || r.count() < 0) {
      return bad(absl::StrCat("refused pushes of pserver ", r.index(), " (count ", r.count(), ") out of range"));
    }
    m.refused_[{r.index(), r.process()}] = r.count();
  }
  return m;
}

}  // namespace pl
