// The cuDNN backend graphs of packed (THD, "ragged") flash attention, forward and backward, and their execution
// plans: a small RAII wrapper over cudnn_graph.h (cudnnBackendCreateDescriptor / SetAttribute / Finalize /
// Execute) and the op graphs cuDNN's fused SDPA engines match. Depends on cuDNN and the standard library only, so
// the descriptors can be built and finalized on a machine without a GPU (only the operation graph needs a handle).
//
// The graphs are the composite ones cuDNN fuses into its flash-attention kernels (run and checked with cuDNN 9.14, the
// GPU machines'; the unified SDPA op cannot do causal attention before 9.21): matmul, pointwise (scale, gen_index, comparisons, binary_select, exp,
// log, ...), reduction and reshape operations, laid out as cudnn-frontend's CompositeSDPANode and
// CompositeSDPABackwardNode expand them. Set CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=stderr to see why cuDNN rejects
// a graph; cuDNN reads those variables itself.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace veomni::ops::cuda::cudnn_attention {

// A cuDNN call failed: names the descriptor, attribute or call, with cuDNN's status and last error message.
class CudnnFailure : public std::runtime_error {
 public:
  CudnnFailure(const std::string& what, cudnnStatus_t status);
  cudnnStatus_t status() const { return status_; }

 private:
  cudnnStatus_t status_;
};

// "CUDNN_STATUS_...: <cudnnGetLastErrorString>" for messages.
std::string describe_status(cudnnStatus_t status);

// Owns one backend descriptor; every call is checked and names `what` (e.g. "tensor Q", "pointwise mul_scale").
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(cudnnBackendDescriptorType_t type, std::string what);
  Descriptor(Descriptor&& other) noexcept;
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor();

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string& what() const { return what_; }
  void set(cudnnBackendAttributeName_t name, const char* name_text, cudnnBackendAttributeType_t type, int64_t count,
           const void* values);
  void finalize();

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string what_;
};

// The unique ids of the tensors the caller binds at execution. Sequence lengths are int32 [b]; ragged offsets
// int64 [b + 1] in elements; the workspace tensors (dQ accumulator, full-head dK/dV of GQA, softmax sum) live in
// the front of the workspace, sized by the number of tokens.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kSeqLenQ,
  kSeqLenKV,
  kOffsetQ,
  kOffsetK,
  kOffsetV,
  kOffsetO,
  kOffsetStats,
  kDQAccum,
  kDKFullHead,
  kDVFullHead,
  kSoftmaxSum,
  kFirstInternal = 100,  // virtual tensors and constants
};

// One graph: b sequences of at most s tokens, in [tokens, heads, head_dim] memory (ragged offsets per sequence).
// Stats (natural-log log-sum-exp of the scaled scores) are [tokens, q_heads] f32, ragged too.
// Dense (ragged false): b sequences of exactly s tokens. The same memory, but no sequence lengths, ragged offsets or
// padding mask, and the stats in our [q_heads, tokens] layout; cuDNN runs such graphs faster (bench/RESULTS.md).
struct GraphShape {
  bool backward = false;
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = true;
  bool ragged = true;
};

// A workspace tensor of the backward graph: bytes per token of the packed problem.
struct WorkspaceTensor {
  int64_t uid;
  int64_t bytes_per_token;
};

// Every tensor and operation descriptor of a graph, finalized, in graph order.
struct Graph {
  std::vector<Descriptor> tensors;
  std::vector<Descriptor> operations;
  std::vector<std::pair<int64_t, float>> constants;  // by-value scalars other than the scale: uid, value
  std::vector<WorkspaceTensor> workspace_tensors;
};

// Builds the graph's descriptors (no handle needed). `runtime_version` is cudnnGetVersion(): a few attributes
// depend on it. Throws CudnnFailure naming the descriptor and attribute.
Graph build_graph(const GraphShape& shape, size_t runtime_version);

// A graph with its execution plan. Building one runs cuDNN's heuristics and may compile kernels (slow: cache it).
struct Plan {
  Graph graph;
  Descriptor operation_graph;
  Descriptor engine_config;
  Descriptor plan;
  int64_t workspace_bytes = 0;
  int64_t engine_index = -1;
  int engine_configs_tried = 0;
};

// Throws CudnnFailure whose message starts with the failing stage: "building the graph", "finalizing the
// operation graph", "heuristics", "execution plan".
std::unique_ptr<Plan> build_plan(cudnnHandle_t handle, const GraphShape& shape, size_t runtime_version);

// Runs the plan on the handle's stream. `uids` and `pointers` name every non-virtual tensor (by-value scalars point
// at host floats); `workspace` has at least plan.workspace_bytes bytes.
void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace);

}  // namespace veomni::ops::cuda::cudnn_attention
