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

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/client/dense_channel.h"
#include "paddle_like/client/key_store.h"
#include "paddle_like/dist/shared_region.h"

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

  const std::vector<DenseSlot> slots_;
  const std::shared_ptr<SharedRegion> region_;
  const uint64_t region_id_;
  absl::flat_hash_map<std::pair<std::string, int32_t>, int> slot_of_;  // (param, block) -> slots_ index
  Bf16Residuals* residuals_ = nullptr;  // bf16() channels only
};

class ShmDenseChannel final : public RegionDenseChannel {
 public:
  using RegionDenseChannel::RegionDenseChannel;

  std::string Describe() const override;
  int64_t WireBytes(int64_t values) const override { return values * 4; }
  bool duplex() const override { return false; }
  bool push_brings_values() const override { return true; }
  Status Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push, const PreparedPush& prepared,
              bool bring_values, proto::PushResponse* response, PullFrame* values) override;
  Status Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
              PullFrame* response) override;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_REGION_DENSE_CHANNEL_H_
