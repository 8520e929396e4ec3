// pl-bench-core: the CPU core's speed and memory, each figure as a ratio against a
// reference measured in this same run.
//
//   GEMM     Eigen (what Linear runs) at the mlp's shapes and square 512/1024/2048,
//            GFLOP/s / the machine's GEMM peak = OpenBLAS sgemm 2048x2048x2048 on the
//            same thread count (also shown: OpenBLAS at the same shape).
//   Conv2D   our layer's forward+backward at the cnn's shapes (batch 64), GFLOP/s /
//            the same peak.
//   Train    samples/s of mlp and cnn through TrainLocally on the real data (a fixed
//            number of steps; threads as pl-trainer sets them: OpenMP loops on T,
//            Eigen's GEMM on 1 unless --eigen_threads), / the samples/s the GEMM
//            peak would allow for the model's FLOPs per sample; 2 threads also / 1.
//   Optim    one update of each built-in optimizer over as many elements as the mlp
//            has parameters (what a pserver applies per push, and one process per
//            step), / the memory floor: one pass reading and writing the same arrays
//            (value, gradient, slots) with no math.
//   Memory   peak resident set of a pl-trainer run (wait4's ru_maxrss of the child)
//            / the floor: parameters + gradients + Adam's 2 slots + one batch's
//            activations (and their gradients) + the datasets held in memory.
//
//   pl-bench-core [--data DIR] [--threads 1,2] [--quick] [--only gemm,conv,train,optim,memory]
//                 [--eigen_threads N]   (Eigen's GEMM on N threads, OpenMP ops on T; see --help)
//
// Dimension legend: B batch, M/K/N GEMM dims (C[M,N] = A[M,K] B[K,N]), C/O channels.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/bench_util.h"
#include "paddle_like/nn/nn.h"
#include "paddle_like/optim/optimizer_registry.h"
#include "paddle_like/optim/update_rules.h"
#include "trainer/example_data.h"
#include "trainer/local_trainer.h"
#include "trainer/models.h"

// OpenBLAS's C interface, declared here rather than through <cblas.h>, whose path
// differs between the pthread/openmp/serial flavours Debian ships.
extern "C" {
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int num_threads);
}

ABSL_FLAG(std::string, data, "", "prepared fashion-mnist records (empty: <build>/data/fashion-mnist beside bin/)");
ABSL_FLAG(std::vector<std::string>, threads, std::vector<std::string>({"1", "2"}),
          "thread counts to measure, e.g. 1,2");
ABSL_FLAG(bool, quick, false, "fewer repetitions and shorter timings");
ABSL_FLAG(std::vector<std::string>, only, {}, "run only these parts: gemm, conv, train, optim, memory (empty: all)");
ABSL_FLAG(int, eigen_threads, 0, "Eigen's GEMM on this many threads whatever --threads is (0: as pl-trainer)");

