// BedJobTest: MlpJobTest (the mlp job of tests/dist) for tests that build a multi-host
// test bed; they skip, saying why, where no bed can be built (not root, no namespaces).
#ifndef PADDLE_LIKE_TESTS_NETBED_BED_JOB_TEST_H_
#define PADDLE_LIKE_TESTS_NETBED_BED_JOB_TEST_H_

#include <gtest/gtest.h>

#include "tests/dist/mlp_job_test.h"
#include "paddle_like/testing/test_bed.h"

namespace pl::dist_testing {

class BedJobTest : public MlpJobTest {
 protected:
  void SetUp() override {
    Status supported = netbed::TestBed::CheckSupported();
    if (!supported.ok()) GTEST_SKIP() << supported;
    MlpJobTest::SetUp();
  }
};

}  // namespace pl::dist_testing

#endif  // PADDLE_LIKE_TESTS_NETBED_BED_JOB_TEST_H_
