#include "paddle_like/nn/conv2d.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace pl {
namespace {

// Below this many multiply-adds a convolution runs on the calling thread.
constexpr int64_t kMinParallelMacs = 1 << 18;
// Backward splits the batch into at most this many chunks (see there).
constexpr int64_t kGradChunks = 16;

// Legend: C channels, H x W input plane, K = kh*kw, P = Ho*Wo output positions.
struct Geometry {
  int64_t C, H, W, kh, kw, stride, pad, Ho, Wo;
  int64_t rows() const { return C * kh * kw; }  // C*K
  int64_t cols() const { return Ho * Wo; }      // P
  // Output columns [lo, hi) whose input column ow*stride - pad + kj lies in [0, W).
  void ValidCols(int64_t kj, int64_t* lo, int64_t* hi) const {
    const int64_t first = pad - kj;  // needs ow*stride >= first
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    const int64_t last = W - 1 + pad - kj;  // needs ow*stride <= last
    *hi = last < 0 ? 0 : std::min(Wo, last / stride + 1);
    if (*hi < *lo) *hi = *lo;
  }
};

// x: (C, H, W) -> col: (C*K, P); padding reads as zero.
void Im2Col(const Geometry& g, const float* x, float* col) {
  const int64_t P = g.cols();
  for (int64_t c = 0; c < g.C; ++c) {
    const float* plane = x + c * g.H * g.W;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* dst = col + ((c * g.kh + ki) * g.kw + kj) * P;
        int64_t lo, hi;
        g.ValidCols(kj, &lo, &hi);
        for (int64_t oh = 0; oh < g.Ho; ++oh, dst += g.Wo) {
          const int64_t ih = oh * g.stride - g.pad + ki;
          if (ih < 0 || ih >= g.H) {
            std::memset(dst, 0, g.Wo * sizeof(float));
            continue;
          }
          const float* src = plane + ih * g.W - g.pad + kj;  // src[ow*stride] is column iw
          std::fill(dst, dst + lo, 0.0f);
          if (g.stride == 1) {
            std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * g.stride];
          }
          std::fill(dst + hi, dst + g.Wo, 0.0f);
        }
      }
    }
  }
}

// The adjoint of Im2Col: dx (C, H, W) += scatter of dcol (C*K, P).
void Col2ImAdd(const Geometry& g, const float* dcol, float* dx) {
  const int64_t P = g.cols();
  for (int64_t c = 0; c < g.C; ++c) {
    float* plane = dx + c * g.H * g.W;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float* src = dcol + ((c * g.kh + ki) * g.kw + kj) * P;
        int64_t lo, hi;
        g.ValidCols(kj, &lo, &hi);
        for (int64_t oh = 0; oh < g.Ho; ++oh, src += g.Wo) {
          const int64_t ih = oh * g.stride - g.pad + ki;
          if (ih < 0 || ih >= g.H) continue;
          float* dst = plane + ih * g.W - g.pad + kj;
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.stride] += src[ow];
        }
      }
    }
  }
}

}  // namespace

Conv2D::Conv2D(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
               int64_t stride, int64_t padding, bool bias)
    : Layer("Conv2D"),
      in_(in_channels),
      out_(out_channels),
      kh_(kernel_h),
      kw_(kernel_w),
      stride_(stride),
      pad_(padding),
      config_ok_(in_channels > 0 && out_channels > 0 && kernel_h > 0 && kernel_w > 0 &&
                 stride > 0 && padding >= 0) {
  // A bad config still registers (empty) parameters so the module stays well formed.
  const int64_t o = config_ok_ ? out_ : 0, fan_in = config_ok_ ? in_ * kh_ * kw_ : 1;
  w_ = RegisterDense("w", {o, config_ok_ ? in_ : 0, config_ok_ ? kh_ : 0, config_ok_ ? kw_ : 0},
                     InitSpec::He(fan_in));
  if (bias) b_ = RegisterDense("b", {o}, InitSpec::Zeros());
}

std::string Conv2D::Describe() const {
  return absl::StrCat("Conv2D(in=", in_, ", out=", out_, ", kernel=", kh_, "x", kw_,
                      ", stride=", stride_, ", padding=", pad_, ")");
}

namespace {

// The convolution of checked operands: x (N, C, H, W), w (O, C, kh, kw), b (O) or
// undefined; `who` names the op or layer in errors.
StatusOr<Variable> Convolve(const Variable& x, const Variable& w, const Variable& b, int64_t conv_stride,
                            int64_t pad, const std::string& who) {
  const Tensor& xv = x.value();
  const int64_t O = w.value().dim(0), kh = w.value().dim(2), kw = w.value().dim(3);
  Geometry g{xv.dim(1), xv.dim(2), xv.dim(3), kh, kw, conv_stride, pad, 0, 0};
  const int64_t eh = g.H + 2 * pad - kh, ew = g.W + 2 * pad - kw;
  if (eh < 0 || ew < 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": input ", xv.ShapeString(),
                                                   " is smaller than the kernel after padding"));
  }
  g.Ho = eh / conv_stride + 1;
  g.Wo = ew / conv_stride + 1;
  const int64_t N = xv.dim(0), CK = g.rows(), P = g.cols();
  const int64_t in_stride = g.C * g.H * g.W;
  Tensor y({N, O, g.Ho, g.Wo}, DType::kFloat32);
  const ConstMatrixMap wm(w.value().f32(), O, CK);
  const bool has_bias = b.defined();
  // One example per iteration; with a single example the region stays inactive so
  // Eigen may use the threads inside its GEMM instead. Tiny convolutions stay serial:
  // starting a thread team costs more than they do.
  const bool parallel = N > 1 && N * O * CK * P >= kMinParallelMacs;
