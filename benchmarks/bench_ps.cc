// pl-bench-ps: what one real pl-pserver process moves and holds, each figure as a
// ratio against a reference measured in this same run.
//
//   Raw TCP       a plain TCP sender/receiver thread pair on 127.0.0.1: streaming
//                 bandwidth (64 MB x several) and, per size S, a ping-pong that moves
//                 S bytes up and S bytes back, the same bytes as a push + pull.
//   Dense         push+pull of one dense parameter of 1 KB .. 64 MB through
//                 paddle_like/client/param_client.h's ParameterClient (the trainer's real path),
//                 MB/s = 2*S / time, / the raw ping-pong of S and / streaming loopback.
//                 Over gRPC (no shared memory, no dense link), over a dense link
//                 (a trainer on another host, by default) and through a
//                 shared-memory region (a trainer on the pserver's host).
//   Exchange      one training step's parameter exchange of the `mlp` example model
//                 (2.1 MB, Adam) through ParameterClient::PushAndPull, over gRPC and
//                 through shared memory, / the same Adam step applied in-process (what
//                 a single process does instead): the cost of distributing the update.
//   Sparse        pull and push of 10k distinct rows (dim 8 and 64) through raw stubs,
//                 rows/s, / the rows/s raw loopback streaming would carry.
//   Memory        the pserver's resident set (Stats.rss_bytes) after Init of a dense
//                 parameter, right after traffic and once traffic has paused, / its raw
//                 bytes (value + Adam's 2 slots); and its growth per
//                 stored sparse row after pushing 1M rows, / the raw row bytes
//                 (id + value + 2 slots + step count).
//
//   With --bed the pserver runs on a host of the multi-host test bed (paddle_like/testing/test_bed.h: its
//   own network namespace, behind a veth pair and the bed's switch) and this process
//   reaches it from the switch's other side, as a trainer on another machine would; the
//   raw references then run between the same two points.
//
//   pl-bench-ps [--quick] [--only loopback,apply,dense,exchange,sparse,memory] [--dense_link_lanes K] [--bed]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "benchmarks/bench_ps_apply.h"
#include "benchmarks/bench_util.h"
#include "benchmarks/pserver_process.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/testing/process.h"
#include "trainer/models.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/testing/test_bed.h"

ABSL_FLAG(bool, quick, false, "smaller sizes and fewer repetitions");
ABSL_FLAG(int32_t, dense_link_lanes, -1, "connections each way of the dense link lines (-1: the trainer's default)");
ABSL_FLAG(std::vector<std::string>, only, {},
          "run only these parts: loopback, apply, dense, exchange, sparse, memory (empty: all)");
ABSL_FLAG(bool, bed, false,
          "the pserver on a host of the multi-host test bed (needs root), this process on the bed's switch: "
          "every figure between two network stacks, as between machines, instead of through 127.0.0.1");

namespace pl::bench {
namespace {

struct Options {
  bool quick = false;
  int dense_link_lanes = -1;
  std::set<std::string> only;
  bool Want(const std::string& part) const { return only.empty() || only.count(part) > 0; }
  PserverPlace place;  // where each pserver runs; the raw pairs connect the same way
  // The test bed's host 0 (with --bed): the raw pairs' server side is a socket inside it.
  std::function<StatusOr<int>()> bed_socket;
  // The ways a trainer's dense blocks can go: no shared memory with another host.
  std::vector<DensePath> Paths() const {
    if (bed_socket) return {DensePath::kGrpc, DensePath::kDenseLink};
    return {DensePath::kGrpc, DensePath::kDenseLink, DensePath::kSharedMemory};
  }
};

// ---- raw TCP ---------------------------------------------------------------------

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= w;
  }
  return true;
}
bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= r;
  }
  return true;
}

