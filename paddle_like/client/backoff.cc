#include "paddle_like/client/backoff.h"

#include "paddle_like/rpc/rpc.h"

namespace pl {

Status RetryRpc(const std::function<Status()>& call, absl::Duration give_up_after,
                const std::atomic<bool>* stop, const std::string& what) {
  Backoff backoff(give_up_after);
  while (true) {
    Status s = call();
    if (s.ok() || !rpc::IsRetryable(s)) return s;
    if (backoff.Expired() || (stop && stop->load())) return Annotate(s, what + ": gave up retrying");
    backoff.Wait();
  }
}

}  // namespace pl
