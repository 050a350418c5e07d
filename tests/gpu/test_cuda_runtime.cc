// GPU tests of the CUDA runtime: initialisation, the caching allocator (reuse, statistics, release) and the copies
// between host and device that Tensor makes through it.
#include <numeric>

#include "gpu_test_util.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaRuntime : public CudaTest {};

TEST_F(CudaRuntime, InitialiseIsIdempotentAndRejectsASecondDevice) {
  EXPECT_GT(cuda_rt::device_count(), 0);
  EXPECT_TRUE(cuda_rt::initialized());
  EXPECT_NO_THROW(cuda_rt::initialize(0));
  EXPECT_THROW(cuda_rt::initialize(cuda_rt::device_count()), Error);
  EXPECT_NE(cuda_rt::stream(), nullptr);
  EXPECT_NE(cuda_rt::cublaslt(), nullptr);
  size_t bytes = 0;
  EXPECT_NE(cuda_rt::cublas_workspace(&bytes), nullptr);
  EXPECT_GE(bytes, size_t{4} << 20);
}

TEST_F(CudaRuntime, FreedBlocksAreReusedWithoutCudaMalloc) {
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000, 257}, DType::F32, gpu());
    first = t.raw_data();
  }
  const size_t mallocs = cuda_rt::memory_stats().device_mallocs;
  for (int step = 0; step < 10; ++step) {
    Tensor t = Tensor::empty({1000, 257}, DType::F32, gpu());
    EXPECT_EQ(t.raw_data(), first) << "step " << step;
    // A slightly smaller request falls in the same bin.
    Tensor u = Tensor::empty({1000 * 257 - 7}, DType::F32, gpu());
    EXPECT_NE(u.raw_data(), t.raw_data());
  }
  // The second (smaller) tensor needed one block of its own, once.
  EXPECT_LE(cuda_rt::memory_stats().device_mallocs, mallocs + 1);
}

TEST_F(CudaRuntime, StatisticsTrackLiveAndPeakBytes) {
  cuda_rt::synchronize();
  const size_t before = cuda_rt::memory_stats().allocated;
  cuda_rt::reset_peak_memory();
  {
    Tensor a = Tensor::empty({1 << 20}, DType::F32, gpu());
    Tensor b = Tensor::empty({3, 1000}, DType::BF16, gpu());
    const cuda_rt::MemoryStats live = cuda_rt::memory_stats();
    EXPECT_EQ(live.allocated, before + (size_t{4} << 20) + 6000);
    EXPECT_GE(live.reserved, live.allocated);
  }
  const cuda_rt::MemoryStats after = cuda_rt::memory_stats();
  EXPECT_EQ(after.allocated, before);
  EXPECT_EQ(after.peak_allocated, before + (size_t{4} << 20) + 6000);
  cuda_rt::reset_peak_memory();
  EXPECT_EQ(cuda_rt::memory_stats().peak_allocated, before);
}

TEST_F(CudaRuntime, EmptyCacheReturnsFreeBlocks) {
  { Tensor t = Tensor::empty({64 << 20}, DType::U8, gpu()); }
  const size_t cached = cuda_rt::memory_stats().reserved;
  cuda_rt::empty_cache();
  const cuda_rt::MemoryStats s = cuda_rt::memory_stats();
  EXPECT_LE(s.reserved + (size_t{64} << 20), cached);
  EXPECT_LE(s.allocated, s.reserved);
}

