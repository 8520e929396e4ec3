// The cluster file: what parses, and one line naming the field for what does not.
#include "paddle_like/elastic/cluster_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pl::elastic {
namespace {

std::string Error(const std::string& text) {
  StatusOr<proto::ElasticCluster> c = ParseCluster(text);
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(ClusterFileTest, ParsesSlotsReservationsAndJobs) {
  auto c = ParseCluster(
      "slots: 8  reserved_slots: 3\n"
      "job { name: \"ctr\" master: \"10.0.0.5:7000\" min_trainers: 1 max_trainers: 4 priority: 2 }\n"
      "job { name: \"mlp\" master: \"pl-master-0.pl-master:7000\" min_trainers: 0 max_trainers: 2 }\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->slots(), 8);
  EXPECT_EQ(c->reserved_slots(), 3);
  ASSERT_EQ(c->job_size(), 2);
  EXPECT_EQ(c->job(0).priority(), 2);
  EXPECT_EQ(c->job(1).master(), "pl-master-0.pl-master:7000");
}

TEST(ClusterFileTest, BadInputNamesTheField) {
  EXPECT_EQ(Error("slots: -1"), "slots: -1 is below 0");
  EXPECT_EQ(Error("slots: 4 reserved_slots: 5"), "reserved_slots: 5 is outside 0 .. slots (4)");
  EXPECT_EQ(Error("slots: 4 job { master: \"h:1\" max_trainers: 1 }"), "job #1: name is empty");
  EXPECT_EQ(Error("slots: 4 job { name: \"a\" master: \"h:1\" max_trainers: 1 } "
                  "job { name: \"a\" master: \"h:2\" max_trainers: 1 }"),
            "job 'a': name is repeated");
  EXPECT_EQ(Error("job { name: \"a\" master: \"h\" max_trainers: 1 }"), "job 'a': master 'h' is not HOST:PORT");
  EXPECT_EQ(Error("job { name: \"a\" master: \"h:1\" max_trainers: 0 }"), "job 'a': max_trainers 0 is below 1");
  EXPECT_EQ(Error("job { name: \"a\" master: \"h:1\" min_trainers: 3 max_trainers: 2 }"),
            "job 'a': min_trainers 3 is above max_trainers 2");
  EXPECT_THAT(Error("slots: 4\nslotz: 3\n"), ::testing::StartsWith("line 2 column "));
  EXPECT_THAT(Error("slots: 4\nslotz: 3\n"), ::testing::HasSubstr("slotz"));
}

TEST(ClusterFileTest, AMissingFileIsNotFoundNamingIt) {
  auto c = ReadClusterFile("/nonexistent/cluster.txt");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("/nonexistent/cluster.txt"));
}

}  // namespace
}  // namespace pl::elastic
