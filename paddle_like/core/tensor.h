// Tensor: an n-dimensional array of float32 values or int64 ids in contiguous,
// row-major, 64-byte aligned storage. Copying a Tensor shares the storage (like a
// shared_ptr); Clone() makes a deep copy. Eigen maps give the math a zero-copy view.
//
// Thread-safety: a Tensor may be read from many threads; writes to the same storage
// need external synchronization.
#ifndef PADDLE_LIKE_CORE_TENSOR_H_
#define PADDLE_LIKE_CORE_TENSOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "paddle_like/core/status.h"

namespace pl {

enum class DType : uint8_t { kFloat32 = 0, kInt64 = 1 };  // append-only
enum class Device : uint8_t { kCPU = 0, kCUDA = 1 };      // append-only

const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);

using Shape = std::vector<int64_t>;
std::string ShapeToString(const Shape& shape);  // "[2, 3]"
int64_t NumElements(const Shape& shape);

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix<float>>;
using ConstMatrixMap = Eigen::Map<const RowMatrix<float>>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;

// A block of memory. Owns it, or keeps an external owner alive (NumPy arrays,
// CUDA allocations) through `release`, which runs when the last Tensor lets go.
class Storage {
 public:
  static std::shared_ptr<Storage> Allocate(size_t bytes);  // CPU, aligned, uninitialized
  static std::shared_ptr<Storage> Wrap(void* data, size_t bytes, Device device,
                                       std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, size_t bytes, Device device, std::function<void()> release)
      : data_(data), bytes_(bytes), device_(device), release_(std::move(release)) {}
  void* data_;
  size_t bytes_;
  Device device_;
  std::function<void()> release_;
};

class Tensor {
 public:
  Tensor() = default;  // an empty tensor: defined() is false
  Tensor(Shape shape, DType dtype);  // uninitialized CPU storage

  static Tensor Zeros(Shape shape, DType dtype = DType::kFloat32);
  static Tensor Filled(Shape shape, float value);
  static Tensor FromVector(Shape shape, const std::vector<float>& values);
  static Tensor FromIds(Shape shape, const std::vector<int64_t>& ids);
  // A tensor over existing storage; `offset_bytes` must keep 4/8-byte alignment.
  static Tensor FromStorage(std::shared_ptr<Storage> storage, Shape shape, DType dtype,
                            size_t offset_bytes = 0);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::kCPU; }
  size_t bytes() const { return numel_ * DTypeSize(dtype_); }
  std::string ShapeString() const { return ShapeToString(shape_); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  template <typename T>
  T* data() const { return reinterpret_cast<T*>(raw_data()); }
  float* f32() const { return data<float>(); }
  int64_t* i64() const { return data<int64_t>(); }
  void* raw_data() const {
    return storage_ ? static_cast<char*>(storage_->data()) + offset_ : nullptr;
  }

  // Views over the same storage. matrix() is dim(0) rows by numel/dim(0) columns.
  MatrixMap matrix() const;
  MatrixMap matrix(int64_t rows, int64_t cols) const;
  VectorMap flat() const;

  // Same storage, new shape with the same element count; one dim may be -1.
  StatusOr<Tensor> Reshape(Shape shape) const;
  // Rows [begin, end) of dim 0, sharing storage.
  Tensor Slice(int64_t begin, int64_t end) const;
  Tensor Clone() const;
  void SetZero() const;
  void Fill(float value) const;
  // Element-wise copy from a tensor of the same shape and dtype.
  Status CopyFrom(const Tensor& other) const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kFloat32;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CORE_TENSOR_H_
