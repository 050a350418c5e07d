#!/usr/bin/env bash
# Loading speed of a HuggingFace directory: writes a model of MODEL_CONFIG_DIR's shape cut to LAYERS layers (every
# weight 0.01 or its bf16 neighbour; expert tensors per expert, as transformers 5 saves them) in DTYPE (F32 or BF16),
# then times veomni-generate loading it and making one token from a 4-token prompt on DEVICE, ROUNDS times. Prints one
# JSON line per round: wall seconds, GB/s of the file, and the tool's peak resident memory. The first round reads the
# file from disk, the later ones from the page cache.
# usage: bench/load_throughput.sh BIN_DIR [MODEL_CONFIG_DIR=configs/model_configs/qwen3_30b_a3b_4l] [LAYERS=1]
#                                 [DTYPE=F32] [DEVICE=cpu] [ROUNDS=3]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$1 model=${2:-$here/configs/model_configs/qwen3_30b_a3b_4l} layers=${3:-1} dtype=${4:-F32}
device=${5:-cpu} rounds=${6:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-load-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 - "$model/config.json" "$layers" "$dtype" "$work/model" <<'PY'
import json, os, struct, sys
config_path, layers, dtype, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
cfg = json.load(open(config_path))
cfg["num_hidden_layers"] = layers
h, v, d = cfg["hidden_size"], cfg["vocab_size"], cfg["head_dim"]
q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
experts = cfg.get("num_experts", cfg.get("num_local_experts", 0))
tensors = [("model.embed_tokens.weight", [v, h]), ("model.norm.weight", [h])]
if not cfg.get("tie_word_embeddings", False):
    tensors.append(("lm_head.weight", [v, h]))
for l in range(layers):
    p = f"model.layers.{l}."
    tensors += [(p + "input_layernorm.weight", [h]), (p + "post_attention_layernorm.weight", [h]),
                (p + "self_attn.q_proj.weight", [q, h]), (p + "self_attn.k_proj.weight", [kv, h]),
                (p + "self_attn.v_proj.weight", [kv, h]), (p + "self_attn.o_proj.weight", [h, q]),
                (p + "self_attn.q_norm.weight", [d]), (p + "self_attn.k_norm.weight", [d])]
    if experts:
        i = cfg["moe_intermediate_size"]
        tensors.append((p + "mlp.gate.weight", [experts, h]))
        for e in range(experts):
            tensors += [(p + f"mlp.experts.{e}.gate_proj.weight", [i, h]), (p + f"mlp.experts.{e}.up_proj.weight", [i, h]),
                        (p + f"mlp.experts.{e}.down_proj.weight", [h, i])]
    else:
        i = cfg["intermediate_size"]
        tensors += [(p + "mlp.gate_proj.weight", [i, h]), (p + "mlp.up_proj.weight", [i, h]),
                    (p + "mlp.down_proj.weight", [h, i])]
size = 4 if dtype == "F32" else 2
value = struct.pack("<f", 0.01) if dtype == "F32" else struct.pack("<H", 0x3c24)
header, offset = {}, 0
for name, shape in tensors:
    n = size
    for s in shape:
        n *= s
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
    offset += n
blob = json.dumps(header).encode()
blob += b" " * ((8 - len(blob) % 8) % 8)
os.makedirs(out)
chunk = value * (1 << 20)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(blob)) + blob)
    left = offset
    while left > 0:
        f.write(chunk[:min(left, len(chunk))])
        left -= min(left, len(chunk))
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
PY
echo '{"input_ids": [100, 200, 300, 400]}' >"$work/prompt.jsonl"
bytes=$(stat -c %s "$work/model/model.safetensors")
for round in $(seq "$rounds"); do
  python3 - "$round" "$dtype" "$device" "$bytes" "$bin/veomni-generate" --model "$work/model" \
    --prompts "$work/prompt.jsonl" --out "$work/out.jsonl" --device "$device" --max-new-tokens 1 <<'PY'
import json, resource, subprocess, sys, time
round_, dtype, device, size = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
start = time.monotonic()
subprocess.run(sys.argv[5:], check=True, stderr=subprocess.DEVNULL)
seconds = time.monotonic() - start
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # this process's only child
print(json.dumps({"round": round_, "dtype": dtype, "device": device, "file_gib": round(size / 2**30, 3),
                  "seconds": round(seconds, 2), "gb_per_s": round(size / seconds / 1e9, 2),
                  "peak_rss_gib": round(peak_kib / 2**20, 2)}))
PY
done
