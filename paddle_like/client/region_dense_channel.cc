#include "paddle_like/client/region_dense_channel.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "paddle_like/core/parallel_for.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {

RegionDenseChannel::RegionDenseChannel(std::vector<DenseSlot> slots, std::shared_ptr<SharedRegion> region,
                                       uint64_t region_id)
    : slots_(std::move(slots)), region_(std::move(region)), region_id_(region_id) {
  for (size_t i = 0; i < slots_.size(); ++i) slot_of_[{slots_[i].param, slots_[i].block}] = static_cast<int>(i);
}

bool RegionDenseChannel::Prepare(PushFrame& push, bool own_copies, PreparedPush* prepared) {
  const std::vector<DenseFramePayload>& dense = push.dense();
  *prepared = PreparedPush();
  for (const DenseFramePayload& d : dense) {
    auto it = slot_of_.find(std::make_pair(d.param, d.block));
    if (it == slot_of_.end() || slots_[it->second].n != d.values.size()) return false;
    prepared->slots.push_back(it->second);
  }
  // A link sends from the tensors themselves when they stay put until the push is done
  // (not StartExchange's copies): one copy of the gradients fewer.
  const bool from_tensors = SendsFromTensors(own_copies);
  std::vector<size_t> to_copy;  // blocks copied into the region, on several threads below
  int64_t copied_floats = 0;
  for (size_t i = 0; i < dense.size(); ++i) {
    const DenseSlot& slot = slots_[prepared->slots[i]];
    char* dst = region_->payload() + slot.grad_offset;
    const float* in_place = dense[i].values.contiguous();
    if (bf16()) {
      residuals_->Encode(slot.param, static_cast<int64_t>(slot.block) * kDefaultBlockSize, dense[i].values,
                         reinterpret_cast<uint16_t*>(dst));
      prepared->spans.push_back({slot.grad_offset, slot.n * 2});
    } else if (from_tensors && in_place != nullptr && reinterpret_cast<const char*>(in_place) != dst) {
      prepared->spans.push_back({slot.grad_offset, slot.n * 4, reinterpret_cast<const char*>(in_place)});
      prepared->grads_in_region = false;
    } else {
      // A parameter bound to the region has its gradients there already.
      if (reinterpret_cast<const char*>(in_place) != dst) {
        to_copy.push_back(i);
        copied_floats += slot.n;
      }
      prepared->spans.push_back({slot.grad_offset, slot.n * 4});
    }
  }
  ParallelFor(static_cast<int64_t>(to_copy.size()), ThreadsForDense(copied_floats), [&](int64_t k) {
    const size_t i = to_copy[k];
    dense[i].values.CopyTo(reinterpret_cast<float*>(region_->payload() + slots_[prepared->slots[i]].grad_offset));
  });
  return true;
}

PushFrame RegionDenseChannel::PushRequestOf(const PushFrame& push, const PreparedPush& prepared,
                                            bool bring_values) const {
  PushFrame request;
  request.header() = push.header();
  request.header().set_shm_region(region_id_);
  request.header().set_shm_write_back(bring_values);
  for (int i : prepared.slots) {
    const DenseSlot& slot = slots_[i];
    proto::ShmBlock* b = request.header().add_shm_dense();
    b->set_param(slot.param);
    b->set_block(slot.block);
    b->set_offset(slot.grad_offset);
    b->set_count(slot.n);
    b->set_write_offset(slot.value_offset);
    b->set_bf16(bf16());
  }
  return request;
}

bool RegionDenseChannel::SlotsOf(const proto::PullRequest& pull, std::vector<int>* slots) const {
  slots->clear();
  for (const proto::DenseBlock& b : pull.dense()) {
    auto it = slot_of_.find(std::make_pair(b.param(), b.block()));
    if (it == slot_of_.end()) return false;
    slots->push_back(it->second);
  }
  return true;
}

proto::PullRequest RegionDenseChannel::PullRequestOf(const proto::PullRequest& pull,
                                                     const std::vector<int>& slots) const {
  proto::PullRequest request = pull;
  request.set_shm_region(region_id_);
  request.set_bf16(bf16());  // shared memory on one host takes float32
  for (int i : slots) request.add_shm_offsets(slots_[i].value_offset);
  return request;
}

