// TaskQueue: the master's work list. The dataset's chunks are cut into tasks of
// `chunks_per_task` consecutive chunks with stable ids 1..T; every pass (epoch)
// 1..num_passes puts all tasks in `todo` in an order shuffled deterministically from
// (seed, pass), and each task moves
//
//   todo → pending (leased to one trainer until a deadline) → done
//
// or back to todo when its lease expires or its trainer reports it failed. A task that
// fails `max_failures` times in a pass is set aside as failed for the rest of that pass
// (and reported in failed_task_ids); it gets a fresh chance in the next pass, so no
// task is retried forever. A task returned on purpose (the trainer was asked to stop)
// goes back to the front of todo at once and counts no failure. A pass ends when todo
// and pending are empty; after the last pass the job is done.
//
// Pass overlap (options.overlap_passes): while the last tasks of pass P are out, a
// trainer asking for work is leased a task of pass P+1 that P is done with (in P+1's
// order), rather than told to wait; such a task is reported with pass P+1, fails and
// returns into P+1's todo, and when P ends, P+1 starts with what was leased ahead
// already underway. The counts (todo/pending/done/failed) stay those of pass P: its
// tasks leased ahead count as done (or failed) in P, where they ended.
//
// Virtual trainers (options.virtual_trainers V > 0, docs/consistent-training.md): the
// chunks are cut into exactly V tasks of consecutive chunks (sizes differing by one
// chunk at most), and a trainer may hold several tasks at once, one in each of its
// lease slots (GetTask's `slot`). The first trainer to register fixes the job's
// micro-batch (FixMicroBatch), which with the tasks' records gives every trainer the
// same schedule of steps.
//
// Time comes from the injected `now_ms` (unix milliseconds), so lease deadlines mean
// the same thing to a restarted master and tests can drive time by hand.
//
// Thread-safety: not thread-safe; the master serialises all calls under its mutex.
#ifndef PADDLE_LIKE_MASTER_TASK_QUEUE_H_
#define PADDLE_LIKE_MASTER_TASK_QUEUE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/core/status.h"
#include "paddle_like/data/chunk_index.h"
#include "paddle_like/dist/step_mask.h"
#include "proto/master.pb.h"
#include "proto/master_state.pb.h"

namespace pl {

struct TaskQueueOptions {
  int32_t num_passes = 1;       // >= 1
  int32_t chunks_per_task = 1;  // >= 1; the last task may have fewer
  int32_t max_failures = 3;     // >= 1: failures (incl. lease expiries) before setting aside
  uint64_t seed = 0;            // shuffle seed; the same seed gives the same orders
  int64_t lease_ms = 3000;      // > 0: how long a task lease lasts without renewal
  // Pass overlap: once every task of the pass is out (todo empty, some still pending),
  // a trainer that asks gets a task of the next pass that this one is through with,
  // instead of waiting. Every task is still trained exactly once per pass.
  bool overlap_passes = true;
  // > 0: a job of V virtual trainers: exactly V tasks (chunks_per_task is ignored), and
  // a trainer may hold several (one per lease slot).
  int32_t virtual_trainers = 0;
};

class TaskQueue {
 public:
  using Clock = std::function<int64_t()>;
  using Logger = std::function<void(const std::string&)>;

  enum class Result { kTask, kWait, kJobDone };
  struct Lease {
    Result result = Result::kWait;
    proto::Task task;  // set when result == kTask
  };

  // INVALID_ARGUMENT for bad options or no chunks. Pass 1 starts at once.
  static StatusOr<TaskQueue> Create(const std::vector<ChunkInfo>& chunks, const TaskQueueOptions& options,
                                    Clock now_ms, Logger log = nullptr);
  // Rebuilds a queue from Serialize()'s output; DATA_LOSS naming the inconsistency
  // when the state does not describe a valid queue.
  static StatusOr<TaskQueue> Deserialize(const proto::TaskQueueState& state, Clock now_ms, Logger log = nullptr);
  proto::TaskQueueState Serialize() const;

  // Leases the next todo task to `trainer_id`'s lease slot `slot` (0 unless the job has
  // virtual trainers). A slot that already holds a task gets that same task again (so a
  // retried call after a lost reply leases nothing twice).
  Lease GetTask(int64_t trainer_id, int32_t slot = 0);
  // OK when the trainer held the task in `pass` (also when its lease had lapsed but no
  // one else took the task, and on a repeated report). FAILED_PRECONDITION when the
  // task is held by another trainer, belongs to another pass or the job is done;
  // NOT_FOUND for an unknown task id; INVALID_ARGUMENT for negative samples.
  Status TaskFinished(int64_t trainer_id, int64_t task_id, int32_t pass, int64_t num_samples);
  // `returned`: given back on purpose, no failure counted. Errors as TaskFinished.
  Status TaskFailed(int64_t trainer_id, int64_t task_id, int32_t pass, bool returned, const std::string& reason);
  // Extends the lease of `task_id` if `trainer_id` holds it; false otherwise.
  bool RenewLease(int64_t trainer_id, int64_t task_id);
  // Extends every lease `trainer_id` holds; returns how many.
  int RenewLeases(int64_t trainer_id);
  // Every pending task whose deadline has passed by `now_ms` (-1: the clock's now)
  // returns to todo as a failure. Returns how many expired.
  int ExpireLeases(int64_t now_ms = -1);
  // The tasks `trainer_id` holds return to todo: as failures (it died) or not (it left).
  int ReleaseTrainer(int64_t trainer_id, bool count_failure);

