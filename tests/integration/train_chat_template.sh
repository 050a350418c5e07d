#!/usr/bin/env bash
# data.chat_template: veomni-preprocess records the template a dataset was rendered with (shown by
# `veomni-preprocess info`), and veomni-train refuses, with exit 2 naming the file and its key, a dataset made with
# another template, one that records none, or generated data; a matching dataset trains.
# usage: train_chat_template.sh BIN_DIR SOURCE_DIR TOKENIZER_JSON match|mismatch|info
set -euo pipefail
bin=$1 src=$2 tokenizer=$3 case=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-chat-template-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f "$tokenizer" ] || fail "the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh"
cd "$work"
# A tokenizer folder whose own template is Qwen3's (tokenizer_config.json's chat_template).
mkdir tok && cp "$tokenizer" "$(dirname "$tokenizer")/tokenizer_config.json" tok/
conversations=$src/tests/fixtures/tokenizer/conversations.jsonl

preprocess() {  # OUT ARGS...
  local out=$1
  shift
  "$bin/veomni-preprocess" text --tokenizer tok/tokenizer.json --input "$conversations" --out "$out" \
    --log-level warn "$@" >/dev/null || fail "veomni-preprocess $*"
}
# WANT_EXIT ARGS...: two steps of the 151k-vocabulary toy, the log in train.log.
train() {
  local want=$1 got=0
  shift
  "$bin/veomni-train" "$src/configs/qwen3_toy.yaml" --model.config_path "$src/configs/model_configs/qwen3_tiny_vocab151k" \
    --model.tokenizer_path tok --data.max_seq_len 64 --train.global_batch_size 1 --train.micro_batch_size 1 \
    --train.max_steps 2 --train.precision fp32 --train.device cpu --train.checkpoint.output_dir "$work/run$RANDOM" \
    --train.checkpoint.save_steps -1 --log-level info "$@" >train.log 2>&1 || got=$?
  [ "$got" -eq "$want" ] || { cat train.log >&2; fail "veomni-train exit $got, expected $want: $*"; }
}
expect_log() { grep -qF -- "$1" train.log || { cat train.log >&2; fail "'$1' not in the log"; }; }

case "$case" in
  match)  # each template's dataset trains under its own name; "model" is found beside the tokenizer
    preprocess chatml.h5
    preprocess model.h5 --chat-template model
    train 0 --data.train_path chatml.h5 --data.chat_template chatml
    train 0 --data.train_path model.h5 --data.chat_template model
    cp "$src/tests/fixtures/chat_templates/chatml.jinja" mine.jinja
    preprocess file.h5 --chat-template mine.jinja
    train 0 --data.train_path file.h5 --data.chat_template "$work/mine.jinja" --data.eval_path file.h5
    train 0 --data.train_path model.h5  # no data.chat_template: nothing is checked
    ;;
  mismatch)  # another template, generated data, an eval set or a mixed source that differs: exit 2, named
    preprocess chatml.h5
    preprocess model.h5 --chat-template model
    train 2 --data.train_path chatml.h5 --data.chat_template model
    expect_log "chatml.h5 (data.train_path) was rendered with our built-in ChatML (chatml), but data.chat_template 'model' is the Jinja template with sha256:"
    expect_log "hint: preprocess it with veomni-preprocess --chat-template model"
    train 2 --data.train_path model.h5 --data.chat_template chatml --data.eval_path model.h5
    expect_log "model.h5 (data.train_path) was rendered with the Jinja template with sha256:"
    train 2 --data.train_path chatml.h5 --data.chat_template chatml --data.eval_path model.h5
    expect_log "model.h5 (data.eval_path) was rendered with"
    train 2 --data.train_path "" --data.datasets "{path: chatml.h5}" "{path: model.h5}" --data.chat_template chatml
    expect_log "model.h5 (data.datasets[1]) was rendered with"
    "$bin/veomni-dummy-data" --type text --seq-len 33 --num-samples 4 --seed 1 --out dummy.h5 >/dev/null
    train 2 --data.train_path dummy.h5 --data.chat_template chatml
    expect_log "dummy.h5 (data.train_path) holds samples that no chat template rendered (veomni-dummy-data)"
    train 2 --data.train_path chatml.h5 --data.chat_template missing.jinja
    expect_log "data.chat_template 'missing.jinja':"
    ;;
  info)  # what info prints; the same conversations under two names of one template differ only in the header
    preprocess chatml.h5
    cp "$src/tests/fixtures/chat_templates/chatml.jinja" mine.jinja
    preprocess file.h5 --chat-template mine.jinja --chat-template-kwargs '{"enable_thinking": false}'
    "$bin/veomni-preprocess" info chatml.h5 >a.txt
    "$bin/veomni-preprocess" info file.h5 >b.txt
    grep -qx "chat_template: chatml" a.txt || { cat a.txt; fail "chatml not recorded"; }
    grep -qx "chat_template: jinja sha256:$(sha256sum mine.jinja | cut -d' ' -f1)" b.txt || { cat b.txt; fail "jinja hash"; }
    grep -qx 'chat_template_kwargs: {"enable_thinking":false}' b.txt || { cat b.txt; fail "kwargs not recorded"; }
    grep -qx "samples: 3" a.txt || { cat a.txt; fail "sample count"; }
    grep -q "^key input_ids: " a.txt || { cat a.txt; fail "no input_ids digest"; }
    diff <(grep "^key \|^samples\|^tokens" a.txt) <(grep "^key \|^samples\|^tokens" b.txt) ||
      fail "the ChatML file rendered other samples than the built-in ChatML"
    preprocess plain.h5 --max-seq-len 4
    ! diff -q <(grep "^key " a.txt) <("$bin/veomni-preprocess" info plain.h5 | grep "^key ") >/dev/null ||
      fail "truncated samples have the same digest"
    code=0
    "$bin/veomni-preprocess" info nothing.h5 >out 2>err || code=$?
    [ "$code" -eq 2 ] || { cat err; fail "info of a missing file exits $code"; }
    ;;
  *) fail "unknown case $case" ;;
esac
echo "ok: $case"
