#!/usr/bin/env bash
# AdamW with float32 moments (train.optimizer.type adamw) against bfloat16 moments (anyprecision_adamw) on one GPU:
# (1) the dense 0.6B shape trained STEPS steps (default 200) on synthetic packed text of SEQ tokens (default 4096),
#     one sample a step, bf16 compute with fp32 masters, lr 1e-4 after 10 warm-up steps, once with each type from the
#     same initialisation and data: both loss curves' final and mean values, their differences (final, mean and
#     largest absolute, mean relative), the mean step time, optimizer_s (the optimizer's own share of a step) and peak
#     memory of each;
# (2) the MoE 30B-A3B shape with 4 layers through bench/train_throughput.sh (seq SEQ, 10 timed steps after 3 warm-up
#     steps) with each type: step time, optimizer_s, peak memory.
# Both parts run the fused AdamW (the step writes the bf16 compute copies: no separate cast). About 4-5 minutes on
# one H100 at the defaults; STEPS=100 or SEQ=2048 halves part (1).
# usage: bench/optimizer_precision_curve.sh BIN_DIR [STEPS=200] [SEQ=4096]
# PROFILE=1 also prints the MoE runs' op profiles (bench/train_throughput.sh's PROFILE=1).
set -euo pipefail
bin=$1 steps=${2:-200} seq=${3:-4096}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-optimizer-precision-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
dense=$here/configs/model_configs/qwen3_0p6b moe=$here/configs/model_configs/qwen3_30b_a3b_4l
warmup=3

"$bin/veomni-dummy-data" --type text --seq-len $((seq + 1)) --num-samples "$steps" --seed 1 --out "$work/data.h5" \
  >/dev/null
for type in adamw anyprecision_adamw; do
  start=$(date +%s)
  mpirun --bind-to none -np 1 "$bin/veomni-train" "$here/configs/qwen3_toy.yaml" --model.config_path "$dense" \
    --data.train_path "$work/data.h5" --data.max_seq_len "$seq" --train.global_batch_size 1 \
    --train.micro_batch_size 1 --train.max_steps "$steps" --train.device cuda --train.precision mixed \
    --train.accelerator.fsdp_config.mixed_precision.enable true --train.gradient_checkpointing.enable false \
    --train.optimizer.type "$type" --train.optimizer.lr 1e-4 --train.optimizer.lr_warmup_ratio $(
      python3 -c "print(10 / $steps)") --train.seed 7 \
    --train.checkpoint.output_dir "$work/$type" --train.checkpoint.save_steps -1 --log-level warn
  echo "dense 0.6B, $type: $steps steps in $(( $(date +%s) - start )) s" >&2
done
python3 - "$work/adamw/log_dict.json" "$work/anyprecision_adamw/log_dict.json" "$steps" "$seq" "$warmup" <<'PY'
import json, sys
runs = {"adamw": json.load(open(sys.argv[1])), "anyprecision_adamw": json.load(open(sys.argv[2]))}
steps, seq, warmup = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def mean(xs): return sum(xs) / len(xs)
for name, log in runs.items():
    print(json.dumps({"shape": "dense 0.6B", "optimizer": name, "seq": seq, "steps": steps,
                      "final_loss": round(log["loss"][-1], 5), "mean_loss": round(mean(log["loss"]), 5),
                      "step_seconds": round(mean(log["step_time"][warmup:]), 4),
                      "optimizer_s": round(mean(log["optimizer_time"][warmup:]), 4),
                      "peak_memory_gib": round(max(log.get("max_memory_allocated_gib", [0])), 2)}))
a, b = runs["adamw"]["loss"], runs["anyprecision_adamw"]["loss"]
diff = [y - x for x, y in zip(a, b)]
print(json.dumps({"shape": "dense 0.6B", "compare": "anyprecision_adamw - adamw", "steps": len(diff),
                  "final_loss_diff": round(diff[-1], 5), "mean_loss_diff": round(mean(diff), 5),
                  "mean_abs_loss_diff": round(mean([abs(d) for d in diff]), 5),
                  "max_abs_loss_diff": round(max(abs(d) for d in diff), 5),
                  "mean_rel_loss_diff": round(mean([abs(d) / abs(x) for d, x in zip(diff, a)]), 6),
                  "loss_curve_every_20_steps": {n: [round(x, 4) for x in runs[n]["loss"][::20]] for n in runs}}))
PY
for type in adamw anyprecision_adamw; do
  echo "MoE 30B-A3B-4L, $type:"
  bash "$here/bench/train_throughput.sh" "$bin" "$moe" "$seq" 10 1 --train.optimizer.type "$type"
done
