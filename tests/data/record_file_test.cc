#include "paddle_like/data/record_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/io/crc32c.h"
#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

using testing::ScratchDir;

std::vector<std::string> MakeRecords(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("record-", i, std::string(i % 5, 'x')));
  out[3] = "";  // empty records are legal
  return out;
}

Status WriteAll(const std::string& path, const std::vector<std::string>& recs, int per_chunk) {
  RecordWriter w;
  PL_RETURN_IF_ERROR(w.Open(path, per_chunk));
  for (const auto& r : recs) PL_RETURN_IF_ERROR(w.Write(r));
  return w.Close();
}

StatusOr<std::vector<std::string>> ReadAll(RecordReader& r) {
  std::vector<std::string> out;
  std::string rec;
  while (true) {
    PL_ASSIGN_OR_RETURN(bool more, r.Next(&rec));
    if (!more) return out;
    out.push_back(rec);
  }
}

TEST(RecordFileTest, RoundTripAcrossChunks) {
  ScratchDir dir;
  const std::string path = dir.File("a.plrec");
  const auto recs = MakeRecords(23);
  ASSERT_TRUE(WriteAll(path, recs, 5).ok());

  auto chunks = ReadChunkIndex(path);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  ASSERT_EQ(chunks->size(), 5u);  // 5 + 5 + 5 + 5 + 3
  EXPECT_EQ((*chunks)[4].num_records, 3);
  EXPECT_EQ((*chunks)[0].offset, 0);
  EXPECT_EQ((*chunks)[2].index, 2);
  EXPECT_EQ((*chunks)[2].path, path);
  // Frame size: 8 + 4 + len + 4.
  int64_t first_chunk = 0;
  for (int i = 0; i < 5; ++i) first_chunk += 16 + static_cast<int64_t>(recs[i].size());
  EXPECT_EQ((*chunks)[0].length, first_chunk);
  EXPECT_EQ((*chunks)[1].offset, first_chunk);

  std::vector<std::string> joined;
  for (const ChunkInfo& c : *chunks) {
    RecordReader r;
    ASSERT_TRUE(r.OpenChunk(c).ok());
    auto part = ReadAll(r);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(static_cast<int64_t>(part->size()), c.num_records);
    joined.insert(joined.end(), part->begin(), part->end());
  }
  EXPECT_EQ(joined, recs);

  RecordReader whole;
  ASSERT_TRUE(whole.Open(path).ok());
  EXPECT_EQ(*ReadAll(whole), recs);
}

TEST(RecordFileTest, FramesAreTfRecord) {
  ScratchDir dir;
  const std::string path = dir.File("one.plrec");
  ASSERT_TRUE(WriteAll(path, {"abc"}, 10).ok());
  std::string bytes = testing::Slurp(path);
  ASSERT_EQ(bytes.size(), 19u);
  uint64_t len = 3;
  std::string expect(reinterpret_cast<char*>(&len), 8);
  uint32_t lcrc = MaskCrc(Crc32c(&len, 8)), dcrc = MaskCrc(Crc32c("abc", 3));
  expect += std::string(reinterpret_cast<char*>(&lcrc), 4) + "abc" +
            std::string(reinterpret_cast<char*>(&dcrc), 4);
  EXPECT_EQ(bytes, expect);
}

TEST(RecordFileTest, LargeRecordsAndEmptyFile) {
  ScratchDir dir;
  std::vector<std::string> recs = {std::string(3 << 20, 'a'), "small", std::string(300000, 'b')};
  ASSERT_TRUE(WriteAll(dir.File("big.plrec"), recs, 2).ok());
  RecordReader r;
  ASSERT_TRUE(r.Open(dir.File("big.plrec")).ok());
  EXPECT_EQ(*ReadAll(r), recs);

  ASSERT_TRUE(WriteAll(dir.File("empty.plrec"), {}, 2).ok());
  EXPECT_TRUE(ReadChunkIndex(dir.File("empty.plrec"))->empty());
}

TEST(RecordFileTest, FlippedByteIsDataLossWithFileAndOffset) {
  ScratchDir dir;
  const std::string path = dir.File("f.plrec");
  const auto recs = MakeRecords(10);
  ASSERT_TRUE(WriteAll(path, recs, 4).ok());
  // Third frame starts after two frames; flip a data byte of it.
  const size_t third = 32 + recs[0].size() + recs[1].size();
  testing::FlipByte(path, third + 12 + 2);
  RecordReader r;
  ASSERT_TRUE(r.Open(path).ok());
  auto got = ReadAll(r);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find(path), std::string::npos) << got.status();
  EXPECT_NE(got.status().message().find(absl::StrCat("byte ", third)), std::string::npos)
      << got.status();
  EXPECT_NE(got.status().message().find("data checksum"), std::string::npos);
  // Later calls keep failing instead of reading from a bad position.
  std::string rec;
  EXPECT_EQ(r.Next(&rec).status(), got.status());

  // A flipped length byte is caught by the length checksum, before any allocation.
  ASSERT_TRUE(WriteAll(path, recs, 4).ok());
  testing::FlipByte(path, 16 + recs[0].size() + 7);  // high byte of frame 1's length
  RecordReader r2;
  ASSERT_TRUE(r2.Open(path).ok());
  auto got2 = ReadAll(r2);
  EXPECT_EQ(got2.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got2.status().message().find(absl::StrCat("byte ", 16 + recs[0].size())),
            std::string::npos)
      << got2.status();
  EXPECT_NE(got2.status().message().find("length checksum"), std::string::npos);
}

