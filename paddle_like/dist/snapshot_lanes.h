// A joining replica's snapshot over several connections at once ("lanes"), so that
// the copies on both ends, the page faults of the joiner's fresh blocks and, with TLS,
// the cipher run on several cores instead of one.
//
// The snapshot (shard_snapshot.h) ends with its dense floats, P bytes, and by the time
// a reader reaches them it knows which block each one goes to. Lane 0 carries the
// snapshot up to them, which the joiner parses as it arrives; then lane k of K carries
// the k-th slice of the P bytes, [P·k/K, P·(k+1)/K), which the joiner reads on a
// thread of its own straight into the blocks that slice covers (their fresh pages
// faulted in a span at a time first: PopulateForWrite). Each connection opens with the
// listener's token and a preamble (lane, K, P); the joiner answers on lane 0 with the
// install's status. One lane is the plain snapshot socket.
//
// Thread-safety: the functions and a LaneReceiver's calls are made from one thread at
// a time; they run the lanes on threads of their own, and the first lane to fail shuts
// the others down.
#ifndef PADDLE_LIKE_DIST_SNAPSHOT_LANES_H_
#define PADDLE_LIKE_DIST_SNAPSHOT_LANES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/byte_io.h"
#include "paddle_like/rpc/bulk_socket.h"

namespace pl {

inline constexpr int kMaxSnapshotLanes = 16;

// The lanes a snapshot takes unless told (pl-pserver --snapshot_lanes 0). With TLS the
// cipher is most of the work and splits well: 4. A plain copy gains only from cores to
// spare: one lane per 4 cores, at most 4 (on 2 cores while training, 1 lane beat 2 and 4;
// benchmarks/README.md).
int DefaultSnapshotLanes(bool tls);

using SnapshotLanes = std::vector<std::unique_ptr<rpc::BulkConnection>>;

// The primary's side. DialLanes connects all `lanes` (in parallel, each with its own
// TLS handshake) and sends each the token and its preamble, or fails; SendOverLanes
// sends the snapshot, whose last `payload` bytes are its dense floats, and returns the
// joiner's answer: the status of its install.
StatusOr<SnapshotLanes> DialLanes(const std::string& host, int port, int lanes, const std::string& token,
                                  uint64_t payload, absl::Duration timeout, const std::atomic<bool>* cancel,
                                  const std::string& peer);
Status SendOverLanes(const SnapshotLanes& lanes, uint64_t size, uint64_t payload, const SnapshotSource& snapshot,
                     absl::Duration idle);

// The joiner's side: the lanes of one snapshot, accepted from a listener.
class LaneReceiver {
 public:
  // The `lanes` connections that present the listener's token and a consistent
  // preamble, before `deadline`; strangers are closed unread. Connections are vetted
  // (handshake, token, preamble) on threads of their own, so the lanes' handshakes
  // overlap.
  static StatusOr<std::unique_ptr<LaneReceiver>> Accept(rpc::BulkListener* listener, int lanes, absl::Time deadline);

  // The snapshot up to its dense floats, in order (lane 0).
  Status Read(void* data, size_t n, absl::Duration idle);
  // The dense floats, each lane's slice on a thread of its own, into `spans` in order.
  // DATA_LOSS when they are not the P bytes the preambles announced.
  Status Scatter(const ByteSpans& spans, absl::Duration idle);
  // The install's status, to the primary (lane 0).
  Status Reply(const Status& result, absl::Duration idle);

  int lanes() const { return static_cast<int>(lanes_.size()); }

 private:
  LaneReceiver(SnapshotLanes lanes, uint64_t payload) : lanes_(std::move(lanes)), payload_(payload) {}
  SnapshotLanes lanes_;
  const uint64_t payload_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_SNAPSHOT_LANES_H_
