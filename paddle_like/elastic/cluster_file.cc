#include "paddle_like/elastic/cluster_file.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace pl::elastic {
namespace {

// Keeps the first syntax error, as "line L column C: message".
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

bool IsHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  return colon != std::string::npos && colon > 0 && absl::SimpleAtoi(address.substr(colon + 1), &port) && port > 0 &&
         port <= 65535;
}

}  // namespace

StatusOr<proto::ElasticCluster> ParseCluster(const std::string& text) {
  proto::ElasticCluster cluster;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &cluster)) {
    return absl::InvalidArgumentError(errors.error().empty() ? "cannot parse" : errors.error());
  }
  if (cluster.slots() < 0) return absl::InvalidArgumentError(absl::StrCat("slots: ", cluster.slots(), " is below 0"));
  if (cluster.reserved_slots() < 0 || cluster.reserved_slots() > cluster.slots()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reserved_slots: ", cluster.reserved_slots(), " is outside 0 .. slots (", cluster.slots(), ")"));
  }
  std::set<std::string> names;
  for (int i = 0; i < cluster.job_size(); ++i) {
    const proto::ElasticJob& job = cluster.job(i);
    const std::string which = job.name().empty() ? absl::StrCat("job #", i + 1) : absl::StrCat("job '", job.name(), "'");
    if (job.name().empty()) return absl::InvalidArgumentError(absl::StrCat(which, ": name is empty"));
    if (!names.insert(job.name()).second) return absl::InvalidArgumentError(absl::StrCat(which, ": name is repeated"));
    if (!IsHostPort(job.master())) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": master '", job.master(), "' is not HOST:PORT"));
    }
    if (job.max_trainers() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": max_trainers ", job.max_trainers(), " is below 1"));
    }
    if (job.min_trainers() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": min_trainers ", job.min_trainers(), " is below 0"));
    }
    if (job.min_trainers() > job.max_trainers()) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": min_trainers ", job.min_trainers(),
                                                     " is above max_trainers ", job.max_trainers()));
    }
  }
  return cluster;
}

StatusOr<proto::ElasticCluster> ReadClusterFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the cluster file"));
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<proto::ElasticCluster> cluster = ParseCluster(text.str());
  if (!cluster.ok()) return Annotate(cluster.status(), path);
  return cluster;
}

}  // namespace pl::elastic
