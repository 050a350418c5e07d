#!/usr/bin/env bash
# A 200-step bf16 GPU run of a toy falls like the fp32 CPU run of the same toy, data and seed: the mean loss of every
# 20-step window agrees within REL (bf16 rounding moves single steps, not the curve), and the loss falls.
# usage: train_curve.sh BIN_DIR SOURCE_DIR MODEL REL
set -euo pipefail
bin=$1 src=$2 model=$3 rel=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-curve-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=8
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 64 --num-samples 64 --seed 13 --out "$work/data.h5" >/dev/null
for device in cpu cuda; do
  precision=(--train.precision fp32)
  [ "$device" = cuda ] && precision=(--train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true)
  mpirun --oversubscribe --bind-to none -np 1 "$bin/veomni-train" "configs/$model.yaml" --data.train_path "$work/data.h5" \
    --data.max_seq_len 64 --train.global_batch_size 8 --train.num_train_epochs 25 --train.max_steps -1 \
    --train.optimizer.lr 2e-3 --train.optimizer.lr_warmup_ratio 0.05 --train.optimizer.lr_decay_style cosine \
    --train.device "$device" "${precision[@]}" \
    --train.checkpoint.output_dir "$work/$device" --train.checkpoint.save_steps 0 --log-level warn
done
# Prints both curves in 20-step windows and fails when a window differs by more than REL or the loss did not fall.
losses() { tr -d '\n ' <"$1" | sed 's/.*"loss":\[\([^]]*\)\].*/\1/' | tr ',' '\n'; }
paste <(losses "$work/cpu/log_dict.json") <(losses "$work/cuda/log_dict.json") | awk -v rel="$rel" '
  { c[NR] = $1; g[NR] = $2 }
  END {
    if (NR != 200) { print "expected 200 steps, got " NR; exit 1 }
    bad = 0
    for (w = 0; w < 10; ++w) {
      a = 0; b = 0
      for (i = 1; i <= 20; ++i) { a += c[w * 20 + i]; b += g[w * 20 + i] }
      a /= 20; b /= 20; d = (a > b ? a - b : b - a) / a
      printf "steps %3d-%3d: cpu fp32 %.4f  gpu bf16 %.4f  rel diff %.2e\n", w * 20 + 1, w * 20 + 20, a, b, d
      if (d > rel) bad = 1
      if (w == 0) first = b; last = b
    }
    if (last > first - 1.0) { print "the GPU loss did not fall"; bad = 1 }
    exit bad
  }'
