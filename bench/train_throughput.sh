#!/usr/bin/env bash
# End-to-end training throughput of veomni-train on one GPU: synthetic packed text (one sample of SEQ tokens per
# micro-batch), bf16 compute with fp32 master weights and AdamW, NP processes. Prints tokens/s, MFU (the trainer's
# per-step mfu: VeOmni's formula in libcommon/metrics/model_flops.h against the GPU's bf16 peak, 989.4 TFLOP/s on an
# H100 or H200) and peak GPU memory, averaged over the steps after the first WARMUP.
# usage: bench/train_throughput.sh BIN_DIR MODEL_CONFIG_DIR [SEQ=4096] [STEPS=10] [NP=1] [extra veomni-train args...]
# PROFILE=1 bench/train_throughput.sh ... also prints rank 0's op profile (VEOMNI_PROFILE_OPS=1, man veomni-train:
# per-op CUDA-event times over the timed steps, VEOMNI_PROFILE_OPS_SKIP_STEPS leaving the warm-up out) after the JSON
# line; the timed run is then a little slower.
# LOG_LEVEL=info bench/train_throughput.sh ... shows veomni-train's per-step lines (default warn).
# OFFLOAD=1 bench/train_throughput.sh ... trains with optimizer offload (train.accelerator.fsdp_config.offload true:
# masters and AdamW moments in host memory, the step streamed through the CPU); the JSON line then says "offload": true.
# Every JSON line carries the mean optimizer time per step (the AdamW step and, with offload, the masters' copy back
# to the GPU: optimizer_s) for comparing the two; run OFFLOAD=0 and OFFLOAD=1 on the same machine.
# DATA_TYPE=qwen3omni bench/train_throughput.sh ... trains a Qwen3-Omni thinker config (e.g.
# configs/model_configs/qwen3_omni_moe_mid) on `veomni-dummy-data --type qwen3omni` samples of exactly SEQ tokens
# (dummy --seq-len SEQ+96: 2 images (8 tokens), 2 audio clips (104), 1 video (40), SEQ-152 text; SEQ >= 152) with
# configs/qwen3_omni_moe_toy.yaml's recipe; tokens/s counts every LM token (media placeholders included) and MFU
# counts the LM's FLOPs only (the vision and audio encoders' are left out: a lower bound), as the JSON line says.
set -euo pipefail
bin=$1 model=$2 seq=${3:-4096} steps=${4:-10} np=${5:-1}
shift $(( $# < 5 ? $# : 5 ))
warmup=3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-throughput-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
total=$((steps + warmup))
if [[ ${PROFILE:-0} == 1 ]]; then
  export VEOMNI_PROFILE_OPS=1 VEOMNI_PROFILE_OPS_OUT="$work/ops" VEOMNI_PROFILE_OPS_SKIP_STEPS=$warmup
fi
data_type=${DATA_TYPE:-text}
case $data_type in
  text) dummy_seq=$((seq + 1)) recipe=$here/configs/qwen3_toy.yaml ;;
  qwen3omni)
    [[ $seq -ge 152 ]] || { echo "train_throughput.sh: DATA_TYPE=qwen3omni needs SEQ >= 152 (its media take 152 tokens)" >&2; exit 2; }
    dummy_seq=$((seq + 96)) recipe=$here/configs/qwen3_omni_moe_toy.yaml ;;
  *) echo "train_throughput.sh: DATA_TYPE must be text or qwen3omni, not '$data_type'" >&2; exit 2 ;;
esac
"$bin/veomni-dummy-data" --type "$data_type" --seq-len "$dummy_seq" --num-samples $((total * np)) --seed 1 \
  --out "$work/data.h5" >/dev/null
offload=false
[[ ${OFFLOAD:-0} == 1 ]] && offload=true
mpirun --bind-to none -np "$np" "$bin/veomni-train" "$recipe" --model.config_path "$model" \
  --data.train_path "$work/data.h5" --data.max_seq_len "$seq" --train.global_batch_size "$np" \
  --train.micro_batch_size 1 --train.max_steps "$total" --train.device cuda --train.precision mixed \
  --train.accelerator.fsdp_config.mixed_precision.enable true --train.gradient_checkpointing.enable false \
  --train.optimizer.lr 1e-4 --train.checkpoint.output_dir "$work/run" --train.checkpoint.save_steps -1 \
  --train.accelerator.fsdp_config.offload "$offload" \
  --log-level "${LOG_LEVEL:-warn}" "$@"
# MFU: the trainer's per-step mfu weighted by step time (= the timed steps' FLOPs over their time and the peak).
python3 - "$model/config.json" "$work/run/log_dict.json" "$seq" "$warmup" "$np" "$data_type" "$offload" <<'PY'
import json, sys
cfg, log = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
seq, warmup, np_ = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
extra = {}
if "thinker_config" in cfg:  # Qwen3-Omni: the trainer's MFU counts the language model only
    extra = {"data_type": sys.argv[6], "mfu_scope": "LM only (vision tower and audio encoder FLOPs not counted)",
             "tokens_counted": "all LM tokens incl. image/video/audio placeholders"}
times = log["step_time"][warmup:]
sec = sum(times) / len(times)
mfu = sum(m * t for m, t in zip(log["mfu"][warmup:], times)) / sum(times)
mem = max(log.get("max_memory_allocated_gib", [0])[warmup:] or [0])
# optimizer_time is the optimizer's own share of each step (the trainer logs consecutive laps: data, compute, optimizer).
opt = log["optimizer_time"][warmup:]
print(json.dumps({"peer": "veomni", "config": sys.argv[1], "seq": seq, "gpus": np_,
                  "tokens_per_s": round(np_ * seq / sec, 1), "tokens_per_s_per_gpu": round(seq / sec, 1),
                  "mfu": round(mfu, 4), "peak_memory_gib": round(mem, 2),
                  "step_seconds": round(sec, 4), "optimizer_s": round(sum(opt) / len(opt), 4),
                  "offload": sys.argv[7] == "true", "final_loss": round(log["loss"][-1], 4), **extra}))
PY
if [[ ${PROFILE:-0} == 1 ]]; then cat "$work/ops.rank0"; fi
