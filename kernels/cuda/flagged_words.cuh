// Values exchanged between the blocks of a grid without a grid barrier: each float travels in one 64-bit word with a
// flag beside it, so that a reader that sees the flag it waits for sees the value written with it.
//
// A 64-bit aligned word is stored and loaded whole (single-copy atomic at GPU scope), so the pair needs no fence on
// either side: the writer stores (flag, value) with a relaxed store, and the reader polls with relaxed loads until the
// flag is the one of the exchange it waits for. The flags must differ between the exchanges that reuse a word (in
// the same launch and from launch to launch): a stale word then never passes for a fresh one.
#pragma once
#include <cstdint>

namespace veomni::ops::cuda {

using FlaggedWord = unsigned long long;

__device__ __forceinline__ void store_flagged(FlaggedWord* word, float value, unsigned flag) {
  const FlaggedWord packed = (FlaggedWord{flag} << 32) | __float_as_uint(value);
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(word), "l"(packed) : "memory");
}

__device__ __forceinline__ FlaggedWord load_flagged(const FlaggedWord* word) {
  FlaggedWord packed;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(packed) : "l"(word) : "memory");
  return packed;
}

__device__ __forceinline__ unsigned flag_of(FlaggedWord word) { return static_cast<unsigned>(word >> 32); }

__device__ __forceinline__ float value_of(FlaggedWord word) {
  return __uint_as_float(static_cast<unsigned>(word & 0xffffffffull));
}

}  // namespace veomni::ops::cuda
