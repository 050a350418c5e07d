// The ops of the op API (kernels/ops.h), each signature written once with its documentation. kernels/ops.h expands
// this list into the public declarations; kernels/cpu/ops_cpu.h and kernels/cuda/ops_cuda.h expand it into the
// backends' (veomni::ops::cpu, veomni::ops::cuda). The conventions of every op are at the top of kernels/ops.h.
//
// An entry is a marker call: MARKER(return_type, name, (parameters)).
//   VEOMNI_OP           an op of the public API and of both backends, with one signature.
//   VEOMNI_COMPOSED_OP  an op of the public API only: kernels/dispatch.cc builds it from other ops or backend
//                       helpers, so no backend declares it.
// VEOMNI_DEFAULT(value) marks a default argument of the public API; the backends take every argument.
// An includer defines the markers it wants (VEOMNI_OP at least) and includes the list inside its namespace, after
// kernels/ops.h's types (Tensor, AdamWTensors, GeluKind); the markers left undefined declare nothing. The list
// undefines every marker at its end, so it has no include guard: it is meant to be included more than once.
#ifndef VEOMNI_OP
#error "define VEOMNI_OP(return_type, name, params) before including kernels/op_list.h"
#endif
#ifndef VEOMNI_COMPOSED_OP
#define VEOMNI_COMPOSED_OP(return_type, name, params)
#endif
#ifndef VEOMNI_DEFAULT
#define VEOMNI_DEFAULT(value)
#endif

// ---------------------------------------------------------------- GEMM (cpu/gemm.cc, cuda/gemm.cu)
// out[M,N] = alpha * op(a) @ op(b) + beta * out, op(x) = x^T when trans. a,b,out are 2-D.
// Linear layer y = x W^T: matmul(x, false, W, true, y). dx = dy W: matmul(dy, false, W, false, dx).
// dW += dy^T x: matmul(dy, true, x, false, dW, 1, 1).
// A defined addend [M, N] (out's dtype; beta != 0) stands in for out on the right: out = alpha * op(a) @ op(b) +
// beta * addend, out's old values unread. A residual connection in the GEMM: h1 = h + x W_o^T without an add_.
VEOMNI_OP(void, matmul,
          (const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out,
           float alpha VEOMNI_DEFAULT(1.0f), float beta VEOMNI_DEFAULT(0.0f),
           const Tensor& addend VEOMNI_DEFAULT(Tensor())))

// Grouped GEMM for experts: the rows of x [T, K] form consecutive groups of group_sizes[g] rows (sum = T).
// out_g = x_g @ op(w[g]) where w is [G, N, K] when trans_w (out_g = x_g w_g^T) or [G, K, N] otherwise; out [T, N].
VEOMNI_OP(void, grouped_matmul,
          (const Tensor& x, const Tensor& w, bool trans_w, const std::vector<int64_t>& group_sizes, Tensor& out))
// Weight gradient of grouped_matmul with trans_w = true: dw[g] (+)= dy_g^T x_g, dw [G, N, K]; accumulates when
// accumulate is true.
VEOMNI_OP(void, grouped_matmul_weight_grad,
          (const Tensor& dy, const Tensor& x, const std::vector<int64_t>& group_sizes, Tensor& dw, bool accumulate))

// ---------------------------------------------------------------- normalisation (cpu/norm.cc, cuda/norm.cu)
// y = w * x * rsqrt(mean(x^2) + eps) over the last dim; x,y [N, D], w [D], rstd [N] (f32, saved for backward).
VEOMNI_OP(void, rmsnorm_forward, (const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd))
// dx [N, D] (overwritten), dweight [D] accumulates; an undefined dweight (a frozen weight) skips the weight gradient.
// A defined residual [N, D] (dx's dtype, not dx itself) is added to dx in the same pass: a pre-norm block's input
// gradient, dx = the norm's input gradient + the residual stream's, without a separate add (read once, rounded once).
VEOMNI_OP(void, rmsnorm_backward,
          (const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx, Tensor& dweight,
           const Tensor& residual VEOMNI_DEFAULT(Tensor())))

