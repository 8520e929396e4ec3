// GrpcDenseChannel: a pserver's dense blocks inside the gRPC calls themselves, as
// DenseFrame payloads (paddle_like/dist/dense_frame.h): the path that always works, on
// any host, and what a region channel falls back to. With bfloat16 on the wire it rounds
// each gradient block with error feedback into the push, and the pserver sends values as
// bfloat16 (PullRequest.bf16), widened on receipt. A joining replica's snapshot goes
// over sockets the joiner opens, else in gRPC pieces. See dense_channel.h.
//
// Thread-safety: as DenseChannel.
#ifndef PADDLE_LIKE_CLIENT_GRPC_DENSE_CHANNEL_H_
#define PADDLE_LIKE_CLIENT_GRPC_DENSE_CHANNEL_H_

#include <string>

#include "paddle_like/client/dense_channel.h"

namespace pl {

class GrpcDenseChannel final : public DenseChannel {
 public:
  // `residuals` (used with bfloat16 only) must outlive the channel.
  GrpcDenseChannel(WireDtype wire, Bf16Residuals* residuals) : wire_(wire), residuals_(residuals) {}

  std::string Describe() const override { return "gRPC"; }
  int64_t WireBytes(int64_t values) const override { return values * (wire_ == WireDtype::kBfloat16 ? 2 : 4); }
  bool has_region() const override { return false; }
  bool duplex() const override { return true; }
  bool push_brings_values() const override { return false; }

  // The payloads rounded to bfloat16, or copied with own_copies; else sent in place.
  bool Prepare(PushFrame& push, bool own_copies, PreparedPush* prepared) override;
  Status Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push, const PreparedPush& prepared,
              bool bring_values, proto::PushResponse* response, PullFrame* values) override;
  Status Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
              PullFrame* response) override;
  void TakePushForGrpc(PushFrame&, const PreparedPush&) override {}  // it is one already
  // The blocks referenced in the call, not copied; one push entry a call.
  Status Replicate(PserverFrameStub& stub, grpc::ClientContext* context, ReplicateFrame& call,
                   const std::vector<const PushFrame*>& pushes, proto::ReplicateResponse* response) override;
  // Over sockets the joiner opens when offered (snapshot.lanes > 0; the dense floats
  // split over the lanes, read straight into its blocks), else in InstallSnapshot pieces
  // of snapshot.piece_bytes, several in flight, each placed at its offset by the joiner
  // (grpc_snapshot.cc).
  Status SendSnapshot(const SnapshotTransfer& snapshot) override;

 private:
  const WireDtype wire_;
  Bf16Residuals* const residuals_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_GRPC_DENSE_CHANNEL_H_
