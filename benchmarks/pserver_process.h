// A real pl-pserver process for the benchmarks (shard 0 of 1, on 127.0.0.1, or on a host
// of the multi-host test bed), optionally on mutual TLS, and a ParameterClient connected
// to it: the trainer's real path.
//
// Thread-safety: not thread-safe; one benchmark thread uses it.
#ifndef PADDLE_LIKE_BENCHMARKS_PSERVER_PROCESS_H_
#define PADDLE_LIKE_BENCHMARKS_PSERVER_PROCESS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/bench_util.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/dist/bf16.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/testing/process.h"

namespace pl::bench {

// Where a benchmark's pserver runs: on 127.0.0.1, or (bed set) on host 0 of a test bed,
// reached from the bed's switch by this process in the root namespace, as a machine
// beside it would (paddle_like/testing/test_bed.h). `start` spawns argv there.
struct PserverPlace {
  std::string address = "127.0.0.1";  // where the pserver listens and is dialled
  std::function<StatusOr<std::unique_ptr<ChildProcess>>(const std::vector<std::string>& argv,
                                                        const std::string& log)>
      start;  // empty: a local child
};

class PserverProcess {
 public:
  // `tls_dir`: the pserver's certificate directory (empty: insecure). The channel this
  // process dials uses whatever transport this process has configured (rpc/tls.h).
  Status Start(const std::string& tag, const std::string& tls_dir = "", const PserverPlace& place = {}) {
    if (dir_.path().empty()) return absl::InternalError("cannot create a temp dir");
    PL_ASSIGN_OR_RETURN(std::string bin, BinPath("pl-pserver"));
    const std::string port_file = dir_.path() + "/ps.port";
    std::vector<std::string> argv = {bin,         "--index", "0", "--num_pservers", "1", "--host", place.address,
                                     "--port",    "0",       "--port_file",   port_file};
    if (!tls_dir.empty()) argv.insert(argv.end(), {"--tls_dir", tls_dir});
    const std::string log = dir_.path() + "/" + tag + ".log";
    PL_ASSIGN_OR_RETURN(child_, place.start ? place.start(argv, log) : testing::Spawn(argv, log));
    PL_ASSIGN_OR_RETURN(int port, testing::WaitForPortFile(port_file, std::chrono::seconds(20), child_.get()));
    address_ = place.address + ":" + std::to_string(port);
    stub_ = proto::ParameterServer::NewStub(rpc::MakeChannel(address_));
    return absl::OkStatus();
  }
  static StatusOr<std::string> BinPath(const std::string& name) {
    const std::string path = SelfBinDir() + "/" + name;
    if (!FileExists(path)) return absl::NotFoundError(path + " is not built");
    return path;
  }
  StatusOr<proto::StatsResponse> Stats() {
    proto::StatsResponse r;
    auto ctx = rpc::MakeContext(std::chrono::seconds(10));
    PL_RETURN_IF_ERROR(rpc::FromGrpc(stub_->Stats(ctx.get(), proto::StatsRequest(), &r)));
    return r;
  }
  const std::string& address() const { return address_; }
  proto::ParameterServer::Stub& stub() { return *stub_; }
  ~PserverProcess() {
    if (child_) child_->Stop(std::chrono::milliseconds(2000));
  }

 private:
  testing::TempDir dir_{"pl-bench-ps"};
  std::unique_ptr<ChildProcess> child_;
  std::string address_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

// How a benchmark's trainer moves its dense blocks: everything over gRPC, a dense link
// (as from another host), or a shared-memory region (the same host).
enum class DensePath { kGrpc, kDenseLink, kSharedMemory };

inline const char* DensePathName(DensePath path) {
  switch (path) {
    case DensePath::kGrpc: return "gRPC";
    case DensePath::kDenseLink: return "dense link";
    case DensePath::kSharedMemory: return "shared memory";
  }
  return "?";
}

inline StatusOr<std::unique_ptr<ParameterClient>> ConnectedClient(Module* module, const OptimizerSpec& optimizer,
                                                                  DensePath path, const std::string& address,
                                                                  WireDtype wire = WireDtype::kFloat32,
                                                                  int dense_link_lanes = -1) {
  ParameterClientOptions po;
  po.optimizer = optimizer;
  po.shared_memory = path == DensePath::kSharedMemory;
  po.dense_link_lanes = path == DensePath::kDenseLink ? dense_link_lanes : 0;
  // As pl-trainer runs (without --pipeline): the parameters live in the region, so
  // gradients leave and values arrive with no copy on the trainer's side.
  po.bind_parameters_to_shared_memory = path != DensePath::kGrpc;
  po.wire_dtype = wire;
  auto client = std::make_unique<ParameterClient>(
      module, po, [address]() -> StatusOr<std::vector<std::string>> { return std::vector<std::string>{address}; });
  PL_RETURN_IF_ERROR(client->Connect());
  // The transport asked for, or the figures would be mislabelled.
  const std::string got = client->Transports()[0];
  if (got.rfind(DensePathName(path), 0) != 0) {
    return absl::InternalError(absl::StrCat("asked for ", DensePathName(path), ", got ", got));
  }
  return client;
}

}  // namespace pl::bench

#endif  // PADDLE_LIKE_BENCHMARKS_PSERVER_PROCESS_H_
