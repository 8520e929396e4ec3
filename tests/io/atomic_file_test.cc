#include "paddle_like/io/atomic_file.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

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

}  // namespace
}  // namespace pl
