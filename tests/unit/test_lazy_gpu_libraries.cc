// A CPU run does not map cuBLAS: the CUDA build opens it on the first GPU GEMM (kernels/cuda/cublas_loader.cc).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace veomni {
namespace {

TEST(LazyGpuLibraries, ACpuMatmulLeavesCublasUnmapped) {
  const Tensor x = Tensor::zeros({4, 8}, DType::F32, Device::cpu());
  const Tensor w = Tensor::zeros({6, 8}, DType::F32, Device::cpu());
  Tensor out = Tensor::empty({4, 6}, DType::F32, Device::cpu());
  ops::matmul(x, false, w, true, out);
  std::ifstream maps("/proc/self/maps");
  ASSERT_TRUE(maps.good());
  for (std::string line; std::getline(maps, line);)
    EXPECT_EQ(line.find("libcublas"), std::string::npos) << "mapped at start: " << line;
}

}  // namespace
}  // namespace veomni
