#include "paddle_like/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "paddle_like/process/process_control.h"
#include "paddle_like/rpc/rpc.h"

namespace pl::etcd {
namespace {

// A log batch or a snapshot piece is at most a little over 1 MB (etcd's default request
// limit is 1.5 MB); a Range answer holds up to 256 of them.
constexpr int kMaxMessageBytes = 512 << 20;

std::shared_ptr<grpc::Channel> Dial(const std::string& address,
                                    const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  // A member's certificate names "etcd" (and its host, for its peers): the name checked.
  args.SetSslTargetNameOverride("etcd");
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A member that restarts is dialled again within a tenth of a second, not gRPC's 20 s+.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  // gRPC's name for the least time a connection attempt gets: etcd sends its HTTP/2
  // settings only once it serves, and on a loaded machine across hosts attempts cut off
  // at 100 ms never connected at all.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, credentials, args);
}

std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  return ctx;
}

bool TryNext(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const std::string& text, absl::Duration attempt_timeout,
                                                          const std::string& tls_dir) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls_dir.empty()) {
    grpc::SslCredentialsOptions ssl;
    for (auto [file, out] : {std::pair<const char*, std::string*>{"ca.crt", &ssl.pem_root_certs},
                             {"tls.key", &ssl.pem_private_key},
                             {"tls.crt", &ssl.pem_cert_chain}}) {
      *out = process::ReadFileOrEmpty(tls_dir + "/" + file);
      if (out->empty()) {
        return absl::NotFoundError(absl::StrCat("etcd TLS: cannot read ", tls_dir, "/", file));
      }
    }
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<Endpoint> endpoints;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string address(absl::StripAsciiWhitespace(entry));
    if (absl::StartsWith(address, "http://")) address = address.substr(7);
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("etcd endpoint '", entry, "' is not host:port"));
    }
    std::shared_ptr<grpc::Channel> channel = Dial(address, credentials);
    endpoints.push_back({address, etcdserverpb::KV::NewStub(channel), etcdserverpb::Lease::NewStub(channel)});
  }
  if (endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoints given");
  return std::unique_ptr<EtcdClient>(new EtcdClient(text, std::move(endpoints), attempt_timeout));
}

template <typename Attempt>
Status EtcdClient::Call(const char* what, Attempt attempt, absl::Time deadline) {
  const size_t first = current_.load();
  grpc::Status last(grpc::StatusCode::DEADLINE_EXCEEDED, "no time left for an attempt");
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t at = (first + i) % endpoints_.size();
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    auto ctx = Context(std::min(attempt_timeout_, left));
    // Waits for a connection within the deadline: a member that is up but was idle is
    // not skipped for it.
    ctx->set_wait_for_ready(endpoints_.size() == 1);
    last = attempt(endpoints_[at], ctx.get());
    if (last.ok()) {
      current_ = at;
      return absl::OkStatus();
    }
    if (!TryNext(last)) break;
  }
  return Annotate(rpc::FromGrpc(last), absl::StrCat("etcd ", what, " (", endpoints_text_, ")"));
}

StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(const etcdserverpb::RangeRequest& request) {
  etcdserverpb::RangeResponse response;
  PL_RETURN_IF_ERROR(Call("Range", [&](Endpoint& e, grpc::ClientContext* ctx) {
    response.Clear();
    return e.kv->Range(ctx, request, &response);
  }));
  return response;
}

StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse response;
  PL_RETURN_IF_ERROR(Call("Txn", [&](Endpoint& e, grpc::ClientContext* ctx) {
    response.Clear();
    return e.kv->Txn(ctx, request, &response);
  }));
  return response;
}

StatusOr<etcdserverpb::LeaseGrantResponse> EtcdClient::LeaseGrant(int64_t ttl_s) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_s);
  etcdserverpb::LeaseGrantResponse response;
  PL_RETURN_IF_ERROR(Call("LeaseGrant", [&](Endpoint& e, grpc::ClientContext* ctx) {
    response.Clear();
    return e.lease->LeaseGrant(ctx, request, &response);
  }));
  if (!response.error().empty()) return absl::UnavailableError(absl::StrCat("etcd LeaseGrant: ", response.error()));
  return response;
}

Status EtcdClient::LeaseRevoke(int64_t id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  etcdserverpb::LeaseRevokeResponse response;
  return Call("LeaseRevoke",
              [&](Endpoint& e, grpc::ClientContext* ctx) { return e.lease->LeaseRevoke(ctx, request, &response); });
}

StatusOr<int64_t> EtcdClient::LeaseKeepAliveOnce(int64_t id, absl::Duration within) {
  int64_t ttl = 0;
  PL_RETURN_IF_ERROR(Call("LeaseKeepAlive", [&](Endpoint& e, grpc::ClientContext* ctx) {
    auto stream = e.lease->LeaseKeepAlive(ctx);
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(id);
    etcdserverpb::LeaseKeepAliveResponse response;
    const bool answered = stream->Write(request) && stream->Read(&response);
    stream->WritesDone();
    ctx->TryCancel();
    grpc::Status finished = stream->Finish();
    if (!answered) {
      return finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream closed") : finished;
    }
    ttl = response.ttl();
    return grpc::Status::OK;
  }, within > absl::ZeroDuration() ? absl::Now() + within : absl::InfiniteFuture()));
  return ttl;
}

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

}  // namespace pl::etcd
