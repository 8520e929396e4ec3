// DenseChannel: how one pserver's dense blocks travel between this trainer and it,
// behind one interface, so that the parameter client routes blocks to pservers and
// retries calls without knowing what carries them. The implementations:
//
//   GrpcDenseChannel  (grpc_dense_channel.h)    the blocks inside the gRPC calls, as frames
//   ShmDenseChannel   (region_dense_channel.h)  a shared-memory region on the pserver's host
//   LinkDenseChannel  (link_dense_channel.h)    a region of this process mirrored over TCP
//                                               connections of its own, to another host
//
// bfloat16 on the wire (--wire_dtype) is a property of a channel (wire_bytes), not a path
// of its own: a gRPC or link channel rounds the gradients it sends with error feedback
// (Bf16Residuals) and widens the values it receives; shared memory always carries float32.
//
// Prepare takes a push (a step's, or some blocks' of it) into the channel's form and
// says what it made of it (PreparedPush); Push sends it (and, where the channel can,
// brings the blocks' new values back in the same call); Pull fetches values. Several
// pushes and pulls may be in flight on one channel, each push with its own PreparedPush
// (a region keeps each block in a place of its own).
// Buffers (as ps-lite states its zero-copy Push): a push's payloads may reference the
// gradient tensors; unless Prepare was told `own_copies`, those tensors must stay
// unchanged until the push's call has returned. Values a call returns may point into the
// channel's region; they stay valid while the returned frame lives (it holds the region),
// and are overwritten by the next exchange.
//
// The same channels carry a replicated pserver's stream to its other replicas
// (Replicate), with regions of their own laid out per call instead of per slot, and a
// joining replica's snapshot before it (SendSnapshot: catch-up): gRPC in pieces, or over
// sockets of its own that the joiner opens (snapshot_lanes.h); shared memory a window at
// a time, read by the joiner straight into its shard's blocks.
//
// Failure: a channel whose region the pserver forgot, or whose link broke, answers
// ABORTED. The caller then takes the push back as a gRPC frame (TakePushForGrpc) and goes
// on over a GrpcDenseChannel; a push the pserver had applied is known by its number and
// not applied twice.
//
// Thread-safety: Push and Pull may be called from several threads at once for different
// blocks (pushes of the same block must not overlap: they share its place in a region);
// Prepare of a push runs before its Push, on one thread.
#ifndef PADDLE_LIKE_CLIENT_DENSE_CHANNEL_H_
#define PADDLE_LIKE_CLIENT_DENSE_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/bf16.h"
#include "paddle_like/dist/byte_io.h"
#include "paddle_like/dist/dense_frame.h"

namespace pl {

// One dense block a pserver owns, and its two places in a region's payload: the
// gradients a push sends, and the values a pull (or a push's write-back) brings. The
// slots of a pserver follow the order in which pushes and pulls list its blocks.
struct DenseSlot {
  std::string param;
  int32_t block = 0;
  int64_t n = 0;              // floats
  int64_t grad_offset = 0;    // bytes into the region's payload
  int64_t value_offset = 0;
};

// What bfloat16 rounding dropped from each dense parameter's gradients, added to the next
// push (error feedback, paddle_like/dist/bf16.h); shared by every channel of a client so a
// channel that comes or goes keeps them. Thread-safety: one thread at a time (the client
// prepares its pushes on its training thread).
class Bf16Residuals {
 public:
  // Rounds `n` gradients of `param` starting at element `offset` into `out`.
  void Encode(const std::string& param, int64_t offset, const FloatPieces& grads, uint16_t* out);
  void Encode(const std::string& param, int64_t offset, const float* grads, int64_t n, uint16_t* out);
  // The residuals of elements [offset, offset + n) of `param` (zeros at first).
  float* For(const std::string& param, int64_t offset, int64_t n);

