// EtcdServer: a real etcd for tests and benchmarks, one member on 127.0.0.1 with ports
// chosen free and its data in a directory of the caller's, started with the project's
// member flags (paddle_like/etcd/etcd_member.h) and ready (it answers a Range) before
// Start returns. The etcd binary is $PL_ETCD_BIN, else "etcd" on PATH (Debian's
// etcd-server, which `make deps` installs); Start says so when neither runs.
//
//   auto etcd = EtcdServer::Start(dir.path());
//   ASSERT_TRUE(etcd.ok()) << etcd.status();
//   pl-master ... --etcd_endpoints (*etcd)->endpoint()
//
// The member dies with the EtcdServer (its ChildProcess SIGKILLs it).
//
// Thread-safety: one thread.
#ifndef PADDLE_LIKE_TESTING_ETCD_SERVER_H_
#define PADDLE_LIKE_TESTING_ETCD_SERVER_H_

#include <memory>
#include <string>

#include "paddle_like/core/status.h"
#include "paddle_like/process/process_control.h"

namespace pl::testing {

class EtcdServer {
 public:
  // `dir`: where its data and log go (the caller owns it). With `member_tls_dir` the
  // member speaks mutual TLS (etcd/etcd_member.h: its certificate must name 127.0.0.1)
  // and admits clients named "master" only; `client_tls_dir` is such a client's, which
  // Start uses to see that it is ready.
  static StatusOr<std::unique_ptr<EtcdServer>> Start(const std::string& dir, const std::string& member_tls_dir = "",
                                                     const std::string& client_tls_dir = "");

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  int client_port() const { return client_port_; }
  ChildProcess& process() { return *process_; }
  std::string Log() const;

 private:
  EtcdServer(std::unique_ptr<ChildProcess> p, int client_port, std::string log)
      : process_(std::move(p)), client_port_(client_port), log_(std::move(log)) {}

  std::unique_ptr<ChildProcess> process_;
  int client_port_;
  std::string log_;
};

}  // namespace pl::testing

#endif  // PADDLE_LIKE_TESTING_ETCD_SERVER_H_
