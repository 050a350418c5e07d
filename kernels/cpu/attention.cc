// CPU attention in the flash-attention shape: queries in blocks, keys in blocks with an online softmax, so no S x S
// matrix is ever stored; the block products run on register tiles (block_matmul.h) over zero-padded copies of the
// blocks. The backward recomputes probabilities from the saved lse (D_i = rowsum(dO * O)) in two passes, one owning
// dq and one owning dk/dv, so every output element is summed by one thread in a fixed order. A score is always the
// sum over the head dimension in ascending order, so both backward passes see the same bits.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/block_matmul.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 64;

// A [S, H, D] tensor as raw rows.
struct Heads {
  const float* data;
  int64_t heads, dim;
  const float* row(int64_t token, int64_t head) const { return data + (token * heads + head) * dim; }
};

struct Problem {
  Heads q, k, v;
  int64_t group;  // query heads per kv head
  float scale;
  bool causal;
  int64_t padded_dim() const { return round_up(q.dim, kTileCols); }
};

// One unit of parallel work: rows [r0, r1) of the sequence [start, start + len), for head `head`.
struct Block {
  int64_t start, len, head, r0, r1;
};

std::vector<Block> make_blocks(const std::vector<int32_t>& cu, int64_t heads, int64_t block) {
  std::vector<Block> blocks;
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    const int64_t start = cu[b];
    const int64_t len = cu[b + 1] - cu[b];
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r0 = 0; r0 < len; r0 += block) blocks.push_back({start, len, h, r0, std::min(len, r0 + block)});
  }
  return blocks;
}

// Rows [first, first + n) of one head into dst (row stride ld >= dim), zero in columns [dim, ld) and rows [n, rows).
void gather_rows(const Heads& t, int64_t head, int64_t first, int64_t n, int64_t rows, float* dst, int64_t ld) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * ld, t.row(first + i, head), static_cast<size_t>(t.dim) * sizeof(float));
    std::fill(dst + i * ld + t.dim, dst + (i + 1) * ld, 0.0f);
  }
  std::fill(dst + n * ld, dst + rows * ld, 0.0f);
}

// The same rows transposed: dst[d * ld + i] = row(first + i)[d], zero in columns [n, cols).
void gather_columns(const Heads& t, int64_t head, int64_t first, int64_t n, int64_t cols, float* dst, int64_t ld) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = t.row(first + i, head);
    for (int64_t d = 0; d < t.dim; ++d) dst[d * ld + i] = row[d];
  }
  for (int64_t d = 0; d < t.dim; ++d) std::fill(dst + d * ld + n, dst + d * ld + cols, 0.0f);
}

// How many keys of the block starting at key j0 query i may see (all n unless causal).
int64_t visible_keys(bool causal, int64_t i, int64_t j0, int64_t n) {
  return causal ? std::clamp<int64_t>(i - j0 + 1, 0, n) : n;
}

