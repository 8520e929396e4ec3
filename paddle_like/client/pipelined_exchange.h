// PipelinedExchange: overlaps a dense model's parameter traffic with its computation,
// for async training. While the trainer computes step k, the gradients of step k-1
// are pushed and fresh parameters pulled in the background; they are installed when
// step k hands over its own gradients. The traffic of a step then costs the trainer
// two memory copies of the model instead of a round trip to every pserver; one where
// the client swaps gradient tensors (swap_gradients_in_exchange, pl-trainer on the
// CPU): the gradients go as they are and the model gets zeroed ones in their place.
//
// It uses ParameterClient's StartExchange/FinishExchange: the gradients leave the
// model's tensors (into shared memory or buffers of their own) before Submit returns,
// and the parameters change only inside Submit, PullNow and Drain, never under a
// running forward or backward pass. Through shared memory it pushes and then pulls,
// so step k+1 runs on parameters that hold this trainer's updates up to step k-1.
// Between hosts (a dense link or gRPC) the push and the pull travel at once, the two
// directions of the connection, as the overlapped strategy's do: the pulled values may
// lack the push beside them, so step k+1 holds the updates up to step k-2 at least.
// That halves the exchange a step must hide (at 1 Gbit/s, 34 -> 17 ms for the mlp), and
// async mode tolerates the updates of other trainers arriving at any time. Sync
// mode and sparse tables do not use it: a sync step must see the finished previous
// step, and a sparse step needs the rows of its own batch.
//
// Thread-safety: one training loop calls it; one exchange is in flight at most.
#ifndef PADDLE_LIKE_CLIENT_PIPELINED_EXCHANGE_H_
#define PADDLE_LIKE_CLIENT_PIPELINED_EXCHANGE_H_

#include "paddle_like/core/status.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/client/param_client.h"

namespace pl {

class PipelinedExchange {
 public:
  // `client` must be bound to the model and not be in sync mode; it is not owned.
  explicit PipelinedExchange(ParameterClient* client);
  ~PipelinedExchange();  // waits for an exchange in flight

  // True when `model` can use it: every parameter dense.
  static bool Supports(Module& model);

  // Finishes any exchange in flight, then pulls and installs the current parameters
  // (the first step, and before an evaluation).
  Status PullNow();
  // After a step's backward pass: installs the parameters of the previous exchange,
  // then sends this step's gradients (zeroing them) and returns while they are pushed
  // and the next parameters pulled.
  Status Submit(int64_t num_samples);
  // Waits until the gradients handed over so far are pushed, and installs the
  // parameters pulled with them.
  Status Drain();

 private:
  ParameterClient* client_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_PIPELINED_EXCHANGE_H_
