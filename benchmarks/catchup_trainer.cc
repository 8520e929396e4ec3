// pl-bench-catchup-trainer: the trainer of bench_replication.py's catch-up measurement,
// started by pl-launch in place of pl-trainer.
//
// It holds one dense Linear(D, D) (D = $BENCH_CATCHUP_DIM, default 7168: 205 MB of
// parameters) on a single replicated pserver with SGD (no optimizer state, so the shard
// is the parameters; learning rate 1e-9, the values barely move) and pulls and pushes
// all of it, step after step, until SIGTERM. The benchmark kills the shard's primary
// meanwhile; the restarted process then copies the whole shard while these steps go on.
// Not a training job: it never takes the master's tasks (the benchmark ends the job).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "paddle_like/client/heartbeat.h"
#include "paddle_like/client/master_client.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/nn/nn.h"
#include "paddle_like/rpc/tls.h"
#include "paddle_like/core/runtime.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

class OneLayer : public pl::Module {
 public:
  explicit OneLayer(int64_t dim) : Module("OneLayer") {
    fc = RegisterModule("fc", std::make_shared<pl::Linear>(dim, dim));
  }
  std::shared_ptr<pl::Linear> fc;
};

int Fail(const std::string& why) {
  std::fprintf(stderr, "pl-bench-catchup-trainer: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: pl-bench-catchup-trainer   (no flags; started by pl-launch for bench_replication.py)\n"
          "Holds one dense Linear(D, D) (D = $BENCH_CATCHUP_DIM, default 7168) on a replicated pserver and pulls\n"
          "and pushes all of it until SIGTERM, so a restarted replica catches up under load. Reads\n"
          "PL_MASTER_ADDR and PL_TLS_DIR like every trainer.\n");
      return 0;
    }
    return Fail(absl::StrCat("unknown argument '", arg, "' (it takes none; --help)"));
  }
  pl::SkipMutexDeadlockChecks();
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  const char* master_addr = std::getenv("PL_MASTER_ADDR");
  if (master_addr == nullptr) return Fail("PL_MASTER_ADDR is not set (start it with pl-launch)");
  const char* dim_env = std::getenv("BENCH_CATCHUP_DIM");
  const int64_t dim = dim_env != nullptr ? std::atoll(dim_env) : 7168;
  if (dim <= 0) return Fail("BENCH_CATCHUP_DIM must be a positive integer");
  // The job's mutual TLS: pl-launch hands every trainer its certificates this way.
  if (const char* tls = std::getenv("PL_TLS_DIR"); tls != nullptr && *tls != '\0') {
    if (pl::Status s = pl::rpc::ConfigureTransportSecurity(tls); !s.ok()) return Fail(std::string(s.message()));
  }

  OneLayer model(dim);
  model.InitParameters(1);
  model.fc->weight().MutableGrad();  // a push sends every gradient: define them once
  model.fc->bias().MutableGrad();
  pl::MasterClient master(master_addr, "catchup-trainer", absl::Minutes(2));
  auto reg = master.Register();
  if (!reg.ok()) return Fail(std::string(reg.status().message()));
  pl::HeartbeatThread heartbeat(&master);
  const int num_pservers = reg->num_pservers();
  pl::ParameterClientOptions o;
  o.num_pservers = num_pservers;
  o.optimizer.kind = pl::OptimizerKind::kSGD;
  o.optimizer.learning_rate = 1e-9f;
  o.seed = 1;
  o.give_up_after = absl::Minutes(2);
  pl::ParameterClient params(
      &model, o, [&master, num_pservers] { return master.PserverAddresses(num_pservers); }, &g_stop);
  params.set_trainer_id(master.trainer_id());
  if (pl::Status s = params.Connect(); !s.ok()) return Fail(std::string(s.message()));
  std::printf("catch-up trainer: %.0f MB of parameters on the shard\n", dim * (dim + 1) * 4 / 1e6);
  std::fflush(stdout);
  int64_t steps = 0;
  absl::Time last = absl::Now();
  while (!g_stop) {
    pl::Status s = params.Pull({});
    if (s.ok()) s = params.Push(1);
    if (!s.ok()) {
      if (g_stop) break;
      return Fail(std::string(s.message()));
    }
    ++steps;
    if (absl::Now() - last >= absl::Seconds(2)) {
      std::printf("catch-up trainer: %lld steps\n", static_cast<long long>(steps));
      std::fflush(stdout);
      last = absl::Now();
    }
  }
  return 0;
}
