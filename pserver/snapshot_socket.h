// A plain TCP connection for a joining replica's snapshot: the bytes go from the
// primary's copy straight into the joiner's blocks, two kernel copies in all, where the
// gRPC pieces copied them five more times (into a message, serialised, parsed, into a
// buffer, into the shard).
//
// The joiner listens on an ephemeral port (SnapshotListener) and tells the primary the
// port and a random token through the InstallSnapshot call; the primary dials it (as
// many connections as the snapshot's lanes: snapshot_lanes.h) and sends the token,
// then the snapshot; the joiner answers with the install's status. A connection that
// does not present the token is closed unread. When the job's gRPC
// runs with TLS, so does this connection (rpc/tls_socket.h): both ends must hold the
// job's certificate of the same shard ("pserver-<i>").
//
// Thread-safety: a listener's and a connection's calls come from one thread at a time,
// except Admit, which may vet several connections on threads of their own at once; the
// cancel flag they are given may be set from any thread, ending a blocked call
// within kSnapshotCancelCheck.
#ifndef PSERVER_SNAPSHOT_SOCKET_H_
#define PSERVER_SNAPSHOT_SOCKET_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/rpc/tls_socket.h"

namespace pl::pserver {

inline constexpr size_t kSnapshotTokenBytes = 16;
inline constexpr absl::Duration kSnapshotCancelCheck = absl::Milliseconds(50);

// The TLS context of `side` that the job's transport asks for (rpc/tls.h): null when the
// job runs without TLS.
StatusOr<std::shared_ptr<const rpc::TlsContext>> SnapshotTlsContext(rpc::TlsSide side);

class SnapshotConnection {
 public:
  // Connects to host:port (a name or an address) within `timeout`; with TLS, to a
  // peer whose certificate names `peer`, starting from `tls` (the connections of one
  // snapshot share one; loaded here when null and the job runs with TLS).
  static StatusOr<std::unique_ptr<SnapshotConnection>> Dial(const std::string& host, int port,
                                                            absl::Duration timeout, const std::atomic<bool>* cancel,
                                                            const std::string& peer,
                                                            std::shared_ptr<const rpc::TlsContext> tls = nullptr);
  SnapshotConnection(int fd, const std::atomic<bool>* cancel) : fd_(fd), cancel_(cancel) {}
  ~SnapshotConnection();
  SnapshotConnection(const SnapshotConnection&) = delete;
  SnapshotConnection& operator=(const SnapshotConnection&) = delete;

  // Exactly n bytes; UNAVAILABLE when the peer closes first or sends nothing for `idle`.
  Status Read(void* data, size_t n, absl::Duration idle);
  Status Write(const void* data, size_t n, absl::Duration idle);
  // Ends the connection for both directions; a Read or Write blocked in another thread
  // returns an error at once. The socket stays open until destruction.
  void Shutdown();

 private:
  friend class SnapshotListener;  // runs the server's handshake
  // Until the socket is ready for `events`: UNAVAILABLE after `idle`, CANCELLED once
  // *cancel_ is set.
  Status Wait(short events, absl::Duration idle, const char* what);
  // With a context (null: no TLS), the handshake as its side, the peer named `peer`,
  // within `timeout`.
  Status StartTls(const rpc::TlsContext* context, const std::string& peer, absl::Duration timeout);
  const int fd_;
  const std::atomic<bool>* const cancel_;
  std::unique_ptr<rpc::TlsSocket> tls_;
};

class SnapshotListener {
 public:
  // Listens on `host` ("0.0.0.0", an address of this machine) at a port the OS picks,
  // with a fresh random token. Its calls, and its connections', end when *cancel is set.
  // With TLS it accepts only a peer whose certificate names `peer`.
  static StatusOr<std::unique_ptr<SnapshotListener>> Open(const std::string& host, const std::atomic<bool>* cancel,
                                                          const std::string& peer);
  ~SnapshotListener();
  SnapshotListener(const SnapshotListener&) = delete;
  SnapshotListener& operator=(const SnapshotListener&) = delete;

  int port() const { return port_; }
  const std::string& token() const { return token_; }
  // The first connection that presents the token before `deadline`; others are closed.
  StatusOr<std::unique_ptr<SnapshotConnection>> Accept(absl::Time deadline);
  // Accept in two steps, so that the handshakes of several connections can overlap:
  // the next connection, not yet vetted; then its handshake and token, within a second
  // at most (a stranger's connection gets no longer). OK only for the primary.
  StatusOr<std::unique_ptr<SnapshotConnection>> NextConnection(absl::Time deadline);
  Status Admit(SnapshotConnection& conn, absl::Time deadline) const;

 private:
  SnapshotListener(int fd, int port, std::string token, const std::atomic<bool>* cancel, std::string peer,
                   std::shared_ptr<const rpc::TlsContext> tls)
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
  const std::shared_ptr<const rpc::TlsContext> tls_;  // null without TLS
};

// "host" of "host:port" ("[::1]:7" gives "::1").
std::string HostOf(const std::string& address);

}  // namespace pl::pserver

#endif  // PSERVER_SNAPSHOT_SOCKET_H_
