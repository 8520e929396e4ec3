// ParameterClient's shared-memory path (see param_client.h): offering pservers on
// this host a region, and moving a push's gradients and a pull's values through it.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/param_client_shard.h"
#include "paddle_like/dist/sharding.h"

namespace pl {

void ParameterClient::TryAttach(Shard& s) {
  if (s.region || !s.stub) return;
  if (s.slots.empty()) {
    s.shm_refusal = "no dense blocks";
    return;
  }
  if (options_.shared_memory && s.shm_refusal.empty()) {
    AttachSharedMemory(s);
    if (s.region || s.shm_refusal.empty()) return;  // attached, or offered again next call
  }
  if (!s.link_refusal.empty() && absl::Now() >= s.link_retry_at) {
    s.link_refusal.clear();
    s.link_retry_at = absl::InfiniteFuture();
  }
  if (options_.dense_link_lanes != 0 && s.link_refusal.empty()) AttachLink(s);
}

void ParameterClient::AttachSharedMemory(Shard& s) {
  StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::Create(static_cast<size_t>(2 * s.slot_bytes));
  if (!region.ok()) {
    s.shm_refusal = std::string(region.status().message());
    return;
  }
  proto::AttachRequest request;
  request.set_trainer_id(trainer_id_);
  request.set_client_id(client_id_);
  request.set_shm_name((*region)->name());
  request.set_shm_bytes(static_cast<int64_t>((*region)->total_bytes()));
  request.set_nonce((*region)->nonce());
  proto::AttachResponse response;
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.call_timeout)));
  const Status attached = rpc::FromGrpc(s.stub->Attach(ctx.get(), request, &response));
  (*region)->Unlink();  // both sides map it now (or never will): the name has done its job
  if (!attached.ok()) {
    // Unreachable now: offer it again with the next call. Anything else is an answer.
    if (!rpc::IsRetryable(attached)) s.shm_refusal = std::string(attached.message());
    return;
  }
  if ((*region)->answer() != response.region()) {
    s.shm_refusal = "the pserver's answer did not appear in the shared memory";
    return;
  }
  s.region = *std::move(region);
  s.region_id = response.region();
  ++shm_attaches_;
  if (options_.bind_parameters_to_shared_memory) BindParameters(s);
}

void ParameterClient::BindParameters(Shard& s) {
  size_t k = 0;
  while (k < s.slots.size()) {
    // The slots of one parameter follow each other; bind it when all its blocks are
    // here and lie back to back (every block but the last is whole and aligned).
    size_t end = k;
    int64_t floats = 0;
    bool contiguous = true;
    while (end < s.slots.size() && s.slots[end].param == s.slots[k].param) {
      contiguous &= s.slots[end].grad_offset == s.slots[k].grad_offset + floats * 4;
      floats += s.slots[end].n;
      ++end;
    }
    StatusOr<Parameter*> p = keys_->Find(s.slots[k].param);
    const size_t first = k;
    k = end;
    if (!p.ok() || !contiguous || (*p)->var.value().numel() != floats || s.slots[first].block != 0) continue;
    VariableNode* node = (*p)->var.node();
    const Shape shape = node->value.shape();
    const size_t bytes = static_cast<size_t>(floats) * 4;
    char* values = s.region->payload() + s.slots[first].value_offset;
    char* grads = s.region->payload() + s.slots[first].grad_offset;
    std::memcpy(values, node->value.f32(), bytes);
    if (node->grad.defined()) {
      std::memcpy(grads, node->grad.f32(), bytes);
    } else {
      std::memset(grads, 0, bytes);
    }
    std::shared_ptr<SharedRegion> keep = s.region;  // the tensors keep the mapping alive
    node->value = Tensor::FromStorage(Storage::Wrap(values, bytes, Device::kCPU, [keep] {}), shape, DType::kFloat32);
    node->grad = Tensor::FromStorage(Storage::Wrap(grads, bytes, Device::kCPU, [keep] {}), shape, DType::kFloat32);
    ++bound_parameters_;
  }
}

std::vector<std::string> ParameterClient::Transports() const {
  std::vector<std::string> out;
  for (const auto& sh : shards_) {
    if (sh->link) {
      out.push_back(absl::StrFormat("dense link (%d lanes each way, %.1f MB%s)", sh->link->lanes(),
                                    sh->region->total_bytes() / 1e6, sh->link_bf16 ? ", bfloat16" : ""));
    } else if (sh->region) {
      out.push_back(absl::StrFormat("shared memory (%.1f MB)", sh->region->total_bytes() / 1e6));
    } else {
      std::string why = sh->shm_refusal;
      if (!sh->link_refusal.empty()) why = absl::StrCat(why.empty() ? "" : why + "; ", sh->link_refusal);
      out.push_back(absl::StrCat("gRPC", why.empty() ? "" : " (" + why + ")"));
    }
  }
  return out;
}