TEST_F(CudaRuntime, CopiesRoundTripBetweenHostAndDevice) {
  std::mt19937 rng(1);
  const Tensor host = random_f32({37, 19}, rng);
  const Tensor dev = host.to(gpu());
  EXPECT_TRUE(dev.device().is_cuda());
  const Tensor dev2 = dev.clone();  // device to device
  EXPECT_NE(dev2.raw_data(), dev.raw_data());
  EXPECT_TRUE(bitwise_equal(dev2.to(Device::cpu()), host));
  // A slice (an offset into a block) copies the right rows.
  const Tensor rows = dev.slice(5, 9).to(Device::cpu());
  EXPECT_TRUE(bitwise_equal(rows, host.slice(5, 9).clone()));
  const Tensor zeros = Tensor::zeros({123}, DType::BF16, gpu()).to(Device::cpu());
  for (int64_t i = 0; i < 123; ++i) EXPECT_EQ(zeros.item_as_double(i), 0.0);
  const std::vector<int64_t> ids{3, -1, 1LL << 40};
  EXPECT_EQ(to_host(Tensor::from_vector(ids, {3}).to(gpu())).data<int64_t>()[2], 1LL << 40);
}

// The Ulysses layouts: columns [c0, c0 + w) of every row of a [rows, cols] matrix into a packed [rows, w] one and
// back, as one strided copy, equal to the row-by-row copy on the host.
TEST_F(CudaRuntime, StridedCopyMovesEveryRowOnce) {
  std::mt19937 rng(2);
  const int64_t rows = 70001, cols = 24, c0 = 8, w = 12;  // more rows than any grid dimension
  const Tensor host = random_f32({rows, cols}, rng);
  const Tensor dev = host.to(gpu());
  Tensor packed = Tensor::zeros({rows, w}, DType::F32, gpu());
  DeviceAllocator& mem = device_allocator(DeviceType::CUDA);
  const size_t f = sizeof(float);
  mem.copy_2d(packed.raw_data(), w * f, static_cast<const char*>(dev.raw_data()) + c0 * f, cols * f, w * f,
              static_cast<size_t>(rows), gpu());
  Tensor want = Tensor::empty({rows, w}, DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < w; ++c) want.data<float>()[r * w + c] = host.data<float>()[r * cols + c0 + c];
  EXPECT_TRUE(bitwise_equal(packed.to(Device::cpu()), want));
  // Back into the other columns of a zeroed matrix: only those change.
  Tensor back = Tensor::zeros({rows, cols}, DType::F32, gpu());
  mem.copy_2d(static_cast<char*>(back.raw_data()) + 2 * f, cols * f, packed.raw_data(), w * f, w * f,
              static_cast<size_t>(rows), gpu());
  const Tensor got = back.to(Device::cpu());
  for (int64_t r : {int64_t{0}, rows / 2, rows - 1}) {
    EXPECT_EQ(got.data<float>()[r * cols + 1], 0.0f);
    EXPECT_EQ(got.data<float>()[r * cols + 2], want.data<float>()[r * w]);
    EXPECT_EQ(got.data<float>()[r * cols + 2 + w - 1], want.data<float>()[r * w + w - 1]);
    EXPECT_EQ(got.data<float>()[r * cols + 2 + w], 0.0f);
  }
}

TEST_F(CudaRuntime, EmptyTensorsNeedNoMemory) {
  Tensor t = Tensor::empty({0, 128}, DType::F32, gpu());
  EXPECT_EQ(t.numel(), 0);
  t.zero_();
  EXPECT_EQ(t.to(Device::cpu()).numel(), 0);
}

TEST_F(CudaRuntime, CopyToHostReadsDeviceMemory) {
  const Tensor dev = Tensor::from_vector<int32_t>({7, 8, 9}, {3}).to(gpu());
  int32_t values[3] = {};
  cuda_rt::copy_to_host(values, dev.raw_data(), sizeof values);
  EXPECT_EQ(values[0] + values[1] + values[2], 24);
}

TEST_F(CudaRuntime, CudaErrorsNameTheCallAndLocation) {
  try {
    VEOMNI_CUDA_CHECK(cudaSetDevice(-1));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cudaSetDevice(-1)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test_cuda_runtime.cc"), std::string::npos) << e.what();
  }
  // The failed call leaves the process usable.
  EXPECT_NO_THROW(cuda_rt::synchronize());
}

}  // namespace
