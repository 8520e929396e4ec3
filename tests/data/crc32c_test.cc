#include "paddle_like/io/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "paddle_like/io/atomic_file.h"
#include "paddle_like/io/json_lite.h"
#include "tests/data/data_test_util.h"

namespace pl {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) appendix B.4.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(dec.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(inc.data(), 32), 0x46DD794Eu);
}

TEST(Crc32cTest, PortableMatchesAndExtendsAtEveryLengthAndSplit) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 131 + 7));
  for (size_t n = 0; n <= data.size(); n += 7) {
    const uint32_t whole = Crc32c(data.data(), n);
    EXPECT_EQ(Crc32cPortable(data.data(), n), whole) << n;
    const size_t cut = n / 3;
    EXPECT_EQ(Crc32c(data.data() + cut, n - cut, Crc32c(data.data(), cut)), whole) << n;
    EXPECT_EQ(Crc32cPortable(data.data() + cut, n - cut, Crc32cPortable(data.data(), cut)), whole);
  }
}

TEST(Crc32cTest, MaskRoundTripsAndMatchesTensorFlow) {
  for (uint32_t v : {0u, 1u, 0xE3069283u, 0xffffffffu}) EXPECT_EQ(UnmaskCrc(MaskCrc(v)), v);
  EXPECT_NE(MaskCrc(0xE3069283u), 0xE3069283u);
  // ((c >> 15) | (c << 17)) + 0xa282ead8, computed by hand for c = 1.
  EXPECT_EQ(MaskCrc(1u), (1u << 17) + 0xa282ead8u);
}

TEST(AtomicFileTest, WritesReplacesAndReads) {
  testing::ScratchDir dir;
  const std::string path = dir.File("a.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string("sec\0nd", 6)).ok());
  auto got = ReadFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("sec\0nd", 6));
  // No temporary files are left behind.
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(AtomicFileTest, ErrorsNameThePath) {
  testing::ScratchDir dir;
  auto missing = ReadFile(dir.File("nope"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.File("nope")), std::string::npos);
  Status s = WriteFileAtomically(dir.File("no/such/dir/x"), "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no/such/dir/x"), std::string::npos);
  EXPECT_NE(s.message().find("No such file"), std::string::npos);
}

TEST(AtomicFileTest, AbandonedWriterLeavesTheOldFile) {
  testing::ScratchDir dir;
  const std::string path = dir.File("keep");
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  {
    AtomicFileWriter w;
    ASSERT_TRUE(w.Open(path).ok());
    ASSERT_TRUE(w.Append("new but never committed").ok());
  }
  EXPECT_EQ(*ReadFile(path), "old");
}

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
