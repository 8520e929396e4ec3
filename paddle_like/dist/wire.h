// Conversions between the wire protocol (proto/pserver.proto, proto/tensor.proto) and
// the in-process structures, shared by the trainer and the parameter server so both
// read a ParamSpec, an OptimizerConfig or a float payload the same way.
//
// Float payloads are little-endian float32 packed into a bytes field; FloatView reads
// one in place (no per-element decode, no copy unless the bytes are misaligned).
//
// Thread-safety: all functions are pure; a FloatView is used by one thread.
#ifndef PADDLE_LIKE_DIST_WIRE_H_
#define PADDLE_LIKE_DIST_WIRE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.pb.h"

namespace pl {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format packs float32 little-endian; a big-endian port must byte-swap");

// Checked conversion through the optimizer registry: an unknown name (or old kind
// number), a hyper-parameter the optimizer does not have or an out-of-range value is
// INVALID_ARGUMENT naming it (see ValidateOptimizerSpec). Reads the old message form
// (kind number and fixed fields) too; writes the name and every hyper-parameter. The
// spec read keeps only the hyper-parameters that differ from the optimizer's defaults.
StatusOr<OptimizerSpec> OptimizerFromProto(const proto::OptimizerConfig& config);
proto::OptimizerConfig OptimizerToProto(const OptimizerSpec& spec);

// The most sightings a table may require before an id gets a row (admit_after): the
// pservers count them in 16-bit saturating counters.
inline constexpr int64_t kMaxAdmitAfter = 65535;
// The longest time to live a table's rows may have (evict_after_s): a year.
inline constexpr int64_t kMaxEvictAfterSeconds = int64_t{365} * 24 * 3600;

// Checks a ParamSpec: non-empty name, known kind and init kind, positive dims, a
// positive block size for dense parameters, admit_after in range. The error names the
// parameter.
Status ValidateParamSpec(const proto::ParamSpec& spec);
StatusOr<InitSpec> InitSpecFromProto(const proto::ParamSpec& spec);
// Number of elements of a dense parameter (1 for a scalar).
int64_t DenseNumel(const proto::ParamSpec& spec);
// The block size a dense spec uses (kDefaultBlockSize when the field is 0).
int64_t BlockSizeOf(const proto::ParamSpec& spec);
// Elements [offset, offset + length) of block `block` of a dense parameter.
int64_t BlockOffset(const proto::ParamSpec& spec, int64_t block);
int64_t BlockLength(const proto::ParamSpec& spec, int64_t block);
// "[2, 3]" for dense, "rows of dim 8" for sparse: for error messages.
std::string DescribeSpec(const proto::ParamSpec& spec);

// One ParamSpec per parameter of `module`, in NamedParameters() order; dense ones get
// `block_size` (0: kDefaultBlockSize).
std::vector<proto::ParamSpec> ParamSpecsOf(Module& module, int64_t block_size = 0);
std::vector<proto::ParamSpec> ParamSpecsOf(const std::vector<NamedParameter>& params, int64_t block_size = 0);

// Float payloads.
void SetFloats(std::string* bytes, const float* values, int64_t n);

// A read-only view of a float payload: data() points into the bytes when they are
// 4-byte aligned (the usual case), or into a private copy when not.
class FloatView {
 public:
  // INVALID_ARGUMENT when the size is not a multiple of 4; `what` names the payload.
  static StatusOr<FloatView> Of(const std::string& bytes, absl::string_view what);
  const float* data() const { return data_; }
  int64_t size() const { return n_; }

 private:
  const float* data_ = nullptr;
  int64_t n_ = 0;
  std::shared_ptr<float[]> copy_;
};

// Index of the first non-finite value in v[0..n), or -1.
int64_t FirstNonFinite(const float* v, int64_t n);
// The same over n float32 values packed at `bytes`, which need not be aligned.
int64_t FirstNonFiniteBytes(const char* bytes, int64_t n);
// The sum of v[i]^2 over v[0..n) in double, in a fixed order (the same bits for the
// same values on every run and thread count). Not finite exactly when some v[i] is not:
// a finite float's square (below 2^256) cannot overflow a double sum of any length that
// fits in memory, so one pass both checks a gradient and gives its norm.
double SumOfSquares(const float* v, int64_t n);

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_WIRE_H_
