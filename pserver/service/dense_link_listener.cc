#include "pserver/service/dense_link_listener.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {
namespace {

// How long a connection may take for its handshake, token and preamble together.
constexpr absl::Duration kVetWithin = absl::Seconds(1);
// Connections vetted at once; beyond, new ones are closed at once (a flood of
// strangers costs a thread each for a second at most, and no more than this many).
constexpr int kMaxVetting = 64;

}  // namespace

StatusOr<std::unique_ptr<DenseLinkListener>> DenseLinkListener::Open(const std::string& host,
                                                                     SharedRegionTable* table,
                                                                     const std::string& peer) {
  PL_ASSIGN_OR_RETURN(std::unique_ptr<rpc::BulkListener> listener,
                      rpc::BulkListener::Open(host, table->cancel_flag(), peer));
  std::unique_ptr<DenseLinkListener> out(new DenseLinkListener(std::move(listener), table));
  out->thread_ = std::thread(&DenseLinkListener::AcceptLoop, out.get());
  return out;
}

DenseLinkListener::~DenseLinkListener() {
  stop_ = true;
  thread_.join();
  absl::MutexLock l(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return vetting_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

void DenseLinkListener::AcceptLoop() {
  while (!stop_) {
    // In slices, so that stop_ is noticed.
    StatusOr<std::unique_ptr<rpc::BulkConnection>> conn =
        listener_->NextConnection(absl::Now() + absl::Milliseconds(200));
    if (!conn.ok()) continue;
    {
      absl::MutexLock l(&mu_);
      if (vetting_ >= kMaxVetting) continue;  // closed unread
      ++vetting_;
    }
    std::thread(&DenseLinkListener::Vet, this, *std::move(conn)).detach();
  }
}

void DenseLinkListener::Vet(std::unique_ptr<rpc::BulkConnection> conn) {
  const absl::Time deadline = absl::Now() + kVetWithin;
  conn->set_purpose("dense link");
  Status s = listener_->Admit(*conn, deadline);
  char preamble[kDenseLinkPreambleBytes];
  if (s.ok()) s = conn->Read(preamble, sizeof(preamble), std::max(deadline - absl::Now(), absl::Milliseconds(1)));
  if (s.ok()) {
    uint64_t region;
    uint32_t direction, lane, lanes, zero;
    std::memcpy(&region, preamble, 8);
    const std::string token(preamble + 8, rpc::kBulkTokenBytes);
    const char* rest = preamble + 8 + rpc::kBulkTokenBytes;
    std::memcpy(&direction, rest, 4);
    std::memcpy(&lane, rest + 4, 4);
    std::memcpy(&lanes, rest + 8, 4);
    std::memcpy(&zero, rest + 12, 4);
    if (direction > 1 || zero != 0 || lanes > static_cast<uint32_t>(kMaxDenseLinkLanes)) {
      s = absl::InvalidArgumentError("a dense link lane's preamble is malformed");
    } else {
      s = table_->AddLane(region, token, direction == 0, static_cast<int>(lane), static_cast<int>(lanes),
                          std::move(conn));
    }
  }
  if (!s.ok()) log::Warning(absl::StrCat("dense link: refused a connection: ", s.message()));
  absl::MutexLock l(&mu_);
  --vetting_;
}

}  // namespace pl::pserver
