#include "pserver/shared_regions.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace pl::pserver {

SharedRegionTable::SharedRegionTable(SharedRegionOptions options) : options_(options) {
  // Ids of a restarted pserver must not collide with the ones trainers still hold.
  next_id_ = (std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) | 1;
}

StatusOr<uint64_t> SharedRegionTable::Attach(const proto::AttachRequest& request) {
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
  DropIdleLocked(now);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second.client_id == request.client_id()) {
      regions_.erase(it++);
    } else {
      ++it;
    }
  }
  while (static_cast<int>(regions_.size()) >= options_.max_regions) {
    auto oldest = regions_.begin();
    for (auto it = regions_.begin(); it != regions_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    regions_.erase(oldest);
  }
  const uint64_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  region->set_answer(id);
  regions_[id] = Entry{std::move(region), request.client_id(), now};
  return id;
}

StatusOr<std::shared_ptr<SharedRegion>> SharedRegionTable::Find(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return absl::AbortedError(absl::StrCat("unknown shared-memory region ", id, ": attach again"));
  }
  it->second.last_used = absl::Now();
  return it->second.region;
}

void SharedRegionTable::DropIdle() {
  absl::MutexLock l(&mu_);
  DropIdleLocked(absl::Now());
}

void SharedRegionTable::DropIdleLocked(absl::Time now) {
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (now - it->second.last_used > options_.idle_timeout) {
      regions_.erase(it++);
    } else {
      ++it;
    }
  }
}

int64_t SharedRegionTable::size() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(regions_.size());
}

int64_t SharedRegionTable::total_bytes() const {
  absl::MutexLock l(&mu_);
  int64_t total = 0;
  for (const auto& [id, e] : regions_) total += static_cast<int64_t>(e.region->total_bytes());
  return total;
}

}  // namespace pl::pserver
