#!/usr/bin/env bash
# The Qwen3-Omni toy (configs/qwen3_omni_moe_toy.yaml: vision tower, audio encoder, MoE LM) trained 2 steps on
# veomni-qwen3omni dummy data, merged by veomni-ckpt-merge (per-expert and stacked), loads in transformers
# (scripts/check_merged_thinker.py: Qwen3OmniMoeForConditionalGeneration.from_pretrained -> .thinker, and the
# Qwen3OmniMoeThinkerForConditionalGeneration built from thinker_config with the "thinker." prefix stripped, strict
# state dict) with every thinker parameter name matching, and its logits on one sample match our fp32 CPU forward
# of the same merged directory (relative 1e-4, max|diff| / max|ref|).
# usage: merged_omni_in_transformers.sh BIN_DIR SOURCE_DIR LOGITS_TOOL [TRAIN_DEVICE=cuda]
#   LOGITS_TOOL  the merged_thinker_logits test-support executable (tests/fixtures_tools/merged_thinker_logits.cc)
set -euo pipefail
bin=$1 src=$2 logits_tool=$3 device=${4:-cuda}

fail() { echo "merged_omni_in_transformers.sh: FAILED: $*" >&2; exit 1; }
# Runs one step; on failure names it and its exit status (the tool's own message is above it on stderr).
step() {
  local what=$1 rc=0
  shift
  echo "== $what"
  "$@" || rc=$?
  [ "$rc" -eq 0 ] || fail "$what (exit $rc): $*"
}

command -v python3 >/dev/null && python3 -c 'import torch, transformers, safetensors' 2>/dev/null ||
  { echo "SKIPPED: needs python3 with torch, transformers and safetensors"; exit 77; }
for tool in "$bin/veomni-dummy-data" "$bin/veomni-train" "$bin/veomni-ckpt-merge" "$logits_tool"; do
  [ -x "$tool" ] || fail "$tool is not built"
done
[ -f "$src/configs/qwen3_omni_moe_toy.yaml" ] || fail "$src is not the repository root (no configs/qwen3_omni_moe_toy.yaml)"
[ -f "$src/scripts/check_merged_thinker.py" ] || fail "no $src/scripts/check_merged_thinker.py"

work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-merged-omni-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$src"

# seq-len 256 gives 160-token samples: 8 image, 104 audio (two 400-frame clips) and 40 video tokens, 8 of text.
step "dummy qwen3omni data" "$bin/veomni-dummy-data" --type qwen3omni --seq-len 256 --num-samples 8 --seed 7 \
  --out "$work/data.h5" --log-level warn
step "train the Omni toy 2 steps ($device, fp32)" mpirun --bind-to none -np 1 "$bin/veomni-train" \
  configs/qwen3_omni_moe_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 256 \
  --train.global_batch_size 4 --train.micro_batch_size 1 --train.max_steps 2 --train.device "$device" \
  --train.precision fp32 --train.checkpoint.output_dir "$work/run" --train.checkpoint.save_steps 0 --log-level warn
step "merge (per-expert)" "$bin/veomni-ckpt-merge" "$work/run" --out "$work/merged" --no-tokenizer --log-level warn
step "merge (stacked experts)" "$bin/veomni-ckpt-merge" "$work/run" --out "$work/stacked" --experts stacked \
  --no-tokenizer --log-level warn
ls -l "$work/merged"
[ -f "$work/merged/config.json" ] || fail "veomni-ckpt-merge wrote no config.json in $work/merged"
step "our logits of the merged model (CPU, fp32, sample 0)" "$logits_tool" "$work/merged" "$work/data.h5" 0 \
  "$work/ours.safetensors"
step "transformers on the merged model" python3 scripts/check_merged_thinker.py "$work/merged" \
  "$work/ours.safetensors" --stacked "$work/stacked"
echo "merged_omni_in_transformers.sh: PASSED"
