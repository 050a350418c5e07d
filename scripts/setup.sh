#!/usr/bin/env bash
# Installs what veomni needs on Debian 12 with apt-get (and npm for the tokenizer), only what is missing.
# Idempotent: a second run checks dpkg and returns in about a second.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

# Build and library dependencies (Debian package names).
packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libhdf5-dev
  libopenmpi-dev openmpi-bin nlohmann-json3-dev libgtest-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  veomni_say "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  veomni_say "system packages: all present"
fi
