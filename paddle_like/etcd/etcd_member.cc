#include "paddle_like/etcd/etcd_member.h"

#include "absl/strings/str_cat.h"

namespace pl::etcd {

std::vector<std::string> EtcdMemberArgv(const EtcdMemberSpec& s) {
  const std::string scheme = s.tls_dir.empty() ? "http://" : "https://";
  const std::string client = absl::StrCat(scheme, s.host, ":", s.client_port);
  const std::string peer = absl::StrCat(scheme, s.host, ":", s.peer_port);
  const std::string listen = s.listen_host.empty() ? s.host : s.listen_host;
  std::vector<std::string> argv = {
      s.binary,
      "--name", s.name,
      "--data-dir", s.data_dir,
      "--listen-client-urls", absl::StrCat(scheme, listen, ":", s.client_port),
      "--advertise-client-urls", client,
      "--listen-peer-urls", absl::StrCat(scheme, listen, ":", s.peer_port),
      "--initial-advertise-peer-urls", peer,
      "--initial-cluster", s.initial_cluster.empty() ? absl::StrCat(s.name, "=", peer) : s.initial_cluster,
      "--initial-cluster-token", s.cluster_token,
      "--initial-cluster-state", "new",
      "--heartbeat-interval", "50",
      "--election-timeout", "500",
      // A member cut off and healed would otherwise come back with a higher term and
      // depose the leader: an election that stalls the masters' renewals.
      "--pre-vote",
      // Every batch of the master's events is a new key: history is dropped after a
      // minute, so a long job stays within etcd's space quota.
      "--auto-compaction-mode", "periodic",
      "--auto-compaction-retention", "1m",
      "--logger", "zap",
      "--log-level", "warn"};
  if (!s.tls_dir.empty()) {
    const std::string crt = s.tls_dir + "/tls.crt", key = s.tls_dir + "/tls.key", ca = s.tls_dir + "/ca.crt";
    argv.insert(argv.end(), {"--cert-file", crt, "--key-file", key, "--trusted-ca-file", ca, "--client-cert-auth",
                             "--client-cert-allowed-hostname", s.allowed_client, "--peer-cert-file", crt,
                             "--peer-key-file", key, "--peer-trusted-ca-file", ca, "--peer-client-cert-auth",
                             "--peer-cert-allowed-hostname", s.allowed_peer});
  }
  return argv;
}

}  // namespace pl::etcd
