// The Launcher and its master's JobStatus: polling it, the progress lines, following a
// trainer target from it (launcher_target.cc), and deciding how the job ended.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trainer/launcher/launcher.h"

namespace pl {

using std::chrono::milliseconds;

namespace {
double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace
StatusOr<proto::JobStatusResponse> Launcher::QueryStatus() {
  if (!master_) return absl::FailedPreconditionError("the master has not started");
  // A failed poll makes the next one dial afresh (MasterClient): a channel that failed
  // through a network partition was seen to fail every call long after it healed (this
  // node then took the finished job for a lost master), and so was one to this node's
  // master after three restarts in a second (the job, done, then waited for a trainer
  // forever).
  return master_->JobStatus(
      MasterCallPolicy::Once(absl::Milliseconds(std::chrono::milliseconds(options_.rpc_timeout).count())));
}

std::string Launcher::DescribeStatus(const proto::JobStatusResponse& s) const {
  // The master counts passes from 1.
  return absl::StrCat("pass ", std::max(1, std::min(s.pass(), s.num_passes())), "/", s.num_passes(),
                      " | tasks todo ", s.todo(), " pending ", s.pending(), " done ", s.done(),
                      " failed ", s.failed(), " (any pass ", s.failed_task_ids_size(), ") | trainers ", s.live_trainers(),
                      " | samples ", s.samples_done(),
                      s.tasks_returned() > 0 ? absl::StrCat(" | tasks returned ", s.tasks_returned(), " (",
                                                            s.samples_retrained(), " samples trained twice)")
                                             : "");
}

void Launcher::PollStatus() {
  const auto now = Clock::now();
  if (now < next_status_) return;
  // A job sized by a controller polls faster, so a slot it is given is used within a
  // fraction of a second.
  next_status_ = now + (have_status_ && status_.has_trainer_target()
                            ? std::min<milliseconds>(options_.status_poll, milliseconds(200))
                            : options_.status_poll);
  StatusOr<proto::JobStatusResponse> st = QueryStatus();
  const bool progress_due = now >= next_progress_;
  if (progress_due) {
    next_progress_ = now + milliseconds(static_cast<int64_t>(options_.progress_every_s * 1000));
  }
  last_poll_ok_ = st.ok();
  if (!st.ok()) {
    if (progress_due) supervisor_->Log(absl::StrCat("master unreachable: ", st.status().message()));
    // With standbys a master node's own master may stand by or be gone too.
    if (multi_node() && (!runs_master() || layout_.standby_masters())) CheckMasterGone(st.status());
    return;
  }
  master_ok_at_ = now;
  status_ = *st;
  have_status_ = true;
  if (progress_due) {
    const double dt = Seconds(now - last_progress_time_);
    const double rate = dt > 0 ? (status_.samples_done() - last_progress_samples_) / dt : 0;
    // Done so far: whole passes, plus the current pass's finished tasks.
    const int64_t tasks = status_.todo() + status_.pending() + status_.done();
    const double passes = std::max(1, status_.num_passes());
    const double fraction =
        status_.job_done() ? 1.0
                           : std::clamp((std::max(0, status_.pass() - 1) + (tasks > 0 ? double(status_.done()) / tasks : 0)) /
                                            passes,
                                        0.0, 1.0);
    const double elapsed = Seconds(now - trainers_started_);
    std::string eta = "ETA -";
    if (fraction > 0.01 && fraction < 1.0) {
      const int64_t left = static_cast<int64_t>(elapsed * (1 - fraction) / fraction);
      eta = absl::StrFormat("ETA %d:%02d", left / 60, left % 60);
    }
    supervisor_->Log(absl::StrCat(DescribeStatus(status_), " (", absl::StrFormat("%.0f", std::max(rate, 0.0)), "/s, ",
                                  absl::StrFormat("%.0f%%", 100 * fraction), ", ", eta, ")"));
    last_progress_samples_ = status_.samples_done();
    last_progress_time_ = now;
  }
  FollowTarget();
}

void Launcher::CheckEnd() {
  const auto now = Clock::now();
  std::vector<std::string> running = RunningTrainers();
  if (have_status_ && status_.job_done()) {
    if (!job_done_seen_) {
      job_done_seen_ = true;
      job_done_at_ = now;
      if (!running.empty()) {
        supervisor_->Log(absl::StrCat("the master reports the job done; waiting up to ",
                                      std::chrono::duration_cast<std::chrono::seconds>(options_.trainer_exit_grace).count(),
                                      " s for ", running.size(), " trainer(s) to exit"));
      }
    }
    if (!running.empty() && now - job_done_at_ >= options_.trainer_exit_grace) {
      supervisor_->Log(absl::StrCat(running.size(), " trainer(s) still running after the job is done; stopping them"));
      HandleEvents(supervisor_->Stop(running, options_.stop_grace));
      running.clear();
    }
    if (!running.empty()) return;
    if (multi_node() && !OtherNodesDone()) return;
  } else if (!running.empty()) {
    return;
  } else if (have_status_ && status_.has_trainer_target()) {
    // Sized by a controller: no trainer now is its decision (the job waits in its queue).
    return;
  } else if (options_.num_trainers == 0 && !multi_node()) {
    // Waiting for the first target; PollStatus keeps watching.
    return;
  } else if (multi_node()) {
    WaitWithoutLocalTrainers();
    return;
  } else {
    // No trainer left and the last status we saw is not done: wait for a planned
    // addition, or ask the master once more (the trainers may have just finished).
    if (!add_timer_done_ && options_.add_trainer_after_s >= 0) return;
    const auto deadline = now + options_.final_status_timeout;
    StatusOr<proto::JobStatusResponse> st = QueryStatus();
    if (control_fd_ >= 0 && idle_hint_logged_) return;  // PollStatus keeps watching
    while (!st.ok() && Clock::now() < deadline && outcome_ == Outcome::kRunning) {
      // Keep output and restarts going; a stop request is handled by the next Step().
      HandleEvents(supervisor_->Pump(milliseconds(200)));
      if (stop_signal_.load() != 0) return;
      st = QueryStatus();
    }
    if (outcome_ != Outcome::kRunning || !RunningTrainers().empty()) return;
    if (st.ok()) {
      status_ = *st;
      have_status_ = true;
    }
    if (!st.ok() || !status_.job_done()) {
      if (control_fd_ >= 0) {
        if (!idle_hint_logged_) {
          idle_hint_logged_ = true;
          supervisor_->Log(absl::StrCat("no trainer is running and the job is not done; waiting for "
                                        "'add-trainer' on ", options_.control_fifo));
        }
        return;
      }
      outcome_ = Outcome::kFailed;
      cause_ = absl::StrCat("all ", next_rank_, " trainer(s) exited (", trainers_ok_,
                            " with status 0) and the job is not done: ",
                            st.ok() ? DescribeStatus(status_)
                                    : absl::StrCat("the master is unreachable (", st.status().message(), ")"));
      return;
    }
  }
  // The job is done and no trainer runs. A task set aside in any pass is a loss (the
  // master lists every id set aside, whichever pass; `failed` counts the last pass's).
  const int64_t lost_tasks = std::max<int64_t>(status_.failed(), status_.failed_task_ids_size());
  if (lost_tasks > 0 || status_.losses_size() > 0) {
    std::vector<std::string> parts;
    if (lost_tasks > 0) {
      parts.push_back(absl::StrCat(lost_tasks, " task(s) set aside as failed in some pass (ids ",
                                   absl::StrJoin(status_.failed_task_ids(), ","),
                                   "): their chunks went untrained in that pass"));
    }
    for (const std::string& loss : status_.losses()) parts.push_back(loss);
    const std::string what = absl::StrJoin(parts, "; ");
    if (options_.allow_losses) {
      supervisor_->Log(absl::StrCat("the job lost work, allowed by --allow_losses: ", what));
      outcome_ = Outcome::kFinished;
    } else {
      outcome_ = Outcome::kLost;
      cause_ = absl::StrCat("the job finished with losses: ", what, " (--allow_losses accepts that)");
    }
  } else if (trainers_ok_ == 0) {
    outcome_ = Outcome::kFailed;
    cause_ = absl::StrCat("the job is done but none of ", multi_node() ? "this node's " : "the ", next_rank_,
                          " trainer(s) exited with status 0");
  } else {
    outcome_ = Outcome::kFinished;
  }
}

}  // namespace pl
