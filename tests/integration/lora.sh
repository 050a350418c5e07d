#!/usr/bin/env bash
# LoRA training under mpirun on the CPU (fp32): adapter checkpoints hold the adapters (and their AdamW moments) and
# the base's identity only; a run stopped and resumed from one reproduces the uninterrupted run bit for bit; a resume
# under another layout stays aligned at rtol 1e-5; a changed base is refused with exit 2 naming both checksums; tools
# that need a whole model refuse an adapter checkpoint with exit 2.
# usage: lora.sh BIN_DIR SOURCE_DIR CASE [ARGS...]
#   resume KIND NP:SP:EP             8 steps straight vs 3 steps + resume: same bits (metrics and rank files)
#   reshard KIND NP:SP:EP NP:SP:EP   3 steps under the first layout, resumed under the second, vs 8 straight
#   base_changed                     a base from model.model_path, one byte changed after the save: resume exits 2
#   whole_model_tools                veomni-ckpt-merge and veomni-score on an adapter checkpoint exit 2
# KIND dense (qwen3_toy) or moe (qwen3_moe_toy, adapters on the experts too).
set -uo pipefail
bin=$1 src=$2 case=$3
shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-lora-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Oversubscribed ranks must yield the core while they wait in collectives.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset VEOMNI_FAULT_INJECT

cd "$src"  # recipes name their model config relative to the repository root
"$bin/veomni-dummy-data" --type text --seq-len 64 --num-samples 48 --seed 5 --out "$work/data.h5" >/dev/null || exit 1

fail() { echo "FAIL: $*"; exit 1; }
model_of() { [[ $1 == moe ]] && echo qwen3_moe_toy || echo qwen3_toy; }
keys_of() { echo "loss,foundation_loss,$([[ $1 == moe ]] && echo aux_loss,)grad_norm,lr,tokens"; }
lora_args=(--model.lora_config.rank 4 --model.lora_config.alpha 8)

# train KIND NP:SP:EP OUT [overrides...]: 8 steps of 4 samples with LoRA, a checkpoint every 3 steps (and at 8).
train() {
  local kind=$1 layout=$2 out=$3 np sp ep
  IFS=: read -r np sp ep <<<"$layout"
  shift 3
  mpirun --oversubscribe -np "$np" "$bin/veomni-train" "configs/$(model_of "$kind").yaml" \
    --data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8 \
    --train.checkpoint.save_steps 3 --train.checkpoint.output_dir "$out" --train.accelerator.ulysses_size "$sp" \
    --train.accelerator.ep_size "$ep" --train.device cpu --log-level warn "${lora_args[@]}" "$@"
}

# The checkpoint holds adapters only (every parameter name has lora_A / lora_B), and names its base.
check_adapter_checkpoint() {
  local meta=$1/metadata.json
  [ -f "$meta" ] || fail "no $meta"
  python3 - "$meta" <<'PY' || fail "$meta is not an adapter checkpoint"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["format_version"] == 3, m["format_version"]
assert m["lora"]["rank"] == 4, m["lora"]
assert "base_model" in m
names = [p["name"] for p in m["parameters"]]
assert names and all(".lora_A." in n or ".lora_B." in n for n in names), names
PY
}

