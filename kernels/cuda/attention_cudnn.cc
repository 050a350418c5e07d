// Packed attention through cuDNN's fused flash attention: which cases it takes, the per-shape plan cache, the
// device-side sequence lengths and ragged offsets, the workspace, and the backend choice (VEOMNI_ATTENTION_BACKEND).
//
// Plans are cached per (direction, batch rounded up to a power of two, longest sequence rounded up to a power of two
// and at least 128, Hq, Hkv, D, causal, device, ragged or dense). cuDNN only reads rows below each sequence's length
// (the seq len tensors bound every matmul), so a larger batch (extra sequences of length 0) or a longer s should only
// add CTAs with no rows to work on (the padded buckets' cost was not measured: the benchmarks' shapes fill their
// buckets), while a power-of-two rounding keeps the distinct plans of a training run to a handful: building one runs
// cuDNN's heuristics and may compile kernels (40 ms to 1.3 s a plan on an H100 with cuDNN 9.14). The token count is not
// in the key: the tensors are ragged ([tokens, heads, dim] memory, one start offset per sequence) and the workspace is
// sized per call. A pack that fills its bucket exactly (e.g. one sequence of 4096 tokens) runs the bucket's dense plan
// instead: the same memory, without the sequence lengths, ragged offsets and padding mask (plan_key below).
#include "kernels/cuda/attention_cudnn.h"

#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "core/error.h"
#include "kernels/cuda/attention_cudnn_graph.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

namespace ca = cudnn_attention;

// 9.10.0/9.10.1 compute wrong backward results (cudnn-frontend refuses them); ragged stats need 9.6.
constexpr size_t kMinCudnnVersion = 91002;
constexpr int64_t kMinSeqBucket = 128;
constexpr size_t kWorkspaceAlignment = 256;

size_t align_up(size_t bytes) { return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment; }

