// NcclCommunicator: data-parallel training over the GPUs of one trainer process. It
// holds one NCCL communicator per local device (ncclCommInitAll) and averages dense
// buffers across them: a grouped ncclAllReduce (sum) then a scale by 1/n on each
// device, so each replica ends with the mean gradient and the trainer pushes one
// copy to the parameter servers. Sparse gradients (embedding rows) are merged on the
// host instead (MergeSparseGradients): concatenated and accumulated per id, never
// densified.
//
// Thread-safety: not thread-safe; one thread issues the collectives (NCCL requires
// the calls for all devices of a group from the same thread).
#ifndef PADDLE_LIKE_CUDA_NCCL_COMMUNICATOR_H_
#define PADDLE_LIKE_CUDA_NCCL_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/gpu_model.h"
#include "paddle_like/core/tensor.h"
#include "paddle_like/nn/sparse_table.h"

namespace pl::cuda {

class NcclCommunicator {
 public:
  // Over `devices` (distinct ids), or every visible device when empty.
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(std::vector<int> devices = {});
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<int>& devices() const { return devices_; }

  // buffers[i]: float32 on devices()[i], all with the same element count; replaced by
  // their element-wise mean. Work is queued on streams[i]; returns once queued.
  Status AllReduceAverage(const std::vector<Tensor>& buffers, const std::vector<cudaStream_t>& streams);
  // Sum without the scaling (for benchmarks and counts).
  Status AllReduceSum(const std::vector<Tensor>& buffers, const std::vector<cudaStream_t>& streams);

  // Averages the gradient buffers of replicas[i] (one GpuModel per device, in
  // devices() order, built from identical models), waits, and marks every replica
  // as holding a gradient.
  Status AverageGradients(const std::vector<GpuModel*>& replicas);

 private:
  NcclCommunicator() = default;
  Status AllReduce(const std::vector<Tensor>& buffers, const std::vector<cudaStream_t>& streams, bool average);
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};

// out += scale * (the rows of every part), accumulated per id: ids seen in several
// parts get the sum of their rows. With scale = 1/n this is the mean over n replicas
// of their sparse gradients (a replica without an id contributes zero for it).
// Parts must share out's dim (INVALID_ARGUMENT otherwise).
Status MergeSparseGradients(const std::vector<const SparseRows*>& parts, float scale, SparseRows* out);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_NCCL_COMMUNICATOR_H_