// ---------------------------------------------------------------- rotary position embedding (rope.cc, rope.cu)
// cos/sin tables [S, D] (f32) for head_dim D, half-split layout (emb = cat(freqs, freqs)), inv_freq[i] = theta^(-2i/D).
// positions: [S] (i64, or f32 for Qwen3-Omni) for 1-D RoPE, or [3, S] for interleaved M-RoPE with mrope_section
// (e.g. {24, 20, 20}): frequency j uses stream H if j%3==1 && j < 3*section[1], W if j%3==2 && j < 3*section[2],
// else T. An empty mrope_section with [3, S] positions is an error.
VEOMNI_OP(void, rope_tables,
          (const Tensor& positions, int64_t head_dim, double theta, const std::vector<int64_t>& mrope_section,
           Tensor& cos, Tensor& sin))
// In place on x [S, H, D]: x = x*cos + rotate_half(x)*sin. inverse = true applies the transpose (the backward:
// dx = dy*cos + rotate_half^T(dy*sin), which for tables built as cat(f, f) equals dy*cos - rotate_half(dy)*sin).
VEOMNI_OP(void, rope_apply, (Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse))

// Training's attention inputs from the packed output of a fused q/k/v projection, qkv [S, (Hq + 2 Hkv) D] (each
// token's Hq query heads, then its Hkv key heads, then its Hkv value heads): every query and key head normalised over
// D (weights q_norm and k_norm [D], as rmsnorm_forward) and rotated (as rope_apply, cos/sin f32 [S, D]) into q
// [S, Hq, D] and k [S, Hkv, D], the values copied into v [S, Hkv, D]; q_rstd [S * Hq] and k_rstd [S * Hkv] (f32) are
// the norms' rstd, saved for the backward. The values of unpacking, rmsnorm_forward and rope_apply in turn, except
// that CUDA keeps each head in f32 from the load to the store (one rounding instead of two).
VEOMNI_OP(void, qkv_norm_rope_forward,
          (const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
           const Tensor& sin, Tensor& q, Tensor& k, Tensor& v, Tensor& q_rstd, Tensor& k_rstd))
// Its backward for frozen q_norm and k_norm: dqkv [S, (Hq + 2 Hkv) D] (overwritten) gets the gradient of every packed
// column from dq, dk (of the rotated heads) and dv, with qkv, q_rstd and k_rstd the forward's. The values of
// rope_apply's inverse and rmsnorm_backward (no weight gradient) in turn, packed; CUDA again rounds once.
VEOMNI_OP(void, qkv_norm_rope_backward,
          (const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& qkv, const Tensor& q_norm,
           const Tensor& k_norm, const Tensor& q_rstd, const Tensor& k_rstd, const Tensor& cos, const Tensor& sin,
           Tensor& dqkv))

// ---------------------------------------------------------------- SwiGLU (cpu/swiglu.cc, cuda/swiglu.cu)
// out = silu(gate) * up; gate, up, out [N, I].
VEOMNI_OP(void, swiglu_forward, (const Tensor& gate, const Tensor& up, Tensor& out))
VEOMNI_OP(void, swiglu_backward,
          (const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup))
// Fused layout of stacked experts: gate_up [N, 2I] with gate in columns [0, I) and up in [I, 2I); out [N, I].
VEOMNI_OP(void, swiglu_fused_forward, (const Tensor& gate_up, Tensor& out))
VEOMNI_OP(void, swiglu_fused_backward, (const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up))

// ---------------------------------------------------------------- attention (cpu/attention.cc, cuda/attention.cu)
// Packed variable-length attention. q [S, Hq, D], k/v [S, Hkv, D], Hq % Hkv == 0 (query head j uses kv head
// j / (Hq/Hkv)). cu_seqlens: i32 [B+1] on the host, cu[0] = 0, cu[B] = S; a token attends only to tokens of its
// own sequence (and only to earlier ones when causal). Softmax in fp32. out [S, Hq, D]; lse [Hq, S] (f32,
// log-sum-exp of the scaled scores, saved for backward).
VEOMNI_OP(void, attention_forward,
          (const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens, bool causal,
           float scale, Tensor& out, Tensor& lse))
