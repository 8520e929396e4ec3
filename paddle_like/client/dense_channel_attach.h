// Offering a pserver a region channel (dense_channel.h) at connect: shared memory when
// it is on this host (it maps the segment and proves it by answering a nonce in it),
// else a dense link when it takes them (proto/pserver.proto, Attach). A pserver that
// refuses keeps its blocks on gRPC; the caller decides when to offer again.
//
// Thread-safety: functions; each call uses its own stub call.
#ifndef PADDLE_LIKE_CLIENT_DENSE_CHANNEL_ATTACH_H_
#define PADDLE_LIKE_CLIENT_DENSE_CHANNEL_ATTACH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/client/region_dense_channel.h"
#include "proto/pserver.grpc.pb.h"

namespace pl {

struct ChannelOffer {
  int index = 0;            // the pserver's: its certificate must name it (links)
  std::string address;
  int64_t trainer_id = 0;
  uint64_t client_id = 0;   // a new attach of the same client replaces its old one
  std::vector<DenseSlot> slots;
  int64_t area_bytes = 0;   // one area's size (gradients, then values)
  absl::Duration call_timeout = absl::Seconds(30);
  WireDtype wire = WireDtype::kFloat32;
  int link_lanes = 1;
  Bf16Residuals* residuals = nullptr;
  // A replication stream's region (a primary's, to another replica of its shard: no
  // slots, Replicate calls only; AttachRequest.replica_stream), rung through the
  // replica's doorbell in shared memory where it serves one (`doorbell`). `cancel` (may
  // be null) ends a link's or a doorbell's blocked wait.
  bool replica_stream = false;
  bool doorbell = false;
  const std::atomic<bool>* cancel = nullptr;
  // Makes the Attach call instead of a call of its own (a stream's, which it can cancel).
  std::function<Status(const proto::AttachRequest&, proto::AttachResponse*)> attach_call;
};

// A channel, or why there is none. An empty refusal means the pserver could not be
// asked now: offer again with the next call. `room`: it had no room (its links' memory
// cap), so an offer later may succeed.
struct ChannelAttach {
  std::unique_ptr<RegionDenseChannel> channel;
  std::string refusal;
  bool room = false;
};

ChannelAttach AttachSharedMemory(proto::ParameterServer::Stub& stub, const ChannelOffer& offer);
ChannelAttach AttachLink(proto::ParameterServer::Stub& stub, const ChannelOffer& offer);

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_DENSE_CHANNEL_ATTACH_H_
