#!/usr/bin/env bash
# Hostile inputs to veomni-train and veomni-ckpt-shard: endless or multi-document configs, config.json sizes beyond
# any machine, number overflows; each must end quickly with exit 2 and a message naming the file and key.
# Usage: input_hardening.sh CASE BIN_DIR SOURCE_DIR WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"
hf=$src/tests/fixtures/hf/qwen3_toy/model

# model_with KEY VALUE: a copy of the toy HF model whose config.json has KEY set to the raw JSON text VALUE.
model_with() {
  rm -rf model && cp -r "$hf" model
  sed -i "s/^  \"$1\": [^,]*/  \"$1\": $2/" model/config.json
  grep -q "\"$1\": $2" model/config.json || fail "could not set $1 in config.json"
}

# shard_fails PATTERN: veomni-ckpt-shard of ./model exits 2 within 20 s with PATTERN in stderr.
shard_fails() {
  tool=$bin/veomni-ckpt-shard
  local start=$SECONDS
  expect_exit 2 model --out ckpt --world 1
  [ $((SECONDS - start)) -lt 20 ] || fail "took $((SECONDS - start)) s"
  expect_in err "$1"
}

# train_fails_in_source_tree CONFIG: veomni-train CONFIG, run from the source tree (where the toy config's relative
# paths lead), exits 2; its output lands in ./out and ./err.
train_fails_in_source_tree() {
  local code=0
  (cd "$src" && "$bin/veomni-train" "$1" --train.device cpu) >out 2>err || code=$?
  [ "$code" -eq 2 ] || { cat out err >&2; fail "exit $code, expected 2: veomni-train $1"; }
}

case $case_name in
  config_not_regular)
    tool=$bin/veomni-train
    expect_exit 2 /dev/zero
    expect_in err "'/dev/zero' is not a regular file"
    ;;
  config_two_documents)
    { cat "$src/configs/qwen3_toy.yaml"; printf -- '---\ntrain:\n  max_steps: 1\n'; } >two.yaml
    train_fails_in_source_tree "$work/two.yaml"
    expect_in err "two.yaml line"
    expect_in err "a second YAML document"
    ;;
  config_octal)
    sed 's/^\(  *\)max_steps: .*/\1max_steps: 010/' "$src/configs/qwen3_toy.yaml" >octal.yaml
    grep -q 'max_steps: 010' octal.yaml || fail "no max_steps in the toy config"
    train_fails_in_source_tree "$work/octal.yaml"
    expect_in err "'train.max_steps': '010' is ambiguous"
    ;;
  huge_intermediate)
    model_with intermediate_size 288230376151711744
    shard_fails "config.json: key 'intermediate_size': 288230376151711744 is more than"
    ;;
  huge_vocab)
    model_with vocab_size 288230376151711744
    shard_fails "config.json: key 'vocab_size'"
    ;;
  many_layers)
    model_with num_hidden_layers 100000
    shard_fails "config.json: key 'num_hidden_layers': 100000 is more than 1024"
    ;;
  number_overflow)
    model_with hidden_size 1e999
    shard_fails "config.json:12:18: invalid JSON: number overflow parsing '1e999'"
    ;;
  range_messages)  # out-of-range flags say the bound in words
    tool=$bin/veomni-ckpt-shard
    expect_exit 2 "$hf" --out ckpt --world 0
    expect_in err "--world: must be at least 1, got 0"
    ! grep -q 1797693 err || fail "the bound is printed as a double"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