TEST(RecordFileTest, TruncatedFileIsDataLoss) {
  ScratchDir dir;
  const std::string path = dir.File("t.plrec");
  const auto recs = MakeRecords(6);
  const size_t first = 16 + recs[0].size();
  for (size_t cut : {first + 5 /* mid-length */, first + 12 + 3 /* mid-data */,
                     first + 16 + recs[1].size() - 2 /* mid-crc */}) {
    ASSERT_TRUE(WriteAll(path, recs, 2).ok());
    testing::Truncate(path, cut);
    RecordReader r;
    ASSERT_TRUE(r.Open(path).ok());
    auto got = ReadAll(r);
    ASSERT_FALSE(got.ok()) << cut;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
    EXPECT_NE(got.status().message().find("truncated"), std::string::npos) << got.status();
    EXPECT_NE(got.status().message().find(path), std::string::npos);

    // The index no longer matches the file.
    auto idx = ReadChunkIndex(path);
    EXPECT_EQ(idx.status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(RecordFileTest, ChunkOfATruncatedFileIsDataLoss) {
  ScratchDir dir;
  const std::string path = dir.File("c.plrec");
  ASSERT_TRUE(WriteAll(path, MakeRecords(9), 3).ok());
  auto chunks = *ReadChunkIndex(path);
  testing::Truncate(path, chunks[2].offset + 4);
  RecordReader r;
  Status s = r.OpenChunk(chunks[2]);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated"), std::string::npos);
  // A chunk whose count disagrees with its frames is caught at its end.
  ChunkInfo wrong = chunks[0];
  wrong.num_records = 4;
  RecordReader r2;
  ASSERT_TRUE(r2.OpenChunk(wrong).ok());
  auto got = ReadAll(r2);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
}

TEST(RecordFileTest, IndexErrors) {
  ScratchDir dir;
  const std::string path = dir.File("i.plrec");
  auto missing = ReadChunkIndex(path);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("i.plrec.index"), std::string::npos);

  ASSERT_TRUE(WriteAll(path, MakeRecords(7), 2).ok());
  testing::FlipByte(path + ".index", 30);
  auto flipped = ReadChunkIndex(path);
  EXPECT_EQ(flipped.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(flipped.status().message().find("checksum"), std::string::npos);

  ASSERT_TRUE(WriteAll(path, MakeRecords(7), 2).ok());
  testing::Truncate(path + ".index", 20);
  EXPECT_EQ(ReadChunkIndex(path).status().code(), absl::StatusCode::kDataLoss);
}

TEST(RecordFileTest, ListChunksCoversADirectoryInNameOrder) {
  ScratchDir dir;
  ASSERT_TRUE(WriteAll(dir.File("b.plrec"), MakeRecords(5), 2).ok());  // 3 chunks
  ASSERT_TRUE(WriteAll(dir.File("a.plrec"), MakeRecords(4), 4).ok());  // 1 chunk
  testing::Spit(dir.File("notes.txt"), "ignored");
  auto all = ListChunks(dir.path());
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].path, dir.File("a.plrec"));
  EXPECT_EQ((*all)[1].path, dir.File("b.plrec"));
  EXPECT_EQ(ListChunks(dir.File("b.plrec"))->size(), 3u);
  EXPECT_EQ(ListChunks(dir.File("nope")).status().code(), absl::StatusCode::kNotFound);
}

TEST(RecordFileTest, IndexChunksCoverTheRangeOnceAndNoReaderOpensThem) {
  auto chunks = ListChunks("indices:1000:256");
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  ASSERT_EQ(chunks->size(), 4u);
  int64_t next = 0;
  for (const ChunkInfo& c : *chunks) {
    EXPECT_TRUE(IsIndexChunk(c));
    EXPECT_EQ(c.offset, next);  // contiguous, no gap, no overlap
    next += c.num_records;
  }
  EXPECT_EQ(next, 1000);
  EXPECT_EQ(chunks->back().num_records, 1000 - 3 * 256);
  EXPECT_EQ(ListChunks("indices:10")->size(), 1u);  // kDefaultIndexChunk per chunk
  EXPECT_EQ(ListChunks("indices:600")->size(), 3u);
  for (const char* bad : {"indices:", "indices:0", "indices:-5", "indices:12:0", "indices:x", "indices:1:2:3"}) {
    Status s = ListChunks(bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s;
  }
  RecordReader r;
  Status s = r.OpenChunk((*chunks)[1]);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[256, 512)"), std::string::npos) << s;
}

TEST(RecordFileTest, WriterErrors) {
  ScratchDir dir;
  RecordWriter w;
  EXPECT_EQ(w.Open(dir.File("x.plrec"), 0).code(), absl::StatusCode::kInvalidArgument);
  Status s = w.Open(dir.File("missing/x.plrec"), 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("missing/x.plrec"), std::string::npos);
  {
    RecordWriter unfinished;
    ASSERT_TRUE(unfinished.Open(dir.File("u.plrec"), 10).ok());
    ASSERT_TRUE(unfinished.Write("r").ok());
  }
  // Without Close() neither the file nor its index exists.
  EXPECT_FALSE(std::filesystem::exists(dir.File("u.plrec")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("u.plrec.index")));
}

}  // namespace
}  // namespace pl
