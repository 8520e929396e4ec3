#include "trainer/consistent_steps.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "paddle_like/client/heartbeat.h"
#include "paddle_like/dist/step_mask.h"
#include "paddle_like/nn/dropout.h"
#include "trainer/batching.h"

namespace pl {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// How long a step is waited for between looks at the leases: a task whose holder died
// is taken over within about this much of the master handing it out.
constexpr absl::Duration kStepPoll = absl::Milliseconds(200);
// Empty slots ask the master this often while they stay empty (each ask is an event in
// the master's log).
constexpr double kLeasePollS = 0.2;

// Every dropout layer's masks from (its seed, the micro-batch's place in the job):
// the same micro-batch draws the same mask on whichever trainer computes it.
void ReseedDropout(Module& m, uint64_t call) {
  if (auto* d = dynamic_cast<Dropout*>(&m)) d->Reseed(d->seed(), call);
  for (const auto& [name, child] : m.children()) ReseedDropout(*child, call);
}

}  // namespace

StatusOr<StepSchedule> StepSchedule::From(const proto::ConsistentSchedule& s) {
  if (s.virtual_trainers() < 1 || s.virtual_trainers() > kMaxVirtualTrainers ||
      s.task_records_size() != s.virtual_trainers() || s.micro_batch() < 1 || s.num_passes() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the master's schedule is not one: ", s.virtual_trainers(),
                                                   " virtual trainers, ", s.task_records_size(), " tasks, micro-batch ",
                                                   s.micro_batch(), ", ", s.num_passes(), " passes"));
  }
  StepSchedule out;
  out.micro_batch_ = s.micro_batch();
  out.num_passes_ = s.num_passes();
  for (int t = 0; t < s.task_records_size(); ++t) {
    if (s.task_records(t) < 1) {
      return absl::InvalidArgumentError(absl::StrCat("the master's schedule: task ", t + 1, " has no records"));
    }
    out.batches_.push_back((s.task_records(t) + s.micro_batch() - 1) / s.micro_batch());
  }
  out.steps_per_pass_ = *std::max_element(out.batches_.begin(), out.batches_.end());
  for (int64_t j = 0; j < out.steps_per_pass_; ++j) {
    std::vector<int64_t> members;
    for (size_t v = 0; v < out.batches_.size(); ++v) {
      if (out.batches_[v] > j) members.push_back(static_cast<int64_t>(v));
    }
    out.masks_.push_back(StepMask(members));
  }
  return out;
}

ConsistentSteps::ConsistentSteps(StepSchedule schedule, ConsistentStepsOptions options, MasterClient* master,
                                 ParameterClient* params, StepBackend* backend, ExampleModel* model)
    : schedule_(std::move(schedule)),
      options_(std::move(options)),
      master_(master),
      params_(params),
      backend_(backend),
      model_(model),
      slots_(schedule_.virtual_trainers()) {}

Status ConsistentSteps::Take(int32_t slot, const proto::Task& task) {
  Slot& s = slots_[slot];
  s.task = task;
  s.first_step = schedule_.first_step(task.pass());
  s.last_step = s.first_step + schedule_.batches(task.id()) - 1;
  PL_ASSIGN_OR_RETURN(s.data, LoadExampleChunks(ChunksOfTask(task), model_->task()));
  const int64_t records = s.data.size();
  if ((records + schedule_.micro_batch() - 1) / schedule_.micro_batch() != schedule_.batches(task.id())) {
    return absl::DataLossError(absl::StrCat("task ", task.id(), " holds ", records, " records, not what the master's "
                                            "schedule says (", schedule_.batches(task.id()), " micro-batches)"));
  }
  // The same order on every trainer: drawn from the model's seed, the task and the pass
  // (as pl-trainer's task loop draws it).
  s.order.resize(records);
  std::iota(s.order.begin(), s.order.end(), 0);
  std::mt19937_64 rng(options_.seed ^ (task.id() * 0x9e3779b97f4a7c15ULL) ^ task.pass());
  std::shuffle(s.order.begin(), s.order.end(), rng);
  return absl::OkStatus();
}

