// DenseLinkListener: the port on which trainers on other hosts open the lanes of their
// dense links (paddle_like/dist/dense_link.h, proto/pserver.proto Attach). Each
// connection must complete the job's TLS handshake as the listener's peer (a trainer,
// or for a primary's stream this shard's replica; when the job has TLS), present the listener's token, then a preamble naming a linked region of the
// SharedRegionTable, its token, and which lane it is; it is then handed to the table.
// Anything else is closed unread. A connection gets a second for all that, and the
// connections are vetted on threads of their own (64 at most), so a silent stranger
// holds up no one.
//
// Thread-safety: its own thread accepts; the public calls are const.
#ifndef PSERVER_SERVICE_DENSE_LINK_LISTENER_H_
#define PSERVER_SERVICE_DENSE_LINK_LISTENER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "paddle_like/core/status.h"
#include "paddle_like/rpc/bulk_socket.h"
#include "pserver/service/shared_regions.h"

namespace pl::pserver {

// u64 region, the region's token, u32 direction (0: to the pserver), u32 lane, u32 lanes,
// u32 zero.
inline constexpr size_t kDenseLinkPreambleBytes = 8 + rpc::kBulkTokenBytes + 16;

class DenseLinkListener {
 public:
  // Listens on `host` at a port the OS picks for lanes from `peer` (the identity their
  // certificate must name under TLS: "trainer", or a replica's "pserver-<i>"); lanes go
  // to `table`, which must outlive the listener.
  static StatusOr<std::unique_ptr<DenseLinkListener>> Open(const std::string& host, SharedRegionTable* table,
                                                           const std::string& peer);
  ~DenseLinkListener();  // stops accepting and waits for the connections being vetted
  DenseLinkListener(const DenseLinkListener&) = delete;
  DenseLinkListener& operator=(const DenseLinkListener&) = delete;

  int port() const { return listener_->port(); }
  const std::string& token() const { return listener_->token(); }

 private:
  DenseLinkListener(std::unique_ptr<rpc::BulkListener> listener, SharedRegionTable* table)
      : listener_(std::move(listener)), table_(table) {}
  void AcceptLoop();
  void Vet(std::unique_ptr<rpc::BulkConnection> conn);

  const std::unique_ptr<rpc::BulkListener> listener_;
  SharedRegionTable* const table_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  int vetting_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_DENSE_LINK_LISTENER_H_