// dq [S, Hq, D], dk/dv [S, Hkv, D] (overwritten; the GQA sum over query heads is done inside).
VEOMNI_OP(void, attention_backward,
          (const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
           const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& dq,
           Tensor& dk, Tensor& dv))

// ---------------------------------------------------------------- loss (cpu/ and cuda/ cross_entropy, token_logprobs)
// Ids and labels outside [0, V) are an error (InputError) on the CPU always, on a GPU only with the debug checks on
// (train.kernels.debug_checks: each waits for the device); callers validate them on the host first (the collator).
// Fused softmax + cross-entropy + gradient. logits [N, V], labels i64 [N] (already shifted; rows whose label is
// ignore_index contribute nothing). losses [N] f32: -log softmax(logits)[label] (0 when ignored).
// When dlogits is defined: dlogits [N, V] = grad_scale * (softmax - onehot(label)), zero rows when ignored;
// dlogits may be the same tensor as logits (in-place). Labels outside [0, V) other than ignore_index are an error.
VEOMNI_OP(void, cross_entropy,
          (const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale, Tensor& losses,
           Tensor& dlogits))
// Per-token log-probabilities of the labels (DPO, the PPO actor, scoring) and the softmax entropy, the LM head's
// other loss input. logits [N, V] as for cross_entropy; labels i64 [N] (already shifted; ignore_index rows give 0).
// logprobs f32 [N] = log softmax(logits)[label] (exactly -cross_entropy's loss on the CPU). entropy f32 [N] =
// -sum_j p_j log p_j with p = softmax(logits), or undefined to skip it. Max-subtracted, log-sum-exp. Labels outside
// [0, V) other than ignore_index are an error.
VEOMNI_OP(void, token_logprobs,
          (const Tensor& logits, const Tensor& labels, int64_t ignore_index, Tensor& logprobs, Tensor& entropy))
// Backward of token_logprobs for the gradients dlogprobs f32 [N] and dentropy f32 [N] (undefined: no entropy term):
// dlogits [N, V] = dlogprobs * (onehot(label) - p) + dentropy * (-p * (log p + H)), zero rows where ignored, rounded
// to nearest even into dlogits' dtype. dlogits may be the same tensor as logits (in place).
VEOMNI_OP(void, token_logprobs_backward,
          (const Tensor& logits, const Tensor& labels, int64_t ignore_index, const Tensor& dlogprobs,
           const Tensor& dentropy, Tensor& dlogits))

// ---------------------------------------------------------------- embedding (cpu/embedding.cc, cuda/embedding.cu)
// out[n] = table[ids[n]]; ids i64 [N], table [V, H], out [N, H]. An id outside [0, V) is an error.
VEOMNI_OP(void, embedding_forward, (const Tensor& ids, const Tensor& table, Tensor& out))
// dtable[ids[n]] += dout[n] (accumulates).
VEOMNI_OP(void, embedding_backward, (const Tensor& ids, const Tensor& dout, Tensor& dtable))

// ---------------------------------------------------------------- mixture of experts (cpu/moe.cc, cuda/moe.cu)
// Router: probs = softmax(router_logits) in fp32 [N, E]; topk_idx i32 [N, k] (descending probability, ties to the
// lower index); topk_weight f32 [N, k] = the k probabilities, divided by their sum when norm_topk_prob.
VEOMNI_OP(void, moe_route,
          (const Tensor& router_logits, int64_t k, bool norm_topk_prob, Tensor& probs, Tensor& topk_idx,
           Tensor& topk_weight))
// Backward of moe_route given dL/dtopk_weight [N, k] and dL/dprobs from elsewhere (e.g. the aux loss; may be
// undefined): dlogits [N, E] (overwritten).
VEOMNI_OP(void, moe_route_backward,
          (const Tensor& dtopk_weight, const Tensor& dprobs_extra, const Tensor& probs, const Tensor& topk_idx,
           bool norm_topk_prob, Tensor& dlogits))