StatusOr<bool> ConsistentSteps::KeepLeases(int64_t step, bool poll_empty) {
  // Registered again (the master had dropped this trainer): what its old id held went
  // back to the queue.
  if (master_->trainer_id() != trainer_id_) {
    for (Slot& s : slots_) {
      if (s.task.has_value()) Log(absl::StrCat("task ", s.task->id(), " went back with trainer ", trainer_id_, "'s lease"));
      s.task.reset();
    }
    trainer_id_ = master_->trainer_id();
  }
  bool job_done = false;
  // What a lease call answered: a task into slot k, or the job's end.
  auto take = [&](int32_t k, const proto::GetTaskResponse& got) -> Status {
    if (got.result() == proto::GetTaskResponse::JOB_DONE) job_done = true;
    if (got.result() != proto::GetTaskResponse::TASK) return absl::OkStatus();
    return Annotate(Take(k, got.task()), absl::StrCat("task ", got.task().id()));
  };
  for (int32_t k = 0; k < static_cast<int32_t>(slots_.size()); ++k) {
    Slot& s = slots_[k];
    // The share as the master last said (each call below may change it).
    const int32_t share = master_->lease_slots();
    if (s.task.has_value() && s.last_step < step) {
      // Its last micro-batch is applied on every pserver: reported, with the next lease
      // while the slot is within the share.
      const proto::Task done = *s.task;
      s.task.reset();
      std::string refused;
      if (k < share) {
        PL_ASSIGN_OR_RETURN(proto::GetTaskResponse got, master_->FinishAndGetTask(done, s.data.size(), k));
        refused = got.finish_refused();
        PL_RETURN_IF_ERROR(take(k, got));
      } else if (Status st = master_->TaskFinished(done, s.data.size()); !st.ok()) {
        if (!absl::IsFailedPrecondition(st) && !absl::IsNotFound(st)) return st;
        refused = std::string(st.message());
      }
      if (refused.empty()) {
        ++result_.tasks_done;
      } else {
        Log(absl::StrCat("task ", done.id(), " no longer ours (", refused, ")"));
      }
    } else if (s.task.has_value() && k >= share) {
      // Over the share: another trainer joined. Between steps, so it goes on from here.
      Log(absl::StrCat("handing task ", s.task->id(), " on: this trainer's share is now ", share, " of ",
                       slots_.size(), " tasks"));
      (void)master_->TaskFailed(*s.task, "a trainer joined: over this trainer's share", /*returned=*/true, 0,
                                /*resumable=*/true);
      s.task.reset();
    } else if (!s.task.has_value() && poll_empty && k < std::max(share, 1)) {
      // Slot 0 asks even with no share (more trainers than tasks): it hears the job's end.
      PL_ASSIGN_OR_RETURN(proto::GetTaskResponse got, master_->GetTask(k));
      PL_RETURN_IF_ERROR(take(k, got));
    }
  }
  return !job_done;
}

Status ConsistentSteps::Contribute(int64_t step) {
  struct Due {
    int32_t slot;
    int64_t j;
  };
  std::vector<Due> due;
  SparseIds ids;
  for (int32_t k = 0; k < static_cast<int32_t>(slots_.size()); ++k) {
    const Slot& s = slots_[k];
    if (!s.task.has_value() || step < s.first_step || step > s.last_step) continue;
    if (std::find(pushed_.begin(), pushed_.end(), s.task->id()) != pushed_.end()) continue;
    due.push_back({k, step - s.first_step});
  }
  if (due.empty()) return absl::OkStatus();
  // Virtual-trainer order: a trainer's own pushes of a step leave in the order the
  // shards sum them (any order would do; this one lets a shard sum as they come).
  std::sort(due.begin(), due.end(), [&](const Due& a, const Due& b) {
    return slots_[a.slot].task->id() < slots_[b.slot].task->id();
  });
  std::vector<ExampleSet> batches;
  std::vector<Batcher> batchers;
  batchers.reserve(due.size());
  for (const Due& d : due) {
    const Slot& s = slots_[d.slot];
    const size_t begin = static_cast<size_t>(d.j * schedule_.micro_batch());
    const size_t end = std::min(s.order.size(), begin + static_cast<size_t>(schedule_.micro_batch()));
    batchers.emplace_back(&s.data);
    batches.push_back(batchers.back().Gather(s.order, begin, end));
    for (auto& [table, rows] : model_->SparseInputs(batches.back().inputs)) {
      auto it = std::find_if(ids.begin(), ids.end(), [&](const auto& t) { return t.first == table; });
      if (it == ids.end()) it = ids.insert(ids.end(), {table, {}});
      it->second.insert(it->second.end(), rows.begin(), rows.end());
    }
  }
  for (auto& [table, rows] : ids) {
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  }
  const double pull_start = Now();
  Status pulled = params_->PullStep(step, ids);
  if (absl::IsFailedPrecondition(pulled)) {
    // Every pserver is past the step (another trainer pushed these micro-batches before
    // it left them): nothing of it is left to do.
    PL_ASSIGN_OR_RETURN(int64_t seen, params_->WaitForStep(step + 1, absl::ZeroDuration()));
    if (seen > step) return absl::OkStatus();
  }
  PL_RETURN_IF_ERROR(Annotate(pulled, absl::StrCat("pulling step ", step)));
  PL_RETURN_IF_ERROR(backend_->ImportParameters());
  result_.exchange_s += Now() - pull_start;
  const std::string& expects = schedule_.expects(step);
  for (size_t i = 0; i < due.size(); ++i) {
    const Slot& s = slots_[due[i].slot];
    const int32_t v = static_cast<int32_t>(s.task->id() - 1);
    ReseedDropout(model_->module(), static_cast<uint64_t>(step) * schedule_.virtual_trainers() + v);
    const double compute_start = Now();
    PL_ASSIGN_OR_RETURN(StepStats stats, backend_->ComputeGradients(*model_, batches[i]));
    PL_RETURN_IF_ERROR(backend_->ExportGradients());
    const double push_start = Now();
    PL_RETURN_IF_ERROR(Annotate(params_->PushMicroBatch(step, v, expects, stats.samples),
                                absl::StrCat("pushing virtual trainer ", v, "'s micro-batch of step ", step)));
    const double push_end = Now();
    result_.compute_s += push_start - compute_start;
    result_.exchange_s += push_end - push_start;
    pushed_.push_back(s.task->id());
    ++result_.micro_batches;
    result_.samples += stats.samples;
    window_loss_ += stats.loss;
    window_correct_ += stats.correct;
    window_samples_ += stats.samples;
    ++window_batches_;
    if (options_.observer != nullptr) {
      options_.observer->OnStep({result_.micro_batches, stats.loss,
                                 model_->task() == TaskKind::kClassification ? stats.correct : -1, stats.samples,
                                 push_start - compute_start, push_end - push_start, push_end - compute_start, 0});
    }
  }
  return absl::OkStatus();
}

