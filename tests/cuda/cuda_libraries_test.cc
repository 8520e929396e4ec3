// cuBLAS, cuDNN and NCCL opened at run time (cuda/cuda_libraries.h): each found, every
// function the GPU path calls resolved, and callable through dyn:: (the calls below need
// no GPU). Where a machine lacks a library, the test says which and skips.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_libraries.h"
#include "cuda/dynamic_api.h"

namespace pl::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

void SkipUnlessLoaded(CudaLibrary library) {
  const CudaLibraryInfo info = DescribeCudaLibrary(library);
  if (!info.status.ok()) GTEST_SKIP() << info.status.message();
}

TEST(CudaLibrariesTest, EachNamesItsFileAndVersionAndTheMajorMatchesTheHeaders) {
  for (const CudaLibraryInfo& info : DescribeCudaLibraries()) {
    if (!info.status.ok()) {
      EXPECT_THAT(info.status.message(), HasSubstr(info.soname));
      EXPECT_THAT(info.status.message(), HasSubstr("PL_CUDA_LIBRARY_PATH"));
      continue;
    }
    struct stat st;
    EXPECT_EQ(stat(info.path.c_str(), &st), 0) << info.path;
    const std::string major = info.soname.substr(info.soname.rfind('.') + 1);
    EXPECT_THAT(info.version, StartsWith(major + ".")) << info.name << " " << info.version;
  }
}

TEST(CudaLibrariesTest, TheLogLineNamesEachLibraryWithItsVersionAndFile) {
  const std::string line = SummarizeCudaLibraries();
  for (const CudaLibraryInfo& info : DescribeCudaLibraries()) {
    EXPECT_THAT(line, HasSubstr(info.status.ok() ? absl::StrCat(info.name, " ", info.version, " (", info.path, ")")
                                                 : absl::StrCat(info.name, ": not found")));
  }
}

TEST(CudaLibrariesTest, CuBlasAnswersThroughItsResolvedFunctions) {
  SkipUnlessLoaded(CudaLibrary::kCublas);
  int major = -1;
  ASSERT_EQ(dyn::cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
}

TEST(CudaLibrariesTest, CuDnnAnswersThroughItsResolvedFunctions) {
  SkipUnlessLoaded(CudaLibrary::kCudnn);
  EXPECT_EQ(dyn::cudnnGetVersion() / 10000, static_cast<size_t>(CUDNN_MAJOR));
  EXPECT_STREQ(dyn::cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
}

TEST(CudaLibrariesTest, NcclAnswersThroughItsResolvedFunctions) {
  SkipUnlessLoaded(CudaLibrary::kNccl);
  int version = 0;
  ASSERT_EQ(dyn::ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version / 10000, NCCL_MAJOR);
  EXPECT_THAT(dyn::ncclGetErrorString(ncclInvalidArgument), HasSubstr("invalid argument"));
}

}  // namespace
}  // namespace pl::cuda