// The load-balancing loss's statistics of the first `rows` tokens, on the tensors' device: stats f32 [2, E]
// (overwritten), row 0 = (token, slot) pairs routed to each expert (exact counts below 2^24), row 1 = the column
// sums of probs f32 [N, E] over those rows (bias_grad's sums).
VEOMNI_OP(void, moe_router_stats, (const Tensor& probs, const Tensor& topk_idx, int64_t rows, Tensor& stats))
// The load-balancing loss's gradient, the same for every routed token: dprobs f32 [N, E] (overwritten) = dprob f32
// [E] for the first `rows` rows, 0 for the others (SP padding).
VEOMNI_OP(void, moe_aux_dprobs, (const Tensor& dprob, int64_t rows, Tensor& dprobs))
// Sorts the N*k (token, slot) pairs by expert (stable: by expert, then token, then slot).
// permuted [N*k, H] = x rows in that order; row_map i32 [N*k]: row_map[t*k + j] = position of pair (t, j) in
// permuted; expert_counts[e] = rows routed to expert e (host vector, size num_experts).
VEOMNI_OP(void, moe_permute,
          (const Tensor& x, const Tensor& topk_idx, int64_t num_experts, Tensor& permuted, Tensor& row_map,
           std::vector<int64_t>& expert_counts))
// dx[t] = sum_j dpermuted[row_map[t*k+j]]; dx [N, H] (overwritten).
VEOMNI_OP(void, moe_permute_backward, (const Tensor& dpermuted, const Tensor& row_map, int64_t k, Tensor& dx))
// out[t] = sum_j topk_weight[t, j] * y[row_map[t*k+j]]; y [N*k, H], out [N, H].
VEOMNI_OP(void, moe_unpermute, (const Tensor& y, const Tensor& row_map, const Tensor& topk_weight, Tensor& out))
// dy[row_map[t*k+j]] = topk_weight[t,j] * dout[t]; dtopk_weight[t,j] = <dout[t], y[row_map[t*k+j]]>.
VEOMNI_OP(void, moe_unpermute_backward,
          (const Tensor& dout, const Tensor& y, const Tensor& row_map, const Tensor& topk_weight, Tensor& dy,
           Tensor& dtopk_weight))

// ---------------------------------------------------------------- optimizer (cpu/adamw.cc, cuda/adamw.cu)
// One AdamW step in torch semantics (decoupled weight decay, bias correction), all f32:
// p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps).
VEOMNI_OP(void, adamw_step,
          (Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
           double beta2, double eps, double weight_decay, int64_t step))
// adamw_step on every slot (AdamWTensors, kernels/ops.h) in one pass (one launch on CUDA, instead of one per
// parameter). Each gradient is read as grad * grad_scale rounded to f32 (gradient clipping's coefficient; 1 leaves
// it exact) and left unchanged in memory, so the update equals scale_(grad, grad_scale) followed by adamw_step, bit
// for bit (and, with compute copies, followed by cast_multi of the params into them). Every slot of one call has
// moments of one dtype, and either every slot a compute copy of one dtype or none.
VEOMNI_OP(void, adamw_step_multi,
          (const std::vector<AdamWTensors>& slots, double lr, double beta1, double beta2, double eps, int64_t step,
           float grad_scale))

