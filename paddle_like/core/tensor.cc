#include "paddle_like/core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_join.h"

namespace pl {
namespace {
constexpr size_t kAlignment = 64;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

size_t DTypeSize(DType dtype) { return dtype == DType::kInt64 ? 8 : 4; }

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::shared_ptr<Storage> Storage::Allocate(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = rounded ? std::aligned_alloc(kAlignment, rounded) : nullptr;
  if (rounded && data == nullptr) throw std::bad_alloc();
  return std::shared_ptr<Storage>(
      new Storage(data, bytes, Device::kCPU, [data] { std::free(data); }));
}

std::shared_ptr<Storage> Storage::Wrap(void* data, size_t bytes, Device device,
                                       std::function<void()> release) {
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, std::move(release)));
}

Storage::~Storage() {
  if (release_) release_();
}

Tensor::Tensor(Shape shape, DType dtype)
    : shape_(std::move(shape)), numel_(NumElements(shape_)), dtype_(dtype) {
  storage_ = Storage::Allocate(numel_ * DTypeSize(dtype_));
}

Tensor Tensor::Zeros(Shape shape, DType dtype) {
  Tensor t(std::move(shape), dtype);
  t.SetZero();
  return t;
}

Tensor Tensor::Filled(Shape shape, float value) {
  Tensor t(std::move(shape), DType::kFloat32);
  t.Fill(value);
  return t;
}

Tensor Tensor::FromVector(Shape shape, const std::vector<float>& values) {
  Tensor t(std::move(shape), DType::kFloat32);
  if (static_cast<int64_t>(values.size()) != t.numel()) {
    throw std::invalid_argument("Tensor::FromVector: " + std::to_string(values.size()) +
                                " values for shape " + t.ShapeString());
  }
  std::memcpy(t.raw_data(), values.data(), t.bytes());
  return t;
}

Tensor Tensor::FromIds(Shape shape, const std::vector<int64_t>& ids) {
  Tensor t(std::move(shape), DType::kInt64);
  if (static_cast<int64_t>(ids.size()) != t.numel()) {
    throw std::invalid_argument("Tensor::FromIds: " + std::to_string(ids.size()) +
                                " ids for shape " + t.ShapeString());
  }
  std::memcpy(t.raw_data(), ids.data(), t.bytes());
  return t;
}

Tensor Tensor::FromStorage(std::shared_ptr<Storage> storage, Shape shape, DType dtype,
                           size_t offset_bytes) {
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = offset_bytes;
  t.shape_ = std::move(shape);
  t.numel_ = NumElements(t.shape_);
  t.dtype_ = dtype;
  return t;
}

MatrixMap Tensor::matrix() const {
  int64_t rows = rank() == 0 ? 1 : shape_[0];
  return matrix(rows, rows == 0 ? 0 : numel_ / rows);
}

MatrixMap Tensor::matrix(int64_t rows, int64_t cols) const {
  return MatrixMap(f32(), rows, cols);
}

VectorMap Tensor::flat() const { return VectorMap(f32(), numel_); }

StatusOr<Tensor> Tensor::Reshape(Shape shape) const {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError("Reshape: more than one -1 in " + ShapeToString(shape));
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known > 0 && numel_ % known == 0) shape[infer] = numel_ / known;
  if (NumElements(shape) != numel_ || (infer >= 0 && shape[infer] < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("Reshape: cannot view ", ShapeString(),
                                                   " as ", ShapeToString(shape)));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  Tensor t = *this;
  int64_t row = shape_.empty() ? 1 : numel_ / std::max<int64_t>(shape_[0], 1);
  t.offset_ = offset_ + begin * row * DTypeSize(dtype_);
  t.shape_[0] = end - begin;
  t.numel_ = NumElements(t.shape_);
  return t;
}

Tensor Tensor::Clone() const {
  if (!defined()) return Tensor();
  Tensor t(shape_, dtype_);
  std::memcpy(t.raw_data(), raw_data(), bytes());
  return t;
}

void Tensor::SetZero() const {
  if (numel_) std::memset(raw_data(), 0, bytes());
}

void Tensor::Fill(float value) const {
  float* p = f32();
  for (int64_t i = 0; i < numel_; ++i) p[i] = value;
}

Status Tensor::CopyFrom(const Tensor& other) const {
  if (other.shape_ != shape_ || other.dtype_ != dtype_) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyFrom: destination ", ShapeString(), " ", DTypeName(dtype_),
                     " vs source ", other.ShapeString(), " ", DTypeName(other.dtype_)));
  }
  if (numel_) std::memcpy(raw_data(), other.raw_data(), bytes());
  return absl::OkStatus();
}

}  // namespace pl
