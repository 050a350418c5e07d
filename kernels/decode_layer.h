// The weights of one dense decoder layer as a decode step reads them (ops::dense_decode_layers in
// kernels/decode_op_list.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops {

struct DenseDecodeLayer {
  Tensor input_norm;  // [hidden]: the RMSNorm before attention
  float input_norm_eps = 0.0f;
  Tensor qkv;  // [(Hq + 2 Hkv) D, hidden]: the q rows, then the k rows, then the v rows (decoding's fused weight)
  Tensor q_norm, k_norm;  // [D]: the per-head RMSNorms of queries and keys
  float qk_norm_eps = 0.0f;
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0.0f;  // the softmax scale
  Tensor o_proj;  // [hidden, Hq D]
  Tensor post_attention_norm;  // [hidden]
  float post_attention_norm_eps = 0.0f;
  Tensor gate_up;  // [2I, hidden]: the gate rows, then the up rows
  Tensor down;  // [hidden, I]
};

}  // namespace veomni::ops
