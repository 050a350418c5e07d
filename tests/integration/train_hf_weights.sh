#!/usr/bin/env bash
# HF weights during training (train.checkpoint.save_hf_weights, hf_save_steps): <checkpoint>/hf_ckpt appears at
# the hf_save_steps steps and at the end, and equals byte for byte what veomni-ckpt-merge writes from the same
# checkpoint; a LoRA run's equals the merge of its adapter checkpoint into the base model.
# usage: train_hf_weights.sh BIN_DIR SOURCE_DIR [full|lora]
set -euo pipefail
bin=$1 src=$2 case=${3:-full}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-hfw-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 33 --num-samples 16 --seed 3 --out "$work/data.h5" >/dev/null
train() {  # OUT ARGS...: the MoE toy on two ranks (EP 2), 4 steps
  local out=$1
  shift
  mpirun --oversubscribe --bind-to none -np 2 "$bin/veomni-train" configs/qwen3_moe_toy.yaml \
    --data.train_path "$work/data.h5" --data.max_seq_len 32 --train.global_batch_size 2 --train.max_steps 4 \
    --train.num_train_epochs 1 --train.precision fp32 --train.device cpu --train.accelerator.ep_size 2 \
    --train.checkpoint.output_dir "$out" --train.checkpoint.save_hf_weights true --log-level warn "$@" ||
    fail "veomni-train $*"
}
same_as_merge() {  # CHECKPOINT: its hf_ckpt equals veomni-ckpt-merge's directory, file for file
  local ck=$1 merged
  merged=$(mktemp -u "$work/merged-XXXXXX")
  [ -d "$ck/hf_ckpt" ] || fail "no $ck/hf_ckpt"
  "$bin/veomni-ckpt-merge" "$ck" --out "$merged" --log-level warn >/dev/null || fail "veomni-ckpt-merge $ck"
  [ "$(ls "$ck/hf_ckpt")" = "$(ls "$merged")" ] || fail "files differ: $(ls "$ck/hf_ckpt") vs $(ls "$merged")"
  for f in "$merged"/*; do cmp "$f" "$ck/hf_ckpt/$(basename "$f")" || fail "$ck/hf_ckpt/$(basename "$f") differs"; done
  ls "$ck" | grep -q 'tmp' && fail "a temporary entry is left in $ck: $(ls "$ck")"
  echo "ok: $ck/hf_ckpt equals veomni-ckpt-merge's output"
}
case "$case" in
  full)
    # hf_save_steps 0: HF weights with the last checkpoint only (VeOmni's default).
    train "$work/end" --train.checkpoint.save_steps 2
    [ -d "$work/end/checkpoints/global_step_2/hf_ckpt" ] && fail "hf_ckpt at step 2 with hf_save_steps 0"
    same_as_merge "$work/end/checkpoints/global_step_4"
    # hf_save_steps 3: a checkpoint and its HF weights after step 3, and at the end.
    train "$work/every" --train.checkpoint.save_steps 0 --train.checkpoint.hf_save_steps 3
    same_as_merge "$work/every/checkpoints/global_step_3"
    same_as_merge "$work/every/checkpoints/global_step_4"
    ;;
  lora)
    base=tests/fixtures/hf/qwen3_moe_toy/model
    train "$work/lora" --model.config_path "$base" --model.model_path "$base" --model.lora_config.rank 4 \
      --train.checkpoint.save_steps 0
    same_as_merge "$work/lora/checkpoints/global_step_4"
    grep -q '"lora' "$work/lora/checkpoints/global_step_4/hf_ckpt/model.safetensors" &&
      fail "the merged LoRA model still holds adapter tensors"
    ;;
  *) fail "unknown case '$case'" ;;
esac
echo "train_hf_weights $case: ok"
