#include "paddle_like/dist/dense_link_dial.h"

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/bulk_socket.h"

namespace pl {
namespace {

constexpr absl::Duration kLaneWithin = absl::Seconds(5);

// Dials one lane, presents the listener's token and the lane's preamble.
StatusOr<std::unique_ptr<rpc::BulkConnection>> OpenLane(const std::string& host, const proto::AttachResponse& r,
                                                        bool to_pserver, int lane, int lanes, const std::string& peer,
                                                        std::shared_ptr<const rpc::TlsContext> tls,
                                                        const std::atomic<bool>* cancel) {
  PL_ASSIGN_OR_RETURN(std::unique_ptr<rpc::BulkConnection> conn,
                      rpc::BulkConnection::Dial(host, r.link_port(), kLaneWithin, cancel, peer, std::move(tls)));
  conn->set_purpose("dense link");
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

StatusOr<std::unique_ptr<DenseLink>> DialDenseLink(const std::string& address, const proto::AttachResponse& granted,
                                                   int lanes, const std::string& peer,
                                                   std::shared_ptr<SharedRegion> region,
                                                   const std::atomic<bool>* cancel) {
  if (granted.link_token().size() != rpc::kBulkTokenBytes || granted.region_token().size() != rpc::kBulkTokenBytes) {
    return absl::InvalidArgumentError("the pserver's dense link tokens are malformed");
  }
  if (lanes < 1 || lanes > kMaxDenseLinkLanes) {
    return absl::InvalidArgumentError(absl::StrCat("a dense link takes 1 to ", kMaxDenseLinkLanes, " lanes"));
  }
  PL_ASSIGN_OR_RETURN(std::shared_ptr<const rpc::TlsContext> tls, rpc::BulkTlsContext(rpc::TlsSide::kClient));
  // Every lane at once: with TLS each handshake is a round trip and some cipher work.
  const std::string host = rpc::HostOf(address);
  DenseLink::Lanes up(lanes), down(lanes);
  std::vector<Status> results(2 * lanes);
  std::vector<std::thread> dials;
  for (int k = 0; k < 2 * lanes; ++k) {
    dials.emplace_back([&, k] {
      const bool to_pserver = k < lanes;
      StatusOr<std::unique_ptr<rpc::BulkConnection>> c = OpenLane(host, granted, to_pserver, k % lanes, lanes, peer, tls, cancel);
      results[k] = c.status();
      if (c.ok()) (to_pserver ? up : down)[k % lanes] = *std::move(c);
    });
  }
  for (std::thread& t : dials) t.join();
  for (const Status& r : results) PL_RETURN_IF_ERROR(r);
  // The pserver writes a byte on every lane once it holds them all.
  for (int k = 0; k < 2 * lanes; ++k) {
    char ready = 0;
    PL_RETURN_IF_ERROR((k < lanes ? up : down)[k % lanes]->Read(&ready, 1, kLaneWithin));
  }
  return DenseLink::Start(std::move(up), std::move(down), std::move(region));
}

}  // namespace pl
