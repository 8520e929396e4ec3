// The elastic-cluster simulation behind pl-sim-elastic: a cluster of slots that online
// services and training jobs share, run on a job trace either statically or under the
// ElasticPolicy (paddle_like/elastic/elastic_policy.h, the same code pl-autoscale runs),
// on simulated time. The real-process harness (benchmarks/elastic_cluster) follows the
// same semantics, so the two can be compared on the same trace.
//
// INPUTS
//  Trace (JSON, written by benchmarks/elastic_cluster/make_trace.py; unknown keys ignored):
//    {"source": "...", "slots": 8, "horizon_s": 600, "period_s": 0.25,
//     "online": [[0.0, 2], [150.0, 3], ...],   // from t on, online services hold n slots
//                                               // (0 before the first step; the last value
//                                               // holds after horizon_s)
//     "jobs": [{"name": "j000", "arrival_s": 7.8, "model": "mlp", "work_samples": 322588,
//               "min_trainers": 1, "max_trainers": 4, "static_trainers": 3,
//               "priority": 0}, ...]}           // priority optional (0)
//  Curves (JSON, benchmarks/elastic_cluster/curves.json, measured; keys starting with "_"
//  are notes, skipped):
//    {"mlp": {"samples_per_s": {"1": 3000, "2": 5600, "4": 9800}, "join_s": 0.8,
//             "leave_s": 0.3, "exit_s": 0.0}, ...}          // exit_s optional (0)
//    samples_per_s(n): linear between the measured points, from (0, 0) to the first one,
//    and beyond the last point the last point's per-trainer rate times n.
//    join_s: from a trainer's start (target raised, or a static job started) until it
//    trains. leave_s: from target lowered until its slot is free (it stops training at
//    once). exit_s: from its job's last sample until its slot is free.
//
// SEMANTICS (what "busy", "utilisation" and the rest mean; the harness does the same)
//  - A slot is busy when an online service holds it or a trainer holds it. A trainer holds
//    a slot from its start until it has exited: while joining, training and leaving.
//    busy(t) = min(slots, online(t) + trainers holding slots(t)); what exceeds slots is
//    "overlap" (an online service and a trainer on one slot: a trainer still leaving, or
//    minimums the policy refused to cut, see over-committed).
//    Utilisation = integral of busy over [0, horizon_s] / (slots * horizon_s).
//  - A job's progress rate at time t = samples_per_s(its trainers training at t); it
//    finishes when its progress reaches work_samples. JCT = finish - arrival.
//  - static: training is confined to the static partition, slots - max online over the
//    trace. Each job runs exactly static_trainers trainers; strict FIFO by arrival: the
//    head job starts as soon as its static_trainers fit beside the trainers holding slots
//    of the partition (checked at every event, not on a period); no preemption.
//  - elastic: a job is AddJob'ed (min, max, priority) at its arrival and RemoveJob'ed at
//    its finish. At t = k * period_s (k = 0, 1, ...) the driver calls
//    SetCapacity(slots - online(t)) and Decide(t in ms), then makes each target true at
//    once: a raised target starts trainers (they train after join_s); a lowered target
//    stops the job's newest trainers, those still joining first (they stop training at
//    once and free their slots after leave_s). A started trainer does not wait for a
//    leaving one's slot.
//  - At one instant, events apply in this order: online change, slot freed, trainer
//    starts training, job finished, arrival, decision period (elastic decisions and the
//    timeline row).
//  - Free-to-used delay: how long a slot training could use sits free while some job
//    wants it. F(t) = max(0, training capacity(t) - trainers holding slots(t)), capacity
//    being the static partition (static) or slots - online(t) (elastic). Demand: a job is
//    queued (static) / an arrived, unfinished job has fewer trainers than its maximum
//    (elastic). When F rises, the new free slots join a FIFO stamped with the time; when
//    demand appears (after an instant's event, before static starts), every stamp becomes
//    that time; a trainer start that lowers F takes the oldest and records (now - its
//    stamp); a fall of F for another reason (online services take slots back) drops the
//    newest, unrecorded. The mean is over the records.
//  - The run goes on past horizon_s until every job has finished (or until max_drain_s
//    after it); utilisation is still measured over [0, horizon_s] only, JCT over every
//    finished job. p90 is numpy's default percentile (linear between closest ranks).
//
// Thread-safety: Simulate is a pure function of its inputs; call it from any thread.
#ifndef BENCHMARKS_ELASTIC_CLUSTER_SIM_CLUSTER_SIM_H_
#define BENCHMARKS_ELASTIC_CLUSTER_SIM_CLUSTER_SIM_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"
#include "paddle_like/elastic/elastic_policy.h"

