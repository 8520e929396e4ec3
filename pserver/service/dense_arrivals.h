// DenseArrivals: the pserver's side of the trainers' dense channels
// (paddle_like/client/dense_channel.h) in one place. An arriving push becomes the frame
// of blocks the shard applies and, when it asks for them back, the place their new
// values go; a pull gets the place its values go. Whatever carried the blocks (the gRPC
// call itself, a shared-memory region, or a region mirrored over a dense link, whose
// bytes it waits for and whose written values it sends back, rounded to bfloat16 where
// the trainer asked), the shard sees frames and destinations only. The replication
// stream's calls arrive here too (ReceiveStream), over the same regions and links.
//
// Thread-safety: thread-safe (the region table is); an ArrivedPush is used by the one
// call it belongs to.
#ifndef PSERVER_SERVICE_DENSE_ARRIVALS_H_
#define PSERVER_SERVICE_DENSE_ARRIVALS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "paddle_like/dist/dense_link.h"
#include "pserver/replication/stream_applier.h"
#include "pserver/service/shared_regions.h"
#include "pserver/store/shard.h"

namespace pl::pserver {

// A trainer's push as it arrived, resolved: not movable, since write_back() refers to it.
class ArrivedPush {
 public:
  ArrivedPush() = default;
  ArrivedPush(const ArrivedPush&) = delete;
  ArrivedPush& operator=(const ArrivedPush&) = delete;

  // The blocks to apply (reading the region in place, or copies of them for a push
  // applied after its call returns), with the header.
  PushFrame& frame() { return frame_; }
  // Where the applied blocks' new values go (null: nowhere, the push asked for none).
  const DenseDestination& write_back() const { return write_back_; }
  // Once the shard applied it: the written values back to the trainer over its link,
  // ABORTED when the link failed (the trainer then repeats the call over gRPC).
  Status Finish();

 private:
  friend class DenseArrivals;
  PushFrame frame_;
  DenseDestination write_back_;
  RegionRef region_;
  uint64_t link_seq_ = 0;
  std::vector<int64_t> write_offsets_;
  std::vector<DenseLink::Range> written_;
};

class DenseArrivals {
 public:
  // `regions` and `shard` outlive this.
  DenseArrivals(SharedRegionTable* regions, const ParameterShard* shard) : regions_(regions), shard_(shard) {}

  // A trainer's push (not a replica's stream entry): its blocks inline, or in the
  // region it names (waiting up to `deadline` for a link's bytes to land).
  StatusOr<std::unique_ptr<ArrivedPush>> ReceivePush(PushFrame frame, absl::Time deadline);
  // A trainer's pull: `pull(destination)` has the shard write the values where the
  // request's channel wants them (null destination: into `response`, inline), then a
  // link's values travel back.
  Status ServePull(const proto::PullRequest& request, const std::function<Status(const DenseDestination&)>& pull);
  // The entries of a primary's Replicate call (the replication stream), in order, as
  // the updates a replica holds: each push's blocks inline (a call of one entry) or in
  // the region the call names, copied out before the answer (the primary writes the next
  // entries over them; the replica queues these), or read in place under `hold` (a
  // doorbell call's, which the primary waits for). `rung_in`: a doorbell call's region,
  // instead of the one the call names.
  StatusOr<std::vector<StreamApplier::Update>> ReceiveStream(ReplicateFrame call, absl::Time deadline,
                                                             std::shared_ptr<SharedRegion> rung_in = nullptr,
                                                             std::shared_ptr<const void> hold = nullptr) const;
  // The blocks a request names in `region` as a frame's payloads: in place (kept alive
  // by `hold`, by default the region), or copied when `copy` or when the push will be
  // applied after its call returns (deferred). bfloat16 blocks are decoded.
  // `from_trainer`: a trainer's region, whose floats the shard copies out before it
  // checks them (PushFrame::CopySharedPayloads, into the region's shadow).
  StatusOr<PushFrame> FrameFromRegion(proto::PushRequest header, const std::shared_ptr<SharedRegion>& region,
                                      bool from_trainer, bool copy = false,
                                      const std::shared_ptr<const void>& hold = nullptr) const;

  // The `written` spans of a linked region back to its trainer under `seq`; ABORTED
  // when the link fails.
  static Status SendBack(DenseLink& link, uint64_t seq, const std::vector<DenseLink::Range>& written);

 private:
  // A pull with bf16 set into a linked region: the values rounded to bfloat16 at the
  // pull's shm_offsets (2 bytes each); `written` gets the spans to send back.
  static Status PullAsBf16(const proto::PullRequest& request, const SharedRegion& region,
                           const std::function<Status(const DenseDestination&)>& pull,
                           std::vector<DenseLink::Range>* written);

  SharedRegionTable* const regions_;
  const ParameterShard* const shard_;
};

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_DENSE_ARRIVALS_H_
