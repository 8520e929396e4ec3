// JobTls: a launched job's mutual TLS (paddle_like/rpc/tls.h): unless --insecure, the
// job's CA in WORKDIR/tls/ca (made, or copied from --tls_ca so every node shares it)
// and one certificate per identity this node's processes act as, made before any
// process starts; and the flag that hands each process its own.
//
// Thread-safety: Prepare once, before the children start; then immutable.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_JOB_TLS_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_JOB_TLS_H_

#include <functional>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "trainer/launcher/job_layout.h"
#include "trainer/launcher/launch_options.h"

namespace pl {

class JobTls {
 public:
  // Makes the CA and the certificates of `layout`'s identities (trainer, launch, the
  // master where this node runs it, its pservers), and has this process's own channels
  // use the launch identity. `log` says which it is.
  Status Prepare(const LaunchOptions& options, const JobLayout& layout,
                 const std::function<void(const std::string&)>& log);
  // "--tls_dir DIR" (or "--insecure") for `identity`'s command line.
  std::vector<std::string> Args(const std::string& identity) const;
  // `identity`'s directory (PL_TLS_DIR), "" when insecure.
  std::string Dir(const std::string& identity) const { return root_.empty() ? "" : root_ + "/" + identity; }
  // Whether Prepare configured this process's transport (undone when the job ends).
  bool configured() const { return configured_; }

 private:
  std::string root_;  // WORKDIR/tls; empty: insecure
  bool configured_ = false;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_JOB_TLS_H_
