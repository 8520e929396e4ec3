// pl-bench-gpu: what the GPU path delivers on this machine, in one run.
//
//   1. GEMM (cuBLAS, 4096^3 and 8192^3): FP32 and TF32 TFLOP/s, each as a fraction of
//      the device's peak.
//   2. Convolution (cuDNN) at the cnn's two layer shapes, batch 256: forward,
//      backward-data and backward-filter TFLOP/s.
//   3. The cnn (trainer/models.h: conv5x5x32, pool, conv5x5x64, pool, fc1024,
//      dropout, fc10 on 28x28 images): forward+backward samples/s with GpuModel
//      (including the host->device copy of each batch and the loss read-back) and
//      with the CPU layers, measured in the same run.
//   4. The distributed trainer's step (batch 64): TrainStep alone, then with the
//      parameter upload before it and the gradient download after it (what pl-trainer
//      does around every push and pull), with the CPU module's buffers pageable and
//      then page-locked (cudaHostRegister), against one pinned copy of the same bytes
//      each way (the bus's limit for that round trip).
//   5. NCCL all-reduce bus bandwidth across the visible GPUs (skipped with one).
//
// Peak arithmetic (dense, no sparsity), from cudaDeviceGetAttribute:
//   FP32 peak = SMs x boost clock x FP32 lanes per SM x 2 (an FMA is 2 flops);
//               lanes per SM: 64 on sm_80 (A100), 128 on sm_86/89/90/100+.
//   TF32 peak = SMs x boost clock x TF32 tensor flops per SM per clock:
//               1024 on sm_80 (A100: 156 TFLOP/s), 2048 on sm_90 (H100 SXM: 495 TFLOP/s).
//   For reference: H100 SXM 67 TFLOP/s FP32, 495 TF32; H200 has the same SMs and
//   clocks as H100 SXM (its difference is HBM3e memory: 4.8 vs 3.35 TB/s).
//
// Without a GPU it prints "no GPU: skipped (<reason>)" and exits 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "absl/flags/flag.h"
#include "cuda/allocator.h"
#include "cuda/context.h"
#include "cuda/conv_ops.h"
#include "cuda/device.h"
#include "cuda/gpu_model.h"
#include "cuda/linear_ops.h"
#include "cuda/nccl_communicator.h"
#include "cuda/status.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/nn/nn.h"
#include "trainer/models.h"

ABSL_FLAG(bool, tf32, false, "TF32 tensor cores for the conv and cnn sections");

