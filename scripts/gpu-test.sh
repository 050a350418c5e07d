#!/usr/bin/env bash
# On the GPU machine: configures a CUDA build (ninja, Hopper sm_90), builds the GPU tests and the CUDA benchmarks,
# runs `ctest -L gpu` and then every bench/*_cuda benchmark. Installs nothing (that machine has the libraries and no
# network). Exit status: ctest's (a failing or missing benchmark is reported but does not change it).
# Usage: scripts/gpu-test.sh [--all]   (--all builds every target, not only the GPU ones)
# Environment: VEOMNI_GPU_BUILD_DIR (default build-gpu), VEOMNI_WERROR (default OFF: another compiler there must not
# stop the run), VEOMNI_BENCH=0 to skip the benchmarks.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
build_dir=${VEOMNI_GPU_BUILD_DIR:-$veomni_root/build-gpu}
jobs=$(nproc)

veomni_say "configuring $build_dir"
cmake -S "$veomni_root" -B "$build_dir" -G Ninja -DVEOMNI_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DVEOMNI_WERROR="${VEOMNI_WERROR:-OFF}" || { veomni_say "configure failed"; exit 1; }

targets=(veomni_gpu_tests)
for src in "$veomni_root"/bench/*_cuda.cc; do
  [ -e "$src" ] && targets+=("bench_$(basename "$src" .cc)")
done
if [ "${1:-}" = "--all" ]; then
  veomni_say "building everything"
  cmake --build "$build_dir" -- -j"$jobs" || { veomni_say "build failed"; exit 1; }
else
  veomni_say "building ${targets[*]}"
  cmake --build "$build_dir" --target "${targets[@]}" -- -j"$jobs" || { veomni_say "build failed"; exit 1; }
fi

nvidia-smi -L 2>/dev/null || veomni_say "nvidia-smi not available"
veomni_say "running GPU tests"
ctest --test-dir "$build_dir" -L gpu --output-on-failure --timeout 600
status=$?

if [ "${VEOMNI_BENCH:-1}" != "0" ]; then
  for target in "${targets[@]:1}"; do
    veomni_say "benchmark $target"
    "$build_dir/bench/$target" || veomni_say "benchmark $target failed (exit $?)"
  done
fi
veomni_say "GPU tests exit status $status"
exit "$status"
