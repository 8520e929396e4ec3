// The hottest rows of a table: the Space-Saving sketch of one stripe (exact while the
// ids fit its slots; a heavy hitter found with a bounded overcount otherwise), and a
// shard's per-table sizes and hottest rows after real pushes.
#include "pserver/store/hot_rows.h"

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/metrics/hot_row_rates.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using namespace ::pl::pserver::testing;
using ::testing::HasSubstr;

std::vector<HotRows::Entry> Entries(const HotRows& h) {
  std::vector<HotRows::Entry> out;
  h.AppendTo(&out);
  return out;
}

TEST(HotRows, ExactWhileTheIdsFitTheSlots) {
  HotRows h;
  for (int64_t id = 0; id < HotRows::kSlots; ++id) {
    for (int k = 0; k <= id; ++k) h.Count(100 + id);
  }
  for (const HotRows::Entry& e : Entries(h)) {
    EXPECT_EQ(e.count, e.id - 100 + 1) << e.id;
    EXPECT_EQ(e.error, 0);
  }
}

TEST(HotRows, AHeavyHitterAmongManyIdsIsFoundWithABoundedOvercount) {
  HotRows h;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> others(1, 5000);
  int64_t hot_true = 0;
  for (int i = 0; i < 100000; ++i) {
    if (i % 4 == 0) {  // a quarter of the updates: far above 1/kSlots of them
      h.Count(7);
      ++hot_true;
    } else {
      h.Count(others(rng) + 100);
    }
  }
  std::vector<HotRows::Entry> e = Entries(h);
  auto hot = std::find_if(e.begin(), e.end(), [](const HotRows::Entry& x) { return x.id == 7; });
  ASSERT_NE(hot, e.end());
  EXPECT_GE(hot->count, hot_true);
  EXPECT_LE(hot->count - hot->error, hot_true);
  for (const HotRows::Entry& x : e) EXPECT_LE(x.count, hot->count) << x.id;
}

TEST(HotRows, AShardReportsEachTablesSizeAndItsHottestRows) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({SparseSpec("emb", 4), SparseSpec("cold", 2)}, Sgd(0.1f))).ok());
  // Row 42 in every push, rows 0..999 once each.
  for (int b = 0; b < 10; ++b) {
    proto::PushRequest push;
    std::vector<int64_t> ids = {42};
    for (int64_t id = b * 100; id < (b + 1) * 100; ++id) {
      if (id != 42) ids.push_back(id);
    }
    AddRows(&push, "emb", 4, ids, std::vector<float>(4 * ids.size(), 0.01f));
    ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  }
  std::vector<proto::TableStats> tables = shard.tables().Stats(3);
  ASSERT_EQ(tables.size(), 2u);
  const proto::TableStats& cold = tables[0].name() == "cold" ? tables[0] : tables[1];
  const proto::TableStats& emb = tables[0].name() == "emb" ? tables[0] : tables[1];
  EXPECT_EQ(cold.rows(), 0);
  EXPECT_EQ(cold.hottest_size(), 0);
  EXPECT_EQ(emb.rows(), 1000);
  // SGD keeps no slots: per row 4 floats and the step count (8 bytes) at least, and
  // its index entry.
  EXPECT_GE(emb.bytes(), 1000 * (4 * 4 + 8 + 12));
  ASSERT_EQ(emb.hottest_size(), 3);
  EXPECT_EQ(emb.hottest(0).id(), 42);
  EXPECT_EQ(emb.hottest(0).updates(), 10);
  EXPECT_LE(emb.hottest(1).updates(), emb.hottest(0).updates());

  // The log line and the rates between two samples.
  proto::StatsResponse s;
  *s.add_tables() = emb;
  metrics::HotRowRates rates;
  const absl::Time t0 = absl::Now();
  std::vector<std::string> first = metrics::DescribeTables(s, &rates, t0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_THAT(first[0], HasSubstr("table emb: 1000 rows"));
  EXPECT_THAT(first[0], HasSubstr("hottest rows (updates, per second since the last line): 42 (10)"));
  s.mutable_tables(0)->mutable_hottest(0)->set_updates(30);
  std::vector<std::string> second = metrics::DescribeTables(s, &rates, t0 + absl::Seconds(2));
  EXPECT_THAT(second[0], HasSubstr("42 (30, 10/s)"));
}

}  // namespace
}  // namespace pl::pserver
