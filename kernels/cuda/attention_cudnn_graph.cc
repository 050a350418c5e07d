// The cuDNN backend graphs of packed flash attention (forward, backward) and their execution plans; see
// attention_cudnn_graph.h. Every backend call is checked and names the descriptor and attribute it set.
#include "kernels/cuda/attention_cudnn_graph.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>

namespace veomni::ops::cuda::cudnn_attention {

CudnnFailure::CudnnFailure(const std::string& what, cudnnStatus_t status)
    : std::runtime_error(what), status_(status) {}

std::string describe_status(cudnnStatus_t status) {
  std::string text = cudnnGetErrorString(status);
  char last[1024] = {};
  cudnnGetLastErrorString(last, sizeof last);
  if (last[0] != '\0') text += std::string(" (") + last + ")";
  return text;
}

Descriptor::Descriptor(cudnnBackendDescriptorType_t type, std::string what) : what_(std::move(what)) {
  const cudnnStatus_t status = cudnnBackendCreateDescriptor(type, &desc_);
  if (status != CUDNN_STATUS_SUCCESS) {
    desc_ = nullptr;
    throw CudnnFailure("creating the descriptor of " + what_ + ": " + describe_status(status), status);
  }
}

Descriptor::Descriptor(Descriptor&& other) noexcept
    : desc_(std::exchange(other.desc_, nullptr)), what_(std::move(other.what_)) {}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (desc_) cudnnBackendDestroyDescriptor(desc_);
    desc_ = std::exchange(other.desc_, nullptr);
    what_ = std::move(other.what_);
  }
  return *this;
}

Descriptor::~Descriptor() {
  if (desc_) cudnnBackendDestroyDescriptor(desc_);
}

void Descriptor::set(cudnnBackendAttributeName_t name, const char* name_text, cudnnBackendAttributeType_t type,
                     int64_t count, const void* values) {
  const cudnnStatus_t status = cudnnBackendSetAttribute(desc_, name, type, count, values);
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudnnFailure("setting " + std::string(name_text) + " of " + what_ + ": " + describe_status(status), status);
}

void Descriptor::finalize() {
  const cudnnStatus_t status = cudnnBackendFinalize(desc_);
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudnnFailure("finalizing " + what_ + ": " + describe_status(status), status);
}

