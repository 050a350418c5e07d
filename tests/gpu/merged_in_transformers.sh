#!/usr/bin/env bash
# A mid-size MoE (configs/model_configs/qwen3_moe_mid: hidden 1024, 8 layers, 64 experts top-8) trained 2 steps on
# the GPU, merged by veomni-ckpt-merge (per-expert and stacked), loads with transformers'
# AutoModelForCausalLM.from_pretrained (scripts/gen_hf_fixtures.py --check-merged, which also checks that both merges
# give identical logits) and its logits match our fp32 forward (relative 1e-4).
# usage: merged_in_transformers.sh BIN_DIR SOURCE_DIR MERGED_LOGITS_CHECK
set -euo pipefail
bin=$1 src=$2 check=$3
command -v python3 >/dev/null && python3 -c 'import transformers' 2>/dev/null ||
  { echo "SKIPPED: needs python3 with transformers"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-merged-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 256 --num-samples 16 --seed 7 --out "$work/data.h5" >/dev/null
mpirun --bind-to none -np 1 "$bin/veomni-train" configs/qwen3_moe_toy.yaml --model.config_path configs/model_configs/qwen3_moe_mid \
  --data.train_path "$work/data.h5" --data.max_seq_len 255 --train.global_batch_size 4 --train.max_steps 2 \
  --train.device cuda --train.precision fp32 --train.checkpoint.output_dir "$work/run" --train.checkpoint.save_steps 0 \
  --log-level warn
# The directory is named after the fixture whose token batch the comparison uses (tests/fixtures/hf/qwen3_moe_toy).
mkdir -p "$work/merged/qwen3_moe_toy"
"$bin/veomni-ckpt-merge" "$work/run" --out "$work/merged/qwen3_moe_toy/model" --log-level warn
"$bin/veomni-ckpt-merge" "$work/run" --out "$work/stacked" --experts stacked --log-level warn
du -sh "$work/merged/qwen3_moe_toy/model"
python3 scripts/gen_hf_fixtures.py --check-merged "$work/merged" --stacked "$work/stacked"
"$check" "$work/merged/qwen3_moe_toy" cuda
