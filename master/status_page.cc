#include "master/status_page.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "paddle_like/io/json_lite.h"

namespace pl {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// Seconds since the trainer's last heartbeat: its lease was renewed to deadline then.
double HeartbeatAgo(const proto::TrainerInfo& t, int64_t lease_ms) {
  return (absl::ToUnixMillis(absl::Now()) - (t.lease_deadline_ms() - lease_ms)) / 1e3;
}

std::string Num(double v) { return absl::StrFormat("%.6g", v); }
std::string Seconds(absl::Time t) { return absl::StrFormat("%.3f", UnixSeconds(t)); }

// The copies a replicated shard lacks against the `launched` it was started with (0:
// not told, or not replicated): neither in sync nor catching up.
int MissingCopies(const proto::PserverInfo& p, int launched) {
  if (launched <= 1 || p.live_replicas() == 0) return 0;
  return std::max(0, launched - p.live_replicas() - p.joining_replicas());
}

}  // namespace

metrics::HttpResponse StatusPage::Handle(const std::string& path) const {
  if (path == "/" || path == "/index.html") return {200, "text/html; charset=utf-8", StatusPageHtml()};
  if (path == "/status.json") return {200, "application/json", Json()};
  if (path == "/status.txt") return {200, "text/plain; charset=utf-8", Text()};
  // Liveness for probes and load balancers: the page answers, so the master serves.
  if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
  return {404, "text/plain; charset=utf-8", "not found: try /, /status.json, /status.txt or /healthz\n"};
}

std::string StatusPage::Json() const {
  const auto job = master_->JobStatus({});
  const auto members = master_->GetMembership({});
  std::string out = absl::StrCat("{\"time\":", Seconds(absl::Now()));
  if (job.ok()) {
    absl::StrAppend(&out, ",\"job\":{\"pass\":", job->pass(), ",\"num_passes\":", job->num_passes(),
                    ",\"todo\":", job->todo(), ",\"pending\":", job->pending(), ",\"done\":", job->done(),
                    ",\"failed\":", job->failed(), ",\"samples_done\":", job->samples_done(),
                    ",\"live_trainers\":", job->live_trainers(),
                    ",\"trainer_target\":", job->has_trainer_target() ? job->trainer_target() : -1,
                    ",\"trainer_target_reason\":", JsonQuote(job->trainer_target_reason()),
                    ",\"replicas\":", job->replicas(),
                    ",\"job_done\":", job->job_done() ? "true" : "false",
                    ",\"failed_task_ids\":[", absl::StrJoin(job->failed_task_ids(), ","), "]");
    std::vector<std::string> losses;
    for (const std::string& loss : job->losses()) losses.push_back(JsonQuote(loss));
    absl::StrAppend(&out, ",\"pushes_refused\":", job->pushes_refused(), ",\"losses\":[", absl::StrJoin(losses, ","),
                    "]}");
  }
  std::vector<std::string> trainers, pservers;
  if (members.ok()) {
    for (const proto::TrainerInfo& t : members->trainers()) {
      trainers.push_back(absl::StrCat("{\"id\":", t.id(), ",\"name\":", JsonQuote(t.address()), ",\"task\":",
                                      t.task_id(), ",\"heartbeat_s_ago\":", absl::StrFormat("%.3f", HeartbeatAgo(t, lease_ms_)), "}"));
    }
    for (const proto::PserverInfo& p : members->pservers()) {
      pservers.push_back(absl::StrCat("{\"index\":", p.index(), ",\"address\":", JsonQuote(p.address()),
                                      ",\"generation\":", p.generation(), ",\"replicas\":", p.live_replicas(),
                                      ",\"joining\":", p.joining_replicas(),
                                      ",\"missing\":", MissingCopies(p, job.ok() ? job->replicas() : 0), "}"));
    }
  }
  absl::StrAppend(&out, ",\"trainers\":[", absl::StrJoin(trainers, ","), "],\"pservers\":[",
                  absl::StrJoin(pservers, ","), "]");
  std::vector<std::string> events;
  for (const metrics::JobEvent& e : events_->Last()) {
    events.push_back(absl::StrCat("{\"time\":", Seconds(e.time), ",\"kind\":\"",
                                  metrics::JobEventKindName(e.kind), "\",\"text\":", JsonQuote(e.text), "}"));
  }
  absl::StrAppend(&out, ",\"events\":[", absl::StrJoin(events, ","), "]");
  std::vector<std::string> curves;
  for (const auto& [name, c] : board_->Curves()) {
    std::vector<std::string> points;
    for (const proto::ProgressPoint& p : c.points) {
      points.push_back(absl::StrCat("[", p.step(), ",", Num(p.loss()), ",", Num(p.train_accuracy()), ",",
                                    Num(p.samples_per_sec()), "]"));
    }
    std::string curve = absl::StrCat(JsonQuote(name), ":{\"points\":[", absl::StrJoin(points, ","), "]");
    if (c.evaluated) {
      absl::StrAppend(&curve, ",\"test_metric_name\":", JsonQuote(c.test_metric_name),
                      ",\"test_metric\":", Num(c.test_metric));
    }
    curves.push_back(curve + "}");
  }
  absl::StrAppend(&out, ",\"curves\":{", absl::StrJoin(curves, ","), "}}\n");
  return out;
}

