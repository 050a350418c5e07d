// OpenMP team size of the CPU kernels.
#include "kernels/cpu/threads.h"

#include "core/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace veomni::ops::cpu {

void set_num_threads(int count) {
  VEOMNI_CHECK(count >= 1, "thread count must be at least 1, got {}", count);
#ifdef _OPENMP
  omp_set_num_threads(count);
#endif
}

int num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace veomni::ops::cpu
