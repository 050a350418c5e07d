#!/usr/bin/env bash
# Writers on a full disk: the file size limit (ulimit -f, with SIGXFSZ ignored) makes writes fail with EFBIG through
# the same path as ENOSPC. Each tool must exit 1 (an I/O failure) without crashing, with a message naming the file
# and the reason, and leave no partial output behind (no final file, no temporary "*.tmp-*").
# usage: write_failures.sh BIN_DIR SOURCE_DIR CASE
set -uo pipefail
bin=$1 src=$2 case=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-write-fail-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/err" 2>/dev/null; exit 1; }
cd "$src"

# limited KIB CMD...: runs CMD with files capped at KIB KiB, stdout/stderr in out/err; returns its exit code.
limited() {
  local kib=$1
  shift
  (trap '' XFSZ; ulimit -f "$kib"; exec "$@") >"$work/out" 2>"$work/err"
}

# expect_io_failure CODE FILE_PATTERN: exit 1 (not a crash: 139 SIGSEGV, 134 SIGABRT), the reason and the file named.
expect_io_failure() {
  local code=$1 pattern=$2
  [ "$code" -ne 139 ] && [ "$code" -ne 134 ] || fail "crashed (exit $code)"
  [ "$code" -eq 1 ] || fail "exit $code, expected 1"
  grep -qE "$pattern.*File too large" "$work/err" || fail "stderr lacks /$pattern.*File too large/"
  echo "ok: exit $code; $(grep -m1 -oE "error.{0,160}" "$work/err")"
}

# expect_nothing_left DIR: no file and no temporary file under DIR.
expect_nothing_left() {
  local left
  left=$(find "$1" -mindepth 1 2>/dev/null)
  [ -z "$left" ] || fail "partial output left behind: $left"
}

case "$case" in
  dummy_data)  # ~8 MB of samples against a 256 KiB limit
    mkdir "$work/data"
    limited 256 "$bin/veomni-dummy-data" --type text --seq-len 512 --num-samples 4000 --compression 0 \
      --out "$work/data/d.h5"
    expect_io_failure $? "$work/data/d\.h5\.tmp-[0-9]+"
    expect_nothing_left "$work/data" ;;
  ckpt_shard)  # the toy model's rank files against a 64 KiB limit
    limited 64 "$bin/veomni-ckpt-shard" tests/fixtures/hf/qwen3_toy/model --out "$work/ckpt" --world 2 --log-level warn
    expect_io_failure $? "$work/ckpt"
    expect_nothing_left "$work/ckpt" ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
