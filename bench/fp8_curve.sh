#!/usr/bin/env bash
# FP8 linears against bf16 end to end: trains the same model, data and seed twice on NP GPUs, with
# train.accelerator.fp8 off and on (bf16 compute, fp32 masters and AdamW, synthetic packed text: one SEQ-token sample
# per micro-batch), and prints each run's final loss (the last step and the mean of the last 20), the largest relative
# difference of the two curves (per step and per 20-step window), and each run's tokens/s (mean over the steps after
# the first 3) with the fp8/bf16 ratio.
# usage: bench/fp8_curve.sh BIN_DIR [MODEL_CONFIG_DIR=configs/model_configs/qwen3_0p6b] [SEQ=4096] [STEPS=200] [NP=1]
#        [extra veomni-train args...]
# e.g. the Qwen3-8B shape on two GPUs, throughput only:
#   bench/fp8_curve.sh build-cuda/bin configs/model_configs/qwen3_8b 4096 20 2
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$1 model=${2:-$here/configs/model_configs/qwen3_0p6b} seq=${3:-4096} steps=${4:-200} np=${5:-1}
shift $(( $# < 5 ? $# : 5 ))
warmup=3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-fp8-curve-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
"$bin/veomni-dummy-data" --type text --seq-len $((seq + 1)) --num-samples $((steps * np)) --seed 1 \
  --out "$work/data.h5" >/dev/null
for fp8 in false true; do
  mpirun --bind-to none -np "$np" "$bin/veomni-train" "$here/configs/qwen3_toy.yaml" --model.config_path "$model" \
    --data.train_path "$work/data.h5" --data.max_seq_len "$seq" --train.global_batch_size "$np" \
    --train.micro_batch_size 1 --train.num_train_epochs 1 --train.max_steps "$steps" --train.device cuda \
    --train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true \
    --train.gradient_checkpointing.enable false --train.optimizer.lr 3e-4 --train.optimizer.lr_warmup_ratio 0.05 \
    --train.optimizer.lr_decay_style cosine --train.accelerator.fp8 "$fp8" \
    --train.checkpoint.output_dir "$work/fp8_$fp8" --train.checkpoint.save_steps -1 --log-level "${LOG_LEVEL:-warn}" "$@"
done
python3 - "$work/fp8_false/log_dict.json" "$work/fp8_true/log_dict.json" "$seq" "$np" "$warmup" "$model" <<'PY'
import json, sys
bf16, fp8 = (json.load(open(p)) for p in sys.argv[1:3])
seq, np_, warmup, model = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
def tokens_per_s(log):
    times = log["step_time"][warmup:] or log["step_time"]
    return np_ * seq * len(times) / sum(times)
a, b = bf16["loss"], fp8["loss"]
assert len(a) == len(b), f"{len(a)} bf16 steps, {len(b)} fp8 steps"
rel = lambda x, y: abs(x - y) / abs(x)
window = min(20, len(a))
windows = [(sum(a[i:i + window]) / window, sum(b[i:i + window]) / window) for i in range(0, len(a) - window + 1, window)]
tail = lambda v: sum(v[-window:]) / window
bf16_tps, fp8_tps = tokens_per_s(bf16), tokens_per_s(fp8)
print(json.dumps({
    "config": model, "seq": seq, "gpus": np_, "steps": len(a),
    "bf16_final_loss": round(a[-1], 4), "fp8_final_loss": round(b[-1], 4),
    "bf16_last20_mean": round(tail(a), 4), "fp8_last20_mean": round(tail(b), 4),
    "max_rel_diff_per_step": round(max(rel(x, y) for x, y in zip(a, b)), 5),
    "max_rel_diff_20_step_windows": round(max(rel(x, y) for x, y in windows), 5),
    "bf16_tokens_per_s": round(bf16_tps, 1), "fp8_tokens_per_s": round(fp8_tps, 1),
    "fp8_speedup": round(fp8_tps / bf16_tps, 3)}))
PY
