// Ops of KV-cache decoding whose index tables live on the device, so that a decode step uploads them once without
// waiting for the device and every layer reads them there: the upload itself, attention over the cache, the write of
// a step's keys and values into it, and the greedy choice (argmax) of the logits.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace veomni::ops {

// A CPU tensor's copy on `device`, queued on the compute stream behind the work already there and not waited for
// (the host bytes are staged before this returns). On the CPU: a copy.
Tensor upload(const Tensor& host, Device device);

// attention_kv_cache (kernels/ops.h) with its rows on the device: cache_rows i32 [2, N] on q's device holds row n's
// cache slot (cache_rows[0, n]) and its kv length (cache_rows[1, n]; it attends to rows [0, len) of its slot,
// 1 <= len <= L). The CPU checks the ranges; CUDA, which cannot without waiting, writes NaN for a row outside them.
// The CUDA kernel splits a long cache across blocks (flash-decoding) and merges the splits in a fixed order.
void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows,
                        float scale, Tensor& out);

// Writes a step's keys (or values) into a cache: rows [S, Hkv, D] of the cache's dtype; dest i32 [S] on the cache's
// device: row s goes to flat cache row dest[s] (slot * L + position) of cache [B, L, Hkv, D]. The CPU checks
// 0 <= dest[s] < B*L; CUDA skips a row outside it.
void kv_cache_write(const Tensor& rows, const Tensor& dest, Tensor& cache);

// Greedy decoding's choice: ids i64 [N] = the index of each row's greatest value of x [N, V] (V >= 1), the lowest
// index on a tie and the first NaN if a row holds one (torch.argmax's rules).
void argmax_rows(const Tensor& x, Tensor& ids);

}  // namespace veomni::ops
