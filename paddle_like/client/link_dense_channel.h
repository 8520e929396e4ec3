// LinkDenseChannel: a pserver on another host, whose dense blocks travel over a dense
// link (paddle_like/dist/dense_link.h): both ends keep a copy of the region, a push's
// gradients and a pull's values cross on TCP connections of their own (with the job's
// TLS), and the gRPC call that names them carries the link's sequence number
// (PushRequest.link_seq / PullRequest.link_seq): the bytes and the call travel apart and
// meet at the receiver. Its two directions carry a push and a pull at once (duplex).
// With bfloat16 on the wire the region holds bfloat16 values, rounded with error
// feedback, and no parameter is bound to it. A link that fails answers ABORTED.
//
// Thread-safety: as DenseChannel (its push and pull may run at once).
#ifndef PADDLE_LIKE_CLIENT_LINK_DENSE_CHANNEL_H_
#define PADDLE_LIKE_CLIENT_LINK_DENSE_CHANNEL_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/client/region_dense_channel.h"
#include "paddle_like/dist/dense_link.h"

namespace pl {

class LinkDenseChannel final : public RegionDenseChannel {
 public:
  // `link` mirrors `region`; `residuals` (bfloat16 only) outlives the channel; a call
  // waits at most `wait` for its bytes to land.
  LinkDenseChannel(std::vector<DenseSlot> slots, std::shared_ptr<SharedRegion> region, uint64_t region_id,
                   std::unique_ptr<DenseLink> link, bool bf16, Bf16Residuals* residuals, absl::Duration wait);

  std::string Describe() const override;
  int64_t WireBytes(int64_t values) const override { return values * (bf16_ ? 2 : 4); }
  bool duplex() const override { return true; }
  // A bfloat16 link pushes and pulls in two calls: the pserver writes back float32 only.
  bool push_brings_values() const override { return !bf16_; }
  Status Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push, const PreparedPush& prepared,
              bool bring_values, proto::PushResponse* response, PullFrame* values) override;
  Status Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
              PullFrame* response) override;
  // The blocks sent from where they lie, under the call's link_seq.
  Status Replicate(PserverFrameStub& stub, grpc::ClientContext* context, ReplicateFrame& call,
                   const std::vector<const PushFrame*>& pushes, proto::ReplicateResponse* response) override;
  // UNIMPLEMENTED: a link's region is sized for the stream's entries; a snapshot to
  // another host takes sockets of its own (GrpcDenseChannel), read straight into the
  // joiner's blocks instead of through a mirrored region.
  Status SendSnapshot(const SnapshotTransfer&) override {
    return absl::UnimplementedError("a dense link carries no snapshot: it goes over sockets of its own");
  }

 protected:
  bool bf16() const override { return bf16_; }
  bool SendsFromTensors(bool own_copies) const override { return !own_copies && !bf16_; }

 private:
  // A link's failure as ABORTED: the call goes again over gRPC.
  static Status Landed(const Status& link_status);

  const std::unique_ptr<DenseLink> link_;
  const bool bf16_;
  const absl::Duration wait_;
  std::atomic<uint64_t> seq_{0};  // a push and a pull may run at once
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_LINK_DENSE_CHANNEL_H_
