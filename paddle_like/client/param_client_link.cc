// ParameterClient's dense links (see param_client.h): asking a pserver on another host
// for one, opening its lanes, and what the calls through it send and await.
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/param_client_shard.h"
#include "paddle_like/core/log.h"
#include "paddle_like/rpc/bulk_socket.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"

namespace pl {
namespace {

constexpr absl::Duration kLaneWithin = absl::Seconds(5);

// Dials one lane, presents the listener's token and the lane's preamble (the format
// pserver/dense_link_listener.h reads).
StatusOr<std::unique_ptr<rpc::BulkConnection>> OpenLane(const std::string& host, const proto::AttachResponse& r,
                                                        bool to_pserver, int lane, int lanes, const std::string& peer,
                                                        std::shared_ptr<const rpc::TlsContext> tls) {
  PL_ASSIGN_OR_RETURN(std::unique_ptr<rpc::BulkConnection> conn,
                      rpc::BulkConnection::Dial(host, r.link_port(), kLaneWithin, nullptr, peer, std::move(tls)));
  conn->set_purpose("dense link");
  if (r.link_token().size() != rpc::kBulkTokenBytes || r.region_token().size() != rpc::kBulkTokenBytes) {
    return absl::InvalidArgumentError("the pserver's dense link tokens are malformed");
  }
  std::string hello = r.link_token();
  const uint64_t region = r.region();
  const uint32_t words[4] = {to_pserver ? 0u : 1u, static_cast<uint32_t>(lane), static_cast<uint32_t>(lanes), 0u};
  hello.append(reinterpret_cast<const char*>(&region), sizeof(region));
  hello += r.region_token();
  hello.append(reinterpret_cast<const char*>(words), sizeof(words));
  PL_RETURN_IF_ERROR(conn->Write(hello.data(), hello.size(), kLaneWithin));
  return conn;
}

}  // namespace

void ParameterClient::AttachLink(Shard& s) {
  const int lanes = options_.dense_link_lanes > 0 ? std::min(options_.dense_link_lanes, kMaxDenseLinkLanes)
                                                  : DefaultDenseLinkLanes(rpc::TransportIsSecure());
  StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::CreatePrivate(static_cast<size_t>(2 * s.slot_bytes));
  if (!region.ok()) {
    s.link_refusal = std::string(region.status().message());
    return;
  }
  proto::AttachRequest request;
  request.set_trainer_id(trainer_id_);
  request.set_client_id(client_id_);
  request.set_shm_bytes(static_cast<int64_t>((*region)->total_bytes()));
  request.set_link_lanes(lanes);
  proto::AttachResponse response;
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.call_timeout)));
  const Status attached = rpc::FromGrpc(s.stub->Attach(ctx.get(), request, &response));
  if (!attached.ok()) {
    // Unreachable now: asked again with the next call. Anything else is an answer.
    if (!rpc::IsRetryable(attached)) s.link_refusal = std::string(attached.message());
    return;
  }
  Status opened;
  DenseLink::Lanes up(lanes), down(lanes);
  StatusOr<std::shared_ptr<const rpc::TlsContext>> tls = rpc::BulkTlsContext(rpc::TlsSide::kClient);
  if (!tls.ok()) opened = tls.status();
  if (opened.ok()) {
    // Every lane at once: with TLS each handshake is a round trip and some cipher work.
    const std::string host = rpc::HostOf(s.address), peer = rpc::PserverIdentity(s.index);
    std::vector<Status> results(2 * lanes);
    std::vector<std::thread> dials;
    for (int k = 0; k < 2 * lanes; ++k) {
      dials.emplace_back([&, k] {
        const bool to_pserver = k < lanes;
        StatusOr<std::unique_ptr<rpc::BulkConnection>> c =
            OpenLane(host, response, to_pserver, k % lanes, lanes, peer, *tls);
        results[k] = c.status();
        if (c.ok()) (to_pserver ? up : down)[k % lanes] = *std::move(c);
      });
    }
    for (std::thread& t : dials) t.join();
    for (const Status& r : results) {
      if (opened.ok()) opened = r;
    }
  }
  // The pserver writes a byte on every lane once it holds them all.
  for (int k = 0; opened.ok() && k < 2 * lanes; ++k) {
    char ready = 0;
    opened = (k < lanes ? up : down)[k % lanes]->Read(&ready, 1, kLaneWithin);
  }
  StatusOr<std::unique_ptr<DenseLink>> link =
      opened.ok() ? DenseLink::Start(std::move(up), std::move(down), *region) : StatusOr<std::unique_ptr<DenseLink>>(opened);
  if (!link.ok()) {
    s.link_refusal = absl::StrCat("no dense link: ", link.status().message());
    log::Warning(absl::StrCat("pserver ", s.index, " (", s.address, "): ", s.link_refusal,
                              "; its dense blocks go over gRPC"));
    return;
  }
  s.link = *std::move(link);
  s.link_seq = 0;
  s.region = *std::move(region);
  s.region_id = response.region();
  ++shm_attaches_;
  if (options_.bind_parameters_to_shared_memory) BindParameters(s);
}

void ParameterClient::DropLink(Shard& s, const Status& why) {
  if (s.link) {
    log::Warning(absl::StrCat("pserver ", s.index, " (", s.address, "): the dense link failed (", why.message(),
                              "); this step goes over gRPC, a new link is asked for with the next"));
  }
  s.link.reset();
  s.region.reset();
}

}  // namespace pl
