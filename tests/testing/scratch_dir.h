// Test helpers over files: a scratch directory removed at the end, and small file edits
// (read, write, flip a byte, truncate) for corruption tests.
#ifndef PADDLE_LIKE_TESTS_TESTING_SCRATCH_DIR_H_
#define PADDLE_LIKE_TESTS_TESTING_SCRATCH_DIR_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace pl::testing {

// A fresh directory under the test's temp dir, removed with its contents at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = ::testing::TempDir() + "pl-test-XXXXXX";
    if (char* p = ::mkdtemp(tmpl.data())) path_ = p;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void Spit(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

inline void FlipByte(const std::string& path, size_t offset) {
  std::string s = Slurp(path);
  s[offset] = static_cast<char>(s[offset] ^ 0x20);
  Spit(path, s);
}

inline void Truncate(const std::string& path, size_t size) {
  std::filesystem::resize_file(path, size);
}

}  // namespace pl::testing

#endif  // PADDLE_LIKE_TESTS_TESTING_SCRATCH_DIR_H_