namespace pl::elastic_sim {

// One model's measured costs.
struct ModelCurve {
  std::vector<std::pair<int, double>> points;  // (trainers >= 1, samples/s >= 0), ascending
  double join_s = 0.0;
  double leave_s = 0.0;
  double exit_s = 0.0;
  // samples/s at `trainers` (0 or fewer: 0), by the rule in the file comment.
  double SamplesPerSecond(int trainers) const;
};
using Curves = std::map<std::string, ModelCurve>;  // by model name

struct TraceJob {
  std::string name;
  double arrival_s = 0.0;
  std::string model;
  double work_samples = 0.0;
  int min_trainers = 1;
  int max_trainers = 1;
  int static_trainers = 1;
  int priority = 0;
};

struct Trace {
  std::string source;
  int slots = 0;
  double horizon_s = 0.0;
  double period_s = 0.0;
  std::vector<std::pair<double, int>> online;  // (from t, slots held), t non-decreasing
  std::vector<TraceJob> jobs;

  int OnlineAt(double t) const;  // 0 before the first step
  int MaxOnline() const;
  int StaticCapacity() const { return slots - MaxOnline(); }
};

// INVALID_ARGUMENT naming the field (and the job) for a malformed or out-of-range file.
StatusOr<Trace> ParseTrace(absl::string_view json);
StatusOr<Curves> ParseCurves(absl::string_view json);
// INVALID_ARGUMENT naming the job: a model the curves lack, min > static > max, or
// static_trainers beyond the static partition (such a job could never run statically).
Status CheckTrace(const Trace& trace, const Curves& curves);

enum class Mode { kStatic, kElastic };
const char* ModeName(Mode mode);

struct SimOptions {
  Mode mode = Mode::kElastic;
  elastic::PolicyOptions policy;  // elastic only
  bool timeline = false;          // keep a TimelineRow every period_s
  // How long past horizon_s the run may go to let the queue drain; below 0: 10 x horizon_s.
  double max_drain_s = -1.0;
};

struct JobOutcome {
  std::string name;
  double arrival_s = 0.0;
  double start_s = -1.0;   // its first trainer's start; -1: never started
  double finish_s = -1.0;  // -1: not finished when the run ended
};

// The state after the decision period at t_s (timeline CSV, see plot.py for the columns).
struct TimelineRow {
  double t_s = 0.0;
  int online_slots = 0;
  int training_capacity = 0;  // static partition (static) or slots - online (elastic)
  int trainers_busy = 0;      // trainers holding slots: joining, training or leaving
  int trainers_training = 0;
  int jobs_running = 0;       // arrived, unfinished, holding at least one slot
  int jobs_queued = 0;        // arrived, unfinished, holding none
};

struct SimResult {
  Mode mode = Mode::kElastic;
  double utilisation = 0.0;
  double busy_slot_s = 0.0;     // over [0, horizon_s]
  double overlap_slot_s = 0.0;  // over [0, horizon_s]
  int jobs_total = 0;
  int jobs_finished = 0;
  int jobs_finished_by_horizon = 0;
  double mean_jct_s = 0.0;  // over finished jobs (0 when none)
  double p90_jct_s = 0.0;
  int64_t shrinks = 0;            // decisions that lowered a running job's target
  int64_t trainers_stopped = 0;   // trainers those shrinks stopped
  int64_t decisions = 0;          // Decide calls (elastic)
  int64_t over_committed_periods = 0;
  double mean_free_to_used_s = 0.0;
  int64_t free_to_used_count = 0;
  double end_s = 0.0;  // when the run ended
  std::vector<JobOutcome> jobs;  // trace order
  std::vector<TimelineRow> timeline;
};

// Runs `trace` in options.mode. CheckTrace's errors; INTERNAL if the policy refuses a job.
StatusOr<SimResult> Simulate(const Trace& trace, const Curves& curves, const SimOptions& options);

// numpy.percentile(values, p) with its default (linear) interpolation; 0 for no values.
double Percentile(std::vector<double> values, double p);

}  // namespace pl::elastic_sim

#endif  // BENCHMARKS_ELASTIC_CLUSTER_SIM_CLUSTER_SIM_H_
