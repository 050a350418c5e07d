// The ops of KV-cache decoding (kernels/decode_ops.h), each signature written once with its documentation, in the
// form of kernels/op_list.h (which explains the markers): kernels/decode_ops.h expands it into the public
// declarations, kernels/cpu/ops_cpu.h and kernels/cuda/ops_cuda.h into the backends'. One marker more:
//   VEOMNI_CUDA_ONLY_OP  an op of the public API and of the CUDA backend only: kernels/dispatch.cc does the CPU's
//                        part itself, so the CPU backend declares nothing.
// Included more than once on purpose: no include guard; every marker is undefined at the end.
#ifndef VEOMNI_OP
#error "define VEOMNI_OP(return_type, name, params) before including kernels/decode_op_list.h"
#endif
#ifndef VEOMNI_CUDA_ONLY_OP
#define VEOMNI_CUDA_ONLY_OP(return_type, name, params)
#endif

// A CPU tensor's copy on `device`, queued on the compute stream behind the work already there and not waited for
// (the host bytes are staged before this returns). On the CPU: a copy (Tensor::clone, in kernels/dispatch.cc).
VEOMNI_CUDA_ONLY_OP(Tensor, upload, (const Tensor& host, Device device))

// attention_kv_cache (kernels/op_list.h) with its rows on the device: cache_rows i32 [2, N] on q's device holds row
// n's cache slot (cache_rows[0, n]) and its kv length (cache_rows[1, n]; it attends to rows [0, len) of its slot,
// 1 <= len <= L). The CPU checks the ranges; CUDA, which cannot without waiting, writes NaN for a row outside them.
// The CUDA kernel splits a long cache across blocks (flash-decoding) and merges the splits in a fixed order.
VEOMNI_OP(void, attention_kv_cache,
          (const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows, float scale,
           Tensor& out))

// Writes a step's keys (or values) into a cache: rows [S, Hkv, D] of the cache's dtype; dest i32 [S] on the cache's
// device: row s goes to flat cache row dest[s] (slot * L + position) of cache [B, L, Hkv, D]. The CPU checks
// 0 <= dest[s] < B*L; CUDA skips a row outside it.
VEOMNI_OP(void, kv_cache_write, (const Tensor& rows, const Tensor& dest, Tensor& cache))

// The attention inputs of a cached step in one pass (Qwen3's order: per-head RMSNorm, then RoPE), from the packed
// output of the q/k/v projections: qkv [S, (Hq + 2 Hkv) D] holds each token's Hq query heads, then its Hkv key heads,
// then its Hkv value heads (decoding's fused projection). Every query and key head is normalised over D
// (y = w * x * rsqrt(mean(x^2) + eps), weights q_norm and k_norm [D]) and rotated as rope_apply rotates (cos/sin f32
// [S, D]) into q [S, Hq, D] and k [S, Hkv, D]; the values are copied into v [S, Hkv, D]; the rotated keys and the
// values also go to flat cache rows dest[s] of k_cache and v_cache [B, L, Hkv, D] as kv_cache_write writes them. The
// same values as rmsnorm_forward, rope_apply and kv_cache_write in turn, except that CUDA keeps the normalised values
// in fp32 until they are rotated (one rounding to bf16 instead of two). The CPU checks 0 <= dest[s] < B*L; CUDA skips
// a row outside it.
VEOMNI_OP(void, qkv_norm_rope_cache_write,
          (const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
           const Tensor& sin, const Tensor& dest, Tensor& q, Tensor& k, Tensor& v, Tensor& k_cache, Tensor& v_cache))

// A dense MLP's gate, up and SwiGLU in one op (decoding's fused weight): out [M, I] = silu(x Wg^T) * (x Wu^T) for
// x [M, K] and gate_up [2I, K] (Wg's rows, then Wu's). The values of matmul into a [M, 2I] product (rounded to the
// compute dtype) followed by swiglu_fused_forward; CUDA computes both in one kernel, with those bits, for bf16 x of one
// row, or of up to 4 with rows times weight bytes of at most 96 MiB (the skinny decoding GEMM), and runs the two ops
// otherwise. The CPU runs the two ops (kernels/dispatch.cc).
VEOMNI_CUDA_ONLY_OP(void, matmul_swiglu, (const Tensor& x, const Tensor& gate_up, Tensor& out))

// A normalised input's GEMM (decoding's q/k/v projection and LM head): out [M, N] = rmsnorm(x) w^T for x [M, K], the
// norm's gain [K] and eps, w [N, K]. The values of rmsnorm_forward (its rows rounded to x's dtype) followed by
// matmul; CUDA computes both in one kernel, with those bits, for bf16 x of one row, or of up to 4 with rows times
// weight bytes of at most 96 MiB, and a bf16 gain (the skinny decoding GEMM), and runs the two ops otherwise. The
// CPU runs the two ops (kernels/dispatch.cc).
VEOMNI_CUDA_ONLY_OP(void, rmsnorm_matmul,
                    (const Tensor& x, const Tensor& gain, float eps, const Tensor& w, Tensor& out))

