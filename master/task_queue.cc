#include "master/task_queue.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"

namespace pl {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const char* StateName(proto::TaskRecord::State s) {
  switch (s) {
    case proto::TaskRecord::TODO: return "todo";
    case proto::TaskRecord::PENDING: return "pending";
    case proto::TaskRecord::DONE: return "done";
    case proto::TaskRecord::FAILED: return "failed";
    default: return "unknown";
  }
}

Status CheckOptions(const TaskQueueOptions& o) {
  if (o.num_passes < 1) return absl::InvalidArgumentError(absl::StrCat("task queue: num_passes must be >= 1, got ", o.num_passes));
  if (o.chunks_per_task < 1) {
    return absl::InvalidArgumentError(absl::StrCat("task queue: chunks_per_task must be >= 1, got ", o.chunks_per_task));
  }
  if (o.max_failures < 1) return absl::InvalidArgumentError(absl::StrCat("task queue: max_failures must be >= 1, got ", o.max_failures));
  if (o.lease_ms <= 0) return absl::InvalidArgumentError(absl::StrCat("task queue: lease_ms must be > 0, got ", o.lease_ms));
  if (o.virtual_trainers < 0 || o.virtual_trainers > kMaxVirtualTrainers) {
    return absl::InvalidArgumentError(absl::StrCat("task queue: virtual_trainers must be in 0..", kMaxVirtualTrainers,
                                                   ", got ", o.virtual_trainers));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> PassOrder(int64_t num_tasks, uint64_t seed, int32_t pass) {
  std::vector<int64_t> order(num_tasks);
  for (int64_t i = 0; i < num_tasks; ++i) order[i] = i + 1;
  uint64_t state = seed ^ (0x632be59bd9b4e019ull * static_cast<uint64_t>(pass));
  for (int64_t i = num_tasks - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(SplitMix64(&state) % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

TaskQueue::TaskQueue(TaskQueueOptions options, Clock now_ms, Logger log)
    : options_(options), now_ms_(std::move(now_ms)), log_(std::move(log)) {}

void TaskQueue::Log(const std::string& line) const {
  if (log_) {
    log_(line);
  } else {
    log::Info(line);
  }
}

StatusOr<TaskQueue> TaskQueue::Create(const std::vector<ChunkInfo>& chunks, const TaskQueueOptions& options,
                                      Clock now_ms, Logger log) {
  PL_RETURN_IF_ERROR(CheckOptions(options));
  if (chunks.empty()) return absl::InvalidArgumentError("task queue: the dataset has no chunks");
  if (!now_ms) return absl::InvalidArgumentError("task queue: no clock");
  const size_t V = static_cast<size_t>(options.virtual_trainers);
  if (V > 0 && chunks.size() < V) {
    return absl::InvalidArgumentError(absl::StrCat("task queue: ", V, " virtual trainers need at least ", V,
                                                   " chunks (one task each), the data has ", chunks.size(),
                                                   ": write it in smaller chunks"));
  }
  // The first task of each group: every chunks_per_task chunks, or V groups whose sizes
  // differ by one chunk at most (the larger first).
  std::vector<size_t> starts;
  if (V > 0) {
    for (size_t t = 0, at = 0; t < V; at += chunks.size() / V + (t < chunks.size() % V ? 1 : 0), ++t) starts.push_back(at);
  } else {
    for (size_t i = 0; i < chunks.size(); i += options.chunks_per_task) starts.push_back(i);
  }
  TaskQueue q(options, std::move(now_ms), std::move(log));
  for (size_t t = 0; t < starts.size(); ++t) {
    const size_t i = starts[t];
    const size_t end = t + 1 < starts.size() ? starts[t + 1] : chunks.size();
    Entry e;
    e.task.set_id(static_cast<int64_t>(q.tasks_.size()) + 1);
    for (size_t k = i; k < end; ++k) {
      const ChunkInfo& c = chunks[k];
      proto::Chunk* pc = e.task.add_chunks();
      pc->set_path(c.path);
      pc->set_offset(c.offset);
      pc->set_length(c.length);
      pc->set_num_records(c.num_records);
      pc->set_index(c.index);
    }
    q.tasks_.push_back(std::move(e));
  }
  q.StartPass(1);
  return q;
}

void TaskQueue::StartPass(int32_t pass) {
  pass_ = pass;
  for (Entry& e : tasks_) {
    if (ahead_started_ && e.task.pass() == pass) continue;  // leased ahead: already in this pass
    e.state = proto::TaskRecord::TODO;
    e.failures = 0;
    e.holder = 0;
    e.finished_by = 0;
    e.task.set_pass(pass);
    e.task.set_lease_deadline_ms(0);
  }
  if (ahead_started_) {
    todo_ = std::move(ahead_todo_);
  } else {
    std::vector<int64_t> order = PassOrder(num_tasks(), options_.seed, pass);
    todo_.assign(order.begin(), order.end());
  }
  ahead_started_ = false;
  ahead_todo_.clear();
  ahead_done_before_ = ahead_failed_before_ = 0;
  Reindex();
}

TaskQueue::Entry* TaskQueue::LeaseAhead() {
  if (!options_.overlap_passes || pass_ >= options_.num_passes) return nullptr;
  if (!ahead_started_) {
    std::vector<int64_t> order = PassOrder(num_tasks(), options_.seed, pass_ + 1);
    ahead_todo_.assign(order.begin(), order.end());
    ahead_started_ = true;
  }
  // The first task in the next pass's order that this pass is through with, or that
  // came back into the next pass's todo (a failure, a return).
  for (auto it = ahead_todo_.begin(); it != ahead_todo_.end(); ++it) {
    Entry& e = tasks_[*it - 1];
    const bool through =
        e.task.pass() == pass_ && (e.state == proto::TaskRecord::DONE || e.state == proto::TaskRecord::FAILED);
    const bool back = e.task.pass() == pass_ + 1 && e.state == proto::TaskRecord::TODO;
    if (!through && !back) continue;
    ahead_todo_.erase(it);
    if (through) {
      (e.state == proto::TaskRecord::DONE ? ahead_done_before_ : ahead_failed_before_)++;
      e.failures = 0;
      e.finished_before = e.state == proto::TaskRecord::DONE ? e.finished_by : 0;
      e.finished_by = 0;
    }
    return &e;
  }
  return nullptr;
}

void TaskQueue::Reindex() {
  for (auto& c : count_) c.fill(0);
  held_.clear();
  next_expiry_ms_ = std::numeric_limits<int64_t>::max();
  for (const Entry& e : tasks_) {
    ++count_[Ahead(e)][e.state];
    if (e.state == proto::TaskRecord::PENDING) {
      held_.emplace(Holder(e.holder, e.holder_slot), e.task.id());
      next_expiry_ms_ = std::min(next_expiry_ms_, e.task.lease_deadline_ms());
    }
  }
}

void TaskQueue::Move(Entry& e, proto::TaskRecord::State to, int32_t pass) {
  if (e.state == proto::TaskRecord::PENDING) {
    auto it = held_.find(Holder(e.holder, e.holder_slot));
    if (it != held_.end() && it->second == e.task.id()) held_.erase(it);
  }
  --count_[Ahead(e)][e.state];
  if (pass > 0) e.task.set_pass(pass);
  ++count_[Ahead(e)][to];
  e.state = to;
  if (to == proto::TaskRecord::PENDING) {
    held_[Holder(e.holder, e.holder_slot)] = e.task.id();
    next_expiry_ms_ = std::min(next_expiry_ms_, e.task.lease_deadline_ms());
  }
}

void TaskQueue::MaybeAdvance() {
  if (job_done_ || !todo_.empty() || pending() > 0) return;
  int64_t failed_now = failed();
  Log(absl::StrCat("pass ", pass_, " of ", options_.num_passes, " finished: ", done(), " tasks done, ", failed_now,
                   " failed"));
  if (pass_ < options_.num_passes) {
    StartPass(pass_ + 1);
    Log(absl::StrCat("pass ", pass_, " of ", options_.num_passes, " started: ", todo_.size(), " tasks"));
  } else {
    job_done_ = true;
    Log(absl::StrCat("job done: ", options_.num_passes, " passes, ", chunks_trained_, " chunks trained, ",
                     samples_done_, " samples"));
  }
}

int64_t TaskQueue::pending() const { return count_[0][proto::TaskRecord::PENDING]; }
int64_t TaskQueue::done() const { return count_[0][proto::TaskRecord::DONE] + ahead_done_before_; }
int64_t TaskQueue::failed() const { return count_[0][proto::TaskRecord::FAILED] + ahead_failed_before_; }
int64_t TaskQueue::leased_ahead() const {
  int64_t n = 0;
  for (int64_t c : count_[1]) n += c;
  return n;
}

int64_t TaskQueue::holder(int64_t task_id) const {
  if (task_id < 1 || task_id > num_tasks()) return 0;
  const Entry& e = tasks_[task_id - 1];
  return e.state == proto::TaskRecord::PENDING ? e.holder : 0;
}

TaskQueue::Lease TaskQueue::GetTask(int64_t trainer_id, int32_t slot) {
  Lease lease;
  if (job_done_) {
    lease.result = Result::kJobDone;
    return lease;
  }
  const int64_t deadline = now_ms_() + options_.lease_ms;
  if (auto held = held_.find(Holder(trainer_id, slot)); held != held_.end()) {
    Entry& e = tasks_[held->second - 1];
    e.task.set_lease_deadline_ms(deadline);
    next_expiry_ms_ = std::min(next_expiry_ms_, deadline);
    lease.result = Result::kTask;
    lease.task = e.task;
    return lease;
  }
  Entry* next = nullptr;
  int32_t pass = pass_;
  if (!todo_.empty()) {
    next = &tasks_[todo_.front() - 1];
    todo_.pop_front();
  } else if ((next = LeaseAhead()) != nullptr) {
    // This pass's last tasks are out: rather than wait, start on the next pass.
    pass = pass_ + 1;
  } else {
    lease.result = Result::kWait;
    return lease;
  }
  Entry& e = *next;
  e.holder = trainer_id;
  e.holder_slot = slot;
  e.task.set_lease_deadline_ms(deadline);
  Move(e, proto::TaskRecord::PENDING, pass);
  lease.result = Result::kTask;
  lease.task = e.task;
  return lease;
}

StatusOr<TaskQueue::Entry*> TaskQueue::FindForReport(int64_t trainer_id, int64_t task_id, int32_t pass,
                                                     const char* what) {
  if (task_id < 1 || task_id > num_tasks()) {
    return absl::NotFoundError(absl::StrCat(what, " from trainer ", trainer_id, ": no task ", task_id, " (the job has tasks 1..",
                                            num_tasks(), ")"));
  }
  if (job_done_) {
    return absl::FailedPreconditionError(absl::StrCat(what, " from trainer ", trainer_id, " for task ", task_id,
                                                      ": the job is done"));
  }
  Entry& e = tasks_[task_id - 1];
  if (pass != e.task.pass()) {
    return absl::FailedPreconditionError(absl::StrCat(what, " from trainer ", trainer_id, " for task ", task_id,
                                                      " of pass ", pass, ": the master is in pass ", pass_,
                                                      e.task.pass() != pass_ ? " (the task is leased ahead, in the next)"
                                                                             : ""));
  }
  return &e;
}

void TaskQueue::RemoveFromTodo(const Entry& e) {
  std::deque<int64_t>& list = TodoOf(e);
  auto it = std::find(list.begin(), list.end(), e.task.id());
  if (it != list.end()) list.erase(it);
}

Status TaskQueue::TaskFinished(int64_t trainer_id, int64_t task_id, int32_t pass, int64_t num_samples) {
  if (num_samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("task finished from trainer ", trainer_id, " for task ", task_id,
                                                   ": negative num_samples ", num_samples));
  }
  // A retry of a report that counted, for a task leased ahead since (its reply was lost).
  if (task_id >= 1 && task_id <= num_tasks() && !job_done_ && pass == pass_ &&
      tasks_[task_id - 1].task.pass() == pass_ + 1 && tasks_[task_id - 1].finished_before == trainer_id) {
    return absl::OkStatus();
  }
  PL_ASSIGN_OR_RETURN(Entry * e, FindForReport(trainer_id, task_id, pass, "task finished"));
  if (e->state == proto::TaskRecord::DONE && e->finished_by == trainer_id) return absl::OkStatus();  // a retry
  bool mine = (e->state == proto::TaskRecord::PENDING && e->holder == trainer_id) ||
              // The lease lapsed but nobody took the task yet: the work is done, keep it.
              (e->state == proto::TaskRecord::TODO && e->holder == trainer_id);
  if (!mine) {
    std::string where = e->state == proto::TaskRecord::PENDING
                            ? absl::StrCat("it is leased to trainer ", e->holder)
                            : absl::StrCat("it is ", StateName(e->state));
    return absl::FailedPreconditionError(absl::StrCat("task finished from trainer ", trainer_id, " for task ", task_id,
                                                      " of pass ", pass, ": not leased to that trainer (", where, ")"));
  }
  if (e->state == proto::TaskRecord::TODO) RemoveFromTodo(*e);
  Move(*e, proto::TaskRecord::DONE);
  e->finished_by = trainer_id;
  e->task.set_lease_deadline_ms(0);
  chunks_trained_ += e->task.chunks_size();
  samples_done_ += num_samples;
  MaybeAdvance();
  return absl::OkStatus();
}

void TaskQueue::CountFailure(Entry& e, const std::string& reason) {
  if (e.state == proto::TaskRecord::TODO) RemoveFromTodo(e);
  e.task.set_lease_deadline_ms(0);
  ++e.failures;
  if (e.failures >= options_.max_failures) {
    Move(e, proto::TaskRecord::FAILED);
    auto it = std::lower_bound(failed_ever_.begin(), failed_ever_.end(), e.task.id());
    if (it == failed_ever_.end() || *it != e.task.id()) failed_ever_.insert(it, e.task.id());
    Log(absl::StrCat("task ", e.task.id(), " set aside as failed in pass ", e.task.pass(), " after ", e.failures,
                     " failures (last: ", reason, ")"));
  } else {
    Move(e, proto::TaskRecord::TODO);
    TodoOf(e).push_back(e.task.id());
  }
}

Status TaskQueue::TaskFailed(int64_t trainer_id, int64_t task_id, int32_t pass, bool returned,
                             const std::string& reason) {
  PL_ASSIGN_OR_RETURN(Entry * e, FindForReport(trainer_id, task_id, pass, "task failed"));
  if (e->state == proto::TaskRecord::TODO && e->holder == trainer_id) return absl::OkStatus();  // already back
  if (e->state != proto::TaskRecord::PENDING || e->holder != trainer_id) {
    std::string where = e->state == proto::TaskRecord::PENDING
                            ? absl::StrCat("it is leased to trainer ", e->holder)
                            : absl::StrCat("it is ", StateName(e->state));
    return absl::FailedPreconditionError(absl::StrCat("task failed from trainer ", trainer_id, " for task ", task_id,
                                                      " of pass ", pass, ": not leased to that trainer (", where, ")"));
  }
  if (returned) {
    Move(*e, proto::TaskRecord::TODO);
    e->task.set_lease_deadline_ms(0);
    TodoOf(*e).push_front(task_id);
  } else {
    CountFailure(*e, absl::StrCat("trainer ", trainer_id, ": ", reason));
  }
  MaybeAdvance();
  return absl::OkStatus();
}

bool TaskQueue::RenewLease(int64_t trainer_id, int64_t task_id) {
  if (task_id < 1 || task_id > num_tasks()) return false;
  Entry& e = tasks_[task_id - 1];
  if (e.state != proto::TaskRecord::PENDING || e.holder != trainer_id) return false;
  e.task.set_lease_deadline_ms(now_ms_() + options_.lease_ms);
  next_expiry_ms_ = std::min(next_expiry_ms_, e.task.lease_deadline_ms());  // a clock set back
  return true;
}

int TaskQueue::RenewLeases(int64_t trainer_id) {
  int n = 0;
  for (int64_t id : TasksHeldBy(trainer_id)) n += RenewLease(trainer_id, id) ? 1 : 0;
  return n;
}

int TaskQueue::ExpireLeases(int64_t now_ms) {
  const int64_t now = now_ms >= 0 ? now_ms : now_ms_();
  // Every lease ends at or after next_expiry_ms_ (leases are given as now + lease_ms, so
  // a later one never ends before an earlier one): most calls look at nothing.
  if (now < next_expiry_ms_) return 0;
  int n = 0;
  int64_t next = std::numeric_limits<int64_t>::max();
  for (Entry& e : tasks_) {
    if (e.state != proto::TaskRecord::PENDING) continue;
    if (e.task.lease_deadline_ms() <= now) {
      CountFailure(e, absl::StrCat("lease of trainer ", e.holder, " expired"));
      ++n;
    } else {
      next = std::min(next, e.task.lease_deadline_ms());
    }
  }
  next_expiry_ms_ = next;
  if (n > 0) MaybeAdvance();
  return n;
}

int TaskQueue::ReleaseTrainer(int64_t trainer_id, bool count_failure) {
  int n = 0;
  for (int64_t id : TasksHeldBy(trainer_id)) {
    Entry& e = tasks_[id - 1];
    ++n;
    if (count_failure) {
      CountFailure(e, absl::StrCat("trainer ", trainer_id, " was dropped"));
    } else {
      Move(e, proto::TaskRecord::TODO);
      e.task.set_lease_deadline_ms(0);
      TodoOf(e).push_front(e.task.id());
    }
  }
  if (n > 0) MaybeAdvance();
  return n;
}

proto::TaskQueueState TaskQueue::Serialize() const {
  proto::TaskQueueState s;
  s.set_num_passes(options_.num_passes);
  s.set_chunks_per_task(options_.chunks_per_task);
  s.set_max_failures(options_.max_failures);
  s.set_seed(options_.seed);
  s.set_lease_ms(options_.lease_ms);
  s.set_no_overlap(!options_.overlap_passes);
  s.set_pass(pass_);
  s.set_job_done(job_done_);
  for (const Entry& e : tasks_) {
    proto::TaskRecord* r = s.add_tasks();
    r->set_id(e.task.id());
    *r->mutable_chunks() = e.task.chunks();
    r->set_state(e.state);
    r->set_failures(e.failures);
    r->set_holder(e.holder);
    r->set_lease_deadline_ms(e.task.lease_deadline_ms());
    r->set_finished_by(e.finished_by);
    if (e.task.pass() != pass_) r->set_pass(e.task.pass());
    r->set_finished_before(e.finished_before);
    r->set_holder_slot(e.holder_slot);
  }
  for (int64_t id : todo_) s.add_todo(id);
  s.set_ahead_started(ahead_started_);
  for (int64_t id : ahead_todo_) s.add_ahead_todo(id);
  s.set_ahead_done_before(ahead_done_before_);
  s.set_ahead_failed_before(ahead_failed_before_);
  for (int64_t id : failed_ever_) s.add_failed_ever(id);
  s.set_chunks_trained(chunks_trained_);
  s.set_samples_done(samples_done_);
  s.set_virtual_trainers(options_.virtual_trainers);
  s.set_micro_batch(micro_batch_);
  return s;
}

StatusOr<TaskQueue> TaskQueue::Deserialize(const proto::TaskQueueState& s, Clock now_ms, Logger log) {
  auto bad = [](const std::string& why) { return absl::DataLossError("task queue state: " + why); };
  TaskQueueOptions o;
  o.num_passes = s.num_passes();
  o.chunks_per_task = s.chunks_per_task();
  o.max_failures = s.max_failures();
  o.seed = s.seed();
  o.lease_ms = s.lease_ms();
  o.overlap_passes = !s.no_overlap();
  o.virtual_trainers = s.virtual_trainers();
  Status st = CheckOptions(o);
  if (!st.ok()) return bad(std::string(st.message()));
  if (!now_ms) return absl::InvalidArgumentError("task queue: no clock");
  if (s.tasks_size() == 0) return bad("no tasks");
  if (s.pass() < 1 || s.pass() > o.num_passes) return bad(absl::StrCat("pass ", s.pass(), " outside 1..", o.num_passes));
  TaskQueue q(o, std::move(now_ms), std::move(log));
  q.pass_ = s.pass();
  q.job_done_ = s.job_done();
  q.chunks_trained_ = s.chunks_trained();
  q.samples_done_ = s.samples_done();
  q.micro_batch_ = s.micro_batch();
  if (o.virtual_trainers > 0 && s.tasks_size() != o.virtual_trainers) {
    return bad(absl::StrCat(s.tasks_size(), " tasks for ", o.virtual_trainers, " virtual trainers"));
  }
  if (q.micro_batch_ < 0) return bad(absl::StrCat("micro-batch of ", q.micro_batch_, " samples"));
  int64_t num_todo = 0;
  for (int i = 0; i < s.tasks_size(); ++i) {
    const proto::TaskRecord& r = s.tasks(i);
    if (r.id() != i + 1) return bad(absl::StrCat("task at position ", i, " has id ", r.id(), ", expected ", i + 1));
    if (r.chunks_size() == 0) return bad(absl::StrCat("task ", r.id(), " has no chunks"));
    if (!proto::TaskRecord::State_IsValid(r.state())) return bad(absl::StrCat("task ", r.id(), " has an unknown state"));
    if (r.state() == proto::TaskRecord::PENDING && r.holder() <= 0) {
      return bad(absl::StrCat("task ", r.id(), " is pending without a holder"));
    }
    if (r.holder_slot() < 0 || (r.holder_slot() > 0 && o.virtual_trainers == 0)) {
      return bad(absl::StrCat("task ", r.id(), " is held in lease slot ", r.holder_slot()));
    }
    const int32_t pass = r.pass() == 0 ? q.pass_ : r.pass();
    if (pass != q.pass_ && !(pass == q.pass_ + 1 && s.ahead_started())) {
      return bad(absl::StrCat("task ", r.id(), " is in pass ", pass, " while the queue is in pass ", q.pass_));
    }
    if (r.state() == proto::TaskRecord::TODO && pass == q.pass_) ++num_todo;
    Entry e;
    e.task.set_id(r.id());
    e.task.set_pass(pass);
    *e.task.mutable_chunks() = r.chunks();
    e.task.set_lease_deadline_ms(r.state() == proto::TaskRecord::PENDING ? r.lease_deadline_ms() : 0);
    e.state = r.state();
    e.failures = r.failures();
    e.holder = r.holder();
    e.finished_by = r.finished_by();
    e.finished_before = r.finished_before();
    e.holder_slot = r.holder_slot();
    q.tasks_.push_back(std::move(e));
  }
  // Seen marks by task id (10^6 tasks: a set's node per task cost a restore ~0.3 s).
  std::vector<bool> seen(static_cast<size_t>(q.num_tasks()) + 1, false);
  for (int64_t id : s.todo()) {
    if (id < 1 || id > q.num_tasks() || q.tasks_[id - 1].state != proto::TaskRecord::TODO || seen[id]) {
      return bad(absl::StrCat("todo list names task ", id, " which is not a distinct todo task"));
    }
    seen[id] = true;
    q.todo_.push_back(id);
  }
  if (s.todo_size() != num_todo) {
    return bad(absl::StrCat(num_todo, " tasks are todo but the todo list has ", s.todo_size()));
  }
  q.ahead_started_ = s.ahead_started();
  std::vector<bool> ahead_seen(static_cast<size_t>(q.num_tasks()) + 1, false);
  for (int64_t id : s.ahead_todo()) {
    if (id < 1 || id > q.num_tasks() || ahead_seen[id]) {
      return bad(absl::StrCat("the next pass's todo list names task ", id, " twice or out of range"));
    }
    ahead_seen[id] = true;
    q.ahead_todo_.push_back(id);
  }
  for (const Entry& e : q.tasks_) {
    if (e.task.pass() != q.pass_ && e.state == proto::TaskRecord::TODO && !ahead_seen[e.task.id()]) {
      return bad(absl::StrCat("task ", e.task.id(), " is todo in the next pass but not in its todo list"));
    }
  }
  q.ahead_done_before_ = s.ahead_done_before();
  q.ahead_failed_before_ = s.ahead_failed_before();
  q.failed_ever_.assign(s.failed_ever().begin(), s.failed_ever().end());
  std::sort(q.failed_ever_.begin(), q.failed_ever_.end());
  q.Reindex();
  for (const Entry& e : q.tasks_) {
    if (e.state == proto::TaskRecord::PENDING && q.held_.at(Holder(e.holder, e.holder_slot)) != e.task.id()) {
      return bad(absl::StrCat("tasks ", e.task.id(), " and ", q.held_.at(Holder(e.holder, e.holder_slot)),
                              " are both held in slot ", e.holder_slot, " of trainer ", e.holder));
    }
  }
  if (q.job_done_ && (num_todo > 0 || q.pending() > 0)) return bad("job marked done with tasks still todo or pending");
  return q;
}

void TaskQueue::ExtendLeases(int64_t until_ms) {
  for (Entry& e : tasks_) {
    if (e.state == proto::TaskRecord::PENDING && e.task.lease_deadline_ms() < until_ms) {
      e.task.set_lease_deadline_ms(until_ms);
    }
  }
}

int64_t TaskQueue::TaskHeldBy(int64_t trainer_id) const {
  const std::vector<int64_t> held = TasksHeldBy(trainer_id);
  return held.empty() ? 0 : held.front();
}

std::vector<int64_t> TaskQueue::TasksHeldBy(int64_t trainer_id) const {
  if (options_.virtual_trainers == 0) {  // one slot: no scan
    auto held = held_.find(Holder(trainer_id, 0));
    return held == held_.end() ? std::vector<int64_t>{} : std::vector<int64_t>{held->second};
  }
  std::vector<int64_t> ids;  // by slot
  for (int32_t slot = 0; slot < options_.virtual_trainers; ++slot) {
    if (auto held = held_.find(Holder(trainer_id, slot)); held != held_.end()) ids.push_back(held->second);
  }
  return ids;
}

Status TaskQueue::FixMicroBatch(int64_t samples) {
  if (samples < 1) return absl::InvalidArgumentError(absl::StrCat("a micro-batch of ", samples, " samples"));
  if (micro_batch_ == 0) {
    micro_batch_ = samples;
    return absl::OkStatus();
  }
  if (samples != micro_batch_) {
    return absl::FailedPreconditionError(absl::StrCat("this job's micro-batch is ", micro_batch_,
                                                      " samples (its first trainer's --batch_size), not ", samples));
  }
  return absl::OkStatus();
}

std::vector<int64_t> TaskQueue::task_records() const {
  std::vector<int64_t> records;
  records.reserve(tasks_.size());
  for (const Entry& e : tasks_) {
    int64_t n = 0;
    for (const proto::Chunk& c : e.task.chunks()) n += c.num_records();
    records.push_back(n);
  }
  return records;
}

}  // namespace pl
