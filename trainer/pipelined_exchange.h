// PipelinedExchange: overlaps a dense model's parameter traffic with its computation,
// for async training. While the trainer computes step k, a worker thread pushes the
// gradients of step k-1 and pulls fresh parameters; they are installed when step k
// hands over its own gradients. The traffic of a step then costs the trainer two
// memory copies of the model instead of a round trip to every pserver.
//
// The worker talks through a ParameterClient bound to `mirror`, a second instance of
// the same model, so the trainer's parameters never change under a running forward
// or backward pass. It pushes and then pulls, so step k+1 runs on parameters that
// hold this trainer's updates up to step k-1: the same staleness (one step) as a
// trainer that overlaps its push with its next pull, and async mode tolerates the
// updates of other trainers arriving at any time. Sync mode and sparse tables do not
// use it: a sync step must see the finished previous step, and a sparse step needs
// the rows of its own batch.
//
// Thread-safety: one training loop calls it; it owns one background exchange at most.
#ifndef PADDLE_LIKE_TRAINER_PIPELINED_EXCHANGE_H_
#define PADDLE_LIKE_TRAINER_PIPELINED_EXCHANGE_H_

#include <future>

#include "paddle_like/core/status.h"
#include "paddle_like/nn/module.h"
#include "trainer/param_client.h"

namespace pl {

class PipelinedExchange {
 public:
  // `model` and `mirror` must have the same parameters (names, shapes, all dense);
  // `client` must be bound to `mirror`. None is owned.
  PipelinedExchange(Module* model, Module* mirror, ParameterClient* client);
  ~PipelinedExchange();  // waits for an exchange in flight
  PipelinedExchange(const PipelinedExchange&) = delete;
  PipelinedExchange& operator=(const PipelinedExchange&) = delete;

  // True when `model` can use it: every parameter dense.
  static bool Supports(Module& model);

  // Waits for any exchange in flight, pulls the current parameters and installs them
  // into `model` (the first step, and before an evaluation).
  Status PullNow();
  // After a step's backward pass: waits for the previous exchange, installs the
  // parameters it pulled, hands this step's gradients to the worker (zeroing them in
  // `model`) and returns while they are pushed and the next parameters pulled.
  Status Submit(int64_t num_samples);
  // Waits until the gradients handed over so far are pushed, and installs the
  // parameters pulled with them.
  Status Drain();

 private:
  Status CopyParameters(Module& from, Module& to, bool gradients);

  Module* model_;
  Module* mirror_;
  ParameterClient* client_;
  std::future<Status> in_flight_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_PIPELINED_EXCHANGE_H_
