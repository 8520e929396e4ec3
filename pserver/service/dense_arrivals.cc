#include "pserver/service/dense_arrivals.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/bf16.h"

namespace pl::pserver {

Status ArrivedPush::Finish() {
  if (region_.link == nullptr || write_back_ == nullptr) return absl::OkStatus();
  return DenseArrivals::SendBack(*region_.link, link_seq_, written_);
}

StatusOr<std::unique_ptr<ArrivedPush>> DenseArrivals::ReceivePush(PushFrame frame, absl::Time deadline) {
  auto arrived = std::make_unique<ArrivedPush>();
  const proto::PushRequest& header = frame.header();
  const bool write_back = header.shm_write_back();
  if (write_back && (header.shm_region() == 0 || header.defer_apply())) {
    return absl::InvalidArgumentError("shm_write_back needs shm_region and no defer_apply");
  }
  if (header.shm_region() == 0) {
    arrived->frame_ = std::move(frame);
    return arrived;
  }
  if (!frame.dense().empty()) {
    return absl::InvalidArgumentError("a push carries dense blocks both in shared memory and inline");
  }
  PL_ASSIGN_OR_RETURN(arrived->region_, regions_->Find(header.shm_region()));
  arrived->link_seq_ = header.link_seq();
  for (const proto::ShmBlock& b : header.shm_dense()) arrived->write_offsets_.push_back(b.write_offset());
  if (arrived->region_.link != nullptr) {
    if (Status landed = arrived->region_.link->WaitFor(arrived->link_seq_, deadline); !landed.ok()) {
      return absl::AbortedError(
          absl::StrCat("the push's gradients did not come over the dense link: ", landed.message()));
    }
  }
  PL_ASSIGN_OR_RETURN(arrived->frame_, FrameFromRegion(std::move(frame.header()), arrived->region_.region,
                                                           /*from_trainer=*/true));
  if (write_back) {
    ArrivedPush* a = arrived.get();
    a->written_.resize(a->write_offsets_.size());
    a->write_back_ = [a](int i, int64_t n) {
      a->written_[i] = {a->write_offsets_[i], n * 4};
      return a->region_.region->Floats(a->write_offsets_[i], n);
    };
  }
  return arrived;
}

Status DenseArrivals::ServePull(const proto::PullRequest& request,
                                const std::function<Status(const DenseDestination&)>& pull) {
  if (request.shm_region() == 0) return pull(nullptr);
  PL_ASSIGN_OR_RETURN(RegionRef found, regions_->Find(request.shm_region()));
  if (request.shm_offsets_size() != request.dense_size()) {
    return absl::InvalidArgumentError(absl::StrCat("pull names ", request.dense_size(), " dense blocks but ",
                                                   request.shm_offsets_size(), " shared-memory offsets"));
  }
  const SharedRegion& r = *found.region;
  std::vector<DenseLink::Range> written(request.dense_size());
  if (request.bf16() && found.link != nullptr) {
    PL_RETURN_IF_ERROR(PullAsBf16(request, r, pull, &written));
  } else {
    // Shared memory on one host always takes float32 (a bfloat16 pull's flag aside).
    PL_RETURN_IF_ERROR(pull([&](int i, int64_t n) {
      written[i] = {request.shm_offsets(i), n * 4};
      return r.Floats(request.shm_offsets(i), n);
    }));
  }
  if (found.link != nullptr) return SendBack(*found.link, request.link_seq(), written);
  return absl::OkStatus();
}

Status DenseArrivals::PullAsBf16(const proto::PullRequest& request, const SharedRegion& region,
                                 const std::function<Status(const DenseDestination&)>& pull,
                                 std::vector<DenseLink::Range>* written) {
  // The values come out of the shard as float32 into this thread's buffers (kept from
  // call to call: no allocation per pull), then go into the region rounded.
  thread_local std::vector<std::vector<float>> scratch;
  if (scratch.size() < static_cast<size_t>(request.dense_size())) scratch.resize(request.dense_size());
  std::vector<uint16_t*> out(request.dense_size(), nullptr);
  PL_RETURN_IF_ERROR(pull([&](int i, int64_t n) -> StatusOr<float*> {
    PL_ASSIGN_OR_RETURN(out[i], region.Halves(request.shm_offsets(i), n));
    if (static_cast<int64_t>(scratch[i].size()) < n) scratch[i].resize(n);
    (*written)[i] = {request.shm_offsets(i), n * 2};
    return scratch[i].data();
  }));
  for (int i = 0; i < request.dense_size(); ++i) EncodeBf16(scratch[i].data(), (*written)[i].bytes / 2, out[i]);
  return absl::OkStatus();
}

Status DenseArrivals::SendBack(DenseLink& link, uint64_t seq, const std::vector<DenseLink::Range>& written) {
  Status sent = link.Send(seq, written);
  // The trainer attaches again and repeats the call over gRPC (a push's retry is not
  // applied twice: the ledger knows its number).
  if (!sent.ok()) return absl::AbortedError(absl::StrCat("the dense link failed: ", sent.message()));
  return absl::OkStatus();
}

StatusOr<PushFrame> DenseArrivals::FrameFromRegion(proto::PushRequest header,
                                                   const std::shared_ptr<SharedRegion>& region, bool from_trainer,
                                                   bool copy, const std::shared_ptr<const void>& hold) const {
  copy = copy || (header.defer_apply() && !shard_->sync());
  PushFrame frame;
  for (const proto::ShmBlock& b : header.shm_dense()) {
    if (b.bf16()) {
      // A trainer's --wire_dtype bfloat16 over a link: decoded here, as a gRPC push's are.
      if (header.shm_write_back()) return absl::InvalidArgumentError("a bfloat16 block cannot be written back");
      PL_ASSIGN_OR_RETURN(const uint16_t* half, region->Halves(b.offset(), b.count()));
      DecodeBf16(half, b.count(), frame.AddDenseBuffer(b.param(), b.block(), b.count()));
      frame.MarkLastExactBf16();
      continue;
    }
    PL_ASSIGN_OR_RETURN(float* values, region->Floats(b.offset(), b.count()));
    if (copy) {
      frame.AddDenseCopy(b.param(), b.block(), values, b.count());
    } else {
      frame.AddDenseRef(b.param(), b.block(), values, b.count(),
                        hold != nullptr ? hold : std::shared_ptr<const void>(region));
      // A trainer's region (not a primary's, nor a link's private mirror): the trainer
      // can still write it, so the shard copies it out before it checks it.
      if (from_trainer && !region->name().empty()) {
        frame.MarkLastShared(reinterpret_cast<float*>(region->shadow() + b.offset()));
      }
    }
  }
  header.clear_shm_region();
  header.clear_shm_dense();
  header.clear_link_seq();
  frame.header() = std::move(header);
  return frame;
}

StatusOr<std::vector<StreamApplier::Update>> DenseArrivals::ReceiveStream(ReplicateFrame call, absl::Time deadline,
                                                                          std::shared_ptr<SharedRegion> rung_in,
                                                                          std::shared_ptr<const void> hold) const {
  proto::ReplicateRequest& request = call.header();
  if (request.entries_size() == 0) return absl::InvalidArgumentError("a Replicate call without entries");
  const bool in_region = request.region() != 0 || rung_in != nullptr;
  if (!in_region && request.entries_size() > 1) {
    return absl::InvalidArgumentError("several stream entries in one call need a region for their blocks");
  }
  if (in_region && !call.dense().empty()) {
    return absl::InvalidArgumentError("a stream call carries dense blocks both in a region and inline");
  }
  std::shared_ptr<SharedRegion> region = std::move(rung_in);
  if (in_region && region == nullptr) {
    PL_ASSIGN_OR_RETURN(RegionRef found, regions_->Find(request.region()));
    // In shared memory the blocks are there already; over a link, wait for them to land.
    if (found.link != nullptr) {
      if (Status landed = found.link->WaitFor(request.link_seq(), deadline); !landed.ok()) {
        return absl::AbortedError(
            absl::StrCat("the stream entries' dense blocks did not come over the link: ", landed.message()));
      }
    }
    region = std::move(found.region);
  }
  const bool copy = hold == nullptr;
  std::vector<StreamApplier::Update> updates;
  for (proto::ReplicaEntry& entry : *request.mutable_entries()) {
    if (entry.position() <= 0) return absl::InvalidArgumentError("a stream entry without a stream position");
    StreamApplier::Update& update = updates.emplace_back();
    update.position = entry.position();
    switch (entry.update_case()) {
      case proto::ReplicaEntry::kPush: {
        proto::PushRequest& push = *entry.mutable_push();
        if (push.shm_region() != 0 || push.link_seq() != 0 || push.shm_write_back() || push.dense_size() > 0 ||
            (!in_region && push.shm_dense_size() > 0)) {
          return absl::InvalidArgumentError(
              "a stream entry's push names a region, a link, a write-back or blocks of its own");
        }
        if (in_region) {
          PL_ASSIGN_OR_RETURN(PushFrame frame, FrameFromRegion(std::move(push), region, /*from_trainer=*/false, copy, hold));
          update.push = std::make_unique<PushFrame>(std::move(frame));
        } else {
          update.push = std::make_unique<PushFrame>(PushFrame::WithPayloadsOf(std::move(push), std::move(call)));
        }
        for (const DenseFramePayload& d : update.push->dense()) update.bytes += d.values.num_bytes();
        break;
      }
      case proto::ReplicaEntry::kInit:
        update.init = std::make_unique<proto::InitRequest>(std::move(*entry.mutable_init()));
        break;
      case proto::ReplicaEntry::kStepEnd:
        if (entry.step_end() <= 0) return absl::InvalidArgumentError("a step's end with no contributors");
        update.step_end = entry.step_end();
        break;
      case proto::ReplicaEntry::kEviction:
        update.eviction = std::make_unique<proto::Eviction>(std::move(*entry.mutable_eviction()));
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("stream entry ", entry.position(), " holds no update"));
    }
  }
  return updates;
}

}  // namespace pl::pserver
