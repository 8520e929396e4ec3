// Mutual TLS over a plain TCP socket, with the job's certificates (tls.h), for bulk
// transfers that bypass gRPC (a replica's snapshot: pserver/snapshot_socket.h). Both
// ends present their certificate; each accepts the other only if it chains to the
// job's CA and names the expected identity (caller.h: "pserver-3"), so a transfer is
// as private and as authenticated as the job's gRPC calls. TLS 1.3, AES-128-GCM first
// (the fastest suite with AES-NI).
//
// Thread-safety: one thread at a time per session.
#ifndef PADDLE_LIKE_RPC_TLS_SOCKET_H_
#define PADDLE_LIKE_RPC_TLS_SOCKET_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "paddle_like/core/status.h"

struct ssl_st;

namespace pl::rpc {

class TlsSocket {
 public:
  enum class Side { kClient, kServer };
  // Waits until the socket is ready for `events` (POLLIN / POLLOUT), or fails (a
  // deadline, a cancellation): the caller's policy for a non-blocking socket.
  using Wait = std::function<Status(short events)>;

  // Runs the handshake on connected, non-blocking socket `fd` (still owned by the
  // caller) with the certificates of tls.h's directory. The peer must name `peer`.
  // FAILED_PRECONDITION when no TLS is configured.
  static StatusOr<std::unique_ptr<TlsSocket>> Handshake(int fd, Side side, const std::string& peer, const Wait& wait);
  ~TlsSocket();
  TlsSocket(const TlsSocket&) = delete;
  TlsSocket& operator=(const TlsSocket&) = delete;

  // Exactly n bytes, waiting through `wait` whenever the socket is not ready.
  Status Read(void* data, size_t n, const Wait& wait);
  Status Write(const void* data, size_t n, const Wait& wait);

 private:
  explicit TlsSocket(ssl_st* ssl) : ssl_(ssl) {}
  // The wait an OpenSSL call that returned `rc` asks for, or its error.
  Status AfterCall(int rc, const char* what, const Wait& wait);
  ssl_st* const ssl_;
};

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_TLS_SOCKET_H_