  int32_t pass() const { return pass_; }
  int32_t num_passes() const { return options_.num_passes; }
  bool job_done() const { return job_done_; }
  int64_t num_tasks() const { return static_cast<int64_t>(tasks_.size()); }
  int64_t todo() const { return static_cast<int64_t>(todo_.size()); }
  int64_t pending() const;
  int64_t done() const;
  int64_t failed() const;  // set aside in the current pass
  int64_t leased_ahead() const;  // tasks of the next pass under way (overlap)
  // Ids set aside as failed in any pass so far, sorted.
  const std::vector<int64_t>& failed_task_ids() const { return failed_ever_; }
  int64_t chunks_trained() const { return chunks_trained_; }
  int64_t samples_done() const { return samples_done_; }
  const TaskQueueOptions& options() const { return options_; }
  int32_t virtual_trainers() const { return options_.virtual_trainers; }
  // Virtual trainers: the job's micro-batch, fixed by the first call (0 before it).
  // OK when `samples` is the job's; FAILED_PRECONDITION naming both when it differs;
  // INVALID_ARGUMENT for samples < 1.
  Status FixMicroBatch(int64_t samples);
  int64_t micro_batch() const { return micro_batch_; }
  // The records of each task, by id (tasks[0] is task 1).
  std::vector<int64_t> task_records() const;
  // The todo ids in hand-out order (for tests and status pages).
  std::vector<int64_t> todo_ids() const { return {todo_.begin(), todo_.end()}; }
  // The trainer holding `task_id`, 0 when it is not pending.
  int64_t holder(int64_t task_id) const;
  // Extends every pending lease to at least `until_ms` (see Membership::ExtendLeases).
  void ExtendLeases(int64_t until_ms);
  // The pending task `trainer_id` holds (the lowest slot's), 0 when none.
  int64_t TaskHeldBy(int64_t trainer_id) const;
  // The pending task in `trainer_id`'s lease slot `slot`, 0 when none.
  int64_t TaskInSlot(int64_t trainer_id, int32_t slot) const {
    auto held = held_.find(Holder(trainer_id, slot));
    return held == held_.end() ? 0 : held->second;
  }
  // Every pending task `trainer_id` holds, by slot.
  std::vector<int64_t> TasksHeldBy(int64_t trainer_id) const;

 private:
  struct Entry {
    proto::Task task;  // id, pass, chunks, lease_deadline_ms
    proto::TaskRecord::State state = proto::TaskRecord::TODO;
    int32_t failures = 0;
    int64_t holder = 0;
    int32_t holder_slot = 0;
    int64_t finished_by = 0;
    int64_t finished_before = 0;  // leased ahead: who finished it in the pass before
  };

  TaskQueue(TaskQueueOptions options, Clock now_ms, Logger log);
  void StartPass(int32_t pass);
  // Moves `e` to state `to` (and to `pass`, when > 0), keeping the counts and the
  // holder index (set e.holder and, for PENDING, its deadline first).
  void Move(Entry& e, proto::TaskRecord::State to, int32_t pass = 0);
  // Overlap: a task of the next pass that this pass is done with, taken off the next
  // pass's todo (its failures and finisher cleared); nullptr when none or no overlap.
  Entry* LeaseAhead();
  // Whether `e` is in the next pass (leased ahead), and its pass's todo list.
  int Ahead(const Entry& e) const { return e.task.pass() != pass_ ? 1 : 0; }
  std::deque<int64_t>& TodoOf(const Entry& e) { return Ahead(e) ? ahead_todo_ : todo_; }
  // Rebuilds the counts, the holder index and next_expiry_ms_ from tasks_.
  void Reindex();
  void MaybeAdvance();
  // A failure of a pending or todo `e`: back to todo, or set aside at max_failures.
  void CountFailure(Entry& e, const std::string& reason);
  void RemoveFromTodo(const Entry& e);
  // Common checks of TaskFinished/TaskFailed: the entry, or the error.
  StatusOr<Entry*> FindForReport(int64_t trainer_id, int64_t task_id, int32_t pass, const char* what);
  void Log(const std::string& line) const;

  TaskQueueOptions options_;
  Clock now_ms_;
  Logger log_;
  std::vector<Entry> tasks_;  // tasks_[i].task.id() == i + 1
  std::deque<int64_t> todo_;
  int32_t pass_ = 1;
  bool job_done_ = false;
  std::vector<int64_t> failed_ever_;
  int64_t chunks_trained_ = 0;
  int64_t samples_done_ = 0;
  // Kept with every state change, so no call scans the tasks: tasks by state, the task
  // each trainer holds, and a time before which no lease can end.
  std::array<std::array<int64_t, 4>, 2> count_{};  // [this pass, the next][state]
  // (trainer, lease slot) -> task.
  using Holder = std::pair<int64_t, int32_t>;
  absl::flat_hash_map<Holder, int64_t> held_;
  int64_t next_expiry_ms_ = 0;
  // Overlap: the next pass's order once a task was leased ahead, and how many of those
  // were done or set aside in this pass.
  bool ahead_started_ = false;
  std::deque<int64_t> ahead_todo_;
  int64_t ahead_done_before_ = 0;
  int64_t ahead_failed_before_ = 0;
  int64_t micro_batch_ = 0;  // virtual trainers: FixMicroBatch
};

// The order in which pass `pass` hands out task ids 1..num_tasks: a Fisher-Yates
// shuffle driven by splitmix64 from (seed, pass), identical on every platform.
std::vector<int64_t> PassOrder(int64_t num_tasks, uint64_t seed, int32_t pass);

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_TASK_QUEUE_H_
