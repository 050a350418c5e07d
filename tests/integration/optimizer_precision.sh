#!/usr/bin/env bash
# train.optimizer.type anyprecision_adamw (bfloat16 AdamW moments) through veomni-train on two CPU ranks: the
# moments and the per-rank state bytes shrink, the training differs from adamw's only slightly, a checkpoint records
# the moment dtype and resumes bit for bit, and a checkpoint resumed under the other optimizer type exits 2.
# usage: optimizer_precision.sh BIN_DIR SOURCE_DIR
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset VEOMNI_FAULT_INJECT
fail() { echo "FAIL: $*" >&2; exit 1; }
bin=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-optimizer-precision-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$src"  # the recipe names its model config relative to the repository root
"$bin/veomni-dummy-data" --type text --seq-len 96 --num-samples 48 --seed 3 --out "$work/data.h5" >/dev/null
train() {  # TYPE RUN_DIR [overrides...]
  local type=$1 out=$2
  shift 2
  mpirun --oversubscribe --bind-to none -np 2 "$bin/veomni-train" "$src/configs/qwen3_toy.yaml" \
    --data.train_path "$work/data.h5" --data.max_seq_len 95 --train.global_batch_size 4 --train.micro_batch_size 1 \
    --train.device cpu --train.precision fp32 --train.optimizer.max_grad_norm 0.05 --train.optimizer.weight_decay 0.1 \
    --train.optimizer.lr 3e-3 --train.optimizer.type "$type" --train.max_steps 4 --train.checkpoint.save_steps 2 \
    --train.checkpoint.output_dir "$out" --log-level warn "$@"
}
summary_number() {  # RUN KEY
  grep -o "\"$2\": *[-0-9.e+]*" "$1/run_summary.json" | sed 's/.*: *//'
}
same_rank_files() {  # A B STEP
  local f
  for f in "$1/checkpoints/global_step_$3"/rank-*.h5; do
    cmp -s "$f" "$2/checkpoints/global_step_$3/$(basename "$f")" || fail "global_step_$3/$(basename "$f") of $2 differs from $1's"
  done
}

train anyprecision_adamw "$work/any" || fail "training with anyprecision_adamw"
train adamw "$work/adamw" || fail "training with adamw"

# The metadata names the moments; an adamw checkpoint keeps the format it had.
meta="$work/any/checkpoints/global_step_2/metadata.json"
python3 - "$meta" "$work/adamw/checkpoints/global_step_2/metadata.json" <<'PY' || fail "metadata.json's optimizer key"
import json, sys
any_, adamw = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert any_["optimizer"] == {"type": "anyprecision_adamw", "moment_dtype": "bf16"}, any_.get("optimizer")
assert any_["format_version"] == 5, any_["format_version"]
assert "optimizer" not in adamw and adamw["format_version"] < 5, adamw["format_version"]
PY
echo "ok: metadata.json records anyprecision_adamw's bf16 moments"

# bf16 moments: 4 bytes a parameter fewer per rank; the loss moves off adamw's, but not far.
any_bytes=$(summary_number "$work/any" state_bytes_per_rank_max)
adamw_bytes=$(summary_number "$work/adamw" state_bytes_per_rank_max)
params=$(summary_number "$work/any" parameters)
awk -v a="$any_bytes" -v w="$adamw_bytes" -v p="$params" 'BEGIN {
  saved = (w - a) * 2 / p
  printf "state bytes per rank: adamw %.0f, anyprecision_adamw %.0f (%.2f bytes a parameter fewer)\n", w, a, saved
  exit !(saved > 3.9 && saved < 4.1) }' || fail "bf16 moments did not save 4 bytes a parameter"
"$bin/veomni-align-check" --rtol 0 --atol 0 --keys loss "$work/adamw" "$work/any" >/dev/null 2>&1 &&
  fail "anyprecision_adamw trained the same bits as adamw (the option changed nothing)"
"$bin/veomni-align-check" --rtol 2e-2 --atol 1e-3 --keys loss "$work/adamw" "$work/any" ||
  fail "anyprecision_adamw's losses are far from adamw's"

# Resume: the uninterrupted run's bits, metrics and rank files (the moments round trip through the checkpoint).
train anyprecision_adamw "$work/resumed" --train.checkpoint.load_path "$work/any/checkpoints/global_step_2" ||
  fail "resuming anyprecision_adamw"
grep -q '"resumed_from": ".*global_step_2' "$work/resumed/run_summary.json" || fail "the run did not resume"
"$bin/veomni-align-check" --rtol 0 --atol 0 --keys loss,foundation_loss,grad_norm "$work/any" "$work/resumed" ||
  fail "the resumed run differs from the uninterrupted one"
same_rank_files "$work/any" "$work/resumed" 4
echo "ok: anyprecision_adamw resumes bit for bit"

# The other optimizer type: a clear input error, exit 2, on both sides.
for pair in "adamw any" "anyprecision_adamw adamw"; do
  set -- $pair
  code=0
  train "$1" "$work/wrong_$1" --train.checkpoint.load_path "$work/$2/checkpoints/global_step_2" 2>"$work/err" || code=$?
  [ "$code" -eq 2 ] || { cat "$work/err" >&2; fail "resuming a $2 checkpoint with $1: exit $code, expected 2"; }
  grep -q "resume with --train.optimizer.type" "$work/err" || { cat "$work/err" >&2; fail "no hint in the error"; }
done
echo "ok: a checkpoint resumed under the other optimizer type is an input error (exit 2)"
