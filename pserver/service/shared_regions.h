// SharedRegionTable: the shared-memory regions that trainers on this pserver's host
// attached (proto/pserver.proto, Attach), by the id the pserver gave each, and the
// regions of trainers on other hosts, held in this process's memory and mirrored over
// a dense link (paddle_like/dist/dense_link.h) whose lanes DenseLinkListener hands in.
//
// A region is dropped when the same client attaches again, when it has not been used
// for `idle_timeout` (a trainer that died, or waits for work; it attaches again on its
// next call, which gets ABORTED for the unknown id), or when more than `max_regions`
// exist (the least recently used goes). So a job whose trainers come and go does not
// keep their memory alive for long.
//
// Thread-safety: thread-safe.
#ifndef PSERVER_SERVICE_SHARED_REGIONS_H_
#define PSERVER_SERVICE_SHARED_REGIONS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/dist/shared_region.h"
#include "proto/pserver.pb.h"
#include "paddle_like/dist/stream_doorbell.h"

namespace pl::pserver {

struct SharedRegionOptions {
  bool enabled = true;  // false: every Attach is refused (FAILED_PRECONDITION)
  absl::Duration idle_timeout = absl::Seconds(60);
  int max_regions = 64;
  int64_t max_region_bytes = int64_t{16} << 30;
  bool links_enabled = true;  // false: a dense link is refused (FAILED_PRECONDITION)
  // The most this process's linked regions may hold together (each is 2x the dense
  // bytes a trainer exchanges with this pserver): a link beyond it is refused
  // (RESOURCE_EXHAUSTED) and that trainer keeps gRPC, instead of the pserver running out
  // of memory as trainers join. 0: a quarter of the machine's memory.
  int64_t max_link_bytes = 0;
};

// A region as a call uses it: its memory, and the link that mirrors it (if any).
struct RegionRef {
  std::shared_ptr<SharedRegion> region;
  std::shared_ptr<DenseLink> link;
};

// What a trainer needs to open a linked region's lanes.
struct LinkedRegion {
  uint64_t id = 0;
  std::string token;  // the region's own, presented in each lane's preamble
};

class SharedRegionTable {
 public:
  explicit SharedRegionTable(SharedRegionOptions options = {});
  ~SharedRegionTable();

  // Maps the trainer's segment, checks its nonce, writes the answer; returns the id.
  // With `doorbell` (a primary's stream that asked for one), a DoorbellServer answers
  // the calls rung in the region with it while the region lives; `doorbell` must not
  // call into this table (the table joins the server's thread under its lock).
  StatusOr<uint64_t> Attach(const proto::AttachRequest& request, DoorbellServer::Handler doorbell = nullptr);
  // A region of request.shm_bytes in this process, to be mirrored over a dense link of
  // request.link_lanes connections each way; usable once AddLane has them all.
  StatusOr<LinkedRegion> AttachLinked(const proto::AttachRequest& request);
  // Lane `lane` of `lanes` of linked region `id`, `to_pserver` or back, if `token` is
  // the region's; the last one starts the link after writing one byte on every lane.
  Status AddLane(uint64_t id, const std::string& token, bool to_pserver, int lane, int lanes,
                 std::unique_ptr<rpc::BulkConnection> conn);
  // The region `id` and its dense link (null for a shared-memory region), marked as
  // used now, in one lookup. ABORTED when unknown (the pserver restarted, or dropped
  // it) or its link broke, which tells the trainer to attach again;
  // FAILED_PRECONDITION while a link still misses lanes.
  StatusOr<RegionRef> Find(uint64_t id);
  // Drops the regions unused for longer than the idle timeout.
  void DropIdle();

  // The cancel flag of the connections the table holds (set when it goes).
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }

  // Shared-memory regions (linked = false) or linked ones: how many, how many bytes.
  struct Totals {
    int64_t regions = 0, bytes = 0;
  };
  Totals Count(bool linked) const;

 private:
  struct Entry {
    std::shared_ptr<SharedRegion> region;
    uint64_t client_id = 0;
    absl::Time last_used;
    // A linked region: its token, its lanes as they come in, then its link.
    std::string link_token;
    DenseLink::Lanes to_pserver, to_trainer;
    std::shared_ptr<DenseLink> link;
    std::unique_ptr<DoorbellServer> doorbell;  // calls rung through the region, if asked for
    absl::Time LastUsed() const { return doorbell ? std::max(last_used, doorbell->last_rung()) : last_used; }
  };
  void DropIdleLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `client`'s older region and the least recently used beyond max_regions, then
  // adds `entry` under a new id.
  uint64_t InsertLocked(Entry entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SharedRegionOptions options_;
  const int64_t max_link_bytes_;
  std::atomic<bool> cancel_{false};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> regions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_SHARED_REGIONS_H_