bool ParameterClient::BuildShmPush(Shard& s, bool own_copies) {
  const std::vector<DenseFramePayload>& dense = s.push.dense();
  if (dense.size() != s.slots.size()) return false;
  // A link sends from the tensors themselves when they stay put until the push is done
  // (not StartExchange's copies): one copy of the gradients fewer.
  const bool from_tensors = s.link != nullptr && !own_copies && !s.link_bf16;
  s.link_spans.clear();
  s.link_grads_in_region = true;
  s.link_grads_bf16 = s.link_bf16;
  s.shm_push.Clear();
  s.shm_push.header() = s.push.header();
  s.shm_push.header().set_shm_region(s.region_id);
  s.exchange_region = s.region;
  for (size_t i = 0; i < dense.size(); ++i) {
    const Shard::Slot& slot = s.slots[i];
    if (dense[i].block != slot.block || dense[i].values.size() != slot.n || dense[i].param != slot.param) return false;
    float* dst = reinterpret_cast<float*>(s.region->payload() + slot.grad_offset);
    const float* in_place = dense[i].values.contiguous();
    if (s.link_bf16) {
      EncodeGradientsBf16(slot.param, slot.block, dense[i].values, reinterpret_cast<uint16_t*>(dst));
      s.link_spans.push_back({slot.grad_offset, slot.n * 2});
    } else if (from_tensors && in_place != nullptr && in_place != dst) {
      s.link_spans.push_back({slot.grad_offset, slot.n * 4, reinterpret_cast<const char*>(in_place)});
      s.link_grads_in_region = false;
    } else {
      if (in_place != dst) dense[i].values.CopyTo(dst);  // else bound there
      s.link_spans.push_back({slot.grad_offset, slot.n * 4});
    }
    proto::ShmBlock* b = s.shm_push.header().add_shm_dense();
    b->set_param(slot.param);
    b->set_block(slot.block);
    b->set_offset(slot.grad_offset);
    b->set_count(slot.n);
    b->set_write_offset(slot.value_offset);
    b->set_bf16(s.link_bf16);
  }
  return true;
}

void ParameterClient::EncodeGradientsBf16(const std::string& param, int32_t block, const FloatPieces& grads,
                                          uint16_t* out) {
  // The same residuals as a bfloat16 push over gRPC: a link that comes or goes keeps them.
  std::vector<float>& residual = bf16_residuals_[param];
  const int64_t n = grads.size();
  const int64_t offset = static_cast<int64_t>(block) * kDefaultBlockSize;
  if (static_cast<int64_t>(residual.size()) < offset + n) residual.resize(offset + n, 0.0f);
  if (const float* in_place = grads.contiguous()) {
    EncodeBf16(in_place, n, out, residual.data() + offset);
    return;
  }
  std::vector<float> gathered(n);
  grads.CopyTo(gathered.data());
  EncodeBf16(gathered.data(), n, out, residual.data() + offset);
}

void ParameterClient::PushFromRegion(Shard& s) {
  PushFrame frame;
  frame.header() = s.push.header();
  const std::shared_ptr<SharedRegion>& region = s.exchange_region;
  for (const Shard::Slot& slot : s.slots) {
    if (s.link_grads_bf16) {
      // Widened back to float32 exactly (the rounding is in the residual already).
      DecodeBf16(region->payload() + slot.grad_offset, slot.n, frame.AddDenseBuffer(slot.param, slot.block, slot.n));
      continue;
    }
    frame.AddDenseRef(slot.param, slot.block, reinterpret_cast<const float*>(region->payload() + slot.grad_offset),
                      slot.n, region);
  }
  s.push = std::move(frame);
  s.shm_ready = false;
  s.link.reset();
  s.region.reset();  // offered again on the next call (the frame keeps the memory)
}

void ParameterClient::AddRegionValues(const Shard& s, const std::shared_ptr<SharedRegion>& region, bool bf16,
                                      PullFrame* frame) {
  for (const Shard::Slot& slot : s.slots) {
    if (bf16) {
      DecodeBf16(region->payload() + slot.value_offset, slot.n, frame->AddDenseBuffer(slot.param, slot.block, slot.n));
      continue;
    }
    frame->AddDenseRef(slot.param, slot.block, reinterpret_cast<const float*>(region->payload() + slot.value_offset),
                       slot.n, region);
  }
}

PushFrame ParameterClient::CopyOfFrame(const PushFrame& from) {
  PushFrame to;
  to.header() = from.header();
  for (const DenseFramePayload& d : from.dense()) {
    float* out = to.AddDenseBuffer(d.param, d.block, d.values.size());
    d.values.CopyTo(out);
  }
  return to;
}

}  // namespace pl
