#!/usr/bin/env bash
# Generation throughput of veomni-generate on one GPU: a random-weight model of a bench shape (one training step of
# veomni-train on dummy data, saved as a HuggingFace directory), random prompts of PROMPT tokens, greedy decoding of
# NEW tokens (random weights rarely meet a stop token; the figures count the tokens made), bf16. Prints one JSON line
# per batch size: prefill and decode tokens/s from the tool's summary, and the fraction of the GPU's memory bandwidth
# the decode reached counting one read of the bf16 weights a step reads (the bound at small batch; against PEAK_BW
# bytes/s, by default the GPU's own from its name: generate_bench_lib.sh's gpu_peak_bandwidth, printed as peak_bw):
# all of them, except that an untied input embedding counts none (a step reads a row a sequence) and a MoE layer only
# the experts it routes to, expected for uniform routing (step_gib).
# MODEL_CONFIG_DIRS is a space-separated list; by default the dense Qwen3-0.6B shape and the MoE shape of
# Qwen3-30B-A3B cut to 4 layers.
# Each run decodes two batches of BATCH prompts and reports the second: the first pays the one-time costs (loading
# cuBLAS, building cuDNN attention plans, capturing CUDA graphs), as the peer's warm-up generate calls do.
# GENERATE_ARGS adds options to every veomni-generate call (e.g. --eager: decode op by op, without CUDA graphs).
# usage: bench/generate_throughput.sh BIN_DIR [MODEL_CONFIG_DIRS] [BATCHES="1 32"] [PROMPT=128] [NEW=128]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$1 models=${2:-$here/configs/model_configs/qwen3_0p6b $here/configs/model_configs/qwen3_30b_a3b_4l}
batches=${3:-1 32} prompt=${4:-128} new=${5:-128}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-generate-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$here/bench/generate_bench_lib.sh"
for model in $models; do  # the body is not indented: its here-documents end at column 0
hf=$(random_hf_dir "$bin" "$model" "$work")
for batch in $batches; do
  random_prompts $((2 * batch)) "$prompt" "$work/prompts.jsonl"
  "$bin/veomni-generate" --model "$hf" --prompts "$work/prompts.jsonl" --out "$work/out.jsonl" --device cuda \
    --batch-size "$batch" --max-new-tokens "$new" ${GENERATE_ARGS:-} 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
  python3 - "$hf" "$work/log" "$work/out.jsonl" "$batch" "$prompt" "$(gpu_peak_bandwidth)" <<'PY'
import json, os, re, sys
hf, log, out, batch, prompt, peak_bw = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
rows = [json.loads(l) for l in open(out)][-batch:]  # the second batch: the first one warmed up
prefill = round(sum(r["prompt_tokens"] for r in rows) / rows[0]["prefill_s"], 1)
decode = round(sum(len(r["token_ids"]) for r in rows) / rows[0]["decode_s"], 1)
new = sum(len(r["token_ids"]) for r in rows) // len(rows)
def bf16_sizes(path):  # name -> 2 bytes per element of each tensor in a safetensors file, whatever its stored dtype
    with open(path, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    sizes = {}
    for name, entry in header.items():
        if name != "__metadata__":
            n = 1
            for d in entry["shape"]:
                n *= d
            sizes[name] = 2 * n
    return sizes
sizes = {}
for f in os.listdir(hf):
    if f.endswith(".safetensors"):
        sizes.update(bf16_sizes(os.path.join(hf, f)))
config = json.load(open(os.path.join(hf, "config.json")))
weight_bytes = sum(sizes.values())
# What one step reads: every weight once, but of an untied input embedding only the batch's rows, and of the experts
# only those the step routes to, expected for uniform routing: E (1 - (1 - k/E)^batch) of E experts a layer.
untied = any(name.endswith("lm_head.weight") for name in sizes)
step_bytes = sum(v for name, v in sizes.items() if not (untied and "embed_tokens" in name) and ".experts." not in name)
experts = config.get("num_experts", config.get("num_local_experts", 0))  # transformers 5 names it num_local_experts
top_k = config.get("num_experts_per_tok", 0)
if experts:
    routed = 1.0 - (1.0 - top_k / experts) ** batch
    step_bytes += routed * sum(v for name, v in sizes.items() if ".experts." in name)
step_s = batch / decode  # one decode step produces a token for each of the batch's sequences
graphed = re.search(r"decode steps: (\d+), (\d+) of them replayed", open(log).read())
print(json.dumps({"peer": "veomni-generate", "graph_steps": f"{graphed.group(2)}/{graphed.group(1)}" if graphed else None, "config": config.get("model_type"),
                  "batch": batch, "prompt": prompt, "new_tokens": new, "prefill_tokens_per_s": prefill,
                  "decode_tokens_per_s": decode, "decode_ms_per_step": round(1e3 * step_s, 3),
                  "hbm_fraction": round(step_bytes / step_s / peak_bw, 4), "peak_bw": peak_bw,
                  "step_gib": round(step_bytes / 2**30, 3),
                  "weights_gib": round(weight_bytes / 2**30, 3)}))
PY
done
done
