#!/usr/bin/env bash
# veomni-train with LoRA: at init (B = 0) the adapted model is the base model, so the first step's loss equals that
# of a run without LoRA exactly; the adapters then train (the second step's loss moves); a lora_modules entry that
# matches no module of the model is refused with exit 2, naming the key and the entry.
# usage: lora_train.sh BIN_DIR SOURCE_DIR [cpu|cuda]
set -euo pipefail
bin=$1 src=$2 device=${3:-cpu}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-lora-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=2
cd "$src"
precision=(--train.precision fp32)
[ "$device" = cuda ] && precision=(--train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true
                                   --train.accelerator.fsdp_config.mixed_precision.param_dtype bfloat16)
"$bin/veomni-dummy-data" --type text --seq-len 33 --num-samples 8 --seed 5 --out "$work/data.h5" >/dev/null
train() {
  local out=$1
  shift
  "$bin/veomni-train" configs/qwen3_moe_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 32 \
    --train.global_batch_size 2 --train.micro_batch_size 1 --train.max_steps 2 --train.num_train_epochs 1 \
    --train.device "$device" "${precision[@]}" --train.checkpoint.output_dir "$out" --train.checkpoint.save_steps -1 \
    --log-level warn "$@"
}
losses() { tr -d '\n ' <"$1/log_dict.json" | sed 's/.*"loss":\[\([^]]*\)\].*/\1/' | tr ',' ' '; }
train "$work/base"
train "$work/lora" --model.lora_config.rank 4 --model.lora_config.alpha 8
read -r base1 base2 <<<"$(losses "$work/base")"
read -r lora1 lora2 <<<"$(losses "$work/lora")"
echo "losses: base $base1 $base2, lora $lora1 $lora2"
[ "$base1" = "$lora1" ] || { echo "FAIL: LoRA at init changed the first step's loss" >&2; exit 1; }
[ "$base2" != "$lora2" ] || { echo "FAIL: LoRA trained like full fine-tuning" >&2; exit 1; }
code=0
train "$work/typo" --model.lora_config.rank 4 --model.lora_config.lora_modules '[q_proj,qproj]' 2>"$work/err" || code=$?
[ "$code" -eq 2 ] || { cat "$work/err" >&2; echo "FAIL: exit $code for an unmatched lora_modules entry" >&2; exit 1; }
grep -q "model.lora_config.lora_modules.*'qproj'" "$work/err" || { cat "$work/err" >&2; echo "FAIL: message" >&2; exit 1; }
echo "lora_train: ok"
