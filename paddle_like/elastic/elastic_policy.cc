#include "paddle_like/elastic/elastic_policy.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"

namespace pl::elastic {

const char* ReasonName(Reason reason) {
  switch (reason) {
    case Reason::kUnchanged: return "unchanged";
    case Reason::kQueued: return "queued";
    case Reason::kAdmitted: return "admitted";
    case Reason::kGrow: return "grow";
    case Reason::kRebalance: return "rebalance";
    case Reason::kReclaim: return "reclaim";
    case Reason::kRemoved: return "removed";
  }
  return "unknown";
}

std::string Plan::Summary() const {
  std::string out = absl::StrCat("capacity ", capacity, ", assigned ", assigned);
  if (over_committed) {
    absl::StrAppend(&out, " (over-committed: the admitted minimums need ", sum_minimums,
                    "; no job is cut below its minimum)");
  }
  for (const JobDecision& d : jobs) {
    if (!d.changed()) continue;
    absl::StrAppend(&out, "; ", d.name, " ", d.previous, "->", d.target, " (", ReasonName(d.reason),
                    ", share ", d.share, ")");
  }
  return out;
}

ElasticPolicy::ElasticPolicy(PolicyOptions options) : options_(options) {}

Status ElasticPolicy::Check(const JobSpec& spec) {
  if (spec.name.empty()) return absl::InvalidArgumentError("job name: empty");
  if (spec.max_trainers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", spec.name, "': max_trainers ", spec.max_trainers, " is below 1"));
  }
  if (spec.min_trainers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", spec.name, "': min_trainers ", spec.min_trainers, " is below 0"));
  }
  if (spec.min_trainers > spec.max_trainers) {
    return absl::InvalidArgumentError(absl::StrCat("job '", spec.name, "': min_trainers ", spec.min_trainers,
                                                   " is above max_trainers ", spec.max_trainers));
  }
  return absl::OkStatus();
}

Status ElasticPolicy::AddJob(const JobSpec& spec) {
  PL_RETURN_IF_ERROR(Check(spec));
  if (jobs_.count(spec.name)) return absl::AlreadyExistsError(absl::StrCat("job '", spec.name, "' is already known"));
  Job& job = jobs_[spec.name];
  job.spec = spec;
  job.arrival = next_arrival_++;
  return absl::OkStatus();
}

Status ElasticPolicy::UpdateJob(const JobSpec& spec) {
  auto it = jobs_.find(spec.name);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("unknown job '", spec.name, "'"));
  PL_RETURN_IF_ERROR(Check(spec));
  it->second.spec = spec;
  return absl::OkStatus();
}

Status ElasticPolicy::RemoveJob(const std::string& name) {
  if (jobs_.erase(name) == 0) return absl::NotFoundError(absl::StrCat("unknown job '", name, "'"));
  return absl::OkStatus();
}

Status ElasticPolicy::SetCapacity(int slots) {
  if (slots < 0) return absl::InvalidArgumentError(absl::StrCat("capacity: ", slots, " slots is below 0"));
  capacity_ = slots;
  return absl::OkStatus();
}

Status ElasticPolicy::ReportRunning(const std::string& name, int running) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("unknown job '", name, "'"));
  if (running < 0) {
    return absl::InvalidArgumentError(absl::StrCat("job '", name, "': running trainers ", running, " is below 0"));
  }
  it->second.running = running;
  return absl::OkStatus();
}

Status ElasticPolicy::Adopt(const std::string& name, int trainers) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("unknown job '", name, "'"));
  if (trainers < 0) {
    return absl::InvalidArgumentError(absl::StrCat("job '", name, "': adopted trainers ", trainers, " is below 0"));
  }
  Job& job = it->second;
  job.target = std::min(trainers, job.spec.max_trainers);
  job.admitted = job.target > 0;
  job.running = trainers;
  return absl::OkStatus();
}

std::vector<ElasticPolicy::Job*> ElasticPolicy::ServiceOrder() {
  std::vector<Job*> order;
  order.reserve(jobs_.size());
  for (auto& [name, job] : jobs_) order.push_back(&job);
  std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) {
    if (a->spec.priority != b->spec.priority) return a->spec.priority > b->spec.priority;
    return a->arrival < b->arrival;
  });
  return order;
}

void ElasticPolicy::Admit(const std::vector<Job*>& order) {
  // A queued job is admitted when its minimum fits beside the admitted minimums of its
  // priority and above (lower priorities' minimums are not protected against it: their
  // extras are reclaimable, and they are admitted after it). Within a priority the queue
  // is strict FIFO: once one job waits, later ones of the same priority wait too.
  // One pass in service order; the sums are per priority, so this is O(jobs x priorities).
  std::map<int, int64_t, std::greater<int>> admitted_minimums;  // priority -> sum
  for (const Job* job : order) {
    if (job->admitted) admitted_minimums[job->spec.priority] += job->spec.min_trainers;
  }
  bool tier_waits = false;
  for (size_t i = 0; i < order.size(); ++i) {
    Job* job = order[i];
    if (i > 0 && order[i - 1]->spec.priority != job->spec.priority) tier_waits = false;
    if (job->admitted) continue;
    if (tier_waits) continue;
    int64_t protected_minimums = 0;
    for (const auto& [priority, sum] : admitted_minimums) {
      if (priority < job->spec.priority) break;
      protected_minimums += sum;
    }
    if (protected_minimums + job->spec.min_trainers <= capacity_) {
      job->admitted = true;
      admitted_minimums[job->spec.priority] += job->spec.min_trainers;
    } else {
      tier_waits = true;
    }
  }
}

