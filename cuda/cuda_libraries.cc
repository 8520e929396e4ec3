#include "cuda/cuda_libraries.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <array>
#include <cstdlib>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cuda/dynamic_api.h"

namespace pl::cuda {
namespace {

#define PL_CUDA_FUNCTION_NAME(name) #name,
const char* const kCublasNames[] = {PL_CUBLAS_FUNCTIONS(PL_CUDA_FUNCTION_NAME)};
const char* const kCudnnNames[] = {PL_CUDNN_FUNCTIONS(PL_CUDA_FUNCTION_NAME)};
const char* const kNcclNames[] = {PL_NCCL_FUNCTIONS(PL_CUDA_FUNCTION_NAME)};
#undef PL_CUDA_FUNCTION_NAME

constexpr int kMaxFunctions = 64;
static_assert(static_cast<int>(internal::CublasFunction::kCount) <= kMaxFunctions);
static_assert(static_cast<int>(internal::CudnnFunction::kCount) <= kMaxFunctions);
static_assert(static_cast<int>(internal::NcclFunction::kCount) <= kMaxFunctions);

constexpr const char* kToolkitFolders[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"};

struct Spec {
  const char* name;
  std::string soname;  // major version of the headers this build was compiled with
  const char* const* functions;
  int function_count;
};

Spec SpecOf(CudaLibrary library) {
  switch (library) {
    case CudaLibrary::kCublas:
      return {"cuBLAS", absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR), kCublasNames,
              static_cast<int>(internal::CublasFunction::kCount)};
    case CudaLibrary::kCudnn:
      return {"cuDNN", absl::StrCat("libcudnn.so.", CUDNN_MAJOR), kCudnnNames,
              static_cast<int>(internal::CudnnFunction::kCount)};
    case CudaLibrary::kNccl:
      return {"NCCL", absl::StrCat("libnccl.so.", NCCL_MAJOR), kNcclNames,
              static_cast<int>(internal::NcclFunction::kCount)};
  }
  return {"?", "", nullptr, 0};
}

struct Loaded {
  std::once_flag once;
  CudaLibraryInfo info;
  // Written once under `once`, read without a lock after it (call_once orders them).
  std::array<void*, kMaxFunctions> symbols{};
  bool ok = false;
};

Loaded& Slot(CudaLibrary library) {
  static Loaded slots[3];
  return slots[static_cast<int>(library)];
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Opens `target` (a path, or a bare name for the dynamic linker to find) and resolves
// every function; on failure closes it and says why.
Status TryOpen(const Spec& spec, const std::string& target, Loaded& slot) {
  dlerror();
  void* handle = dlopen(target.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(why != nullptr ? why : "dlopen failed");
  }
  for (int i = 0; i < spec.function_count; ++i) {
    void* symbol = dlsym(handle, spec.functions[i]);
    if (symbol == nullptr) {
      dlclose(handle);
      return absl::FailedPreconditionError(absl::StrCat("it has no ", spec.functions[i]));
    }
    slot.symbols[i] = symbol;
  }
  // A bare name was found by the linker: ask it where.
  char origin[4096] = {0};
  if (target.find('/') == std::string::npos && dlinfo(handle, RTLD_DI_ORIGIN, origin) == 0 && origin[0] != '\0') {
    slot.info.path = absl::StrCat(origin, "/", spec.soname);
  } else {
    slot.info.path = target;
  }
  return absl::OkStatus();
}

template <typename Fn>
Fn Resolved(const Loaded& slot, int index) {
  return reinterpret_cast<Fn>(slot.symbols[index]);
}

// Asks the loaded library its version (through the resolved symbols: the dyn:: wrappers
// would wait on the load that is running).
std::string VersionOf(CudaLibrary library, const Loaded& slot) {
  switch (library) {
    case CudaLibrary::kCublas: {
      auto get =
          Resolved<decltype(&::cublasGetProperty)>(slot, static_cast<int>(internal::CublasFunction::cublasGetProperty));
      int major = 0, minor = 0, patch = 0;
      if (get(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS || get(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
          get(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
        return "";
      }
      return absl::StrCat(major, ".", minor, ".", patch);
    }
    case CudaLibrary::kCudnn: {
      // 9.13.0 is 91300: major * 10000 + minor * 100 + patch since cuDNN 9.
      const size_t v =
          Resolved<decltype(&::cudnnGetVersion)>(slot, static_cast<int>(internal::CudnnFunction::cudnnGetVersion))();
      return absl::StrCat(v / 10000, ".", (v % 10000) / 100, ".", v % 100);
    }
    case CudaLibrary::kNccl: {
      // 2.28.3 is 22803: major * 10000 + minor * 100 + patch since NCCL 2.9.
      int v = 0;
      if (Resolved<decltype(&::ncclGetVersion)>(slot, static_cast<int>(internal::NcclFunction::ncclGetVersion))(&v) !=
          ncclSuccess) {
        return "";
      }
      return absl::StrCat(v / 10000, ".", (v % 10000) / 100, ".", v % 100);
    }
  }
  return "";
}

void Load(CudaLibrary library, Loaded& slot) {
  const Spec spec = SpecOf(library);
  slot.info.name = spec.name;
  slot.info.soname = spec.soname;
  std::vector<std::string> tried, skipped;
  auto attempt = [&](const std::string& target, const std::string& where) {
    Status s = TryOpen(spec, target, slot);
    if (s.ok()) {
      slot.ok = true;
      slot.info.version = VersionOf(library, slot);
      slot.info.skipped = skipped;
      return true;
    }
    tried.push_back(absl::StrCat(where, ": ", s.message()));
    // The linker not finding the name is no file skipped.
    if (target.find('/') != std::string::npos || !absl::StrContains(s.message(), "cannot open shared object file")) {
      skipped.push_back(tried.back());
    }
    return false;
  };
  for (const std::string& dir : CudaLibrarySearchPath()) {
    const std::string path = absl::StrCat(dir, "/", spec.soname);
    if (IsFile(path) && attempt(path, path)) return;
  }
  if (attempt(spec.soname, "the dynamic linker's search")) return;
  for (const char* dir : kToolkitFolders) {
    const std::string path = absl::StrCat(dir, "/", spec.soname);
    if (IsFile(path) && attempt(path, path)) return;
  }
  const std::vector<std::string> path = CudaLibrarySearchPath();
  slot.info.status = absl::UnavailableError(
      absl::StrCat(spec.name, " (", spec.soname, ") cannot be used: ", absl::StrJoin(tried, "; "),
                   ". Looked in PL_CUDA_LIBRARY_PATH (", path.empty() ? "unset" : absl::StrJoin(path, ":"),
                   "), the dynamic linker's search and ", absl::StrJoin(kToolkitFolders, ", "),
                   ". Install NVIDIA's wheels (pip install paddle_like[cuda]) or the CUDA libraries, or point "
                   "PL_CUDA_LIBRARY_PATH at them"));
  slot.symbols.fill(nullptr);
}

Loaded& EnsureLoaded(CudaLibrary library) {
  Loaded& slot = Slot(library);
  std::call_once(slot.once, [&] { Load(library, slot); });
  return slot;
}

}  // namespace

std::vector<std::string> CudaLibrarySearchPath() {
  const char* env = std::getenv("PL_CUDA_LIBRARY_PATH");
  std::vector<std::string> dirs;
  if (env == nullptr) return dirs;
  for (absl::string_view dir : absl::StrSplit(env, ':', absl::SkipEmpty())) dirs.emplace_back(dir);
  return dirs;
}

Status LoadCudaLibrary(CudaLibrary library) { return EnsureLoaded(library).info.status; }

CudaLibraryInfo DescribeCudaLibrary(CudaLibrary library) { return EnsureLoaded(library).info; }

std::vector<CudaLibraryInfo> DescribeCudaLibraries() {
  return {DescribeCudaLibrary(CudaLibrary::kCublas), DescribeCudaLibrary(CudaLibrary::kCudnn),
          DescribeCudaLibrary(CudaLibrary::kNccl)};
}

std::string SummarizeCudaLibraries() {
  std::vector<std::string> parts;
  for (const CudaLibraryInfo& info : DescribeCudaLibraries()) {
    parts.push_back(info.status.ok() ? absl::StrCat(info.name, " ", info.version, " (", info.path, ")")
                                     : absl::StrCat(info.name, ": not found"));
  }
  return absl::StrJoin(parts, ", ");
}

namespace internal {

void* CudaSymbol(CudaLibrary library, int index) {
  Loaded& slot = EnsureLoaded(library);
  return slot.ok && index >= 0 && index < kMaxFunctions ? slot.symbols[index] : nullptr;
}

}  // namespace internal
}  // namespace pl::cuda