 private:
  absl::flat_hash_map<std::string, std::vector<float>> residuals_;
};

// What Prepare made of one push, for the calls that send it or take it back.
struct PreparedPush {
  std::vector<int> slots;        // a region's slots the push's blocks are in, in push order
  bool grads_in_region = true;   // false: a link sends them from the tensors the push references
  struct Span {
    int64_t offset = 0;
    int64_t bytes = 0;
    const char* source = nullptr;  // nullptr: the region at offset
  };
  std::vector<Span> spans;       // what a link sends
};

// A joining replica's snapshot, as a shard's primary hands it to SendSnapshot: `size`
// bytes (header.total()), the last `payload` of them the shard's dense floats.
struct SnapshotTransfer {
  proto::SnapshotChunk header;  // replica_epoch, seq, replica_id, total: on every call
  uint64_t payload = 0;
  SnapshotSource read;
  // One InstallSnapshot call to the joiner.
  std::function<Status(const proto::SnapshotChunk& chunk, proto::SnapshotAck* ack)> install;
  // gRPC: offer sockets of their own on up to this many lanes (0: pieces only), dialled
  // at `host` and checked to be `peer` (the shard's TLS identity).
  int lanes = 0;
  std::string host, peer;
  int64_t piece_bytes = 8 << 20;
  int pieces_in_flight = 4;
  absl::Duration timeout = absl::Seconds(5);  // a call's, and the longest stall of a socket
  const std::atomic<bool>* cancel = nullptr;  // set: the transfer ends (CANCELLED)
  // Out: how it went, for the logs ("over 4 sockets", "in pieces", "through shared memory").
  std::string* how = nullptr;
};

class DenseChannel {
 public:
  virtual ~DenseChannel() = default;

  // "gRPC", "shared memory (3.2 MB)", "dense link (2 lanes each way, 3.2 MB, bfloat16)".
  virtual std::string Describe() const = 0;
  // Bytes on the wire for `values` floats (2 each in bfloat16).
  virtual int64_t WireBytes(int64_t values) const = 0;
  // A region channel (shared memory or a link) rather than gRPC frames.
  virtual bool has_region() const = 0;
  // Whether a push and a pull of one exchange travel at once (each direction of a
  // connection carries one): true for gRPC and links, false for shared memory.
  virtual bool duplex() const = 0;
  // Whether Push can bring the pushed blocks' new values back (one call per exchange).
  virtual bool push_brings_values() const = 0;

  // Takes the step's push: `push` holds its header and one payload per block, in the
  // order of this pserver's slots, referencing the gradient tensors. The channel puts it
  // in the form it sends (into its region; rounded to bfloat16; copied when
  // `own_copies`, so the tensors may change once this returns). false: the blocks do not
  // match this channel's layout (nothing taken; the caller goes over gRPC).
  virtual bool Prepare(PushFrame& push, bool own_copies, PreparedPush* prepared) = 0;
  // One attempt at sending the prepared push; `push` and `prepared` are what Prepare
  // was given and made.
  // `values` (with bring_values, on a channel whose push_brings_values()): the pushed
  // blocks' new values, this push included.
  virtual Status Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push,
                      const PreparedPush& prepared, bool bring_values, proto::PushResponse* response,
                      PullFrame* values) = 0;
  // One attempt at a pull; the response's dense payloads are the values, float32.
  virtual Status Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
                      PullFrame* response) = 0;
  // After this channel failed: the prepared push as a frame to send over gRPC as it is
  // (its gradients out of the region, widened to float32 where they were rounded; the
  // rounding is in the residuals already), in `push`.
  virtual void TakePushForGrpc(PushFrame& push, const PreparedPush& prepared) = 0;

  // The replication stream (a pserver's primary to another replica of its shard, never a
  // trainer): sends `call`, a Replicate of one or more entries, with the dense blocks of
  // its push entries, which are `pushes`' payloads in entry order. gRPC puts them in the
  // call (one push entry a call); a region packs them back to back in its payload
  // (shared memory copies them there and rings the replica's doorbell instead of calling
  // where it serves one; a link sends them from where they lie). UNIMPLEMENTED: this
  // channel cannot carry these entries (send them another way and keep it): more bytes
  // than stream_room(), several entries to a replica that takes one a call, bfloat16
  // blocks to one that reads none from a region. ABORTED: the channel failed.
  virtual Status Replicate(PserverFrameStub& stub, grpc::ClientContext* context, ReplicateFrame& call,
                           const std::vector<const PushFrame*>& pushes, proto::ReplicateResponse* response) = 0;
  // The most bytes of dense blocks one Replicate call may carry (-1: no bound).
  virtual int64_t stream_room() const { return -1; }

  // Catch-up: sends `snapshot` to the joining replica and returns the status of its
  // install. UNIMPLEMENTED, before a byte is sent: this channel cannot carry it (the
  // joiner reads no snapshot from this region, a region too small for a window); send
  // it another way and keep the channel.
  virtual Status SendSnapshot(const SnapshotTransfer& snapshot) = 0;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_DENSE_CHANNEL_H_
