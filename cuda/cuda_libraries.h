// The CUDA libraries the GPU path calls besides the runtime: cuBLAS, cuDNN and NCCL.
// They are opened at run time (dlopen), not linked, and the runtime is linked
// statically, so every binary and the Python extension start on a machine that has
// none of them and train on the CPU. The GPU path turns on where a driver, a device and
// these libraries are found.
//
// Where a library is looked for, in this order (the first file that loads wins):
//   1. each directory of PL_CUDA_LIBRARY_PATH (colon-separated). The Python package
//      puts the library folders of NVIDIA's PyPI wheels there (nvidia/cu13/lib,
//      nvidia/cudnn/lib, nvidia/nccl/lib), so `pip install paddle_like[cuda]` is enough;
//   2. the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache);
//   3. the CUDA toolkit's default folders (/usr/local/cuda/lib64, /usr/local/cuda/lib).
// The file name carries the major version the build was compiled against
// (libcublas.so.13, libcudnn.so.9, libnccl.so.2), so a mismatched major is not loaded.
// A library is usable only when every function the GPU path calls resolves in it.
//
// Thread-safety: all functions are thread-safe. A library is opened once per process
// and stays open; the first call decides where it came from.
#ifndef PADDLE_LIKE_CUDA_CUDA_LIBRARIES_H_
#define PADDLE_LIKE_CUDA_CUDA_LIBRARIES_H_

#include <string>
#include <vector>

#include "paddle_like/core/status.h"

namespace pl::cuda {

enum class CudaLibrary { kCublas, kCudnn, kNccl };

struct CudaLibraryInfo {
  std::string name;     // "cuBLAS"
  std::string soname;   // "libcublas.so.13"
  std::string path;     // the file it was loaded from; "" when it was not found
  std::string version;  // the loaded library's own ("13.0.2", "9.13.0", "2.28.3")
  // Files found before `path` that could not be used, each with why (a library of
  // another kind under the name, a file the loader refused).
  std::vector<std::string> skipped;
  Status status;  // OK, or UNAVAILABLE naming every place looked and why each failed
};

// Opens the library (once) and resolves the functions the GPU path calls.
Status LoadCudaLibrary(CudaLibrary library);
// Where the library came from, or why it could not be used (opens it if not yet tried).
CudaLibraryInfo DescribeCudaLibrary(CudaLibrary library);
std::vector<CudaLibraryInfo> DescribeCudaLibraries();
// One line for logs: "cuBLAS 13.1.0 (/usr/local/cuda/lib64/libcublas.so.13), cuDNN ...",
// a library that cannot be used reading "NCCL: not found".
std::string SummarizeCudaLibraries();
// The directories tried before the dynamic linker's search, in order.
std::vector<std::string> CudaLibrarySearchPath();

namespace internal {
// The resolved function, or nullptr before a successful LoadCudaLibrary.
void* CudaSymbol(CudaLibrary library, int index);
}  // namespace internal

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_CUDA_LIBRARIES_H_
