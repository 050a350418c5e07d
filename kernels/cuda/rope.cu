// CUDA RoPE. The tables follow the CPU backend's (and HF's) arithmetic: inv_freq and the product position * inv_freq
// in fp32, then cos/sin in double rounded once, so both backends give the same angles at large positions. Applying
// the rotation is one thread per 16-byte pack of frequencies of a (token, head) (one pair per thread on the fallback
// path), in place, f32 tables on f32 or bf16 activations.
#include <limits>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

// Interleaved M-RoPE streams of frequency j (see kernels/ops.h); plain RoPE reads stream 0.
struct Sections {
  int64_t h = 0, w = 0;
  bool multi_stream = false;
};

__device__ __forceinline__ int64_t stream_of(int64_t j, Sections sec) {
  if (!sec.multi_stream) return 0;
  if (j % 3 == 1 && j < 3 * sec.h) return 1;
  if (j % 3 == 2 && j < 3 * sec.w) return 2;
  return 0;
}

template <typename P>
__global__ void tables_kernel(const P* positions, int64_t seq_len, int64_t head_dim, float base, Sections sec,
                              float* cos_out, float* sin_out) {
  const int64_t half = head_dim / 2;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < seq_len * half;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = idx / half;
    const int64_t j = idx % half;
    // HF: 1 / (theta ** (arange(0, D, 2).float() / D)), every step in fp32.
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    const float inv_freq = 1.0f / static_cast<float>(pow(static_cast<double>(base), static_cast<double>(exponent)));
    const float p = static_cast<float>(positions[stream_of(j, sec) * seq_len + s]);
    const double angle = static_cast<double>(__fmul_rn(p, inv_freq));
    const float c = static_cast<float>(::cos(angle));
    const float sn = static_cast<float>(::sin(angle));
    cos_out[s * head_dim + j] = cos_out[s * head_dim + j + half] = c;
    sin_out[s * head_dim + j] = sin_out[s * head_dim + j + half] = sn;
  }
}

// Forward: x = x*cos + rotate_half(x)*sin with rotate_half(x) = cat(-x2, x1).
// Inverse (the transpose, for backward): dx = dy*cos + rotate_half^T(dy*sin), rotate_half^T(u) = cat(u2, -u1).
template <bool kInverse>
__global__ void apply_kernel(Floats x, const float* cos_table, const float* sin_table, int64_t seq_len,
                             int64_t heads, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t pairs = seq_len * heads * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < pairs;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half;
    const int64_t row = idx / half;  // s * heads + h
    const int64_t s = row / heads;
    const float* c = cos_table + s * head_dim;
    const float* sn = sin_table + s * head_dim;
    const int64_t lo = row * head_dim + i;
    const int64_t hi = lo + half;
    const float a = x[lo];
    const float b = x[hi];
    if (kInverse) {
      x.store(lo, a * c[i] + b * sn[i + half]);
      x.store(hi, b * c[i + half] - a * sn[i]);
    } else {
      x.store(lo, a * c[i] + (-b) * sn[i]);
      x.store(hi, b * c[i + half] + a * sn[i + half]);
    }
  }
}


// The rotation on 16-byte packs: thread q owns frequencies [c * P, c * P + P) of row (token, head) = q / half_packs,
// c = q % half_packs, i.e. one pack of each half of the head, and the same columns of the four table slices. Taken
// when half the head is a whole number of packs, x and the tables start 16-byte aligned and the pack count fits 32
// bits (32-bit divisions once per pack instead of 64-bit ones per pair). Same formulas as apply_kernel.
template <typename T, bool kInverse>
__global__ void apply_packed(T* x, const float* cos_table, const float* sin_table, uint32_t packs, uint32_t half_packs,
                             uint32_t heads, int head_dim) {
  constexpr int P = packed::kPer16<T>;
  const int half = head_dim / 2;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < packs; q += gridDim.x * blockDim.x) {
    const uint32_t row = q / half_packs;
    const int i = static_cast<int>(q - row * half_packs) * P;
    const uint32_t s = row / heads;
    const float* c = cos_table + static_cast<size_t>(s) * head_dim;
    const float* sn = sin_table + static_cast<size_t>(s) * head_dim;
    T* lo = x + static_cast<size_t>(row) * head_dim + i;
    T* hi = lo + half;
    float a[P], b[P], c_lo[P], c_hi[P], s_lo[P], s_hi[P], out_lo[P], out_hi[P];
    packed::load<T, P>(lo, a);
    packed::load<T, P>(hi, b);
    packed::load<float, P>(c + i, c_lo);
    packed::load<float, P>(c + i + half, c_hi);
    packed::load<float, P>(sn + i, s_lo);
    packed::load<float, P>(sn + i + half, s_hi);
#pragma unroll
    for (int j = 0; j < P; ++j) {
      if (kInverse) {
        out_lo[j] = a[j] * c_lo[j] + b[j] * s_hi[j];
        out_hi[j] = b[j] * c_hi[j] - a[j] * s_lo[j];
      } else {
        out_lo[j] = a[j] * c_lo[j] + (-b[j]) * s_lo[j];
        out_hi[j] = b[j] * c_hi[j] + a[j] * s_hi[j];
      }
    }
    packed::store<T, P>(lo, out_lo);
    packed::store<T, P>(hi, out_hi);
  }
}

