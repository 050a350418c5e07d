// The table of multi-tensor kernels: one launch walks many tensors (every parameter of a model), one CTA per chunk of
// one tensor, instead of one launch (and, for reductions, one host read) per tensor.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {

// 16Ki elements a CTA (64 per thread): big enough that a CTA's work dwarfs its start-up, small enough that even one
// layer's parameters make thousands of CTAs. With 64Ki a 0.6B layer's cast made 240 CTAs, under two per SM, and ran
// at 0.7 TB/s on an H200: too few loads in flight to cover the memory latency.
inline constexpr int64_t kMultiTensorChunk = int64_t{1} << 14;

// Entries (one per tensor) and first_chunk[t] (the first CTA of tensor t; first_chunk[T] = number of CTAs) on the
// device. Only these few bytes per tensor travel (the CTAs find their chunk by a binary search), not a list of
// chunks. `storage` keeps them alive until the launch is queued (its free is stream-ordered).
// What a kernel takes (trivially copyable, unlike the owning DeviceTable).
template <typename Entry>
struct TableView {
  const Entry* entries;
  const int64_t* first_chunk;
  int32_t num_tensors;
};

template <typename Entry>
struct DeviceTable {
  Tensor storage;
  const Entry* entries = nullptr;
  const int64_t* first_chunk = nullptr;
  int32_t num_tensors = 0;
  int64_t num_chunks = 0;

  TableView<Entry> view() const { return {entries, first_chunk, num_tensors}; }
};

// sizes[t] is the element count of entries[t]'s tensor.
template <typename Entry>
DeviceTable<Entry> upload_table(const std::vector<Entry>& entries, const std::vector<int64_t>& sizes, Device device) {
  static_assert(std::is_trivially_copyable_v<Entry>);
  std::vector<int64_t> first(sizes.size() + 1, 0);
  for (size_t t = 0; t < sizes.size(); ++t) first[t + 1] = first[t] + (sizes[t] + kMultiTensorChunk - 1) / kMultiTensorChunk;
  const size_t first_bytes = first.size() * sizeof(int64_t);
  const size_t entries_offset = (first_bytes + 15) / 16 * 16;
  std::vector<unsigned char> host(entries_offset + entries.size() * sizeof(Entry));
  std::memcpy(host.data(), first.data(), first_bytes);
  if (!entries.empty()) std::memcpy(host.data() + entries_offset, entries.data(), entries.size() * sizeof(Entry));
  DeviceTable<Entry> table;
  table.storage = Tensor::empty({static_cast<int64_t>(host.size())}, DType::U8, device);
  cuda_rt::upload_from_host(table.storage.raw_data(), host.data(), host.size());
  auto* base = static_cast<unsigned char*>(table.storage.raw_data());
  table.first_chunk = reinterpret_cast<const int64_t*>(base);
  table.entries = reinterpret_cast<const Entry*>(base + entries_offset);
  table.num_tensors = static_cast<int32_t>(entries.size());
  table.num_chunks = first.back();
  return table;
}

// The tensor and element range of CTA `chunk`: a binary search over first_chunk.
struct ChunkRange {
  int32_t tensor;
  int64_t begin;
  int64_t end;
};

__device__ __forceinline__ ChunkRange chunk_range(const int64_t* first_chunk, int32_t num_tensors, int64_t chunk) {
  int32_t lo = 0, hi = num_tensors - 1;  // the last t with first_chunk[t] <= chunk
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (first_chunk[mid] <= chunk)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int64_t begin = (chunk - first_chunk[lo]) * kMultiTensorChunk;
  return {lo, begin, begin + kMultiTensorChunk};  // the caller clamps end to the tensor's numel
}

}  // namespace veomni::ops::cuda
