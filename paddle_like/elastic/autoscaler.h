// Autoscaler: pl-autoscale's control loop. Each Tick() observes every elastic job of the
// cluster file through a JobControl (its master's JobStatus), runs the ElasticPolicy and
// asks each job whose target differs from the decision to run the decided number of
// trainers (ScaleTrainers on its master; pl-launch then starts trainers or stops the
// newest with SIGTERM).
//
// Level-triggered: a job whose master's target differs from the policy's is told again
// at every tick until it agrees, so a lost call, a master restart or an operator's
// `scale` is corrected within a period. A job is taken into the policy when it is
// first observed: if it already runs trainers (its master's target, else its live
// trainers) it is adopted with them, so a restarted controller changes nothing by
// itself. A job its master reports done leaves the policy and its slots are free at
// once; a job that cannot be observed keeps its target and is shown unreachable.
//
// Thread-safety: SetCluster and Tick from one thread (the control loop); view() from
// any thread (the status page).
#ifndef PADDLE_LIKE_ELASTIC_AUTOSCALER_H_
#define PADDLE_LIKE_ELASTIC_AUTOSCALER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "paddle_like/client/master_client.h"
#include "paddle_like/core/status.h"
#include "paddle_like/elastic/elastic_policy.h"
#include "proto/elastic.pb.h"

namespace pl::elastic {

// What a job's master says.
struct JobObservation {
  bool done = false;
  int live_trainers = 0;
  int target = -1;  // the master's trainer target (-1: none set)
};

// How the autoscaler sees and sizes a job.
class JobControl {
 public:
  virtual ~JobControl() = default;
  virtual StatusOr<JobObservation> Observe(const proto::ElasticJob& job) = 0;
  virtual Status Scale(const proto::ElasticJob& job, int trainers, const std::string& reason) = 0;
};

// Through each job's master over gRPC, with the process's transport (the `launch`
// identity under TLS: only it may call ScaleTrainers). Each call is one attempt of
// `timeout`, so one job's dead master delays a tick by at most that.
class MasterJobControl : public JobControl {
 public:
  explicit MasterJobControl(int64_t timeout_ms) : timeout_ms_(timeout_ms) {}
  ~MasterJobControl() override;
  StatusOr<JobObservation> Observe(const proto::ElasticJob& job) override;
  Status Scale(const proto::ElasticJob& job, int trainers, const std::string& reason) override;

 private:
  MasterClient& Client(const std::string& address);
  const int64_t timeout_ms_;
  std::map<std::string, std::unique_ptr<MasterClient>> clients_;
};

struct AutoscalerOptions {
  PolicyOptions policy;
  std::function<int64_t()> now_ms;              // a monotonic clock in ms
  std::function<void(const std::string&)> log;  // one line per event
  size_t recent_decisions = 50;                 // kept for the status page
};

class Autoscaler {
 public:
  struct JobView {
    proto::ElasticJob spec;
    bool observed = false;    // seen at least once (in the policy)
    bool reachable = false;   // the last observation succeeded
    bool done = false;
    std::string error;        // the last observation's error
    int live_trainers = -1;
    int master_target = -1;
    int target = 0;           // the policy's
    int share = 0;
    std::string reason;       // of the last change
    std::map<std::string, int64_t> decisions;  // changes by reason
  };
  struct View {
    int64_t ticks = 0;
    int64_t now_ms = 0;
    int slots = 0;
    int reserved_slots = 0;
    int capacity = 0;
    int assigned = 0;
    int sum_minimums = 0;
    bool over_committed = false;
    std::vector<JobView> jobs;               // in the cluster file's order
    std::deque<std::string> recent;          // the last decisions' log lines, newest last
    std::string cluster_error;               // the last cluster file error (empty: none)
  };

  Autoscaler(AutoscalerOptions options, JobControl* control);

  // The cluster file's content: capacity = slots - reserved_slots; jobs added, updated
  // or dropped (a dropped job is no longer sized; nothing is stopped).
  void SetCluster(const proto::ElasticCluster& cluster);
  // Shown on the status page until the next good file.
  void SetClusterError(const std::string& error);
  // One control period. Returns the plan it acted on.
  Plan Tick();
  View view() const;

 private:
  void Log(const std::string& line);
  JobView& JobFor(const std::string& name);

  AutoscalerOptions options_;
  JobControl* const control_;
  ElasticPolicy policy_;
  proto::ElasticCluster cluster_;
  bool was_over_committed_ = false;
  mutable std::mutex mu_;
  View view_;  // guarded by mu_
};

}  // namespace pl::elastic

#endif  // PADDLE_LIKE_ELASTIC_AUTOSCALER_H_
