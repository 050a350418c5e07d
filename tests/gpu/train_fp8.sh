#!/usr/bin/env bash
# The FP8 linears (train.accelerator.fp8) train like bf16: an 80-step run (10 epochs of 64 random samples) of the toy model on one GPU with fp8 on
# against the same run with it off; every step's loss agrees within REL, the two runs are not identical (the FP8
# GEMMs ran), and the fp8 run's mean loss falls from the first epoch to the last.
# usage: train_fp8.sh BIN_DIR SOURCE_DIR REL
set -euo pipefail
bin=$1 src=$2 rel=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-fp8-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=8
cd "$src"
# 128-token samples: every GEMM of the toy (hidden 64, q 64, kv 32, intermediate 128) has multiples of 16.
"$bin/veomni-dummy-data" --type text --seq-len 129 --num-samples 64 --seed 13 --out "$work/data.h5" >/dev/null
for fp8 in false true; do
  mpirun --oversubscribe --bind-to none -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml \
    --data.train_path "$work/data.h5" --data.max_seq_len 128 --train.global_batch_size 8 --train.num_train_epochs 10 \
    --train.max_steps -1 --train.optimizer.lr 2e-3 --train.device cuda --train.precision mixed \
    --train.accelerator.fsdp_config.mixed_precision.enable true \
    --train.accelerator.fp8 "$fp8" --train.checkpoint.output_dir "$work/fp8_$fp8" --train.checkpoint.save_steps -1 \
    --log-level warn
done
losses() { tr -d '\n ' <"$1" | sed 's/.*"loss":\[\([^]]*\)\].*/\1/' | tr ',' '\n'; }
paste <(losses "$work/fp8_false/log_dict.json") <(losses "$work/fp8_true/log_dict.json") | awk -v rel="$rel" '
  { b[NR] = $1; f[NR] = $2 }
  END {
    if (NR != 80) { print "expected 80 steps, got " NR; exit 1 }
    worst = 0; differ = 0
    for (i = 1; i <= NR; ++i) {
      d = (b[i] > f[i] ? b[i] - f[i] : f[i] - b[i]) / b[i]
      if (d > worst) worst = d
      if (b[i] != f[i]) differ = 1
    }
    printf "bf16 loss %.4f -> %.4f, fp8 loss %.4f -> %.4f, max step rel diff %.2e (limit %s)\n", b[1], b[NR], f[1], f[NR], worst, rel
    bad = 0
    if (worst > rel) { print "the fp8 losses left the bf16 ones"; bad = 1 }
    if (!differ) { print "fp8 on and off gave identical losses: the FP8 GEMMs did not run"; bad = 1 }
    first = 0; last = 0
    for (i = 1; i <= 8; ++i) { first += f[i]; last += f[NR - 8 + i] }
    if (last >= first) { print "the fp8 loss did not fall from the first epoch to the last"; bad = 1 }
    exit bad
  }'
