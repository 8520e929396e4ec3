// PserverShard: what a parameter client knows of one pserver (its address, stubs,
// channel and this exchange's push and pull), private to ParameterClient and
// PserverShards (pserver_shards.h), which use it from one thread at a time.
#ifndef PADDLE_LIKE_CLIENT_PSERVER_SHARD_H_
#define PADDLE_LIKE_CLIENT_PSERVER_SHARD_H_

#include <memory>
#include <string>
#include <vector>

#include "paddle_like/client/dense_channel.h"
#include "paddle_like/client/grpc_dense_channel.h"
#include "absl/time/time.h"
#include "paddle_like/dist/dense_frame.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/client/region_dense_channel.h"
#include "paddle_like/client/task_thread.h"

namespace pl {

struct PserverShard {
  PserverShard(int i, WireDtype wire, Bf16Residuals* residuals) : index(i), grpc(wire, residuals) {}

  // The channel its dense blocks travel by: its region's, once it took one, else gRPC.
  DenseChannel& channel() { return region ? static_cast<DenseChannel&>(*region) : grpc; }

  int index = 0;
  std::string address;
  std::unique_ptr<proto::ParameterServer::Stub> stub;  // Init, Attach
  std::unique_ptr<PserverFrameStub> frames;             // Push, Pull
  int64_t version = 0;        // last version seen
  int64_t pushes = 0;         // numbered pushes sent (PushRequest.push_id): a retry keeps its number
  int64_t wait_version = 0;   // sync: the version the next pull must see
  int64_t staleness = 0;      // async: the last push's (see ParameterClient::last_staleness)
  proto::PullRequest pull;    // per-step requests, reused to avoid reallocations
  PushFrame push;             // header and gradients, in the form `pushing` sends
  PreparedPush prepared;      // what `pushing` made of it
  // The dense blocks this pserver owns, in push order, as a region lays them out.
  std::vector<DenseSlot> slots;
  int64_t slot_bytes = 0;     // one area's size (gradients, then values)
  GrpcDenseChannel grpc;
  // A region channel (shared memory, or a dense link to another host) once the pserver
  // took one; or why it refused each (not offered again until the address changes, or,
  // for a link, until link_retry_at when the pserver had no room).
  std::unique_ptr<RegionDenseChannel> region;
  std::string shm_refusal;
  std::string link_refusal;
  absl::Time link_retry_at = absl::InfiniteFuture();
  // This exchange: the channel its push was prepared for (null: none prepared); whether
  // the push also brings the new values back (no separate pull); whether it did.
  DenseChannel* pushing = nullptr;
  bool one_call = false;
  bool values_came = false;
  // Runs the push of a push and pull that go at once (made at the first): a thread
  // started for every step costs more than a woken one.
  std::unique_ptr<TaskThread> push_thread;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_PSERVER_SHARD_H_
