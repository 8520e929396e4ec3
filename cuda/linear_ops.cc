#include "cuda/linear_ops.h"

#include <climits>

#include "absl/strings/str_format.h"
#include "cuda/check.h"
#include "cuda/dynamic_api.h"
#include "cuda/kernels.h"
#include "cuda/status.h"

namespace pl::cuda {

using internal::CheckGpu;

Status Gemm(const GpuContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
            float alpha, const float* A, const float* B, float beta, float* C,
            GemmPrecision precision) {
  if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: sizes M=%d N=%d K=%d must be in [0, 2^31)", M, N, K));
  }
  if (M == 0 || N == 0) return absl::OkStatus();
  const bool tf32 = precision == GemmPrecision::kTF32 ||
                    (precision == GemmPrecision::kContext && ctx.allow_tf32());
  // Row-major leading dimensions: the stored row length of each operand.
  const int lda = static_cast<int>(trans_a ? M : K);
  const int ldb = static_cast<int>(trans_b ? K : N);
  const int ldc = static_cast<int>(N);
  // Column-major C^T (N, M) = op(B)^T (N, K) * op(A)^T (K, M).
  return FromCublas(
      dyn::cublasGemmEx(ctx.cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                        static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha, B, CUDA_R_32F, ldb, A,
                        CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
                        tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

Status LinearForward(const GpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                     const Tensor& y) {
  const char* op = "LinearForward";
  PL_RETURN_IF_ERROR(CheckGpu(w, DType::kFloat32, op, "w"));
  if (w.rank() != 2) return absl::InvalidArgumentError(absl::StrCat(op, ": w must be (in, out), got ", w.ShapeString()));
  const int64_t in = w.dim(0), out = w.dim(1);
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, op, "x"));
  if (x.rank() != 2 || x.dim(1) != in) {
    return absl::InvalidArgumentError(absl::StrCat(op, "(", in, " -> ", out, "): x must be [batch, ", in,
                                                   "], got ", x.ShapeString()));
  }
  const int64_t batch = x.dim(0);
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, {batch, out}, op, "y"));
  if (b.defined()) PL_RETURN_IF_ERROR(CheckGpu(b, DType::kFloat32, {out}, op, "b"));
  PL_RETURN_IF_ERROR(Gemm(ctx, false, false, batch, out, in, 1.0f, x.f32(), w.f32(), 0.0f, y.f32()));
  if (b.defined()) {
    PL_RETURN_IF_ERROR(FromCuda(kernels::BiasAdd(y.f32(), b.f32(), batch, out, 1, ctx.stream()), "BiasAdd"));
  }
  return absl::OkStatus();
}

Status LinearBackward(const GpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& gy,
                      const Tensor& dx, const Tensor& dw, const Tensor& db, bool accumulate_params) {
  const char* op = "LinearBackward";
  PL_RETURN_IF_ERROR(CheckGpu(w, DType::kFloat32, op, "w"));
  if (w.rank() != 2) return absl::InvalidArgumentError(absl::StrCat(op, ": w must be (in, out), got ", w.ShapeString()));
  const int64_t in = w.dim(0), out = w.dim(1);
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, op, "x"));
  if (x.rank() != 2 || x.dim(1) != in) {
    return absl::InvalidArgumentError(absl::StrCat(op, "(", in, " -> ", out, "): x must be [batch, ", in,
                                                   "], got ", x.ShapeString()));
  }
  const int64_t batch = x.dim(0);
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, {batch, out}, op, "gy"));
  const float beta = accumulate_params ? 1.0f : 0.0f;
  if (dw.defined()) {
    PL_RETURN_IF_ERROR(CheckGpu(dw, DType::kFloat32, {in, out}, op, "dw"));
    // dw (in, out) = x^T (in, B) gy (B, out)
    PL_RETURN_IF_ERROR(Gemm(ctx, true, false, in, out, batch, 1.0f, x.f32(), gy.f32(), beta, dw.f32()));
  }
  if (db.defined()) {
    PL_RETURN_IF_ERROR(CheckGpu(db, DType::kFloat32, {out}, op, "db"));
    PL_RETURN_IF_ERROR(FromCuda(
        kernels::BiasGrad(gy.f32(), db.f32(), batch, out, 1, accumulate_params, ctx.stream()), "BiasGrad"));
  }
  if (dx.defined()) {
    PL_RETURN_IF_ERROR(CheckGpu(dx, DType::kFloat32, {batch, in}, op, "dx"));
    // dx (B, in) = gy (B, out) w^T (out, in)
    PL_RETURN_IF_ERROR(Gemm(ctx, false, true, batch, in, out, 1.0f, gy.f32(), w.f32(), 0.0f, dx.f32()));
  }
  return absl::OkStatus();
}

}  // namespace pl::cuda
