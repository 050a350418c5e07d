// CUDA RMSNorm: a group of lanes per row for y, rstd and dx, reading each row once in 16-byte packs; the weight
// gradient is a column sum over all rows, taken in fixed-order partial sums (no atomics) so it is deterministic, and
// skipped for a frozen weight (dweight undefined).
#include <type_traits>

#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

__device__ __forceinline__ int64_t warp_row() {
  return blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
}

__global__ void forward_rows(ConstFloats x, ConstFloats w, float eps, Floats y, float* rstd, int64_t n, int64_t d) {
  const int64_t row = warp_row();
  if (row >= n) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = row * d;
  float sq = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) {
    const float v = x[base + i];
    sq += v * v;
  }
  sq = warp_sum(sq);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(sq) / static_cast<double>(d) + eps));
  if (lane == 0) rstd[row] = r;
  // HF's order of roundings: (x * rstd) first, then the weight.
  for (int64_t i = lane; i < d; i += kWarp) y.store(base + i, (x[base + i] * r) * w[i]);
}

// dx = r * (w*dy) - r^3 * x * sum(w*dy*x) / D (+ residual when it has data).
__global__ void backward_rows(ConstFloats dy, ConstFloats x, ConstFloats w, const float* rstd, ConstFloats residual,
                              Floats dx, int64_t n, int64_t d) {
  const int64_t row = warp_row();
  if (row >= n) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = row * d;
  float dot = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) dot += w[i] * dy[base + i] * x[base + i];
  dot = warp_sum(dot);
  const float r = rstd[row];
  const double rd = r;
  const float coef = static_cast<float>(rd * rd * rd * static_cast<double>(dot) / static_cast<double>(d));
  for (int64_t i = lane; i < d; i += kWarp) {
    const float g = r * (w[i] * dy[base + i]) - coef * x[base + i];
    dx.store(base + i, residual.data ? g + residual[base + i] : g);
  }
}

constexpr int kColumns = 32;    // columns per block of the dweight pass (one per lane)
constexpr int kRowLanes = 8;    // rows read at once per block
constexpr int64_t kMaxChunks = 512;

// partial[chunk, c] = sum over the chunk's rows of dy[r, c] * x[r, c] * rstd[r].
__global__ void dweight_partials(ConstFloats dy, ConstFloats x, const float* rstd, int64_t n, int64_t d,
                                 int64_t rows_per_chunk, float* partial) {
  __shared__ float sums[kRowLanes][kColumns];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColumns) + threadIdx.x;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = min(n, begin + rows_per_chunk);
  float acc = 0.0f;
  if (col < d)
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) acc += dy[r * d + col] * x[r * d + col] * rstd[r];
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || col >= d) return;
  float total = 0.0f;
  for (int j = 0; j < kRowLanes; ++j) total += sums[j][threadIdx.x];
  partial[blockIdx.y * d + col] = total;
}

// dweight[c] += sum over chunks of partial[chunk, c], in chunk order.
__global__ void dweight_accumulate(const float* partial, int64_t chunks, int64_t d, Floats dweight) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < d;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double total = 0.0;
    for (int64_t j = 0; j < chunks; ++j) total += partial[j * d + c];
    dweight.store(c, static_cast<float>(static_cast<double>(dweight[c]) + total));
  }
}

// ---------------------------------------------------------------- vector path
//
// Taken when the row length is a whole number of 16-byte packs, every tensor starts 16-byte aligned and the
// activations (x, y / dy, x, dx) share one dtype T; the weight may be f32 or bf16 (TW). A group of kLanes lanes owns
// one row at a time; lane l holds packs l, l + kLanes, ... (kPacks of them) in registers, so a row is read from
// memory once. kLanes = 16 for short rows (the per-head q/k norms: 128 bf16 = 16 packs, two rows per warp) and 32
// otherwise. The reductions inside a row run per lane over its packs, then over the group's lanes by an xor tree: a
// different order from the scalar path's (lane-strided elements), fixed all the same.

constexpr int kThreads = kWarpsPerBlock * kWarp;

// Rows [first, first + groups per warp) of a warp: its own row and whether that row exists. The first row is the same
// for every lane of the warp, so a warp leaves (or loops) as a whole and its shuffles see every lane.
template <int kLanes>
struct RowSlot {
  static constexpr int kGroupsPerWarp = kWarp / kLanes;
  int lane;  // lane within the row's group
  int sub;   // the group's place in its warp
  __device__ RowSlot()
      : lane(static_cast<int>(threadIdx.x) % kLanes), sub(static_cast<int>(threadIdx.x) % kWarp / kLanes) {}
  __device__ int64_t first_of(int64_t warp) const { return warp * kGroupsPerWarp; }
};

