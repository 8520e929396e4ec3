// A plain TCP connection (TLS when the job's gRPC has it) for bulk bytes that bypass
// gRPC: a joining replica's snapshot (paddle_like/dist/snapshot_lanes.h) and the dense blocks a
// trainer on another host exchanges with a pserver (paddle_like/dist/wire_link.h). The
// bytes go from the sender's memory straight into the receiver's, two kernel copies in
// all, where gRPC's pieces copied them several more times (into a message, serialised,
// parsed, into a buffer, into the destination).
//
// A receiver listens (BulkListener) and tells the sender, through a gRPC call that is
// itself authenticated, the port and a random token; the sender dials it and sends the
// token first. A connection that does not present the token is closed unread. When the
// job's gRPC runs with TLS, so does this connection (rpc/tls_socket.h): each end must
// present the job's certificate naming the identity the other expects ("pserver-<i>",
// "trainer").
//
// Thread-safety: a listener's and a connection's calls come from one thread at a time,
// except Admit, which may vet several connections on threads of their own at once; the
// cancel flag they are given may be set from any thread, ending a blocked call
// within kBulkCancelCheck.
#ifndef PADDLE_LIKE_RPC_BULK_SOCKET_H_
#define PADDLE_LIKE_RPC_BULK_SOCKET_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/rpc/tls_socket.h"

namespace pl::rpc {

inline constexpr size_t kBulkTokenBytes = 16;
inline constexpr absl::Duration kBulkCancelCheck = absl::Milliseconds(50);

// The TLS context of `side` that the job's transport asks for (rpc/tls.h): null when the
// job runs without TLS.
StatusOr<std::shared_ptr<const TlsContext>> BulkTlsContext(TlsSide side);

// kBulkTokenBytes random bytes from the OS's non-deterministic source.
std::string RandomToken();
// a == b, in time independent of where they differ (for tokens).
bool SameBytes(const std::string& a, const std::string& b);

class BulkConnection {
 public:
  // Connects to host:port (a name or an address) within `timeout`; with TLS, to a
  // peer whose certificate names `peer`, starting from `tls` (the connections of one
  // snapshot share one; loaded here when null and the job runs with TLS).
  static StatusOr<std::unique_ptr<BulkConnection>> Dial(const std::string& host, int port,
                                                            absl::Duration timeout, const std::atomic<bool>* cancel,
                                                            const std::string& peer,
                                                            std::shared_ptr<const TlsContext> tls = nullptr);
  BulkConnection(int fd, const std::atomic<bool>* cancel) : fd_(fd), cancel_(cancel) {}
  ~BulkConnection();
  BulkConnection(const BulkConnection&) = delete;
  BulkConnection& operator=(const BulkConnection&) = delete;

  // What the connection carries, for its error messages ("snapshot" unless set).
  void set_purpose(std::string purpose) { purpose_ = std::move(purpose); }
  // Exactly n bytes; UNAVAILABLE when the peer closes first or sends nothing for `idle`.
  Status Read(void* data, size_t n, absl::Duration idle);
  Status Write(const void* data, size_t n, absl::Duration idle);
  // Ends the connection for both directions; a Read or Write blocked in another thread
  // returns an error at once. The socket stays open until destruction.
  void Shutdown();

 private:
  friend class BulkListener;  // runs the server's handshake
  // Until the socket is ready for `events`: UNAVAILABLE after `idle`, CANCELLED once
  // *cancel_ is set.
  Status Wait(short events, absl::Duration idle, const char* what);
  // With a context (null: no TLS), the handshake as its side, the peer named `peer`,
  // within `timeout`.
  Status StartTls(const TlsContext* context, const std::string& peer, absl::Duration timeout);
  const int fd_;
  const std::atomic<bool>* const cancel_;
  std::unique_ptr<TlsSocket> tls_;
  std::string purpose_ = "snapshot";
};

class BulkListener {
 public:
  // Listens on `host` ("0.0.0.0", an address of this machine) at a port the OS picks,
  // with a fresh random token. Its calls, and its connections', end when *cancel is set.
  // With TLS it accepts only a peer whose certificate names `peer`.
  static StatusOr<std::unique_ptr<BulkListener>> Open(const std::string& host, const std::atomic<bool>* cancel,
                                                          const std::string& peer);
  ~BulkListener();
  BulkListener(const BulkListener&) = delete;
  BulkListener& operator=(const BulkListener&) = delete;

  int port() const { return port_; }
  const std::string& token() const { return token_; }
  // The first connection that presents the token before `deadline`; others are closed.
  StatusOr<std::unique_ptr<BulkConnection>> Accept(absl::Time deadline);
  // Accept in two steps, so that the handshakes of several connections can overlap:
  // the next connection, not yet vetted; then its handshake and token, within a second
  // at most (a stranger's connection gets no longer). OK only for the primary.
  StatusOr<std::unique_ptr<BulkConnection>> NextConnection(absl::Time deadline);
  Status Admit(BulkConnection& conn, absl::Time deadline) const;

 private:
  BulkListener(int fd, int port, std::string token, const std::atomic<bool>* cancel, std::string peer,
                   std::shared_ptr<const TlsContext> tls)
      : fd_(fd),
        port_(port),
        token_(std::move(token)),
        cancel_(cancel),
        peer_(std::move(peer)),
        tls_(std::move(tls)) {}
  const int fd_;
  const int port_;
  const std::string token_;
  const std::atomic<bool>* const cancel_;
  const std::string peer_;
  const std::shared_ptr<const TlsContext> tls_;  // null without TLS
};

// "host" of "host:port" ("[::1]:7" gives "::1").
std::string HostOf(const std::string& address);

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_BULK_SOCKET_H_