// Names the attribute in the error message.
#define VEOMNI_CUDNN_SET(descriptor, attribute, type, count, values) \
  (descriptor).set(attribute, #attribute, type, count, values)

namespace {

using Dims = std::array<int64_t, 4>;
constexpr Dims kOnes = {1, 1, 1, 1};
constexpr int64_t kAlignment = 16;

// Builds tensors and operations in graph order; tensors are referred to by uid.
class GraphBuilder {
 public:
  explicit GraphBuilder(size_t runtime_version) : runtime_version_(runtime_version) {}

  int64_t tensor(int64_t uid, const std::string& name, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                 int64_t ragged_offset = 0, bool is_virtual = false, bool by_value = false) {
    Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
    VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment);
    if (is_virtual) {
      const bool yes = true;
      VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    }
    if (by_value) {
      const bool yes = true;
      VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    }
    if (ragged_offset != 0) {
      cudnnBackendDescriptor_t offset = at(ragged_offset);
      VEOMNI_CUDNN_SET(t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &offset);
    }
    t.finalize();
    index_[uid] = tensors_.size();
    tensors_.push_back(std::move(t));
    return uid;
  }

  // An intermediate result: never in memory, so its strides only tell cuDNN the layout it matches.
  int64_t intermediate(const std::string& name, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                       int64_t ragged_offset = 0) {
    return tensor(next_uid_++, name, type, dims, strides, ragged_offset, true);
  }

  // A scalar passed by value at execution: the attention scale (caller's uid) or a constant (recorded).
  int64_t scalar(int64_t uid, const std::string& name) {
    return tensor(uid, name, CUDNN_DATA_FLOAT, kOnes, kOnes, 0, false, true);
  }
  int64_t constant(const std::string& name, float value) {
    const int64_t uid = scalar(next_uid_++, name);
    constants_.emplace_back(uid, value);
    return uid;
  }

  // y = mode(x[, b[, t]]); `axis` for GEN_INDEX. b and t are 0 when the mode takes fewer inputs.
  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t compute, int64_t x, int64_t b,
                 int64_t t, int64_t y, int64_t axis = -1) {
    Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor " + name);
    VEOMNI_CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    VEOMNI_CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) VEOMNI_CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    pw.finalize();

    Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise " + name);
    cudnnBackendDescriptor_t pw_desc = pw.get();
    VEOMNI_CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw_desc);
    set_tensor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, "CUDNN_ATTR_OPERATION_POINTWISE_XDESC", x);
    if (b != 0) set_tensor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, "CUDNN_ATTR_OPERATION_POINTWISE_BDESC", b);
    if (t != 0) set_tensor(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, "CUDNN_ATTR_OPERATION_POINTWISE_TDESC", t);
    set_tensor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, "CUDNN_ATTR_OPERATION_POINTWISE_YDESC", y);
    const float one = 1.0f;
    VEOMNI_CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
    VEOMNI_CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    op.finalize();
    keep_.push_back(std::move(pw));
    operations_.push_back(std::move(op));
  }

  // c = a @ b over the last two dims; m/n/k overrides are the per-sequence lengths of the ragged problem.
  void matmul(const std::string& name, int64_t a, int64_t b, int64_t c, int64_t m_override, int64_t n_override,
              int64_t k_override) {
    Descriptor mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor " + name);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    VEOMNI_CUDNN_SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    mm.finalize();

    Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul " + name);
    set_tensor(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, "CUDNN_ATTR_OPERATION_MATMUL_ADESC", a);
    set_tensor(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, "CUDNN_ATTR_OPERATION_MATMUL_BDESC", b);
    set_tensor(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, "CUDNN_ATTR_OPERATION_MATMUL_CDESC", c);
    cudnnBackendDescriptor_t mm_desc = mm.get();
    VEOMNI_CUDNN_SET(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm_desc);
    if (m_override != 0)
      set_tensor(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, "CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC",
                 m_override);
    if (n_override != 0)
      set_tensor(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, "CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC",
                 n_override);
    if (k_override != 0)
      set_tensor(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, "CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC",
                 k_override);
    op.finalize();
    keep_.push_back(std::move(mm));
    operations_.push_back(std::move(op));
  }

  // y = reduce(x) over the dims where y has extent 1.
  void reduction(const std::string& name, cudnnReduceTensorOp_t reduce, int64_t x, int64_t y) {
    Descriptor red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction descriptor " + name);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    VEOMNI_CUDNN_SET(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    VEOMNI_CUDNN_SET(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
#if CUDNN_VERSION >= 91100
    if (runtime_version_ >= 91100) {
      const bool deterministic = false;
      VEOMNI_CUDNN_SET(red, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &deterministic);
    }
#endif
    red.finalize();

    Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction " + name);
    cudnnBackendDescriptor_t red_desc = red.get();
    VEOMNI_CUDNN_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red_desc);
    set_tensor(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, "CUDNN_ATTR_OPERATION_REDUCTION_XDESC", x);
    set_tensor(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, "CUDNN_ATTR_OPERATION_REDUCTION_YDESC", y);
    op.finalize();
    keep_.push_back(std::move(red));
    operations_.push_back(std::move(op));
  }

  // y views x with other dims/strides (the transposes of P, dS and K in the backward graph).
  void reshape(const std::string& name, int64_t x, int64_t y) {
    Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape " + name);
    set_tensor(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, "CUDNN_ATTR_OPERATION_RESHAPE_XDESC", x);
    set_tensor(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, "CUDNN_ATTR_OPERATION_RESHAPE_YDESC", y);
    op.finalize();
    operations_.push_back(std::move(op));
  }

  void add_workspace_tensor(int64_t uid, int64_t bytes_per_token) { workspace_.push_back({uid, bytes_per_token}); }

  Graph finish() {
    Graph g;
    g.tensors = std::move(tensors_);
    for (Descriptor& d : keep_) g.tensors.push_back(std::move(d));
    g.operations = std::move(operations_);
    g.constants = std::move(constants_);
    g.workspace_tensors = std::move(workspace_);
    return g;
  }

 private:
  cudnnBackendDescriptor_t at(int64_t uid) const {
    const auto it = index_.find(uid);
    if (it == index_.end())
      throw CudnnFailure("graph construction: tensor uid " + std::to_string(uid) + " used before it was created",
                         CUDNN_STATUS_BAD_PARAM);
    return tensors_[it->second].get();
  }
  void set_tensor(Descriptor& op, cudnnBackendAttributeName_t name, const char* name_text, int64_t uid) const {
    cudnnBackendDescriptor_t t = at(uid);
    op.set(name, name_text, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
  }

  size_t runtime_version_;
  int64_t next_uid_ = kFirstInternal;
  std::vector<Descriptor> tensors_;
  std::map<int64_t, size_t> index_;
  std::vector<Descriptor> keep_;  // pointwise/matmul/reduction descriptors the operations refer to
  std::vector<Descriptor> operations_;
  std::vector<std::pair<int64_t, float>> constants_;
  std::vector<WorkspaceTensor> workspace_;
};

