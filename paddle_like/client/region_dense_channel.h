// RegionDenseChannel: the channels whose dense blocks pass through a region laid out as
// [gradients of every slot | values of every slot] (paddle_like/dist/shared_region.h),
// with only the small request travelling over gRPC: the blocks are named by their
// offsets there (PushRequest.shm_dense, PullRequest.shm_offsets). A push's gradients are
// copied into the region (or, where the region is a parameter's own storage, are there
// already), and the pserver writes the new values into the values area, with the push
// itself where the channel can (shm_write_back). Two kinds (dense_channel.h):
//
//   ShmDenseChannel   here: the region is shared memory both processes map (one host)
//   LinkDenseChannel  link_dense_channel.h: each end has its copy, mirrored over TCP
//
// Thread-safety: as DenseChannel.
#ifndef PADDLE_LIKE_CLIENT_REGION_DENSE_CHANNEL_H_
#define PADDLE_LIKE_CLIENT_REGION_DENSE_CHANNEL_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/client/dense_channel.h"
#include "paddle_like/client/key_store.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/dist/shared_region.h"
#include "paddle_like/dist/stream_doorbell.h"

namespace pl {

class RegionDenseChannel : public DenseChannel {
 public:
  // `slots`: the pserver's blocks, laid out in `region`, which the pserver knows as
  // `region_id`. A push or a pull may name any of them, in any order (a layer's blocks,
  // the keys of kv_worker.h), each by its place here.
  RegionDenseChannel(std::vector<DenseSlot> slots, std::shared_ptr<SharedRegion> region, uint64_t region_id);

  bool has_region() const override { return true; }
  // Copies the gradients into the region (bfloat16 channels round them there); false
  // when a block is not one of its slots or not of its size.
  bool Prepare(PushFrame& push, bool own_copies, PreparedPush* prepared) override;
  void TakePushForGrpc(PushFrame& push, const PreparedPush& prepared) override;

  // Moves each parameter whose blocks all lie in this region, back to back, into it
  // (value and gradient tensors become views of the region), so pushes and pulls copy
  // nothing on this side. Returns how many parameters moved. Not for a bfloat16 region.
  int BindParameters(const KeyStore& keys);
  const std::shared_ptr<SharedRegion>& region() const { return region_; }

  // A replication stream's region (no slots; each Replicate call packs its blocks from
  // the payload's start): what the replica said of it at Attach.
  struct StreamAbilities {
    bool batches = false;  // several entries a call (AttachResponse.stream_batches)
    bool bf16 = false;     // bfloat16 blocks read from the region (AttachResponse.link_bf16)
  };
  void SetStreamAbilities(StreamAbilities abilities) { stream_ = abilities; }
  const StreamAbilities& stream_abilities() const { return stream_; }
  int64_t stream_room() const override { return static_cast<int64_t>(region_->payload_bytes()); }
  // The bytes `pushes`' blocks take packed (float32 ones 4-byte aligned).
  static int64_t PackedBytes(const std::vector<const PushFrame*>& pushes);

 protected:
  // Whether the region holds bfloat16 values, 2 bytes each (a link's wire dtype).
  virtual bool bf16() const { return false; }
  // Whether this exchange's gradients may be sent straight from the tensors the push
  // references instead of from the region (a link, float32, tensors that stay put).
  virtual bool SendsFromTensors(bool own_copies) const { return false; }

  // The request of the prepared push: its header, the region and its blocks' places.
  PushFrame PushRequestOf(const PushFrame& push, const PreparedPush& prepared, bool bring_values) const;
  // The slots a pull names, in its order; false when one is not here (it goes over gRPC).
  bool SlotsOf(const proto::PullRequest& pull, std::vector<int>* slots) const;
  // A pull of `slots` through the region: the request with their values' offsets.
  proto::PullRequest PullRequestOf(const proto::PullRequest& pull, const std::vector<int>& slots) const;
  // The values of `slots` as `frame`'s dense payloads (widened from bfloat16 when bf16()).
  void AddValues(const std::vector<int>& slots, PullFrame* frame) const;
  // UNIMPLEMENTED unless this region takes a stream call of `call`'s entries with
  // `pushes`' blocks (DenseChannel::Replicate).
  Status CheckStream(const ReplicateFrame& call, const std::vector<const PushFrame*>& pushes) const;
  // Names `pushes`' blocks in `call`'s push entries, packed from byte `base` of the
  // payload, and says where each piece goes (from where it lies); *end: the byte after.
  std::vector<DenseLink::Range> PackStream(ReplicateFrame& call, const std::vector<const PushFrame*>& pushes,
                                           int64_t base, int64_t* end) const;

  const std::vector<DenseSlot> slots_;
  const std::shared_ptr<SharedRegion> region_;
  const uint64_t region_id_;
  absl::flat_hash_map<std::pair<std::string, int32_t>, int> slot_of_;  // (param, block) -> slots_ index
  Bf16Residuals* residuals_ = nullptr;  // bf16() channels only
  StreamAbilities stream_;
};

class ShmDenseChannel final : public RegionDenseChannel {
 public:
  using RegionDenseChannel::RegionDenseChannel;

  // A stream's region whose replica answers calls rung in it (paddle_like/dist/
  // stream_doorbell.h): Replicate rings it, waiting at most `timeout` or until *cancel.
  void RingThrough(std::unique_ptr<DoorbellCaller> doorbell, absl::Duration timeout, const std::atomic<bool>* cancel);
  bool rings() const { return doorbell_ != nullptr; }
  // Stream calls rung through the doorbell so far (the others went over gRPC).
  int64_t rung_calls() const { return rung_calls_; }
  Status Replicate(PserverFrameStub& stub, grpc::ClientContext* context, ReplicateFrame& call,
                   const std::vector<const PushFrame*>& pushes, proto::ReplicateResponse* response) override;
  // A window at a time in each half of the region, two in flight: while the joiner reads
  // one half straight into its blocks, the other is filled (shm_snapshot.cc).
  Status SendSnapshot(const SnapshotTransfer& snapshot) override;
  // The most bytes of a snapshot one window carries.
  static constexpr int64_t kSnapshotWindowBytes = int64_t{8} << 20;

  std::string Describe() const override;
  int64_t WireBytes(int64_t values) const override { return values * 4; }
  bool duplex() const override { return false; }
  bool push_brings_values() const override { return true; }
  Status Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push, const PreparedPush& prepared,
              bool bring_values, proto::PushResponse* response, PullFrame* values) override;
  Status Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
              PullFrame* response) override;

 private:
  // Rung, the replica reads a call's blocks in place until it has applied them: a call
  // goes in the half the last one did not use (where it fits there with its header),
  // once the replica released the call that used it before.
  std::unique_ptr<DoorbellCaller> doorbell_;
  absl::Duration ring_timeout_;
  const std::atomic<bool>* cancel_ = nullptr;
  uint32_t next_half_ = kHalf0;
  int64_t rung_calls_ = 0;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_REGION_DENSE_CHANNEL_H_
