// GEMM and the Linear layer on the GPU through cuBLAS, for row-major tensors.
// cuBLAS is column-major; a row-major (M, N) matrix is the column-major (N, M) matrix
// of the same memory, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T with
// the operands swapped — no copies, no transposes.
//
//   x: (B, in)   w: (in, out)   b: (out)   y: (B, out)       (as paddle_like/nn/linear.h)
//
// Thread-safety: as the GpuContext passed in (one thread at a time per context).
#ifndef PADDLE_LIKE_CUDA_LINEAR_OPS_H_
#define PADDLE_LIKE_CUDA_LINEAR_OPS_H_

#include "cuda/context.h"
#include "paddle_like/core/tensor.h"

namespace pl::cuda {

enum class GemmPrecision {
  kFloat32,  // full float32 products (CUBLAS_COMPUTE_32F)
  kTF32,     // TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), Ampere and later
  kContext,  // kTF32 if the context allows TF32, else kFloat32
};

// C (M, N) = alpha * op(A) op(B) + beta * C over raw row-major device pointers:
// A is (M, K), or (K, M) if trans_a; B is (K, N), or (N, K) if trans_b.
Status Gemm(const GpuContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
            float alpha, const float* A, const float* B, float beta, float* C,
            GemmPrecision precision = GemmPrecision::kContext);

// y = x w (+ b). `b` may be undefined (no bias). y must be allocated (B, out).
Status LinearForward(const GpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                     const Tensor& y);

// Gradients of LinearForward for gy (B, out). Each output may be undefined (not
// wanted). accumulate_params: dw/db get the gradient added (true) or written;
// dx is always written.
Status LinearBackward(const GpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& gy,
                      const Tensor& dx, const Tensor& dw, const Tensor& db, bool accumulate_params);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_LINEAR_OPS_H_