// Dims and strides of the packed problem: b sequences of at most s tokens, [tokens, heads, head_dim] in memory.
struct Layout {
  int64_t b, s, hq, hk, d;
  bool ragged;

  // The ragged offset of a tensor: `uid` when ragged, none (0) when dense.
  int64_t offset(int64_t uid) const { return ragged ? uid : 0; }

  Dims q_dims() const { return {b, hq, s, d}; }
  Dims q_strides() const { return {s * hq * d, d, hq * d, 1}; }
  Dims kv_dims() const { return {b, hk, s, d}; }
  Dims kv_strides() const { return {s * hk * d, d, hk * d, 1}; }
  // K and V as the right operand of Q K^T and dO V^T: [b, hk, d, s] over the same memory.
  Dims transposed_kv_dims() const { return {b, hk, d, s}; }
  Dims transposed_kv_strides() const { return {s * hk * d, d, 1, hk * d}; }
  // Full-head dK/dV of GQA: the dK/dV layout with hq heads.
  Dims full_head_strides() const { return {s * hq * d, d, hq * d, 1}; }
  Dims score_dims() const { return {b, hq, s, s}; }
  Dims score_strides() const { return {hq * s * s, s * s, s, 1}; }
  Dims transposed_score_strides() const { return {hq * s * s, s * s, 1, s}; }
  Dims row_dims() const { return {b, hq, s, 1}; }
  Dims row_strides() const { return {hq * s, s, 1, 1}; }
  // The softmax sum in memory: [tokens, hq] f32.
  Dims softmax_sum_strides() const { return {hq * s, 1, hq, 1}; }
  // Stats in memory: [tokens, hq] f32 when ragged, our [hq, tokens] layout when dense.
  Dims stats_strides() const { return ragged ? softmax_sum_strides() : Dims{s, b * s, 1, 1}; }
  Dims seq_len_dims() const { return {b, 1, 1, 1}; }
  Dims offset_dims() const { return {b + 1, 1, 1, 1}; }
};

// The ids of the tensors both graphs share (sequence lengths 0 when dense: no matmul overrides).
struct Common {
  int64_t seq_q, seq_kv, scale;
};

Common add_common_inputs(GraphBuilder& g, const Layout& l) {
  if (!l.ragged) return {0, 0, g.scalar(kScale, "attn_scale")};
  for (const auto& [uid, name] : {std::pair<int64_t, const char*>{kOffsetQ, "offset_q"}, {kOffsetK, "offset_k"},
                                  {kOffsetV, "offset_v"}, {kOffsetO, "offset_o"}, {kOffsetStats, "offset_stats"}})
    g.tensor(uid, name, CUDNN_DATA_INT64, l.offset_dims(), kOnes);
  g.tensor(kSeqLenQ, "seq_len_q", CUDNN_DATA_INT32, l.seq_len_dims(), kOnes);
  g.tensor(kSeqLenKV, "seq_len_kv", CUDNN_DATA_INT32, l.seq_len_dims(), kOnes);
  g.scalar(kScale, "attn_scale");
  return {kSeqLenQ, kSeqLenKV, kScale};
}

