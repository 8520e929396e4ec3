#include "pserver/service/pserver_env.h"

#include "paddle_like/io/atomic_file.h"

namespace pl::pserver {

Env* Env::Default() {
  static Env* const env = new Env();
  return env;
}

absl::Time Env::Now() const { return absl::Now(); }

Status Env::WriteFileAtomically(const std::string& path, const std::string& contents) const {
  return pl::WriteFileAtomically(path, contents);
}

const Faults& Env::faults() const {
  static const Faults none;
  return none;
}

}  // namespace pl::pserver