std::string version_text(size_t version) {
  return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

struct PlanKey {
  bool backward;
  int64_t batch, seq, q_heads, kv_heads, head_dim;
  bool causal;
  int device;
  bool ragged;
  auto operator<=>(const PlanKey&) const = default;

  std::string describe() const {
    return fmt::format("{} {} b={} s={} Hq={} Hkv={} D={} {}", backward ? "backward" : "forward",
                       ragged ? "ragged" : "dense", batch, seq, q_heads, kv_heads, head_dim,
                       causal ? "causal" : "full");
  }
};

// A plan, or why cuDNN would not give one (remembered so that a rejected shape is not rebuilt every step).
struct CachedPlan {
  std::unique_ptr<ca::Plan> plan;
  std::string rejection;
};

// The process's cuDNN handles (one per device) and plans. Handles live until exit: destroying them from a static
// destructor could run after the CUDA runtime is gone.
class CudnnState {
 public:
  static CudnnState& instance() {
    static CudnnState* state = new CudnnState();
    return *state;
  }

  // The device's handle, or nullptr with the reason (cudnnCreate failing is remembered too).
  cudnnHandle_t handle(int device, std::string* why_not) {
    std::lock_guard lock(mutex_);
    if (const auto it = handles_.find(device); it != handles_.end()) {
      if (!it->second && why_not) *why_not = handle_failures_[device];
      return it->second;
    }
    cudnnHandle_t h = nullptr;
    const cudnnStatus_t status = cudnnCreate(&h);
    if (status != CUDNN_STATUS_SUCCESS) {
      h = nullptr;
      handle_failures_[device] = "cudnnCreate failed: " + ca::describe_status(status);
      if (why_not) *why_not = handle_failures_[device];
    }
    handles_[device] = h;
    return h;
  }

  const ca::Plan* plan(const PlanKey& key, cudnnHandle_t handle, std::string* why_not) {
    std::lock_guard lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, build(key, handle)).first;
    if (!it->second.plan && why_not) *why_not = it->second.rejection;
    return it->second.plan.get();
  }

  std::vector<std::string> plan_names() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    for (const auto& [key, cached] : plans_)
      if (cached.plan) names.push_back(key.describe());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  static CachedPlan build(const PlanKey& key, cudnnHandle_t handle) {
    const ca::GraphShape shape{key.backward, key.batch,    key.seq,    key.q_heads,
                               key.kv_heads, key.head_dim, key.causal, key.ragged};
    const auto start = std::chrono::steady_clock::now();
    CachedPlan cached;
    try {
      cached.plan = ca::build_plan(handle, shape, cudnnGetVersion());
    } catch (const ca::CudnnFailure& e) {
      cached.rejection = fmt::format("cuDNN {} has no plan for attention {}: {}", version_text(cudnnGetVersion()),
                                     key.describe(), e.what());
      return cached;
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("cuDNN attention plan for {}: engine {} (config {} of the heuristics), workspace {} bytes, built in "
                 "{:.0f} ms",
                 key.describe(), cached.plan->engine_index, cached.plan->engine_configs_tried,
                 cached.plan->workspace_bytes, ms);
    return cached;
  }

  std::mutex mutex_;
  std::map<int, cudnnHandle_t> handles_;
  std::map<int, std::string> handle_failures_;
  std::map<PlanKey, CachedPlan> plans_;
};

int compute_capability_major(int device) {
  static std::mutex mutex;
  static std::map<int, int> majors;
  std::lock_guard lock(mutex);
  if (const auto it = majors.find(device); it != majors.end()) return it->second;
  int major = 0;
  VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return majors[device] = major;
}

// Why cuDNN's fused attention cannot take these tensors at all (empty when it may): checked before any plan.
std::string unsupported_reason(const Tensor& q, const Tensor& k, std::initializer_list<const Tensor*> bf16_tensors,
                               std::initializer_list<const Tensor*> all_tensors) {
  for (const Tensor* t : bf16_tensors)
    if (t->dtype() != DType::BF16) return fmt::format("cuDNN attention takes bf16 tensors only, got {}", t->describe());
  if (!q.device().is_cuda()) return "tensors are not on a CUDA device";
  const size_t version = cudnnGetVersion();
  if (version < kMinCudnnVersion)
    return fmt::format("cuDNN {} is older than {}", version_text(version), version_text(kMinCudnnVersion));
  const int major = compute_capability_major(q.device().index);
  if (major < 9) return fmt::format("packed (ragged) cuDNN attention needs sm90 or newer, this GPU is sm{}x", major);
  const int64_t d = q.dim(2);
  // Only the head dims checked against the CPU reference on an H100 (tests/gpu/test_cuda_attention.cc): with cuDNN
  // 9.14, head_dim 256 gave NaN key/value gradients on packed sequences, silently, so unverified sizes run ours.
  if (d != 16 && d != 64 && d != 128)
    return fmt::format("cuDNN attention is used for head_dim 16, 64 and 128 (the sizes verified here), got {}", d);
  if (k.dim(1) == 0 || q.dim(1) % k.dim(1) != 0)
    return fmt::format("{} query heads are not a multiple of {} kv heads", q.dim(1), k.dim(1));
  for (const Tensor* t : all_tensors)
    if (reinterpret_cast<uintptr_t>(t->raw_data()) % 16 != 0)
      return fmt::format("cuDNN attention needs 16-byte aligned tensors, {} is not", t->describe());
  return {};
}

// The plan key of a packed problem: the batch and longest sequence rounded up (see the top of this file). A pack
// that fills that bucket exactly (every sequence as long as the bucket, as many as the bucket, no rows past them)
// runs the bucket's dense plan: no sequence lengths, ragged offsets or padding mask, and the lse written in our
// layout; cuDNN runs those graphs faster (bench/RESULTS.md).
PlanKey plan_key(bool backward, const Tensor& q, const Tensor& k, const std::vector<int32_t>& cu, bool causal) {
  int64_t longest = 0;
  bool equal = true;
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    longest = std::max<int64_t>(longest, cu[b + 1] - cu[b]);
    equal = equal && cu[b + 1] - cu[b] == cu[1] - cu[0];
  }
  const auto batch = static_cast<int64_t>(cu.size()) - 1;
  const auto batch_bucket = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(batch, 1))));
  const int64_t seq_bucket =
      std::max(kMinSeqBucket, static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(longest))));
  const bool fills_bucket = equal && batch == batch_bucket && longest == seq_bucket && cu.back() == q.dim(0);
  return {backward, batch_bucket, seq_bucket, q.dim(1), k.dim(1), q.dim(2), causal, q.device().index, !fills_bucket};
}