template <typename T, typename TW, int kLanes, int kPacks>
__global__ void __launch_bounds__(kThreads) forward_rows_packed(const T* x, const TW* w, float eps, T* y, float* rstd,
                                                                int64_t n, int d) {
  constexpr int P = packed::kPer16<T>;
  using Pk = packed::Pack<T, P>;
  let_next_kernel_launch();
  wait_for_previous_kernel();
  const RowSlot<kLanes> slot;
  const int64_t first = slot.first_of(blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp);
  if (first >= n) return;  // the whole warp
  const int64_t row = first + slot.sub;
  const bool valid = row < n;
  const int packs = d / P;
  const Pk* xrow = reinterpret_cast<const Pk*>(x + (valid ? row * d : 0));
  Pk xs[kPacks] = {};
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int p = slot.lane + k * kLanes;
    if (valid && p < packs) {
      xs[k] = xrow[p];
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const float v = packed::as_float(xs[k].v[j]);
        sq += v * v;
      }
    }
  }
  sq = packed::group_sum<kLanes>(sq);
  if (!valid) return;  // after the group's last shuffle
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(sq) / static_cast<double>(d) + eps));
  if (slot.lane == 0) rstd[row] = r;
  T* yrow = y + row * d;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int p = slot.lane + k * kLanes;
    if (p >= packs) continue;
    float wv[P], out[P];
    packed::load<TW, P>(w + p * P, wv);
    // HF's order of roundings: (x * rstd) first, then the weight.
#pragma unroll
    for (int j = 0; j < P; ++j) out[j] = (packed::as_float(xs[k].v[j]) * r) * wv[j];
    packed::store<T, P>(yrow + p * P, out);
  }
}

// The backward's column sums: thread t of the block holds acc (its P sums per pack slot); partial[block, c] gets the
// block's sum of column c, its groups added in group order.
template <int kLanes, int kPacks, int P>
__device__ __forceinline__ void block_column_sums(const float (&acc)[kPacks][P], int d, float* partial) {
  // Column sums over the block, one round per pack slot k: thread t stages its P sums at t * P, so column c of the
  // round (pack slot c / P of every group, element c % P) sits at g * kLanes * P + c for group g.
  constexpr int kGroupsPerBlock = kThreads / kLanes;
  static_assert(kLanes * P <= kThreads, "one thread per column of a round");
  __shared__ float stage[kThreads * P];
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
#pragma unroll
    for (int j = 0; j < P; ++j) stage[threadIdx.x * P + j] = acc[k][j];
    __syncthreads();
    const int c = threadIdx.x;
    const int col = k * kLanes * P + c;
    if (c < kLanes * P && col < d) {
      float total = 0.0f;
      for (int g = 0; g < kGroupsPerBlock; ++g) total += stage[g * kLanes * P + c];
      partial[blockIdx.x * static_cast<int64_t>(d) + col] = total;
    }
    __syncthreads();  // the next round overwrites stage
  }
}

// dx as backward_rows computes it; in the same pass each lane adds dy * x * rstd of its columns over the rows its
// group visits (rows group, group + groups in the grid, ...), the block adds its groups' sums in group order, and
// partial[block, c] gets the block's column sum: dweight_accumulate then adds the blocks in order. dy and x are read
// once. Without kWeightGrad (a frozen weight) only dx is computed: no column sums, fewer registers. A non-null
// residual is added to dx as it is stored.
template <typename T, typename TW, int kLanes, int kPacks, bool kWeightGrad>
__global__ void __launch_bounds__(kThreads)
    backward_rows_packed(const T* dy, const T* x, const TW* w, const float* rstd, const T* residual, T* dx, int64_t n,
                         int d, float* partial) {
  constexpr int P = packed::kPer16<T>;
  using Pk = packed::Pack<T, P>;
  const RowSlot<kLanes> slot;
  const int packs = d / P;
  const int64_t warps_in_grid = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  float acc[kWeightGrad ? kPacks : 1][P] = {};
  for (int64_t first = slot.first_of(blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp);
       first < n; first += slot.first_of(warps_in_grid)) {
    const int64_t row = first + slot.sub;
    const bool valid = row < n;
    const int64_t base = valid ? row * d : 0;
    const Pk* dyrow = reinterpret_cast<const Pk*>(dy + base);
    const Pk* xrow = reinterpret_cast<const Pk*>(x + base);
    Pk dys[kPacks] = {}, xs[kPacks] = {};
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = slot.lane + k * kLanes;
      if (valid && p < packs) {
        dys[k] = dyrow[p];
        xs[k] = xrow[p];
        float wv[P];
        packed::load<TW, P>(w + p * P, wv);
#pragma unroll
        for (int j = 0; j < P; ++j) dot += wv[j] * packed::as_float(dys[k].v[j]) * packed::as_float(xs[k].v[j]);
      }
    }
    dot = packed::group_sum<kLanes>(dot);
    if (!valid) continue;  // the warp's last row slot; no shuffle follows in this iteration
    const float r = rstd[row];
    const double rd = r;
    const float coef = static_cast<float>(rd * rd * rd * static_cast<double>(dot) / static_cast<double>(d));
    T* dxrow = dx + base;
    const Pk* resrow = residual ? reinterpret_cast<const Pk*>(residual + base) : nullptr;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = slot.lane + k * kLanes;
      if (p >= packs) continue;
      float wv[P], out[P];
      packed::load<TW, P>(w + p * P, wv);
      Pk res = {};
      if (resrow) res = resrow[p];
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const float g = packed::as_float(dys[k].v[j]);
        const float xv = packed::as_float(xs[k].v[j]);
        out[j] = r * (wv[j] * g) - coef * xv;
        if (resrow) out[j] += packed::as_float(res.v[j]);
        if constexpr (kWeightGrad) acc[k][j] += g * xv * r;
      }
      packed::store<T, P>(dxrow + p * P, out);
    }
  }
  if constexpr (kWeightGrad) block_column_sums<kLanes, kPacks, P>(acc, d, partial);
}

