// Ulysses all-to-alls on host memory (the CUDA path moves the same layout through NCCL).
#include "parallel/ulysses.h"

#include <vector>

namespace veomni {

Tensor UlyssesHooks::seq_to_heads(const Tensor& x) {
  VEOMNI_CHECK(x.ndim() == 3, "Ulysses seq_to_heads expects [S/P, H, D], got {}", x.describe());
  const int64_t p = group_->size(), s_local = x.dim(0), heads = x.dim(1), d = x.dim(2);
  VEOMNI_CHECK(heads % p == 0, "Ulysses: {} heads are not divisible by sp size {}", heads, p);
  const int64_t h_local = heads / p;
  const size_t esize = dtype_size(x.dtype());
  // Block q of the send buffer holds heads [q*h_local, (q+1)*h_local) of every local token.
  Tensor send = Tensor::empty({p * s_local * h_local, d}, x.dtype(), x.device());
  const auto* src = static_cast<const char*>(x.raw_data());
  auto* dst = static_cast<char*>(send.raw_data());
  const size_t chunk = static_cast<size_t>(h_local * d) * esize;
  DeviceAllocator& mem = device_allocator(x.device().type);
  for (int64_t q = 0; q < p; ++q)
    mem.copy_2d(dst + static_cast<size_t>(q * s_local) * chunk, chunk, src + static_cast<size_t>(q * h_local * d) * esize,
                static_cast<size_t>(heads * d) * esize, chunk, static_cast<size_t>(s_local), x.device());
  // Blocks arrive in rank order, i.e. in sequence order: the result is [S, h_local, D] directly.
  Tensor recv = Tensor::empty({p * s_local * h_local, d}, x.dtype(), x.device());
  const std::vector<int64_t> rows(static_cast<size_t>(p), s_local * h_local);
  group_->all_to_all_rows(send, rows, recv, rows);
  return recv.view({p * s_local, h_local, d});
}

Tensor UlyssesHooks::heads_to_seq(const Tensor& x) {
  VEOMNI_CHECK(x.ndim() == 3, "Ulysses heads_to_seq expects [S, H/P, D], got {}", x.describe());
  const int64_t p = group_->size(), s = x.dim(0), h_local = x.dim(1), d = x.dim(2);
  VEOMNI_CHECK(s % p == 0, "Ulysses: sequence {} is not divisible by sp size {}", s, p);
  const int64_t s_local = s / p;
  // Block q of x (tokens of rank q) is already contiguous: send it as is.
  Tensor recv = Tensor::empty({s * h_local, d}, x.dtype(), x.device());
  const std::vector<int64_t> rows(static_cast<size_t>(p), s_local * h_local);
  group_->all_to_all_rows(x.view({s * h_local, d}), rows, recv, rows);
  // recv block q = my tokens with the heads of rank q: interleave into [s_local, H, D].
  Tensor out = Tensor::empty({s_local, p * h_local, d}, x.dtype(), x.device());
  const size_t esize = dtype_size(x.dtype());
  const size_t chunk = static_cast<size_t>(h_local * d) * esize;
  const auto* src = static_cast<const char*>(recv.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  DeviceAllocator& mem = device_allocator(x.device().type);
  for (int64_t q = 0; q < p; ++q)
    mem.copy_2d(dst + static_cast<size_t>(q * h_local * d) * esize, static_cast<size_t>(p * h_local * d) * esize,
                src + static_cast<size_t>(q * s_local) * chunk, chunk, chunk, static_cast<size_t>(s_local), x.device());
  return out;
}

}  // namespace veomni
