#include "benchmarks/elastic_cluster/sim/cluster_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <set>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/io/json_lite.h"

namespace pl::elastic_sim {

// ---------------------------------------------------------------------------------------
// Curves and trace

double ModelCurve::SamplesPerSecond(int trainers) const {
  if (trainers <= 0 || points.empty()) return 0.0;
  const auto& last = points.back();
  if (trainers >= last.first) return last.second / last.first * trainers;
  int x0 = 0;
  double y0 = 0.0;
  for (const auto& [x, y] : points) {
    if (trainers == x) return y;
    if (trainers < x) return y0 + (y - y0) * (trainers - x0) / (x - x0);
    x0 = x;
    y0 = y;
  }
  return last.second;  // unreachable: trainers < last.first
}

int Trace::OnlineAt(double t) const {
  int held = 0;
  for (const auto& [from, n] : online) {
    if (from > t) break;
    held = n;
  }
  return held;
}

int Trace::MaxOnline() const {
  int most = 0;
  for (const auto& step : online) most = std::max(most, step.second);
  return most;
}

namespace {

Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

StatusOr<double> Number(const JsonValue& obj, absl::string_view key, absl::string_view where) {
  const JsonValue* v = obj.Find(key);
  if (v == nullptr) return Bad(where, absl::StrCat("'", key, "' is missing"));
  if (v->type != JsonValue::Type::kInt && v->type != JsonValue::Type::kDouble) {
    return Bad(where, absl::StrCat("'", key, "' is not a number"));
  }
  if (!std::isfinite(v->number)) return Bad(where, absl::StrCat("'", key, "' is not finite"));
  return v->number;
}

StatusOr<int> Integer(const JsonValue& obj, absl::string_view key, absl::string_view where) {
  PL_ASSIGN_OR_RETURN(double x, Number(obj, key, where));
  if (x != std::floor(x) || std::fabs(x) > 1e9) {
    return Bad(where, absl::StrCat("'", key, "' is not an integer: ", x));
  }
  return static_cast<int>(x);
}

StatusOr<std::string> String(const JsonValue& obj, absl::string_view key, absl::string_view where) {
  const JsonValue* v = obj.Find(key);
  if (v == nullptr) return Bad(where, absl::StrCat("'", key, "' is missing"));
  if (!v->is_string()) return Bad(where, absl::StrCat("'", key, "' is not a string"));
  return v->string;
}

}  // namespace

StatusOr<Trace> ParseTrace(absl::string_view json) {
  PL_ASSIGN_OR_RETURN(JsonValue root, ParseJson(json));
  if (!root.is_object()) return Bad("trace", "not a JSON object");
  Trace trace;
  if (const JsonValue* s = root.Find("source"); s != nullptr && s->is_string()) trace.source = s->string;
  PL_ASSIGN_OR_RETURN(trace.slots, Integer(root, "slots", "trace"));
  PL_ASSIGN_OR_RETURN(trace.horizon_s, Number(root, "horizon_s", "trace"));
  PL_ASSIGN_OR_RETURN(trace.period_s, Number(root, "period_s", "trace"));
  if (trace.slots < 1) return Bad("trace", absl::StrCat("slots ", trace.slots, " is below 1"));
  if (trace.horizon_s <= 0) return Bad("trace", "horizon_s is not positive");
  if (trace.period_s <= 0) return Bad("trace", "period_s is not positive");

  const JsonValue* online = root.Find("online");
  if (online == nullptr || !online->is_array()) return Bad("trace", "'online' is not an array");
  for (size_t i = 0; i < online->array.size(); ++i) {
    const JsonValue& step = online->array[i];
    const std::string where = absl::StrCat("trace: online[", i, "]");
    if (!step.is_array() || step.array.size() != 2) return Bad(where, "not a [t, slots] pair");
    const JsonValue& t = step.array[0];
    const JsonValue& n = step.array[1];
    if ((t.type != JsonValue::Type::kInt && t.type != JsonValue::Type::kDouble) || !std::isfinite(t.number)) {
      return Bad(where, "t is not a number");
    }
    if (!n.is_int() || n.integer < 0 || n.integer > trace.slots) {
      return Bad(where, absl::StrCat("slots is not an integer in [0, ", trace.slots, "]"));
    }
    if (!trace.online.empty() && t.number < trace.online.back().first) return Bad(where, "t goes backwards");
    trace.online.emplace_back(t.number, static_cast<int>(n.integer));
  }

  const JsonValue* jobs = root.Find("jobs");
  if (jobs == nullptr || !jobs->is_array()) return Bad("trace", "'jobs' is not an array");
  std::set<std::string> names;
  for (size_t i = 0; i < jobs->array.size(); ++i) {
    const JsonValue& j = jobs->array[i];
    std::string where = absl::StrCat("trace: jobs[", i, "]");
    if (!j.is_object()) return Bad(where, "not an object");
    TraceJob job;
    PL_ASSIGN_OR_RETURN(job.name, String(j, "name", where));
    if (job.name.empty()) return Bad(where, "'name' is empty");
    where = absl::StrCat("trace: job '", job.name, "'");
    if (!names.insert(job.name).second) return Bad(where, "the name is used twice");
    PL_ASSIGN_OR_RETURN(job.arrival_s, Number(j, "arrival_s", where));
    PL_ASSIGN_OR_RETURN(job.model, String(j, "model", where));
    PL_ASSIGN_OR_RETURN(job.work_samples, Number(j, "work_samples", where));
    PL_ASSIGN_OR_RETURN(job.min_trainers, Integer(j, "min_trainers", where));
    PL_ASSIGN_OR_RETURN(job.max_trainers, Integer(j, "max_trainers", where));
    PL_ASSIGN_OR_RETURN(job.static_trainers, Integer(j, "static_trainers", where));
    if (j.Find("priority") != nullptr) {
      PL_ASSIGN_OR_RETURN(job.priority, Integer(j, "priority", where));
    }
    if (job.arrival_s < 0) return Bad(where, "arrival_s is below 0");
    if (job.work_samples <= 0) return Bad(where, "work_samples is not positive");
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

StatusOr<Curves> ParseCurves(absl::string_view json) {
  PL_ASSIGN_OR_RETURN(JsonValue root, ParseJson(json));
  if (!root.is_object()) return Bad("curves", "not a JSON object");
  Curves curves;
  for (const auto& [model, c] : root.object) {
    if (!model.empty() && model[0] == '_') continue;  // "_measured": how the curves were taken
    const std::string where = absl::StrCat("curves: model '", model, "'");
    if (!c.is_object()) return Bad(where, "not an object");
    ModelCurve curve;
    const JsonValue* rates = c.Find("samples_per_s");
    if (rates == nullptr || !rates->is_object() || rates->object.empty()) {
      return Bad(where, "'samples_per_s' is not a non-empty object");
    }
    for (const auto& [key, v] : rates->object) {
      int n = 0;
      if (!absl::SimpleAtoi(key, &n) || n < 1) {
        return Bad(where, absl::StrCat("trainer count '", key, "' is not an integer >= 1"));
      }
      if ((v.type != JsonValue::Type::kInt && v.type != JsonValue::Type::kDouble) || !(v.number >= 0) ||
          !std::isfinite(v.number)) {
        return Bad(where, absl::StrCat("samples_per_s[", key, "] is not a number >= 0"));
      }
      curve.points.emplace_back(n, v.number);
    }
    std::sort(curve.points.begin(), curve.points.end());
    for (size_t i = 1; i < curve.points.size(); ++i) {
      if (curve.points[i].first == curve.points[i - 1].first) return Bad(where, "a trainer count is given twice");
    }
    PL_ASSIGN_OR_RETURN(curve.join_s, Number(c, "join_s", where));
    PL_ASSIGN_OR_RETURN(curve.leave_s, Number(c, "leave_s", where));
    if (c.Find("exit_s") != nullptr) {
      PL_ASSIGN_OR_RETURN(curve.exit_s, Number(c, "exit_s", where));
    }
    if (curve.join_s < 0 || curve.leave_s < 0 || curve.exit_s < 0) return Bad(where, "a negative time");
    curves[model] = std::move(curve);
  }
  return curves;
}

Status CheckTrace(const Trace& trace, const Curves& curves) {
  const int partition = trace.StaticCapacity();
  for (const TraceJob& job : trace.jobs) {
    const std::string where = absl::StrCat("trace: job '", job.name, "'");
    auto curve = curves.find(job.model);
    if (curve == curves.end()) return Bad(where, absl::StrCat("the curves have no model '", job.model, "'"));
    if (curve->second.SamplesPerSecond(job.min_trainers > 0 ? job.min_trainers : 1) <= 0) {
      return Bad(where, "its model trains at 0 samples/s at its minimum");
    }
    if (job.max_trainers < 1) return Bad(where, "max_trainers is below 1");
    if (job.min_trainers < 1) return Bad(where, "min_trainers is below 1");
    if (job.static_trainers < job.min_trainers || job.static_trainers > job.max_trainers) {
      return Bad(where, absl::StrCat("static_trainers ", job.static_trainers, " is not in [min_trainers ",
                                     job.min_trainers, ", max_trainers ", job.max_trainers, "]"));
    }
    if (job.static_trainers > partition) {
      return Bad(where, absl::StrCat("static_trainers ", job.static_trainers, " exceeds the static partition (",
                                     trace.slots, " slots - ", trace.MaxOnline(), " online at most = ", partition,
                                     ")"));
    }
  }
  return absl::OkStatus();
}

const char* ModeName(Mode mode) { return mode == Mode::kStatic ? "static" : "elastic"; }

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double pos = p / 100.0 * (values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  if (lo + 1 >= values.size()) return values.back();
  return values[lo] + (values[lo + 1] - values[lo]) * (pos - lo);
}

// ---------------------------------------------------------------------------------------
// The simulation

namespace {

// Same-instant order (see the file comment of cluster_sim.h).
enum EventType : int { kOnline = 0, kSlotFree = 1, kJoinDone = 2, kJobDone = 3, kArrival = 4, kPeriod = 5 };

struct Event {
  double t = 0.0;
  int type = 0;
  int64_t seq = 0;
  int job = -1;
  int trainer = -1;     // index into the job's trainers
  int64_t version = 0;  // kJobDone: the job's rate version it was computed for
  int value = 0;        // kOnline: slots held
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    if (a.t != b.t) return a.t > b.t;
    if (a.type != b.type) return a.type > b.type;
    return a.seq > b.seq;
  }
};

enum class TrainerState { kJoining, kTraining, kLeaving, kGone };

struct JobState {
  const TraceJob* spec = nullptr;
  const ModelCurve* curve = nullptr;
  bool arrived = false;
  bool finished = false;
  double progress = 0.0;
  double rate = 0.0;
  double rate_since = 0.0;
  int64_t version = 0;
  int training = 0;  // trainers training now
  int holding = 0;   // trainers holding slots (any state but gone)
  std::vector<TrainerState> trainers;
  std::vector<int> alive;  // indices of joining/training trainers, oldest first
  int active_pos = -1;     // position in Simulator::active_
  double start_s = -1.0;
  double finish_s = -1.0;
};

class Simulator {
 public:
  Simulator(const Trace& trace, const Curves& curves, const SimOptions& options)
      : trace_(trace), options_(options), policy_(options.policy), partition_(trace.StaticCapacity()) {
    jobs_.resize(trace.jobs.size());
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      jobs_[i].spec = &trace.jobs[i];
      jobs_[i].curve = &curves.at(trace.jobs[i].model);
      index_[trace.jobs[i].name] = static_cast<int>(i);
    }
  }

  StatusOr<SimResult> Run() {
    const double drain = options_.max_drain_s < 0 ? 10.0 * trace_.horizon_s : options_.max_drain_s;
    const double end_limit = trace_.horizon_s + drain;
    for (const auto& [t, n] : trace_.online) Push({t, kOnline, 0, -1, -1, 0, n});
    for (size_t i = 0; i < jobs_.size(); ++i) Push({jobs_[i].spec->arrival_s, kArrival, 0, static_cast<int>(i)});
    Push({0.0, kPeriod});
    UpdateFree(false);  // the capacity free at t = 0
    while (!events_.empty()) {
      const Event e = events_.top();
      if (e.t > end_limit) break;
      if (finished_ == static_cast<int>(jobs_.size()) && e.t > trace_.horizon_s) break;
      events_.pop();
      AdvanceTo(e.t);
      PL_RETURN_IF_ERROR(Handle(e));
      UpdateDemand();
      if (options_.mode == Mode::kStatic) StartStaticJobs();
    }
    AdvanceTo(std::max(now_, trace_.horizon_s));
    return Result();
  }

 private:
  void Push(Event e) {
    e.seq = next_seq_++;
    events_.push(e);
  }

  int Capacity() const {
    return options_.mode == Mode::kStatic ? partition_ : std::max(0, trace_.slots - online_);
  }

  // Integrates busy and overlap slot-seconds over [now_, t] within [0, horizon_s].
  void AdvanceTo(double t) {
    const double a = std::min(now_, trace_.horizon_s), b = std::min(t, trace_.horizon_s);
    if (b > a) {
      const int demand = online_ + holding_;
      busy_slot_s_ += (b - a) * std::min(trace_.slots, demand);
      overlap_slot_s_ += (b - a) * std::max(0, demand - trace_.slots);
    }
    now_ = std::max(now_, t);
  }

  // Keeps the FIFO of free training slots in step with F = capacity - holding.
  void UpdateFree(bool trainer_start) {
    const int f = std::max(0, Capacity() - holding_);
    if (f > free_) {
      for (int i = free_; i < f; ++i) free_since_.push_back(now_);
    } else {
      for (int i = f; i < free_; ++i) {
        if (trainer_start) {
          free_delay_sum_ += now_ - free_since_.front();
          ++free_delay_count_;
          free_since_.pop_front();
        } else {
          free_since_.pop_back();
        }
      }
    }
    free_ = f;
  }

  // Some job could use a free slot: a static job queued, or an elastic job below its
  // maximum. When that starts, the free slots' clocks restart now.
  void UpdateDemand() {
    const bool demand = options_.mode == Mode::kStatic ? !fifo_.empty() : wanted_ > 0;
    if (demand && !demand_) std::fill(free_since_.begin(), free_since_.end(), now_);
    demand_ = demand;
  }

  // The job's progress up to now, then its rate from its trainers training now.
  void Rerate(JobState& job) {
    job.progress += job.rate * (now_ - job.rate_since);
    job.rate_since = now_;
    job.rate = job.curve->SamplesPerSecond(job.training);
    ++job.version;
    if (job.rate > 0) {
      const double left = std::max(0.0, job.spec->work_samples - job.progress);
      Push({now_ + left / job.rate, kJobDone, 0, static_cast<int>(&job - jobs_.data()), -1, job.version});
    }
  }

  void StartTrainer(int j) {
    JobState& job = jobs_[j];
    const int index = static_cast<int>(job.trainers.size());
    job.trainers.push_back(TrainerState::kJoining);
    job.alive.push_back(index);
    if (options_.mode == Mode::kElastic) --wanted_;
    ++job.holding;
    ++holding_;
    if (job.start_s < 0) job.start_s = now_;
    UpdateFree(/*trainer_start=*/true);
    Push({now_ + job.curve->join_s, kJoinDone, 0, j, index});
  }

  // Stops trainer `index` of job j: it stops training now and frees its slot after `after_s`.
  void StopTrainer(int j, int index, double after_s) {
    JobState& job = jobs_[j];
    if (job.trainers[index] == TrainerState::kTraining) --job.training, --training_;
    job.trainers[index] = TrainerState::kLeaving;
    Push({now_ + after_s, kSlotFree, 0, j, index});
  }

  // Stops `count` of job j's trainers, newest first, those still joining before those training.
  void Shrink(int j, int count) {
    JobState& job = jobs_[j];
    for (TrainerState pass : {TrainerState::kJoining, TrainerState::kTraining}) {
      for (int k = static_cast<int>(job.alive.size()) - 1; k >= 0 && count > 0; --k) {
        const int index = job.alive[k];
        if (job.trainers[index] != pass) continue;
        StopTrainer(j, index, job.curve->leave_s);
        job.alive.erase(job.alive.begin() + k);
        ++wanted_;
        --count;
        ++trainers_stopped_;
      }
    }
    Rerate(job);
  }

  void AddActive(int j) {
    jobs_[j].active_pos = static_cast<int>(active_.size());
    active_.push_back(j);
  }
  void RemoveActive(int j) {
    const int pos = jobs_[j].active_pos;
    active_[pos] = active_.back();
    jobs_[active_[pos]].active_pos = pos;
    active_.pop_back();
    jobs_[j].active_pos = -1;
  }

  void Finish(int j) {
    JobState& job = jobs_[j];
    job.progress = job.spec->work_samples;
    job.finished = true;
    job.finish_s = now_;
    job.rate = 0;
    ++job.version;
    for (int index : job.alive) StopTrainer(j, index, job.curve->exit_s);
    if (options_.mode == Mode::kElastic) wanted_ -= job.spec->max_trainers - static_cast<int>(job.alive.size());
    job.alive.clear();
    ++finished_;
    RemoveActive(j);
    if (options_.mode == Mode::kElastic) (void)policy_.RemoveJob(job.spec->name);
  }

  void StartStaticJobs() {
    while (!fifo_.empty()) {
      JobState& head = jobs_[fifo_.front()];
      if (head.spec->static_trainers > partition_ - holding_) return;
      const int j = fifo_.front();
      fifo_.pop_front();
      for (int k = 0; k < head.spec->static_trainers; ++k) StartTrainer(j);
    }
  }

  Status Decide() {
    PL_RETURN_IF_ERROR(policy_.SetCapacity(std::max(0, trace_.slots - online_)));
    const elastic::Plan plan = policy_.Decide(std::llround(now_ * 1000.0));
    ++decisions_;
    if (plan.over_committed) ++over_committed_;
    for (const elastic::JobDecision& d : plan.jobs) {
      const int j = index_.at(d.name);
      const int have = static_cast<int>(jobs_[j].alive.size());
      if (d.target > have) {
        for (int k = have; k < d.target; ++k) StartTrainer(j);
      } else if (d.target < have) {
        ++shrinks_;
        Shrink(j, have - d.target);
      }
    }
    return absl::OkStatus();
  }

  void Sample() {
    TimelineRow row;
    row.t_s = now_;
    row.online_slots = online_;
    row.training_capacity = Capacity();
    row.trainers_busy = holding_;
    row.trainers_training = training_;
    for (int j : active_) (jobs_[j].holding > 0 ? row.jobs_running : row.jobs_queued)++;
    timeline_.push_back(row);
  }

  Status Handle(const Event& e) {
    switch (e.type) {
      case kOnline:
        online_ = e.value;
        UpdateFree(false);
        return absl::OkStatus();
      case kSlotFree: {
        JobState& job = jobs_[e.job];
        job.trainers[e.trainer] = TrainerState::kGone;
        --job.holding;
        --holding_;
        UpdateFree(false);
        return absl::OkStatus();
      }
      case kJoinDone: {
        JobState& job = jobs_[e.job];
        if (job.trainers[e.trainer] != TrainerState::kJoining) return absl::OkStatus();  // stopped meanwhile
        job.trainers[e.trainer] = TrainerState::kTraining;
        ++job.training;
        ++training_;
        Rerate(job);
        return absl::OkStatus();
      }
      case kJobDone: {
        JobState& job = jobs_[e.job];
        if (job.finished || e.version != job.version) return absl::OkStatus();  // superseded
        Finish(e.job);
        return absl::OkStatus();
      }
      case kArrival: {
        JobState& job = jobs_[e.job];
        job.arrived = true;
        job.rate_since = now_;
        AddActive(e.job);
        if (options_.mode == Mode::kStatic) {
          fifo_.push_back(e.job);
          return absl::OkStatus();
        }
        const TraceJob& s = *job.spec;
        wanted_ += s.max_trainers;
        Status added = policy_.AddJob({s.name, s.min_trainers, s.max_trainers, s.priority});
        if (!added.ok()) return absl::InternalError(absl::StrCat("the policy refused a job: ", added.message()));
        return absl::OkStatus();
      }
      case kPeriod: {
        if (options_.mode == Mode::kElastic) PL_RETURN_IF_ERROR(Decide());
        if (options_.timeline) Sample();
        ++period_index_;
        Push({period_index_ * trace_.period_s, kPeriod});
        return absl::OkStatus();
      }
    }
    return absl::InternalError("unknown event");
  }

  SimResult Result() {
    SimResult r;
    r.mode = options_.mode;
    r.busy_slot_s = busy_slot_s_;
    r.overlap_slot_s = overlap_slot_s_;
    r.utilisation = busy_slot_s_ / (trace_.slots * trace_.horizon_s);
    r.jobs_total = static_cast<int>(jobs_.size());
    std::vector<double> jct;
    for (const JobState& job : jobs_) {
      r.jobs.push_back({job.spec->name, job.spec->arrival_s, job.start_s, job.finish_s});
      if (!job.finished) continue;
      ++r.jobs_finished;
      if (job.finish_s <= trace_.horizon_s) ++r.jobs_finished_by_horizon;
      jct.push_back(job.finish_s - job.spec->arrival_s);
    }
    if (!jct.empty()) {
      double sum = 0;
      for (double x : jct) sum += x;
      r.mean_jct_s = sum / jct.size();
      r.p90_jct_s = Percentile(jct, 90);
    }
    r.shrinks = shrinks_;
    r.trainers_stopped = trainers_stopped_;
    r.decisions = decisions_;
    r.over_committed_periods = over_committed_;
    r.free_to_used_count = free_delay_count_;
    r.mean_free_to_used_s = free_delay_count_ > 0 ? free_delay_sum_ / free_delay_count_ : 0.0;
    r.end_s = now_;
    r.timeline = std::move(timeline_);
    return r;
  }

  const Trace& trace_;
  const SimOptions& options_;
  elastic::ElasticPolicy policy_;
  const int partition_;
  std::vector<JobState> jobs_;
  std::unordered_map<std::string, int> index_;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  int64_t next_seq_ = 0;
  int64_t period_index_ = 0;

  double now_ = 0.0;
  int online_ = 0;
  int holding_ = 0;   // trainers holding slots
  int training_ = 0;  // trainers training
  int finished_ = 0;
  std::vector<int> active_;  // arrived, unfinished jobs
  std::deque<int> fifo_;     // static: arrived jobs not started, in arrival order

  double busy_slot_s_ = 0.0;
  double overlap_slot_s_ = 0.0;
  int free_ = 0;
  std::deque<double> free_since_;  // when each free slot became free (or wanted), oldest first
  bool demand_ = false;
  int64_t wanted_ = 0;  // elastic: sum over arrived, unfinished jobs of max - trainers
  double free_delay_sum_ = 0.0;
  int64_t free_delay_count_ = 0;
  int64_t shrinks_ = 0;
  int64_t trainers_stopped_ = 0;
  int64_t decisions_ = 0;
  int64_t over_committed_ = 0;
  std::vector<TimelineRow> timeline_;
};

}  // namespace

StatusOr<SimResult> Simulate(const Trace& trace, const Curves& curves, const SimOptions& options) {
  PL_RETURN_IF_ERROR(CheckTrace(trace, curves));
  Simulator sim(trace, curves, options);
  return sim.Run();
}

}  // namespace pl::elastic_sim
