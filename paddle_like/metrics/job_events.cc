#include "paddle_like/metrics/job_events.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace pl::metrics {

const char* JobEventKindName(JobEventKind kind) {
  switch (kind) {
    case JobEventKind::kJoin: return "join";
    case JobEventKind::kLeave: return "leave";
    case JobEventKind::kLeaseExpired: return "lease_expired";
    case JobEventKind::kFailure: return "failure";
    case JobEventKind::kFailover: return "failover";
    case JobEventKind::kOther: break;
  }
  return "other";
}

JobEvent ClassifyMasterLine(absl::string_view line) {
  // The wording of master/master_service.cc's Log calls.
  JobEvent e;
  e.text = std::string(line);
  const bool shard = absl::StartsWith(line, "shard ");  // master/shard_replicas.cc's lines
  if (shard && (absl::StrContains(line, "promoted to primary") || absl::StrContains(line, "no backup in sync") ||
                absl::StrContains(line, " as the primary (epoch "))) {
    e.kind = JobEventKind::kFailover;
  } else if (shard && absl::StrContains(line, "lost its lease")) {
    e.kind = JobEventKind::kLeaseExpired;
  } else if (shard && (absl::StrContains(line, " joins; ") || absl::StrContains(line, "now a backup in sync"))) {
    e.kind = JobEventKind::kJoin;
  } else if (absl::StartsWith(line, "trainer ") && absl::StrContains(line, "lease expired")) {
    e.kind = JobEventKind::kLeaseExpired;
  } else if (absl::EndsWith(line, "task lease(s) expired")) {
    e.kind = JobEventKind::kLeaseExpired;
    int64_t n = 0;
    if (absl::SimpleAtoi(std::vector<absl::string_view>(absl::StrSplit(line, ' ')).front(), &n) && n > 0) e.count = n;
  } else if ((absl::StartsWith(line, "trainer ") || absl::StartsWith(line, "pserver ")) &&
             absl::StrContains(line, " registered")) {
    e.kind = JobEventKind::kJoin;
  } else if (absl::StartsWith(line, "trainer ") &&
             (absl::StrContains(line, " left") || absl::StrContains(line, " returned task "))) {
    e.kind = JobEventKind::kLeave;
  } else if (absl::StrContains(line, " failed task ") || absl::StrContains(line, "set aside")) {
    e.kind = JobEventKind::kFailure;
  }
  return e;
}

void JobEventLog::Add(absl::string_view line, absl::Time when) {
  JobEvent e = ClassifyMasterLine(line);
  e.time = when;
  absl::MutexLock lock(&mu_);
  totals_[static_cast<int>(e.kind)] += e.count;
  events_.push_back(std::move(e));
  while (events_.size() > capacity_) events_.pop_front();
}

std::vector<JobEvent> JobEventLog::Last() const {
  absl::MutexLock lock(&mu_);
  return {events_.begin(), events_.end()};
}

int64_t JobEventLog::Total(JobEventKind kind) const {
  absl::MutexLock lock(&mu_);
  return totals_[static_cast<int>(kind)];
}

}  // namespace pl::metrics
