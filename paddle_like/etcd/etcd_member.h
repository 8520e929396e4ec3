// EtcdMemberArgv: the command line of one etcd member as this project runs it (beside
// the masters under pl-launch, and in the tests): its client and peer URLs, the
// cluster it starts with, and timing tuned for failover: a 50 ms heartbeat and a
// 500 ms election timeout, which also let etcd grant the masters' 1 s leases (etcd's
// shortest lease is 1.5 election timeouts), and pre-vote, so that a member that was cut
// off does not depose the leader when it is back.
//
// Thread-safety: a pure function.
#ifndef PADDLE_LIKE_ETCD_ETCD_MEMBER_H_
#define PADDLE_LIKE_ETCD_ETCD_MEMBER_H_

#include <string>
#include <vector>

namespace pl::etcd {

struct EtcdMemberSpec {
  std::string binary = "etcd";  // a path, or a name looked up in PATH
  std::string name;             // unique in the cluster
  std::string data_dir;
  std::string host;             // the address it is reached at
  std::string listen_host;      // the address it listens on; empty: `host`
  int client_port = 2379;
  int peer_port = 2380;
  // "name=http://host:peer_port,..." of every member; empty: this one alone.
  std::string initial_cluster;
  std::string cluster_token = "paddle_like";
  // Mutual TLS (empty: plaintext): the member's certificate directory (tls.crt, tls.key,
  // ca.crt of the job's CA, rpc/certificates.h; the certificate must name `host`, which
  // its peers check). Clients must hold a certificate of the same CA naming
  // `allowed_client` (the masters' identity), peers one naming `allowed_peer`: a job's
  // trainer certificate opens neither door.
  std::string tls_dir;
  std::string allowed_client = "master";
  std::string allowed_peer = "etcd";
};

// The name an etcd member's certificate is issued for (its identity among the job's).
inline constexpr char kEtcdIdentity[] = "etcd";

std::vector<std::string> EtcdMemberArgv(const EtcdMemberSpec& spec);

}  // namespace pl::etcd

#endif  // PADDLE_LIKE_ETCD_ETCD_MEMBER_H_
