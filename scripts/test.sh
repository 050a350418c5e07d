#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest (GPU tests report skipped without a GPU).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
"$here/setup.sh"
veomni_build
veomni_say "running tests"
cd "$veomni_build_dir"
ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@"
