#include "paddle_like/io/json_lite.h"

#include <gtest/gtest.h>

#include <string>

namespace pl {
namespace {

TEST(JsonLiteTest, ParsesTheSubsetAndKeepsOrder) {
  auto v = ParseJson(R"( {"b": [1, -2, 3.5e1], "a": {"s": "x\"\u00e9\ud83d\ude00"}, "t": true, "n": null} )");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->is_object());
  EXPECT_EQ(v->object[0].first, "b");
  EXPECT_EQ(v->object[0].second.array[1].integer, -2);
  EXPECT_FALSE(v->object[0].second.array[2].is_int());
  EXPECT_DOUBLE_EQ(v->object[0].second.array[2].number, 35.0);
  EXPECT_EQ(v->Find("a")->Find("s")->string, "x\"\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(v->Find("t")->boolean);
}

TEST(JsonLiteTest, RejectsWhatJsonForbids) {
  for (const char* bad : {"{\"a\":1,}", "[1,]", "{\"a\":1}x", "{\"a\":1,\"a\":2}", "01", "\"\x01\"",
                          "\"\xff\"", "{a:1}", "[1 2]", "\"\\ud800\"", "", "nul", "1.", "-"}) {
    auto v = ParseJson(bad);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  std::string deep(100, '[');
  EXPECT_FALSE(ParseJson(deep + std::string(100, ']')).ok());
}

TEST(JsonLiteTest, QuoteRoundTrips) {
  const std::string s = "a\"b\\c\n\x01\xc3\xa9";
  auto v = ParseJson(JsonQuote(s));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->string, s);
}

}  // namespace
}  // namespace pl
