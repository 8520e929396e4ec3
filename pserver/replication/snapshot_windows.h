// SnapshotWindows: the joiner's side of a snapshot sent through shared memory
// (ShmDenseChannel::SendSnapshot, paddle_like/client/region_dense_channel.h). The
// primary's calls each hand in a window of the snapshot lying in the region (Deliver);
// the install, on a thread of its own, reads the snapshot through Read and Scatter as
// from a socket, straight out of the windows into the shard's blocks and rows. A
// window's call returns once the install has read all of it, so the primary may fill
// that place again; the last one's once the install has ended, with its status.
//
// Thread-safety: thread-safe. Deliver is called from the primary's calls (two at once,
// taken in snapshot order), Read and Scatter from the install's thread.
#ifndef PSERVER_REPLICATION_SNAPSHOT_WINDOWS_H_
#define PSERVER_REPLICATION_SNAPSHOT_WINDOWS_H_

#include <cstdint>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/byte_io.h"
#include "paddle_like/dist/shared_region.h"

namespace pl::pserver {

class SnapshotWindows {
 public:
  // A snapshot of `total` bytes coming through `region`; a side that waits longer than
  // `idle` for the other (no window, or a window nobody reads) gives up.
  SnapshotWindows(std::shared_ptr<SharedRegion> region, uint64_t total, absl::Duration idle);

  // The snapshot's bytes [offset, offset + bytes), at `region_offset` of the region's
  // payload: waits for its turn (the windows before it read), then until the install
  // has read it (and, when it is the last, until the install ended). INVALID_ARGUMENT
  // when it lies outside the region or the snapshot.
  Status Deliver(uint64_t offset, uint64_t region_offset, uint64_t bytes);

  // The install's side: the snapshot's next n bytes, into `data`; into `spans` in order.
  Status Read(void* data, size_t n);
  Status Scatter(const ByteSpans& spans);
  // The install ended with `result`: the calls waiting (the last window's) return it,
  // or their own error when it ended before their window was read.
  void Finish(const Status& result);
  // Ends every wait now (CANCELLED): the receiver stops.
  void Cancel();

 private:
  const uint64_t total_;
  const uint64_t region_bytes_;  // its payload's
  const absl::Duration idle_;
  absl::Mutex mu_;
  // Let go once the install ended (the joiner's table may drop the region meanwhile).
  std::shared_ptr<SharedRegion> region_ ABSL_GUARDED_BY(mu_);
  uint64_t position_ ABSL_GUARDED_BY(mu_) = 0;         // bytes read by the install so far
  const char* window_ ABSL_GUARDED_BY(mu_) = nullptr;  // the unread rest of the window in hand
  uint64_t window_left_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  Status result_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pl::pserver

#endif  // PSERVER_REPLICATION_SNAPSHOT_WINDOWS_H_
