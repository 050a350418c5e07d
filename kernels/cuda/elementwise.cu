// CUDA elementwise ops, reductions and dtype casts. Maps move 16 bytes per load where the pointers allow it; sums
// accumulate in double over a grid whose size depends only on the element count, then add the block sums in a fixed
// tree, so a reduction returns the same double every run.
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return __float2half_rn(v);
}

// P consecutive elements moved by one load or store.
template <typename T, int P>
struct alignas(sizeof(T) * P) Vec {
  T v[P];
};

// Elements per vector step when x of TX and y of TY are both read or written: 16 bytes of the wider type.
template <typename TX, typename TY>
constexpr int pack_of() {
  return 16 / static_cast<int>(sizeof(TX) > sizeof(TY) ? sizeof(TX) : sizeof(TY));
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Vectors per thread per step of the vector loop: both are loaded before either is stored, so a thread keeps two
// 16-byte loads in flight and an activation-sized map (4M bf16: 512Ki vectors) fits in one wave of CTAs.
constexpr int kVectorsPerStep = 2;

// y[i] = op(x[i], y[i]) for i < n. x and y may be the same array (scale_): a thread reads and writes only its own
// elements, so loading both vectors first is safe. With P > 1 the first n/P*P elements go in vectors (pointers
// aligned by the caller) and the tail one by one.
template <typename TX, typename TY, int P, bool kReadsX, bool kReadsY, typename Op>
__global__ void map_kernel(const TX* x, TY* y, int64_t n, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t packs = n / P;
  for (int64_t p0 = first; p0 < packs; p0 += stride * kVectorsPerStep) {
    Vec<TX, P> xv[kVectorsPerStep] = {};
    Vec<TY, P> yv[kVectorsPerStep] = {};
#pragma unroll
    for (int u = 0; u < kVectorsPerStep; ++u) {
      const int64_t p = p0 + u * stride;
      if (p >= packs) break;
      if constexpr (kReadsX) xv[u] = reinterpret_cast<const Vec<TX, P>*>(x)[p];
      if constexpr (kReadsY) yv[u] = reinterpret_cast<const Vec<TY, P>*>(y)[p];
    }
#pragma unroll
    for (int u = 0; u < kVectorsPerStep; ++u) {
      const int64_t p = p0 + u * stride;
      if (p >= packs) break;
#pragma unroll
      for (int j = 0; j < P; ++j) yv[u].v[j] = from_float<TY>(op(to_float(xv[u].v[j]), to_float(yv[u].v[j])));
      reinterpret_cast<Vec<TY, P>*>(y)[p] = yv[u];
    }
  }
  for (int64_t i = packs * P + first; i < n; i += stride) {
    const float xi = kReadsX ? to_float(x[i]) : 0.0f;
    const float yi = kReadsY ? to_float(y[i]) : 0.0f;
    y[i] = from_float<TY>(op(xi, yi));
  }
}

template <typename TX, typename TY, bool kReadsX, bool kReadsY, typename Op>
void map(const void* x, void* y, int64_t n, Op op) {
  if (n == 0) return;
  constexpr int kPack = pack_of<TX, TY>();
  const bool vectorised = aligned(x, sizeof(TX) * kPack) && aligned(y, sizeof(TY) * kPack);
  const auto* xp = static_cast<const TX*>(x);
  auto* yp = static_cast<TY*>(y);
  const cudaStream_t stream = cuda_rt::stream();
  if (vectorised)
    map_kernel<TX, TY, kPack, kReadsX, kReadsY>
        <<<grid_for((n / kPack + kVectorsPerStep - 1) / kVectorsPerStep, kThreads), kThreads, 0, stream>>>(xp, yp, n,
                                                                                                          op);
  else
    map_kernel<TX, TY, 1, kReadsX, kReadsY><<<grid_for(n, kThreads), kThreads, 0, stream>>>(xp, yp, n, op);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

// Calls f with a value of the C++ element type of a float dtype (f32, bf16 or f16).
template <typename F>
void with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32:
      return f(float{});
    case DType::BF16:
      return f(__nv_bfloat16{});
    case DType::F16:
      return f(__half{});
    default:
      throw Error(fmt::format("CUDA elementwise op on {} (expected f32, bf16 or f16)", dtype_name(dtype)));
  }
}