// ---------------------------------------------------------------- elementwise and reductions
// (cpu/elementwise.cc, cuda/elementwise.cu; the _multi ops in cuda/multi_tensor.cu)
VEOMNI_OP(double, sum, (const Tensor& x))          // accumulated in f64, returned to the host
VEOMNI_OP(double, sum_squares, (const Tensor& x))  // sum of x^2, f64 accumulation
VEOMNI_OP(void, add_, (Tensor& dst, const Tensor& src, float alpha VEOMNI_DEFAULT(1.0f)))  // dst += alpha * src
VEOMNI_OP(void, scale_, (Tensor& x, float factor))
VEOMNI_OP(void, fill_, (Tensor& x, float value))
// dst = src converted to dst's dtype (f32 <-> bf16 <-> f16), same numel.
VEOMNI_OP(void, cast, (const Tensor& src, Tensor& dst))
// The sum of x^2 over every tensor of xs (f32), accumulated in f64 in a fixed order, so the result is the same run
// to run; one read back to the host for the whole list (the gradient norm without a host sync per parameter).
VEOMNI_OP(double, sum_squares_multi, (const std::vector<const Tensor*>& xs))
// sum_squares_multi as the backend of `order` adds: the tensors may be in host memory while `order` is a GPU
// (optimizer offload's gradient norm); the result is then that GPU kernel's double, bit for bit.
// Composed: the CPU's sum_squares_multi_gpu_order (kernels/cpu/gpu_order_sums.h) or sum_squares_multi.
VEOMNI_COMPOSED_OP(double, sum_squares_multi_as_on, (const std::vector<const Tensor*>& xs, Device order))
// cast() of every pair (src[i] -> dst[i]) in one pass: one launch on CUDA for all of a group's parameters.
VEOMNI_OP(void, cast_multi, (const std::vector<const Tensor*>& src, const std::vector<Tensor*>& dst))
// Blocks of 2-D matrices (at most 8 a call; one launch on CUDA): the block-diagonal adapters of packed projections
// (model/layers/packed_linears.h). place_blocks: out [R, C] = zeros but out[rows[i] + r, columns[i] + c] =
// parts[i][r, c], parts of out's dtype, inside out, not overlapping. add_blocks: dsts[i][r, c] += src[rows[i] + r,
// columns[i] + c], src and dsts f32, each block inside src (the gradients of such blocks).
VEOMNI_OP(void, place_blocks,
          (const std::vector<Tensor>& parts, const std::vector<int64_t>& rows, const std::vector<int64_t>& columns,
           Tensor& out))
VEOMNI_OP(void, add_blocks,
          (const Tensor& src, const std::vector<int64_t>& rows, const std::vector<int64_t>& columns,
           const std::vector<Tensor*>& dsts))

// ---------------------------------------------------------------- encoder ops
// Building blocks of the vision tower and the audio encoder (kernels/cpu/encoder_ops.cc, kernels/cuda/encoder_ops.cu).

// LayerNorm over the last dim: y = (x - mean) * rstd * weight + bias; x,y [N, D]; mean, rstd [N] f32 (saved).
// rstd = 1/sqrt(var + eps) with the biased variance (torch.nn.LayerNorm).
VEOMNI_OP(void, layernorm_forward,
          (const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
           Tensor& rstd))
// dx [N, D] overwritten; dweight, dbias [D] accumulate.
VEOMNI_OP(void, layernorm_backward,
          (const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
           Tensor& dx, Tensor& dweight, Tensor& dbias))

// GELU of either GeluKind (kernels/ops.h). x, y (and dy, dx) of any shape with equal numel; outputs may not overlap
// inputs.
VEOMNI_OP(void, gelu_forward, (const Tensor& x, GeluKind kind, Tensor& y))
// dx = dy * gelu'(x), overwritten.
VEOMNI_OP(void, gelu_backward, (const Tensor& dy, const Tensor& x, GeluKind kind, Tensor& dx))

VEOMNI_OP(void, add_bias_, (Tensor& y, const Tensor& bias))    // y [N, D] += bias [D] per row
VEOMNI_OP(void, bias_grad, (const Tensor& dy, Tensor& dbias))  // dbias [D] += column sums of dy [N, D]

// Convolution patches, batch-major: x [B, C, H, W] -> cols [B*Ho*Wo, C*kh*kw] (row (b, oy, ox), column (c, ky, kx)),
// zero padding `pad`, stride `stride`; Ho = (H + 2*pad - kh)/stride + 1, Wo likewise. A Conv2d with weight
// [O, C, kh, kw] is then matmul(cols, false, weight viewed as [O, C*kh*kw], true, out [B*Ho*Wo, O]).
VEOMNI_OP(void, im2col_2d, (const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& cols))
// Transpose (backward): dx [B, C, H, W] overwritten with the sum of every column element's contribution.
VEOMNI_OP(void, col2im_2d, (const Tensor& dcols, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& dx))

