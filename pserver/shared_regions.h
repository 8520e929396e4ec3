// SharedRegionTable: the shared-memory regions that trainers on this pserver's host
// attached (proto/pserver.proto, Attach), by the id the pserver gave each.
//
// A region is dropped when the same client attaches again, when it has not been used
// for `idle_timeout` (a trainer that died, or waits for work; it attaches again on its
// next call, which gets ABORTED for the unknown id), or when more than `max_regions`
// exist (the least recently used goes). So a job whose trainers come and go does not
// keep their memory alive for long.
//
// Thread-safety: thread-safe.
#ifndef PSERVER_SHARED_REGIONS_H_
#define PSERVER_SHARED_REGIONS_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/shared_region.h"
#include "proto/pserver.pb.h"

namespace pl::pserver {

struct SharedRegionOptions {
  bool enabled = true;  // false: every Attach is refused (FAILED_PRECONDITION)
  absl::Duration idle_timeout = absl::Seconds(60);
  int max_regions = 64;
  int64_t max_region_bytes = int64_t{16} << 30;
};

class SharedRegionTable {
 public:
  explicit SharedRegionTable(SharedRegionOptions options = {});

  // Maps the trainer's segment, checks its nonce, writes the answer; returns the id.
  StatusOr<uint64_t> Attach(const proto::AttachRequest& request);
  // The region `id`, marked as used now; ABORTED when unknown (the pserver restarted,
  // or dropped it), which tells the trainer to attach again.
  StatusOr<std::shared_ptr<SharedRegion>> Find(uint64_t id);
  // Drops the regions unused for longer than the idle timeout.
  void DropIdle();

  int64_t size() const;
  int64_t total_bytes() const;

 private:
  struct Entry {
    std::shared_ptr<SharedRegion> region;
    uint64_t client_id = 0;
    absl::Time last_used;
  };
  void DropIdleLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SharedRegionOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> regions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pl::pserver

#endif  // PSERVER_SHARED_REGIONS_H_
