// pl-pserver-faulty: pl-pserver (the same flags, the same process) with an Env whose
// faults come from PL_TEST_* environment variables, for the integration tests that need
// a rare schedule to happen every time (tests/dist/replication_test.cc,
// replica_stream_link_test.cc). The product's pl-pserver reads none of them.
//
//   PL_TEST_DIE_AFTER_ACKED_UPDATES=N  PL_TEST_DIE_ONCE_FILE=PATH   (Faults::die_after_acked_updates)
//   PL_TEST_SLOW_JOINER_MS  PL_TEST_SLOW_STREAM_CALL_MS  PL_TEST_SLOW_APPLY_MS  PL_TEST_ATTACH_DELAY_MS
//   PL_TEST_SNAPSHOT_PIECE_BYTES  PL_TEST_SCRIBBLE_LENT_PUSHES
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "paddle_like/core/runtime.h"
#include "pserver/pserver_main.h"

namespace {

class FaultyEnv : public pl::pserver::Env {
 public:
  explicit FaultyEnv(pl::pserver::Faults faults) : faults_(std::move(faults)) {}
  const pl::pserver::Faults& faults() const override { return faults_; }

 private:
  const pl::pserver::Faults faults_;
};

// The variable's integer value; 0 when unset. A value that is not an integer ends the
// process: a test that meant a fault must not run without it.
int64_t IntVar(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  int64_t n = 0;
  if (!absl::SimpleAtoi(v, &n)) {
    std::fprintf(stderr, "pl-pserver-faulty: %s='%s' is not an integer\n", name, v);
    std::exit(2);
  }
  return n;
}

pl::pserver::Faults FaultsFromEnvironment() {
  pl::pserver::Faults f;
  f.die_after_acked_updates = IntVar("PL_TEST_DIE_AFTER_ACKED_UPDATES");
  if (const char* once = std::getenv("PL_TEST_DIE_ONCE_FILE")) f.die_once_file = once;
  f.slow_joiner = absl::Milliseconds(IntVar("PL_TEST_SLOW_JOINER_MS"));
  f.slow_stream_call = absl::Milliseconds(IntVar("PL_TEST_SLOW_STREAM_CALL_MS"));
  f.slow_apply = absl::Milliseconds(IntVar("PL_TEST_SLOW_APPLY_MS"));
  f.attach_delay = absl::Milliseconds(IntVar("PL_TEST_ATTACH_DELAY_MS"));
  f.snapshot_piece_bytes = IntVar("PL_TEST_SNAPSHOT_PIECE_BYTES");
  f.scribble_settled_loans = std::getenv("PL_TEST_SCRIBBLE_LENT_PUSHES") != nullptr;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  pl::KeepLargeBuffersInHeap();
  pl::SkipMutexDeadlockChecks();
  static FaultyEnv env(FaultsFromEnvironment());
  return pl::pserver::PserverMain(argc, argv, &env);
}