// ---------------------------------------------------------------- attention over a KV cache (decoding)
// One query token per row attends to the cached keys and values of its sequence (no causal mask: the cache holds
// only earlier tokens and the token itself). q [N, Hq, D]; k_cache, v_cache [B, L, Hkv, D] with Hq % Hkv == 0 (query
// head j uses kv head j / (Hq/Hkv), as attention_forward); slots i32 [N] on the host: row n's sequence in the cache;
// kv_lens i32 [N] on the host: row n attends to cache rows [0, kv_lens[n]) of its slot, 1 <= kv_lens[n] <= L.
// Softmax of the scaled scores in fp32. out [N, Hq, D].
// Composed: the host tables are checked, uploaded, and passed to the device-table form (kernels/decode_op_list.h).
VEOMNI_COMPOSED_OP(void, attention_kv_cache,
                   (const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const std::vector<int32_t>& slots,
                    const std::vector<int32_t>& kv_lens, float scale, Tensor& out))

// ---------------------------------------------------------------- speech ops (forward only)
// Building blocks of Qwen3-Omni's talker and code2wav (kernels/cpu/speech_ops.cc, kernels/cuda/speech_ops.cu;
// checked by kernels/speech_dispatch.cc). 1-D signals are time-major: x [L, C] (row t holds the C channels of time
// step t), so a transformer's [T, H] output feeds the convolutions without a transpose.

// torch Conv1d over zero-padded x: out[t, o] = bias[o] + sum_{c, k} w[o, c, k] * xp[t*stride + k*dilation, g*Cg + c]
// where xp is x with pad_left zero rows before and pad_right after, g = o / (Cout/groups), Cg = Cin/groups.
// x [L, Cin], weight [Cout, Cin/groups, K], bias [Cout] or undefined (none), out [Lout, Cout] with
// Lout = (L + pad_left + pad_right - dilation*(K-1) - 1) / stride + 1.
VEOMNI_OP(void, conv1d_forward,
          (const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t dilation,
           int64_t groups, int64_t pad_left, int64_t pad_right, Tensor& out))
// torch ConvTranspose1d (groups 1, no padding) whose full output [(L-1)*stride + K, Cout] is trimmed by trim_left
// rows in front: out[t] = full[t + trim_left] for t < out.dim(0); full[s, o] = bias[o] + sum over (i, c, k) with
// i*stride + k = s of x[i, c] * w[c, o, k]. x [L, Cin], weight [Cin, Cout, K], bias [Cout] or undefined.
VEOMNI_OP(void, conv_transpose1d_forward,
          (const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t trim_left,
           Tensor& out))
// SnakeBeta with log-scale parameters: y = x + sin(x * exp(alpha[c]))^2 / (exp(beta[c]) + 1e-9); x, y [L, C],
// alpha, beta [C].
VEOMNI_OP(void, snake_beta_forward, (const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y))
// x[n, c] *= scale[c] (layer scale); x [N, C], scale [C].
VEOMNI_OP(void, scale_columns_, (Tensor& x, const Tensor& scale))
// y = silu(x) = x / (1 + exp(-x)); any shape, equal numel.
VEOMNI_OP(void, silu_forward, (const Tensor& x, Tensor& y))
// dst[n, :] += sigmoid(gate[n]) * src[n, :]; dst, src [N, D], gate [N, 1] (a shared expert's gate).
VEOMNI_OP(void, sigmoid_gated_add_, (Tensor& dst, const Tensor& gate, const Tensor& src))
// x = min(max(x, lo), hi) elementwise.
VEOMNI_OP(void, clamp_, (Tensor& x, float lo, float hi))
// Causal attention of one sequence within a sliding window: query i sees keys j with i - window < j <= i.
// q [S, Hq, D], k/v [S, Hkv, D], Hq % Hkv == 0, window >= 1; softmax in fp32; out [S, Hq, D].
VEOMNI_OP(void, sliding_window_attention_forward,
          (const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, float scale, Tensor& out))

#undef VEOMNI_OP
#undef VEOMNI_COMPOSED_OP
#undef VEOMNI_DEFAULT