void RegionDenseChannel::AddValues(const std::vector<int>& slots, PullFrame* frame) const {
  for (int i : slots) {
    const DenseSlot& slot = slots_[i];
    const char* at = region_->payload() + slot.value_offset;
    if (bf16()) {
      DecodeBf16(at, slot.n, frame->AddDenseBuffer(slot.param, slot.block, slot.n));
    } else {
      frame->AddDenseRef(slot.param, slot.block, reinterpret_cast<const float*>(at), slot.n, region_);
    }
  }
}

void RegionDenseChannel::TakePushForGrpc(PushFrame& push, const PreparedPush& prepared) {
  // Gradients sent from the tensors are still there: the frame already names them.
  if (!prepared.grads_in_region) return;
  PushFrame frame;
  frame.header().Swap(&push.header());
  for (int i : prepared.slots) {
    const DenseSlot& slot = slots_[i];
    const char* at = region_->payload() + slot.grad_offset;
    if (bf16()) {
      // Widened back to float32 exactly (the rounding is in the residual already).
      DecodeBf16(at, slot.n, frame.AddDenseBuffer(slot.param, slot.block, slot.n));
    } else {
      frame.AddDenseRef(slot.param, slot.block, reinterpret_cast<const float*>(at), slot.n, region_);
    }
  }
  push = std::move(frame);
}

int RegionDenseChannel::BindParameters(const KeyStore& keys) {
  int bound = 0;
  size_t k = 0;
  while (k < slots_.size()) {
    // The slots of one parameter follow each other; bind it when all its blocks are
    // here and lie back to back (every block but the last is whole and aligned).
    size_t end = k;
    int64_t floats = 0;
    bool contiguous = true;
    while (end < slots_.size() && slots_[end].param == slots_[k].param) {
      contiguous &= slots_[end].grad_offset == slots_[k].grad_offset + floats * 4;
      floats += slots_[end].n;
      ++end;
    }
    StatusOr<Parameter*> p = keys.Find(slots_[k].param);
    const size_t first = k;
    k = end;
    if (!p.ok() || !contiguous || (*p)->var.value().numel() != floats || slots_[first].block != 0) continue;
    VariableNode* node = (*p)->var.node();
    const Shape shape = node->value.shape();
    const size_t bytes = static_cast<size_t>(floats) * 4;
    char* values = region_->payload() + slots_[first].value_offset;
    char* grads = region_->payload() + slots_[first].grad_offset;
    std::memcpy(values, node->value.f32(), bytes);
    if (node->grad.defined()) {
      std::memcpy(grads, node->grad.f32(), bytes);
    } else {
      std::memset(grads, 0, bytes);
    }
    std::shared_ptr<SharedRegion> keep = region_;  // the tensors keep the mapping alive
    node->value = Tensor::FromStorage(Storage::Wrap(values, bytes, Device::kCPU, [keep] {}), shape, DType::kFloat32);
    node->grad = Tensor::FromStorage(Storage::Wrap(grads, bytes, Device::kCPU, [keep] {}), shape, DType::kFloat32);
    ++bound;
  }
  return bound;
}

std::string ShmDenseChannel::Describe() const {
  return absl::StrFormat("shared memory (%.1f MB%s)", region_->total_bytes() / 1e6,
                         doorbell_ != nullptr ? ", calls rung in it" : "");
}

Status ShmDenseChannel::Push(PserverFrameStub& stub, grpc::ClientContext* context, PushFrame& push,
                             const PreparedPush& prepared, bool bring_values, proto::PushResponse* response,
                             PullFrame* values) {
  const PushFrame request = PushRequestOf(push, prepared, bring_values);
  Status st = rpc::FromGrpc(stub.Push(context, request, response));
  if (st.ok() && bring_values) AddValues(prepared.slots, values);
  return st;
}

Status ShmDenseChannel::Pull(PserverFrameStub& stub, grpc::ClientContext* context, const proto::PullRequest& request,
                             PullFrame* response) {
  std::vector<int> slots;
  if (!SlotsOf(request, &slots)) return rpc::FromGrpc(stub.Pull(context, request, response));
  Status st = rpc::FromGrpc(stub.Pull(context, PullRequestOf(request, slots), response));
  if (st.ok()) AddValues(slots, response);
  return st;
}

// ------------------------------------------------------------------ the stream

namespace {
// Where a block starts in a stream call's packing: float32 blocks 4-byte aligned.
int64_t AlignedTo4(int64_t at) { return (at + 3) & ~int64_t{3}; }
}  // namespace

