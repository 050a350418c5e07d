#!/usr/bin/env bash
# On the GPU machine: configures a CUDA build (ninja, Hopper sm_90), builds everything, runs `ctest -L gpu` (the CUDA
# ops against their CPU twins, the HF fixtures on the GPU, training on 1 GPU against the CPU reference, the merged
# mid-size model in transformers and, when 2 GPUs are present, the 1-vs-2-GPU alignment block and VeOmni's toy
# configs; with one GPU the 2-GPU tests report skipped) and then every bench/*_cuda benchmark. Installs nothing
# (that machine has the libraries and no network). Exit status: ctest's (a failing benchmark is reported but does
# not change it).
# Usage: scripts/gpu-test.sh [-R REGEX]   (only the gpu tests matching REGEX)
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
veomni_say "building everything"
cmake --build "$build_dir" -- -j"$jobs" || { veomni_say "build failed"; exit 1; }

nvidia-smi -L 2>/dev/null || veomni_say "nvidia-smi not available"
veomni_say "running GPU tests"
export NCCL_NVLS_ENABLE=0
# Every test's output (alignment tables, fixture errors) goes to gpu-test.log; the results and the tables are
# printed here.
log="$build_dir/gpu-test.log"
ctest --test-dir "$build_dir" -L gpu -V --timeout 900 "$@" >"$log" 2>&1
status=$?
grep -E "Test +#|tests passed|tests failed|rel_diff|FAIL|aligned|rel err|cpu fp32 .* gpu bf16" "$log" |
  sed -E 's/^[0-9]+: //'
veomni_say "full output: $log"

if [ "${VEOMNI_BENCH:-1}" != "0" ]; then
  for target in "${targets[@]:1}"; do
    veomni_say "benchmark $target"
    "$build_dir/bench/$target" || veomni_say "benchmark $target failed (exit $?)"
  done
fi
veomni_say "GPU tests exit status $status"
exit "$status"