struct AddScaled {
  float alpha;
  __device__ float operator()(float x, float y) const { return y + alpha * x; }
};
struct Scale {
  float factor;
  __device__ float operator()(float x, float) const { return x * factor; }
};
struct Constant {
  float value;
  __device__ float operator()(float, float) const { return value; }
};
struct Convert {
  __device__ float operator()(float x, float) const { return x; }
};

// ---------------------------------------------------------------- reductions

constexpr int kMaxReduceBlocks = 1024;

// A grid that depends on n alone: each thread sees at least 8 vectors before the block sums.
int reduce_blocks(int64_t packs) {
  return static_cast<int>(std::clamp<int64_t>((packs + kThreads * 8 - 1) / (kThreads * 8), 1, kMaxReduceBlocks));
}

template <typename T, int P, bool kSquare>
__global__ void partial_sums(const T* x, int64_t n, double* partial) {
  __shared__ double scratch[kWarp];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t packs = n / P;
  double acc = 0.0;
  for (int64_t p = first; p < packs; p += stride) {
    const Vec<T, P> v = reinterpret_cast<const Vec<T, P>*>(x)[p];
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const double d = to_float(v.v[j]);
      acc += kSquare ? d * d : d;
    }
  }
  for (int64_t i = packs * P + first; i < n; i += stride) {
    const double d = to_float(x[i]);
    acc += kSquare ? d * d : d;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

template <bool kSquare>
double reduce(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  // Block sums, then the total, as doubles (8-byte elements).
  const Tensor partial = Tensor::empty({kMaxReduceBlocks + 1}, DType::I64, x.device());
  double* partial_p = data_of<double>(partial);
  double* total_p = partial_p + kMaxReduceBlocks;
  const cudaStream_t stream = cuda_rt::stream();
  with_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kPack = 16 / sizeof(T);
    const T* xp = data_of<T>(x);
    if (aligned(xp, sizeof(T) * kPack)) {
      const int blocks = reduce_blocks(n / kPack);
      partial_sums<T, kPack, kSquare><<<blocks, kThreads, 0, stream>>>(xp, n, partial_p);
      VEOMNI_CUDA_LAUNCH_CHECK();
      sum_of_partials<double><<<1, 1024, 0, stream>>>(partial_p, blocks, total_p);
    } else {
      const int blocks = reduce_blocks(n);
      partial_sums<T, 1, kSquare><<<blocks, kThreads, 0, stream>>>(xp, n, partial_p);
      VEOMNI_CUDA_LAUNCH_CHECK();
      sum_of_partials<double><<<1, 1024, 0, stream>>>(partial_p, blocks, total_p);
    }
    VEOMNI_CUDA_LAUNCH_CHECK();
  });
  double total = 0.0;
  cuda_rt::copy_to_host(&total, total_p, sizeof total);
  return total;
}

}  // namespace

double sum(const Tensor& x) { return reduce<false>(x); }

double sum_squares(const Tensor& x) { return reduce<true>(x); }

void add_(Tensor& dst, const Tensor& src, float alpha) {
  // Mixed dtypes too: bf16 gradients add into f32 accumulators.
  with_type(src.dtype(), [&](auto src_tag) {
    with_type(dst.dtype(), [&](auto dst_tag) {
      using TS = decltype(src_tag);
      using TD = decltype(dst_tag);
      map<TS, TD, true, true>(src.raw_data(), dst.raw_data(), dst.numel(), AddScaled{alpha});
    });
  });
}

void scale_(Tensor& x, float factor) {
  with_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    map<T, T, true, false>(x.raw_data(), x.raw_data(), x.numel(), Scale{factor});
  });
}

void fill_(Tensor& x, float value) {
  with_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    map<T, T, false, false>(x.raw_data(), x.raw_data(), x.numel(), Constant{value});
  });
}

void cast(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    if (src.nbytes())
      VEOMNI_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                        cuda_rt::stream()));
    return;
  }
  with_type(src.dtype(), [&](auto src_tag) {
    with_type(dst.dtype(), [&](auto dst_tag) {
      using TS = decltype(src_tag);
      using TD = decltype(dst_tag);
      map<TS, TD, true, false>(src.raw_data(), dst.raw_data(), src.numel(), Convert{});
    });
  });
}

}  // namespace veomni::ops::cuda