namespace pl::bench {
namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Options {
  std::string data = DefaultFashionDir();
  std::vector<int> threads = {1, 2};
  bool quick = false;
  std::set<std::string> only;
  int reps = 3;
  double min_seconds = 0.3;
  int eigen_threads = 0;  // >0: Eigen's GEMM on this many threads whatever T is
  bool Want(const std::string& part) const { return only.empty() || only.count(part) > 0; }
};

int g_eigen_threads = 0;  // Options::eigen_threads, for SetThreads

void SetThreads(int t) {
  omp_set_num_threads(t);
  Eigen::setNbThreads(g_eigen_threads > 0 ? g_eigen_threads : t);
  openblas_set_num_threads(t);
}

RowMatrix<float> Random(int64_t rows, int64_t cols) {
  RowMatrix<float> m = RowMatrix<float>::Random(rows, cols);
  return m;
}

// One GEMM shape; trans_a/trans_b say whether the stored operand is transposed in the
// product, as in Linear's backward (dW = x^T gy, dx = gy W^T).
struct GemmShape {
  std::string name;
  int64_t m, k, n;
  bool trans_a = false, trans_b = false;
};

double EigenGemmSeconds(const GemmShape& s, const Options& o) {
  // Stored operands: A is (M,K) or, transposed, (K,M); B is (K,N) or (N,K).
  RowMatrix<float> a = s.trans_a ? Random(s.k, s.m) : Random(s.m, s.k);
  RowMatrix<float> b = s.trans_b ? Random(s.n, s.k) : Random(s.k, s.n);
  RowMatrix<float> c(s.m, s.n);
  return BestSecondsPerCall(
      [&] {
        if (!s.trans_a && !s.trans_b) c.noalias() = a * b;
        if (s.trans_a && !s.trans_b) c.noalias() = a.transpose() * b;
        if (!s.trans_a && s.trans_b) c.noalias() = a * b.transpose();
        if (s.trans_a && s.trans_b) c.noalias() = a.transpose() * b.transpose();
      },
      o.reps, o.min_seconds);
}

double BlasGemmSeconds(const GemmShape& s, const Options& o) {
  RowMatrix<float> a = s.trans_a ? Random(s.k, s.m) : Random(s.m, s.k);
  RowMatrix<float> b = s.trans_b ? Random(s.n, s.k) : Random(s.k, s.n);
  RowMatrix<float> c(s.m, s.n);
  const int lda = static_cast<int>(a.cols()), ldb = static_cast<int>(b.cols());
  return BestSecondsPerCall(
      [&] {
        cblas_sgemm(kRowMajor, s.trans_a ? kTrans : kNoTrans, s.trans_b ? kTrans : kNoTrans, s.m, s.n, s.k, 1.0f,
                    a.data(), lda, b.data(), ldb, 0.0f, c.data(), static_cast<int>(s.n));
      },
      o.reps, o.min_seconds);
}

double Gflops(const GemmShape& s, double seconds) { return 2.0 * s.m * s.k * s.n / seconds / 1e9; }

// The machine's GEMM peak on the current thread count: OpenBLAS at 2048.
double MeasurePeak(const Options& o) {
  GemmShape s{"openblas 2048", 2048, 2048, 2048};
  return Gflops(s, BlasGemmSeconds(s, o));
}

void RunGemm(const Options& o, double peak, int threads) {
  std::vector<GemmShape> shapes = {
      {"mlp fc1 fwd  x[64,784]*W[784,512]", 64, 784, 512},
      {"mlp fc1 dW   x^T[784,64]*gy[64,512]", 784, 64, 512, true, false},
      {"mlp fc2 fwd  [64,512]*[512,256]", 64, 512, 256},
      {"mlp fc2 dx   gy[64,256]*W^T[256,512]", 64, 256, 512, false, true},
      {"mlp fc3 fwd  [64,256]*[256,10]", 64, 256, 10},
      {"square 512", 512, 512, 512},
      {"square 1024", 1024, 1024, 1024},
  };
  if (!o.quick) shapes.push_back({"square 2048", 2048, 2048, 2048});
  for (const GemmShape& s : shapes) {
    const double eigen = Gflops(s, EigenGemmSeconds(s, o));
    const double blas = Gflops(s, BlasGemmSeconds(s, o));
    ReportLine("eigen " + s.name + " t=" + std::to_string(threads), eigen, "GFLOP/s", peak, "GFLOP/s",
               "peak", eigen / peak);
    ReportLine("  (same shape: eigen / openblas)", eigen, "GFLOP/s", blas, "GFLOP/s", "openblas", eigen / blas);
  }
}

// Forward + backward of one Conv2D on a (64, C, H, W) batch; the input's gradient is
// computed when `input_grad` (as inside the cnn, for every conv but the first).
void RunConv(const Options& o, double peak, int threads, int64_t c, int64_t out, int64_t hw, bool input_grad,
             const std::string& name) {
  const int64_t B = 64, k = 5;
  Conv2D conv(c, out, k, k, /*stride=*/1, /*padding=*/2);
  conv.InitParameters(1);
  Tensor x({B, c, hw, hw}, DType::kFloat32);
  x.matrix(1, x.numel()) = RowMatrix<float>::Random(1, x.numel());
  Tensor seed = Tensor::Filled({B, out, hw, hw}, 1.0f);
  Status error;
  const double seconds = BestSecondsPerCall(
      [&] {
        Variable xv(x, input_grad);
        auto y = conv.Forward(xv);
        if (!y.ok()) {
          error = y.status();
          return;
        }
        Status s = y->Backward(seed);
        if (!s.ok()) error = s;
        conv.ZeroGrad();
      },
      o.reps, o.min_seconds);
  if (!error.ok()) {
    std::cout << "  conv " << name << ": " << error << std::endl;
    return;
  }
  const double fwd = 2.0 * B * out * hw * hw * c * k * k;
  const double flops = fwd * (input_grad ? 3 : 2);  // forward, dW, (dx)
  const double gf = flops / seconds / 1e9;
  ReportLine("conv " + name + " fwd+bwd t=" + std::to_string(threads), gf, "GFLOP/s", peak, "GFLOP/s", "peak",
             gf / peak);
}

// What the floor and the roofline of a Sequential model are made of, from its layers.
struct ModelCost {
  double flops_per_sample = 0;   // forward + backward GEMM/conv FLOPs
  int64_t param_elements = 0;
  int64_t train_activation_bytes = 0;  // batch input + every layer output, value + grad
  int64_t eval_activation_bytes = 0;   // batch input + the largest (in + out) pair
};

StatusOr<ModelCost> CostOf(const std::string& name, int64_t train_batch, int64_t eval_batch) {
  ModelCost cost;
  PL_ASSIGN_OR_RETURN(auto model, MakeExampleModel(name, ModelOptions{}));
  Sequential* seq = AsSequential(*model);
  if (seq == nullptr) return absl::InvalidArgumentError(name + " is not a Sequential");
  cost.param_elements = model->module().NumParameterElements();
  for (int64_t batch : {train_batch, eval_batch}) {
    const bool train = batch == train_batch;
    Variable x(Tensor::Zeros({batch, 1, 28, 28}));
    int64_t bytes = x.value().bytes(), max_pair = 0;
    bool first_weighted = true;
    for (size_t i = 0; i < seq->size(); ++i) {
      Layer* layer = seq->layer(i).get();
      PL_ASSIGN_OR_RETURN(Variable y, layer->Forward(x));
      max_pair = std::max<int64_t>(max_pair, x.value().bytes() + y.value().bytes());
      if (y.value().storage() != x.value().storage()) bytes += 2 * y.value().bytes();  // views are free
      if (train) {
        double fwd = 0;
        if (dynamic_cast<Linear*>(layer) != nullptr) fwd = 2.0 * x.value().dim(1) * y.value().dim(1);
        if (auto* conv = dynamic_cast<Conv2D*>(layer)) {
          fwd = 2.0 * conv->out_channels() * y.value().dim(2) * y.value().dim(3) * conv->in_channels() *
                conv->kernel_h() * conv->kernel_w();
        }
        if (fwd > 0) {
          cost.flops_per_sample += fwd * (first_weighted ? 2 : 3);  // the data needs no gradient
          first_weighted = false;
        }
      }
      x = y;
    }
    if (train) cost.train_activation_bytes = bytes;
    else cost.eval_activation_bytes = batch * 784 * 4 + max_pair;
  }
  return cost;
}

void RunTrain(const Options& o, const std::map<int, double>& peaks) {
  auto train = LoadExampleSet(o.data + "/train.plrec", TaskKind::kClassification);
  if (!train.ok()) {
    std::cout << "  skipped: " << train.status() << " (run `make data` or pl-convert first)" << std::endl;
    return;
  }
  const ExampleSet empty;
  for (const std::string name : {"mlp", "cnn"}) {
    auto cost = CostOf(name, 64, 500);
    if (!cost.ok()) {
      std::cout << "  " << name << ": " << cost.status() << std::endl;
      continue;
    }
    // A fixed number of steps: the first `steps` batches of the training set.
    const int64_t steps = name == "mlp" ? (o.quick ? 100 : 400) : (o.quick ? 10 : 40);
    ExampleSet subset{train->inputs.Slice(0, steps * 64), train->labels.Slice(0, steps * 64)};
    std::map<int, double> rate;
    for (int t : o.threads) {
      SetThreads(t);
      // As pl-trainer runs: Eigen's GEMM on one thread, the layers' OpenMP loops on t.
      Eigen::setNbThreads(g_eigen_threads > 0 ? g_eigen_threads : 1);
      double best = 0;
      for (int r = 0; r < (name == "mlp" ? o.reps : 2); ++r) {
        auto model = MakeExampleModel(name, ModelOptions{});
        if (!model.ok()) break;
        LocalTrainOptions lo;
        lo.epochs = 1;
        lo.log_every_s = 1e9;
        std::ostringstream quiet;
        auto report = TrainLocally(**model, subset, empty, lo, quiet);
        if (!report.ok()) {
          std::cout << "  " << name << ": " << report.status() << std::endl;
          break;
        }
        best = std::max(best, report->samples_per_s);
      }
      rate[t] = best;
      const double roof = peaks.at(t) * 1e9 / cost->flops_per_sample;
      ReportLine(name + " train samples/s t=" + std::to_string(t) + " (" + std::to_string(steps) + " steps)", best,
                 "samples/s", roof, "samples/s", "GEMM-peak roofline", best / roof);
    }
    if (rate.count(1) && rate.count(2) && rate[1] > 0) {
      ReportLine(name + " train scaling t=2 vs t=1", rate[2], "samples/s", rate[1], "samples/s", "t=1",
                 rate[2] / rate[1]);
    }
    std::printf("  (%s: %.2f MFLOP per sample forward+backward)\n", name.c_str(), cost->flops_per_sample / 1e6);
  }
}

void RunMemory(const Options& o) {
  const std::string trainer = SelfBinDir() + "/pl-trainer";
  if (!FileExists(trainer)) {
    std::cout << "  skipped: " << trainer << " not built" << std::endl;
    return;
  }
  if (!FileExists(o.data + "/train.plrec")) {
    std::cout << "  skipped: no " << o.data << "/train.plrec" << std::endl;
    return;
  }
  // The process with its libraries and a model but no data: it stops at the data check.
  ChildRun base = RunAndMeasure({trainer, "--model", "mlp", "--data", "/nonexistent-pl-bench"}, "/dev/null");
  std::printf("  (process baseline, libraries + mlp, no data: %.1f MB; this benchmark's own rss at the fork, "
              "an upper bound on what it adds to a child's figure: %.1f MB)\n",
              base.max_rss_bytes / 1e6, SelfRssBytes() / 1e6);
  struct Case {
    std::string model;
    int64_t train_n, test_n;
  };
  std::vector<Case> cases = {{"mlp", 60000, 10000}, {"cnn", 2000, 1000}};
  if (o.quick) cases = {{"mlp", 10000, 2000}, {"cnn", 640, 500}};
  for (const Case& c : cases) {
    auto cost = CostOf(c.model, 64, 500);
    if (!cost.ok()) continue;
    const int64_t dataset = (c.train_n + c.test_n) * (784 * 4 + 8);  // float images + int64 labels
    const int64_t params = cost->param_elements * 4 * (1 + 1 + 2);    // value, grad, Adam m and v
    const int64_t acts = std::max(cost->train_activation_bytes, cost->eval_activation_bytes);
    const int64_t floor = params + acts + dataset;
    const std::string log = "/tmp/pl-bench-core-" + c.model + ".log";
    ChildRun run = RunAndMeasure({trainer, "--model", c.model, "--data", o.data, "--epochs", "1", "--threads", "1",
                                  "--train_limit", std::to_string(c.train_n), "--test_limit",
                                  std::to_string(c.test_n), "--log_every_s", "1000"},
                                 log);
    if (run.exit_code != 0) {
      std::cout << "  " << c.model << ": pl-trainer failed (exit " << run.exit_code << "), see " << log << std::endl;
      continue;
    }
    std::printf("  (%s floor: params+grads+adam %.1f MB, activations %.1f MB, dataset %lld+%lld examples %.1f MB)\n",
                c.model.c_str(), params / 1e6, acts / 1e6, static_cast<long long>(c.train_n),
                static_cast<long long>(c.test_n), dataset / 1e6);
    ReportLine(c.model + " peak RSS (pl-trainer, 1 epoch)", run.max_rss_bytes / 1e6, "MB", floor / 1e6, "MB",
               "floor", double(run.max_rss_bytes) / floor);
    ReportLine(c.model + " peak RSS - process baseline", (run.max_rss_bytes - base.max_rss_bytes) / 1e6, "MB",
               floor / 1e6, "MB", "floor", double(run.max_rss_bytes - base.max_rss_bytes) / floor);
  }
}

// Reads and writes what an update with `kSlots` slots does, in one vectorised pass.
template <int kSlots>
void PassWithNoMath(float* __restrict p, const float* __restrict g, float* __restrict s0, float* __restrict s1,
                    int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    p[i] += g[i];
    if (kSlots > 0) s0[i] += g[i];
    if (kSlots > 1) s1[i] += g[i];
  }
}