// Calls f(lanes, packs) (std::integral_constant values) with the group width and the packs per lane that hold a row of
// `packs` 16-byte packs; false (f not called) when a row needs more than kMaxPacks per lane, i.e. more registers than
// the kernel should hold: such rows take the scalar path.
template <int kMaxPacks, typename F>
bool with_row_shape(int64_t packs, F&& f) {
  using std::integral_constant;
  if (packs <= 16) return f(integral_constant<int, 16>{}, integral_constant<int, 1>{}), true;
  if (packs <= 32) return f(integral_constant<int, 32>{}, integral_constant<int, 1>{}), true;
  if (packs <= 64) return f(integral_constant<int, 32>{}, integral_constant<int, 2>{}), true;
  if (packs <= 128) return f(integral_constant<int, 32>{}, integral_constant<int, 4>{}), true;
  if (packs <= 256) return f(integral_constant<int, 32>{}, integral_constant<int, 8>{}), true;
  if constexpr (kMaxPacks >= 16)
    if (packs <= 512) return f(integral_constant<int, 32>{}, integral_constant<int, 16>{}), true;
  return false;
}

// Whether the vector path can take these tensors: one activation dtype, rows of whole packs, 16-byte aligned starts.
bool packable(const std::initializer_list<const Tensor*>& activations, const Tensor& weight, int64_t d) {
  const DType dtype = activations.begin()[0]->dtype();
  const int64_t per_pack = dtype == DType::BF16 ? 8 : 4;
  if (d % per_pack != 0 || !packed::aligned16(weight.raw_data())) return false;
  for (const Tensor* t : activations)
    if (t->dtype() != dtype || !packed::aligned16(t->raw_data())) return false;
  return true;
}

// Rows of the forward pass: one per group, so n / groups-per-block blocks.
unsigned forward_blocks(int64_t n, int lanes) {
  const int64_t rows_per_block = kWarpsPerBlock * (kWarp / lanes);
  return static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
}

// Blocks of the backward pass: every block writes d column sums (8 bytes each, written and read back), so the grid
// stays small next to the rows it reads (at most ~1/16 of their bytes), but no smaller than two blocks per SM of a
// 132-SM part to keep HBM busy. Depends on n and the dtype only, so the summation order is the same every run.
unsigned backward_blocks(int64_t n, int lanes, int64_t elem_bytes) {
  constexpr int64_t kMinBlocks = 2 * 132;
  const int64_t rows_per_block = kWarpsPerBlock * (kWarp / lanes);
  const int64_t most = (n + rows_per_block - 1) / rows_per_block;
  // At most kMaxChunks: dweight_accumulate adds the blocks' partials one after the other per column, and with d = 128
  // (the per-head norms) only 128 threads do it, so thousands of blocks made that pass slower than the rows' pass
  // (92 us a call against 51 before, measured on an H100 in training).
  const int64_t by_traffic = std::min<int64_t>(kMaxChunks, 3 * elem_bytes * n / 128);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(most, std::max(kMinBlocks, by_traffic))));
}

bool forward_packed(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (!packable({&x, &y}, weight, d)) return false;
  const int64_t packs = d / (x.dtype() == DType::BF16 ? 8 : 4);
  bool launched = false;
  packed::with_float_type(x.dtype(), [&](auto t_tag) {
    packed::with_float_type(weight.dtype(), [&](auto w_tag) {
      using T = decltype(t_tag);
      using TW = decltype(w_tag);
      launched = with_row_shape<16>(packs, [&](auto lanes, auto per_lane) {
        launch_overlapped(forward_rows_packed<T, TW, decltype(lanes)::value, decltype(per_lane)::value>,
                          dim3(forward_blocks(n, decltype(lanes)::value)), dim3(kThreads), 0, data_of<const T>(x),
                          data_of<const TW>(weight), eps, data_of<T>(y), data_of<float>(rstd), n,
                          static_cast<int>(d));
      });
    });
  });
  return launched;
}

