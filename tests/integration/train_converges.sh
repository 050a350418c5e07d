#!/usr/bin/env bash
# The loss must fall clearly over 50 steps: the toy model memorises a small dummy dataset over many epochs (uniform
# random tokens cannot be predicted below ln(1024) = 6.93 otherwise, so a fall well below that is learning).
# usage: train_converges.sh BIN_DIR SOURCE_DIR MODEL
set -euo pipefail
bin=$1 src=$2 model=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-conv-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=2
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 32 --num-samples 8 --seed 11 --out "$work/data.h5" >/dev/null
mpirun --oversubscribe -np 1 "$bin/veomni-train" "configs/$model.yaml" --data.train_path "$work/data.h5" \
  --data.max_seq_len 32 --train.global_batch_size 4 --train.num_train_epochs 25 --train.max_steps -1 \
  --train.optimizer.lr 3e-3 --train.optimizer.lr_warmup_ratio 0.1 --train.optimizer.lr_decay_style cosine \
  --train.checkpoint.output_dir "$work/run" --train.checkpoint.save_steps 0 --train.device cpu --log-level warn
# log_dict.json: {"loss": [l1, ..., l50], ...}; compare the mean of the first 5 and of the last 5 steps.
awk 'BEGIN { RS = "]" } /"loss": *\[/ { sub(/.*"loss": *\[/, ""); n = split($0, v, ","); print n, v[1], v[n];
       a = 0; b = 0; for (i = 1; i <= 5; ++i) { a += v[i]; b += v[n - 5 + i] }
       printf "steps %d, first-5 mean %.4f, last-5 mean %.4f\n", n, a / 5, b / 5;
       exit !(n == 50 && b / 5 < a / 5 - 2.0) }' "$work/run/log_dict.json"
# The step-time breakdown is recorded for every step and fits in it: data + compute + optimizer <= step_time;
# the rest is metrics logging and the progress clock (printed as the coverage).
series() { tr -d '\n ' <"$work/run/log_dict.json" | sed "s/.*\"$1\":\[\([^]]*\)\].*/\1/" | tr ',' '\n'; }
paste <(series step_time) <(series data_time) <(series compute_time) <(series optimizer_time) | awk '
  { n++; parts = $2 + $3 + $4; if (parts > $1 * 1.0001 || $3 <= 0) bad++; total += $1; sum += parts }
  END { printf "step-time breakdown: %d steps, phases cover %.1f%% of step_time\n", n, 100 * sum / total;
        exit !(n == 50 && bad == 0) }'
