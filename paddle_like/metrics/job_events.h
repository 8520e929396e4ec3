// JobEventLog: the master's last events (trainers and pservers joining, trainers leaving,
// leases expiring, tasks failing), kept for the status page and counted for /metrics.
//
// The master already says each of these in one log line (MasterOptions::log), so the log
// is fed those lines and sorts them by their wording (ClassifyMasterLine). Why not a
// structured hook: the master's logic (master_service.cc) stays untouched, and a line
// whose wording changes only lands in kOther: shown on the page, not counted. The
// wording is pinned by tests/metrics/job_events_test.cc.
//
// Thread-safety: thread-safe.
#ifndef PADDLE_LIKE_METRICS_JOB_EVENTS_H_
#define PADDLE_LIKE_METRICS_JOB_EVENTS_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pl::metrics {

enum class JobEventKind { kJoin, kLeave, kLeaseExpired, kFailure, kFailover, kOther };

// "join", "leave", "lease_expired", "failure", "failover", "other".
const char* JobEventKindName(JobEventKind kind);

struct JobEvent {
  absl::Time time;
  JobEventKind kind = JobEventKind::kOther;
  int64_t count = 1;  // leases in "3 task lease(s) expired"; 1 otherwise
  std::string text;
};

// The kind (and count) of one line of the master's log.
JobEvent ClassifyMasterLine(absl::string_view line);

class JobEventLog {
 public:
  explicit JobEventLog(size_t capacity = 50) : capacity_(capacity) {}

  // Classifies and keeps `line` (the oldest event goes once `capacity` are kept).
  void Add(absl::string_view line, absl::Time when = absl::Now());
  // The kept events, oldest first.
  std::vector<JobEvent> Last() const;
  // Events of `kind` since the start, weighted by their counts (not bounded by capacity).
  int64_t Total(JobEventKind kind) const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<JobEvent> events_ ABSL_GUARDED_BY(mu_);
  int64_t totals_[6] ABSL_GUARDED_BY(mu_) = {0, 0, 0, 0, 0, 0};
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_JOB_EVENTS_H_
