// BedPlacement: where a Cluster's processes run on a multi-host test bed (test_bed.h):
// the master, each pserver and each trainer on a host of the bed. A test may move a
// process (pserver_hosts[i] = h) before it starts it again. Used by the multi-host tests
// and pl-bench-scaling.
//
// Thread-safety: used by the thread that drives the Cluster.
#ifndef PADDLE_LIKE_TESTS_NETBED_BED_PLACEMENT_H_
#define PADDLE_LIKE_TESTS_NETBED_BED_PLACEMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "paddle_like/testing/cluster.h"
#include "paddle_like/testing/test_bed.h"

namespace pl::dist_testing {

class BedPlacement : public ProcessPlacement {
 public:
  explicit BedPlacement(netbed::TestBed* bed) : bed_(bed) {}
  int master_host = 0;
  std::vector<int> pserver_hosts;
  std::vector<int> trainer_hosts;  // trainer r runs on trainer_hosts[r % size]

  int HostOf(Role role, int index) const {
    switch (role) {
      case Role::kMaster:
        return master_host;
      case Role::kPserver:
        return pserver_hosts.at(index);
      case Role::kTrainer:
        return trainer_hosts.at(index % trainer_hosts.size());
    }
    return 0;
  }
  std::string Address(Role role, int index) const override { return bed_->host(HostOf(role, index)).address(); }
  StatusOr<std::unique_ptr<ChildProcess>> Spawn(Role role, int index, const std::vector<std::string>& argv,
                                                const std::string& log, const testing::EnvVars& env) override {
    return bed_->Start(HostOf(role, index), argv, log, env);
  }

 private:
  netbed::TestBed* bed_;
};

}  // namespace pl::dist_testing

#endif  // PADDLE_LIKE_TESTS_NETBED_BED_PLACEMENT_H_
