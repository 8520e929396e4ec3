// SnapshotReceiver: a joining replica's receipt of its primary's snapshot, the shard's
// state at a position of the primary's stream. In gRPC pieces (OnChunk: each lands at its
// offset in a buffer of the announced size, in any order, and the shard loads it once
// every byte is in); or, straight into the shard's blocks and rows, read off TCP sockets
// of their own that the primary's first call opens (paddle_like/dist/snapshot_lanes.h),
// or out of the shared memory of the primary's stream, a window a call
// (snapshot_windows.h). The primary picks by its channel (paddle_like/client/
// dense_channel.h, SendSnapshot).
//
// The replicator decides whether a snapshot is welcome (Hooks: for this replica, while
// it joins, of an epoch not older than its own) and hears when one is installed, from
// when the stream goes on. A snapshot that cannot be installed, or a second one, leaves
// the replica untrustworthy (Hooks::fatal).
//
// Thread-safety: thread-safe. `follow_mu`, the replicator's lock that serialises the
// stream's receipt, is held while a snapshot is checked and installed, so no entry of
// the stream is taken meanwhile.
#ifndef PSERVER_REPLICATION_SNAPSHOT_RECEIVER_H_
#define PSERVER_REPLICATION_SNAPSHOT_RECEIVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/shared_region.h"
#include "paddle_like/rpc/bulk_socket.h"
#include "proto/pserver.pb.h"
#include "pserver/replication/snapshot_windows.h"
#include "pserver/store/shard.h"

namespace pl::pserver {

class SnapshotReceiver {
 public:
  struct Options {
    int index = 0;                       // the shard, for logs and the sockets' identity
    bool socket = true;                  // take the primary's offer of sockets
    bool shared_memory = true;           // and of its stream's shared memory
    int lanes = 4;                       // on up to this many at once
    std::string listen_host = "127.0.0.1";
    absl::Duration slow_joiner;          // a test's fault (faults.h): slower once installed
  };
  struct Hooks {
    // The shard a snapshot of `chunk` may go into (the replicator adopts its epoch), or
    // why it may not.
    std::function<StatusOr<ParameterShard*>(const proto::SnapshotChunk& chunk)> accept;
    // Whether an offer of sockets is of the current epoch while joining (checked before
    // an earlier offer is cancelled, so a stale primary cannot end the current transfer).
    std::function<Status(const proto::SnapshotChunk& chunk)> check_offer;
    // The snapshot is in: the stream goes on from `position`.
    std::function<void(int64_t position)> installed;
    std::function<void(const std::string& why)> fatal;
  };

  SnapshotReceiver(Options options, Hooks hooks, absl::Mutex* follow_mu);
  ~SnapshotReceiver();  // Stop()
  SnapshotReceiver(const SnapshotReceiver&) = delete;
  SnapshotReceiver& operator=(const SnapshotReceiver&) = delete;

  // One InstallSnapshot call: a piece; the primary's offer of sockets (answered with a
  // port, a token and the lanes taken, or with none of them: the pieces follow); its
  // offer of shared memory, `region` being the one the call names (null when this
  // process holds none by its id: the snapshot then goes another way); or a window in it.
  Status OnChunk(const proto::SnapshotChunk& chunk, std::shared_ptr<SharedRegion> region, proto::SnapshotAck* ack);
  // Ends a socket or shared-memory transfer under way (its thread takes follow_mu, so
  // call it unheld).
  void Stop();
  bool installed() const { return installed_.load(); }
  // The installed snapshot was past version 0 (the shard had trained).
  bool joined_trained() const { return joined_trained_.load(); }

 private:
  // A transfer offered to the primary: the sockets, or the windows of shared memory,
  // and the thread installing the snapshot from them.
  struct Transfer {
    ~Transfer();  // cancels and joins
    std::atomic<bool> cancel{false};
    std::unique_ptr<rpc::BulkListener> listener;
    std::shared_ptr<SnapshotWindows> windows;
    std::thread thread;
  };
  // Hooks::accept, and the checks of the snapshot itself (one only; a sane size).
  StatusOr<ParameterShard*> Accept(const proto::SnapshotChunk& chunk);
  void Installed(const ParameterShard& shard, int64_t position);
  Status OpenSocket(const proto::SnapshotChunk& chunk, proto::SnapshotAck* ack);
  void InstallFromSocket(Transfer* install, const proto::SnapshotChunk& chunk, int lanes);
  Status OpenWindows(const proto::SnapshotChunk& chunk, std::shared_ptr<SharedRegion> region, proto::SnapshotAck* ack);
  void InstallFromWindows(SnapshotWindows* windows, const proto::SnapshotChunk& chunk);
  Status DeliverWindow(const proto::SnapshotChunk& chunk, proto::SnapshotAck* ack);
  // Reads the snapshot of `chunk` through `read` and `scatter` into the shard, under
  // follow_mu_; *version: the installed shard's. A failure other than CANCELLED leaves
  // the replica untrustworthy (Hooks::fatal).
  Status InstallStreamed(const proto::SnapshotChunk& chunk, const ByteReader& read, const ScatterReader& scatter,
                         int64_t* version);

  const Options options_;
  const Hooks hooks_;
  absl::Mutex* const follow_mu_;
  std::atomic<bool> installed_{false};
  std::atomic<bool> joined_trained_{false};
  // The snapshot in pieces as they arrive (follow_mu_ held).
  std::unique_ptr<char[]> buffer_;
  int64_t total_ = 0;  // 0: none under way
  int64_t received_ = 0;
  std::set<int64_t> offsets_;
  absl::Mutex socket_mu_;  // before follow_mu_
  std::unique_ptr<Transfer> transfer_ ABSL_GUARDED_BY(socket_mu_);
};

}  // namespace pl::pserver

#endif  // PSERVER_REPLICATION_SNAPSHOT_RECEIVER_H_
