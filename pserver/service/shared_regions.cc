#include "pserver/service/shared_regions.h"

#include <unistd.h>

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pl::pserver {

namespace {

int64_t QuarterOfMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return int64_t{4} << 30;
  return static_cast<int64_t>(pages) * page / 4;
}

}  // namespace

SharedRegionTable::SharedRegionTable(SharedRegionOptions options)
    : options_(options), max_link_bytes_(options.max_link_bytes > 0 ? options.max_link_bytes : QuarterOfMemory()) {
  // Ids of a restarted pserver must not collide with the ones trainers still hold.
  next_id_ = (std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) | 1;
}

SharedRegionTable::~SharedRegionTable() {
  cancel_ = true;
  absl::MutexLock l(&mu_);
  regions_.clear();  // the links' threads end before the flag they poll goes
}

StatusOr<uint64_t> SharedRegionTable::Attach(const proto::AttachRequest& request, DoorbellServer::Handler doorbell) {
  if (!options_.enabled) {
    return absl::FailedPreconditionError("this pserver does not take shared memory (--shm=false)");
  }
  if (request.shm_bytes() <= 0 || request.shm_bytes() > options_.max_region_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory size ", request.shm_bytes(),
                                                   " is outside (0, ", options_.max_region_bytes, "]"));
  }
  PL_ASSIGN_OR_RETURN(std::shared_ptr<SharedRegion> region,
                      SharedRegion::Open(request.shm_name(), static_cast<size_t>(request.shm_bytes())));
  if (region->nonce() != request.nonce()) {
    return absl::FailedPreconditionError(absl::StrCat("shared memory ", request.shm_name(),
                                                      " does not hold the trainer's nonce (another segment?)"));
  }
  absl::MutexLock l(&mu_);
  const absl::Time now = absl::Now();
  Entry entry{region, request.client_id(), now};
  // Serving before the answer is written: the caller rings once it reads the answer.
  if (doorbell) entry.doorbell = std::make_unique<DoorbellServer>(region, std::move(doorbell));
  const uint64_t id = InsertLocked(std::move(entry), now);
  region->set_answer(id);
  return id;
}

uint64_t SharedRegionTable::InsertLocked(Entry entry, absl::Time now) {
  DropIdleLocked(now);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second.client_id == entry.client_id) {
      regions_.erase(it++);
    } else {
      ++it;
    }
  }
  while (static_cast<int>(regions_.size()) >= options_.max_regions) {
    auto oldest = regions_.begin();
    for (auto it = regions_.begin(); it != regions_.end(); ++it) {
      if (it->second.LastUsed() < oldest->second.LastUsed()) oldest = it;
    }
    regions_.erase(oldest);
  }
  const uint64_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  regions_[id] = std::move(entry);
  return id;
}

StatusOr<LinkedRegion> SharedRegionTable::AttachLinked(const proto::AttachRequest& request) {
  if (!options_.links_enabled) {
    return absl::FailedPreconditionError("this pserver takes no dense links (--dense_link=false)");
  }
  if (request.shm_bytes() <= static_cast<int64_t>(SharedRegion::kHeaderBytes) ||
      request.shm_bytes() > options_.max_region_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("dense link region size ", request.shm_bytes(), " is outside (",
                                                   SharedRegion::kHeaderBytes, ", ", options_.max_region_bytes, "]"));
  }
  if (request.link_lanes() < 1 || request.link_lanes() > kMaxDenseLinkLanes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a dense link takes 1 to ", kMaxDenseLinkLanes, " lanes, not ", request.link_lanes()));
  }
  {
    absl::MutexLock l(&mu_);
    int64_t held = 0;  // by the other clients' links (this client's old one goes)
    for (const auto& [id, e] : regions_) {
      if (!e.link_token.empty() && e.client_id != request.client_id()) held += static_cast<int64_t>(e.region->total_bytes());
    }
    if (held + request.shm_bytes() > max_link_bytes_) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "a dense link of %.1f MB would bring this pserver's links to %.1f MB, past their cap of %.1f MB; this "
          "trainer's dense blocks go over gRPC",
          request.shm_bytes() / 1e6, (held + request.shm_bytes()) / 1e6, max_link_bytes_ / 1e6));
    }
  }
  PL_ASSIGN_OR_RETURN(std::shared_ptr<SharedRegion> region,
                      SharedRegion::CreatePrivate(static_cast<size_t>(request.shm_bytes()) - SharedRegion::kHeaderBytes));
  Entry entry{std::move(region), request.client_id(), absl::Now()};
  entry.link_token = rpc::RandomToken();
  entry.to_pserver.resize(request.link_lanes());
  entry.to_trainer.resize(request.link_lanes());
  LinkedRegion out;
  out.token = entry.link_token;
  absl::MutexLock l(&mu_);
  out.id = InsertLocked(std::move(entry), absl::Now());
  return out;
}

