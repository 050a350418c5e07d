#!/usr/bin/env bash
# veomni-score: the same scores under every layout (1 process, FSDP2, SP2, EP2 for the MoE toy), --as-reference
# output trains DPO to the in-step reference's first loss (log 2), perplexity falls after training, bad inputs exit 2.
# Multimodal models (Qwen3-VL, the Qwen3-Omni thinker) score as veomni-train collates them.
# usage: score.sh BIN_DIR SOURCE_DIR CASE   (CASE: layouts | as_reference | perplexity | bad_inputs | multimodal)
set -euo pipefail
bin=$1 src=$2 case=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-score-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
source "$src/tests/integration/tool_test_lib.sh"
cd "$src"
dummy() { "$bin/veomni-dummy-data" --type "$1" --seq-len "$2" --num-samples "$3" --seed 5 --out "$4" >/dev/null; }
# score NP MODEL OUT [ARGS...]: the toy recipe's model, randomly initialised with its seed, on the CPU in float32.
score() {
  local np=$1 model=$2 out=$3
  shift 3
  mpirun --oversubscribe --bind-to none -np "$np" "$bin/veomni-score" --config "configs/$model.yaml" \
    --train.device cpu --out "$out" --log-level "${log_level:-warn}" "$@"
}
agree() { "$bin/dataset_diff" "$1" "$2" 1e-5 1e-5 || fail "$2 differs from $1"; }

case "$case" in
layouts)
  dummy text 40 7 "$work/text.h5"
  dummy preference 40 5 "$work/pairs.h5"
  dummy rollout 40 5 "$work/rollout.h5"
  # Budgets of 100 tokens: two samples per micro-batch; 5 pairs or rollouts make 3 micro-batches, so one of 2
  # data-parallel ranks runs a discarded forward in the last round.
  for data in text pairs rollout; do
    score 1 qwen3_toy "$work/$data.np1.h5" --data "$work/$data.h5" --micro-batch-tokens 100
    score 2 qwen3_toy "$work/$data.fsdp2.h5" --data "$work/$data.h5" --micro-batch-tokens 100
    score 2 qwen3_toy "$work/$data.sp2.h5" --data "$work/$data.h5" --micro-batch-tokens 100 \
      --train.accelerator.ulysses_size 2
    agree "$work/$data.np1.h5" "$work/$data.fsdp2.h5"
    agree "$work/$data.np1.h5" "$work/$data.sp2.h5"
  done
  score 1 qwen3_moe_toy "$work/moe.np1.h5" --data "$work/pairs.h5" --micro-batch-tokens 100
  score 2 qwen3_moe_toy "$work/moe.ep2.h5" --data "$work/pairs.h5" --micro-batch-tokens 100 \
    --train.accelerator.ep_size 2
  agree "$work/moe.np1.h5" "$work/moe.ep2.h5"
  # The comparison sees the scores: other start weights give other ones.
  score 1 qwen3_toy "$work/seed43.h5" --data "$work/text.h5" --train.seed 43
  if "$bin/dataset_diff" "$work/text.np1.h5" "$work/seed43.h5" 1e-5 1e-5 >/dev/null; then
    fail "scores of other weights agree"
  fi
  # Reward (pairs) and value heads: the seeded HF initialisation of the score head.
  score 1 qwen3_toy "$work/reward.np1.h5" --data "$work/pairs.h5" --what reward
  score 2 qwen3_toy "$work/reward.sp2.h5" --data "$work/pairs.h5" --what reward --train.accelerator.ulysses_size 2
  agree "$work/reward.np1.h5" "$work/reward.sp2.h5"
  score 1 qwen3_toy "$work/value.np1.h5" --data "$work/rollout.h5" --what value --micro-batch-tokens 100
  score 2 qwen3_toy "$work/value.sp2.h5" --data "$work/rollout.h5" --what value --micro-batch-tokens 100 \
    --train.accelerator.ulysses_size 2
  agree "$work/value.np1.h5" "$work/value.sp2.h5"
  ;;
