// Length limits on the strings of every request a server takes: a name is at most
// kMaxNameBytes, free text (a failure's reason, an optimizer's settings, a path) at
// most kMaxTextBytes. Without them one call can make a server keep, copy into its
// state and log megabytes per name (a 1 MB trainer name made the master rewrite
// 9.4 MB of state per call). Bytes fields (tensor values) are not strings and are
// bounded by the message size limit and the servers' own checks.
//
// Thread-safety: stateless.
#ifndef PADDLE_LIKE_RPC_REQUEST_LIMITS_H_
#define PADDLE_LIKE_RPC_REQUEST_LIMITS_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "paddle_like/core/status.h"

namespace pl::rpc {

inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxTextBytes = 4096;

// OK, or INVALID_ARGUMENT naming the first string field (its path in the message, e.g.
// "dense[3].param") longer than its limit, with both lengths. Walks nested messages.
Status CheckStringLengths(const google::protobuf::Message& request);
// The same refusal for one name carried outside a message (a dense frame's payloads),
// `path` naming where it was.
Status CheckNameLength(absl::string_view path, absl::string_view name);

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_REQUEST_LIMITS_H_
