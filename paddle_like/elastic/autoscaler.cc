#include "paddle_like/elastic/autoscaler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/master_client.h"

namespace pl::elastic {

MasterJobControl::~MasterJobControl() = default;

MasterClient& MasterJobControl::Client(const std::string& address) {
  std::unique_ptr<MasterClient>& client = clients_[address];
  if (!client) client = std::make_unique<MasterClient>(address);
  return *client;
}

StatusOr<JobObservation> MasterJobControl::Observe(const proto::ElasticJob& job) {
  PL_ASSIGN_OR_RETURN(proto::JobStatusResponse status,
                      Client(job.master()).JobStatus(MasterCallPolicy::Once(absl::Milliseconds(timeout_ms_))));
  JobObservation seen;
  seen.done = status.job_done();
  seen.live_trainers = static_cast<int>(status.live_trainers());
  seen.target = status.has_trainer_target() ? status.trainer_target() : -1;
  return seen;
}

Status MasterJobControl::Scale(const proto::ElasticJob& job, int trainers, const std::string& reason) {
  proto::ScaleTrainersRequest req;
  req.set_trainers(trainers);
  req.set_reason(reason);
  return Client(job.master()).ScaleTrainers(req, MasterCallPolicy::Once(absl::Milliseconds(timeout_ms_))).status();
}

Autoscaler::Autoscaler(AutoscalerOptions options, JobControl* control)
    : options_(std::move(options)), control_(control), policy_(options_.policy) {}

void Autoscaler::Log(const std::string& line) {
  if (options_.log) options_.log(line);
}

Autoscaler::JobView& Autoscaler::JobFor(const std::string& name) {
  for (JobView& v : view_.jobs) {
    if (v.spec.name() == name) return v;
  }
  view_.jobs.emplace_back();
  return view_.jobs.back();
}

void Autoscaler::SetCluster(const proto::ElasticCluster& cluster) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> named;
  for (const proto::ElasticJob& job : cluster.job()) {
    named.insert(job.name());
    JobView& v = JobFor(job.name());
    const bool bounds_changed = v.spec.min_trainers() != job.min_trainers() ||
                                v.spec.max_trainers() != job.max_trainers() || v.spec.priority() != job.priority();
    v.spec = job;
    if (v.observed && !v.done && bounds_changed) {
      Status s = policy_.UpdateJob({job.name(), job.min_trainers(), job.max_trainers(), job.priority()});
      Log(s.ok() ? absl::StrCat("job '", job.name(), "': now min ", job.min_trainers(), ", max ", job.max_trainers(),
                                ", priority ", job.priority())
                 : absl::StrCat("job '", job.name(), "': ", s.message()));
    }
  }
  // Jobs no longer in the file are no longer sized (their trainers keep running).
  for (auto it = view_.jobs.begin(); it != view_.jobs.end();) {
    if (named.count(it->spec.name())) {
      ++it;
      continue;
    }
    if (policy_.HasJob(it->spec.name())) (void)policy_.RemoveJob(it->spec.name());
    Log(absl::StrCat("job '", it->spec.name(), "' left the cluster file: no longer sized"));
    it = view_.jobs.erase(it);
  }
  const int capacity = cluster.slots() - cluster.reserved_slots();
  if (cluster.slots() != view_.slots || cluster.reserved_slots() != view_.reserved_slots || view_.ticks == 0) {
    Log(absl::StrCat("capacity ", capacity, " slot(s): ", cluster.slots(), " minus ", cluster.reserved_slots(),
                     " reserved"));
  }
  (void)policy_.SetCapacity(capacity);  // checked by ParseCluster: reserved <= slots
  view_.slots = cluster.slots();
  view_.reserved_slots = cluster.reserved_slots();
  view_.capacity = capacity;
  view_.cluster_error.clear();
  cluster_ = cluster;
}

void Autoscaler::SetClusterError(const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  view_.cluster_error = error;
}

