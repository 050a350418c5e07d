#!/usr/bin/env bash
# Decode speed of veomni-generate on one GPU and where its step goes: a random-weight model of MODEL_CONFIG_DIR (one
# training step of veomni-train on dummy data, saved as a HuggingFace directory), random prompts of PROMPT tokens,
# greedy decoding of NEW tokens in bf16. Prints the tool's summary line per batch size with the skinny decode GEMM
# on (the default) and off (VEOMNI_SKINNY_GEMM=0: cuBLASLt for every GEMM), then the per-op profile
# (VEOMNI_PROFILE_OPS=1) of a batch-1 run: calls, time per call and share of each op.
# usage: bench/decode_profile.sh BIN_DIR [MODEL_CONFIG_DIR=configs/model_configs/qwen3_0p6b] [BATCHES="1 32"]
#                                [PROMPT=128] [NEW=128]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$1 model=${2:-$here/configs/model_configs/qwen3_0p6b} batches=${3:-1 32} prompt=${4:-128} new=${5:-128}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-decode-profile-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$here/bench/generate_bench_lib.sh"
hf=$(random_hf_dir "$bin" "$model" "$work")
prompts() { random_prompts "$1" "$prompt" "$work/prompts.jsonl"; }  # $1 prompts of $prompt random ids
generate() {  # batch, then extra environment assignments
  local batch=$1
  shift
  env "$@" "$bin/veomni-generate" --model "$hf" --prompts "$work/prompts.jsonl" --out "$work/out.jsonl" \
    --device cuda --batch-size "$batch" --max-new-tokens "$new" 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
}
for batch in $batches; do
  prompts "$batch"
  for skinny in 1 0; do
    generate "$batch" VEOMNI_SKINNY_GEMM=$skinny
    echo "batch $batch VEOMNI_SKINNY_GEMM=$skinny: $(grep 'done:' "$work/log" | tail -1)"
  done
done
prompts 1
generate 1 VEOMNI_PROFILE_OPS=1
echo "per-op profile, batch 1, $new new tokens after a $prompt-token prompt:"
sed -n '/done:/,$p' "$work/log" | tail -n +2
