// A registry finds what was registered and names everything it knows otherwise.
#include "paddle_like/core/registry.h"

#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pl {
namespace {

using ::testing::ElementsAre;
using Factory = std::function<int(int)>;

TEST(RegistryTest, FindsRegisteredEntriesAndNamesTheKnownOnesOtherwise) {
  Registry<Factory> r("widget");
  ASSERT_TRUE(r.Register("double", [](int x) { return 2 * x; }, "times two").ok());
  ASSERT_TRUE(r.Register("add", [](int x) { return x + 1; }).ok());
  auto twice = r.Find("double");
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ((**twice)(21), 42);
  EXPECT_THAT(r.Names(), ElementsAre("add", "double"));
  EXPECT_EQ(r.Help(), "add, double (times two)");
  auto missing = r.Find("tripple");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "unknown widget 'tripple' (known: add, double)");
}

TEST(RegistryTest, RefusesDuplicatesAndEmptyNamesKeepingTheFirst) {
  Registry<Factory> r("widget");
  ASSERT_TRUE(r.Register("id", [](int x) { return x; }).ok());
  Status dup = r.Register("id", [](int) { return 0; });
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.message(), "widget 'id' is already registered");
  EXPECT_EQ((**r.Find("id"))(7), 7);
  EXPECT_EQ(r.Register("", [](int x) { return x; }).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pl
