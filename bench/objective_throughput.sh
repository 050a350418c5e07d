#!/usr/bin/env bash
# Throughput of veomni-train's preference objectives on one GPU: DPO (policy + the frozen reference model, the start
# weights, computed in the step) or the Bradley-Terry reward model, on `veomni-dummy-data --type preference` pairs of
# SEQ tokens (chosen SEQ/2 then rejected SEQ/2), one pair per micro-batch and step, bf16 compute with fp32 master
# weights and AdamW. Prints tokens/s (pair tokens), MFU and peak GPU memory over the steps after the first WARMUP.
# MFU is the trainer's (libcommon/metrics/model_flops.h): 6N per token for the trained model (the reward model's head
# is score [1, H]), attention over the chosen and rejected sequences apart, and for DPO 2N more (and a third of the
# attention term) for the reference forward.
# usage: bench/objective_throughput.sh BIN_DIR MODEL_CONFIG_DIR dpo|reward [SEQ=4096] [STEPS=10] [extra args...]
set -euo pipefail
bin=$1 model=$2 objective=$3 seq=${4:-4096} steps=${5:-10}
shift $(( $# < 5 ? $# : 5 ))
warmup=3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-objective-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
total=$((steps + warmup))
"$bin/veomni-dummy-data" --type preference --seq-len "$seq" --num-samples "$total" --seed 1 --out "$work/pairs.h5" \
  >/dev/null
"$bin/veomni-train" "$here/configs/qwen3_toy.yaml" --model.config_path "$model" --data.train_path "$work/pairs.h5" \
  --data.max_seq_len "$seq" --train.global_batch_size 1 --train.micro_batch_size 1 --train.max_steps "$total" \
  --train.objective "$objective" --train.device cuda --train.precision mixed \
  --train.accelerator.fsdp_config.mixed_precision.enable true --train.gradient_checkpointing.enable false \
  --train.optimizer.lr 1e-6 --train.optimizer.lr_min 0 --train.optimizer.lr_warmup_ratio 0 --train.checkpoint.output_dir "$work/run" \
  --train.checkpoint.save_steps -1 --log-level "${LOG_LEVEL:-warn}" "$@"
python3 - "$model/config.json" "$work/run/log_dict.json" "$seq" "$warmup" "$objective" <<'PY'
import json, sys
log = json.load(open(sys.argv[2]))
seq, warmup, objective = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
times = log["step_time"][warmup:]
sec = sum(times) / len(times)
mfu = sum(m * t for m, t in zip(log["mfu"][warmup:], times)) / sum(times)  # the timed steps' FLOPs over their time
mem = max(log.get("max_memory_allocated_gib", [0])[warmup:] or [0])
print(json.dumps({"peer": "veomni", "objective": objective, "config": sys.argv[1], "seq": seq,
                  "tokens_per_s": round(seq / sec, 1), "mfu": round(mfu, 4),
                  "peak_memory_gib": round(mem, 2), "step_seconds": round(sec, 4),
                  "loss": round(log["loss"][-1], 4)}))
PY