case "$case" in
  resume)
    kind=$1 layout=$2
    train "$kind" "$layout" "$work/straight" || fail "straight run"
    check_adapter_checkpoint "$work/straight/checkpoints/global_step_8"
    train "$kind" "$layout" "$work/stopped" --train.max_steps 3 || fail "first half"
    # The same 8-step schedule: resume from step 3 with max_steps 8.
    train "$kind" "$layout" "$work/stopped" --train.checkpoint.load_path auto || fail "resume"
    "$bin/veomni-align-check" --rtol 0 --atol 0 --keys "$(keys_of "$kind")" "$work/straight" "$work/stopped" ||
      fail "resumed run differs from the straight one"
    for f in "$work/straight/checkpoints/global_step_8"/rank-*.h5; do
      cmp -s "$f" "$work/stopped/checkpoints/global_step_8/$(basename "$f")" || fail "$(basename "$f") differs"
    done
    echo "ok: LoRA resume of $kind $layout is bit-exact"
    ;;
  reshard)
    kind=$1 from=$2 to=$3
    train "$kind" "$to" "$work/straight" || fail "straight run"
    train "$kind" "$from" "$work/moved" --train.max_steps 3 || fail "first part under $from"
    train "$kind" "$to" "$work/moved" --train.checkpoint.load_path auto || fail "resume under $to"
    "$bin/veomni-align-check" --rtol 1e-5 --atol 1e-7 --keys "$(keys_of "$kind")" "$work/straight" "$work/moved" ||
      fail "resharded resume not aligned"
    echo "ok: LoRA resume of $kind from $from under $to is aligned"
    ;;
  base_changed)
    # A base model directory: a full fine-tuning run of one step, merged to HF.
    mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
      --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 1 --train.checkpoint.output_dir "$work/full" \
      --train.device cpu --log-level warn || fail "base run"
    "$bin/veomni-ckpt-merge" "$work/full" --out "$work/base" --no-tokenizer --log-level warn >/dev/null || fail "merge"
    train dense 2:1:1 "$work/adapted" --model.model_path "$work/base" --train.max_steps 3 || fail "LoRA on the base"
    check_adapter_checkpoint "$work/adapted/checkpoints/global_step_3"
    grep -q "$work/base" "$work/adapted/checkpoints/global_step_3/metadata.json" || fail "base path not recorded"
    # Unchanged: the resume runs.
    cp -r "$work/adapted" "$work/adapted_again"
    train dense 2:1:1 "$work/adapted_again" --model.model_path "$work/base" --train.checkpoint.load_path auto ||
      fail "resume on the unchanged base"
    # One byte of the last tensor's data flipped: exit 2, both checksums, the path, a hint.
    python3 - "$work/base/model.safetensors" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[-3] ^= 0x01
open(path, "wb").write(bytes(data))
PY
    code=0
    train dense 2:1:1 "$work/adapted" --model.model_path "$work/base" --train.checkpoint.load_path auto \
      >"$work/out" 2>"$work/err" || code=$?
    [ "$code" -eq 2 ] || { cat "$work/out" "$work/err"; fail "exit $code on a changed base, expected 2"; }
    for fragment in "model.safetensors" "checksum" "fnv1a64w:" "$work/base" "hint"; do
      grep -qF -- "$fragment" "$work/err" || { cat "$work/err"; fail "'$fragment' not in the error"; }
    done
    [ "$(grep -o 'fnv1a64w:[0-9a-f]*' "$work/err" | sort -u | wc -l)" -ge 2 ] || { cat "$work/err"; fail "not both checksums"; }
    echo "ok: a changed base is refused with exit 2"
    ;;
  whole_model_tools)
    train dense 1:1:1 "$work/run" --train.max_steps 3 || fail "LoRA run"
    code=0
    "$bin/veomni-ckpt-merge" "$work/run" --out "$work/hf" --no-tokenizer >"$work/out" 2>"$work/err" || code=$?
    [ "$code" -eq 2 ] || { cat "$work/out" "$work/err"; fail "veomni-ckpt-merge exit $code, expected 2"; }
    grep -qF "adapter checkpoint" "$work/err" || { cat "$work/err"; fail "the merge error does not say why"; }
    [ ! -e "$work/hf" ] || fail "the refused merge left $work/hf"
    # A whole-model run cannot resume an adapter checkpoint, nor a LoRA run a whole model's.
    code=0
    mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
      --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8 --train.checkpoint.output_dir "$work/run" \
      --train.checkpoint.load_path auto --train.device cpu --log-level warn >"$work/out" 2>"$work/err" || code=$?
    [ "$code" -eq 2 ] || { cat "$work/out" "$work/err"; fail "whole-model resume of an adapter checkpoint: exit $code"; }
    grep -qF "adapter" "$work/err" || { cat "$work/err"; fail "the resume error does not say why"; }
    echo "ok: tools that need a whole model refuse an adapter checkpoint"
    ;;
  *) fail "unknown case '$case'" ;;
esac