// One device buffer per call: sequence lengths and ragged offsets (uploaded from the host; ragged plans only), the
// graph's workspace tensors, then cuDNN's own workspace.
struct Workspace {
  Tensor buffer;
  std::map<int64_t, void*> tensors;  // uid -> device pointer
  void* cudnn = nullptr;
};

// A ragged plan's metadata: seq_len [batch] int32 (shared by Q and KV: self-attention), then the ragged offsets of
// the tensors with Hq*D, Hkv*D and Hq elements per token, [batch + 1] int64 each. Sequences past the real ones have
// length 0 and start at the end.
struct RaggedMetadata {
  size_t lens_bytes, offsets_bytes;

  explicit RaggedMetadata(int64_t batch)
      : lens_bytes(align_up(static_cast<size_t>(batch) * sizeof(int32_t))),
        offsets_bytes(align_up(static_cast<size_t>(batch + 1) * sizeof(int64_t))) {}
  size_t bytes() const { return lens_bytes + 3 * offsets_bytes; }

  // Uploads the metadata to `base` and binds its uids there.
  void upload(uint8_t* base, const PlanKey& key, const std::vector<int32_t>& cu, Workspace& ws) const {
    std::vector<uint8_t> meta(bytes(), 0);
    auto* lens = reinterpret_cast<int32_t*>(meta.data());
    auto* offsets_q = reinterpret_cast<int64_t*>(meta.data() + lens_bytes);
    auto* offsets_kv = reinterpret_cast<int64_t*>(meta.data() + lens_bytes + offsets_bytes);
    auto* offsets_stats = reinterpret_cast<int64_t*>(meta.data() + lens_bytes + 2 * offsets_bytes);
    const auto batch = static_cast<size_t>(key.batch);
    const size_t real = cu.size() - 1;
    for (size_t b = 0; b <= batch; ++b) {
      const int64_t start = cu[std::min(b, real)];
      if (b < batch) lens[b] = b < real ? cu[b + 1] - cu[b] : 0;
      offsets_q[b] = start * key.q_heads * key.head_dim;
      offsets_kv[b] = start * key.kv_heads * key.head_dim;
      offsets_stats[b] = start * key.q_heads;
    }
    cuda_rt::upload_from_host(base, meta.data(), meta.size());
    ws.tensors[ca::kSeqLenQ] = base;
    ws.tensors[ca::kSeqLenKV] = base;
    ws.tensors[ca::kOffsetQ] = ws.tensors[ca::kOffsetO] = base + lens_bytes;
    ws.tensors[ca::kOffsetK] = ws.tensors[ca::kOffsetV] = base + lens_bytes + offsets_bytes;
    ws.tensors[ca::kOffsetStats] = base + lens_bytes + 2 * offsets_bytes;
  }
};

Workspace make_workspace(const ca::Plan& plan, const PlanKey& key, const std::vector<int32_t>& cu, Device device) {
  const auto tokens = static_cast<size_t>(cu.back());
  const RaggedMetadata metadata(key.batch);
  size_t bytes = key.ragged ? metadata.bytes() : 0;
  std::vector<std::pair<int64_t, size_t>> placed;  // uid, offset
  for (const ca::WorkspaceTensor& t : plan.graph.workspace_tensors) {
    placed.emplace_back(t.uid, bytes);
    bytes += align_up(tokens * static_cast<size_t>(t.bytes_per_token));
  }
  const size_t cudnn_offset = bytes;
  bytes += align_up(static_cast<size_t>(plan.workspace_bytes));

  Workspace ws;
  ws.buffer = Tensor::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::U8, device);
  auto* base = static_cast<uint8_t*>(ws.buffer.raw_data());
  if (key.ragged) metadata.upload(base, key, cu, ws);
  for (const auto& [uid, offset] : placed) ws.tensors[uid] = base + offset;
  ws.cudnn = plan.workspace_bytes > 0 ? base + cudnn_offset : nullptr;
  return ws;
}

