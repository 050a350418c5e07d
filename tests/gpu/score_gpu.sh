#!/usr/bin/env bash
# veomni-score on one GPU against the CPU fp32 reference: per-token and per-sequence label log-probs (and rewards of a
# reward-head model) in fp32 at 1e-4, in bf16 at 2e-2 relative (2e-1 absolute: one log-prob of about -7 nats moves by
# a few hundredths in bf16). Exits 77 (skipped) without a GPU.
# usage: score_gpu.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${have:-0}" -ge 1 ] || { echo "SKIPPED: needs a GPU"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-score-gpu-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$src"
"$bin/veomni-dummy-data" --type preference --seq-len 96 --num-samples 12 --seed 5 --out "$work/pairs.h5" >/dev/null
score() {
  local model=$1 out=$2
  shift 2
  "$bin/veomni-score" --config "configs/$model.yaml" --data "$work/pairs.h5" --out "$out" --log-level warn "$@"
}
for model in qwen3_toy qwen3_moe_toy; do
  for what in logprobs reward; do
    score $model "$work/$model.$what.cpu.h5" --what $what --train.device cpu
    score $model "$work/$model.$what.fp32.h5" --what $what --train.device cuda --train.precision fp32
    score $model "$work/$model.$what.bf16.h5" --what $what --train.device cuda --train.precision mixed
    "$bin/dataset_diff" "$work/$model.$what.cpu.h5" "$work/$model.$what.fp32.h5" 1e-4 1e-4
    "$bin/dataset_diff" "$work/$model.$what.cpu.h5" "$work/$model.$what.bf16.h5" 2e-2 2e-1
    echo "$model $what: GPU fp32 and bf16 agree with the CPU"
  done
done
