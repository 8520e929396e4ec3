#include "paddle_like/elastic/autoscale_page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "paddle_like/io/json_lite.h"
#include "paddle_like/metrics/process_metrics.h"

namespace pl::elastic {
namespace {

std::string Html(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// A Prometheus label value: backslash, quote and newline escaped.
std::string Label(const std::string& s) {
  return absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

std::string Json(const Autoscaler::View& v) {
  std::string out = absl::StrCat("{\"ticks\":", v.ticks, ",\"now_ms\":", v.now_ms, ",\"slots\":", v.slots,
                                 ",\"reserved_slots\":", v.reserved_slots, ",\"capacity\":", v.capacity,
                                 ",\"assigned\":", v.assigned, ",\"sum_minimums\":", v.sum_minimums,
                                 ",\"over_committed\":", v.over_committed ? "true" : "false",
                                 ",\"cluster_error\":", JsonQuote(v.cluster_error), ",\"jobs\":[");
  for (size_t i = 0; i < v.jobs.size(); ++i) {
    const Autoscaler::JobView& j = v.jobs[i];
    absl::StrAppend(&out, i ? "," : "", "{\"name\":", JsonQuote(j.spec.name()), ",\"master\":", JsonQuote(j.spec.master()),
                    ",\"min_trainers\":", j.spec.min_trainers(), ",\"max_trainers\":", j.spec.max_trainers(),
                    ",\"priority\":", j.spec.priority(), ",\"observed\":", j.observed ? "true" : "false",
                    ",\"reachable\":", j.reachable ? "true" : "false", ",\"done\":", j.done ? "true" : "false",
                    ",\"live_trainers\":", j.live_trainers, ",\"master_target\":", j.master_target,
                    ",\"target\":", j.target, ",\"share\":", j.share, ",\"reason\":", JsonQuote(j.reason),
                    ",\"error\":", JsonQuote(j.error), "}");
  }
  absl::StrAppend(&out, "],\"recent\":[");
  for (size_t i = 0; i < v.recent.size(); ++i) absl::StrAppend(&out, i ? "," : "", JsonQuote(v.recent[i]));
  absl::StrAppend(&out, "]}\n");
  return out;
}

std::string Metrics(const Autoscaler::View& v) {
  std::string out;
  absl::StrAppend(&out, "# HELP pl_autoscale_slots Slots the cluster gives training at most.\n",
                  "# TYPE pl_autoscale_slots gauge\npl_autoscale_slots ", v.slots, "\n",
                  "# HELP pl_autoscale_reserved_slots Slots higher-priority work holds now.\n",
                  "# TYPE pl_autoscale_reserved_slots gauge\npl_autoscale_reserved_slots ", v.reserved_slots, "\n",
                  "# HELP pl_autoscale_capacity_slots Slots elastic training may use now.\n",
                  "# TYPE pl_autoscale_capacity_slots gauge\npl_autoscale_capacity_slots ", v.capacity, "\n",
                  "# HELP pl_autoscale_assigned_trainers The sum of the jobs' targets.\n",
                  "# TYPE pl_autoscale_assigned_trainers gauge\npl_autoscale_assigned_trainers ", v.assigned, "\n",
                  "# HELP pl_autoscale_over_committed 1 while the capacity is below the admitted minimums.\n",
                  "# TYPE pl_autoscale_over_committed gauge\npl_autoscale_over_committed ", v.over_committed ? 1 : 0,
                  "\n", "# HELP pl_autoscale_ticks_total Control periods run.\n",
                  "# TYPE pl_autoscale_ticks_total counter\npl_autoscale_ticks_total ", v.ticks, "\n");
  absl::StrAppend(&out, "# HELP pl_autoscale_target_trainers The trainers each job is asked to run.\n",
                  "# TYPE pl_autoscale_target_trainers gauge\n");
  for (const auto& j : v.jobs) {
    absl::StrAppend(&out, "pl_autoscale_target_trainers{job=\"", Label(j.spec.name()), "\"} ", j.target, "\n");
  }
  absl::StrAppend(&out, "# HELP pl_autoscale_running_trainers The live trainers each job's master reports.\n",
                  "# TYPE pl_autoscale_running_trainers gauge\n");
  for (const auto& j : v.jobs) {
    absl::StrAppend(&out, "pl_autoscale_running_trainers{job=\"", Label(j.spec.name()), "\"} ",
                    std::max(j.live_trainers, 0), "\n");
  }
  absl::StrAppend(&out, "# HELP pl_autoscale_decisions_total Changes of each job's target, by reason.\n",
                  "# TYPE pl_autoscale_decisions_total counter\n");
  for (const auto& j : v.jobs) {
    for (const auto& [reason, n] : j.decisions) {
      absl::StrAppend(&out, "pl_autoscale_decisions_total{job=\"", Label(j.spec.name()), "\",reason=\"", reason, "\"} ",
                      n, "\n");
    }
  }
  return out;
}

std::string Page(const Autoscaler::View& v) {
  std::string out = absl::StrCat(
      "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\">"
      "<title>pl-autoscale</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}"
      "td:first-child{text-align:left}.bad{color:#b00}</style></head><body><h1>pl-autoscale</h1><p>capacity <b>",
      v.capacity, "</b> slot(s) (", v.slots, " minus ", v.reserved_slots, " reserved), assigned <b>", v.assigned,
      "</b>, admitted minimums ", v.sum_minimums, v.over_committed ? " <span class=bad>over-committed</span>" : "",
      "; ", v.ticks, " period(s)</p>");
  if (!v.cluster_error.empty()) {
    absl::StrAppend(&out, "<p class=bad>cluster file: ", Html(v.cluster_error), " (the last good one is in force)</p>");
  }
  absl::StrAppend(&out, "<table><tr><th>job</th><th>master</th><th>min</th><th>max</th><th>priority</th>"
                        "<th>target</th><th>share</th><th>live</th><th>last change</th><th>state</th></tr>");
  for (const auto& j : v.jobs) {
    const std::string state = j.done ? "done" : !j.observed && j.error.empty() ? "not seen yet"
                                            : !j.error.empty() ? j.error : j.target == 0 ? "queued" : "running";
    absl::StrAppend(&out, "<tr><td>", Html(j.spec.name()), "</td><td>", Html(j.spec.master()), "</td><td>",
                    j.spec.min_trainers(), "</td><td>", j.spec.max_trainers(), "</td><td>", j.spec.priority(),
                    "</td><td>", j.target, "</td><td>", j.share, "</td><td>", j.live_trainers < 0 ? 0 : j.live_trainers,
                    "</td><td>", Html(j.reason), "</td><td", j.error.empty() ? "" : " class=bad", ">", Html(state),
                    "</td></tr>");
  }
  absl::StrAppend(&out, "</table><h2>Last decisions</h2><pre>");
  for (auto it = v.recent.rbegin(); it != v.recent.rend(); ++it) absl::StrAppend(&out, Html(*it), "\n");
  absl::StrAppend(&out, "</pre></body></html>\n");
  return out;
}

}  // namespace

metrics::HttpResponse ServeAutoscalePage(const Autoscaler::View& view, const std::string& path) {
  if (path == "/" || path == "/index.html") return {200, "text/html; charset=utf-8", Page(view)};
  if (path == "/status.json") return {200, "application/json", Json(view)};
  if (path == "/metrics") {
    return {200, "text/plain; version=0.0.4; charset=utf-8", Metrics(view) + metrics::ProcessMetricsText()};
  }
  if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
  return {404, "text/plain; charset=utf-8", "not found: try /, /status.json, /metrics, /healthz\n"};
}

}  // namespace pl::elastic