namespace pl::cuda {
namespace {

struct Peaks {
  double fp32_tflops = 0;  // 0: unknown architecture
  double tf32_tflops = 0;
};

Peaks PeakFor(int device) {
  int sms = 0, clock_khz = 0, major = 0, minor = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  int lanes = 0, tf32_per_clock = 0;
  if (major == 8 && minor == 0) {
    lanes = 64;
    tf32_per_clock = 1024;
  } else if (major == 8) {
    lanes = 128;
    tf32_per_clock = 512;
  } else if (major == 9) {
    lanes = 128;
    tf32_per_clock = 2048;
  } else if (major >= 10) {
    lanes = 128;
    tf32_per_clock = 2048;
  }
  const double hz = clock_khz * 1e3;
  return Peaks{sms * hz * lanes * 2 / 1e12, sms * hz * tf32_per_clock / 1e12};
}

// Mean seconds per call of `fn` queued on `stream`, after `warmup` calls.
StatusOr<double> TimeOnStream(cudaStream_t stream, int warmup, int iters, const std::function<Status()>& fn) {
  for (int i = 0; i < warmup; ++i) PL_RETURN_IF_ERROR(fn());
  cudaEvent_t start, stop;
  PL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  PL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  PL_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) PL_RETURN_IF_ERROR(fn());
  PL_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
  PL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
  float ms = 0;
  PL_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / iters;
}

Tensor RandomHost(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(shape, DType::kFloat32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(rng);
  return t;
}

Status BenchGemm(const Peaks& peak) {
  std::printf("\n== GEMM (cuBLAS, row-major C = A B) ==\n");
  std::printf("%-8s %-6s %10s %10s %8s\n", "size", "mode", "ms", "TFLOP/s", "of peak");
  PL_ASSIGN_OR_RETURN(auto ctx, GpuContext::Create(0));
  for (int64_t n : {4096, 8192}) {
    PL_ASSIGN_OR_RETURN(Tensor a, ToDevice(RandomHost({n, n}, 1), 0, ctx->stream()));
    PL_ASSIGN_OR_RETURN(Tensor b, ToDevice(RandomHost({n, n}, 2), 0, ctx->stream()));
    PL_ASSIGN_OR_RETURN(Tensor c, AllocateDeviceTensor({n, n}, DType::kFloat32, 0));
    for (GemmPrecision p : {GemmPrecision::kFloat32, GemmPrecision::kTF32}) {
      const int iters = n == 4096 ? 20 : 5;
      PL_ASSIGN_OR_RETURN(double s, TimeOnStream(ctx->stream(), 2, iters, [&] {
                            return Gemm(*ctx, false, false, n, n, n, 1.0f, a.f32(), b.f32(), 0.0f, c.f32(), p);
                          }));
      const double tflops = 2.0 * n * n * n / s / 1e12;
      const double pk = p == GemmPrecision::kTF32 ? peak.tf32_tflops : peak.fp32_tflops;
      std::printf("%-8ld %-6s %10.3f %10.1f %7.0f%%\n", static_cast<long>(n),
                  p == GemmPrecision::kTF32 ? "TF32" : "FP32", s * 1e3, tflops, pk > 0 ? 100 * tflops / pk : 0.0);
    }
  }
  return absl::OkStatus();
}

Status BenchConv(bool tf32) {
  std::printf("\n== Convolution (cuDNN, the cnn's layers, batch 256, %s) ==\n", tf32 ? "TF32" : "FP32");
  std::printf("%-34s %9s %9s %9s %9s\n", "layer", "fwd ms", "bwd-d ms", "bwd-f ms", "TFLOP/s");
  ContextOptions o;
  o.allow_tf32 = tf32;
  PL_ASSIGN_OR_RETURN(auto ctx, GpuContext::Create(0, o));
  const ConvShape shapes[] = {{256, 1, 28, 28, 32, 5, 5, 1, 2}, {256, 32, 14, 14, 64, 5, 5, 1, 2}};
  for (const ConvShape& s : shapes) {
    PL_ASSIGN_OR_RETURN(auto plan, ConvPlan::Create(*ctx, s));
    PL_ASSIGN_OR_RETURN(Tensor x, ToDevice(RandomHost(s.x_shape(), 1), 0, ctx->stream()));
    PL_ASSIGN_OR_RETURN(Tensor w, ToDevice(RandomHost(s.w_shape(), 2), 0, ctx->stream()));
    PL_ASSIGN_OR_RETURN(Tensor gy, ToDevice(RandomHost(s.y_shape(), 3), 0, ctx->stream()));
    PL_ASSIGN_OR_RETURN(Tensor y, AllocateDeviceTensor(s.y_shape(), DType::kFloat32, 0));
    PL_ASSIGN_OR_RETURN(Tensor dx, AllocateDeviceTensor(s.x_shape(), DType::kFloat32, 0));
    PL_ASSIGN_OR_RETURN(Tensor dw, AllocateDeviceTensor(s.w_shape(), DType::kFloat32, 0));
    PL_ASSIGN_OR_RETURN(double f, TimeOnStream(ctx->stream(), 3, 20, [&] { return plan->Forward(*ctx, x, w, Tensor(), y); }));
    PL_ASSIGN_OR_RETURN(double bd, TimeOnStream(ctx->stream(), 3, 20, [&] { return plan->BackwardData(*ctx, w, gy, dx); }));
    PL_ASSIGN_OR_RETURN(double bf, TimeOnStream(ctx->stream(), 3, 20, [&] { return plan->BackwardFilter(*ctx, x, gy, dw, false); }));
    const double flops = 2.0 * s.n * s.o * s.out_h() * s.out_w() * s.c * s.kh * s.kw;  // per pass
    const std::string name = ShapeToString(s.x_shape()) + " -> " + std::to_string(s.o) + " 5x5";
    std::printf("%-34s %9.3f %9.3f %9.3f %9.2f\n", name.c_str(), f * 1e3, bd * 1e3, bf * 1e3,
                3 * flops / (f + bd + bf) / 1e12);
  }
  return absl::OkStatus();
}

// The cnn of trainer/models.h (the model pl-trainer trains), seed 1.
StatusOr<std::unique_ptr<ExampleModel>> Cnn() {
  ModelOptions o;
  o.seed = 1;
  return MakeExampleModel("cnn", o);
}

// A random batch of 28x28 images with labels 0..9 in turn.
std::pair<Tensor, Tensor> ImageBatch(int64_t batch, uint32_t seed) {
  std::vector<int64_t> ids(batch);
  for (int64_t i = 0; i < batch; ++i) ids[i] = i % 10;
  return {RandomHost({batch, 1, 28, 28}, seed), Tensor::FromIds({batch}, ids)};
}

Status BenchCnn(bool tf32) {
  std::printf("\n== cnn forward+backward (softmax cross-entropy), samples/s ==\n");
  const int64_t batch = 256;
  auto [x, labels] = ImageBatch(batch, 7);

  PL_ASSIGN_OR_RETURN(std::unique_ptr<ExampleModel> gpu_net, Cnn());
  GpuModelOptions o;
  o.allow_tf32 = tf32;
  PL_ASSIGN_OR_RETURN(auto gpu, GpuModel::Create(AsSequential(*gpu_net), o));
  for (int i = 0; i < 3; ++i) PL_RETURN_IF_ERROR(gpu->TrainStep(x, labels).status());
  const int gpu_iters = 30;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < gpu_iters; ++i) PL_RETURN_IF_ERROR(gpu->TrainStep(x, labels).status());
  PL_RETURN_IF_ERROR(gpu->context().Synchronize());
  const double gpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  PL_ASSIGN_OR_RETURN(std::unique_ptr<ExampleModel> cpu_model, Cnn());
  Sequential* cpu_net = AsSequential(*cpu_model);
  cpu_net->Train(true);
  const int64_t cpu_batch = 64;
  Tensor xc = x.Slice(0, cpu_batch), lc = labels.Slice(0, cpu_batch);
  auto cpu_step = [&]() -> Status {
    PL_ASSIGN_OR_RETURN(Variable logits, cpu_net->Forward(Variable(xc)));
    PL_ASSIGN_OR_RETURN(Variable loss, SoftmaxCrossEntropy(logits, lc));
    return loss.Backward();
  };
  PL_RETURN_IF_ERROR(cpu_step());
  const int cpu_iters = 3;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < cpu_iters; ++i) PL_RETURN_IF_ERROR(cpu_step());
  const double cpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const double gpu_rate = gpu_iters * batch / gpu_s, cpu_rate = cpu_iters * cpu_batch / cpu_s;
  std::printf("GPU (batch %ld, %s): %10.0f samples/s\n", static_cast<long>(batch), tf32 ? "TF32" : "FP32", gpu_rate);
  std::printf("CPU (batch %ld):       %10.0f samples/s\n", static_cast<long>(cpu_batch), cpu_rate);
  std::printf("GPU / CPU:            %10.1fx\n", gpu_rate / cpu_rate);
  return absl::OkStatus();
}

