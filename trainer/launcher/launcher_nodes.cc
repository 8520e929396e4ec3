// The Launcher on one of several machines (--nnodes > 1): joining the job's master,
// the address this node's pservers advertise, and how a node ends (see launcher.h).
#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/rpc.h"
#include "trainer/launcher/launcher.h"
#include "trainer/launcher/node_role.h"

namespace pl {

using std::chrono::milliseconds;

namespace {

milliseconds FromSeconds(double s) { return milliseconds(static_cast<int64_t>(s * 1000)); }

int64_t WholeSeconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

}  // namespace

Status Launcher::WaitForMaster() {
  const auto deadline = Clock::now() + FromSeconds(options_.master_wait_s);
  supervisor_->Log(absl::StrCat("waiting up to ", options_.master_wait_s, " s for the job's master at ",
                                options_.master_addr));
  StatusOr<proto::JobStatusResponse> st = QueryStatus();
  while (!st.ok() && Clock::now() < deadline) {
    Step(milliseconds(200));  // signals and the control FIFO
    if (outcome_ == Outcome::kCancelled) return absl::CancelledError(cause_);
    // QueryStatus dialled afresh: with TLS, a channel that dialled while the master was
    // starting was seen to fail its handshakes ("Handshake read failed") long after
    // the master served others (gRPC 1.51); a new channel connects at once.
    st = QueryStatus();
  }
  if (!st.ok()) {
    return absl::UnavailableError(absl::StrCat("the job's master at ", options_.master_addr,
                                               " did not answer within ", options_.master_wait_s,
                                               " s (--master_wait_s): ", st.status().message()));
  }
  if (Status s = CheckJobNodes({options_.num_nodes, options_.num_pservers, options_.replicas}, *st); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  supervisor_->Log(absl::StrCat("the job's master at ", options_.master_addr, " answers: ", DescribeStatus(*st)));
  return absl::OkStatus();
}

Status Launcher::ResolveNodeAddr() {
  if (!options_.node_addr.empty()) {
    node_addr_ = options_.node_addr;
    return absl::OkStatus();
  }
  StatusOr<std::string> local = LocalAddressTowards(master_hp_.host, master_hp_.port);
  if (!local.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot find this node's address towards the master: ",
                                               local.status().message(), "; pass --node_addr"));
  }
  node_addr_ = *local;
  supervisor_->Log(absl::StrCat("this node's pservers advertise ", node_addr_,
                                " (the interface towards the master; --node_addr overrides)"));
  if (IsLoopbackAddress(node_addr_)) {
    supervisor_->Log(absl::StrCat("warning: ", node_addr_, " is a loopback address: the other nodes cannot reach "
                                  "this node's pservers; give --master_addr a routable host or pass --node_addr"));
  }
  return absl::OkStatus();
}

bool Launcher::OtherNodesDone() {
  const auto now = Clock::now();
  // Node 0 stops its master only once no trainer is live (below), so a master that is
  // gone after job_done (for two polls: not a blip) means node 0 has finished.
  // With standbys the same holds on a master node: the last leader has stopped.
  if ((!runs_master() || layout_.standby_masters()) && !last_poll_ok_ &&
      now - master_ok_at_ >= 2 * options_.status_poll) {
    return true;
  }
  if (last_poll_ok_ && status_.live_trainers() == 0) {
    if (!runs_master()) return true;
    // Node 0 keeps the master up for two more polls, so every node reads job_done.
    if (all_left_at_ == Clock::time_point()) all_left_at_ = now;
    return now - all_left_at_ >= 2 * options_.status_poll + options_.rpc_timeout;
  }
  const auto bound = options_.trainer_exit_grace + options_.stop_grace + milliseconds(options_.lease_ms);
  if (now - job_done_at_ >= bound) {
    supervisor_->Log(absl::StrCat("the master still counts ", status_.live_trainers(), " live trainer(s) ",
                                  WholeSeconds(bound), " s after the job was done; stopping this node"));
    return true;
  }
  if (!others_wait_logged_) {
    others_wait_logged_ = true;
    supervisor_->Log(absl::StrCat("this node's trainers are done; its pservers keep serving the ",
                                  status_.live_trainers(), " trainer(s) still live on other nodes (up to ",
                                  WholeSeconds(bound), " s)"));
  }
  return false;
}

void Launcher::WaitWithoutLocalTrainers() {
  if (!add_timer_done_ && options_.add_trainer_after_s >= 0) return;  // a planned addition
  const auto now = Clock::now();
  if (!idle_hint_logged_) {
    // The last poll may predate the job's end (the trainers have just finished): ask
    // once more before saying the job is not done.
    if (StatusOr<proto::JobStatusResponse> st = QueryStatus(); st.ok()) {
      status_ = *st;
      have_status_ = last_poll_ok_ = true;
      master_ok_at_ = now;
      if (status_.job_done()) return;  // CheckEnd ends the job from here
    }
    idle_hint_logged_ = true;
    supervisor_->Log(absl::StrCat("no trainer runs on this node (", next_rank_, " started, ", trainers_ok_,
                                  " exited 0) and the job is not done; this node keeps serving the other nodes",
                                  control_fd_ >= 0 ? "; 'add-trainer' on " + options_.control_fifo + " adds one" : ""));
  }
  if (control_fd_ >= 0 || !last_poll_ok_) return;  // a trainer may be added; CheckMasterGone bounds the rest
  if (status_.live_trainers() > 0) {
    no_trainer_since_ = Clock::time_point();
    return;
  }
  if (no_trainer_since_ == Clock::time_point()) no_trainer_since_ = now;
  if (now - no_trainer_since_ >= FromSeconds(options_.master_wait_s)) {
    outcome_ = Outcome::kFailed;
    cause_ = absl::StrCat("no trainer has been live on any node for ", options_.master_wait_s,
                          " s (--master_wait_s) and the job is not done: ", DescribeStatus(status_));
  }
}

void Launcher::CheckMasterGone(const Status& error) {
  const auto gone_for = Clock::now() - master_ok_at_;
  if (job_done_seen_ || gone_for < FromSeconds(options_.master_wait_s)) return;
  outcome_ = Outcome::kFailed;
  cause_ = absl::StrCat("the job's master at ", options_.master_addr, " has been unreachable for ",
                        WholeSeconds(gone_for), " s (--master_wait_s ", options_.master_wait_s,
                        layout_.standby_masters() ? "; are most master nodes gone?): " : "; is node 0 gone?): ",
                        error.message());
}

}  // namespace pl