// One update of each built-in optimizer over the mlp's parameter count, against the
// time a pass with no math takes to move the same bytes in this run.
void RunOptim(const Options& o) {
  auto cost = CostOf("mlp", 64, 64);
  if (!cost.ok()) {
    std::printf("  failed: %s\n", cost.status().ToString().c_str());
    return;
  }
  const int64_t n = cost->param_elements;
  for (const char* name : {"sgd", "momentum", "adagrad", "adam"}) {
    OptimizerSpec spec;
    spec.kind = *ParseOptimizerKind(name);
    spec.learning_rate = 1e-3f;
    auto rule = UpdateRule::Create(spec);
    if (!rule.ok()) {
      std::printf("  %s: %s\n", name, rule.status().ToString().c_str());
      continue;
    }
    const int slots = rule->num_slots();
    std::vector<float> param(n, 0.01f), grad(n), state(std::max<int64_t>(slots * n, 1));
    for (int64_t i = 0; i < n; ++i) grad[i] = i % 7 == 0 ? 0.0f : 1e-3f * static_cast<float>(i % 13 - 6);
    rule->InitSlots(state.data(), n);
    int64_t step = 0;
    const double update_s = BestSecondsPerCall(
        [&] { rule->Apply(param.data(), grad.data(), state.data(), n, ++step, n); }, o.reps, o.min_seconds);
    // The floor: the same streams read and written in one pass with no math
    // (value += gradient, each slot += gradient). In this machine's cache a memcpy of
    // as many bytes is no floor: it came out slower than the updates.
    float* slot0 = state.data();
    float* slot1 = state.data() + (slots > 1 ? n : 0);
    const double floor_s = BestSecondsPerCall(
        [&] {
          if (slots == 0) PassWithNoMath<0>(param.data(), grad.data(), slot0, slot1, n);
          if (slots == 1) PassWithNoMath<1>(param.data(), grad.data(), slot0, slot1, n);
          if (slots == 2) PassWithNoMath<2>(param.data(), grad.data(), slot0, slot1, n);
        },
        o.reps, o.min_seconds);
    const int64_t bytes = (2 + 1 + 2 * slots) * n * static_cast<int64_t>(sizeof(float));
    ReportLine(absl::StrCat(name, " update, ", n, " elements"), update_s * 1e3, "ms", floor_s * 1e3, "ms",
               absl::StrFormat("its %.1f MB moved with no math", bytes / 1e6), floor_s / update_s);
  }
}

