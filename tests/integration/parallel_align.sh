#!/usr/bin/env bash
# Trains one toy model under several parallel layouts (mpirun on the CPU, fp32) and checks that every layout's
# loss, foundation_loss and grad_norm match the first one with veomni-align-check.
# usage: parallel_align.sh BIN_DIR SOURCE_DIR MODEL RTOL ATOL LAYOUT... (LAYOUT = np:ulysses:ep[:micro_batch_size];
# a micro_batch_size of 2 packs two samples per micro-batch: the same global batch with half the accumulation steps)
set -euo pipefail
bin=$1 src=$2 model=$3 rtol=$4 atol=$5
shift 5
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-align-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Oversubscribed ranks must yield the core while they wait in collectives.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1

cd "$src"  # recipes name their model config relative to the repository root, as VeOmni recipes do
# Samples are truncated to 95 tokens, so sequence-parallel layouts pad every row (padding must not count).
"$bin/veomni-dummy-data" --type text --seq-len 96 --num-samples 48 --seed 3 --out "$work/data.h5" >/dev/null

runs=()
for layout in "$@"; do
  IFS=: read -r np sp ep mbs <<<"$layout"
  mbs=${mbs:-1}
  run="$work/np${np}_sp${sp}_ep${ep}_mbs${mbs}"
  echo "== layout np=$np ulysses=$sp ep=$ep micro_batch_size=$mbs"
  mpirun --oversubscribe -np "$np" "$bin/veomni-train" "$src/configs/$model.yaml" \
    --data.train_path "$work/data.h5" --data.max_seq_len 95 \
    --train.global_batch_size 4 --train.micro_batch_size "$mbs" --train.max_steps 3 --train.num_train_epochs 1 \
    --train.accelerator.ulysses_size "$sp" --train.accelerator.ep_size "$ep" \
    --train.checkpoint.output_dir "$run" --log-level warn
  runs+=("$run")
done
"$bin/veomni-align-check" --rtol "$rtol" --atol "$atol" --keys loss,foundation_loss,grad_norm "${runs[@]}"
