// The event files' bytes: TFRecord frames whose CRCs check, Event protos in them, the
// version record first; and the writer's errors.
#include "paddle_like/metrics/event_file_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "paddle_like/io/crc32c.h"
#include "tests/testing/scratch_dir.h"

namespace pl::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

uint64_t LE(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

// Reads every frame of an event file, checking both CRCs, as TensorBoard's reader does.
std::vector<proto::tb::Event> ReadEvents(const std::string& path) {
  const std::string data = pl::testing::Slurp(path);
  std::vector<proto::tb::Event> events;
  size_t at = 0;
  while (at < data.size()) {
    EXPECT_LE(at + 12, data.size()) << "truncated header at " << at;
    const uint64_t len = LE(data, at, 8);
    EXPECT_EQ(UnmaskCrc(static_cast<uint32_t>(LE(data, at + 8, 4))), Crc32c(data.data() + at, 8)) << "at " << at;
    EXPECT_LE(at + 16 + len, data.size());
    const std::string payload = data.substr(at + 12, len);
    EXPECT_EQ(UnmaskCrc(static_cast<uint32_t>(LE(data, at + 12 + len, 4))), Crc32c(payload.data(), len));
    proto::tb::Event e;
    EXPECT_TRUE(e.ParseFromString(payload));
    events.push_back(e);
    at += 16 + len;
  }
  return events;
}

TEST(EventFileWriterTest, WritesVersionThenScalarsAndHistograms) {
  pl::testing::ScratchDir dir;
  auto w = EventFileWriter::Open(dir.File("run/trainer-0"), {absl::Hours(1), "host"});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_THAT((*w)->path(), HasSubstr("/run/trainer-0/events.out.tfevents."));
  EXPECT_THAT((*w)->path(), HasSubstr(".host."));
  ASSERT_TRUE((*w)->AddScalars(1, {{"loss", 2.5}, {"train/accuracy", 0.25}}).ok());
  ASSERT_TRUE((*w)->AddScalar("loss", 1.5, 2).ok());
  ASSERT_TRUE((*w)->AddHistogram("w", std::vector<double>{-1, 0, 0.5, 2}, 2).ok());
  // Buffered (flush_every is an hour): only the version record is on disk yet.
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 1u);
  ASSERT_TRUE((*w)->Flush().ok());
  const auto events = ReadEvents((*w)->path());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.7e9);
  EXPECT_EQ(events[1].step(), 1);
  ASSERT_EQ(events[1].summary().value_size(), 2);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss");
  EXPECT_FLOAT_EQ(events[1].summary().value(0).simple_value(), 2.5f);
  EXPECT_EQ(events[1].summary().value(1).tag(), "train/accuracy");
  EXPECT_EQ(events[2].step(), 2);
  EXPECT_FLOAT_EQ(events[2].summary().value(0).simple_value(), 1.5f);
  const proto::tb::HistogramProto& h = events[3].summary().value(0).histo();
  EXPECT_EQ(h.num(), 4);
  EXPECT_EQ(h.min(), -1);
  EXPECT_EQ(h.max(), 2);
  EXPECT_EQ((*w)->bytes(), static_cast<int64_t>(std::filesystem::file_size((*w)->path())));
}

TEST(EventFileWriterTest, FlushesOnItsOwnAfterFlushEvery) {
  pl::testing::ScratchDir dir;
  auto w = EventFileWriter::Open(dir.path(), {absl::ZeroDuration(), "h"});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->AddScalar("x", 1, 7).ok());
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 2u);  // no Flush needed
}

TEST(EventFileWriterTest, TwoWritersOnOneDirectoryWriteTwoFiles) {
  pl::testing::ScratchDir dir;
  auto a = EventFileWriter::Open(dir.path());
  auto b = EventFileWriter::Open(dir.path());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

TEST(EventFileWriterTest, DirectoryThroughAFileIsAnErrorNamingIt) {
  pl::testing::ScratchDir dir;
  { std::ofstream(dir.File("file")) << "x"; }
  auto w = EventFileWriter::Open(dir.File("file/sub"));
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), StartsWith("cannot create the log directory '"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("file/sub"));
}

TEST(EventFileWriterTest, AddAfterCloseFails) {
  pl::testing::ScratchDir dir;
  auto w = EventFileWriter::Open(dir.path());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->AddScalar("x", 1, 1).ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_TRUE((*w)->Close().ok());  // idempotent
  const Status s = (*w)->AddScalar("x", 2, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 2u);  // Close wrote the buffered record
}

}  // namespace
}  // namespace pl::metrics
