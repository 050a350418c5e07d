#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest (GPU tests report skipped without a GPU; the
# fuzz targets replay their seeds and crash reproducers), then, with VEOMNI_FUZZ=1, the bounded fuzzing runs of a
# separate clang build (scripts/fuzz.sh --ctest): about ten more minutes on two cores, more than CI's time allows.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
start=$SECONDS
"$here/setup.sh"
veomni_say "setup took $((SECONDS - start)) s"
start=$SECONDS
veomni_build
veomni_say "build took $((SECONDS - start)) s"
veomni_say "running tests"
cd "$veomni_build_dir"
start=$SECONDS
status=0
ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@" || status=$?
veomni_say "ctest took $((SECONDS - start)) s"
[ $status -eq 0 ] || exit $status
# Then, when asked, the readers of outside bytes are fuzzed for a bounded time in a separate clang build.
if [ "${VEOMNI_FUZZ:-0}" = 1 ]; then
  veomni_say "fuzzing the readers (ctest label fuzz in build-fuzz)"
  start=$SECONDS
  "$here/fuzz.sh" --ctest
  veomni_say "fuzzing took $((SECONDS - start)) s"
fi
