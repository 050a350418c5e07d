// What the persistent decode kernels (decode_layer.cu, decode_layers_clustered.cu) share about a run of dense decoder
// layers: each layer's pointers as a kernel reads them, the check that the run's operands are bf16 layers of one
// shape, and device counters zeroed once outside any graph capture.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/decode_layer.h"

namespace veomni::ops::cuda {

// A layer's weight matrices, in the order its phases read them.
enum WeightKind : int { kQkv = 0, kOProj = 1, kGateUp = 2, kDown = 3, kWeightKinds = 4 };

// One layer's weights, norms and caches.
struct DecodeLayerPointers {
  const __nv_bfloat16* input_norm;
  const __nv_bfloat16* post_norm;
  const __nv_bfloat16* weight[kWeightKinds];  // q/k/v [qkv_columns, hidden], o_proj, gate|up [2I, hidden], down
  const __nv_bfloat16* q_norm;
  const __nv_bfloat16* k_norm;
  __nv_bfloat16* k_cache;
  __nv_bfloat16* v_cache;
  float input_eps, post_eps, qk_eps, scale;
};

inline DecodeLayerPointers decode_layer_pointers(const DenseDecodeLayer& layer, Tensor& k_cache, Tensor& v_cache) {
  DecodeLayerPointers p{};
  p.input_norm = data_of<const __nv_bfloat16>(layer.input_norm);
  p.post_norm = data_of<const __nv_bfloat16>(layer.post_attention_norm);
  p.weight[kQkv] = data_of<const __nv_bfloat16>(layer.qkv);
  p.weight[kOProj] = data_of<const __nv_bfloat16>(layer.o_proj);
  p.weight[kGateUp] = data_of<const __nv_bfloat16>(layer.gate_up);
  p.weight[kDown] = data_of<const __nv_bfloat16>(layer.down);
  p.q_norm = data_of<const __nv_bfloat16>(layer.q_norm);
  p.k_norm = data_of<const __nv_bfloat16>(layer.k_norm);
  p.k_cache = data_of<__nv_bfloat16>(k_cache);
  p.v_cache = data_of<__nv_bfloat16>(v_cache);
  p.input_eps = layer.input_norm_eps;
  p.post_eps = layer.post_attention_norm_eps;
  p.qk_eps = layer.qk_norm_eps;
  p.scale = layer.scale;
  return p;
}

inline bool bf16_aligned(const Tensor& t) {
  return t.dtype() == DType::BF16 && reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0;
}

// Whether every layer has the first one's head layout and weight shapes, every cache the first one's shape, and h,
// every weight, gain and cache is bf16 and 16-byte aligned.
inline bool uniform_bf16_layers(const std::vector<DenseDecodeLayer>& layers, const std::vector<Tensor>& k_caches,
                                const std::vector<Tensor>& v_caches, const Tensor& h) {
  const DenseDecodeLayer& first = layers.front();
  for (size_t i = 0; i < layers.size(); ++i) {
    const DenseDecodeLayer& l = layers[i];
    if (l.q_heads != first.q_heads || l.kv_heads != first.kv_heads || l.head_dim != first.head_dim ||
        l.qkv.shape() != first.qkv.shape() || l.o_proj.shape() != first.o_proj.shape() ||
        l.gate_up.shape() != first.gate_up.shape() || l.down.shape() != first.down.shape() ||
        k_caches[i].shape() != k_caches[0].shape())
      return false;
    for (const Tensor* t : {&h, &l.input_norm, &l.qkv, &l.o_proj, &l.post_attention_norm, &l.gate_up, &l.down,
                            &l.q_norm, &l.k_norm, &k_caches[i], &v_caches[i]})
      if (!bf16_aligned(*t)) return false;
  }
  return true;
}

// `count` counters in device memory kept in `counters`: allocated and zeroed on the first call made outside a graph
// capture (a decode step runs eagerly before it is captured); null while none could be made yet.
inline unsigned* zeroed_device_counters(unsigned*& counters, size_t count) {
  if (counters == nullptr) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    VEOMNI_CUDA_CHECK(cudaStreamIsCapturing(cuda_rt::stream(), &capture));
    if (capture != cudaStreamCaptureStatusNone) return nullptr;
    VEOMNI_CUDA_CHECK(cudaMalloc(&counters, count * sizeof(unsigned)));
    VEOMNI_CUDA_CHECK(cudaMemset(counters, 0, count * sizeof(unsigned)));
  }
  return counters;
}

}  // namespace veomni::ops::cuda
