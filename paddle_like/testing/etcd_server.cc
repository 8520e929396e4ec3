#include "paddle_like/testing/etcd_server.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "paddle_like/etcd/etcd_client.h"
#include "paddle_like/etcd/etcd_member.h"

namespace pl::testing {

StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Start(const std::string& dir, const std::string& member_tls_dir,
                                                        const std::string& client_tls_dir) {
  etcd::EtcdMemberSpec spec;
  const char* bin = std::getenv("PL_ETCD_BIN");
  spec.binary = bin != nullptr && *bin != '\0' ? bin : "etcd";
  spec.name = "test";
  spec.data_dir = dir + "/etcd-data";
  spec.host = "127.0.0.1";
  spec.tls_dir = member_tls_dir;
  const std::string log = dir + "/etcd.log";
  // A port picked free may be taken before etcd binds it: try again with others.
  Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    PL_ASSIGN_OR_RETURN(spec.client_port, process::PickFreePort());
    PL_ASSIGN_OR_RETURN(spec.peer_port, process::PickFreePort());
    if (spec.peer_port == spec.client_port) continue;
    auto child = process::Spawn(etcd::EtcdMemberArgv(spec), log);
    if (!child.ok()) {
      return Annotate(child.status(), "cannot start etcd (install Debian's etcd-server, or set PL_ETCD_BIN)");
    }
    PL_ASSIGN_OR_RETURN(auto client, etcd::EtcdClient::Connect(absl::StrCat("127.0.0.1:", spec.client_port),
                                                               absl::Milliseconds(500), client_tls_dir));
    etcdserverpb::RangeRequest probe;
    probe.set_key("probe");
    const bool ready = process::WaitUntil(
        [&] { return !(*child)->running() || client->Range(probe).ok(); }, std::chrono::seconds(20));
    if (ready && (*child)->running()) {
      return std::unique_ptr<EtcdServer>(new EtcdServer(std::move(child).value(), spec.client_port, log));
    }
    last = absl::UnavailableError(absl::StrCat("etcd did not become ready on 127.0.0.1:", spec.client_port, ": ",
                                               process::ReadFileOrEmpty(log).substr(0, 2000)));
  }
  return last;
}

std::string EtcdServer::Log() const { return process::ReadFileOrEmpty(log_); }

}  // namespace pl::testing
