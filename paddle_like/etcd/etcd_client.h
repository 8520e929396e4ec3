// EtcdClient: the calls of etcd's v3 API (proto/etcd_rpc.proto) that the master's
// leader election and its stored state use, made against a list of etcd endpoints.
// An attempt that fails with UNAVAILABLE or runs past its deadline is made again at the
// next endpoint (each endpoint once per call), so a call survives the loss of the etcd
// member it was talking to while a quorum of the others remains.
//
// With `tls_dir` (a certificate directory of the job's CA: tls.crt, tls.key, ca.crt;
// the masters pass their own) every call is mutual TLS, and the member must present a
// certificate of that CA naming "etcd" (etcd_member.h); without it, plaintext (an etcd
// the network already keeps to the masters, as k8s/overlays/standby's policy does).
//
// Thread-safety: thread-safe.
#ifndef PADDLE_LIKE_ETCD_ETCD_CLIENT_H_
#define PADDLE_LIKE_ETCD_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "proto/etcd_rpc.grpc.pb.h"

namespace pl::etcd {

class EtcdClient {
 public:
  // `endpoints`: "host:port[,host:port...]" (an "http://" in front of each is
  // accepted). INVALID_ARGUMENT naming the entry that is not host:port.
  static StatusOr<std::unique_ptr<EtcdClient>> Connect(const std::string& endpoints,
                                                       absl::Duration attempt_timeout = absl::Seconds(2),
                                                       const std::string& tls_dir = "");

  StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  // A lease of `ttl_s` seconds (etcd may grant more: its minimum follows its election
  // timeout); the response says which id and TTL.
  StatusOr<etcdserverpb::LeaseGrantResponse> LeaseGrant(int64_t ttl_s);
  Status LeaseRevoke(int64_t id);
  // Renews lease `id` once; the seconds it has left (<= 0: it is gone). Every attempt
  // ends by `within` from now (zero: the client's attempt timeout each), so a leader
  // whose lease is about to lapse learns it in time, not a whole timeout late.
  StatusOr<int64_t> LeaseKeepAliveOnce(int64_t id, absl::Duration within = absl::ZeroDuration());

  const std::string& endpoints() const { return endpoints_text_; }

  // The range_end that makes a Range/DeleteRange cover every key starting with `prefix`.
  static std::string PrefixEnd(const std::string& prefix);

 private:
  struct Endpoint {
    std::string address;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };
  EtcdClient(std::string text, std::vector<Endpoint> endpoints, absl::Duration attempt_timeout)
      : endpoints_text_(std::move(text)), endpoints_(std::move(endpoints)), attempt_timeout_(attempt_timeout) {}
  // Makes `attempt` at each endpoint in turn, from the last one that answered, until one
  // answers or `deadline` passes; the last failure, naming the endpoints, when none does.
  template <typename Attempt>
  Status Call(const char* what, Attempt attempt, absl::Time deadline = absl::InfiniteFuture());

  const std::string endpoints_text_;
  std::vector<Endpoint> endpoints_;
  const absl::Duration attempt_timeout_;
  std::atomic<size_t> current_{0};  // the endpoint that answered last
};

}  // namespace pl::etcd

#endif  // PADDLE_LIKE_ETCD_ETCD_CLIENT_H_
