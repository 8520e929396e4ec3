// Mutual TLS over a plain TCP socket, with the job's certificates (tls.h), for bulk
// transfers that bypass gRPC (a replica's snapshot, a dense link: paddle_like/rpc/bulk_socket.h). Both
// ends present their certificate; each accepts the other only if it chains to the
// job's CA and names the expected identity (caller.h: "pserver-3"), so a transfer is
// as private and as authenticated as the job's gRPC calls. TLS 1.3, AES-128-GCM first
// (the fastest suite with AES-NI).
//
// Thread-safety: a TlsContext may start sessions on several threads at once; one
// thread at a time per session.
#ifndef PADDLE_LIKE_RPC_TLS_SOCKET_H_
#define PADDLE_LIKE_RPC_TLS_SOCKET_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "paddle_like/core/status.h"

struct ssl_st;
struct ssl_ctx_st;

namespace pl::rpc {

enum class TlsSide { kClient, kServer };

// The job's certificates (tls.h's directory), read and parsed once for the sessions of
// one transfer: every lane of a snapshot starts its session from the same context
// instead of reading and parsing the files again.
class TlsContext {
 public:
  // FAILED_PRECONDITION when no TLS is configured; INVALID_ARGUMENT naming a file that
  // cannot be used.
  static StatusOr<std::shared_ptr<const TlsContext>> Load(TlsSide side);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  TlsSide side() const { return side_; }

 private:
  friend class TlsSocket;
  TlsContext(ssl_ctx_st* ctx, TlsSide side) : ctx_(ctx), side_(side) {}
  ssl_ctx_st* const ctx_;
  const TlsSide side_;
};

class TlsSocket {
 public:
  // Waits until the socket is ready for `events` (POLLIN / POLLOUT), or fails (a
  // deadline, a cancellation): the caller's policy for a non-blocking socket.
  using Wait = std::function<Status(short events)>;

  // Runs the handshake on connected, non-blocking socket `fd` (still owned by the
  // caller) as `context`'s side, with its certificates. The peer must name `peer`.
  static StatusOr<std::unique_ptr<TlsSocket>> Handshake(int fd, const TlsContext& context, const std::string& peer,
                                                        const Wait& wait);
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
