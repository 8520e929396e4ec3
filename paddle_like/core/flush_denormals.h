// ScopedFlushDenormals: while it lives, the calling thread's float arithmetic treats
// denormal numbers (|x| < 1.2e-38) as zero, inputs and results alike (x86's FTZ and
// DAZ bits; a no-op elsewhere). It restores the thread's previous mode when it goes.
//
// Why: on x86 every operation that meets a denormal takes a microcode assist, tens of
// times slower. Adam's first moment of a parameter whose gradient stays zero (the
// weight of a Fashion-MNIST pixel that is always black) decays by beta1 each step and
// reaches the denormals after about 800 steps; from then on the whole update ran 1.3x
// slower in one process and the pserver's exchange 1.3x slower (benchmarks/README.md).
// TensorFlow and XLA flush denormals in their CPU kernels for the same reason. A
// flushed moment is 0 instead of 1e-39: no update it would have made is visible.
//
// Thread-safety: it changes only the calling thread's mode; construct and destroy it
// on the same thread. Nesting is fine (an inner one finds the mode set and does nothing).
#ifndef PADDLE_LIKE_PADDLE_LIKE_CORE_FLUSH_DENORMALS_H_
#define PADDLE_LIKE_PADDLE_LIKE_CORE_FLUSH_DENORMALS_H_

#if defined(__SSE2__) || defined(_M_X64)
#include <xmmintrin.h>
#define PL_HAS_MXCSR 1
#endif

namespace pl {

class ScopedFlushDenormals {
 public:
#ifdef PL_HAS_MXCSR
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    if ((saved_ & kFlushBits) != kFlushBits) _mm_setcsr(saved_ | kFlushBits);
  }
  ~ScopedFlushDenormals() {
    if ((saved_ & kFlushBits) != kFlushBits) _mm_setcsr(saved_);
  }
#else
  ScopedFlushDenormals() = default;
#endif
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
#ifdef PL_HAS_MXCSR
  static constexpr unsigned kFlushBits = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
  unsigned saved_;
#endif
};

}  // namespace pl

#endif  // PADDLE_LIKE_PADDLE_LIKE_CORE_FLUSH_DENORMALS_H_
