// CUDA encoder ops: LayerNorm (one warp per row; weight and bias gradients as fixed-order column sums over row
// chunks), GELU and bias add (one thread per element), im2col / col2im (one thread per written element, so col2im
// gathers its terms instead of scattering them: deterministic, no atomics). Math in fp32.
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = 8;

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

__device__ __forceinline__ int64_t warp_row() {
  return blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
}

__device__ __forceinline__ int64_t first_index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---------------------------------------------------------------- LayerNorm

// Two passes over the row (mean, then the centred squares), both summed by the warp in fp32.
__global__ void layernorm_rows(ConstFloats x, ConstFloats w, ConstFloats b, float eps, Floats y, float* mean,
                               float* rstd, int64_t n, int64_t d) {
  const int64_t row = warp_row();
  if (row >= n) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = row * d;
  float total = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) total += x[base + i];
  const float mu = warp_sum(total) / static_cast<float>(d);
  float sq = 0.0f;
  for (int64_t i = lane; i < d; i += kWarp) {
    const float c = x[base + i] - mu;
    sq += c * c;
  }
  const float r = rsqrtf(warp_sum(sq) / static_cast<float>(d) + eps);
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = r;
  }
  for (int64_t i = lane; i < d; i += kWarp) y.store(base + i, (x[base + i] - mu) * r * w[i] + b[i]);
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
__global__ void layernorm_dx_rows(ConstFloats dy, ConstFloats x, ConstFloats w, const float* mean, const float* rstd,
                                  Floats dx, int64_t n, int64_t d) {
  const int64_t row = warp_row();
  if (row >= n) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = row * d;
  const float mu = mean[row], r = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  // g is rounded to float (__fmul_rn) before each use: contracted into an FMA in one place and not in the other,
  // g - mean(g) would leave the product's rounding error where the exact result is 0 (e.g. a row of width 1).
  for (int64_t i = lane; i < d; i += kWarp) {
    const float g = __fmul_rn(dy[base + i], w[i]);
    sum_g += g;
    sum_gx += g * (x[base + i] - mu) * r;
  }
  const float mean_g = warp_sum(sum_g) / static_cast<float>(d);
  const float mean_gx = warp_sum(sum_gx) / static_cast<float>(d);
  for (int64_t i = lane; i < d; i += kWarp) {
    const float xhat = (x[base + i] - mu) * r;
    dx.store(base + i, r * (__fmul_rn(dy[base + i], w[i]) - mean_g - xhat * mean_gx));
  }
}

// ---------------------------------------------------------------- column sums (dweight, dbias)

constexpr int kColumns = 32;  // columns per block (one per lane)
constexpr int kRowLanes = 8;  // rows read at once per block
constexpr int64_t kMaxChunks = 512;

// Row chunks of a column sum: their count depends only on the row count, so the summation order is fixed.
struct Chunks {
  int64_t count;
  int64_t rows_each;
};

Chunks chunks_for(int64_t rows) {
  const int64_t count = std::clamp<int64_t>((rows + 63) / 64, 1, kMaxChunks);
  return {count, (rows + count - 1) / count};
}

// dbias_part[chunk, c] = sum over the chunk's rows of dy[r, c]; with mean/rstd also
// dweight_part[chunk, c] = sum of dy[r, c] * xhat[r, c].
__global__ void column_partials(ConstFloats dy, ConstFloats x, const float* mean, const float* rstd, int64_t n,
                                int64_t d, int64_t rows_per_chunk, float* dweight_part, float* dbias_part) {
  __shared__ float wsum[kRowLanes][kColumns];
  __shared__ float bsum[kRowLanes][kColumns];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColumns) + threadIdx.x;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = min(n, begin + rows_per_chunk);
  const bool with_xhat = dweight_part != nullptr;
  float acc_w = 0.0f, acc_b = 0.0f;
  if (col < d)
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) {
      const float g = dy[r * d + col];
      acc_b += g;
      if (with_xhat) acc_w += g * (x[r * d + col] - mean[r]) * rstd[r];
    }
  wsum[threadIdx.y][threadIdx.x] = acc_w;
  bsum[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y != 0 || col >= d) return;
  float total_w = 0.0f, total_b = 0.0f;
  for (int j = 0; j < kRowLanes; ++j) {
    total_w += wsum[j][threadIdx.x];
    total_b += bsum[j][threadIdx.x];
  }
  dbias_part[blockIdx.y * d + col] = total_b;
  if (with_xhat) dweight_part[blockIdx.y * d + col] = total_w;
}

