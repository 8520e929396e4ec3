// Helpers shared by the master tests: fake chunks and a fake clock.
#ifndef PADDLE_LIKE_TESTS_MASTER_TEST_UTIL_H_
#define PADDLE_LIKE_TESTS_MASTER_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "master/task_queue.h"
#include "paddle_like/data/chunk_index.h"
#include "tests/testing/scratch_dir.h"

namespace pl::testing {

// `n` chunks of 10 records spread over files of 4 chunks: "d/f0.plrec" chunks 0..3, ...
inline std::vector<ChunkInfo> MakeChunks(int n) {
  std::vector<ChunkInfo> out;
  for (int i = 0; i < n; ++i) {
    ChunkInfo c;
    c.path = absl::StrCat("d/f", i / 4, ".plrec");
    c.index = i % 4;
    c.offset = (i % 4) * 1000;
    c.length = 1000;
    c.num_records = 10;
    out.push_back(c);
  }
  return out;
}

// A clock tests move by hand.
struct FakeClock {
  int64_t now = 1'700'000'000'000;  // unix ms, like the real one
  std::function<int64_t()> fn() {
    return [this] { return now; };
  }
};

// A queue over MakeChunks(chunks) with `o`, on `clock`, that logs nowhere.
inline TaskQueue MakeQueue(FakeClock& clock, int chunks, const TaskQueueOptions& o) {
  auto q = TaskQueue::Create(MakeChunks(chunks), o, clock.fn(), [](const std::string&) {});
  EXPECT_TRUE(q.ok()) << q.status();
  return std::move(q).value();
}

}  // namespace pl::testing

#endif  // PADDLE_LIKE_TESTS_MASTER_TEST_UTIL_H_
