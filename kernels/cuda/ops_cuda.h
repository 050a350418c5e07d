// The CUDA backend of the op API: the functions of kernels/ops.h with the CPU backend's signatures, for tensors on
// Device::cuda(). kernels/dispatch.cc checks shapes, dtypes and devices before calling them. Activations and weights
// may be f32 or bf16, each tensor independently (sums in fp32 or wider); statistics, tables and states stay f32.
// Every op is queued on cuda_rt::stream(); only those that return host data (sum, sum_squares, moe_permute's
// counts) and the index range checks (labels, token ids) wait for the device.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace veomni::ops::cuda {

// gemm.cu (cuBLASLt)
void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, float alpha, float beta);
// true: grouped GEMMs run as one cuBLASLt call per group instead of one grouped call (train.kernels.grouped_gemm
// loop; VEOMNI_GROUPED_GEMM=loop until set).
void set_grouped_gemm_loop(bool loop);
void grouped_matmul(const Tensor& x, const Tensor& w, bool trans_w, const std::vector<int64_t>& group_sizes,
                    Tensor& out);
void grouped_matmul_weight_grad(const Tensor& dy, const Tensor& x, const std::vector<int64_t>& group_sizes, Tensor& dw,
                                bool accumulate);

// norm.cu
void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight);

// rope.cu
void rope_tables(const Tensor& positions, int64_t head_dim, double theta, const std::vector<int64_t>& mrope_section,
                 Tensor& cos, Tensor& sin);
void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse);

// swiglu.cu
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);
void swiglu_fused_forward(const Tensor& gate_up, Tensor& out);
void swiglu_fused_backward(const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up);

// attention.cu
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                       bool causal, float scale, Tensor& out, Tensor& lse);
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv);

// cross_entropy.cu
void cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale, Tensor& losses,
                   Tensor& dlogits);

// token_logprobs.cu
void token_logprobs(const Tensor& logits, const Tensor& labels, int64_t ignore_index, Tensor& logprobs,
                    Tensor& entropy);
void token_logprobs_backward(const Tensor& logits, const Tensor& labels, int64_t ignore_index, const Tensor& dlogprobs,
                             const Tensor& dentropy, Tensor& dlogits);

// embedding.cu
void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);

// moe.cu
void moe_route(const Tensor& router_logits, int64_t k, bool norm_topk_prob, Tensor& probs, Tensor& topk_idx,
               Tensor& topk_weight);
void moe_route_backward(const Tensor& dtopk_weight, const Tensor& dprobs_extra, const Tensor& probs,
                        const Tensor& topk_idx, bool norm_topk_prob, Tensor& dlogits);
void moe_router_stats(const Tensor& probs, const Tensor& topk_idx, int64_t rows, Tensor& stats);
void moe_aux_dprobs(const Tensor& dprob, int64_t rows, Tensor& dprobs);
void moe_permute(const Tensor& x, const Tensor& topk_idx, int64_t num_experts, Tensor& permuted, Tensor& row_map,
                 std::vector<int64_t>& expert_counts);
void moe_permute_backward(const Tensor& dpermuted, const Tensor& row_map, int64_t k, Tensor& dx);
void moe_unpermute(const Tensor& y, const Tensor& row_map, const Tensor& topk_weight, Tensor& out);
void moe_unpermute_backward(const Tensor& dout, const Tensor& y, const Tensor& row_map, const Tensor& topk_weight,
                            Tensor& dy, Tensor& dtopk_weight);

// adamw.cu
void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step);
void adamw_step_multi(const std::vector<AdamWTensors>& slots, double lr, double beta1, double beta2, double eps,
                      int64_t step, float grad_scale);

// elementwise.cu
double sum(const Tensor& x);
double sum_squares(const Tensor& x);
void add_(Tensor& dst, const Tensor& src, float alpha);
void scale_(Tensor& x, float factor);
void fill_(Tensor& x, float value);
void cast(const Tensor& src, Tensor& dst);

// multi_tensor.cu
double sum_squares_multi(const std::vector<const Tensor*>& xs);
void cast_multi(const std::vector<const Tensor*>& src, const std::vector<Tensor*>& dst);

// encoder_ops.cu
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias);
void gelu_forward(const Tensor& x, GeluKind kind, Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, GeluKind kind, Tensor& dx);
void add_bias_(Tensor& y, const Tensor& bias);
void bias_grad(const Tensor& dy, Tensor& dbias);
void im2col_2d(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& cols);
void col2im_2d(const Tensor& dcols, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& dx);

// attention_kv_cache.cu
void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows,
                        float scale, Tensor& out);
void kv_cache_write(const Tensor& rows, const Tensor& dest, Tensor& cache);

// argmax_rows.cu
void argmax_rows(const Tensor& x, Tensor& ids);

// upload.cu
Tensor upload(const Tensor& host, Device device);

}  // namespace veomni::ops::cuda