// out[c] += sum over chunks of partial[chunk, c], in chunk order.
__global__ void accumulate_partials(const float* partial, int64_t chunks, int64_t d, Floats out) {
  for (int64_t c = first_index(); c < d; c += grid_stride()) {
    double total = 0.0;
    for (int64_t j = 0; j < chunks; ++j) total += partial[j * d + c];
    out.store(c, static_cast<float>(static_cast<double>(out[c]) + total));
  }
}

// dbias += column sums of dy; when dweight is given also dweight += column sums of dy * xhat.
void column_sums(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, Tensor* dweight,
                 Tensor& dbias) {
  const int64_t n = dy.dim(0), d = dy.dim(1);
  if (n == 0 || d == 0) return;
  const cudaStream_t stream = cuda_rt::stream();
  const Chunks chunks = chunks_for(n);
  Tensor bias_part = Tensor::empty({chunks.count, d}, DType::F32, dy.device());
  Tensor weight_part = dweight ? Tensor::empty({chunks.count, d}, DType::F32, dy.device()) : Tensor();
  const dim3 grid(static_cast<unsigned>((d + kColumns - 1) / kColumns), static_cast<unsigned>(chunks.count));
  column_partials<<<grid, dim3(kColumns, kRowLanes), 0, stream>>>(
      floats_of(dy), floats_of(x), dweight ? data_of<float>(mean) : nullptr, dweight ? data_of<float>(rstd) : nullptr,
      n, d, chunks.rows_each, dweight ? data_of<float>(weight_part) : nullptr, data_of<float>(bias_part));
  VEOMNI_CUDA_LAUNCH_CHECK();
  accumulate_partials<<<grid_for(d, kThreads), kThreads, 0, stream>>>(data_of<float>(bias_part), chunks.count, d,
                                                                      floats_of(dbias));
  VEOMNI_CUDA_LAUNCH_CHECK();
  if (!dweight) return;
  accumulate_partials<<<grid_for(d, kThreads), kThreads, 0, stream>>>(data_of<float>(weight_part), chunks.count, d,
                                                                      floats_of(*dweight));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

// ---------------------------------------------------------------- GELU and bias

constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCubic = 0.044715f;

// The CDF factors in forms that keep their precision where they approach 0 (x very negative): Phi(x) as
// erfc(-x/sqrt 2)/2 rather than (1 + erf)/2, and the tanh form's (1 + tanh u)/2 as the logistic s(2u). In float,
// 1 + erf or 1 + tanh cancels to 0 well before the true value underflows, and the CPU twin (double) does not.
__device__ __forceinline__ float phi_cdf(float x) { return 0.5f * erfcf(-x * kSqrtHalf); }
__device__ __forceinline__ float tanh_gate(float x) {  // (1 + tanh(sqrt(2/pi) (x + c x^3))) / 2
  return 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

__device__ __forceinline__ float gelu(float x, bool tanh_form) {
  return x * (tanh_form ? tanh_gate(x) : phi_cdf(x));
}

// Erf: Phi(x) + x phi(x). Tanh: s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 c x^2) with s = (1 + t) / 2, since
// (1 - t^2) / 2 = 2 s (1 - s).
__device__ __forceinline__ float gelu_slope(float x, bool tanh_form) {
  if (!tanh_form) return phi_cdf(x) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
  const float s = tanh_gate(x);
  return s + 2.0f * x * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

__global__ void gelu_kernel(ConstFloats x, bool tanh_form, Floats y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y.store(i, gelu(x[i], tanh_form));
}

__global__ void gelu_backward_kernel(ConstFloats dy, ConstFloats x, bool tanh_form, Floats dx, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dx.store(i, dy[i] * gelu_slope(x[i], tanh_form));
}

__global__ void add_bias_kernel(Floats y, ConstFloats bias, int64_t n, int64_t d) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y.store(i, y[i] + bias[i % d]);
}

// ---------------------------------------------------------------- im2col / col2im

// Sizes of a 2-D convolution's input, kernel and output.
struct ConvGeometry {
  int64_t batch, channels, h, w, kh, kw, stride, pad, ho, wo;
  __host__ __device__ int64_t width() const { return channels * kh * kw; }
};

ConvGeometry geometry(const Tensor& image, int64_t kh, int64_t kw, int64_t stride, int64_t pad) {
  const int64_t h = image.dim(2), w = image.dim(3);
  return {image.dim(0), image.dim(1), h, w, kh, kw, stride, pad, (h + 2 * pad - kh) / stride + 1,
          (w + 2 * pad - kw) / stride + 1};
}

// cols[(b, oy, ox), (c, ky, kx)] = x[b, c, oy*stride - pad + ky, ox*stride - pad + kx], zero outside.
__global__ void im2col_kernel(ConstFloats x, ConvGeometry g, Floats cols, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t col = i % g.width(), row = i / g.width();
    const int64_t kx = col % g.kw, ky = (col / g.kw) % g.kh, c = col / (g.kw * g.kh);
    const int64_t ox = row % g.wo, oy = (row / g.wo) % g.ho, b = row / (g.wo * g.ho);
    const int64_t iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
    const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    cols.store(i, inside ? x[((b * g.channels + c) * g.h + iy) * g.w + ix] : 0.0f);
  }
}

// dx[b, c, iy, ix] = sum of dcols over the (output, tap) pairs that read it, taps in ascending order.
__global__ void col2im_kernel(ConstFloats dcols, ConvGeometry g, Floats dx, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t ix = i % g.w, iy = (i / g.w) % g.h, c = (i / (g.w * g.h)) % g.channels;
    const int64_t b = i / (g.w * g.h * g.channels);
    float total = 0.0f;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t ty = iy + g.pad - ky;
      if (ty < 0) break;
      if (ty % g.stride != 0 || ty / g.stride >= g.ho) continue;
      const int64_t oy = ty / g.stride;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t tx = ix + g.pad - kx;
        if (tx < 0) break;
        if (tx % g.stride != 0 || tx / g.stride >= g.wo) continue;
        const int64_t row = (b * g.ho + oy) * g.wo + tx / g.stride;
        total += dcols[row * g.width() + (c * g.kh + ky) * g.kw + kx];
      }
    }
    dx.store(i, total);
  }
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (n == 0) return;
  layernorm_rows<<<row_blocks(n), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      floats_of(x), floats_of(weight), floats_of(bias), eps, floats_of(y), data_of<float>(mean),
      data_of<float>(rstd), n, d);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias) {
  const int64_t n = x.dim(0), d = x.dim(1);
  if (n == 0) return;
  layernorm_dx_rows<<<row_blocks(n), kWarpsPerBlock * kWarp, 0, cuda_rt::stream()>>>(
      floats_of(dy), floats_of(x), floats_of(weight), data_of<float>(mean), data_of<float>(rstd), floats_of(dx), n,
      d);
  VEOMNI_CUDA_LAUNCH_CHECK();
  column_sums(dy, x, mean, rstd, &dweight, dbias);
}

void gelu_forward(const Tensor& x, GeluKind kind, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  gelu_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(floats_of(x), kind == GeluKind::Tanh,
                                                                           floats_of(y), n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void gelu_backward(const Tensor& dy, const Tensor& x, GeluKind kind, Tensor& dx) {
  const int64_t n = x.numel();
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      floats_of(dy), floats_of(x), kind == GeluKind::Tanh, floats_of(dx), n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void add_bias_(Tensor& y, const Tensor& bias) {
  const int64_t n = y.numel();
  if (n == 0) return;
  add_bias_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(floats_of(y), floats_of(bias), n,
                                                                               y.dim(1));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void bias_grad(const Tensor& dy, Tensor& dbias) { column_sums(dy, dy, Tensor(), Tensor(), nullptr, dbias); }

void im2col_2d(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& cols) {
  const int64_t n = cols.numel();
  if (n == 0) return;
  im2col_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      floats_of(x), geometry(x, kh, kw, stride, pad), floats_of(cols), n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void col2im_2d(const Tensor& dcols, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& dx) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  col2im_kernel<<<grid_for(n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
      floats_of(dcols), geometry(dx, kh, kw, stride, pad), floats_of(dx), n);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