as_reference)
  dummy preference 40 8 "$work/pairs.h5"
  score 1 qwen3_toy "$work/ref.h5" --data "$work/pairs.h5" --as-reference
  train_dpo() {
    mpirun --oversubscribe -np 1 "$bin/veomni-train" "$src/configs/qwen3_toy.yaml" --data.train_path "$1" \
      --data.max_seq_len 80 --train.objective dpo --train.global_batch_size 4 --train.max_steps 1 \
      --train.device cpu --train.checkpoint.output_dir "$2" --train.checkpoint.save_steps -1 --log-level info \
      >"$2.log" 2>&1 || { cat "$2.log" >&2; fail "veomni-train on $1"; }
  }
  train_dpo "$work/ref.h5" "$work/run_ref"
  train_dpo "$work/pairs.h5" "$work/run_model"
  grep -q "reference log-probs from the dataset" "$work/run_ref.log" || fail "the scored reference was not used"
  grep -q "reference model = the start weights" "$work/run_model.log" || fail "no in-step reference model"
  first_loss() { tr -d '\n ' <"$1/log_dict.json" | sed 's/.*"loss":\[\([^],]*\).*/\1/'; }
  a=$(first_loss "$work/run_ref") b=$(first_loss "$work/run_model")
  echo "first dpo loss: scored reference $a, in-step reference $b"
  awk -v a="$a" -v b="$b" 'BEGIN { l = log(2); d = a - b; if (d < 0) d = -d;
    exit !(d < 1e-6 && (a - l) * (a - l) < 1e-12) }' || fail "first losses $a and $b are not both log 2"
  ;;
perplexity)
  dummy text 32 8 "$work/text.h5"
  mpirun --oversubscribe -np 1 "$bin/veomni-train" "$src/configs/qwen3_toy.yaml" --data.train_path "$work/text.h5" \
    --data.max_seq_len 32 --train.global_batch_size 4 --train.num_train_epochs 10 --train.max_steps -1 \
    --train.optimizer.lr 3e-3 --train.device cpu --train.checkpoint.output_dir "$work/run" \
    --train.checkpoint.save_steps 0 --log-level warn
  perplexity() { sed -n 's/.*perplexity \([0-9.e+-]*\).*/\1/p' "$1"; }
  log_level=info score 1 qwen3_toy "$work/before.h5" --data "$work/text.h5" >"$work/before.log" 2>&1 ||
    { cat "$work/before.log" >&2; fail "scoring before training"; }
  log_level=info score 2 qwen3_toy "$work/after.h5" --data "$work/text.h5" --checkpoint "$work/run" \
    >"$work/after.log" 2>&1 || { cat "$work/after.log" >&2; fail "scoring the checkpoint"; }
  before=$(perplexity "$work/before.log") after=$(perplexity "$work/after.log")
  echo "perplexity before training $before, after 20 steps $after"
  [ -n "$before" ] && [ -n "$after" ] || { cat "$work/before.log" "$work/after.log" >&2; fail "no summary line"; }
  awk -v a="$before" -v b="$after" 'BEGIN { exit !(b < a / 2) }' || fail "perplexity $before -> $after did not fall"
  grep -q "done: 8 samples" "$work/after.log" || fail "summary line"
  # The same weights as a HuggingFace directory (--model) give the same scores.
  "$bin/veomni-ckpt-merge" "$work/run" --out "$work/hf" --no-tokenizer --log-level warn
  score 1 qwen3_toy "$work/after_hf.h5" --data "$work/text.h5" --model "$work/hf"
  agree "$work/after.h5" "$work/after_hf.h5"
  ;;