template <bool kInverse>
bool apply_vec(Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t seq_len = x.dim(0), heads = x.dim(1), head_dim = x.dim(2);
  const int64_t per_pack = x.dtype() == DType::BF16 ? 8 : 4;
  const int64_t half = head_dim / 2;
  if (half % per_pack != 0 || !packed::aligned16(x.raw_data()) || !packed::aligned16(cos.raw_data()) ||
      !packed::aligned16(sin.raw_data()))
    return false;
  const int64_t packs = seq_len * heads * (half / per_pack);
  if (packs > std::numeric_limits<int32_t>::max()) return false;
  constexpr int kThreads = 256;
  packed::with_float_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    apply_packed<T, kInverse><<<grid_for(packs, kThreads), kThreads, 0, cuda_rt::stream()>>>(
        data_of<T>(x), data_of<const float>(cos), data_of<const float>(sin), static_cast<uint32_t>(packs),
        static_cast<uint32_t>(half / per_pack), static_cast<uint32_t>(heads), static_cast<int>(head_dim));
    VEOMNI_CUDA_LAUNCH_CHECK();
  });
  return true;
}

}  // namespace

void rope_tables(const Tensor& positions, int64_t head_dim, double theta, const std::vector<int64_t>& mrope_section,
                 Tensor& cos, Tensor& sin) {
  const int64_t seq_len = positions.dim(-1);
  const int64_t work = seq_len * (head_dim / 2);
  if (work == 0) return;
  Sections sec;
  sec.multi_stream = positions.ndim() == 2;
  if (sec.multi_stream) {
    sec.h = mrope_section[1];
    sec.w = mrope_section[2];
  }
  const float base = static_cast<float>(theta);
  constexpr int kThreads = 256;
  const cudaStream_t stream = cuda_rt::stream();
  if (positions.dtype() == DType::F32)
    tables_kernel<<<grid_for(work, kThreads), kThreads, 0, stream>>>(
        data_of<float>(positions), seq_len, head_dim, base, sec, data_of<float>(cos), data_of<float>(sin));
  else
    tables_kernel<<<grid_for(work, kThreads), kThreads, 0, stream>>>(
        data_of<int64_t>(positions), seq_len, head_dim, base, sec, data_of<float>(cos), data_of<float>(sin));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  const int64_t seq_len = x.dim(0), heads = x.dim(1), head_dim = x.dim(2);
  const int64_t pairs = seq_len * heads * (head_dim / 2);
  if (pairs == 0) return;
  if (inverse ? apply_vec<true>(x, cos, sin) : apply_vec<false>(x, cos, sin)) return;
  // Fallback: half a head that is not a whole number of packs (head_dim not a multiple of 16 bf16 / 8 f32), or x or
  // a table off a 16-byte boundary.
  constexpr int kThreads = 256;
  const cudaStream_t stream = cuda_rt::stream();
  if (inverse)
    apply_kernel<true><<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(
        floats_of(x), data_of<float>(cos), data_of<float>(sin), seq_len, heads, head_dim);
  else
    apply_kernel<false><<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(
        floats_of(x), data_of<float>(cos), data_of<float>(sin), seq_len, heads, head_dim);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
