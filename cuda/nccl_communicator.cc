#include "cuda/nccl_communicator.h"

#include <set>

#include "absl/strings/str_format.h"
#include "cuda/activation_ops.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/dynamic_api.h"
#include "cuda/status.h"

namespace pl::cuda {

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(std::vector<int> devices) {
  PL_ASSIGN_OR_RETURN(int count, DeviceCount());
  if (devices.empty()) {
    for (int d = 0; d < count; ++d) devices.push_back(d);
  }
  std::set<int> seen;
  for (int d : devices) {
    PL_RETURN_IF_ERROR(CheckDevice(d));
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(absl::StrFormat("NcclCommunicator: GPU %d listed twice", d));
    }
  }
  PL_RETURN_IF_ERROR(LoadCudaLibrary(CudaLibrary::kNccl));
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator);
  comm->devices_ = devices;
  comm->comms_.assign(devices.size(), nullptr);
  PL_NCCL_RETURN_IF_ERROR(
      dyn::ncclCommInitAll(comm->comms_.data(), static_cast<int>(devices.size()), comm->devices_.data()));
  return comm;
}

NcclCommunicator::~NcclCommunicator() {
  for (ncclComm_t c : comms_) {
    if (c != nullptr) dyn::ncclCommDestroy(c);
  }
}

Status NcclCommunicator::AllReduceAverage(const std::vector<Tensor>& buffers,
                                          const std::vector<cudaStream_t>& streams) {
  return AllReduce(buffers, streams, /*average=*/true);
}

Status NcclCommunicator::AllReduceSum(const std::vector<Tensor>& buffers,
                                      const std::vector<cudaStream_t>& streams) {
  return AllReduce(buffers, streams, /*average=*/false);
}

Status NcclCommunicator::AllReduce(const std::vector<Tensor>& buffers, const std::vector<cudaStream_t>& streams,
                                   bool average) {
  const size_t n = devices_.size();
  if (buffers.size() != n || streams.size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NcclCommunicator::AllReduce: %d devices but %d buffers and %d streams", n, buffers.size(), streams.size()));
  }
  for (size_t i = 0; i < n; ++i) {
    PL_RETURN_IF_ERROR(internal::CheckGpu(buffers[i], DType::kFloat32, "NcclCommunicator::AllReduce",
                                          absl::StrCat("buffer ", i)));
    if (buffers[i].numel() != buffers[0].numel()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "NcclCommunicator::AllReduce: buffer %d has %d elements, buffer 0 has %d", i, buffers[i].numel(),
          buffers[0].numel()));
    }
  }
  const size_t count = static_cast<size_t>(buffers[0].numel());
  if (count == 0) return absl::OkStatus();
  PL_NCCL_RETURN_IF_ERROR(dyn::ncclGroupStart());
  Status status;
  for (size_t i = 0; i < n && status.ok(); ++i) {
    status = FromNccl(dyn::ncclAllReduce(buffers[i].raw_data(), buffers[i].raw_data(), count, ncclFloat, ncclSum,
                                         comms_[i], streams[i]),
                      "ncclAllReduce");
  }
  // The group must be closed even after a failed enqueue.
  Status end = FromNccl(dyn::ncclGroupEnd(), "ncclGroupEnd");
  PL_RETURN_IF_ERROR(status);
  PL_RETURN_IF_ERROR(end);
  if (!average || n == 1) return absl::OkStatus();
  const float inv = 1.0f / static_cast<float>(n);
  for (size_t i = 0; i < n; ++i) {
    DeviceGuard guard(devices_[i]);
    PL_RETURN_IF_ERROR(guard.status());
    PL_RETURN_IF_ERROR(Scale(buffers[i], inv, streams[i]));
  }
  return absl::OkStatus();
}

Status NcclCommunicator::AverageGradients(const std::vector<GpuModel*>& replicas) {
  if (replicas.size() != devices_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NcclCommunicator::AverageGradients: %d replicas for %d devices", replicas.size(), devices_.size()));
  }
  std::vector<Tensor> buffers;
  std::vector<cudaStream_t> streams;
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i]->device() != devices_[i]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "NcclCommunicator::AverageGradients: replica %d is on GPU %d, expected GPU %d", i,
          replicas[i]->device(), devices_[i]));
    }
    buffers.push_back(replicas[i]->gradients());
    streams.push_back(replicas[i]->context().stream());
  }
  PL_RETURN_IF_ERROR(AllReduceAverage(buffers, streams));
  for (GpuModel* r : replicas) {
    PL_RETURN_IF_ERROR(r->context().Synchronize());
    r->MarkGradientsPresent();
  }
  return absl::OkStatus();
}

Status MergeSparseGradients(const std::vector<const SparseRows*>& parts, float scale, SparseRows* out) {
  const int64_t dim = out->dim();
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p]->dim() != dim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "MergeSparseGradients: part %d has rows of dim %d, the output has dim %d", p, parts[p]->dim(), dim));
    }
  }
  for (const SparseRows* part : parts) {
    const std::vector<int64_t>& ids = part->ids();
    const float* values = part->values().data();
    for (size_t k = 0; k < ids.size(); ++k) {
      float* row = out->FindOrInsert(ids[k]);
      const float* src = values + k * dim;
      for (int64_t d = 0; d < dim; ++d) row[d] += scale * src[d];
    }
  }
  return absl::OkStatus();
}

}  // namespace pl::cuda
