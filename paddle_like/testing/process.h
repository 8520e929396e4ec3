// The process-control helpers (paddle_like/process/process_control.h) under the
// pl::testing names the integration tests use.
#ifndef PADDLE_LIKE_TESTS_TESTING_PROCESS_H_
#define PADDLE_LIKE_TESTS_TESTING_PROCESS_H_

#include <cstdlib>
#include <string>

#include "paddle_like/process/process_control.h"

namespace pl::testing {
using namespace ::pl::process;  // NOLINT(build/namespaces): one vocabulary for the tests

// PL_BIN_DIR/<name> (PL_BIN_DIR is set for every test by pl_add_test). NOT_FOUND
// naming the path when it is not an executable file, FAILED_PRECONDITION when
// PL_BIN_DIR is unset.
inline StatusOr<std::string> BinaryPath(const std::string& name) {
  const char* dir = std::getenv("PL_BIN_DIR");
  if (dir == nullptr || *dir == '\0') {
    return absl::FailedPreconditionError("PL_BIN_DIR is not set (tests get it from pl_add_test)");
  }
  return ExecutableIn(dir, name);
}
}  // namespace pl::testing

#endif  // PADDLE_LIKE_TESTS_TESTING_PROCESS_H_
