// ProcessTlsTest: a fixture whose test runs with mutual TLS configured for this whole
// process (rpc/tls.h) as `identity` of a fresh job CA, for tests of the raw TLS sockets
// (snapshots, dense links) whose two ends live in one process; insecure again after.
#ifndef TESTS_TESTING_PROCESS_TLS_H_
#define TESTS_TESTING_PROCESS_TLS_H_

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/tls.h"

namespace pl::testing {

class ProcessTlsTest : public ::testing::Test {
 protected:
  explicit ProcessTlsTest(std::string identity = "pserver-0") : identity_(std::move(identity)) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("pl-process-tls-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(rpc::EnsureJobCa(dir_, "job").ok());
    ASSERT_TRUE(rpc::IssueCertificate(dir_, identity_).ok());
    ASSERT_TRUE(rpc::ConfigureTransportSecurity(dir_ + "/" + identity_).ok());
  }
  void TearDown() override {
    rpc::UseInsecureTransport();
    std::filesystem::remove_all(dir_);
  }
  const std::string identity_;
  std::string dir_;
};

}  // namespace pl::testing

#endif  // TESTS_TESTING_PROCESS_TLS_H_