// Scores outside a sequence (row >= seq_len_q or column >= seq_len_kv) become -inf.
int64_t padding_mask(GraphBuilder& g, const Layout& l, const Common& c, int64_t scores) {
  const Dims dims = l.score_dims(), strides = l.score_strides();
  const int64_t row = g.intermediate("gen_row_idx_padding", CUDNN_DATA_INT32, dims, strides);
  g.pointwise("gen_row_idx_padding", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, scores, 0, 0, row, 2);
  const int64_t col = g.intermediate("gen_col_idx_padding", CUDNN_DATA_INT32, dims, strides);
  g.pointwise("gen_col_idx_padding", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, scores, 0, 0, col, 3);
  const int64_t row_in = g.intermediate("lt_row_sq_padding", CUDNN_DATA_BOOLEAN, dims, strides);
  g.pointwise("lt_row_sq_padding", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, row, c.seq_q, 0, row_in);
  const int64_t col_in = g.intermediate("lt_col_skv_padding", CUDNN_DATA_BOOLEAN, dims, strides);
  g.pointwise("lt_col_skv_padding", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, col, c.seq_kv, 0, col_in);
  const int64_t inside = g.intermediate("and_row_col_padding", CUDNN_DATA_BOOLEAN, dims, strides);
  g.pointwise("and_row_col_padding", CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, row_in, col_in, 0, inside);
  const int64_t neg_inf = g.constant("neg_inf_padding", -std::numeric_limits<float>::infinity());
  const int64_t out = g.intermediate("select_padding", CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise("select_padding", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scores, neg_inf, inside, out);
  return out;
}

// Top-left causal mask: key column > query row becomes -inf (row and column count from each sequence's start).
int64_t causal_mask(GraphBuilder& g, const Layout& l, int64_t scores) {
  const Dims dims = l.score_dims(), strides = l.score_strides();
  const int64_t row = g.intermediate("gen_row_index", CUDNN_DATA_INT32, dims, strides);
  g.pointwise("gen_row_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, 0, 0, row, 2);
  const int64_t col = g.intermediate("gen_col_index", CUDNN_DATA_INT32, dims, strides);
  g.pointwise("gen_col_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, 0, 0, col, 3);
  const int64_t visible = g.intermediate("row>=col", CUDNN_DATA_BOOLEAN, dims, strides);
  g.pointwise("row>=col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, 0, visible);
  const int64_t neg_inf = g.constant("neg_inf_causal", -std::numeric_limits<float>::infinity());
  const int64_t out = g.intermediate("select_causal", CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise("select_causal", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scores, neg_inf, visible, out);
  return out;
}

// Masked, scaled scores Q K^T: the start of both graphs.
int64_t scaled_scores(GraphBuilder& g, const Layout& l, const Common& c, int64_t q, int64_t kt) {
  const int64_t raw = g.intermediate("bmm1", CUDNN_DATA_FLOAT, l.score_dims(), l.score_strides());
  g.matmul("bmm1 Q@K^T", q, kt, raw, c.seq_q, c.seq_kv, 0);
  const int64_t scaled = g.intermediate("attn_scale", CUDNN_DATA_FLOAT, l.score_dims(), l.score_strides());
  g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, raw, c.scale, 0, scaled);
  return l.ragged ? padding_mask(g, l, c, scaled) : scaled;
}

void build_forward(GraphBuilder& g, const Layout& l, bool causal) {
  const Common c = add_common_inputs(g, l);
  const int64_t q = g.tensor(kQ, "Q", CUDNN_DATA_BFLOAT16, l.q_dims(), l.q_strides(), l.offset(kOffsetQ));
  const int64_t kt = g.tensor(kK, "K^T", CUDNN_DATA_BFLOAT16, l.transposed_kv_dims(), l.transposed_kv_strides(),
                              l.offset(kOffsetK));
  const int64_t v = g.tensor(kV, "V", CUDNN_DATA_BFLOAT16, l.kv_dims(), l.kv_strides(), l.offset(kOffsetV));
  const int64_t o = g.tensor(kO, "O", CUDNN_DATA_BFLOAT16, l.q_dims(), l.q_strides(), l.offset(kOffsetO));
  const int64_t stats =
      g.tensor(kStats, "Stats", CUDNN_DATA_FLOAT, l.row_dims(), l.stats_strides(), l.offset(kOffsetStats));

  int64_t scores = scaled_scores(g, l, c, q, kt);
  if (causal) scores = causal_mask(g, l, scores);

  // Softmax with its statistics: Stats = max + log(sum exp(x - max)).
  const Dims sd = l.score_dims(), ss = l.score_strides(), rd = l.row_dims(), rs = l.row_strides();
  const int64_t max = g.intermediate("Max", CUDNN_DATA_FLOAT, rd, rs);
  g.reduction("Max", CUDNN_REDUCE_TENSOR_MAX, scores, max);
  const int64_t shifted = g.intermediate("sub_M", CUDNN_DATA_FLOAT, sd, ss);
  g.pointwise("sub", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, scores, max, 0, shifted);
  const int64_t exps = g.intermediate("exp_sub_M", CUDNN_DATA_FLOAT, sd, ss);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, shifted, 0, 0, exps);
  const int64_t sum = g.intermediate("SumExp", CUDNN_DATA_FLOAT, rd, rs);
  g.reduction("sum", CUDNN_REDUCE_TENSOR_ADD, exps, sum);
  const int64_t log_sum = g.intermediate("log", CUDNN_DATA_FLOAT, rd, rs);
  g.pointwise("log", CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, 0, 0, log_sum);
  g.pointwise("add", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, max, log_sum, 0, stats);
  // P enters the second matmul in the input type (cuDNN requires bmm2's A to be the I/O type).
  const int64_t probs = g.intermediate("softmax", CUDNN_DATA_BFLOAT16, sd, ss);
  g.pointwise("div", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, exps, sum, 0, probs);

  g.matmul("bmm2 P@V", probs, v, o, c.seq_q, 0, c.seq_kv);
}

// dX for K or V: straight from the matmul when every query head has its own kv head; with GQA through a full-head
// tensor in the workspace (ragged like dX, Hq heads) summed over each group.
void key_gradient(GraphBuilder& g, const Layout& l, const Common& c, const std::string& name, int64_t lhs, int64_t rhs,
                  int64_t dx, int64_t full_head_uid, int64_t offset_uid) {
  if (l.hq == l.hk) {
    g.matmul(name, lhs, rhs, dx, c.seq_kv, 0, c.seq_q);
    return;
  }
  const int64_t full = g.tensor(full_head_uid, name + " full head", CUDNN_DATA_BFLOAT16, l.q_dims(),
                                l.full_head_strides(), l.offset(offset_uid));
  // Sized as cudnn-frontend sizes it (4 bytes per element although the tensor is bf16).
  g.add_workspace_tensor(full_head_uid, l.hq * l.d * 4);
  g.matmul(name, lhs, rhs, full, c.seq_kv, 0, c.seq_q);
  g.reduction("sum over the heads of a group: " + name, CUDNN_REDUCE_TENSOR_ADD, full, dx);
}

void build_backward(GraphBuilder& g, const Layout& l, bool causal) {
  const Common c = add_common_inputs(g, l);
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
  const int64_t q = g.tensor(kQ, "Q", bf16, l.q_dims(), l.q_strides(), l.offset(kOffsetQ));
  const int64_t kt =
      g.tensor(kK, "K^T", bf16, l.transposed_kv_dims(), l.transposed_kv_strides(), l.offset(kOffsetK));
  const int64_t vt =
      g.tensor(kV, "V^T", bf16, l.transposed_kv_dims(), l.transposed_kv_strides(), l.offset(kOffsetV));
  const int64_t o = g.tensor(kO, "O", bf16, l.q_dims(), l.q_strides(), l.offset(kOffsetO));
  const int64_t dout = g.tensor(kDO, "dO", bf16, l.q_dims(), l.q_strides(), l.offset(kOffsetO));
  const int64_t stats =
      g.tensor(kStats, "Stats", CUDNN_DATA_FLOAT, l.row_dims(), l.stats_strides(), l.offset(kOffsetStats));
  const int64_t dq = g.tensor(kDQ, "dQ", bf16, l.q_dims(), l.q_strides(), l.offset(kOffsetQ));
  const int64_t dk = g.tensor(kDK, "dK", bf16, l.kv_dims(), l.kv_strides(), l.offset(kOffsetK));
  const int64_t dv = g.tensor(kDV, "dV", bf16, l.kv_dims(), l.kv_strides(), l.offset(kOffsetV));
  const Dims sd = l.score_dims(), ss = l.score_strides();

  // softmax_sum = rowsum(dO * O), kept in the workspace as [tokens, hq] f32.
  const int64_t product = g.intermediate("mul_dO_O", CUDNN_DATA_FLOAT, l.q_dims(), {l.hq * l.s * l.d, l.s * l.d,
                                                                                      l.hq * l.d, 1});
  g.pointwise("mul_dO_O", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dout, o, 0, product);
  const int64_t row_sum = g.intermediate("reduce_dO_o", CUDNN_DATA_FLOAT, l.row_dims(), l.row_strides());
  g.reduction("reduce_dO_o", CUDNN_REDUCE_TENSOR_ADD, product, row_sum);
  const int64_t one = g.constant("one", 1.0f);
  const int64_t softmax_sum =
      g.tensor(kSoftmaxSum, "softmax_sum", CUDNN_DATA_FLOAT, l.row_dims(), l.softmax_sum_strides(),
               l.offset(kOffsetStats));
  g.add_workspace_tensor(kSoftmaxSum, l.hq * 4);
  g.pointwise("scale_dropout_inv", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, row_sum, one, 0, softmax_sum);

  // P = exp(scores - Stats), recomputed.
  int64_t scores = scaled_scores(g, l, c, q, kt);
  const int64_t centered = g.intermediate("sub_s_m", CUDNN_DATA_FLOAT, sd, ss);
  g.pointwise("sub_s_m", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, scores, stats, 0, centered);
  scores = causal ? causal_mask(g, l, centered) : centered;
  const int64_t probs = g.intermediate("exp_s", CUDNN_DATA_FLOAT, sd, ss);
  g.pointwise("exp_s", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, scores, 0, 0, probs);

  // dV = P^T dO.
  const int64_t probs_t = g.intermediate("reshape_p", bf16, sd, l.transposed_score_strides());
  g.reshape("reshape_p", probs, probs_t);
  key_gradient(g, l, c, "matmul_pT_dO", probs_t, dout, dv, kDVFullHead, kOffsetV);

  // dS = P * (dO V^T - softmax_sum) * scale.
  const int64_t dp = g.intermediate("matmul_dO_VT", CUDNN_DATA_FLOAT, sd, ss);
  g.matmul("matmul_dO_VT", dout, vt, dp, c.seq_q, c.seq_kv, 0);
  const int64_t dp_centered = g.intermediate("sub_dP_softmax_sum", CUDNN_DATA_FLOAT, sd, ss);
  g.pointwise("sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, softmax_sum, 0, dp_centered);
  const int64_t ds_unscaled = g.intermediate("mul_dP_exp_s", CUDNN_DATA_FLOAT, sd, ss);
  g.pointwise("mul_dP_exp_s", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp_centered, probs, 0, ds_unscaled);
  const int64_t ds = g.intermediate("mul_dS_attn_scale", CUDNN_DATA_FLOAT, sd, ss);
  g.pointwise("mul_dS_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, ds_unscaled, c.scale, 0, ds);

  // dK = dS^T Q.
  const int64_t ds_t = g.intermediate("reshape_dS", bf16, sd, l.transposed_score_strides());
  g.reshape("reshape_dS", ds, ds_t);
  key_gradient(g, l, c, "matmul_dST_Q", ds_t, q, dk, kDKFullHead, kOffsetK);

  // dQ = dS K, accumulated in f32 in the workspace ([tokens, hq, d], ragged like dQ), then cast.
  const int64_t k = g.intermediate("reshape_k", CUDNN_DATA_FLOAT, l.kv_dims(), l.kv_strides(), l.offset(kOffsetK));
  g.reshape("reshape_k", kt, k);
  const int64_t dq_accum =
      g.tensor(kDQAccum, "dQ_accum", CUDNN_DATA_FLOAT, l.q_dims(), l.q_strides(), l.offset(kOffsetQ));
  g.add_workspace_tensor(kDQAccum, l.hq * l.d * 4);
  g.matmul("matmul_dS_K", ds, k, dq_accum, c.seq_q, 0, c.seq_kv);
  g.pointwise("identity_dQ", CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_accum, 0, 0, dq);
}

// Runs `body`; a failure gets the stage's name in front of its message.
template <typename F>
void stage(const char* name, F&& body) {
  try {
    body();
  } catch (const CudnnFailure& e) {
    throw CudnnFailure(std::string(name) + ": " + e.what(), e.status());
  }
}

// The engine configs cuDNN's heuristics propose in `mode`, best first.
std::vector<Descriptor> engine_configs(const Descriptor& operation_graph, cudnnBackendHeurMode_t mode,
                                       const char* mode_name) {
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, std::string("heuristics ") + mode_name);
  cudnnBackendDescriptor_t graph = operation_graph.get();
  VEOMNI_CUDNN_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  VEOMNI_CUDNN_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heur.finalize();
  int64_t count = 0;
  cudnnStatus_t status =
      cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr);
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudnnFailure(std::string("counting the results of heuristics ") + mode_name + ": " + describe_status(status),
                       status);
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config " + std::to_string(i));
    raw.push_back(configs.back().get());
  }
  if (count == 0) return configs;
  int64_t returned = 0;
  status = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                    &returned, raw.data());
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudnnFailure(std::string("reading the results of heuristics ") + mode_name + ": " + describe_status(status),
                       status);
  configs.resize(static_cast<size_t>(std::min(returned, count)));
  return configs;
}

// The global index of the engine behind a config (for logs; -1 when cuDNN does not say).
int64_t engine_index(const Descriptor& config) {
  cudnnBackendDescriptor_t engine = nullptr;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return -1;
  int64_t count = 0, index = -1;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &engine) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index) !=
          CUDNN_STATUS_SUCCESS)
    index = -1;
  cudnnBackendDestroyDescriptor(engine);
  return index;
}

}  // namespace

