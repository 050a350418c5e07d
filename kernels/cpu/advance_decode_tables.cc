// CPU advance of a greedy decode step's tables: the chosen ids in, positions, flat cache rows and kv lengths up one.
#include "kernels/cpu/ops_cpu.h"

namespace veomni::ops::cpu {

void advance_decode_tables(const Tensor& chosen, Tensor& tokens, Tensor& rows) {
  const int64_t n = chosen.dim(0);
  const int64_t* ids = chosen.data<int64_t>();
  int64_t* t = tokens.data<int64_t>();
  int32_t* r = rows.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) t[i] = ids[i];
  for (int64_t i = n; i < tokens.dim(0); ++i) ++t[i];
  for (int64_t i = 0; i < n; ++i) {
    ++r[i];          // the flat cache row to write
    ++r[2 * n + i];  // the kv length
  }
}

}  // namespace veomni::ops::cpu
