#!/usr/bin/env bash
# Reward and value models end to end on the CPU: 2 steps of train.objective reward / value started from the toy
# causal LM (the value head initialised as transformers does, said in an info line), veomni-ckpt-merge to a
# ...ForSequenceClassification / ...ForTokenClassification directory (one label, score.* and no lm_head),
# veomni-ckpt-shard of that directory back to a checkpoint of the same head that veomni-train resumes, and the bad
# inputs: resuming under another objective's head, an SFT run from a reward model, a directory of two labels.
# usage: value_models.sh BIN_DIR SOURCE_DIR CASE
set -uo pipefail
bin=$1 src=$2 case=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-value-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
cd "$src"  # the recipe names its model config relative to the repository root
causal_lm=tests/fixtures/hf/qwen3_toy/model

fail() { echo "FAIL: $*"; exit 1; }
expect_bad_input() {  # PATTERN COMMAND...: exit status 2 and stderr matching PATTERN
  local pattern=$1
  shift
  "$@" >"$work/out" 2>"$work/err"
  local code=$?
  [ "$code" -eq 2 ] || { cat "$work/err"; fail "exit $code, expected 2: $*"; }
  grep -qE "$pattern" "$work/err" || { cat "$work/err"; fail "stderr lacks /$pattern/"; }
  echo "ok: exit 2, stderr matches /$pattern/"
}
has() { grep -qF -- "$2" "$1" || { cat "$1"; fail "'$2' not in $1"; }; }

# train OBJECTIVE OUT [overrides...]: 2 steps of the toy recipe on that objective's dummy data.
train() {
  local objective=$1 out=$2
  shift 2
  "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/$objective.h5" --data.max_seq_len 64 \
    --train.objective "$objective" --train.global_batch_size 2 --train.max_steps 2 --train.checkpoint.save_steps 2 \
    --train.device cpu --train.checkpoint.output_dir "$out" "$@"
}

"$bin/veomni-dummy-data" --type preference --seq-len 24 --num-samples 8 --seed 3 --out "$work/reward.h5" >/dev/null ||
  fail "dummy preference data"
"$bin/veomni-dummy-data" --type rollout --seq-len 24 --num-samples 8 --seed 4 --out "$work/value.h5" >/dev/null ||
  fail "dummy rollout data"
"$bin/veomni-dummy-data" --type text --seq-len 24 --num-samples 8 --seed 5 --out "$work/sft.h5" >/dev/null ||
  fail "dummy text data"

# OBJECTIVE ARCHITECTURE HEAD: train from the causal LM, merge, check the directory, shard it back, resume it.
round_trip() {
  local objective=$1 architecture=$2 head=$3 run=$work/$1
  train "$objective" "$run" --model.model_path "$causal_lm" >"$work/train.log" 2>&1 ||
    { cat "$work/train.log"; fail "$objective run failed"; }
  has "$work/train.log" "no score.weight (a causal LM): the $head head starts as transformers initialises it"
  grep -q "\"model_head\": \"$head\"" "$run/checkpoints/global_step_2/metadata.json" || fail "metadata lacks the head"
  "$bin/veomni-ckpt-merge" "$run" --out "$work/$objective.hf" --no-tokenizer >"$work/merge.out" 2>&1 ||
    { cat "$work/merge.out"; fail "merge failed"; }
  has "$work/merge.out" "architecture: $architecture"
  has "$work/$objective.hf/config.json" "\"$architecture\""
  has "$work/$objective.hf/config.json" '"LABEL_0": 0'
  has "$work/$objective.hf/model.safetensors" '"score.weight"'
  if grep -qF '"lm_head.weight"' "$work/$objective.hf/model.safetensors"; then fail "merged $objective has lm_head"; fi
  mkdir -p "$work/$objective.ck"
  "$bin/veomni-ckpt-shard" "$work/$objective.hf" --out "$work/$objective.ck/global_step_0" --world 1 \
    >"$work/shard.out" 2>&1 || { cat "$work/shard.out"; fail "shard failed"; }
  has "$work/shard.out" "head: $head"
  train "$objective" "$work/$objective.resumed" --train.checkpoint.load_path "$work/$objective.ck/global_step_0" \
    --train.max_steps 1 >/dev/null 2>"$work/resume.err" || { cat "$work/resume.err"; fail "resume of the shard failed"; }
  echo "ok: $objective trains from the causal LM, merges as $architecture, shards back as $head and resumes"
}

case $case in
  reward) round_trip reward Qwen3ForSequenceClassification sequence_reward ;;
  value)
    round_trip value Qwen3ForTokenClassification token_value
    has "$work/value.hf/model.safetensors" '"score.bias"'
    ;;
  bad_inputs)
    train reward "$work/reward" >/dev/null 2>&1 || fail "reward run failed"
    expect_bad_input "model head is sequence_reward \(train.objective reward\).*trains the token_value head" \
      train value "$work/reward" --train.checkpoint.load_path auto
    "$bin/veomni-ckpt-merge" "$work/reward" --out "$work/reward.hf" --no-tokenizer >/dev/null 2>&1 || fail "merge failed"
    expect_bad_input "score.weight and no lm_head.weight.*Qwen3ForSequenceClassification.*hint" \
      train sft "$work/sft" --model.model_path "$work/reward.hf"
    sed 's/"id2label": {/"id2label": {"1": "LABEL_1", /' "$work/reward.hf/config.json" >"$work/two.json"
    mv "$work/two.json" "$work/reward.hf/config.json"
    expect_bad_input "config.json: key 'id2label' lists 2 labels" train reward "$work/again" \
      --model.model_path "$work/reward.hf"
    expect_bad_input "config.json: key 'id2label' lists 2 labels" \
      "$bin/veomni-ckpt-shard" "$work/reward.hf" --out "$work/two.ck" --world 1
    [ ! -e "$work/two.ck" ] || fail "a refused shard left $work/two.ck"
    ;;
  *) fail "unknown case $case" ;;
esac