std::vector<int> ElasticPolicy::FairShares(const std::vector<Job*>& order) const {
  std::vector<int> share(order.size(), 0);
  int64_t left = capacity_;
  for (size_t i = 0; i < order.size(); ++i) {
    share[i] = order[i]->admitted ? order[i]->spec.min_trainers : 0;
    left -= share[i];
  }
  // Priorities in turn, highest first; within one, water-filling on fulfillment
  // (share / maximum), ties to the earlier arrival: a heap of the jobs below their maximum.
  auto fuller = [&](size_t a, size_t b) {  // true when a should be served after b
    const int64_t lhs = static_cast<int64_t>(share[a]) * order[b]->spec.max_trainers;
    const int64_t rhs = static_cast<int64_t>(share[b]) * order[a]->spec.max_trainers;
    return lhs != rhs ? lhs > rhs : a > b;
  };
  size_t tier_begin = 0;
  while (left > 0 && tier_begin < order.size()) {
    size_t tier_end = tier_begin;
    while (tier_end < order.size() && order[tier_end]->spec.priority == order[tier_begin]->spec.priority) ++tier_end;
    std::vector<size_t> heap;
    for (size_t i = tier_begin; i < tier_end; ++i) {
      if (order[i]->admitted && share[i] < order[i]->spec.max_trainers) heap.push_back(i);
    }
    std::make_heap(heap.begin(), heap.end(), fuller);
    while (left > 0 && !heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), fuller);
      const size_t best = heap.back();
      heap.pop_back();
      ++share[best];
      --left;
      if (share[best] < order[best]->spec.max_trainers) {
        heap.push_back(best);
        std::push_heap(heap.begin(), heap.end(), fuller);
      }
    }
    tier_begin = tier_end;
  }
  return share;
}

bool ElasticPolicy::Settled(const Job& job, int64_t now_ms) const {
  const bool cooled = job.last_change_ms < 0 || now_ms - job.last_change_ms >= options_.cooldown_ms;
  const bool steady = job.off_share_since_ms >= 0 && now_ms - job.off_share_since_ms >= options_.settle_ms;
  return cooled && steady;
}

Plan ElasticPolicy::Decide(int64_t now_ms) {
  Plan plan;
  plan.now_ms = now_ms;
  plan.capacity = capacity_;
  std::vector<Job*> order = ServiceOrder();
  Admit(order);
  const std::vector<int> share = FairShares(order);
  const size_t n = order.size();

  std::vector<JobDecision> decision(n);
  for (size_t i = 0; i < n; ++i) {
    Job* job = order[i];
    JobDecision& d = decision[i];
    d.name = job->spec.name;
    d.previous = job->target;
    d.share = share[i];
    d.running = job->running;
    d.admitted = job->admitted;
    d.reason = job->admitted ? Reason::kUnchanged : Reason::kQueued;
    if (d.share == job->target) {
      job->off_share_since_ms = -1;
    } else if (job->off_share_since_ms < 0) {
      job->off_share_since_ms = now_ms;
    }
    if (job->admitted) plan.sum_minimums += job->spec.min_trainers;
  }

  // Minimums first: an admitted job below its minimum (just admitted, or its minimum
  // raised) is raised now. Nothing is ever lowered below a minimum.
  for (size_t i = 0; i < n; ++i) {
    Job* job = order[i];
    if (job->admitted && job->target < job->spec.min_trainers) {
      job->target = job->spec.min_trainers;
      decision[i].reason = Reason::kAdmitted;
    }
    if (job->target > job->spec.max_trainers) {  // its maximum lowered
      job->target = job->spec.max_trainers;
      decision[i].reason = Reason::kRebalance;
    }
  }

  // Reclaim: what the capacity no longer covers comes back now, from the lowest
  // priority's (then the latest arrival's) slots above their share.
  int64_t assigned = 0;
  for (const Job* job : order) assigned += job->target;
  for (size_t k = n; k-- > 0 && assigned > capacity_;) {
    Job* job = order[k];
    const int floor = std::max(share[k], job->admitted ? job->spec.min_trainers : 0);
    const int64_t cut = std::min<int64_t>(job->target - floor, assigned - capacity_);
    if (cut <= 0) continue;
    job->target -= static_cast<int>(cut);
    assigned -= cut;
    decision[k].reason = Reason::kReclaim;
  }
  plan.over_committed = plan.sum_minimums > capacity_;

  // Rebalance: a job above its share gives the difference back once settled.
  for (size_t i = 0; i < n; ++i) {
    Job* job = order[i];
    if (job->target > share[i] && decision[i].reason == Reason::kUnchanged && Settled(*job, now_ms)) {
      assigned -= job->target - share[i];
      job->target = share[i];
      decision[i].reason = Reason::kRebalance;
    }
  }

  // Grow into the free slots, in service order, once settled.
  int64_t free_slots = capacity_ - assigned;
  for (size_t i = 0; i < n && free_slots > 0; ++i) {
    Job* job = order[i];
    if (job->target >= share[i] || decision[i].reason != Reason::kUnchanged || !Settled(*job, now_ms)) continue;
    const int add = static_cast<int>(std::min<int64_t>(share[i] - job->target, free_slots));
    job->target += add;
    free_slots -= add;
    decision[i].reason = Reason::kGrow;
  }

  plan.jobs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Job* job = order[i];
    JobDecision& d = decision[i];
    d.target = job->target;
    if (d.changed()) {
      job->last_change_ms = now_ms;
      job->off_share_since_ms = d.target == d.share ? -1 : now_ms;
    } else if (d.reason != Reason::kQueued) {
      d.reason = Reason::kUnchanged;
    }
    plan.assigned += d.target;
    plan.jobs.push_back(std::move(d));
  }
  return plan;
}

}  // namespace pl::elastic
