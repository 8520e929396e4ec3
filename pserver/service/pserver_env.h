// Env: what a pserver process takes from the world around it, in one place a test can
// replace (as leveldb's Env): the clock its timers read, the small files it writes for
// its supervisor (--port_file, --replica_id_file), and the faults a test injects
// (pserver/store/faults.h). Env::Default() is the real world with no faults.
//
// Thread-safety: implementations must be thread-safe; Default() lives forever.
#ifndef PSERVER_SERVICE_PSERVER_ENV_H_
#define PSERVER_SERVICE_PSERVER_ENV_H_

#include <string>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "pserver/store/faults.h"

namespace pl::pserver {

class Env {
 public:
  virtual ~Env() = default;
  // The real clock and file system, no faults.
  static Env* Default();

  virtual absl::Time Now() const;
  // Writes `contents` to `path` so that a reader sees the old file or the new one whole.
  virtual Status WriteFileAtomically(const std::string& path, const std::string& contents) const;
  virtual const Faults& faults() const;
};

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_PSERVER_ENV_H_
