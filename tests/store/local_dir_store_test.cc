#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/store/local_dir_store.h"
#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using pl::testing::ScratchDir;

// Flips one byte of the file at `path` (at `pos` from the start).
void FlipByte(const std::string& path, long pos) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(pos);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x5a;
  f.seekp(pos);
  f.write(&c, 1);
}

struct Captured {
  std::vector<std::string> lines;
  LocalDirStore::Options options() {
    LocalDirStore::Options o;
    o.warn = [this](const std::string& l) { lines.push_back(l); };
    return o;
  }
};

TEST(LocalDirStoreTest, PutGetOverwriteDeleteList) {
  ScratchDir dir;
  auto store = LocalDirStore::Open(dir.path() + "/state");
  ASSERT_TRUE(store.ok()) << store.status();
  LocalDirStore& s = **store;

  auto missing = s.Get("master/state");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("master/state"));

  ASSERT_TRUE(s.Put("master/state", "one").ok());
  EXPECT_EQ(*s.Get("master/state"), "one");
  ASSERT_TRUE(s.Put("master/state", std::string("two\0bytes", 9)).ok());
  EXPECT_EQ(*s.Get("master/state"), std::string("two\0bytes", 9));
  ASSERT_TRUE(s.Put("master/other", "").ok());
  EXPECT_EQ(*s.Get("master/other"), "");
  ASSERT_TRUE(s.Put("top", "x").ok());

  // The previous copy is kept beside the newest, framed the same way.
  auto prev = ReadFile(dir.path() + "/state/master/state.prev");
  ASSERT_TRUE(prev.ok());
  EXPECT_EQ(*DecodeStoreFrame(*prev), "one");

  EXPECT_THAT(*s.List(""), ElementsAre("master/other", "master/state", "top"));
  EXPECT_THAT(*s.List("master/"), ElementsAre("master/other", "master/state"));
  EXPECT_THAT(*s.List("nothing"), ElementsAre());

  ASSERT_TRUE(s.Delete("master/state").ok());
  EXPECT_EQ(s.Get("master/state").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(s.Delete("master/state").ok());  // deleting what is gone is fine
  EXPECT_THAT(*s.List("master/"), ElementsAre("master/other"));
}

TEST(LocalDirStoreTest, CorruptNewestCopyFallsBackToPrevious) {
  ScratchDir dir;
  Captured warn;
  auto store = LocalDirStore::Open(dir.path(), warn.options());
  ASSERT_TRUE(store.ok());
  LocalDirStore& s = **store;
  ASSERT_TRUE(s.Put("k", "v1").ok());
  ASSERT_TRUE(s.Put("k", "v2").ok());
  FlipByte(dir.path() + "/k", 25);  // inside the value

  auto got = s.Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v1");
  EXPECT_EQ(s.corrupt_copies_skipped(), 1);
  ASSERT_EQ(warn.lines.size(), 1u);
  EXPECT_THAT(warn.lines[0], HasSubstr("corrupt copy of key 'k'"));
  EXPECT_THAT(warn.lines[0], HasSubstr("value checksum mismatch"));

  // A put over a corrupt newest copy must not push the good previous copy out.
  ASSERT_TRUE(s.Put("k", "v3").ok());
  EXPECT_EQ(*s.Get("k"), "v3");
  FlipByte(dir.path() + "/k", 3);  // the magic
  EXPECT_EQ(*s.Get("k"), "v1");
}

TEST(LocalDirStoreTest, TruncatedNewestCopyFallsBackToPrevious) {
  ScratchDir dir;
  Captured warn;
  auto store = LocalDirStore::Open(dir.path(), warn.options());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("k", "first value").ok());
  ASSERT_TRUE((*store)->Put("k", "second value").ok());
  ASSERT_EQ(::truncate((dir.path() + "/k").c_str(), 30), 0);
  EXPECT_EQ(*(*store)->Get("k"), "first value");
  ASSERT_EQ(warn.lines.size(), 1u);
  EXPECT_THAT(warn.lines[0], HasSubstr("length mismatch"));
}

TEST(LocalDirStoreTest, BothCopiesCorruptIsDataLoss) {
  ScratchDir dir;
  Captured warn;
  auto store = LocalDirStore::Open(dir.path(), warn.options());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("k", "v1").ok());
  ASSERT_TRUE((*store)->Put("k", "v2").ok());
  FlipByte(dir.path() + "/k", 25);
  FlipByte(dir.path() + "/k.prev", 10);  // the header
  auto got = (*store)->Get("k");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("no valid copy of key 'k'"));
  EXPECT_THAT(got.status().message(), HasSubstr("header checksum mismatch"));
  EXPECT_EQ((*store)->corrupt_copies_skipped(), 2);
}

TEST(LocalDirStoreTest, BadKeysAreRejected) {
  ScratchDir dir;
  auto store = LocalDirStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  for (const char* key : {"", "../escape", "a/../../b", "/abs", "a//b", "a/", ".hidden", "x.prev", "x.tmp.1",
                          "sp ace", "semi;colon"}) {
    Status st = (*store)->Put(key, "v");
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << "key '" << key << "'";
    EXPECT_THAT(st.message(), HasSubstr("state store key")) << key;
    EXPECT_EQ((*store)->Get(key).status().code(), absl::StatusCode::kInvalidArgument) << key;
  }
  EXPECT_THAT(ValidateKey("../escape").message(), HasSubstr("starts with '.'"));
  EXPECT_TRUE(ValidateKey("job-1/master_state.v1").ok());
  // Nothing escaped the directory.
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir.path()).parent_path() / "escape"));
}

TEST(LocalDirStoreTest, OneOwnerAtATimeAndLeftoversCleaned) {
  ScratchDir dir;
  {
    auto first = LocalDirStore::Open(dir.path());
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE((*first)->Put("k", "v").ok());
    auto second = LocalDirStore::Open(dir.path());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.status().message(), HasSubstr("in use"));
  }
  // A writer that crashed mid-put leaves a temporary file; the next owner removes it.
  std::string leftover = dir.path() + "/k.tmp.123.0";
  std::ofstream(leftover) << "half";
  auto reopened = LocalDirStore::Open(dir.path());
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_EQ(*(*reopened)->Get("k"), "v");
  EXPECT_THAT(*(*reopened)->List(""), ElementsAre("k"));
}

TEST(LocalDirStoreTest, FrameRejectsForeignBytes) {
  EXPECT_EQ(DecodeStoreFrame("short").status().code(), absl::StatusCode::kDataLoss);
  std::string frame = EncodeStoreFrame("payload");
  EXPECT_EQ(*DecodeStoreFrame(frame), "payload");
  frame[0] = 'X';
  EXPECT_THAT(DecodeStoreFrame(frame).status().message(), HasSubstr("bad magic"));
}

}  // namespace
}  // namespace pl