std::string StatusPage::Text() const {
  const auto job = master_->JobStatus({});
  const auto members = master_->GetMembership({});
  const auto curves = board_->Curves();
  std::string out;
  if (job.ok()) {
    absl::StrAppend(&out, "job: pass ", std::max(1, std::min(job->pass(), job->num_passes())), "/",
                    job->num_passes(), job->job_done() ? " (done)" : "", " | tasks todo ", job->todo(), " pending ",
                    job->pending(), " done ", job->done(), " failed ", job->failed(), " | samples ",
                    job->samples_done(), " | trainers ", job->live_trainers(),
                    job->has_trainer_target() ? absl::StrCat(" (target ", job->trainer_target(), ": ",
                                                              job->trainer_target_reason(), ")")
                                              : "",
                    "\n");
    // What the job lost, with its cause: pl-launch exits 3 for these unless --allow_losses.
    if (!job->failed_task_ids().empty()) {
      absl::StrAppend(&out, "loss: ", job->failed_task_ids_size(), " task(s) set aside as failed in some pass (ids ",
                      absl::StrJoin(job->failed_task_ids(), ","), ")\n");
    }
    for (const std::string& loss : job->losses()) absl::StrAppend(&out, "loss: ", loss, "\n");
  }
  if (members.ok()) {
    absl::StrAppend(&out, "trainers (", members->trainers_size(), " live):\n");
    for (const proto::TrainerInfo& t : members->trainers()) {
      absl::StrAppend(&out, absl::StrFormat("  %-12s id %-3d task %-5s heartbeat %.1f s ago", t.address(), t.id(),
                                            t.task_id() != 0 ? absl::StrCat(t.task_id()) : "-",
                                            HeartbeatAgo(t, lease_ms_)));
      if (auto it = curves.find(t.address()); it != curves.end() && !it->second.points.empty()) {
        const proto::ProgressPoint& p = it->second.points.back();
        absl::StrAppend(&out, absl::StrFormat("  step %d loss %.4f", p.step(), p.loss()));
        if (p.train_accuracy() >= 0) absl::StrAppend(&out, absl::StrFormat(" acc %.4f", p.train_accuracy()));
        absl::StrAppend(&out, absl::StrFormat(" %.0f samples/s", p.samples_per_sec()));
      }
      absl::StrAppend(&out, "\n");
    }
    absl::StrAppend(&out, "pservers (", members->pservers_size(), " of ", members->num_pservers(), "):\n");
    for (const proto::PserverInfo& p : members->pservers()) {
      absl::StrAppend(&out, absl::StrFormat("  %-3d %-22s generation %d", p.index(), p.address(), p.generation()));
      // Replicated shards (live_replicas counts the primary and its backups in sync).
      if (p.live_replicas() > 0) {
        absl::StrAppend(&out, absl::StrFormat("  replicas %d in sync", p.live_replicas()));
        if (p.joining_replicas() > 0) absl::StrAppend(&out, absl::StrFormat(", %d catching up", p.joining_replicas()));
        if (const int missing = MissingCopies(p, job.ok() ? job->replicas() : 0); missing > 0) {
          absl::StrAppend(&out, absl::StrFormat(", %d missing of %d", missing, job->replicas()));
        }
      }
      absl::StrAppend(&out, "\n");
    }
  }
  for (const auto& [name, c] : curves) {
    if (c.evaluated) absl::StrAppend(&out, absl::StrFormat("%s: test %s %.4f\n", name, c.test_metric_name, c.test_metric));
  }
  absl::StrAppend(&out, "last events:\n");
  for (const metrics::JobEvent& e : events_->Last()) {
    absl::StrAppend(&out, "  ", absl::FormatTime("%H:%M:%S", e.time, absl::UTCTimeZone()), " ",
                    absl::StrFormat("%-13s ", metrics::JobEventKindName(e.kind)), e.text, "\n");
  }
  return out;
}

}  // namespace pl