bad_inputs)
  tool=$bin/veomni-score
  cd "$work"  # expect_exit writes out and err here
  dummy text 16 2 "$work/text.h5"
  expect_exit 2 --config "$src/configs/qwen3_toy.yaml" --data "$work/missing.h5" --out "$work/o.h5"
  expect_in err "$work/missing.h5"
  expect_exit 2 --config "$src/configs/qwen3_toy.yaml" --data "$work/text.h5" --out "$work/o.h5" --what reward \
    --as-reference
  expect_in err "--as-reference"
  (cd "$src" && mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path \
    "$work/text.h5" --data.max_seq_len 16 --train.global_batch_size 2 --train.max_steps 1 --train.device cpu \
    --train.checkpoint.output_dir "$work/run" --log-level warn)
  expect_exit 2 --checkpoint "$work/run" --data "$work/text.h5" --out "$work/o.h5" --what reward
  expect_in err "metadata.json"
  expect_in err "score.weight"
  expect_in err "hint: --what reward reads a sequence_reward head"
  expect_exit 2 --data "$work/text.h5" --out "$work/o.h5"
  expect_in err "no model"
  expect_exit 2 --config "$src/configs/qwen3_toy.yaml" --data "$work/text.h5" --out "$work/o.h5" --what ppl
  expect_in err "--what"
  expect_exit 2 --model "$work/run" --checkpoint "$work/run" --data "$work/text.h5" --out "$work/o.h5"
  expect_exit 0 --help
  expect_in out "--as-reference"
  expect_exit 0 --version
  expect_in out "veomni-score"
  [ ! -e "$work/o.h5" ] || fail "a failed run left $work/o.h5"
  ;;
multimodal)
  # Qwen3-VL and the Qwen3-Omni thinker: the same scores under SP2 (VL), FSDP2 and EP2 x SP2 (Omni), and their
  # perplexity is exp of veomni-train's first-step cross-entropy on the same samples.
  small_vocab_config qwen3_vl_toy "$work/qwen3_vl_toy"
  small_vocab_config qwen3_omni_moe_toy "$work/qwen3_omni_moe_toy"
  vl=(--model.config_path "$work/qwen3_vl_toy") omni=(--model.config_path "$work/qwen3_omni_moe_toy")
  "$bin/veomni-dummy-data" --type qwen3vl --seq-len 256 --num-samples 3 --seed 2 --out "$work/vl.h5" >/dev/null
  "$bin/veomni-dummy-data" --type qwen3omni --seq-len 256 --num-samples 2 --seed 2 --out "$work/omni.h5" >/dev/null
  log_level=info score 1 qwen3_vl_toy "$work/vl.np1.h5" --data "$work/vl.h5" "${vl[@]}" 2>"$work/vl.log"
  score 2 qwen3_vl_toy "$work/vl.sp2.h5" --data "$work/vl.h5" "${vl[@]}" --train.accelerator.ulysses_size 2
  agree "$work/vl.np1.h5" "$work/vl.sp2.h5"
  score 1 qwen3_omni_moe_toy "$work/omni.np1.h5" --data "$work/omni.h5" "${omni[@]}"
  score 2 qwen3_omni_moe_toy "$work/omni.fsdp2.h5" --data "$work/omni.h5" "${omni[@]}"
  score 4 qwen3_omni_moe_toy "$work/omni.ep2sp2.h5" --data "$work/omni.h5" "${omni[@]}" \
    --train.accelerator.ulysses_size 2 --train.accelerator.ep_size 2
  agree "$work/omni.np1.h5" "$work/omni.fsdp2.h5"
  agree "$work/omni.np1.h5" "$work/omni.ep2sp2.h5"
  mpirun -np 1 "$bin/veomni-train" configs/qwen3_vl_toy.yaml "${vl[@]}" --data.train_path "$work/vl.h5" --train.device cpu \
    --train.global_batch_size 1 --data.max_seq_len 4096 --train.max_steps 1 --train.checkpoint.save_steps -1 \
    --train.checkpoint.output_dir "$work/vl_run" --log-level warn
  ppl=$(sed -n 's/.*perplexity \([0-9.e+]*\) .*/\1/p' "$work/vl.log")
  python3 -c "import json, math, sys; ce = json.load(open(sys.argv[1]))['foundation_loss'][0]; \
sys.exit(0 if abs(math.log(float(sys.argv[2])) - ce) < 1e-4 else 1)" "$work/vl_run/log_dict.json" "$ppl" \
    || fail "perplexity $ppl is not exp of the first step's cross-entropy"
  ;;
*) echo "unknown case $case" >&2; exit 2 ;;
esac
echo "ok: $case"