void ConsistentSteps::GiveBack(const std::string& why) {
  std::vector<int64_t> ids;
  for (Slot& s : slots_) {
    if (!s.task.has_value()) continue;
    (void)master_->TaskFailed(*s.task, why, /*returned=*/true, 0, /*resumable=*/true);
    ids.push_back(s.task->id());
    s.task.reset();
  }
  if (!ids.empty()) {
    Log(absl::StrCat(why, ": handed task(s) ", absl::StrJoin(ids, ", "), " on; whoever takes them goes on from "
                     "the job's step"));
  }
}

StatusOr<ConsistentStepsResult> ConsistentSteps::Run(const std::atomic<bool>& stop, const std::atomic<bool>* leave) {
  trainer_id_ = master_->trainer_id();
  Log(absl::StrFormat("virtual trainers: %d, micro-batch %d, %d steps a pass, %d in all; this trainer takes %d of "
                      "the tasks for now",
                      schedule_.virtual_trainers(), schedule_.micro_batch(), schedule_.steps_per_pass(),
                      schedule_.total_steps(), master_->lease_slots()));
  PL_ASSIGN_OR_RETURN(int64_t step, params_->WaitForStep(0, absl::ZeroDuration()));
  last_log_ = Now();
  double last_poll = -1;
  Status error;
  while (true) {
    const bool leaving = leave != nullptr && leave->load();
    if (stop.load() || leaving) {
      GiveBack(leaving ? "leaving as asked" : "stop requested");
      result_.stopped = true;
      result_.left = leaving && !stop.load();
      break;
    }
    const double now = Now();
    const bool poll = now - last_poll >= kLeasePollS;
    if (poll) last_poll = now;
    StatusOr<bool> going = KeepLeases(step, poll);
    if (!going.ok()) {
      error = going.status();
      break;
    }
    if (!*going) {
      result_.job_done = true;
      break;
    }
    if (Status c = Contribute(step); !c.ok()) {
      error = c;
      break;
    }
    const double wait_start = Now();
    StatusOr<int64_t> seen = params_->WaitForStep(step + 1, kStepPoll);
    if (!seen.ok()) {
      error = seen.status();
      break;
    }
    if (*seen > step) {
      result_.steps_seen += *seen - step;
      step = *seen;
      pushed_.clear();
    } else {
      result_.waited_s += Now() - wait_start;
      // A pserver that did not answer at all: not a busy loop.
      if (Now() - wait_start < absl::ToDoubleSeconds(kStepPoll) / 4) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (Now() - last_log_ >= options_.log_every_s && window_batches_ > 0) {
      std::string line = absl::StrFormat("step %d of %d  pass %d  loss %.4f", step, schedule_.total_steps(),
                                         step / schedule_.steps_per_pass() + 1, window_loss_ / window_batches_);
      if (model_->task() == TaskKind::kClassification) {
        absl::StrAppendFormat(&line, "  train acc %.4f", double(window_correct_) / std::max<int64_t>(window_samples_, 1));
      }
      absl::StrAppendFormat(&line, "  %.0f samples/s", window_samples_ / (Now() - last_log_));
      Log(line);
      last_log_ = Now();
      window_loss_ = 0;
      window_batches_ = window_correct_ = window_samples_ = 0;
    }
  }
  if (!error.ok()) {
    GiveBack(absl::StrCat("an error (", error.message(), ")"));
    if (stop.load()) {
      result_.stopped = true;
      return result_;
    }
    return error;
  }
  return result_;
}

}  // namespace pl