// Backward rows hold dy and x (kPacks packs each) and, with a weight gradient, the column sums (kPacks * P floats): at
// most 8 packs a lane then, 16 without (a frozen weight: dweight undefined).
bool backward_packed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                     Tensor& dweight, const Tensor& residual) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (!packable({&dy, &x, &dx}, weight, d)) return false;
  if (residual.defined() && (residual.dtype() != x.dtype() || !packed::aligned16(residual.raw_data()))) return false;
  const int64_t elem_bytes = x.dtype() == DType::BF16 ? 2 : 4;
  const int64_t packs = d * elem_bytes / 16;
  const cudaStream_t stream = cuda_rt::stream();
  bool launched = false;
  packed::with_float_type(x.dtype(), [&](auto t_tag) {
    packed::with_float_type(weight.dtype(), [&](auto w_tag) {
      using T = decltype(t_tag);
      using TW = decltype(w_tag);
      const T* residual_data = residual.defined() ? data_of<const T>(residual) : nullptr;
      if (!dweight.defined()) {
        launched = with_row_shape<16>(packs, [&](auto lanes, auto per_lane) {
          backward_rows_packed<T, TW, decltype(lanes)::value, decltype(per_lane)::value, false>
              <<<forward_blocks(n, decltype(lanes)::value), kThreads, 0, stream>>>(
                  data_of<const T>(dy), data_of<const T>(x), data_of<const TW>(weight), data_of<float>(rstd),
                  residual_data, data_of<T>(dx), n, static_cast<int>(d), nullptr);
        });
        return;
      }
      launched = with_row_shape<8>(packs, [&](auto lanes, auto per_lane) {
        const unsigned blocks = backward_blocks(n, decltype(lanes)::value, elem_bytes);
        Tensor partial = Tensor::empty({blocks, d}, DType::F32, x.device());
        backward_rows_packed<T, TW, decltype(lanes)::value, decltype(per_lane)::value, true>
            <<<blocks, kThreads, 0, stream>>>(data_of<const T>(dy), data_of<const T>(x), data_of<const TW>(weight),
                                              data_of<float>(rstd), residual_data, data_of<T>(dx), n,
                                              static_cast<int>(d), data_of<float>(partial));
        VEOMNI_CUDA_LAUNCH_CHECK();
        dweight_accumulate<<<grid_for(d, 256), 256, 0, stream>>>(data_of<float>(partial), blocks, d,
                                                                 floats_of(dweight));
      });
    });
  });
  return launched;
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (n == 0) return;
  if (forward_packed(x, weight, eps, y, rstd)) {
    VEOMNI_CUDA_LAUNCH_CHECK();
    return;
  }
  // Scalar path: rows of odd lengths, slices off a 16-byte boundary, mixed activation dtypes, very long rows.
  forward_rows<<<row_blocks(n), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      floats_of(x), floats_of(weight), eps, floats_of(y), data_of<float>(rstd), n, d);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight, const Tensor& residual) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (n == 0 || d == 0) return;
  if (backward_packed(dy, x, weight, rstd, dx, dweight, residual)) {
    VEOMNI_CUDA_LAUNCH_CHECK();
    return;
  }
  // Scalar path (as in rmsnorm_forward): dx by rows, then the column sums in a second pass over dy and x.
  const cudaStream_t stream = cuda_rt::stream();
  backward_rows<<<row_blocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(
      floats_of(dy), floats_of(x), floats_of(weight), data_of<float>(rstd), floats_of(residual), floats_of(dx), n, d);
  VEOMNI_CUDA_LAUNCH_CHECK();
  if (!dweight.defined()) return;  // a frozen weight

  const int64_t chunks = std::min<int64_t>(kMaxChunks, (n + 63) / 64);
  const int64_t rows_per_chunk = (n + chunks - 1) / chunks;
  Tensor partial = Tensor::empty({chunks, d}, DType::F32, x.device());
  const dim3 grid(static_cast<unsigned>((d + kColumns - 1) / kColumns), static_cast<unsigned>(chunks));
  dweight_partials<<<grid, dim3(kColumns, kRowLanes), 0, stream>>>(floats_of(dy), floats_of(x), data_of<float>(rstd),
                                                                   n, d, rows_per_chunk, data_of<float>(partial));
  VEOMNI_CUDA_LAUNCH_CHECK();
  dweight_accumulate<<<grid_for(d, 256), 256, 0, stream>>>(data_of<float>(partial), chunks, d, floats_of(dweight));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