// matmul_swiglu of the normalised input (decoding's MLP after its norm): out [M, I] = SwiGLU of rmsnorm(x)
// gate_up^T; the values of rmsnorm_forward followed by matmul_swiglu, in one kernel where rmsnorm_matmul has one.
VEOMNI_CUDA_ONLY_OP(void, rmsnorm_matmul_swiglu,
                    (const Tensor& x, const Tensor& gain, float eps, const Tensor& gate_up, Tensor& out))

// Consecutive dense decoder layers of a decode step (one token a row), updating h [M, hidden] in place; layer i
// reads and writes k_caches[i] and v_caches[i]. Each layer is rmsnorm_matmul (the input norm and the q/k/v
// projection), qkv_norm_rope_cache_write (the step's keys and values into its caches at write_rows),
// attention_kv_cache (over cache_rows), matmul adding o_proj's product into h, rmsnorm_matmul_swiglu (the
// post-attention norm, gate and up) and matmul adding down's product into h: those ops in that order, with their
// values: on the CPU the ops run in turn (kernels/dispatch.cc). On CUDA, one row of layers that the clustered kernel
// takes (kernels/cuda/decode_layers_clustered.h) runs in it by default: its sums run on the tensor cores in another
// order, so h differs from the ops' in its last bits. VEOMNI_DECODE_LAYER_KERNEL=0 runs the ops in turn instead, as
// CUDA does for several rows; VEOMNI_DECODE_LAYER_KERNEL=1 runs the layers as one persistent kernel with the ops' bits
// (kernels/cuda/decode_layer.cu) for layers of one shape, bf16 rows of at most 4, bf16 weights and caches, head_dim
// 64 or 128 with 1, 2, 4 or 8 query heads per kv head, and weight slices that fit the blocks' shared memory.
VEOMNI_CUDA_ONLY_OP(void, dense_decode_layers,
                    (const std::vector<DenseDecodeLayer>& layers, const Tensor& cos, const Tensor& sin,
                     const Tensor& write_rows, const Tensor& cache_rows, std::vector<Tensor>& k_caches,
                     std::vector<Tensor>& v_caches, Tensor& h))

// A decode step's mixture-of-experts experts with no read back to the host, so that a recorded graph can hold the
// step: out [N, H] = for each row, the sum over its k (expert, weight) pairs in ascending expert order of weight *
// down_e(SwiGLU(gate_up_e x)), for x [N, H], topk_idx i32 [N, k] and topk_weight f32 [N, k] (moe_route's), gate_up
// [E, 2I, H] (the gate rows, then the up rows) and down [E, H, I], x, the weights and out of one dtype. The values of
// moe_permute, grouped_matmul of gate_up (transposed), swiglu_fused_forward, grouped_matmul of down (transposed) and
// moe_unpermute in turn, which the CPU runs (it checks the expert ids; moe_permute's counts are read on the host
// there). CUDA sorts the pairs by expert on the device and reads each routed expert's weights once, with its rows
// together (kernels/cuda/moe_decode.cu); its GEMM sums run in another order than the grouped GEMMs', and it skips a
// pair whose expert is outside [0, E). At most 65,535 pairs (N k) and, on CUDA, 12,288 experts.
VEOMNI_CUDA_ONLY_OP(void, moe_decode_experts,
                    (const Tensor& x, const Tensor& topk_idx, const Tensor& topk_weight, const Tensor& gate_up,
                     const Tensor& down, Tensor& out))

// Greedy decoding's choice: ids i64 [N] = the index of each row's greatest value of x [N, V] (V >= 1), the lowest
// index on a tie and the first NaN if a row holds one (torch.argmax's rules).
VEOMNI_OP(void, argmax_rows, (const Tensor& x, Tensor& ids))
// Moves a greedy decode step's tables one token on without the host (several steps a round trip): the chosen ids
// i64 [N] (argmax_rows's) become the step's token ids, tokens i64 [N + streams N] (the ids, then the positions of
// each of the 1 or 3 streams), whose positions each go up by one; rows i32 [3N] (each row's flat cache row to write,
// its slot, its kv length) get the flat row and the kv length up by one, the slot kept.
VEOMNI_OP(void, advance_decode_tables, (const Tensor& chosen, Tensor& tokens, Tensor& rows))

#undef VEOMNI_OP
#undef VEOMNI_CUDA_ONLY_OP