// A connected pair of TCP sockets (client, server side) between this process and where
// the pserver runs (127.0.0.1, or the bed's host), Nagle off as gRPC does.
bool ConnectedPair(const Options& o, int* client, int* server) {
  int listener = -1;
  if (o.bed_socket) {
    StatusOr<int> fd = o.bed_socket();
    if (!fd.ok()) return false;
    listener = *fd;
  } else {
    listener = socket(AF_INET, SOCK_STREAM, 0);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  socklen_t len = sizeof addr;
  if (inet_pton(AF_INET, o.place.address.c_str(), &addr.sin_addr) != 1 ||
      bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return false;
  }
  *client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(*client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(*client);
    close(listener);
    return false;
  }
  *server = accept(listener, nullptr, nullptr);
  close(listener);
  const int one = 1;
  setsockopt(*client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(*server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return *server >= 0;
}

// Streaming: the sender writes `total` bytes in 1 MB writes, the receiver thread reads
// them all and answers one byte. Returns the best MB/s of `reps`.
double RawStreamMBps(const Options& o, size_t total, int reps) {
  int c = -1, s = -1;
  if (!ConnectedPair(o, &c, &s)) return 0;
  std::vector<char> buf(1 << 20, 'x');
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::thread receiver([&] {
      std::vector<char> in(1 << 20);
      size_t got = 0;
      while (got < total) {
        const ssize_t n = read(s, in.data(), in.size());
        if (n <= 0) break;
        got += n;
      }
      const char ack = 1;
      (void)WriteAll(s, &ack, 1);
    });
    const double start = NowSeconds();
    for (size_t sent = 0; sent < total; sent += buf.size()) WriteAll(c, buf.data(), std::min(buf.size(), total - sent));
    char ack;
    (void)ReadAll(c, &ack, 1);
    const double t = NowSeconds() - start;
    receiver.join();
    best = std::max(best, total / t / 1e6);
  }
  close(c);
  close(s);
  return best;
}

// Ping-pong: S bytes to the server thread, S bytes back, like one push and one pull.
// Returns the best seconds per round trip.
double RawPingPongSeconds(const Options& o, size_t size, int reps, double min_seconds) {
  int c = -1, s = -1;
  if (!ConnectedPair(o, &c, &s)) return 0;
  std::atomic<bool> stop{false};
  std::thread server([&] {
    std::vector<char> in(size);
    while (!stop.load()) {
      if (!ReadAll(s, in.data(), size)) break;
      if (!WriteAll(s, in.data(), size)) break;
    }
  });
  std::vector<char> out(size, 'y'), back(size);
  const double t = BestSecondsPerCall(
      [&] {
        WriteAll(c, out.data(), size);
        ReadAll(c, back.data(), size);
      },
      reps, min_seconds);
  stop = true;
  shutdown(c, SHUT_RDWR);
  close(c);
  server.join();
  close(s);
  return t;
}

// A module holding exactly one dense parameter "w" of n floats, or one sparse table.
class OneDense : public Module {
 public:
  explicit OneDense(int64_t n) : Module("OneDense") { w = RegisterDense("w", {n}, InitSpec::Zeros()); }
  Variable w;
};
class OneTable : public Module {
 public:
  explicit OneTable(int64_t dim) : Module("OneTable") { t = RegisterSparse("emb", dim, 0, InitSpec::Uniform(0.01f)); }
  std::shared_ptr<SparseTable> t;
};

OptimizerSpec Optimizer(OptimizerKind kind) {
  OptimizerSpec o;
  o.kind = kind;
  o.learning_rate = 1e-3f;
  return o;
}

std::string SizeName(size_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MB";
  return std::to_string(bytes >> 10) + " KB";
}

// The pserver scans every pushed gradient for NaN/Inf before applying it; that scan
// should run at memory speed: GB/s / a memcpy of the same 16 MB.
void RunValidationScan() {
  const int64_t n = 4 << 20;
  std::vector<float> a(n, 1e-3f), b(n);
  int64_t sink = 0;
  const double t_scan = BestSecondsPerCall([&] { sink += FirstNonFinite(a.data(), n); }, 5, 0.2);
  const double t_copy = BestSecondsPerCall([&] { std::memcpy(b.data(), a.data(), n * 4); }, 5, 0.2);
  if (sink == 42) std::printf(" ");  // keeps the scan from being optimised away
  const double gbs = n * 4 / t_scan / 1e9, copy_gbs = n * 4 / t_copy / 1e9;
  ReportLine("FirstNonFinite scan of 16 MB (push validation)", gbs, "GB/s", copy_gbs, "GB/s", "memcpy, same bytes",
             gbs / copy_gbs);
}

// A trainer's client of the one pserver at `address`, connected.
void RunDense(const Options& o, double stream_mbps) {
  RunValidationScan();
  std::vector<size_t> sizes = {1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  if (o.quick) sizes = {1 << 10, 64 << 10, 1 << 20, 16 << 20};
  std::map<size_t, double> f32_sgd_mbps;  // gRPC, float32 wire: what bfloat16 is compared with
  for (const DensePath path : o.Paths()) {
  const bool grpc = path == DensePath::kGrpc;
  for (const WireDtype wire : {WireDtype::kFloat32, WireDtype::kBfloat16}) {
  for (OptimizerKind kind : {OptimizerKind::kSGD, OptimizerKind::kAdam}) {
    for (size_t bytes : sizes) {
      if (kind == OptimizerKind::kAdam && bytes != (16u << 20)) continue;  // one Adam line: the target size
      if (!grpc && bytes < (64u << 10)) continue;  // tiny tensors: the call, not the bytes
      // bfloat16 wire: over gRPC (a region carries float32), SGD, sizes where bytes count.
      if (wire == WireDtype::kBfloat16 && (!grpc || kind != OptimizerKind::kSGD || bytes < (1u << 20))) continue;
      PserverProcess ps;
      if (Status s = ps.Start("dense", "", o.place); !s.ok()) {
        std::cout << "  " << s << std::endl;
        return;
      }
      OneDense module(static_cast<int64_t>(bytes / 4));
      module.w.MutableGrad().Fill(1e-3f);
      auto connected = ConnectedClient(&module, Optimizer(kind), path, ps.address(), wire, o.dense_link_lanes);
      if (!connected.ok()) {
        std::cout << "  connect: " << connected.status() << std::endl;
        return;
      }
      ParameterClient& client = **connected;
      Status error;
      auto push = [&] {
        module.w.MutableGrad();  // Push zeroes the gradient; the bytes sent are the same
        if (Status s = client.Push(64); !s.ok()) error = s;
      };
      auto pull = [&] {
        if (Status s = client.Pull({}); !s.ok()) error = s;
      };
      const int reps = bytes >= (16u << 20) ? 3 : 5;
      const double min_s = o.quick ? 0.1 : 0.4;
      const double t_both = BestSecondsPerCall([&] { push(); pull(); }, reps, min_s);
      const double t_push = BestSecondsPerCall(push, reps, min_s / 2);
      const double t_pull = BestSecondsPerCall(pull, reps, min_s / 2);
      if (!error.ok()) {
        std::cout << "  " << SizeName(bytes) << ": " << error << std::endl;
        continue;
      }
      const double raw = RawPingPongSeconds(o, bytes, reps, min_s);
      const double mbps = 2.0 * bytes / t_both / 1e6, raw_mbps = 2.0 * bytes / raw / 1e6;
      const std::string opt = std::string(kind == OptimizerKind::kSGD ? "sgd" : "adam") +
                              (grpc ? "" : std::string(", ") + DensePathName(path)) +
                              (wire == WireDtype::kBfloat16 ? ", bfloat16 wire" : "");
      ReportLine("push+pull " + SizeName(bytes) + " (" + opt + ")", mbps, "MB/s", raw_mbps, "MB/s",
                 "raw ping-pong, same bytes", mbps / raw_mbps);
      if (bytes >= (1u << 20)) {
        ReportLine("  vs streaming loopback", mbps, "MB/s", stream_mbps, "MB/s", "raw stream", mbps / stream_mbps);
      }
      if (grpc && kind == OptimizerKind::kSGD && wire == WireDtype::kFloat32) f32_sgd_mbps[bytes] = mbps;
      if (path == DensePath::kDenseLink && kind == OptimizerKind::kSGD && f32_sgd_mbps.count(bytes)) {
        ReportLine("  vs gRPC", mbps, "MB/s", f32_sgd_mbps[bytes], "MB/s", "same size, gRPC", mbps / f32_sgd_mbps[bytes]);
      }
      if (wire == WireDtype::kBfloat16 && f32_sgd_mbps.count(bytes)) {
        ReportLine("  vs the float32 wire", mbps, "MB/s", f32_sgd_mbps[bytes], "MB/s", "same size, gRPC",
                   mbps / f32_sgd_mbps[bytes]);
      }
      std::printf("    (per call: push+pull %.3f ms, push %.3f ms, pull %.3f ms, raw ping-pong %.3f ms)\n",
                  t_both * 1e3, t_push * 1e3, t_pull * 1e3, raw * 1e3);
    }
  }
  }
  }
}

// The mlp's exchange per step against applying the same Adam step in-process.
void RunExchange(const Options& o) {
  StatusOr<std::unique_ptr<ExampleModel>> model = MakeExampleModel("mlp", ModelOptions());
  if (!model.ok()) {
    std::cout << "  " << model.status() << std::endl;
    return;
  }
  Module& module = (*model)->module();
  const OptimizerSpec adam = Optimizer(OptimizerKind::kAdam);
  // The reference: Adam over every parameter with its state beside it, in this process.
  std::vector<std::vector<float>> state;
  int64_t floats = 0;
  for (const NamedParameter& np : module.NamedParameters()) {
    np.param->var.MutableGrad().Fill(1e-3f);
    state.emplace_back(2 * np.param->var.value().numel(), 0.0f);
    floats += np.param->var.value().numel();
  }
  int64_t step = 0;
  const double min_s = o.quick ? 0.2 : 0.6;
  const double t_local = BestSecondsPerCall(
      [&] {
        ++step;
        size_t k = 0;
        for (const NamedParameter& np : module.NamedParameters()) {
          const Tensor& v = np.param->var.value();
          ApplyUpdate(adam, v.f32(), np.param->var.grad().f32(), state[k++].data(), v.numel(), step);
        }
      },
      5, min_s);
  std::printf("  in-process Adam step over %lld floats: %.3f ms\n", static_cast<long long>(floats), t_local * 1e3);
  for (const DensePath path : o.Paths()) {
    PserverProcess ps;
    if (Status s = ps.Start("exchange", "", o.place); !s.ok()) {
      std::cout << "  " << s << std::endl;
      return;
    }
    auto connected = ConnectedClient(&module, adam, path, ps.address(), WireDtype::kFloat32, o.dense_link_lanes);
    if (!connected.ok()) {
      std::cout << "  connect: " << connected.status() << std::endl;
      return;
    }
    ParameterClient& client = **connected;
    Status error;
    const double t = BestSecondsPerCall(
        [&] {
          for (const NamedParameter& np : module.NamedParameters()) np.param->var.MutableGrad().Fill(1e-3f);
          if (Status s = client.PushAndPull(64, {}); !s.ok()) error = s;
        },
        5, min_s);
    if (!error.ok()) {
      std::cout << "  " << error << std::endl;
      continue;
    }
    ReportLine("PushAndPull over " + client.Transports()[0],
               t * 1e3, "ms", t_local * 1e3, "ms", "in-process Adam step", t / t_local);
  }
}

proto::InitRequest InitFor(Module& module, OptimizerKind kind) {
  proto::InitRequest req;
  for (const proto::ParamSpec& spec : ParamSpecsOf(module)) *req.add_params() = spec;
  *req.mutable_optimizer() = OptimizerToProto(Optimizer(kind));
  req.set_seed(1);
  return req;
}

Status Init(PserverProcess& ps, Module& module, OptimizerKind kind) {
  proto::InitResponse resp;
  auto ctx = rpc::MakeContext(std::chrono::seconds(60));
  return rpc::FromGrpc(ps.stub().Init(ctx.get(), InitFor(module, kind), &resp));
}

// A push of `ids` rows of `dim` into table "emb".
proto::PushRequest SparsePush(const std::vector<int64_t>& ids, int64_t dim) {
  proto::PushRequest req;
  req.set_num_samples(64);
  proto::SparseRowsMsg* rows = req.add_sparse();
  rows->set_table("emb");
  rows->set_dim(dim);
  std::vector<float> values(ids.size() * dim, 1e-3f);
  for (int64_t id : ids) rows->add_ids(id);
  SetFloats(rows->mutable_values(), values.data(), static_cast<int64_t>(values.size()));
  return req;
}

std::vector<int64_t> Ids(int64_t begin, int64_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = (begin + i) * 7919 + 13;  // distinct, scattered
  return ids;
}

void RunSparse(const Options& o, double stream_mbps) {
  const int64_t batch = 10000, batches = 10;
  for (int64_t dim : {8, 64}) {
    PserverProcess ps;
    if (Status s = ps.Start("sparse", "", o.place); !s.ok()) {
      std::cout << "  " << s << std::endl;
      return;
    }
    OneTable module(dim);
    if (Status s = Init(ps, module, OptimizerKind::kAdam); !s.ok()) {
      std::cout << "  init: " << s << std::endl;
      return;
    }
    std::vector<proto::PushRequest> pushes;
    std::vector<proto::PullRequest> pulls(batches);
    for (int64_t b = 0; b < batches; ++b) {
      pushes.push_back(SparsePush(Ids(b * batch, batch), dim));
      proto::SparseRowsMsg* rows = pulls[b].add_sparse();
      rows->set_table("emb");
      rows->set_dim(dim);
      for (int64_t id : Ids(b * batch, batch)) rows->add_ids(id);
    }
    Status error;
    int64_t next = 0;
    // Pushes first: they create the rows, so the pulls then read existing ones.
    const double min_s = o.quick ? 0.2 : 0.5;
    const double t_push = BestSecondsPerCall(
        [&] {
          proto::PushResponse resp;
          auto ctx = rpc::MakeContext(std::chrono::seconds(30));
          Status s = rpc::FromGrpc(ps.stub().Push(ctx.get(), pushes[next++ % batches], &resp));
          if (!s.ok()) error = s;
        },
        3, min_s);
    const double t_pull = BestSecondsPerCall(
        [&] {
          proto::PullResponse resp;
          auto ctx = rpc::MakeContext(std::chrono::seconds(30));
          Status s = rpc::FromGrpc(ps.stub().Pull(ctx.get(), pulls[next++ % batches], &resp));
          if (!s.ok()) error = s;
        },
        3, min_s);
    if (!error.ok()) {
      std::cout << "  sparse dim " << dim << ": " << error << std::endl;
      continue;
    }
    const double row_bytes = 8.0 + 4.0 * dim;  // id + values on the wire
    const double raw_rows = stream_mbps * 1e6 / row_bytes;
    const std::string d = "dim " + std::to_string(dim);
    ReportLine("sparse push 10k rows " + d + " (adam)", batch / t_push, "rows/s", raw_rows, "rows/s",
               "raw stream of id+values", batch / t_push / raw_rows);
    ReportLine("sparse pull 10k rows " + d, batch / t_pull, "rows/s", raw_rows, "rows/s", "raw stream of id+values",
               batch / t_pull / raw_rows);
  }
}

void RunMemory(const Options& o) {
  // Dense: Adam keeps 2 slots beside each value. A trainer over gRPC (the target), then
  // one on the same host, whose shared-memory region the pserver maps too.
  for (const bool shm : {false, true}) {
    const int64_t n = o.quick ? (4 << 20) : (16 << 20);  // floats
    PserverProcess ps;
    if (Status s = ps.Start("mem-dense", "", o.place); !s.ok()) {
      std::cout << "  " << s << std::endl;
      return;
    }
    auto before = ps.Stats();
    OneDense module(n);
    module.w.MutableGrad().Fill(1e-3f);
    ParameterClientOptions po;
    po.optimizer = Optimizer(OptimizerKind::kAdam);
    po.shared_memory = shm;
    po.dense_link_lanes = 0;  // the gRPC line is the target's; a link's region would add 2x the parameter
    const std::string address = ps.address();
    ParameterClient client(&module, po, [address]() -> StatusOr<std::vector<std::string>> {
      return std::vector<std::string>{address};
    });
    Status s = client.Connect();
    if (s.ok() && shm != (client.counters().shm_attaches > 0)) s = absl::InternalError("shared memory not as asked");
    auto after_init = ps.Stats();
    for (int i = 0; s.ok() && i < 3; ++i) {
      module.w.MutableGrad();
      s = client.Push(64);
      if (s.ok()) s = client.Pull({});
    }
    auto after = ps.Stats();
    // pl-pserver returns the message buffers of a burst once traffic pauses (1 s).
    absl::SleepFor(absl::Milliseconds(1600));
    auto at_rest = ps.Stats();
    if (!s.ok() || !before.ok() || !after.ok() || !after_init.ok() || !at_rest.ok()) {
      std::cout << "  dense memory: " << s << std::endl;
    } else if (shm) {
      const double raw = n * 4.0 * 3;
      const double region = static_cast<double>(after->shm_bytes());
      std::printf("  (the same with the trainer on this host: its shared region, %.1f MB, is mapped by both)\n",
                  region / 1e6);
      ReportLine("pserver rss right after 3 exchanges, shared memory", after->rss_bytes() / 1e6, "MB", raw / 1e6, "MB",
                 "raw value+2 slots", after->rss_bytes() / raw);
      ReportLine("  less the shared region", (after->rss_bytes() - region) / 1e6, "MB", raw / 1e6, "MB",
                 "raw value+2 slots", (after->rss_bytes() - region) / raw);
    } else {
      const double raw = n * 4.0 * 3;  // value + m + v
      std::printf("  (dense %lld floats, Adam: raw %.1f MB; pserver rss before init %.1f MB)\n",
                  static_cast<long long>(n), raw / 1e6, before->rss_bytes() / 1e6);
      ReportLine("pserver rss after init", after_init->rss_bytes() / 1e6, "MB", raw / 1e6, "MB", "raw value+2 slots",
                 after_init->rss_bytes() / raw);
      ReportLine("pserver rss right after 3 push+pull", after->rss_bytes() / 1e6, "MB", raw / 1e6, "MB",
                 "raw value+2 slots", after->rss_bytes() / raw);
      ReportLine("pserver rss 1.6 s later (traffic paused)", at_rest->rss_bytes() / 1e6, "MB", raw / 1e6, "MB",
                 "raw value+2 slots", at_rest->rss_bytes() / raw);
      ReportLine("  growth over the empty process", (after->rss_bytes() - before->rss_bytes()) / 1e6, "MB", raw / 1e6,
                 "MB", "raw value+2 slots", (after->rss_bytes() - before->rss_bytes()) / raw);
    }
  }
  // Sparse: rss growth per stored row.
  for (int64_t dim : {8, 64}) {
    const int64_t rows = o.quick ? 200000 : 1000000, batch = 10000;
    PserverProcess ps;
    if (Status s = ps.Start("mem-sparse", "", o.place); !s.ok()) {
      std::cout << "  " << s << std::endl;
      return;
    }
    OneTable module(dim);
    Status s = Init(ps, module, OptimizerKind::kAdam);
    auto before = ps.Stats();
    for (int64_t b = 0; s.ok() && b < rows / batch; ++b) {
      proto::PushRequest req = SparsePush(Ids(b * batch, batch), dim);
      proto::PushResponse resp;
      auto ctx = rpc::MakeContext(std::chrono::seconds(30));
      s = rpc::FromGrpc(ps.stub().Push(ctx.get(), req, &resp));
    }
    auto after = ps.Stats();
    if (!s.ok() || !before.ok() || !after.ok()) {
      std::cout << "  sparse memory: " << s << std::endl;
      continue;
    }
    const double per_row = double(after->rss_bytes() - before->rss_bytes()) / after->sparse_rows();
    const double raw = 8 + 4.0 * dim * 3 + 8;  // id, value + m + v, step count
    ReportLine("pserver rss per sparse row, dim " + std::to_string(dim) + " (" + std::to_string(after->sparse_rows()) +
                   " rows)",
               per_row, "B/row", raw, "B/row", "raw id+value+2 slots+step", per_row / raw);
  }
}

int Main(int argc, char** argv) {
  KeepLargeBuffersInHeap();  // as pl-trainer does: the client side is the trainer's
  SkipMutexDeadlockChecks();
  const cli::Program program = {
      "pl-bench-ps", "[--quick] [--only loopback,apply,dense,exchange,sparse,memory] [--bed]",
      "What one real pl-pserver process moves and holds, each figure as a ratio against a\n"
      "reference measured in the same run (see benchmarks/README.md). Loopback always runs."};
  cli::ParseOrExit(program, argc, argv);
  Options o;
  o.quick = absl::GetFlag(FLAGS_quick);
  o.dense_link_lanes = absl::GetFlag(FLAGS_dense_link_lanes);
  o.only = OnlyParts(program, absl::GetFlag(FLAGS_only), {"loopback", "apply", "dense", "exchange", "sparse", "memory"});
  std::unique_ptr<netbed::TestBed> bed;
  if (absl::GetFlag(FLAGS_bed)) {
    if (Status supported = netbed::TestBed::CheckSupported(); !supported.ok()) {
      cli::ExitWithUsageError(program, absl::StrCat("--bed: ", supported.message()));
    }
    StatusOr<std::unique_ptr<netbed::TestBed>> made = netbed::TestBed::Create(1);
    if (!made.ok()) cli::ExitWithUsageError(program, absl::StrCat("--bed: ", made.status().message()));
    bed = std::move(*made);
    netbed::TestBed* b = bed.get();
    o.place.address = b->host(0).address();
    o.place.start = [b](const std::vector<std::string>& argv, const std::string& log) { return b->Start(0, argv, log); };
    o.bed_socket = [b] { return b->Socket(0, SOCK_STREAM); };
  }
  std::printf("pl-bench-ps: load average at start %s\n", LoadAverage().c_str());
  const std::string where = o.bed_socket ? "between this process and test-bed host " + o.place.address : "loopback";
  Header("Raw TCP, " + where + " (the reference)");
  const double stream = RawStreamMBps(o, 64u << 20, o.quick ? 3 : 5);
  std::printf("  raw %s stream, 64 MB x %d (best): %.0f MB/s\n", where.c_str(), o.quick ? 3 : 5, stream);
  if (o.Want("apply")) {
    Header("A pserver applying one Adam push, in process (pl-pserver --apply_threads)");
    RunApplyBenchmark(o.quick);
  }
  if (o.Want("dense")) {
    Header("Dense push+pull through pl-pserver (ParameterClient), MB/s = 2*size/time");
    RunDense(o, stream);
  }
  if (o.Want("exchange")) {
    Header("One step's parameter exchange of the mlp model (2.1 MB, Adam), per step");
    RunExchange(o);
  }
  if (o.Want("sparse")) {
    Header("Sparse rows through pl-pserver (batches of 10k distinct ids)");
    RunSparse(o, stream);
  }
  if (o.Want("memory")) {
    Header("pserver memory vs raw bytes");
    RunMemory(o);
  }
  std::printf("\nload average at end %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace pl::bench

int main(int argc, char** argv) { return pl::bench::Main(argc, argv); }