int Main(int argc, char** argv) {
  const cli::Program program = {
      "pl-bench-core", "[--data DIR] [--threads 1,2] [--quick] [--only gemm,conv,train,memory] [--eigen_threads N]",
      "The CPU core's speed and memory, each figure as a ratio against a reference measured in\n"
      "the same run (see benchmarks/README.md)."};
  cli::ParseOrExit(program, argc, argv);
  Options o;
  if (const std::string data = absl::GetFlag(FLAGS_data); !data.empty()) o.data = data;
  o.threads.clear();
  for (const std::string& t : absl::GetFlag(FLAGS_threads)) {
    int n = 0;
    if (!absl::SimpleAtoi(t, &n) || n < 1) {
      cli::ExitWithUsageError(program, "--threads: '" + t + "' is not an integer >= 1");
    }
    o.threads.push_back(n);
  }
  o.only = OnlyParts(program, absl::GetFlag(FLAGS_only), {"gemm", "conv", "train", "optim", "memory"});
  o.eigen_threads = absl::GetFlag(FLAGS_eigen_threads);
  cli::CheckOrExit(program, {cli::CheckAtLeast("eigen_threads", o.eigen_threads, 0)});
  g_eigen_threads = o.eigen_threads;
  if (absl::GetFlag(FLAGS_quick)) {
    o.quick = true;
    o.reps = 2;
    o.min_seconds = 0.1;
  }
  std::printf("pl-bench-core: load average at start %s; %d hardware threads; data %s\n", LoadAverage().c_str(),
              omp_get_num_procs(), o.data.c_str());
  // First, while this process is small: a forked child's ru_maxrss starts from the
  // parent's resident set (fork copies the page tables), so a big parent would hide
  // the child's own peak.
  if (o.Want("memory")) {
    Header("Peak resident memory of pl-trainer vs the floor");
    RunMemory(o);
  }
  std::map<int, double> peaks;
  for (int t : o.threads) {
    SetThreads(t);
    peaks[t] = MeasurePeak(o);
    std::printf("GEMM peak (OpenBLAS sgemm 2048, %d thread%s): %.1f GFLOP/s\n", t, t == 1 ? "" : "s", peaks[t]);
  }
  if (o.Want("gemm")) {
    Header("GEMM: Eigen (Linear's math) vs the GEMM peak");
    for (int t : o.threads) {
      SetThreads(t);
      RunGemm(o, peaks[t], t);
    }
  }
  if (o.Want("conv")) {
    Header("Conv2D forward+backward (batch 64) vs the GEMM peak");
    for (int t : o.threads) {
      SetThreads(t);
      RunConv(o, peaks[t], t, 1, 32, 28, /*input_grad=*/false, "1->32 5x5 28x28");
      RunConv(o, peaks[t], t, 32, 64, 14, /*input_grad=*/true, "32->64 5x5 14x14");
    }
  }
  if (o.Want("optim")) {
    Header("Optimizer updates (one thread, denormals flushed as in every update) vs the memory floor");
    RunOptim(o);
  }
  if (o.Want("train")) {
    Header("Training throughput (TrainLocally, Adam, batch 64; Eigen GEMM on " +
           (g_eigen_threads > 0 ? std::to_string(g_eigen_threads) + " thread(s)"
                                : std::string("1 thread, as pl-trainer")) +
           ") vs the GEMM-peak roofline");
    RunTrain(o, peaks);
  }
  std::printf("\nload average at end %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace pl::bench

int main(int argc, char** argv) {
  // As pl-trainer does: idle OpenMP threads sleep rather than spin on a shared machine.
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  return pl::bench::Main(argc, argv);
}
