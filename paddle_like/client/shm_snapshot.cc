// ShmDenseChannel::SendSnapshot: a joining replica's snapshot through the shared memory
// of the stream to it (the joiner is on this host), a window at a time: the primary
// copies window i into half i % 2 of the region and calls the joiner, which copies it
// straight into its shard's blocks and rows and answers once it has (the last window's
// call, once the snapshot is installed). Two windows are in flight, one per half, so
// the primary's copy into one half runs beside the joiner's copy out of the other: two
// copies in all, no socket, no cipher. See region_dense_channel.h.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "paddle_like/client/region_dense_channel.h"

namespace pl {

Status ShmDenseChannel::SendSnapshot(const SnapshotTransfer& t) {
  const int64_t total = t.header.total();
  const int64_t half = (static_cast<int64_t>(region_->payload_bytes()) / 2) & ~int64_t{63};
  const int64_t window = std::min(half, kSnapshotWindowBytes);
  if (window < 4096 && window < total) {
    return absl::UnimplementedError(
        absl::StrCat("the region's ", region_->payload_bytes(), " bytes are too few for a snapshot's windows"));
  }
  proto::SnapshotChunk open = t.header;
  open.set_shm_region(region_id_);
  open.set_shm_open(true);
  proto::SnapshotAck ack;
  PL_RETURN_IF_ERROR(Annotate(t.install(open, &ack), "snapshot through shared memory"));
  if (!ack.shm_taken()) return absl::UnimplementedError("the joiner reads no snapshot from shared memory");
  if (t.how != nullptr) *t.how = "through shared memory";

  const int64_t windows = std::max<int64_t>(1, (total + window - 1) / window);
  std::atomic<bool> failed{false};
  absl::Mutex error_mu;
  Status error;
  // Windows h, h + 2, h + 4, ... in half h: a half is filled again only once the
  // joiner's answer says it read the window before out of it.
  auto send_half = [&](int h) {
    char* place = region_->payload() + h * half;
    for (int64_t i = h; i < windows && !failed; i += 2) {
      Status s;
      if (t.cancel != nullptr && t.cancel->load()) s = absl::CancelledError("the snapshot's stream stopped");
      const int64_t from = i * window, to = std::min(total, from + window);
      int64_t at = 0;
      if (s.ok()) {
        s = t.read(from, to, [&](const void* bytes, size_t n) {
          std::memcpy(place + at, bytes, n);
          at += static_cast<int64_t>(n);
          return absl::OkStatus();
        });
      }
      if (s.ok()) {
        proto::SnapshotChunk chunk = t.header;
        chunk.set_shm_region(region_id_);
        chunk.set_offset(from);
        chunk.set_shm_offset(h * half);
        chunk.set_shm_bytes(to - from);
        chunk.set_last(to == total);
        proto::SnapshotAck window_ack;
        s = Annotate(t.install(chunk, &window_ack), absl::StrCat("snapshot window at byte ", from));
      }
      if (!s.ok()) {
        failed = true;
        absl::MutexLock l(&error_mu);
        if (error.ok()) error = s;
        return;
      }
    }
  };
  std::thread second;
  if (windows > 1) second = std::thread(send_half, 1);
  send_half(0);
  if (second.joinable()) second.join();
  absl::MutexLock l(&error_mu);
  return error;
}

}  // namespace pl
