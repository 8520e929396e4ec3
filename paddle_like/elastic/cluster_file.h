// The cluster file pl-autoscale reads (proto/elastic.proto, protobuf text format): read
// and checked as a whole, so a bad edit never half-applies.
//
// Thread-safety: free functions, no shared state.
#ifndef PADDLE_LIKE_ELASTIC_CLUSTER_FILE_H_
#define PADDLE_LIKE_ELASTIC_CLUSTER_FILE_H_

#include <string>

#include "paddle_like/core/status.h"
#include "proto/elastic.pb.h"

namespace pl::elastic {

// Parses `text`; INVALID_ARGUMENT with one line naming the field (and the line for a
// syntax error): slots below 0, reserved_slots outside 0..slots, a job without a name
// or master, a repeated name, a master that is not HOST:PORT, bounds the policy refuses.
StatusOr<proto::ElasticCluster> ParseCluster(const std::string& text);
// Reads and parses `path`; NOT_FOUND when it cannot be read. Errors start with the path.
StatusOr<proto::ElasticCluster> ReadClusterFile(const std::string& path);

}  // namespace pl::elastic

#endif  // PADDLE_LIKE_ELASTIC_CLUSTER_FILE_H_
