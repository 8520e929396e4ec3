#include "trainer/batching.h"

#include <cstring>

namespace pl {

ExampleSet Batcher::Gather(const std::vector<int64_t>& indices, size_t begin, size_t end) {
  const int64_t n = static_cast<int64_t>(end - begin);
  const Tensor& in = data_->inputs;
  const Tensor& lab = data_->labels;
  if (!inputs_.defined() || inputs_.dim(0) < n) {
    Shape s = in.shape();
    s[0] = n;
    inputs_ = Tensor(s, in.dtype());
    labels_ = Tensor({n}, lab.dtype());
  }
  const size_t in_row = in.bytes() / in.dim(0);
  const size_t lab_row = lab.bytes() / lab.dim(0);
  char* dst_in = static_cast<char*>(inputs_.raw_data());
  char* dst_lab = static_cast<char*>(labels_.raw_data());
  const char* src_in = static_cast<const char*>(in.raw_data());
  const char* src_lab = static_cast<const char*>(lab.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = indices[begin + i];
    std::memcpy(dst_in + i * in_row, src_in + k * in_row, in_row);
    std::memcpy(dst_lab + i * lab_row, src_lab + k * lab_row, lab_row);
  }
  return ExampleSet{inputs_.Slice(0, n), labels_.Slice(0, n)};
}

StatusOr<StepStats> ComputeGradients(ExampleModel& model, const ExampleSet& batch) {
  PL_ASSIGN_OR_RETURN(Variable logits, model.Forward(batch.inputs));
  PL_ASSIGN_OR_RETURN(Variable loss, model.Loss(logits, batch.labels));
  PL_RETURN_IF_ERROR(loss.Backward());
  StepStats s;
  s.loss = loss.value().f32()[0];
  s.samples = batch.size();
  if (model.task() == TaskKind::kClassification) s.correct = CountCorrect(logits.value(), batch.labels);
  return s;
}

StatusOr<EvalResult> Evaluate(ExampleModel& model, const ExampleSet& data, int64_t batch_size,
                              int64_t max_examples) {
  const int64_t n = max_examples > 0 ? std::min(max_examples, data.size()) : data.size();
  if (n == 0) return absl::InvalidArgumentError("Evaluate: no examples");
  const bool was_training = model.module().training();
  model.module().Train(false);
  // Without a graph each activation is freed once the next layer has read it: for the
  // cnn at batch 500 this is the difference between every activation (~170 MB) and the
  // largest adjacent pair (~100 MB) at the evaluation's peak.
  NoGradScope no_grad;
  EvalResult r;
  std::vector<float> scores, labels;
  int64_t correct = 0;
  double loss_sum = 0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    const int64_t end = std::min(n, begin + batch_size);
    ExampleSet b{data.inputs.Slice(begin, end), data.labels.Slice(begin, end)};
    auto logits = model.Forward(b.inputs);
    if (!logits.ok()) {
      model.module().Train(was_training);
      return logits.status();
    }
    auto loss = model.Loss(*logits, b.labels);
    if (!loss.ok()) {
      model.module().Train(was_training);
      return loss.status();
    }
    loss_sum += loss->value().f32()[0] * (end - begin);
    if (model.task() == TaskKind::kClassification) {
      correct += CountCorrect(logits->value(), b.labels);
    } else {
      const float* z = logits->value().f32();
      for (int64_t i = 0; i < end - begin; ++i) {
        scores.push_back(z[i]);
        labels.push_back(b.labels.f32()[i]);
      }
    }
  }
  model.module().Train(was_training);
  r.samples = n;
  r.loss = loss_sum / n;
  r.metric = model.task() == TaskKind::kClassification ? static_cast<double>(correct) / n
                                                       : BinaryAuc(scores, labels);
  return r;
}

}  // namespace pl
