#include "trainer/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "absl/strings/str_format.h"
#include "paddle_like/optim/optimizer.h"

namespace pl {
namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

StatusOr<TrainReport> TrainLocally(ExampleModel& model, const ExampleSet& train,
                                   const ExampleSet& test, const LocalTrainOptions& o,
                                   std::ostream& log, StepBackend* backend) {
  if (train.size() == 0) return absl::InvalidArgumentError("TrainLocally: the training set is empty");
  if (o.batch_size < 1) return absl::InvalidArgumentError("TrainLocally: batch size must be >= 1");
  PL_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt, Optimizer::Create(&model.module(), o.optimizer));
  std::unique_ptr<StepBackend> cpu;
  if (backend == nullptr) {
    PL_ASSIGN_OR_RETURN(cpu, MakeStepBackend("cpu", model, log));
    backend = cpu.get();
  }
  PL_RETURN_IF_ERROR(backend->ImportParameters());
  const bool clicks = model.task() == TaskKind::kClickThrough;
  std::vector<int64_t> order(train.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(o.seed);
  Batcher batcher(&train);
  TrainReport report;
  double train_time = 0;
  int64_t samples = 0;
  model.module().Train(true);
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double epoch_start = Now(), last_log = epoch_start, window_loss = 0;
    const process::CpuTimes epoch_cpu = process::SelfCpuTimes();
    int64_t window_steps = 0, window_correct = 0, window_samples = 0, epoch_samples = 0;
    for (size_t begin = 0; begin < order.size(); begin += o.batch_size) {
      const size_t end = std::min(order.size(), begin + o.batch_size);
      ExampleSet batch = batcher.Gather(order, begin, end);
      const double step_start = Now();
      auto stats = backend->ComputeGradients(model, batch);
      if (!stats.ok()) return Annotate(stats.status(), absl::StrFormat("epoch %d step %d", epoch, report.steps));
      PL_RETURN_IF_ERROR(backend->ApplyOptimizer(*opt));
      ++report.steps;
      if (o.observer != nullptr) {
        const double step_s = Now() - step_start;  // all of it computing: no exchange here
        o.observer->OnStep({report.steps, stats->loss, clicks ? -1 : stats->correct, stats->samples, step_s, 0, step_s});
      }
      window_loss += stats->loss;
      window_correct += stats->correct;
      window_samples += stats->samples;
      epoch_samples += stats->samples;
      ++window_steps;
      const double now = Now();
      if (now - last_log >= o.log_every_s) {
        log << absl::StrFormat("epoch %d/%d  %5.1f%%  loss %.4f", epoch, o.epochs,
                               100.0 * end / order.size(), window_loss / window_steps);
        if (!clicks) log << absl::StrFormat("  train acc %.4f", double(window_correct) / window_samples);
        log << absl::StrFormat("  %.0f samples/s\n", epoch_samples / (now - epoch_start));
        log.flush();
        last_log = now;
        window_loss = 0;
        window_steps = window_correct = window_samples = 0;
      }
    }
    const double epoch_time = Now() - epoch_start;
    const process::CpuTimes used = process::SelfCpuTimes() - epoch_cpu;
    report.cpu.user_s += used.user_s;
    report.cpu.sys_s += used.sys_s;
    train_time += epoch_time;
    samples += epoch_samples;
    log << absl::StrFormat("epoch %d/%d done in %.1fs (%.0f samples/s)", epoch, o.epochs, epoch_time,
                           epoch_samples / epoch_time);
    if (o.eval_every_epoch_limit > 0 && test.size() > 0) {
      PL_RETURN_IF_ERROR(backend->ExportParameters());
      PL_ASSIGN_OR_RETURN(EvalResult r, Evaluate(model, test, o.eval_batch_size, o.eval_every_epoch_limit));
      log << absl::StrFormat("  test %s %.4f (%lld examples)", clicks ? "auc" : "accuracy", r.metric,
                             static_cast<long long>(r.samples));
    }
    log << "\n";
    log.flush();
  }
  report.train_seconds = train_time;
  report.samples_per_s = samples / std::max(train_time, 1e-9);
  PL_RETURN_IF_ERROR(backend->ExportParameters());
  if (test.size() > 0) {
    PL_ASSIGN_OR_RETURN(EvalResult r, Evaluate(model, test, o.eval_batch_size));
    report.final_metric = r.metric;
    if (o.observer != nullptr) o.observer->OnEvaluation(report.steps, clicks ? "auc" : "accuracy", r.metric);
  }
  return report;
}

}  // namespace pl
