#include "trainer/launcher/node_role.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pl {

StatusOr<HostPort> ParseHostPort(const std::string& flag, const std::string& value) {
  const size_t colon = value.rfind(':');
  HostPort hp;
  if (colon == std::string::npos || colon == 0 || value.find(':') != colon ||
      !absl::SimpleAtoi(value.substr(colon + 1), &hp.port) || hp.port < 1 || hp.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", value, "' is not HOST:PORT with a port in [1, 65535]"));
  }
  hp.host = value.substr(0, colon);
  return hp;
}

StatusOr<std::vector<HostPort>> ParseMasterAddrs(const std::string& value, int num_nodes) {
  std::vector<HostPort> out;
  for (absl::string_view entry : absl::StrSplit(value, ',')) {
    PL_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort("master_addr", std::string(absl::StripAsciiWhitespace(entry))));
    for (const HostPort& seen : out) {
      if (seen.host == hp.host) {
        return absl::InvalidArgumentError(absl::StrCat("--master_addr: host ", hp.host,
                                                       " appears twice: each master runs on a node of its own"));
      }
    }
    out.push_back(std::move(hp));
  }
  if (out.size() == 2) {
    return absl::InvalidArgumentError(
        "--master_addr: 2 masters survive the loss of neither (their etcd needs a majority of its members): give "
        "one, or 3 or more");
  }
  if (static_cast<int>(out.size()) > num_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("--master_addr names ", out.size(), " masters but the job has ",
                                                   num_nodes, " nodes (--nnodes): nodes 0..K-1 run them"));
  }
  return out;
}

int TrainerRank(int num_nodes, int node_rank, int trainers_per_node, int k) {
  if (k < trainers_per_node) return node_rank * trainers_per_node + k;
  return num_nodes * trainers_per_node + (k - trainers_per_node) * num_nodes + node_rank;
}

StatusOr<std::string> LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve '", host, "' to an IPv4 address: ", gai_strerror(rc)));
  }
  const sockaddr_in target = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in local = {};
  socklen_t len = sizeof(local);
  Status result = absl::OkStatus();
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
    result = absl::UnavailableError(absl::StrCat("no route to '", host, "': ", std::strerror(errno)));
  } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    result = absl::UnavailableError(absl::StrCat("getsockname: ", std::strerror(errno)));
  }
  ::close(fd);
  if (!result.ok()) return result;
  char text[INET_ADDRSTRLEN] = {};
  if (::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) == nullptr) {
    return absl::UnavailableError(absl::StrCat("inet_ntop: ", std::strerror(errno)));
  }
  return std::string(text);
}

bool IsLoopbackAddress(const std::string& ipv4) {
  in_addr a = {};
  return ::inet_pton(AF_INET, ipv4.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int NodeOfShardCopy(int num_nodes, int pservers_per_node, int index, int replica) {
  return (index / pservers_per_node + replica) % num_nodes;
}

std::vector<ShardCopy> ShardCopiesOnNode(int num_nodes, int node_rank, int pservers_per_node, int replicas) {
  std::vector<ShardCopy> copies;
  for (int index = 0; index < num_nodes * pservers_per_node; ++index) {
    for (int replica = 0; replica < replicas; ++replica) {
      if (NodeOfShardCopy(num_nodes, pservers_per_node, index, replica) == node_rank) {
        copies.push_back({index, replica});
      }
    }
  }
  return copies;
}

Status CheckJobNodes(const JobShape& shape, const proto::JobStatusResponse& status) {
  const int job_nodes = status.num_nodes() > 0 ? status.num_nodes() : 1;
  if (job_nodes != shape.num_nodes) {
    return absl::FailedPreconditionError(absl::StrCat("--nnodes ", shape.num_nodes,
                                                      " on this node, but the job's master (node 0) was started "
                                                      "with --nnodes ",
                                                      job_nodes));
  }
  if (status.num_pservers() > 0 && status.num_pservers() != shape.num_nodes * shape.pservers_per_node) {
    return absl::FailedPreconditionError(
        absl::StrCat("--pservers ", shape.pservers_per_node, " on this node, but the job's master (node 0) was "
                     "started for ", status.num_pservers(), " pservers in all (--pservers ",
                     status.num_pservers() / job_nodes, " on each of the ", job_nodes, " nodes)"));
  }
  if (status.replicas() > 0 && status.replicas() != shape.replicas) {
    return absl::FailedPreconditionError(absl::StrCat("--replicas ", shape.replicas,
                                                      " on this node, but the job's master (node 0) was started "
                                                      "with --replicas ",
                                                      status.replicas()));
  }
  return absl::OkStatus();
}

}  // namespace pl