#pragma omp parallel if (parallel)
  {
    std::vector<float> col(CK * P);
    const ConstMatrixMap colm(col.data(), CK, P);
#pragma omp for schedule(dynamic, 1)
    for (int64_t n = 0; n < N; ++n) {
      Im2Col(g, xv.f32() + n * in_stride, col.data());
      MatrixMap ym(y.f32() + n * O * P, O, P);
      ym.noalias() = wm * colm;
      if (has_bias) ym.colwise() += b.value().flat();
    }
  }

  std::vector<Variable> inputs{x, w};
  if (has_bias) inputs.push_back(b);
  return Variable::FromOp(y, std::move(inputs), [x, w, b, g, N, O](const Tensor& gy) {
    const int64_t CK = g.rows(), P = g.cols(), in_stride = g.C * g.H * g.W;
    const bool want_w = w.requires_grad(), want_b = b.defined() && b.requires_grad();
    const bool want_x = x.requires_grad();
    const ConstMatrixMap wm(w.value().f32(), O, CK);
    float* dx = want_x ? x.MutableGrad().f32() : nullptr;
    // The batch is cut into a fixed number of contiguous chunks, each summing its own
    // partial dW (O, CK) and db (O); the partials are then added in chunk order. The
    // result is race-free and bit-identical whatever the thread count or schedule.
    const int64_t chunks = std::min(N, kGradChunks);
    const int64_t stride = O * CK + O;
    std::vector<float> partial((want_w || want_b) ? chunks * stride : 0, 0.0f);
    const bool parallel = chunks > 1 && N * O * CK * P >= kMinParallelMacs;
#pragma omp parallel if (parallel)
    {
      std::vector<float> col(want_w ? CK * P : 0), dcol(want_x ? CK * P : 0);
#pragma omp for schedule(dynamic, 1)
      for (int64_t c = 0; c < chunks; ++c) {
        float* base = partial.empty() ? nullptr : partial.data() + c * stride;
        for (int64_t n = c * N / chunks; n < (c + 1) * N / chunks; ++n) {
          const ConstMatrixMap gym(gy.f32() + n * O * P, O, P);
          if (want_w) {
            Im2Col(g, x.value().f32() + n * in_stride, col.data());
            MatrixMap(base, O, CK).noalias() += gym * ConstMatrixMap(col.data(), CK, P).transpose();
          }
          if (want_b) VectorMap(base + O * CK, O) += gym.rowwise().sum();
          if (want_x) {
            MatrixMap(dcol.data(), CK, P).noalias() = wm.transpose() * gym;
            Col2ImAdd(g, dcol.data(), dx + n * in_stride);
          }
        }
      }
    }
    for (int64_t c = 0; c < static_cast<int64_t>(partial.size() / stride); ++c) {
      const float* base = partial.data() + c * stride;
      if (want_w) w.MutableGrad().flat() += ConstVectorMap(base, O * CK);
      if (want_b) b.MutableGrad().flat() += ConstVectorMap(base + O * CK, O);
    }
  });
}

}  // namespace

StatusOr<Variable> Conv2D::Forward(const Variable& x) {
  if (!config_ok_) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(), ": channels, kernel and stride must be positive and padding non-negative"));
  }
  const Tensor& xv = x.value();
  if (!xv.defined() || xv.dtype() != DType::kFloat32 || xv.device() != Device::kCPU ||
      xv.rank() != 4 || xv.dim(1) != in_) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(), ": expects a float32 CPU input of shape [N, ", in_, ", H, W], got ",
        xv.defined() ? DTypeName(xv.dtype()) : "undefined", " ", xv.ShapeString()));
  }
  return Convolve(x, w_, b_, stride_, pad_, Describe());
}

StatusOr<Variable> Conv2dOp(const Variable& x, const Variable& weight, const Variable& bias,
                            int64_t stride, int64_t padding) {
  const std::string op = absl::StrCat("conv2d(stride=", stride, ", padding=", padding, ")");
  auto describe = [](const Variable& v) {
    return v.defined() ? absl::StrCat(DTypeName(v.value().dtype()), " ", v.value().ShapeString())
                       : std::string("undefined");
  };
  auto is_f32 = [](const Variable& v) {
    return v.defined() && v.value().dtype() == DType::kFloat32 && v.value().device() == Device::kCPU;
  };
  if (stride <= 0 || padding < 0) {
    return absl::InvalidArgumentError(op + ": stride must be positive and padding non-negative");
  }
  const bool ok = is_f32(x) && is_f32(weight) && x.value().rank() == 4 && weight.value().rank() == 4 &&
                  weight.value().dim(1) == x.value().dim(1) && weight.value().dim(0) > 0 &&
                  weight.value().dim(2) > 0 && weight.value().dim(3) > 0 &&
                  (!bias.defined() || (is_f32(bias) && bias.value().rank() == 1 &&
                                       bias.value().dim(0) == weight.value().dim(0)));
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expects float32 CPU x (N, C, H, W), weight (O, C, kh, kw) and bias (O), got x ",
        describe(x), ", weight ", describe(weight), ", bias ", bias.defined() ? describe(bias) : "None"));
  }
  return Convolve(x, weight, bias, stride, padding, op);
}

}  // namespace pl
