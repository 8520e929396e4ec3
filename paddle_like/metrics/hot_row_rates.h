// Update rates of a pserver's hottest rows, from two StatsResponse.tables samples: the
// counts are cumulative, so a rate is the difference over the time between the samples.
// A row that was not among the hottest before gets no rate yet (its earlier count is
// unknown).
//
// Thread-safety: none; one sampler owns one.
#ifndef PADDLE_LIKE_METRICS_HOT_ROW_RATES_H_
#define PADDLE_LIKE_METRICS_HOT_ROW_RATES_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "proto/pserver.pb.h"

namespace pl::metrics {

class HotRowRates {
 public:
  struct Rate {
    std::string table;
    int rank = 0;  // 1: the hottest
    int64_t id = 0;
    double per_second = 0;
  };

  // The rates of each table's first `top` rows since the previous call (none the first
  // time), most updated first.
  std::vector<Rate> Update(const google::protobuf::RepeatedPtrField<proto::TableStats>& tables, absl::Time now,
                           int top) {
    std::vector<Rate> rates;
    std::map<std::pair<std::string, int64_t>, int64_t> seen;
    const double dt = absl::ToDoubleSeconds(now - last_);
    for (const proto::TableStats& t : tables) {
      for (int k = 0; k < t.hottest_size(); ++k) {
        const proto::HotRow& h = t.hottest(k);
        seen[{t.name(), h.id()}] = h.updates();
        auto before = previous_.find({t.name(), h.id()});
        if (k < top && before != previous_.end() && dt > 0) {
          rates.push_back({t.name(), k + 1, h.id(), std::max<int64_t>(0, h.updates() - before->second) / dt});
        }
      }
    }
    previous_ = std::move(seen);
    last_ = now;
    return rates;
  }

 private:
  std::map<std::pair<std::string, int64_t>, int64_t> previous_;
  absl::Time last_ = absl::InfinitePast();
};

// One log line per table: "table emb: 120000 rows, 45.1 MB; hottest rows (updates/s):
// 17 (1203), 4 (870), ..." (rates from `rates`, which this call advances).
inline std::vector<std::string> DescribeTables(const proto::StatsResponse& s, HotRowRates* rates, absl::Time now,
                                               int top = 5) {
  std::map<std::pair<std::string, int64_t>, double> per_second;
  for (const HotRowRates::Rate& r : rates->Update(s.tables(), now, top)) per_second[{r.table, r.id}] = r.per_second;
  std::vector<std::string> lines;
  for (const proto::TableStats& t : s.tables()) {
    std::string line = absl::StrFormat("table %s: %d rows, %.1f MB", t.name(), t.rows(), t.bytes() / 1e6);
    if (t.rows_on_disk() > 0) absl::StrAppend(&line, absl::StrFormat(" (and %d rows on disk)", t.rows_on_disk()));
    if (t.admit_after() > 1) {
      absl::StrAppend(&line, absl::StrFormat(" (admit_after %d: %d admitted)", t.admit_after(), t.admitted()));
    }
    if (t.evicted() > 0 || t.evict_after_s() > 0) {
      absl::StrAppend(&line, t.evict_after_s() > 0 ? absl::StrFormat(" (evict_after_s %d)", t.evict_after_s()) : "",
                      absl::StrFormat(", %d evicted", t.evicted()));
    }
    if (t.hottest_size() > 0) absl::StrAppend(&line, "; hottest rows (updates, per second since the last line):");
    for (int k = 0; k < t.hottest_size() && k < top; ++k) {
      const proto::HotRow& h = t.hottest(k);
      auto rate = per_second.find({t.name(), h.id()});
      absl::StrAppend(&line, k == 0 ? " " : ", ", h.id(), " (", h.updates(),
                      rate == per_second.end() ? "" : absl::StrFormat(", %.0f/s", rate->second), ")");
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_HOT_ROW_RATES_H_
