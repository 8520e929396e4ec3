// ExchangeStrategy: how a trainer's steps exchange gradients and parameters with the
// pservers, behind one interface so the training loop is the same in every mode. The
// loop calls, for each step of a task,
//
//   BeforeStep(ids of this batch)          parameters for the step are in place
//   ... forward / backward ...
//   AfterStep(samples, ids of the next batch, or nullptr after the task's last step)
//
// then Drain() at the end of the task (its gradients all pushed before the master hears
// it is done) and PullForEvaluation() before evaluating the final parameters.
//
// The strategies (MakeExchangeStrategy picks one when the client has connected):
//   pull-then-push  Pull before each step, Push after it. Sync mode (a step must see
//                   the finished previous one), and the Python trainer's habit.
//   overlapped      async: after a step, its Push and the next step's Pull at once
//                   (ParameterClient::PushAndPull; one call per pserver through a
//                   shared-memory region, whose write-back brings the new values); a
//                   staleness of at most one step. The default for async training.
//   pipelined       async, dense models only, --pipeline: the exchange runs in the
//                   background while the next step computes (pipelined_exchange.h).
//
// Thread-safety: one training loop drives a strategy, as it drives its client.
#ifndef PADDLE_LIKE_CLIENT_EXCHANGE_STRATEGY_H_
#define PADDLE_LIKE_CLIENT_EXCHANGE_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "paddle_like/client/param_client.h"
#include "paddle_like/client/sparse_ids.h"
#include "paddle_like/core/status.h"
#include "paddle_like/nn/module.h"

namespace pl {

class ExchangeStrategy {
 public:
  virtual ~ExchangeStrategy() = default;

  // "pull-then-push", "overlapped" or "pipelined".
  virtual const char* name() const = 0;
  // Makes the parameters (and the rows `ids` names) of the coming step present: pulls
  // them unless the previous AfterStep brought them.
  virtual Status BeforeStep(const SparseIds& ids) = 0;
  // Sends the step's gradients (for `num_samples` examples); `next_ids`: the rows of the
  // task's next batch, nullptr after its last.
  virtual Status AfterStep(int64_t num_samples, const SparseIds* next_ids) = 0;
  // Waits until every gradient handed over is pushed.
  virtual Status Drain() = 0;
  // Pulls the current parameters (and the rows `ids` names) for an evaluation.
  virtual Status PullForEvaluation(const SparseIds& ids) = 0;
};

struct ExchangeChoice {
  bool sync = false;
  bool pipeline = false;  // asked for (--pipeline): used when the model allows it
};

// Whether MakeExchangeStrategy picks the pipelined strategy for `model`: decide before
// making the client, whose bind_parameters_to_shared_memory the pipeline forbids.
bool PicksPipelined(const ExchangeChoice& choice, Module& model);

// The strategy for `client` (bound to `model`, not owned, outliving the strategy):
// pull-then-push in sync mode, pipelined when asked for and the model is dense, else
// overlapped. `why_not_pipelined`, if given, says why a requested pipeline is not used
// ("" when it is, or was not asked for).
std::unique_ptr<ExchangeStrategy> MakeExchangeStrategy(ParameterClient* client, Module& model,
                                                       const ExchangeChoice& choice,
                                                       std::string* why_not_pipelined = nullptr);

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_EXCHANGE_STRATEGY_H_
