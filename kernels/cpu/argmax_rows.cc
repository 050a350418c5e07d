// CPU argmax of every row: the first index of the row's greatest value (torch.argmax's tie rule), NaN above all.
#include "kernels/cpu/ops_cpu.h"

#include <cmath>

namespace veomni::ops::cpu {

void argmax_rows(const Tensor& x, Tensor& ids) {
  const int64_t n = x.dim(0), v = x.dim(1);
  const float* xp = x.data<float>();
  int64_t* out = ids.data<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    const float* row = xp + r * v;
    int64_t best = 0;
    for (int64_t j = 1; j < v && !std::isnan(row[best]); ++j)
      if (std::isnan(row[j]) || row[j] > row[best]) best = j;
    out[r] = best;
  }
}

}  // namespace veomni::ops::cpu
