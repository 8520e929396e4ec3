// ElasticPolicy: decides how many trainers each elastic job runs now, given the slots
// the cluster leaves to training. The one decision procedure behind every driver
// (pl-autoscale over the jobs' masters, the Kubernetes driver in the Python package,
// and pl-sim-elastic's 1,000-node simulation), so what the simulation shows is what
// the controllers do.
//
// The rules (docs/elastic.md has the reasoning):
//  - Admission: jobs are served by priority (higher first), then by arrival. A job is
//    admitted once its minimum fits beside the minimums of the admitted jobs of at
//    least its priority; until then its target is 0 (it waits in the queue, in order:
//    a job never jumps one of its own priority that arrived earlier).
//  - Minimums: an admitted job's target is never below its minimum. If the capacity
//    falls below the sum of the admitted minimums, the plan says so (over_committed)
//    and no job is cut below its minimum: the policy never kills a job's last trainers.
//  - Fair share: the slots above the minimums go to the highest priority first; within
//    a priority one slot at a time to the job whose target is the smallest fraction of
//    its maximum (EDL's fulfillment), so a job's share grows with how far it is from
//    its maximum. No job exceeds its maximum.
//  - Reclaim: slots that the capacity no longer covers, and slots an admitted job
//    needs to reach its minimum, are taken back in the same decision, ignoring
//    cooldowns, from the lowest priority's extras first. A driver that acts on every
//    decision therefore frees reclaimed slots within one decision period plus its own
//    stop time.
//  - No thrashing: growing into spare capacity, and shrinking only to rebalance, wait
//    until the job has been off its share for `settle_ms` without a break (hysteresis)
//    and until `cooldown_ms` has passed since the job's last change.
//
// Time is the caller's (milliseconds on any monotonic clock), so tests use a fake one.
// Thread-safety: none; one owner calls it (drivers run it on their control loop).
#ifndef PADDLE_LIKE_ELASTIC_ELASTIC_POLICY_H_
#define PADDLE_LIKE_ELASTIC_ELASTIC_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"

namespace pl::elastic {

// One elastic job as its owner declares it.
struct JobSpec {
  std::string name;
  int min_trainers = 1;
  int max_trainers = 1;
  int priority = 0;  // higher is served first
};

struct PolicyOptions {
  // After a job's target changes, it neither grows nor shrinks to rebalance for this long.
  int64_t cooldown_ms = 5000;
  // A job grows into spare slots (or gives up slots to rebalance) only after its fair
  // share has differed from its target for this long without a break.
  int64_t settle_ms = 1000;
};

// Why a job's target is what it is.
enum class Reason {
  kUnchanged,
  kQueued,         // waits: its minimum does not fit yet
  kAdmitted,       // raised to its minimum on admission
  kGrow,           // grown into spare slots, up to its fair share
  kRebalance,      // shrunk to its fair share, so another job gets its own
  kReclaim,        // shrunk because the capacity no longer covers it, or a minimum needs it
  kRemoved,
};
const char* ReasonName(Reason reason);

struct JobDecision {
  std::string name;
  int previous = 0;  // the target before this decision
  int target = 0;    // the target now (what the driver makes true)
  int share = 0;     // the fair share the policy converges to
  int running = -1;  // the trainers the driver last reported (-1: never reported)
  bool admitted = false;
  Reason reason = Reason::kUnchanged;
  bool changed() const { return target != previous; }
};

struct Plan {
  int64_t now_ms = 0;
  int capacity = 0;     // slots training may use
  int assigned = 0;     // sum of the targets
  int sum_minimums = 0;  // of the admitted jobs
  // The admitted minimums exceed the capacity: reported, never acted on below minimums.
  bool over_committed = false;
  std::vector<JobDecision> jobs;  // every job, in service order (priority, then arrival)
  // One line for the log: the capacity, and each change with its reason.
  std::string Summary() const;
};

class ElasticPolicy {
 public:
  explicit ElasticPolicy(PolicyOptions options = {});

  // INVALID_ARGUMENT naming the field: an empty name, a minimum below 0 or above the
  // maximum, a maximum below 1. ALREADY_EXISTS for a name already known. The job queues
  // (target 0) until a decision admits it.
  Status AddJob(const JobSpec& spec);
  // Changes a job's bounds or priority (same checks); NOT_FOUND for an unknown job.
  Status UpdateJob(const JobSpec& spec);
  // The job is over (or withdrawn): its slots are free at the next decision. NOT_FOUND
  // for an unknown job.
  Status RemoveJob(const std::string& name);
  // Slots training may use from now on; INVALID_ARGUMENT below 0.
  Status SetCapacity(int slots);
  // The trainers the driver sees running (shown in plans; targets stay the policy's).
  // NOT_FOUND for an unknown job; INVALID_ARGUMENT below 0.
  Status ReportRunning(const std::string& name, int running);
  // A job already running `trainers` when the controller (re)starts: it counts as
  // admitted with that target, so a restarted controller neither restarts nor kills it.
  Status Adopt(const std::string& name, int trainers);

  // Decides every job's target at `now_ms` (non-decreasing between calls).
  Plan Decide(int64_t now_ms);

  bool HasJob(const std::string& name) const { return jobs_.count(name) > 0; }
  int capacity() const { return capacity_; }
  const PolicyOptions& options() const { return options_; }

 private:
  struct Job {
    JobSpec spec;
    int64_t arrival = 0;  // order of AddJob
    bool admitted = false;
    int target = 0;
    int running = -1;
    int64_t last_change_ms = -1;  // -1: never changed
    int64_t off_share_since_ms = -1;  // -1: target equals share
  };
  static Status Check(const JobSpec& spec);
  // Jobs in service order: priority descending, then arrival.
  std::vector<Job*> ServiceOrder();
  void Admit(const std::vector<Job*>& order);
  // Each job's fair share, aligned with `order`.
  std::vector<int> FairShares(const std::vector<Job*>& order) const;
  bool Settled(const Job& job, int64_t now_ms) const;

  PolicyOptions options_;
  int capacity_ = 0;
  int64_t next_arrival_ = 0;
  std::map<std::string, Job> jobs_;
};

}  // namespace pl::elastic

#endif  // PADDLE_LIKE_ELASTIC_ELASTIC_POLICY_H_