Plan Autoscaler::Tick() {
  // Observations first, without the lock (they are RPCs).
  std::map<std::string, StatusOr<JobObservation>> seen;
  std::vector<proto::ElasticJob> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const JobView& v : view_.jobs) {
      if (!v.done) jobs.push_back(v.spec);
    }
  }
  for (const proto::ElasticJob& job : jobs) seen.emplace(job.name(), control_->Observe(job));

  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = options_.now_ms();
  for (const proto::ElasticJob& job : jobs) {
    JobView& v = JobFor(job.name());
    const StatusOr<JobObservation>& obs = seen.at(job.name());
    v.reachable = obs.ok();
    if (!obs.ok()) {
      if (v.error != obs.status().message()) Log(absl::StrCat("job '", job.name(), "': ", obs.status().message()));
      v.error = std::string(obs.status().message());
      continue;
    }
    v.error.clear();
    v.live_trainers = obs->live_trainers;
    v.master_target = obs->target;
    if (obs->done) {
      v.done = true;
      if (policy_.HasJob(job.name())) (void)policy_.RemoveJob(job.name());
      Log(absl::StrCat("job '", job.name(), "' is done: its ", v.target, " slot(s) are free"));
      v.target = 0;
      continue;
    }
    if (!v.observed) {
      Status added = policy_.AddJob({job.name(), job.min_trainers(), job.max_trainers(), job.priority()});
      if (!added.ok()) {
        v.error = std::string(added.message());
        Log(absl::StrCat("job '", job.name(), "': ", added.message()));
        continue;
      }
      v.observed = true;
      const int running = obs->target >= 0 ? obs->target : obs->live_trainers;
      if (running > 0) {
        (void)policy_.Adopt(job.name(), running);
        v.target = running;
        Log(absl::StrCat("job '", job.name(), "': adopted with ", running, " trainer(s)"));
      } else {
        Log(absl::StrCat("job '", job.name(), "': queued (min ", job.min_trainers(), ", max ", job.max_trainers(),
                         ", priority ", job.priority(), ")"));
      }
    }
    (void)policy_.ReportRunning(job.name(), obs->live_trainers);
  }

  Plan plan = policy_.Decide(now);
  bool changed = false;
  for (const JobDecision& d : plan.jobs) {
    JobView& v = JobFor(d.name);
    v.target = d.target;
    v.share = d.share;
    if (d.changed()) {
      changed = true;
      v.reason = ReasonName(d.reason);
      ++v.decisions[v.reason];
    }
    // Level-triggered: tell the master whenever it disagrees (and it can be reached).
    if (v.reachable && (d.changed() || v.master_target != d.target)) {
      const std::string reason = absl::StrCat("pl-autoscale: ", v.reason.empty() ? "target" : v.reason, ", share ",
                                              d.share, " of ", plan.capacity, " slot(s)");
      if (Status s = control_->Scale(v.spec, d.target, reason); s.ok()) {
        v.master_target = d.target;
      } else {
        v.error = absl::StrCat("ScaleTrainers: ", s.message());
        Log(absl::StrCat("job '", d.name, "': cannot set its target to ", d.target, ": ", s.message()));
      }
    }
  }
  if (changed) {
    const std::string line = plan.Summary();
    Log(line);
    view_.recent.push_back(line);
    while (view_.recent.size() > options_.recent_decisions) view_.recent.pop_front();
  }
  if (plan.over_committed != was_over_committed_) {
    was_over_committed_ = plan.over_committed;
    Log(plan.over_committed
            ? absl::StrCat("over-committed: capacity ", plan.capacity, " is below the admitted minimums (",
                           plan.sum_minimums, "); no job is cut below its minimum")
            : "no longer over-committed");
  }
  ++view_.ticks;
  view_.now_ms = now;
  view_.capacity = plan.capacity;
  view_.assigned = plan.assigned;
  view_.sum_minimums = plan.sum_minimums;
  view_.over_committed = plan.over_committed;
  return plan;
}

Autoscaler::View Autoscaler::view() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

}  // namespace pl::elastic
