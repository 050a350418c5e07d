// Thread count of the CPU kernels (OpenMP). Results never depend on it; tests change it to prove that.
#pragma once

namespace veomni::ops::cpu {

// Sets the OpenMP team size used by the kernels (count >= 1); a build without OpenMP ignores it.
void set_num_threads(int count);
// The team size the next kernel will use (1 without OpenMP).
int num_threads();

}  // namespace veomni::ops::cpu