// Section 4: what the host round trip around each distributed step costs.
Status BenchTrainerStep(bool tf32) {
  std::printf("\n== the trainer's step with its host round trip (cnn, batch 64, %s), ms ==\n", tf32 ? "TF32" : "FP32");
  auto [x, labels] = ImageBatch(64, 9);
  // Two copies of the cnn: one whose CPU buffers GpuModel page-locks (the default),
  // one left pageable, each timed the same way.
  PL_ASSIGN_OR_RETURN(std::unique_ptr<ExampleModel> net, Cnn());
  PL_ASSIGN_OR_RETURN(std::unique_ptr<ExampleModel> pageable_net, Cnn());
  GpuModelOptions o;
  o.allow_tf32 = tf32;
  PL_ASSIGN_OR_RETURN(auto gpu, GpuModel::Create(AsSequential(*net), o));
  o.pin_host_buffers = false;
  PL_ASSIGN_OR_RETURN(auto pageable_gpu, GpuModel::Create(AsSequential(*pageable_net), o));
  int64_t model_bytes = 0;
  for (const NamedParameter& np : AsSequential(*net)->NamedParameters()) model_bytes += np.param->var.value().bytes();
  auto time_ms = [&](const std::function<Status()>& step) -> StatusOr<double> {
    for (int i = 0; i < 5; ++i) PL_RETURN_IF_ERROR(step());
    PL_RETURN_IF_ERROR(gpu->context().Synchronize());
    const int iters = 50;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) PL_RETURN_IF_ERROR(step());
    PL_RETURN_IF_ERROR(gpu->context().Synchronize());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
  };
  auto round_trip = [&](GpuModel& m) -> Status {
    PL_RETURN_IF_ERROR(m.CopyParametersToDevice());
    PL_RETURN_IF_ERROR(m.TrainStep(x, labels).status());
    PL_RETURN_IF_ERROR(m.CopyGradientsToHost());
    return m.ZeroGrad();
  };
  PL_ASSIGN_OR_RETURN(double compute_ms, time_ms([&] { return gpu->TrainStep(x, labels).status(); }));
  PL_ASSIGN_OR_RETURN(double pageable_ms, time_ms([&] { return round_trip(*pageable_gpu); }));
  PL_ASSIGN_OR_RETURN(double pinned_ms, time_ms([&] { return round_trip(*gpu); }));
  // The bus's limit: the model's bytes up and down once each, pinned, one copy each way.
  PL_ASSIGN_OR_RETURN(Tensor staging, AllocatePinnedHostTensor({model_bytes / 4}, DType::kFloat32));
  PL_ASSIGN_OR_RETURN(Tensor dev, AllocateDeviceTensor({model_bytes / 4}, DType::kFloat32, gpu->device()));
  PL_ASSIGN_OR_RETURN(double bus_ms, time_ms([&]() -> Status {
    PL_RETURN_IF_ERROR(CopyToDevice(staging, dev, gpu->context().stream()));
    PL_RETURN_IF_ERROR(CopyToHost(dev, staging, gpu->context().stream()));
    return gpu->context().Synchronize();
  }));
  std::printf("model: %.1f MB of parameters (and as many of gradients)\n", model_bytes / 1e6);
  std::printf("%-48s %8.3f\n", "TrainStep alone", compute_ms);
  std::printf("%-48s %8.3f  (%.1fx TrainStep)\n", "upload + TrainStep + download, pageable buffers", pageable_ms,
              pageable_ms / compute_ms);
  std::printf("%-48s %8.3f  (%.1fx TrainStep; %.1f MB page-locked)\n", "upload + TrainStep + download, registered buffers",
              pinned_ms, pinned_ms / compute_ms, gpu->pinned_host_bytes() / 1e6);
  std::printf("%-48s %8.3f  (%.1f GB/s)\n", "bus limit: one pinned copy up + one down", bus_ms,
              2 * model_bytes / (bus_ms * 1e-3) / 1e9);
  return absl::OkStatus();
}

