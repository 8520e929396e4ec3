// pl-bench-tls: what mutual TLS (paddle_like/rpc/tls.h) costs, against references
// measured in the same run.
//
//   Cipher        AES-128-GCM (what TLS 1.3 negotiates first) sealing and opening the
//                 mlp exchange's bytes in this process with OpenSSL: GB/s. A push + pull
//                 over TLS seals and opens both messages once each, so 4 x bytes /
//                 this rate is the least time TLS can add to one exchange on one core.
//   Exchange      one training step's parameter exchange of the `mlp` (Adam) through
//                 ParameterClient::PushAndPull to a real pl-pserver, insecure and with
//                 mutual TLS alternately (rounds), over gRPC, over a dense link (as
//                 from another host) and through shared memory: TLS / insecure, and
//                 the time TLS adds / the cipher's least.
//   Handshake     a fresh channel's first call (connect, handshake, one Stats), TLS /
//                 insecure, median of 15.
//
//   pl-bench-tls [--rounds 3]
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <vector>

#include "absl/flags/flag.h"
#include "benchmarks/bench_util.h"
#include "benchmarks/pserver_process.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/tls.h"
#include "trainer/models.h"

ABSL_FLAG(int, rounds, 3, "alternating insecure/TLS rounds of the exchange (>= 1)");

namespace pl::bench {
namespace {

// Seconds to seal (encrypt + tag) and open (decrypt + verify) `bytes` once each.
double AesGcmSealAndOpenSeconds(size_t bytes) {
  std::vector<unsigned char> plain(bytes, 0x5a), sealed(bytes + 16), opened(bytes);
  unsigned char key[16] = {1}, iv[12] = {2}, tag[16];
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  auto once = [&] {
    int n = 0;
    EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key, iv);
    EVP_EncryptUpdate(ctx, sealed.data(), &n, plain.data(), static_cast<int>(bytes));
    EVP_EncryptFinal_ex(ctx, sealed.data() + n, &n);
    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag);
    EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key, iv);
    EVP_DecryptUpdate(ctx, opened.data(), &n, sealed.data(), static_cast<int>(bytes));
    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag);
    EVP_DecryptFinal_ex(ctx, opened.data() + n, &n);
  };
  const double t = BestSecondsPerCall(once, 5, 0.3);
  EVP_CIPHER_CTX_free(ctx);
  return t;
}

struct Job {
  testing::TempDir dir{"pl-bench-tls"};
  Status MakeCertificates() {
    PL_RETURN_IF_ERROR(rpc::EnsureJobCa(dir.path(), "pl-bench-tls"));
    PL_RETURN_IF_ERROR(rpc::IssueCertificate(dir.path(), "pserver-0"));
    return rpc::IssueCertificate(dir.path(), "trainer");
  }
  // This process as the job's trainer (TLS) or with no transport security.
  Status UseTls(bool tls) {
    if (!tls) {
      rpc::UseInsecureTransport();
      return absl::OkStatus();
    }
    return rpc::ConfigureTransportSecurity(dir.path() + "/trainer");
  }
  std::string PserverTlsDir(bool tls) const { return tls ? dir.path() + "/pserver-0" : ""; }
};

// Best seconds per PushAndPull of `module` to a fresh pserver.
StatusOr<double> ExchangeSeconds(Job& job, Module& module, bool tls, DensePath path) {
  PL_RETURN_IF_ERROR(job.UseTls(tls));
  PserverProcess ps;
  PL_RETURN_IF_ERROR(ps.Start(tls ? "tls" : "insecure", job.PserverTlsDir(tls)));
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 1e-3f;
  PL_ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client, ConnectedClient(&module, adam, path, ps.address()));
  Status error;
  const double t = BestSecondsPerCall(
      [&] {
        for (const NamedParameter& np : module.NamedParameters()) np.param->var.MutableGrad().Fill(1e-3f);
        if (Status s = client->PushAndPull(64, {}); !s.ok()) error = s;
      },
      5, 0.6);
  PL_RETURN_IF_ERROR(error);
  return t;
}

