#include "paddle_like/client/grpc_dense_channel.h"

#include <utility>

#include "paddle_like/dist/sharding.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {

bool GrpcDenseChannel::Prepare(PushFrame& push, bool own_copies, PreparedPush* prepared) {
  *prepared = PreparedPush();
  const bool bf16 = wire_ == WireDtype::kBfloat16;
  if (!bf16 && !own_copies) return true;
  PushFrame out;
  out.header().Swap(&push.header());
  for (const DenseFramePayload& d : push.dense()) {
    const int64_t n = d.values.size();
    if (bf16) {
      const int64_t offset = static_cast<int64_t>(d.block) * kDefaultBlockSize;
      const float* in_place = d.values.contiguous();
      std::vector<float> gathered;
      if (in_place == nullptr) {
        gathered.resize(n);
        d.values.CopyTo(gathered.data());
        in_place = gathered.data();
      }
      out.AddDenseBf16(d.param, d.block, in_place, n, residuals_->For(d.param, offset, n));
    } else {
      d.values.CopyTo(out.AddDenseBuffer(d.param, d.block, n));
    }
  }
  push = std::move(out);
  return true;
}

Status GrpcDenseChannel::Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push,
                              const PreparedPush&, bool, proto::PushResponse* response, PullFrame*) {
  return rpc::FromGrpc(stub.Push(context, push, response));
}

Status GrpcDenseChannel::Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
                              PullFrame* response) {
  return rpc::FromGrpc(stub.Pull(context, request, response));
}

Status GrpcDenseChannel::Replicate(PserverFrameStub& stub, grpc::ClientContext* context, ReplicateFrame& call,
                                   const std::vector<const PushFrame*>& pushes, proto::ReplicateResponse* response) {
  if (pushes.size() > 1) return absl::UnimplementedError("a gRPC stream call carries one push entry");
  if (!pushes.empty()) call.AddPayloadsOf(*pushes.front());
  return rpc::FromGrpc(stub.Replicate(context, call, response));
}

}  // namespace pl