int64_t RegionDenseChannel::PackedBytes(const std::vector<const PushFrame*>& pushes) {
  int64_t bytes = 0;
  for (const PushFrame* push : pushes) {
    for (const DenseFramePayload& d : push->dense()) bytes = AlignedTo4(bytes) + d.values.num_bytes();
  }
  return bytes;
}

Status RegionDenseChannel::CheckStream(const ReplicateFrame& call, const std::vector<const PushFrame*>& pushes) const {
  if (PackedBytes(pushes) > stream_room()) return absl::UnimplementedError("the entries do not fit in the region");
  if (call.header().entries_size() > 1 && !stream_.batches) {
    return absl::UnimplementedError("the replica takes one entry a call");
  }
  if (!stream_.bf16) {
    for (const PushFrame* push : pushes) {
      for (const DenseFramePayload& d : push->dense()) {
        if (d.bf16) return absl::UnimplementedError("the replica reads only float32 from a region");
      }
    }
  }
  return absl::OkStatus();
}

std::vector<DenseLink::Range> RegionDenseChannel::PackStream(ReplicateFrame& call,
                                                             const std::vector<const PushFrame*>& pushes,
                                                             int64_t base, int64_t* end) const {
  call.header().set_region(region_id_);
  std::vector<DenseLink::Range> ranges;
  int64_t at = base;
  size_t next = 0;
  for (proto::ReplicaEntry& entry : *call.header().mutable_entries()) {
    if (!entry.has_push() || next == pushes.size()) continue;
    for (const DenseFramePayload& d : pushes[next++]->dense()) {
      at = AlignedTo4(at);
      proto::ShmBlock* b = entry.mutable_push()->add_shm_dense();
      b->set_param(d.param);
      b->set_block(d.block);
      b->set_offset(at);
      b->set_count(d.bf16 ? d.values.num_bytes() / 2 : d.values.size());
      b->set_bf16(d.bf16);
      d.values.ForEachPiece([&](const char* data, size_t n) {
        ranges.push_back({at, static_cast<int64_t>(n), data});
        at += static_cast<int64_t>(n);
      });
    }
  }
  *end = at;
  return ranges;
}

void ShmDenseChannel::RingThrough(std::unique_ptr<DoorbellCaller> doorbell, absl::Duration timeout,
                                  const std::atomic<bool>* cancel) {
  doorbell_ = std::move(doorbell);
  ring_timeout_ = timeout;
  cancel_ = cancel;
}

Status ShmDenseChannel::Replicate(PserverFrameStub& stub, grpc::ClientContext* context, ReplicateFrame& call,
                                  const std::vector<const PushFrame*>& pushes, proto::ReplicateResponse* response) {
  PL_RETURN_IF_ERROR(CheckStream(call, pushes));
  static const std::atomic<bool> kNever{false};
  const std::atomic<bool>& cancel = cancel_ != nullptr ? *cancel_ : kNever;
  const int64_t payload = PackedBytes(pushes);
  uint32_t halves = kHalf0 | kHalf1;
  int64_t base = 0, limit = static_cast<int64_t>(region_->payload_bytes());
  if (doorbell_ != nullptr) {
    const int64_t half = (static_cast<int64_t>(region_->payload_bytes()) / 2) & ~int64_t{63};
    if (payload + kDoorbellRoom / 4 <= half) {
      halves = next_half_;
      base = halves == kHalf0 ? 0 : half;
      limit = base + half;
      next_half_ = halves == kHalf0 ? kHalf1 : kHalf0;
    }
    PL_RETURN_IF_ERROR(doorbell_->AwaitFree(halves, ring_timeout_, cancel));
  }
  int64_t end = 0;
  for (const DenseLink::Range& r : PackStream(call, pushes, base, &end)) {
    std::memcpy(region_->payload() + r.offset, r.source, static_cast<size_t>(r.bytes));
  }
  if (doorbell_ != nullptr) {
    StatusOr<int64_t> answered = doorbell_->Call(call.header(), ring_timeout_, cancel, halves, end, limit);
    if (!absl::IsUnimplemented(answered.status())) {
      ++rung_calls_;
      if (answered.ok()) response->set_version(*answered);
      return answered.status();
    }
    // A header too large for the room after the blocks (a long batch): over gRPC, where
    // the replica copies the blocks out before it answers.
  }
  return rpc::FromGrpc(stub.Replicate(context, call, response));
}

}  // namespace pl
