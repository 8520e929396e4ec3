// GrpcDenseChannel::SendSnapshot: a joining replica's snapshot over sockets of its own
// that the joiner opens when offered (paddle_like/dist/snapshot_lanes.h), else in
// InstallSnapshot pieces through the gRPC port alone. See grpc_dense_channel.h.
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "paddle_like/client/grpc_dense_channel.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/snapshot_lanes.h"

namespace pl {
namespace {

bool Cancelled(const SnapshotTransfer& t) { return t.cancel != nullptr && t.cancel->load(); }

// Pieces of t.piece_bytes, t.pieces_in_flight calls at once: each call's copies (into
// the message, onto the wire, out of it) run beside the others' on both ends. The
// receiver places each piece at its offset, so they may arrive in any order.
Status SendInPieces(const SnapshotTransfer& t) {
  const int64_t total = t.header.total();
  const int64_t piece = std::max<int64_t>(1, t.piece_bytes);
  const int64_t pieces = (total + piece - 1) / piece;
  std::atomic<int64_t> next{0};
  absl::Mutex error_mu;
  Status error;
  auto fail = [&](const Status& s) {
    next = pieces;  // the others stop after their piece
    absl::MutexLock e(&error_mu);
    if (error.ok()) error = s;
  };
  auto send_pieces = [&] {
    for (int64_t i = next.fetch_add(1); i < pieces; i = next.fetch_add(1)) {
      if (Cancelled(t)) return fail(absl::CancelledError("the snapshot's stream stopped"));
      const int64_t offset = i * piece;
      const int64_t n = std::min(piece, total - offset);
      proto::SnapshotChunk chunk = t.header;
      chunk.set_offset(offset);
      std::string* data = chunk.mutable_data();
      data->reserve(n);
      Status copied = t.read(offset, offset + n, [data](const void* bytes, size_t k) {
        data->append(static_cast<const char*>(bytes), k);
        return absl::OkStatus();
      });
      if (!copied.ok()) return fail(copied);
      chunk.set_last(offset + n == total);
      proto::SnapshotAck ack;
      if (Status s = Annotate(t.install(chunk, &ack), "snapshot"); !s.ok()) return fail(s);
    }
  };
  const int helpers = static_cast<int>(std::min<int64_t>(std::max(t.pieces_in_flight, 1), pieces)) - 1;
  std::vector<std::thread> threads;
  for (int h = 0; h < helpers; ++h) threads.emplace_back(send_pieces);
  send_pieces();
  for (std::thread& thread : threads) thread.join();
  absl::MutexLock e(&error_mu);
  return error;
}

}  // namespace

Status GrpcDenseChannel::SendSnapshot(const SnapshotTransfer& t) {
  if (t.lanes > 0) {
    proto::SnapshotChunk open = t.header;
    open.set_open_socket(true);
    open.set_socket_lanes(t.lanes);
    proto::SnapshotAck ack;
    PL_RETURN_IF_ERROR(Annotate(t.install(open, &ack), "snapshot socket"));
    if (ack.socket_port() > 0) {
      const int lanes = std::max(1, ack.socket_lanes());
      StatusOr<SnapshotLanes> dialled =
          DialLanes(t.host, ack.socket_port(), lanes, ack.socket_token(), t.payload, t.timeout, t.cancel, t.peer);
      // The joiner reads the bytes straight into its shard as they come; a stall of the
      // whole call timeout means it is gone.
      if (dialled.ok()) {
        if (t.how != nullptr) *t.how = lanes == 1 ? "over a socket" : absl::StrCat("over ", lanes, " sockets");
        return SendOverLanes(*dialled, t.header.total(), t.payload, t.read, t.timeout);
      }
      // A firewall that lets only the gRPC port through, say: nothing is sent yet, and
      // the pieces take the gRPC port.
      log::Warning(absl::StrCat("cannot reach the snapshot socket at ", t.host, ":", ack.socket_port(), " (",
                                dialled.status().message(), "); sending the snapshot through gRPC instead"));
    }
  }
  if (t.how != nullptr) *t.how = "in pieces";
  return SendInPieces(t);
}

}  // namespace pl
