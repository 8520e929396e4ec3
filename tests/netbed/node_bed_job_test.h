// NodeBedJobTest: BedJobTest (the mlp job of MlpJobTest on a multi-host test bed) run by
// one pl-launch per host (node_bed.h): makes the bed, starts node R on host R with the
// job's data and trainer, and removes every node and the bed after each test.
// PL_DIST_TEST_LOGS=1 prints every node's output after each test (passing or not).
//
// Thread-safety: used by the test's thread.
#ifndef PADDLE_LIKE_TESTS_NETBED_NODE_BED_JOB_TEST_H_
#define PADDLE_LIKE_TESTS_NETBED_NODE_BED_JOB_TEST_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tests/netbed/bed_job_test.h"
#include "paddle_like/testing/node_bed.h"

namespace pl::dist_testing {

class NodeBedJobTest : public BedJobTest {
 protected:
  void TearDown() override {
    const char* dump = std::getenv("PL_DIST_TEST_LOGS");
    if (nodes_ && dump != nullptr && std::string(dump) == "1") std::cout << nodes_->AllOutput() << std::endl;
    nodes_.reset();
    BedJobTest::TearDown();
  }

  void MakeBed(int hosts) {
    auto nodes = NodeBed::Create(hosts, dir_.path());
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    nodes_ = std::move(*nodes);
  }

  // Node `rank` of `nnodes` on the mlp job with `flags`.
  void StartNode(int rank, int nnodes, std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--data", dir_.path() + "/train.plrec"});
    std::vector<std::string> trainer = {nodes_->bin("pl-trainer")};
    const ClusterOptions o = Options(1, 1, 1000);
    trainer.insert(trainer.end(), o.trainer_args.begin(), o.trainer_args.end());
    Status s = nodes_->StartNode(rank, nnodes, flags, trainer);
    ASSERT_TRUE(s.ok()) << s;
  }

  std::unique_ptr<NodeBed> nodes_;
};

}  // namespace pl::dist_testing

#endif  // PADDLE_LIKE_TESTS_NETBED_NODE_BED_JOB_TEST_H_