// Binds the call's tensors, the workspace's and the graph's by-value scalars, and runs the plan on our stream.
void run(cudnnHandle_t handle, const ca::Plan& plan, const Workspace& ws, std::map<int64_t, void*> tensors,
         float scale) {
  for (const auto& [uid, ptr] : ws.tensors) tensors[uid] = ptr;
  tensors[ca::kScale] = &scale;
  std::vector<float> constants;
  constants.reserve(plan.graph.constants.size());  // no reallocation: the map holds pointers into it
  for (const auto& [uid, value] : plan.graph.constants) {
    constants.push_back(value);
    tensors[uid] = &constants.back();
  }
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const auto& [uid, ptr] : tensors) {
    uids.push_back(uid);
    pointers.push_back(ptr);
  }
  const cudnnStatus_t status = cudnnSetStream(handle, cuda_rt::stream());
  if (status != CUDNN_STATUS_SUCCESS) throw Error("cudnnSetStream: " + ca::describe_status(status));
  try {
    ca::execute(handle, plan, uids, pointers, ws.cudnn);
  } catch (const ca::CudnnFailure& e) {
    throw Error(fmt::format("cuDNN attention failed while running: {}", e.what()));
  }
}

// The plan for a call, or nullptr with the reason in *why_not.
const ca::Plan* plan_for(const PlanKey& key, cudnnHandle_t* handle, std::string* why_not) {
  *handle = CudnnState::instance().handle(key.device, why_not);
  if (!*handle) return nullptr;
  return CudnnState::instance().plan(key, *handle, why_not);
}

void set_reason(std::string* why_not, std::string reason) {
  if (why_not) *why_not = std::move(reason);
}

std::atomic<int> g_backend{-1};  // an AttentionBackend once chosen

}  // namespace

AttentionBackend parse_attention_backend(const std::string& text, const std::string& source) {
  if (text == "auto" || text.empty()) return AttentionBackend::Auto;
  if (text == "cudnn") return AttentionBackend::Cudnn;
  if (text == "native") return AttentionBackend::Native;
  throw InputError(fmt::format("{}: unknown attention backend '{}' (expected auto, cudnn or native)", source, text));
}

const char* attention_backend_name(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::Cudnn:
      return "cudnn";
    case AttentionBackend::Native:
      return "native";
    default:
      return "auto";
  }
}

AttentionBackend attention_backend() {
  int value = g_backend.load();
  if (value < 0) {
    const char* env = std::getenv("VEOMNI_ATTENTION_BACKEND");
    const AttentionBackend chosen =
        env ? parse_attention_backend(env, "environment variable VEOMNI_ATTENTION_BACKEND") : AttentionBackend::Auto;
    g_backend.compare_exchange_strong(value, static_cast<int>(chosen));
    value = g_backend.load();
  }
  return static_cast<AttentionBackend>(value);
}

void set_attention_backend(AttentionBackend backend) { g_backend.store(static_cast<int>(backend)); }

std::vector<std::string> cudnn_attention_plans() { return CudnnState::instance().plan_names(); }

bool cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                             bool causal, float scale, Tensor& out, Tensor& lse, std::string* why_not) {
  if (std::string reason = unsupported_reason(q, k, {&q, &k, &v, &out}, {&q, &k, &v, &out, &lse}); !reason.empty()) {
    set_reason(why_not, std::move(reason));
    return false;
  }
  const int64_t tokens = q.dim(0), q_heads = q.dim(1);
  if (tokens == 0) return true;
  const PlanKey key = plan_key(false, q, k, cu_seqlens, causal);
  cudnnHandle_t handle = nullptr;
  const ca::Plan* plan = plan_for(key, &handle, why_not);
  if (!plan) return false;

  // A ragged plan writes the stats [tokens, heads]; a dense one writes our lse layout directly.
  Tensor stats = key.ragged ? Tensor::empty({tokens, q_heads}, DType::F32, q.device()) : lse;
  const Workspace ws = make_workspace(*plan, key, cu_seqlens, q.device());
  run(handle, *plan, ws,
      {{ca::kQ, q.raw_data()},
       {ca::kK, k.raw_data()},
       {ca::kV, v.raw_data()},
       {ca::kO, out.raw_data()},
       {ca::kStats, stats.raw_data()}},
      scale);
  if (key.ragged)
    lse_tokens_to_heads(static_cast<const float*>(stats.raw_data()), static_cast<float*>(lse.raw_data()), q_heads,
                        tokens);
  return true;
}

