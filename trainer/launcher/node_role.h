// A node's share of a job that pl-launch runs on several machines (--nnodes N > 1):
// which pservers and trainer ranks this node runs, the address its pservers advertise,
// and the check that every node was started for the same job shape.
//
// Layout of a job of N nodes with P pservers and T trainers per node:
//   node 0          the master, listening on 0.0.0.0 at the port of --master_addr;
//                   with K masters (--master_addr A,B,C) nodes 0..K-1 each run one, and
//                   an etcd member (--etcd_port, and the port after it for its peers);
//   node R          pservers R*P .. R*P+P-1 (of N*P), listening on 0.0.0.0 and
//                   registered with the master as <node address>:<port>;
//                   with --replicas K, copy k of pserver i (whose home is node i/P)
//                   runs on node (i/P + k) mod N, so the copies of a shard share no
//                   machine while K <= N;
//                   trainers R*T .. R*T+T-1 at start; the j-th trainer added on node R
//                   (control FIFO or --add_trainer_after_s, j = 0, 1, ...) gets rank
//                   N*T + j*N + R, so ranks never collide across nodes. With N = 1 this
//                   is 0 .. T-1 and then T, T+1, ..., as on one machine.
//
// Thread-safety: plain functions of their arguments (LocalAddressTowards makes one
// socket); safe from any thread.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_NODE_ROLE_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_NODE_ROLE_H_

#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "proto/master.pb.h"

namespace pl {

struct HostPort {
  std::string host;
  int port = 0;
};

// "HOST:PORT" with a non-empty HOST (no brackets, IPv4 or a name) and PORT in
// [1, 65535]. INVALID_ARGUMENT naming `flag` otherwise.
StatusOr<HostPort> ParseHostPort(const std::string& flag, const std::string& value);

// --master_addr: one HOST:PORT (node 0 runs the master), or a list of K >= 3 of them
// for a job that outlives any one master node: nodes 0..K-1 each run a master and an
// etcd member at those hosts, one master leads and the others stand by (K = 2 is
// refused: etcd needs a majority, and two members survive the loss of neither). The
// hosts must differ; K <= num_nodes. INVALID_ARGUMENT naming what is wrong.
StatusOr<std::vector<HostPort>> ParseMasterAddrs(const std::string& value, int num_nodes);

// The rank of the k-th trainer (k = 0, 1, ...) that node `node_rank` of `num_nodes`
// starts, with `trainers_per_node` started at once (see the file comment).
int TrainerRank(int num_nodes, int node_rank, int trainers_per_node, int k);

// One process of a shard that a node runs: copy `replica` (0 .. replicas-1) of
// pserver `index`.
struct ShardCopy {
  int index = 0;
  int replica = 0;
};

// The node that runs copy `replica` of pserver `index` (see the file comment).
int NodeOfShardCopy(int num_nodes, int pservers_per_node, int index, int replica);

// Every copy that node `node_rank` runs, by pserver index, then copy.
std::vector<ShardCopy> ShardCopiesOnNode(int num_nodes, int node_rank, int pservers_per_node, int replicas);

// The IPv4 address of this machine's interface that routes to `host` (a name or an
// IPv4 address): a UDP socket connect()ed to host:port, then getsockname(); no packet
// is sent. UNAVAILABLE naming the host when it does not resolve or has no route.
StatusOr<std::string> LocalAddressTowards(const std::string& host, int port);

// True for 127.0.0.0/8 (other machines cannot reach a loopback address).
bool IsLoopbackAddress(const std::string& ipv4);

// What every node of a job must agree on.
struct JobShape {
  int num_nodes = 1;
  int pservers_per_node = 1;
  int replicas = 1;
};

// OK when the job's master was started for the same shape as this node. A master that
// does not report num_nodes (0) counts as 1; one that does not report the pservers or
// replicas (an older build) is not checked on them. FAILED_PRECONDITION naming both
// values otherwise, e.g. "--nnodes 3 on this node, but the job's master (node 0) was
// started with --nnodes 2".
Status CheckJobNodes(const JobShape& shape, const proto::JobStatusResponse& status);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_NODE_ROLE_H_