Status SharedRegionTable::AddLane(uint64_t id, const std::string& token, bool to_pserver, int lane, int lanes,
                                  std::unique_ptr<rpc::BulkConnection> conn) {
  absl::MutexLock l(&mu_);
  auto it = regions_.find(id);
  if (it == regions_.end() || it->second.link_token.empty() || !rpc::SameBytes(token, it->second.link_token)) {
    return absl::PermissionDeniedError(absl::StrCat("no dense link region ", id, " with that token"));
  }
  Entry& e = it->second;
  DenseLink::Lanes& side = to_pserver ? e.to_pserver : e.to_trainer;
  if (e.link != nullptr || lanes != static_cast<int>(side.size()) || lane < 0 || lane >= lanes || side[lane]) {
    return absl::InvalidArgumentError(absl::StrCat("dense link region ", id, ": lane ", lane, " of ", lanes,
                                                   " is not one it waits for"));
  }
  side[lane] = std::move(conn);
  auto all_in = [](const DenseLink::Lanes& v) {
    for (const auto& c : v) {
      if (!c) return false;
    }
    return true;
  };
  if (!all_in(e.to_pserver) || !all_in(e.to_trainer)) return absl::OkStatus();
  const char ready = 1;
  for (const DenseLink::Lanes* v : {&e.to_pserver, &e.to_trainer}) {
    for (const auto& c : *v) PL_RETURN_IF_ERROR(c->Write(&ready, 1, absl::Seconds(1)));
  }
  PL_ASSIGN_OR_RETURN(std::unique_ptr<DenseLink> link,
                      DenseLink::Start(std::move(e.to_trainer), std::move(e.to_pserver), e.region));
  e.link = std::move(link);
  e.last_used = absl::Now();
  return absl::OkStatus();
}

StatusOr<RegionRef> SharedRegionTable::Find(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return absl::AbortedError(absl::StrCat("unknown shared-memory region ", id, ": attach again"));
  }
  Entry& e = it->second;
  if (!e.link_token.empty()) {
    if (e.link == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("dense link region ", id, " still misses lanes"));
    }
    if (Status broken = e.link->status(); !broken.ok()) {
      std::string why(broken.message());
      regions_.erase(it);
      return absl::AbortedError(absl::StrCat("dense link region ", id, " broke (", why, "): attach again"));
    }
  }
  e.last_used = absl::Now();
  return RegionRef{e.region, e.link};
}

void SharedRegionTable::DropIdle() {
  absl::MutexLock l(&mu_);
  DropIdleLocked(absl::Now());
}

void SharedRegionTable::DropIdleLocked(absl::Time now) {
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (now - it->second.LastUsed() > options_.idle_timeout) {
      regions_.erase(it++);
    } else {
      ++it;
    }
  }
}

SharedRegionTable::Totals SharedRegionTable::Count(bool linked) const {
  absl::MutexLock l(&mu_);
  Totals t;
  for (const auto& [id, e] : regions_) {
    if (e.link_token.empty() == linked) continue;
    ++t.regions;
    t.bytes += static_cast<int64_t>(e.region->total_bytes());
  }
  return t;
}

}  // namespace pl::pserver
