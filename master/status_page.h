// StatusPage: the job's status page, served by pl-master on --http_port:
//   /             an HTML page that refreshes itself every 2 s (inline JS and SVG, no
//                 external script: the page must work where nothing outside is reachable)
//   /status.json  what the page draws: the job (pass, task queue), live trainers with
//                 their task and last heartbeat, pservers, the master's last events
//                 (joins, leaves, expired leases, failures) and each trainer's curves
//   /status.txt   the same as text, what `pl-status HOST:PORT` prints
//
// Thread-safety: thread-safe (reads the Master, the event log and the board, each
// thread-safe).
#ifndef PADDLE_LIKE_MASTER_STATUS_PAGE_H_
#define PADDLE_LIKE_MASTER_STATUS_PAGE_H_

#include <cstdint>
#include <string>

#include "master/master_service.h"
#include "paddle_like/metrics/http_server.h"
#include "paddle_like/metrics/job_events.h"
#include "paddle_like/metrics/progress_board.h"

namespace pl {

class StatusPage {
 public:
  // All must outlive the page. `lease_ms`: the trainers' lease, to tell their last
  // heartbeat from their lease deadline.
  StatusPage(Master* master, const metrics::JobEventLog* events, const metrics::ProgressBoard* board, int64_t lease_ms)
      : master_(master), events_(events), board_(board), lease_ms_(lease_ms) {}

  metrics::HttpResponse Handle(const std::string& path) const;
  std::string Json() const;
  std::string Text() const;

 private:
  Master* const master_;
  const metrics::JobEventLog* const events_;
  const metrics::ProgressBoard* const board_;
  const int64_t lease_ms_;
};

// The page itself (status_page_html.cc): static HTML that fetches status.json.
const char* StatusPageHtml();

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_STATUS_PAGE_H_