// Median seconds from making a channel to its first answered call.
StatusOr<double> FirstCallSeconds(Job& job, bool tls) {
  PL_RETURN_IF_ERROR(job.UseTls(tls));
  PserverProcess ps;
  PL_RETURN_IF_ERROR(ps.Start(tls ? "handshake-tls" : "handshake", job.PserverTlsDir(tls)));
  PL_RETURN_IF_ERROR(ps.Stats().status());  // the server is up
  std::vector<double> times;
  for (int i = 0; i < 15; ++i) {
    const double start = NowSeconds();
    auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(ps.address()));
    proto::StatsResponse r;
    PL_RETURN_IF_ERROR(rpc::FromGrpc(
        stub->Stats(rpc::MakeContext(std::chrono::seconds(10), /*wait_for_ready=*/true).get(), {}, &r)));
    times.push_back(NowSeconds() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int Main(int argc, char** argv) {
  KeepLargeBuffersInHeap();  // as pl-trainer does
  SkipMutexDeadlockChecks();
  const cli::Program program = {"pl-bench-tls", "[--rounds 3]",
                                "What mutual TLS costs: the mlp's exchange and a connection's first call with and\n"
                                "without it, against the cipher's own speed measured in the same run."};
  cli::ParseOrExit(program, argc, argv);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  cli::CheckOrExit(program, {cli::CheckAtLeast("rounds", rounds, 1)});
  std::printf("pl-bench-tls: load average at start %s\n", LoadAverage().c_str());
  Job job;
  if (Status s = job.MakeCertificates(); !s.ok()) {
    std::cout << "certificates: " << s << std::endl;
    return 1;
  }
  StatusOr<std::unique_ptr<ExampleModel>> model = MakeExampleModel("mlp", ModelOptions());
  if (!model.ok()) {
    std::cout << model.status() << std::endl;
    return 1;
  }
  Module& module = (*model)->module();
  int64_t floats = 0;
  for (const NamedParameter& np : module.NamedParameters()) floats += np.param->var.value().numel();
  const size_t bytes = static_cast<size_t>(floats) * 4;

  Header("The cipher (the reference)");
  const double seal_open = AesGcmSealAndOpenSeconds(bytes);
  std::printf("  AES-128-GCM seal + open of %.2f MB in this process: %.3f ms (%.2f GB/s each way)\n", bytes / 1e6,
              seal_open * 1e3, 2 * bytes / seal_open / 1e9);
  const double floor_s = 2 * seal_open;  // push and pull: each message sealed and opened once

  Header("One step's exchange of the mlp (Adam), best per round, rounds alternate");
  for (const DensePath dense : {DensePath::kGrpc, DensePath::kDenseLink, DensePath::kSharedMemory}) {
    std::map<bool, double> best = {{false, 1e300}, {true, 1e300}};
    for (int r = 0; r < rounds; ++r) {
      for (const bool tls : {false, true}) {
        StatusOr<double> t = ExchangeSeconds(job, module, tls, dense);
        if (!t.ok()) {
          std::cout << "  " << (tls ? "TLS" : "insecure") << ": " << t.status() << std::endl;
          return 1;
        }
        std::printf("  round %d %-26s %.3f ms\n", r + 1,
                    (std::string(tls ? "TLS" : "insecure") + ", " + DensePathName(dense)).c_str(), *t * 1e3);
        best[tls] = std::min(best[tls], *t);
      }
    }
    const std::string path = DensePathName(dense);
    ReportLine("exchange with TLS, " + path, best[true] * 1e3, "ms", best[false] * 1e3, "ms", "insecure",
               best[true] / best[false]);
    if (dense != DensePath::kSharedMemory) {
      const double added = best[true] - best[false];
      ReportLine("time TLS adds, " + path, added * 1e3, "ms", floor_s * 1e3, "ms", "AES-GCM of both messages",
                 added / floor_s);
    }
  }

  Header("A new connection's first call (median of 15)");
  StatusOr<double> plain = FirstCallSeconds(job, false);
  StatusOr<double> secure = FirstCallSeconds(job, true);
  if (!plain.ok() || !secure.ok()) {
    std::cout << "  " << (plain.ok() ? secure.status() : plain.status()) << std::endl;
    return 1;
  }
  ReportLine("connect + handshake + Stats, TLS", *secure * 1e3, "ms", *plain * 1e3, "ms", "insecure",
             *secure / *plain);
  std::printf("\nload average at end %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace pl::bench

int main(int argc, char** argv) { return pl::bench::Main(argc, argv); }
