// Tensor files in the safetensors format (https://huggingface.co/docs/safetensors),
// so model and checkpoint tensors open in Python (safetensors, numpy) unchanged:
//
//   uint64 N (little-endian) | N bytes of JSON header | data
//   header: {"__metadata__": {"k": "v", ...},
//            "<name>": {"dtype": "F32"|"I64", "shape": [d0, ...], "data_offsets": [b, e]}, ...}
//
// Offsets are relative to the start of the data and the tensors tile it exactly. The
// header is padded with spaces so the data starts 8-byte aligned. SaveTensors records
// the CRC-32C of the data in the metadata ("pl.crc32c", 8 hex digits); LoadTensors
// checks it when present (files from other tools have none) and also verifies the
// header: bounds, contiguous in-range offsets, sizes matching shapes, known dtypes.
// A corrupt or truncated file is DATA_LOSS naming the file.
//
// Thread-safety: the functions are thread-safe for distinct paths.
#ifndef PADDLE_LIKE_IO_SAFETENSORS_H_
#define PADDLE_LIKE_IO_SAFETENSORS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/core/tensor.h"

namespace pl {

// The metadata key holding the data checksum.
inline constexpr char kSafetensorsCrcKey[] = "pl.crc32c";

// Writes `tensors` (CPU, F32 or I64; names unique, non-empty, not "__metadata__") in
// the given order, atomically (temp file, fsync, rename). The data is streamed from
// the tensors; no second copy of it is built.
Status SaveTensors(const std::string& path,
                   const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const std::map<std::string, std::string>& metadata = {});

struct TensorFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // includes "pl.crc32c" when present
  std::vector<std::string> order;               // tensor names in data order
};

// NOT_FOUND when missing; DATA_LOSS when malformed, truncated or failing the
// checksum; UNIMPLEMENTED for a valid dtype other than F32/I64 (e.g. F16).
StatusOr<TensorFile> LoadTensors(const std::string& path);

}  // namespace pl

#endif  // PADDLE_LIKE_IO_SAFETENSORS_H_
