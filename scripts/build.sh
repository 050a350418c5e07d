#!/usr/bin/env bash
# Configures and builds veomni into build/ (or $VEOMNI_BUILD_DIR); extra arguments go to the first cmake.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
veomni_build "$@"
