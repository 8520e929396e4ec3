#include "paddle_like/client/exchange_strategy.h"

#include "paddle_like/client/pipelined_exchange.h"

namespace pl {
namespace {

class PullThenPush final : public ExchangeStrategy {
 public:
  explicit PullThenPush(ParameterClient* client) : client_(client) {}
  const char* name() const override { return "pull-then-push"; }
  Status BeforeStep(const SparseIds& ids) override { return client_->Pull(ids); }
  Status AfterStep(int64_t num_samples, const SparseIds*) override { return client_->Push(num_samples); }
  Status Drain() override { return absl::OkStatus(); }
  Status PullForEvaluation(const SparseIds& ids) override { return client_->Pull(ids); }

 private:
  ParameterClient* client_;
};

class Overlapped final : public ExchangeStrategy {
 public:
  explicit Overlapped(ParameterClient* client) : client_(client) {}
  const char* name() const override { return "overlapped"; }
  Status BeforeStep(const SparseIds& ids) override {
    if (have_params_) return absl::OkStatus();
    return client_->Pull(ids);
  }
  Status AfterStep(int64_t num_samples, const SparseIds* next_ids) override {
    // A failed exchange leaves nothing the next step can rely on: it pulls again.
    have_params_ = false;
    if (next_ids == nullptr) return client_->Push(num_samples);
    PL_RETURN_IF_ERROR(client_->PushAndPull(num_samples, *next_ids));
    have_params_ = true;
    return absl::OkStatus();
  }
  Status Drain() override {
    have_params_ = false;  // the next task's first step pulls its own rows
    return absl::OkStatus();
  }
  Status PullForEvaluation(const SparseIds& ids) override {
    have_params_ = false;
    return client_->Pull(ids);
  }

 private:
  ParameterClient* client_;
  bool have_params_ = false;  // the last AfterStep pulled the coming step's parameters
};

class Pipelined final : public ExchangeStrategy {
 public:
  explicit Pipelined(ParameterClient* client) : exchange_(client) {}
  const char* name() const override { return "pipelined"; }
  Status BeforeStep(const SparseIds&) override {
    // The first step pulls; later ones use what the previous exchange brought.
    if (primed_) return absl::OkStatus();
    PL_RETURN_IF_ERROR(exchange_.PullNow());
    primed_ = true;
    return absl::OkStatus();
  }
  Status AfterStep(int64_t num_samples, const SparseIds*) override { return exchange_.Submit(num_samples); }
  Status Drain() override { return exchange_.Drain(); }
  Status PullForEvaluation(const SparseIds&) override { return exchange_.PullNow(); }

 private:
  PipelinedExchange exchange_;
  bool primed_ = false;
};

}  // namespace

bool PicksPipelined(const ExchangeChoice& choice, Module& model) {
  return !choice.sync && choice.pipeline && PipelinedExchange::Supports(model);
}

std::unique_ptr<ExchangeStrategy> MakeExchangeStrategy(ParameterClient* client, Module& model,
                                                       const ExchangeChoice& choice, std::string* why_not_pipelined) {
  std::string why;
  std::unique_ptr<ExchangeStrategy> strategy;
  if (choice.sync) {
    if (choice.pipeline) why = "sync steps must see the previous step";
    strategy = std::make_unique<PullThenPush>(client);
  } else if (PicksPipelined(choice, model)) {
    strategy = std::make_unique<Pipelined>(client);
  } else {
    if (choice.pipeline) why = "the model has sparse tables (each step pulls its own rows)";
    strategy = std::make_unique<Overlapped>(client);
  }
  if (why_not_pipelined != nullptr) *why_not_pipelined = why;
  return strategy;
}

}  // namespace pl