Graph build_graph(const GraphShape& shape, size_t runtime_version) {
  GraphBuilder g(runtime_version);
  const Layout l{shape.batch, shape.seq, shape.q_heads, shape.kv_heads, shape.head_dim, shape.ragged};
  if (shape.backward)
    build_backward(g, l, shape.causal);
  else
    build_forward(g, l, shape.causal);
  return g.finish();
}

std::unique_ptr<Plan> build_plan(cudnnHandle_t handle, const GraphShape& shape, size_t runtime_version) {
  auto p = std::make_unique<Plan>();
  stage("building the graph", [&] { p->graph = build_graph(shape, runtime_version); });
  stage("finalizing the operation graph", [&] {
    p->operation_graph = Descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    std::vector<cudnnBackendDescriptor_t> ops;
    for (const Descriptor& op : p->graph.operations) ops.push_back(op.get());
    VEOMNI_CUDNN_SET(p->operation_graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                     static_cast<int64_t>(ops.size()), ops.data());
    VEOMNI_CUDNN_SET(p->operation_graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    p->operation_graph.finalize();
  });
  std::string failures;
  cudnnStatus_t last_status = CUDNN_STATUS_NOT_SUPPORTED;
  for (const auto& [mode, mode_name] : {std::pair{CUDNN_HEUR_MODE_A, "A"}, std::pair{CUDNN_HEUR_MODE_FALLBACK,
                                                                                     "FALLBACK"}}) {
    std::vector<Descriptor> configs;
    try {
      configs = engine_configs(p->operation_graph, mode, mode_name);
    } catch (const CudnnFailure& e) {
      failures += std::string("; heuristics: ") + e.what();
      last_status = e.status();
      continue;
    }
    if (configs.empty()) failures += std::string("; heuristics mode ") + mode_name + " proposed no engine config";
    for (Descriptor& config : configs) {
      ++p->engine_configs_tried;
      try {
        Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan (" + config.what() + ", mode " +
                                                                     mode_name + ")");
        VEOMNI_CUDNN_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        cudnnBackendDescriptor_t cfg = config.get();
        VEOMNI_CUDNN_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
        plan.finalize();
        int64_t count = 0;
        const cudnnStatus_t status = cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                              CUDNN_TYPE_INT64, 1, &count, &p->workspace_bytes);
        if (status != CUDNN_STATUS_SUCCESS)
          throw CudnnFailure("reading CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE: " + describe_status(status), status);
        p->engine_index = engine_index(config);
        p->engine_config = std::move(config);
        p->plan = std::move(plan);
        return p;
      } catch (const CudnnFailure& e) {
        failures += std::string("; ") + e.what();
        last_status = e.status();
      }
    }
  }
  throw CudnnFailure("execution plan: no engine config of the heuristics gave a plan (" +
                         std::to_string(p->engine_configs_tried) + " tried" + failures + ")",
                     last_status);
}

void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  VEOMNI_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
                   uids.data());
  VEOMNI_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                   static_cast<int64_t>(pointers.size()), pointers.data());
  VEOMNI_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  const cudnnStatus_t status = cudnnBackendExecute(handle, plan.plan.get(), pack.get());
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudnnFailure("cudnnBackendExecute: " + describe_status(status), status);
}

}  // namespace veomni::ops::cuda::cudnn_attention
