// The one place where gRPC servers, channels and call contexts are made, so that
// message-size limits, deadlines, the protocol-version check and transport security
// (tls.h: mutual TLS once configured) are set once for the whole system.
//
// Every client call carries the metadata `pl-protocol-version`; every server handler
// starts with CheckProtocol(context), which refuses a missing or different version
// with FAILED_PRECONDITION naming both versions.
//
// Thread-safety: the functions are thread-safe; a ClientContext serves one call.
#ifndef PADDLE_LIKE_RPC_RPC_H_
#define PADDLE_LIKE_RPC_RPC_H_

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "paddle_like/core/status.h"

namespace pl::rpc {

// Raised whenever processes of two builds would misunderstand each other: 2 places dense
// blocks round the pservers (dist/sharding.h) and names optimizers on the wire.
inline constexpr int kProtocolVersion = 2;
inline constexpr char kProtocolKey[] = "pl-protocol-version";
// Largest message either side accepts; a larger one is refused with RESOURCE_EXHAUSTED.
inline constexpr int kDefaultMaxMessageBytes = 256 << 20;
// Keepalive of every channel while a call is open: a peer that answers no ping within
// kKeepaliveTimeoutMs of it fails the calls with UNAVAILABLE (a dead host, a cut link).
inline constexpr int kKeepalivePingEveryMs = 2000;
inline constexpr int kKeepaliveTimeoutMs = 3000;
// How long one connection attempt may take when it includes a TLS handshake (tls.h).
inline constexpr int kTlsConnectTimeoutMs = 5000;

struct ChannelOptions {
  int max_message_bytes = kDefaultMaxMessageBytes;
};

// A channel to "host:port" with the system's limits and the process's transport
// security (tls.h). A list, "host:port,host:port,...", is a service that any one of
// them serves (a job's leading master and its standbys, which do not listen): the
// channel connects to every entry (ChannelTarget) and sends each call to one that
// accepted, so a lost host among them costs nothing.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelOptions& options = {});

// gRPC's target for `address`: itself, or for a list each host resolved to its IPv4
// addresses now, as "ipv4:a.b.c.d:port,..." (hosts that do not resolve are left out:
// a machine that is gone; when none resolves, the first entry as given).
std::string ChannelTarget(const std::string& address);

// A context for one call: protocol version attached, deadline `timeout` from now.
// `wait_for_ready`: a call on a channel that is not connected yet waits for the
// connection, within the deadline, instead of failing at once with UNAVAILABLE. For a
// caller that knows the server is up (its port file is written) but may be slow to
// answer the handshake, as on a loaded machine. Clients that retry with backoff and
// must notice a dead server quickly leave it off.
std::unique_ptr<grpc::ClientContext> MakeContext(std::chrono::milliseconds timeout, bool wait_for_ready = false);

struct ServerOptions {
  std::string address = "127.0.0.1:0";  // port 0: the OS picks a free port
  int max_message_bytes = kDefaultMaxMessageBytes;
  int max_receive_bytes = 0;             // 0: max_message_bytes
  int num_threads = 0;                   // 0: gRPC's default
};

// Builds and starts a server for `services`; `*bound_port` receives the chosen port.
StatusOr<std::unique_ptr<grpc::Server>> StartServer(const ServerOptions& options,
                                                    const std::vector<grpc::Service*>& services,
                                                    int* bound_port);

// Server side: OK when the caller speaks kProtocolVersion.
grpc::Status CheckProtocol(const grpc::ServerContextBase* context);

// Conversions between pl::Status and grpc::Status (canonical codes are shared).
grpc::Status ToGrpc(const Status& status);
Status FromGrpc(const grpc::Status& status);
// True for codes a caller should retry with backoff (peer down, restarting or shutting
// down with the call in hand).
bool IsRetryable(const Status& status);

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_RPC_H_
