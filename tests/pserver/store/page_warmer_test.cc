// PageWarmer (paddle_like/dist/page_warmer.h): the pages it is given become resident without a
// write of the caller's, and what a writer writes meanwhile is left as written.
#include "paddle_like/dist/page_warmer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pl::pserver {
namespace {

size_t ResidentPages(void* data, size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (::mincore(data, bytes, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(PageWarmer, FaultsInFreshPagesAndLeavesWhatAWriterWroteMeanwhile) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = size_t{64} << 20;
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* words = static_cast<uint64_t*>(map);
  const size_t n = bytes / sizeof(uint64_t);
  ASSERT_EQ(ResidentPages(map, bytes), 0u) << "a fresh mapping should hold no pages yet";
  {
    PageWarmer warmer;
    warmer.Add(map, bytes);
    // The writer fills the first half while the warmer runs over all of it.
    for (size_t i = 0; i < n / 2; ++i) words[i] = i * 0x9E3779B97F4A7C15ull;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (ResidentPages(map, bytes) < bytes / page && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  EXPECT_EQ(ResidentPages(map, bytes), bytes / page) << "the half nobody wrote was not faulted in";
  size_t wrong = 0;
  for (size_t i = 0; i < n / 2; ++i) wrong += words[i] != i * 0x9E3779B97F4A7C15ull;
  for (size_t i = n / 2; i < n; ++i) wrong += words[i] != 0;
  EXPECT_EQ(wrong, 0u);
  ::munmap(map, bytes);
}

TEST(PageWarmer, StopsAtOnceWithWorkQueued) {
  const size_t bytes = size_t{512} << 20;  // never touched by the test: only reserved
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  const auto start = std::chrono::steady_clock::now();
  {
    PageWarmer warmer;
    warmer.Add(map, bytes);
  }  // the destructor drops the rest after at most one piece
  EXPECT_LT(ResidentPages(map, bytes), bytes / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  ::munmap(map, bytes);
}

}  // namespace
}  // namespace pl::pserver
