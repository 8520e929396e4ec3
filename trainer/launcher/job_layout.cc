#include "trainer/launcher/job_layout.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pl {

// A port file holds the port in decimal. A writer that is not atomic may be caught
// half-way, so the value is only trusted when two reads a moment apart agree.
int ReadPortFile(const std::string& path) {
  auto read_once = [&]() -> int {
    std::ifstream in(path);
    if (!in) return 0;
    std::stringstream ss;
    ss << in.rdbuf();
    int port = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ss.str()), &port)) return 0;
    return (port > 0 && port < 65536) ? port : 0;
  };
  int first = read_once();
  if (first == 0) return 0;
  ::usleep(10000);
  return read_once() == first ? first : 0;
}

std::vector<ShardCopy> JobLayout::LocalCopies() const {
  return ShardCopiesOnNode(options_->num_nodes, options_->node_rank, options_->num_pservers, options_->replicas);
}

std::vector<int> JobLayout::LocalPservers() const {
  std::vector<int> out;
  for (const ShardCopy& copy : LocalCopies()) {
    if (out.empty() || out.back() != copy.index) out.push_back(copy.index);
  }
  return out;
}

std::string JobLayout::PserverName(const ShardCopy& copy) const {
  if (options_->replicas <= 1) return absl::StrCat("pserver-", copy.index);
  return absl::StrCat("pserver-", copy.index, ".", copy.replica);
}

std::vector<std::string> JobLayout::PserverNames(int index) const {
  std::vector<std::string> names;
  for (const ShardCopy& copy : LocalCopies()) {
    if (copy.index == index) names.push_back(PserverName(copy));
  }
  return names;
}

std::string JobLayout::CheckpointDir(const std::string& pserver_name) const {
  return absl::StrCat(workdir_, "/pservers/", pserver_name.substr(std::string("pserver-").size()));
}

std::string JobLayout::PortFile(const std::string& name) const { return absl::StrCat(workdir_, "/ports/", name, ".port"); }

std::string JobLayout::ReplicaIdFile(const std::string& name) const {
  return absl::StrCat(workdir_, "/ports/", name, ".replica");
}

std::string JobLayout::TrainerIdFile(const std::string& name) const {
  return absl::StrCat(workdir_, "/ports/", name, ".trainer_id");
}

std::string JobLayout::LogDir() const {
  if (options_->logdir.empty()) return "";
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(options_->logdir, ec);
  return ec ? options_->logdir : abs.string();
}

}  // namespace pl
