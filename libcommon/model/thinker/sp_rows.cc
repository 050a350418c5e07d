// All-gather as seq_to_heads of P copies; reduce-scatter as heads_to_seq and a sum over the P heads.
#include "model/thinker/sp_rows.h"

#include <vector>

#include "core/error.h"
#include "model/thinker/media_rows.h"

namespace veomni {

namespace {

// i64 [n*P] = 0 (P times), 1 (P times), ...: row i of [n, D] repeated as the P heads of row i.
Tensor repeat_ids(int64_t n, int64_t p, Device device) {
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(n * p));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < p; ++h) ids.push_back(i);
  return positions_tensor(ids, device);
}

}  // namespace

Tensor sp_gather_rows(SequenceHooks& hooks, const Tensor& x) {
  VEOMNI_CHECK(x.ndim() == 2, "sp_gather_rows expects [n, D], got {}", x.describe());
  const int64_t p = hooks.sp_size(), n = x.dim(0), d = x.dim(1);
  const Tensor copies = gather_rows(x, repeat_ids(n, p, x.device()));
  return hooks.seq_to_heads(copies.view({n, p, d})).view({p * n, d});
}

Tensor sp_reduce_scatter_rows(SequenceHooks& hooks, const Tensor& y) {
  VEOMNI_CHECK(y.ndim() == 2, "sp_reduce_scatter_rows expects [P*n, D], got {}", y.describe());
  const int64_t p = hooks.sp_size(), rows = y.dim(0), d = y.dim(1);
  VEOMNI_CHECK(rows % p == 0, "sp_reduce_scatter_rows: {} rows over {} ranks", rows, p);
  const int64_t n = rows / p;
  const Tensor parts = hooks.heads_to_seq(y.view({rows, 1, d}));  // [n, P, D]: head q from rank q
  Tensor out = Tensor::zeros({n, d}, y.dtype(), y.device());
  add_rows(out, repeat_ids(n, p, y.device()), parts.view({n * p, d}));
  return out;
}

}  // namespace veomni
