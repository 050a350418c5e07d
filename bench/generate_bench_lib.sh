# What the veomni-generate benches share (sourced): a random-weight HF directory of a bench shape, random prompts.

# random_hf_dir BIN MODEL_CONFIG_DIR WORK: one bf16 training step of veomni-train on dummy data, saved as a
# HuggingFace directory; prints its path.
random_hf_dir() {
  local bin=$1 model=$2 work=$3 here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  rm -rf "$work/run"
  "$bin/veomni-dummy-data" --type text --seq-len 257 --num-samples 1 --seed 1 --out "$work/data.h5" --overwrite \
    >/dev/null
  "$bin/veomni-train" "$here/configs/qwen3_toy.yaml" --model.config_path "$model" --data.train_path "$work/data.h5" \
    --data.max_seq_len 256 --train.global_batch_size 1 --train.micro_batch_size 1 --train.max_steps 1 \
    --train.device cuda --train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true \
    --train.checkpoint.output_dir "$work/run" --train.checkpoint.save_steps 1 --train.checkpoint.save_hf_weights true \
    --log-level warn >/dev/null
  local hf=$work/run/checkpoints/global_step_1/hf_ckpt
  [[ -f $hf/config.json ]] || { echo "no HF directory at $hf" >&2; return 1; }
  echo "$hf"
}

# random_prompts BATCH LENGTH PATH: BATCH prompts of LENGTH random ids (seeded by BATCH) as input_ids JSONL.
random_prompts() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, random, sys
batch, length, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(batch)
with open(path, "w") as f:
    for _ in range(batch):
        f.write(json.dumps({"input_ids": [rng.randrange(100, 30000) for _ in range(length)]}) + "\n")
PY
}

# gpu_peak_bandwidth: the GPU's memory bandwidth in bytes/s for the benches' HBM fractions: PEAK_BW when set, else by
# the name nvidia-smi gives the first GPU (H200: 4.8e12; H100 PCIe: 2.0e12), else an H100 SXM's 3.35e12.
gpu_peak_bandwidth() {
  if [ -n "${PEAK_BW:-}" ]; then
    echo "$PEAK_BW"
    return
  fi
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H200*) echo 4.8e12 ;;
    *H100*PCIe*) echo 2.0e12 ;;
    *) echo 3.35e12 ;;
  esac
}
