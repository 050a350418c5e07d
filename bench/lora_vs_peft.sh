#!/usr/bin/env bash
# LoRA training against transformers + PEFT side by side in one call on one GPU: the Qwen3-8B shape, rank 16, alpha
# 32, adapters on q/k/v/o/gate/up/down_proj, one sample of 4096 random tokens per step, without and with full
# recomputation (gradient checkpointing on both sides alike). Ours is bench/train_throughput.sh, the peer
# bench/hf_lora_peer.py (PYTHON, default python3, with torch, transformers and peft). Prints each run's JSON line,
# then one line per mode: both tokens/s, both peak GiB and the speed-up.
# usage: bench/lora_vs_peft.sh BIN_DIR [STEPS=8] [SEQ=4096]
set -euo pipefail
bin=$1 steps=${2:-8} seq=${3:-4096}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model=$here/configs/model_configs/qwen3_8b
rank=16 alpha=32
python=${PYTHON:-python3}
"$python" -c 'import torch, transformers, peft' 2>/dev/null ||
  { echo "lora_vs_peft.sh: $python lacks torch, transformers or peft (set PYTHON)" >&2; exit 2; }
declare -A ours peer
for mode in none full; do
  recompute=false peer_flag=()
  [[ $mode == full ]] && recompute=true peer_flag=(--checkpointing)
  ours[$mode]=$(bash "$here/bench/train_throughput.sh" "$bin" "$model" "$seq" "$steps" 1 \
    --model.lora_config.rank "$rank" --model.lora_config.alpha "$alpha" \
    --train.gradient_checkpointing.enable "$recompute" | tail -n 1)
  echo "${ours[$mode]}"
  peer[$mode]=$("$python" "$here/bench/hf_lora_peer.py" --config "$model" --seq "$seq" --rank "$rank" \
    --alpha "$alpha" --steps "$steps" "${peer_flag[@]}" | tail -n 1)
  echo "${peer[$mode]}"
done
"$python" - "${ours[none]}" "${peer[none]}" "${ours[full]}" "${peer[full]}" <<'PY'
import json, sys
runs = (("no recomputation", sys.argv[1], sys.argv[2]), ("full recomputation", sys.argv[3], sys.argv[4]))
for mode, ours, peer in runs:
    o, p = json.loads(ours), json.loads(peer)
    print(f"{mode}: ours {o['tokens_per_s']:,.1f} tokens/s, {o['peak_memory_gib']} GiB; "
          f"peer {p['tokens_per_s']:,.1f} tokens/s, {p['peak_memory_gib']} GiB; "
          f"speed-up {o['tokens_per_s'] / p['tokens_per_s']:.2f}x")
PY
