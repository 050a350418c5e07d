#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan) in build-fuzz/ and fuzzes the readers of outside
# bytes: bounded runs as ctest tests (--ctest, what scripts/test.sh and CI run) or longer runs on demand.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

usage() {
  cat <<'USAGE'
usage: scripts/fuzz.sh [--minutes N] [--jobs N] [--ctest] [--build-only] [--list] [target...]

Builds the fuzz targets with clang (-fsanitize=fuzzer,address,undefined) in build-fuzz/ (VEOMNI_FUZZ_BUILD_DIR
overrides) and fuzzes each named target (all when none is named) for N minutes (default 10), one after the other.
New inputs are kept in .cache/fuzz/<target>/ and grow from run to run; the seeds are tests/fuzz/corpus/<target>/ and
tests/fuzz/regressions/<target>/. A crash, leak, timeout or sanitizer report is written to
.cache/fuzz/artifacts/<target>-crash-<sha1> (or leak-, timeout-, oom-) and listed at the end; replay it with
build-fuzz/fuzz/fuzz_<target> <file>. A fixed crash is committed under tests/fuzz/regressions/<target>/.

  --minutes N    fuzzing time per target (fractions allowed, e.g. 0.5)
  --jobs N       build and ctest with N parallel jobs (default: all cores); only the named targets are built
  --ctest        instead: the bounded runs of CI (ctest -L ^fuzz$ in build-fuzz/, VEOMNI_FUZZ_SECONDS each,
                 every target)
  --build-only   configure and build the targets, then stop
  --list         print the target names and stop
Environment: VEOMNI_FUZZ_SECONDS (ctest runs, default 20), VEOMNI_FUZZ_RSS_LIMIT_MB (default 2048).
Targets: dataset ckpt_metadata rank_file safetensors hf_index model_config train_config metrics_log tokenizer jsonl_record
image audio (the last four need the text and media libraries).
USAGE
}

minutes=10 mode=fuzz targets=() jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --ctest) mode=ctest; shift ;;
    --build-only) mode=build; shift ;;
    --list) mode=list; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) veomni_say "unknown option $1"; usage >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

build_dir=${VEOMNI_FUZZ_BUILD_DIR:-$veomni_root/build-fuzz}
fuzz_seconds=${VEOMNI_FUZZ_SECONDS:-20}
rss_limit_mb=${VEOMNI_FUZZ_RSS_LIMIT_MB:-2048}

command -v clang++ >/dev/null || { veomni_say "clang++ is needed (scripts/setup.sh installs clang)"; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# -O1 and line tables only: faster to build, still fast to run, and stacks name file:line.
CC=clang CXX=clang++ cmake -S "$veomni_root" -B "$build_dir" -G Ninja -DVEOMNI_FUZZ=ON -DVEOMNI_BUILD_TESTS=OFF \
  -DVEOMNI_CUDA=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DVEOMNI_FUZZ_SECONDS="$fuzz_seconds" \
  -DVEOMNI_FUZZ_RSS_LIMIT_MB="$rss_limit_mb" "${launcher[@]}" >/dev/null
if [ "$mode" = list ]; then
  (cd "$build_dir" && ctest -N -L fuzz | sed -n 's/.*Test *#[0-9]*: fuzz_//p')
  exit 0
fi
veomni_say "building the fuzz targets in $build_dir"
start=$SECONDS
build_targets=(veomni_fuzz)
[ ${#targets[@]} -gt 0 ] && build_targets=("${targets[@]/#/fuzz_}")
cmake --build "$build_dir" --target "${build_targets[@]}" -- -j"$jobs"
veomni_say "fuzz build took $((SECONDS - start)) s"
[ "$mode" = build ] && exit 0

if [ "$mode" = ctest ]; then
  rm -rf "$build_dir"/fuzz-artifacts && mkdir -p "$build_dir"/fuzz-artifacts
  status=0
  select=()
  [ ${#targets[@]} -gt 0 ] && select=(-R "^fuzz_($(IFS='|'; echo "${targets[*]}"))\$")
  (cd "$build_dir" && ctest -L '^fuzz$' --output-on-failure -j"$jobs" "${select[@]}") || status=$?
  if [ $status -ne 0 ]; then
    veomni_say "fuzzing found problems; reproducers:"
    ls -1 "$build_dir"/fuzz-artifacts/* >&2 2>/dev/null || true
  fi
  exit $status
fi

[ ${#targets[@]} -gt 0 ] || targets=($(cd "$build_dir" && ctest -N -L fuzz | sed -n 's/.*Test *#[0-9]*: fuzz_//p'))
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
artifacts=$veomni_root/.cache/fuzz/artifacts
mkdir -p "$artifacts"
found=0
for t in "${targets[@]}"; do
  exe=$build_dir/fuzz/fuzz_$t
  [ -x "$exe" ] || { veomni_say "no fuzz target '$t' (see --list)"; exit 2; }
  corpus=$veomni_root/.cache/fuzz/$t
  mkdir -p "$corpus"
  seeds=("$veomni_root/tests/fuzz/corpus/$t")
  [ -d "$veomni_root/tests/fuzz/regressions/$t" ] && seeds+=("$veomni_root/tests/fuzz/regressions/$t")
  veomni_say "fuzzing $t for $seconds s (corpus $corpus)"
  log=$veomni_root/.cache/fuzz/$t.log
  if LSAN_OPTIONS=suppressions=$veomni_root/tests/sanitizers/lsan.supp:print_suppressions=0 \
      "$exe" -max_total_time="$seconds" -rss_limit_mb="$rss_limit_mb" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$t-" "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    veomni_say "$t: no crash ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs," \
      "$(ls "$corpus" | wc -l) corpus inputs)"
  else
    found=1
    veomni_say "$t: FOUND A PROBLEM (log $log):"
    grep -m1 -A3 'ERROR: \|SUMMARY\|terminate called' "$log" >&2 || tail -20 "$log" >&2
    grep 'Test unit written to' "$log" >&2 || true
  fi
done
exit $found
