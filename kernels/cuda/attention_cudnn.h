// Packed variable-length attention through cuDNN's fused flash attention (forward and backward), and the choice
// between it and our own kernels (VEOMNI_ATTENTION_BACKEND). Same tensors and contract as ops::attention_forward /
// attention_backward (kernels/ops.h); the graphs themselves are in attention_cudnn_graph.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace veomni::ops::cuda {

// auto: cuDNN where it takes the case, else our kernels; cudnn: cuDNN or an error saying why not; native: ours.
enum class AttentionBackend { Auto, Cudnn, Native };

// VEOMNI_ATTENTION_BACKEND (auto | cudnn | native; default auto), read at the first call, unless set below.
AttentionBackend attention_backend();
// Overrides the environment for the rest of the process (tests, benchmarks).
void set_attention_backend(AttentionBackend backend);
const char* attention_backend_name(AttentionBackend backend);
// Parses "auto" / "cudnn" / "native"; throws InputError naming `source` otherwise.
AttentionBackend parse_attention_backend(const std::string& text, const std::string& source);

// cuDNN's flash attention on bf16 tensors. Returns false, without touching any output, when cuDNN cannot take the
// case (a dtype other than bf16, an unsupported head dim, a GPU before sm90, a cuDNN before 9.10.2, a graph its
// heuristics reject, ...); `why_not`, when given, then says why (with cuDNN's status where cuDNN said no). A
// rejected shape is remembered, not retried. A failure while running (cudnnBackendExecute) throws.
// lse [Hq, S] f32 is cuDNN's softmax statistics: max + log(sum exp) of the scaled scores, natural log, the same
// quantity our kernels write, so a forward of one backend and the backward of the other agree.
bool cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                             bool causal, float scale, Tensor& out, Tensor& lse, std::string* why_not = nullptr);
bool cudnn_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale,
                              Tensor& dq, Tensor& dk, Tensor& dv, std::string* why_not = nullptr);

// The plans built so far in this process, one line each ("forward dense b=1 s=4096 Hq=32 Hkv=8 D=128 causal";
// "backward ragged b=4 s=2048 ..."), sorted: a pack that fills its plan bucket exactly (a power-of-two count of
// sequences, all of the bucket's power-of-two length) runs a dense plan, any other pack a ragged one.
std::vector<std::string> cudnn_attention_plans();

// The dispatch at the top of attention_forward/backward (attention.cu): true when cuDNN did the work under the
// chosen backend. Logs the backend once per process and each distinct reason auto fell back once; with
// VEOMNI_ATTENTION_BACKEND=cudnn a case cuDNN cannot take is an error.
bool attention_forward_via_cudnn(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& out,
                                 Tensor& lse);
bool attention_backward_via_cudnn(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const std::vector<int32_t>& cu_seqlens,
                                  bool causal, float scale, Tensor& dq, Tensor& dk, Tensor& dv);

// attention_cudnn_lse.cu: our lse [heads, tokens] <-> cuDNN's stats [tokens, heads] (f32, on the compute stream).
void lse_heads_to_tokens(const float* heads_major, float* tokens_major, int64_t heads, int64_t tokens);
void lse_tokens_to_heads(const float* tokens_major, float* heads_major, int64_t heads, int64_t tokens);

}  // namespace veomni::ops::cuda
