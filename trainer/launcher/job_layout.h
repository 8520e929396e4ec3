// JobLayout: where a job's pieces are on this node, from pl-launch's options and the
// job's working directory: which shard copies this node runs and the names of their
// processes (node_role.h), and the files each process finds or leaves in WORKDIR: its
// checkpoints, port files, replica id, and the log directory.
//
// Thread-safety: set_workdir once, before the job starts; then immutable.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_JOB_LAYOUT_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_JOB_LAYOUT_H_

#include <algorithm>
#include <string>
#include <vector>

#include "trainer/launcher/launch_options.h"
#include "trainer/launcher/node_role.h"

namespace pl {

// The port in a port file written by a child (read twice, 10 ms apart, so a file being
// written is not misread); 0 when absent or not yet complete.
int ReadPortFile(const std::string& path);

class JobLayout {
 public:
  // `options` outlives the layout.
  explicit JobLayout(const LaunchOptions* options) : options_(options) {}

  void set_workdir(std::string workdir) { workdir_ = std::move(workdir); }
  // Absolute, once the launcher made or found it.
  const std::string& workdir() const { return workdir_; }

  bool multi_node() const { return options_->num_nodes > 1; }
  // Masters of the job: 1, or K with --master_addr A,B,C (nodes 0..K-1 run one each,
  // beside an etcd member, and one leads).
  int num_masters() const {
    return multi_node() ? 1 + static_cast<int>(std::count(options_->master_addr.begin(), options_->master_addr.end(), ','))
                        : 1;
  }
  bool standby_masters() const { return num_masters() > 1; }
  bool runs_master() const { return options_->node_rank < num_masters(); }
  int total_pservers() const { return options_->num_nodes * options_->num_pservers; }
  // The shard copies this node runs (with --replicas, copies of other nodes' shards
  // too), and the shards they belong to.
  std::vector<ShardCopy> LocalCopies() const;
  std::vector<int> LocalPservers() const;
  // "pserver-I", or with --replicas "pserver-I.r".
  std::string PserverName(const ShardCopy& copy) const;
  // This node's processes of pserver `index`.
  std::vector<std::string> PserverNames(int index) const;
  // WORKDIR/pservers/<index> (or <index>.<replica>): where that process checkpoints.
  std::string CheckpointDir(const std::string& pserver_name) const;
  // WORKDIR/ports/<name>.port: where process `name` writes the port it serves on.
  std::string PortFile(const std::string& name) const;
  // Where pserver process `name` writes its replica id (--replica_id_file).
  std::string ReplicaIdFile(const std::string& name) const;
  // Where trainer process `name` writes its master-assigned id (PL_TRAINER_ID_FILE).
  std::string TrainerIdFile(const std::string& name) const;
  // --logdir, absolute ("" without it).
  std::string LogDir() const;

 private:
  const LaunchOptions* const options_;
  std::string workdir_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_JOB_LAYOUT_H_