bool cudnn_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale,
                              Tensor& dq, Tensor& dk, Tensor& dv, std::string* why_not) {
  if (std::string reason = unsupported_reason(q, k, {&dout, &q, &k, &v, &out, &dq, &dk, &dv},
                                              {&dout, &q, &k, &v, &out, &lse, &dq, &dk, &dv});
      !reason.empty()) {
    set_reason(why_not, std::move(reason));
    return false;
  }
  const int64_t tokens = q.dim(0), q_heads = q.dim(1);
  if (tokens == 0) return true;
  const PlanKey key = plan_key(true, q, k, cu_seqlens, causal);
  cudnnHandle_t handle = nullptr;
  const ca::Plan* plan = plan_for(key, &handle, why_not);
  if (!plan) return false;

  Tensor stats = lse;
  if (key.ragged) {
    stats = Tensor::empty({tokens, q_heads}, DType::F32, q.device());
    lse_heads_to_tokens(static_cast<const float*>(lse.raw_data()), static_cast<float*>(stats.raw_data()), q_heads,
                        tokens);
  }
  const Workspace ws = make_workspace(*plan, key, cu_seqlens, q.device());
  run(handle, *plan, ws,
      {{ca::kQ, q.raw_data()},
       {ca::kK, k.raw_data()},
       {ca::kV, v.raw_data()},
       {ca::kO, out.raw_data()},
       {ca::kDO, dout.raw_data()},
       {ca::kStats, stats.raw_data()},
       {ca::kDQ, dq.raw_data()},
       {ca::kDK, dk.raw_data()},
       {ca::kDV, dv.raw_data()}},
      scale);
  return true;
}

namespace {

void log_backend_once(AttentionBackend backend) {
  static std::once_flag once;
  std::call_once(once, [backend] {
    if (backend == AttentionBackend::Native)
      spdlog::info("attention backend: native (our flash-attention kernels; VEOMNI_ATTENTION_BACKEND=native)");
    else
      spdlog::info("attention backend: {} (cuDNN {} fused flash attention for bf16{}; f32 runs our kernels)",
                   attention_backend_name(backend), version_text(cudnnGetVersion()),
                   backend == AttentionBackend::Auto ? ", our kernels for cases cuDNN does not take" : " or an error");
  });
}

// Under auto: warns once per distinct reason and lets our kernels run; under cudnn: an error.
void refuse(AttentionBackend backend, const char* direction, const std::string& why_not) {
  if (backend == AttentionBackend::Cudnn)
    throw Error(fmt::format("attention {}: VEOMNI_ATTENTION_BACKEND=cudnn, but cuDNN cannot take this case: {}",
                            direction, why_not));
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (warned.insert(why_not).second)
    spdlog::warn("attention {}: {}; using our kernels for this case (VEOMNI_ATTENTION_BACKEND=auto)", direction,
                 why_not);
}

}  // namespace

bool attention_forward_via_cudnn(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& out,
                                 Tensor& lse) {
  const AttentionBackend backend = attention_backend();
  log_backend_once(backend);
  if (backend == AttentionBackend::Native || q.dtype() != DType::BF16) return false;
  std::string why_not;
  if (cudnn_attention_forward(q, k, v, cu_seqlens, causal, scale, out, lse, &why_not)) return true;
  refuse(backend, "forward", why_not);
  return false;
}

bool attention_backward_via_cudnn(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const std::vector<int32_t>& cu_seqlens,
                                  bool causal, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const AttentionBackend backend = attention_backend();
  log_backend_once(backend);
  if (backend == AttentionBackend::Native || q.dtype() != DType::BF16) return false;
  std::string why_not;
  if (cudnn_attention_backward(dout, q, k, v, out, lse, cu_seqlens, causal, scale, dq, dk, dv, &why_not)) return true;
  refuse(backend, "backward", why_not);
  return false;
}

}  // namespace veomni::ops::cuda
