#include "paddle_like/client/link_dense_channel.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {

LinkDenseChannel::LinkDenseChannel(std::vector<DenseSlot> slots, std::shared_ptr<SharedRegion> region,
                                   uint64_t region_id, std::unique_ptr<DenseLink> link, bool bf16,
                                   Bf16Residuals* residuals, absl::Duration wait)
    : RegionDenseChannel(std::move(slots), std::move(region), region_id),
      link_(std::move(link)),
      bf16_(bf16),
      wait_(wait) {
  residuals_ = residuals;
}

std::string LinkDenseChannel::Describe() const {
  return absl::StrFormat("dense link (%d lanes each way, %.1f MB%s)", link_->lanes(), region_->total_bytes() / 1e6,
                         bf16_ ? ", bfloat16" : "");
}

Status LinkDenseChannel::Landed(const Status& link_status) {
  if (link_status.ok()) return link_status;
  return absl::AbortedError(absl::StrCat("dense link: ", link_status.message()));
}

Status LinkDenseChannel::Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push,
                              const PreparedPush& prepared, bool bring_values, proto::PushResponse* response,
                              PullFrame* values) {
  PushFrame request = PushRequestOf(push, prepared, bring_values);
  const uint64_t seq = ++seq_;
  request.header().set_link_seq(seq);
  std::vector<DenseLink::Range> ranges;
  ranges.reserve(prepared.spans.size());
  for (const PreparedPush::Span& s : prepared.spans) ranges.push_back({s.offset, s.bytes, s.source});
  // The call goes while the gradients travel: the pserver waits for them to land.
  Status st = Landed(link_->StartSend(seq, ranges));
  if (!st.ok()) return st;
  st = rpc::FromGrpc(stub.Push(context, request, response));
  // An answered push had its gradients; a link that broke after is found so next.
  const Status sent = link_->FinishSend();
  if (!st.ok() && !sent.ok()) st = Landed(sent);
  if (st.ok() && bring_values) {
    st = Landed(link_->WaitFor(seq, absl::Now() + wait_));
    if (st.ok()) AddValues(prepared.slots, values);
  }
  return st;
}

Status LinkDenseChannel::Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
                              PullFrame* response) {
  std::vector<int> slots;
  if (!SlotsOf(request, &slots)) return rpc::FromGrpc(stub.Pull(context, request, response));
  proto::PullRequest linked = PullRequestOf(request, slots);
  const uint64_t seq = ++seq_;
  linked.set_link_seq(seq);
  Status st = rpc::FromGrpc(stub.Pull(context, linked, response));
  if (st.ok()) st = Landed(link_->WaitFor(seq, absl::Now() + wait_));
  if (st.ok()) AddValues(slots, response);
  return st;
}

Status LinkDenseChannel::Replicate(PserverFrameStub& stub, grpc::ClientContext* context, ReplicateFrame& call,
                                   const std::vector<const PushFrame*>& pushes, proto::ReplicateResponse* response) {
  PL_RETURN_IF_ERROR(CheckStream(call, pushes));
  int64_t end = 0;
  const std::vector<DenseLink::Range> ranges = PackStream(call, pushes, 0, &end);
  const uint64_t seq = ++seq_;
  call.header().set_link_seq(seq);
  // The call goes while the blocks travel: the replica waits for them to land.
  Status st = Landed(link_->StartSend(seq, ranges));
  if (!st.ok()) return st;
  st = rpc::FromGrpc(stub.Replicate(context, call, response));
  // An answered call means the blocks landed; a link that broke after is found so next.
  const Status sent = link_->FinishSend();
  if (!st.ok() && !sent.ok()) st = Landed(sent);
  return st;
}

}  // namespace pl