Status BenchNccl(int gpus) {
  std::printf("\n== NCCL all-reduce (sum, float32) ==\n");
  if (gpus < 2) {
    std::printf("skipped: 1 GPU visible (all-reduce needs at least 2)\n");
    return absl::OkStatus();
  }
  PL_ASSIGN_OR_RETURN(auto comm, NcclCommunicator::Create());
  std::vector<std::unique_ptr<GpuContext>> ctxs;
  std::vector<cudaStream_t> streams;
  for (int d : comm->devices()) {
    PL_ASSIGN_OR_RETURN(auto ctx, GpuContext::Create(d));
    streams.push_back(ctx->stream());
    ctxs.push_back(std::move(ctx));
  }
  std::printf("%12s %10s %12s %12s\n", "bytes", "ms", "algbw GB/s", "busbw GB/s");
  for (int64_t count : {int64_t{1} << 20, int64_t{1} << 24, int64_t{1} << 26}) {
    std::vector<Tensor> bufs;
    for (int d : comm->devices()) {
      PL_ASSIGN_OR_RETURN(Tensor t, DeviceZeros({count}, DType::kFloat32, d, streams[bufs.size()]));
      bufs.push_back(t);
    }
    auto sync_all = [&]() -> Status {
      for (auto& c : ctxs) PL_RETURN_IF_ERROR(c->Synchronize());
      return absl::OkStatus();
    };
    for (int i = 0; i < 3; ++i) PL_RETURN_IF_ERROR(comm->AllReduceSum(bufs, streams));
    PL_RETURN_IF_ERROR(sync_all());
    const int iters = 10;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) PL_RETURN_IF_ERROR(comm->AllReduceSum(bufs, streams));
    PL_RETURN_IF_ERROR(sync_all());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double bytes = count * 4.0, n = comm->size();
    const double algbw = bytes / s / 1e9;
    std::printf("%12.0f %10.3f %12.1f %12.1f\n", bytes, s * 1e3, algbw, algbw * 2 * (n - 1) / n);
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  const cli::Program program = {
      "pl-bench-gpu", "[--tf32]",
      "What the GPU path delivers on this machine: GEMM and convolution against the device's\n"
      "peak, the cnn's samples/s on GPU vs CPU, NCCL all-reduce bandwidth. No GPU: skipped, exit 0."};
  cli::ParseOrExit(program, argc, argv);
  const bool tf32 = absl::GetFlag(FLAGS_tf32);
  StatusOr<int> gpus = DeviceCount();
  if (!gpus.ok()) {
    std::printf("pl-bench-gpu: no GPU: skipped (%s)\n", std::string(gpus.status().message()).c_str());
    return 0;
  }
  for (int d = 0; d < *gpus; ++d) {
    auto desc = DescribeDevice(d);
    std::printf("GPU %d: %s\n", d, desc.ok() ? desc->c_str() : std::string(desc.status().message()).c_str());
  }
  const Peaks peak = PeakFor(0);
  std::printf("peak (GPU 0, dense): FP32 %.1f TFLOP/s, TF32 %.1f TFLOP/s (SMs x clock x per-SM rate)\n",
              peak.fp32_tflops, peak.tf32_tflops);
  for (const auto& section : std::vector<std::function<Status()>>{
           [&] { return BenchGemm(peak); }, [&] { return BenchConv(tf32); }, [&] { return BenchCnn(tf32); },
           [&] { return BenchTrainerStep(tf32); }, [&] { return BenchNccl(*gpus); }}) {
    Status s = section();
    if (!s.ok()) {
      std::fprintf(stderr, "pl-bench-gpu: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace pl::cuda

int main(int argc, char** argv) { return pl::cuda::Main(argc, argv); }