template <typename T>
T* sized(std::vector<T>& buffer, int64_t n) {
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

// Running state of one query row of the online softmax.
struct RowState {
  float max = -std::numeric_limits<float>::infinity();
  double sum = 0.0;
};

// Turns one row of raw scores into probabilities against the running max (zero past `seen`) and updates the state;
// returns the factor the row's accumulated output must be rescaled by.
float online_softmax_row(float* s, int64_t seen, int64_t n, float scale, RowState& st) {
  if (seen == 0) {
    std::fill(s, s + n, 0.0f);
    return 1.0f;
  }
  scale_in_place(seen, scale, s);
  const float new_max = std::max(st.max, *std::max_element(s, s + seen));
  const float correction = std::exp(st.max - new_max);
  double block_sum = 0.0;
  for (int64_t j = 0; j < seen; ++j) {
    s[j] = std::exp(s[j] - new_max);
    block_sum += s[j];
  }
  std::fill(s + seen, s + n, 0.0f);
  st.sum = st.sum * static_cast<double>(correction) + block_sum;
  st.max = new_max;
  return correction;
}

void forward_block(const Problem& p, const Block& blk, float* out, float* lse, int64_t total_len) {
  const int64_t dim = p.q.dim, dpad = p.padded_dim();
  const int64_t rows = blk.r1 - blk.r0, rpad = round_up(rows, kTileRows);
  const int64_t kv_head = blk.head / p.group;
  thread_local std::vector<float> qb_buf, kt_buf, vb_buf, s_buf, acc_buf;
  float* qb = sized(qb_buf, kBlockQ * dim);
  float* kt = sized(kt_buf, dim * kBlockK);
  float* vb = sized(vb_buf, kBlockK * dpad);
  float* s = sized(s_buf, kBlockQ * kBlockK);
  float* acc = sized(acc_buf, kBlockQ * dpad);
  gather_rows(p.q, blk.head, blk.start + blk.r0, rows, rpad, qb, dim);
  std::fill(acc, acc + rpad * dpad, 0.0f);
  RowState state[kBlockQ];

  const int64_t kv_end = p.causal ? blk.r1 : blk.len;
  for (int64_t j0 = 0; j0 < kv_end; j0 += kBlockK) {
    const int64_t n = std::min(kBlockK, kv_end - j0), npad = round_up(n, kTileCols);
    gather_columns(p.k, kv_head, blk.start + j0, n, npad, kt, kBlockK);
    gather_rows(p.v, kv_head, blk.start + j0, n, n, vb, dpad);
    block_matmul(rpad, npad, dim, qb, dim, kt, kBlockK, s, kBlockK, false);
    for (int64_t r = 0; r < rpad; ++r) {
      float* srow = s + r * kBlockK;
      const int64_t seen = r < rows ? visible_keys(p.causal, blk.r0 + r, j0, n) : 0;
      const float correction = online_softmax_row(srow, seen, n, p.scale, state[r]);
      if (correction != 1.0f) scale_in_place(dpad, correction, acc + r * dpad);
    }
    block_matmul(rpad, dpad, n, s, kBlockK, vb, dpad, acc, dpad, true);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t token = blk.start + blk.r0 + r;
    const float denom = static_cast<float>(state[r].sum);
    const float* a = acc + r * dpad;
    float* o = out + (token * p.q.heads + blk.head) * dim;
    for (int64_t d = 0; d < dim; ++d) o[d] = a[d] / denom;
    lse[blk.head * total_len + token] = static_cast<float>(static_cast<double>(state[r].max) + std::log(state[r].sum));
  }
}

// Inputs of the backward shared by both passes.
struct Grad {
  Heads dout;
  const float* lse;    // [Hq, S]
  const float* delta;  // [Hq, S]: rowsum(dO * O)
  int64_t total_len;
  float lse_at(int64_t head, int64_t token) const { return lse[head * total_len + token]; }
  float delta_at(int64_t head, int64_t token) const { return delta[head * total_len + token]; }
};

// P_ij (dP_ij - D_i) for one score: the softmax gradient both passes need, from the same bits.
float score_grad(float score, float dp, float scale, float lse, float delta, float* prob) {
  *prob = std::exp(score * scale - lse);
  return *prob * (dp - delta);
}

// dq for one query block: dq_i = scale * sum_j P_ij (dP_ij - D_i) k_j, with dP_ij = dO_i . v_j.
void dq_block(const Problem& p, const Grad& g, const Block& blk, float* dq) {
  const int64_t dim = p.q.dim, dpad = p.padded_dim();
  const int64_t rows = blk.r1 - blk.r0, rpad = round_up(rows, kTileRows);
  const int64_t kv_head = blk.head / p.group;
  thread_local std::vector<float> qb_buf, ob_buf, kt_buf, vt_buf, kb_buf, s_buf, dp_buf, acc_buf;
  float* qb = sized(qb_buf, kBlockQ * dim);
  float* ob = sized(ob_buf, kBlockQ * dim);
  float* kt = sized(kt_buf, dim * kBlockK);
  float* vt = sized(vt_buf, dim * kBlockK);
  float* kb = sized(kb_buf, kBlockK * dpad);
  float* s = sized(s_buf, kBlockQ * kBlockK);
  float* dp = sized(dp_buf, kBlockQ * kBlockK);
  float* acc = sized(acc_buf, kBlockQ * dpad);
  gather_rows(p.q, blk.head, blk.start + blk.r0, rows, rpad, qb, dim);
  gather_rows(g.dout, blk.head, blk.start + blk.r0, rows, rpad, ob, dim);
  std::fill(acc, acc + rpad * dpad, 0.0f);

  const int64_t kv_end = p.causal ? blk.r1 : blk.len;
  for (int64_t j0 = 0; j0 < kv_end; j0 += kBlockK) {
    const int64_t n = std::min(kBlockK, kv_end - j0), npad = round_up(n, kTileCols);
    gather_columns(p.k, kv_head, blk.start + j0, n, npad, kt, kBlockK);
    gather_columns(p.v, kv_head, blk.start + j0, n, npad, vt, kBlockK);
    gather_rows(p.k, kv_head, blk.start + j0, n, n, kb, dpad);
    block_matmul(rpad, npad, dim, qb, dim, kt, kBlockK, s, kBlockK, false);
    block_matmul(rpad, npad, dim, ob, dim, vt, kBlockK, dp, kBlockK, false);
    for (int64_t r = 0; r < rpad; ++r) {
      float* srow = s + r * kBlockK;
      const int64_t token = blk.start + blk.r0 + r;
      const int64_t seen = r < rows ? visible_keys(p.causal, blk.r0 + r, j0, n) : 0;
      const float lse = seen ? g.lse_at(blk.head, token) : 0.0f;
      const float delta = seen ? g.delta_at(blk.head, token) : 0.0f;
      float prob;
      for (int64_t j = 0; j < seen; ++j) srow[j] = score_grad(srow[j], dp[r * kBlockK + j], p.scale, lse, delta, &prob);
      std::fill(srow + seen, srow + n, 0.0f);
    }
    block_matmul(rpad, dpad, n, s, kBlockK, kb, dpad, acc, dpad, true);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* o = dq + ((blk.start + blk.r0 + r) * p.q.heads + blk.head) * dim;
    for (int64_t d = 0; d < dim; ++d) o[d] = p.scale * acc[r * dpad + d];
  }
}

// dk/dv for one key block of one kv head, summed over the query heads of its group and all queries that see it:
// dv_j = sum_i P_ij dO_i, dk_j = scale * sum_i P_ij (dP_ij - D_i) q_i. Works on transposed scores [key][query].
void dkv_block(const Problem& p, const Grad& g, const Block& blk, float* dk, float* dv) {
  const int64_t dim = p.q.dim, dpad = p.padded_dim();
  const int64_t keys = blk.r1 - blk.r0, kpad = round_up(keys, kTileRows);
  const int64_t kv_head = blk.head;
  thread_local std::vector<float> kb_buf, vb_buf, qt_buf, ot_buf, qr_buf, or_buf, st_buf, dst_buf, dk_buf, dv_buf;
  float* kb = sized(kb_buf, kBlockK * dim);
  float* vb = sized(vb_buf, kBlockK * dim);
  float* qt = sized(qt_buf, dim * kBlockQ);
  float* ot = sized(ot_buf, dim * kBlockQ);
  float* qr = sized(qr_buf, kBlockQ * dpad);
  float* orow = sized(or_buf, kBlockQ * dpad);
  float* st = sized(st_buf, kBlockK * kBlockQ);
  float* dst = sized(dst_buf, kBlockK * kBlockQ);
  float* dk_acc = sized(dk_buf, kBlockK * dpad);
  float* dv_acc = sized(dv_buf, kBlockK * dpad);
  gather_rows(p.k, kv_head, blk.start + blk.r0, keys, kpad, kb, dim);
  gather_rows(p.v, kv_head, blk.start + blk.r0, keys, kpad, vb, dim);
  std::fill(dk_acc, dk_acc + kpad * dpad, 0.0f);
  std::fill(dv_acc, dv_acc + kpad * dpad, 0.0f);

  for (int64_t h = kv_head * p.group; h < (kv_head + 1) * p.group; ++h) {
    // Queries before the block's first key see none of it when causal.
    for (int64_t i0 = p.causal ? blk.r0 : 0; i0 < blk.len; i0 += kBlockQ) {
      const int64_t nq = std::min(kBlockQ, blk.len - i0), nqpad = round_up(nq, kTileCols);
      const int64_t first_token = blk.start + i0;
      gather_columns(p.q, h, first_token, nq, nqpad, qt, kBlockQ);
      gather_columns(g.dout, h, first_token, nq, nqpad, ot, kBlockQ);
      gather_rows(p.q, h, first_token, nq, nq, qr, dpad);
      gather_rows(g.dout, h, first_token, nq, nq, orow, dpad);
      block_matmul(kpad, nqpad, dim, kb, dim, qt, kBlockQ, st, kBlockQ, false);
      block_matmul(kpad, nqpad, dim, vb, dim, ot, kBlockQ, dst, kBlockQ, false);
      for (int64_t c = 0; c < kpad; ++c) {
        float* srow = st + c * kBlockQ;
        float* drow = dst + c * kBlockQ;
        // Query i0 + r sees key blk.r0 + c when r >= first.
        const int64_t first = c >= keys ? nq : p.causal ? std::clamp<int64_t>(blk.r0 + c - i0, 0, nq) : 0;
        std::fill(srow, srow + first, 0.0f);
        std::fill(drow, drow + first, 0.0f);
        for (int64_t r = first; r < nq; ++r) {
          const int64_t token = first_token + r;
          drow[r] = score_grad(srow[r], drow[r], p.scale, g.lse_at(h, token), g.delta_at(h, token), &srow[r]);
        }
      }
      block_matmul(kpad, dpad, nq, st, kBlockQ, orow, dpad, dv_acc, dpad, true);
      block_matmul(kpad, dpad, nq, dst, kBlockQ, qr, dpad, dk_acc, dpad, true);
    }
  }
  for (int64_t c = 0; c < keys; ++c) {
    const int64_t offset = ((blk.start + blk.r0 + c) * p.k.heads + kv_head) * dim;
    for (int64_t d = 0; d < dim; ++d) {
      dk[offset + d] = p.scale * dk_acc[c * dpad + d];
      dv[offset + d] = dv_acc[c * dpad + d];
    }
  }
}

Problem make_problem(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale) {
  Problem p;
  p.q = {q.data<float>(), q.dim(1), q.dim(2)};
  p.k = {k.data<float>(), k.dim(1), k.dim(2)};
  p.v = {v.data<float>(), v.dim(1), v.dim(2)};
  p.group = q.dim(1) / k.dim(1);
  p.scale = scale;
  p.causal = causal;
  return p;
}

// Flops of one pass (QK^T and PV) averaged over its blocks, for the parallel-loop threshold.
int64_t work_per_block(const std::vector<int32_t>& cu, int64_t heads, int64_t dim, bool causal, size_t blocks) {
  int64_t pairs = 0;
  for (size_t b = 0; b + 1 < cu.size(); ++b) pairs += int64_t{cu[b + 1] - cu[b]} * (cu[b + 1] - cu[b]);
  if (causal) pairs /= 2;
  return blocks == 0 ? 0 : 4 * pairs * heads * dim / static_cast<int64_t>(blocks);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                       bool causal, float scale, Tensor& out, Tensor& lse) {
  const Problem p = make_problem(q, k, v, causal, scale);
  const std::vector<Block> blocks = make_blocks(cu_seqlens, q.dim(1), kBlockQ);
  float* o = out.data<float>();
  float* l = lse.data<float>();
  const int64_t total = q.dim(0);
  const int64_t work = work_per_block(cu_seqlens, q.dim(1), p.q.dim, causal, blocks.size());
  parallel_for_dynamic(static_cast<int64_t>(blocks.size()), work,
                       [&](int64_t b) { forward_block(p, blocks[static_cast<size_t>(b)], o, l, total); });
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  const Problem p = make_problem(q, k, v, causal, scale);
  const int64_t total = q.dim(0);
  const int64_t q_heads = q.dim(1);
  const int64_t dim = q.dim(2);
  std::vector<float> delta(static_cast<size_t>(q_heads * total));
  const float* dop = dout.data<float>();
  const float* op = out.data<float>();
  parallel_for(total, 2 * q_heads * dim, [&](int64_t t) {
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t offset = (t * q_heads + h) * dim;
      delta[static_cast<size_t>(h * total + t)] = static_cast<float>(dot_f64(dim, dop + offset, op + offset));
    }
  });
  const Grad g{{dop, q_heads, dim}, lse.data<float>(), delta.data(), total};

  const std::vector<Block> q_blocks = make_blocks(cu_seqlens, q_heads, kBlockQ);
  float* dqp = dq.data<float>();
  parallel_for_dynamic(static_cast<int64_t>(q_blocks.size()),
                       work_per_block(cu_seqlens, q_heads, dim, causal, q_blocks.size()) * 3 / 2,
                       [&](int64_t b) { dq_block(p, g, q_blocks[static_cast<size_t>(b)], dqp); });

  const std::vector<Block> kv_blocks = make_blocks(cu_seqlens, k.dim(1), kBlockK);
  float* dkp = dk.data<float>();
  float* dvp = dv.data<float>();
  parallel_for_dynamic(static_cast<int64_t>(kv_blocks.size()),
                       work_per_block(cu_seqlens, q_heads, dim, causal, kv_blocks.size()) * 2,
                       [&](int64_t b) { dkv_block(p, g, kv_blocks[static_cast<size_t>(b)], dkp, dvp); });
}

}  // namespace veomni::ops::cpu
