// Status and StatusOr for paddle_like: abseil's canonical-code statuses, so that an
// error crosses a gRPC boundary unchanged. Library code returns these; only a
// process's main turns one into an exit code (one line on stderr, non-zero status).
//
//   PL_RETURN_IF_ERROR(file.Flush());
//   PL_ASSIGN_OR_RETURN(Tensor t, reader.Next());
#ifndef PADDLE_LIKE_CORE_STATUS_H_
#define PADDLE_LIKE_CORE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pl {

using Status = absl::Status;
template <typename T>
using StatusOr = absl::StatusOr<T>;

// Returns `status` with `context: ` put in front of its message, same code.
inline Status Annotate(const Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace pl

#define PL_STATUS_CONCAT_INNER(a, b) a##b
#define PL_STATUS_CONCAT(a, b) PL_STATUS_CONCAT_INNER(a, b)

#define PL_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::pl::Status pl_status_ = (expr);         \
    if (!pl_status_.ok()) return pl_status_;  \
  } while (0)

#define PL_ASSIGN_OR_RETURN(lhs, expr) \
  PL_ASSIGN_OR_RETURN_IMPL(PL_STATUS_CONCAT(pl_statusor_, __LINE__), lhs, expr)
#define PL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#endif  // PADDLE_LIKE_CORE_STATUS_H_
