#!/usr/bin/env bash
# A 200-step bf16 GPU run falls like the fp32 run of the same model, data and seed: the mean loss of every 20-step
# window agrees within REL (bf16 rounding moves single steps, not the curve), and the loss falls.
# usage: train_curve.sh BIN_DIR SOURCE_DIR MODEL REL [MODEL_CONFIG_DIR REF_DEVICE SEQ LR]
#   MODEL: configs/MODEL.yaml (the recipe); MODEL_CONFIG_DIR overrides its model.config_path (e.g. the 0.6B shape);
#   REF_DEVICE (default cpu) runs the fp32 reference: `cuda` for models too large for the CPU in test time (the GPU
#   fp32 path equals the CPU's within 1e-4, gpu.train.cpu_vs_gpu_fp32_*); SEQ (default 64) tokens per sample;
#   LR (default 2e-3) the peak learning rate (warmup 5%, cosine decay).
set -euo pipefail
bin=$1 src=$2 model=$3 rel=$4 model_dir=${5:-} ref_device=${6:-cpu} seq=${7:-64} lr=${8:-2e-3}
model_args=()
[ -n "$model_dir" ] && model_args=(--model.config_path "$model_dir")
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-curve-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=8
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len $((seq + 1)) --num-samples 64 --seed 13 --out "$work/data.h5" >/dev/null
for run in ref bf16; do
  device=$ref_device precision=(--train.precision fp32)
  [ "$run" = bf16 ] && device=cuda precision=(--train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true)
  mpirun --oversubscribe --bind-to none -np 1 "$bin/veomni-train" "configs/$model.yaml" "${model_args[@]}" \
    --data.train_path "$work/data.h5" --data.max_seq_len "$seq" --train.global_batch_size 8 --train.num_train_epochs 25 --train.max_steps -1 \
    --train.optimizer.lr "$lr" --train.optimizer.lr_warmup_ratio 0.05 --train.optimizer.lr_decay_style cosine \
    --train.device "$device" "${precision[@]}" \
    --train.checkpoint.output_dir "$work/$run" --train.checkpoint.save_steps -1 --log-level warn
done
# Prints both curves in 20-step windows and fails when a window differs by more than REL or the loss did not fall.
losses() { tr -d '\n ' <"$1" | sed 's/.*"loss":\[\([^]]*\)\].*/\1/' | tr ',' '\n'; }
paste <(losses "$work/ref/log_dict.json") <(losses "$work/bf16/log_dict.json") | awk -v rel="$rel" -v ref="$ref_device" '
  { c[NR] = $1; g[NR] = $2 }
  END {
    if (NR != 200) { print "expected 200 steps, got " NR; exit 1 }
    bad = 0
    for (w = 0; w < 10; ++w) {
      a = 0; b = 0
      for (i = 1; i <= 20; ++i) { a += c[w * 20 + i]; b += g[w * 20 + i] }
      a /= 20; b /= 20; d = (a > b ? a - b : b - a) / a
      printf "steps %3d-%3d: %s fp32 %.4f  gpu bf16 %.4f  rel diff %.2e\n", w * 20 + 1, w * 20 + 20, ref, a, b, d
      if (d > rel) bad = 1
      if (w == 0) first = b; last = b
    }
    if (last > first - 1.0) { print "the GPU loss did not fall"; bad = 1 }
    exit bad
  }'
