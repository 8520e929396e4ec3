#include "paddle_like/rpc/rpc.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/tls.h"

namespace pl::rpc {

std::string ChannelTarget(const std::string& address) {
  if (address.find(',') == std::string::npos) return address;
  std::vector<std::string> targets;
  std::string first;
  for (absl::string_view entry : absl::StrSplit(address, ',', absl::SkipWhitespace())) {
    const std::string e(absl::StripAsciiWhitespace(entry));
    if (first.empty()) first = e;
    const size_t colon = e.rfind(':');
    if (colon == std::string::npos) continue;
    const std::string host = e.substr(0, colon), port = e.substr(colon + 1);
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) continue;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char ip[INET_ADDRSTRLEN];
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip)) != nullptr) {
        std::string t = absl::StrCat(ip, ":", port);
        if (std::find(targets.begin(), targets.end(), t) == targets.end()) targets.push_back(std::move(t));
      }
    }
    freeaddrinfo(found);
  }
  if (targets.empty()) return first;
  return absl::StrCat("ipv4:", absl::StrJoin(targets, ","));
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  // Reconnect quickly after a peer restarts instead of gRPC's default 20 s+ backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC's name for the least time a connection attempt gets before it is abandoned.
  // TCP alone connects in well under 100 ms; a TLS handshake (key exchange, signatures,
  // certificate checks) on a loaded machine was seen to need more, and attempts cut
  // off at 100 ms never connected at all.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, TransportIsSecure() ? kTlsConnectTimeoutMs : 100);
  // A peer whose host died (power, cable) sends no FIN or RST: without pings a call to it
  // waits out its whole deadline (30 s for a push) before the caller can look for the
  // peer's new address. Pings while a call is open detect it within time + timeout.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepalivePingEveryMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // a sync barrier's wait sends no data
  if (TransportIsSecure()) args.SetSslTargetNameOverride(kJobServerName);
  const std::string target = ChannelTarget(address);
  // A list (a leading master and its standbys): connect to every entry at once and send
  // each call to one that is connected. Standbys do not listen, so that is the leader;
  // pick_first would wait out a connection timeout on a lost host before trying the next.
  if (target.rfind("ipv4:", 0) == 0 && target.find(',') != std::string::npos) {
    args.SetLoadBalancingPolicyName("round_robin");
    // A standby refuses connections until it leads: try it again often, so that the
    // one that takes over is reached within a quarter of a second of listening.
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 250);
  }
  return grpc::CreateCustomChannel(target, ChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> MakeContext(std::chrono::milliseconds timeout, bool wait_for_ready) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_wait_for_ready(wait_for_ready);
  ctx->AddMetadata(kProtocolKey, std::to_string(kProtocolVersion));
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

StatusOr<std::unique_ptr<grpc::Server>> StartServer(const ServerOptions& options,
                                                    const std::vector<grpc::Service*>& services,
                                                    int* bound_port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, ServerCredentials(), bound_port);
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes > 0 ? options.max_receive_bytes : options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // Accept the clients' keepalive pings (MakeChannel) however long a call sends no data;
  // gRPC's default answers a ping more often than every 5 min with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kKeepalivePingEveryMs / 2);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  if (options.num_threads > 0) {
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, options.num_threads);
  }
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || (bound_port && *bound_port == 0)) {
    return absl::UnavailableError("could not listen on " + options.address +
                                  " (address in use or invalid)");
  }
  return server;
}

grpc::Status CheckProtocol(const grpc::ServerContextBase* context) {
  const auto& md = context->client_metadata();
  auto it = md.find(kProtocolKey);
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "paddle_like protocol: the caller sent no " + std::string(kProtocolKey) +
                            " (this server speaks version " + std::to_string(kProtocolVersion) + ")");
  }
  int version = 0;
  std::string value(it->second.data(), it->second.size());
  if (!absl::SimpleAtoi(value, &version) || version != kProtocolVersion) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "paddle_like protocol: caller speaks version " + value +
                            ", this server speaks version " + std::to_string(kProtocolVersion));
  }
  return grpc::Status::OK;
}

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool IsRetryable(const Status& status) {
  // CANCELLED: a server shutting down cancels the calls it holds (a pserver that leaves
  // its shard exits mid-call); the project's clients never cancel their own calls, they
  // stop between them.
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) || absl::IsAborted(status) ||
         absl::IsCancelled(status);
}

}  // namespace pl::rpc
