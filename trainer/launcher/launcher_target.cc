// The Launcher following its job's trainer target (ScaleTrainers on the master, set by
// pl-autoscale or the control FIFO's `scale N`; see launcher.h and docs/elastic.md).
#include <signal.h>

#include "absl/strings/str_cat.h"
#include "trainer/launcher/launcher.h"

namespace pl {

int Launcher::LocalTarget(int target) const {
  const int nodes = std::max(1, options_.num_nodes);
  return target / nodes + (options_.node_rank < target % nodes ? 1 : 0);
}

void Launcher::FollowTarget() {
  if (!have_status_ || !status_.has_trainer_target() || status_.job_done()) return;
  const int want = LocalTarget(status_.trainer_target());
  std::vector<std::string> active;
  for (const std::string& name : RunningTrainers()) {
    if (!stopping_.count(name)) active.push_back(name);
  }
  const std::string why = absl::StrCat("(trainer target ", status_.trainer_target(),
                                       status_.trainer_target_reason().empty() ? "" : ": ",
                                       status_.trainer_target_reason(), ")");
  for (int n = static_cast<int>(active.size()); n < want; ++n) {
    if (!StartTrainer(why).ok()) break;
  }
  // The newest first: the oldest have warmed their caches and hold the longest leases.
  // SIGUSR1 asks it to finish its task and leave (nothing trained twice); ExpireLeaves
  // sends SIGTERM if it is still there after --leave_grace_ms.
  const bool leave_first = options_.leave_grace_ms > 0;
  for (int n = static_cast<int>(active.size()); n > want; --n) {
    const std::string& name = active[n - 1];
    pid_t pid = supervisor_->Pid(name);
    if (Status s = supervisor_->Signal(name, leave_first ? SIGUSR1 : SIGTERM); !s.ok()) {
      supervisor_->Log(absl::StrCat("cannot stop ", name, ": ", s.message()));
      continue;
    }
    stopping_.insert(name);
    if (leave_first) {
      leave_deadlines_[name] = Clock::now() + std::chrono::milliseconds(options_.leave_grace_ms);
      supervisor_->Log(absl::StrCat("SIGUSR1 ", name, " (pid ", pid, "): leave after its task ", why, "; SIGTERM in ",
                                    options_.leave_grace_ms, " ms if still running"));
    } else {
      supervisor_->Log(absl::StrCat("SIGTERM ", name, " (pid ", pid, ") ", why));
    }
  }
}

void Launcher::ExpireLeaves() {
  const auto now = Clock::now();
  for (auto it = leave_deadlines_.begin(); it != leave_deadlines_.end();) {
    const std::string name = it->first;
    if (!stopping_.count(name)) {  // exited meanwhile
      it = leave_deadlines_.erase(it);
      continue;
    }
    if (now < it->second) {
      ++it;
      continue;
    }
    it = leave_deadlines_.erase(it);
    const pid_t pid = supervisor_->Pid(name);
    if (Status s = supervisor_->Signal(name, SIGTERM); s.ok()) {
      supervisor_->Log(absl::StrCat("SIGTERM ", name, " (pid ", pid, "): its task did not end within --leave_grace_ms ",
                                    options_.leave_grace_ms, "; it gives the task back"));
    }
  }
}

}  // namespace pl
