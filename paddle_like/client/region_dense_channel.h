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
#include <vector>

#include "paddle_like/client/dense_channel.h"
#include "paddle_like/client/key_store.h"
#include "paddle_like/dist/shared_region.h"

namespace pl {

class RegionDenseChannel : public DenseChannel {
 public:
  // `slots`: the pserver's blocks in push order, laid out in `region`, which the
  // pserver knows as `region_id`.
  RegionDenseChannel(std::vector<DenseSlot> slots, std::shared_ptr<SharedRegion> region, uint64_t region_id)
      : slots_(std::move(slots)), region_(std::move(region)), region_id_(region_id) {}

  bool has_region() const override { return true; }
  // Copies the gradients into the region (bfloat16 channels round them there).
  bool Prepare(PushFrame& push, bool own_copies) override;
  void TakePushForGrpc(PushFrame& push) override;

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
  PushFrame PushRequestOf(const PushFrame& push, bool bring_values) const;
  // A pull through the region: the request with the values' offsets.
  proto::PullRequest PullRequestOf(const proto::PullRequest& pull) const;
  // The values area as `frame`'s dense payloads (widened from bfloat16 when bf16()).
  void AddValues(PullFrame* frame) const;
  // Whether `pull` asks for every block of this region (else it goes over gRPC).
  bool CoversEveryBlock(const proto::PullRequest& pull) const {
    return pull.dense_size() == static_cast<int>(slots_.size());
  }

  const std::vector<DenseSlot> slots_;
  const std::shared_ptr<SharedRegion> region_;
  const uint64_t region_id_;
  // This exchange's gradients: where they are, and the byte spans a link sends (from
  // the region, or from the tensors the push references).
  bool grads_in_region_ = true;
  struct Span {
    int64_t offset = 0;
    int64_t bytes = 0;
    const char* source = nullptr;  // nullptr: the region at offset
  };
  std::vector<Span> spans_;
  Bf16Residuals* residuals_ = nullptr;  // bf16() channels only
};

class ShmDenseChannel final : public RegionDenseChannel {
 public:
  using RegionDenseChannel::RegionDenseChannel;

  std::string Describe() const override;
  int64_t WireBytes(int64_t values) const override { return values * 4; }
  bool duplex() const override { return false; }
  bool push_brings_values() const override { return true; }
  Status Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push, bool bring_values,
              proto::PushResponse* response, PullFrame* values) override;
  Status Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
              PullFrame* response) override;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_REGION_DENSE_CHANNEL_H_
