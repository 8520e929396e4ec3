// SkipMutexDeadlockChecks: each case runs in a forked child, since abseil's detection
// mode is process-wide and an inverted lock order aborts a process that checks.
#include "paddle_like/core/runtime.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace pl {
namespace {

// Locks two mutexes in one order, then in the other: a potential deadlock that
// abseil's detector (when on) reports by aborting.
void InvertLockOrder() {
  absl::Mutex a, b;
  {
    absl::MutexLock la(&a);
    absl::MutexLock lb(&b);
  }
  absl::MutexLock lb(&b);
  absl::MutexLock la(&a);
}

// How a child that sets PL_MUTEX_DEADLOCK_CHECKS to `env` (nullptr: unset), calls
// SkipMutexDeadlockChecks when `skip`, then inverts a lock order, ends: true if it
// exited 0, false if it was killed (abort).
bool ChildSurvivesInversion(const char* env, bool skip) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (env == nullptr) {
      unsetenv("PL_MUTEX_DEADLOCK_CHECKS");
    } else {
      setenv("PL_MUTEX_DEADLOCK_CHECKS", env, 1);
    }
    if (skip) SkipMutexDeadlockChecks();
    InvertLockOrder();
    _exit(0);
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(SkipMutexDeadlockChecksTest, TurnsOffTheDetectorUnlessTheEnvironmentKeepsIt) {
  if (ChildSurvivesInversion(nullptr, /*skip=*/false)) {
    GTEST_SKIP() << "this abseil does not check lock order (built with NDEBUG): nothing to turn off";
  }
  EXPECT_TRUE(ChildSurvivesInversion(nullptr, /*skip=*/true));
  EXPECT_TRUE(ChildSurvivesInversion("0", /*skip=*/true));
  EXPECT_FALSE(ChildSurvivesInversion("1", /*skip=*/true));
}

}  // namespace
}  // namespace pl
