// Register-tiled products of small row-major blocks, for kernels that tile their own loops (attention). Each element
// is summed over the inner dimension in ascending order starting from zero (or from c), whatever the operand
// roles, so a product and its transpose computed from the same values agree bit for bit.
#pragma once
#include <cstdint>

namespace veomni::ops::cpu {

inline constexpr int64_t kTileRows = 8;
inline constexpr int64_t kTileCols = 8;

inline int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// c[i][j] = (accumulate ? c[i][j] : 0) + sum_{p < k} a[i * lda + p] * b[p * ldb + j] for i < m, j < n.
// m must be a multiple of kTileRows and n of kTileCols (callers pad their blocks with zeros).
inline void block_matmul(int64_t m, int64_t n, int64_t k, const float* __restrict a, int64_t lda,
                         const float* __restrict b, int64_t ldb, float* __restrict c, int64_t ldc, bool accumulate) {
  for (int64_t i0 = 0; i0 < m; i0 += kTileRows) {
    for (int64_t j0 = 0; j0 < n; j0 += kTileCols) {
      float acc[kTileRows][kTileCols];
      for (int64_t i = 0; i < kTileRows; ++i)
        for (int64_t j = 0; j < kTileCols; ++j) acc[i][j] = accumulate ? c[(i0 + i) * ldc + j0 + j] : 0.0f;
      for (int64_t p = 0; p < k; ++p) {
        const float* bp = b + p * ldb + j0;
        for (int64_t i = 0; i < kTileRows; ++i) {
          const float ai = a[(i0 + i) * lda + p];
          for (int64_t j = 0; j < kTileCols; ++j) acc[i][j] += ai * bp[j];
        }
      }
      for (int64_t i = 0; i < kTileRows; ++i)
        for (int64_t j = 0; j < kTileCols; ++j) c[(i0 + i) * ldc + j0 + j] = acc[i][j];
    }
  }
}

}  // namespace veomni::ops::cpu
