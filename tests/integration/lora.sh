#!/usr/bin/env bash
# LoRA training under mpirun on the CPU (fp32): adapter checkpoints hold the adapters (and their AdamW moments) and
# the base's identity only; a run stopped and resumed from one reproduces the uninterrupted run bit for bit; a resume
# under another layout stays aligned at rtol 1e-5; a changed base is refused with exit 2 naming both checksums; tools
# that need a whole model refuse an adapter checkpoint with exit 2.
# usage: lora.sh BIN_DIR SOURCE_DIR CASE [ARGS...]
#   resume KIND NP:SP:EP             8 steps straight vs 3 steps + resume: same bits (metrics and rank files)
#   reshard KIND NP:SP:EP NP:SP:EP   3 steps under the first layout, resumed under the second, vs 8 straight
#   base_changed                     a base from model.model_path, one byte changed after the save: resume exits 2
#   whole_model_tools                veomni-score and a whole-model resume refuse an adapter checkpoint, and
#                                    veomni-ckpt-merge refuses to merge adapters into a random base (exit 2)
#   merge_outputs                    a LoRA run from the MoE toy's HF directory: veomni-ckpt-merge writes the merged
#                                    model (base + scale * B A: scored like the LoRA model by veomni-score) and
#                                    PEFT's adapter directory (names and shapes)
#   merge_outputs_vl                 the same on a Qwen3-VL base with adapters in the vision tower too
# KIND dense (qwen3_toy) or moe (qwen3_moe_toy, adapters on the experts too).
set -uo pipefail
bin=$1 src=$2 case=$3
shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-lora-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Oversubscribed ranks must yield the core while they wait in collectives.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset VEOMNI_FAULT_INJECT

cd "$src"  # recipes name their model config relative to the repository root
"$bin/veomni-dummy-data" --type text --seq-len 64 --num-samples 48 --seed 5 --out "$work/data.h5" >/dev/null || exit 1

fail() { echo "FAIL: $*"; exit 1; }
model_of() { [[ $1 == moe ]] && echo qwen3_moe_toy || echo qwen3_toy; }
keys_of() { echo "loss,foundation_loss,$([[ $1 == moe ]] && echo aux_loss,)grad_norm,lr,tokens"; }
lora_args=(--model.lora_config.rank 4 --model.lora_config.alpha 8)

# stop_at_step_5 KIND NP:SP:EP OUT: the 8-step run killed by an injected fault at step 5, its step-3 checkpoint left.
stop_at_step_5() {
  VEOMNI_FAULT_INJECT=rank=0,step=5 train "$1" "$2" "$3" >"$work/stop.out" 2>&1 &&
    { cat "$work/stop.out"; fail "the run with an injected fault at step 5 exited 0"; }
  [ "$(cat "$3/checkpoints/latest")" = global_step_3 ] || fail "latest is $(cat "$3/checkpoints/latest")"
}

# train KIND NP:SP:EP OUT [overrides...]: 8 steps of 4 samples with LoRA, a checkpoint every 3 steps (and at 8).
train() {
  local kind=$1 layout=$2 out=$3 np sp ep
  IFS=: read -r np sp ep <<<"$layout"
  shift 3
  mpirun --oversubscribe -np "$np" "$bin/veomni-train" "configs/$(model_of "$kind").yaml" \
    --data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8 \
    --train.checkpoint.save_steps 3 --train.checkpoint.output_dir "$out" --train.accelerator.ulysses_size "$sp" \
    --train.accelerator.ep_size "$ep" --train.device cpu --log-level warn "${lora_args[@]}" "$@"
}

# The checkpoint holds adapters only (every parameter name has lora_A / lora_B), and names its base.
check_adapter_checkpoint() {
  local meta=$1/metadata.json
  [ -f "$meta" ] || fail "no $meta"
  python3 - "$meta" <<'PY' || fail "$meta is not an adapter checkpoint"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["format_version"] == 3, m["format_version"]
assert m["lora"]["rank"] == 4, m["lora"]
assert "base_model" in m
names = [p["name"] for p in m["parameters"]]
assert names and all(".lora_A." in n or ".lora_B." in n for n in names), names
PY
}

case "$case" in
  resume)
    kind=$1 layout=$2
    train "$kind" "$layout" "$work/straight" || fail "straight run"
    check_adapter_checkpoint "$work/straight/checkpoints/global_step_8"
    # The same 8-step schedule, stopped at step 5 (after the step-3 save), resumed with load_path auto.
    stop_at_step_5 "$kind" "$layout" "$work/stopped"
    train "$kind" "$layout" "$work/stopped" --train.checkpoint.load_path auto || fail "resume"
    "$bin/veomni-align-check" --rtol 0 --atol 0 --keys "$(keys_of "$kind")" "$work/straight" "$work/stopped" ||
      fail "resumed run differs from the straight one"
    for f in "$work/straight/checkpoints/global_step_8"/rank-*.h5; do
      cmp -s "$f" "$work/stopped/checkpoints/global_step_8/$(basename "$f")" || fail "$(basename "$f") differs"
    done
    echo "ok: LoRA resume of $kind $layout is bit-exact"
    ;;
  reshard)
    kind=$1 from=$2 to=$3
    train "$kind" "$to" "$work/straight" || fail "straight run"
    stop_at_step_5 "$kind" "$from" "$work/moved"
    train "$kind" "$to" "$work/moved" --train.checkpoint.load_path auto || fail "resume under $to"
    "$bin/veomni-align-check" --rtol 1e-5 --atol 1e-7 --keys "$(keys_of "$kind")" "$work/straight" "$work/moved" ||
      fail "resharded resume not aligned"
    echo "ok: LoRA resume of $kind from $from under $to is aligned"
    ;;
  base_changed)
    # A base model directory: a full fine-tuning run of one step, merged to HF.
    mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
      --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 1 --train.checkpoint.output_dir "$work/full" \
      --train.device cpu --log-level warn || fail "base run"
    "$bin/veomni-ckpt-merge" "$work/full" --out "$work/base" --no-tokenizer --log-level warn >/dev/null || fail "merge"
    train dense 2:1:1 "$work/adapted" --model.model_path "$work/base" --train.max_steps 3 || fail "LoRA on the base"
    check_adapter_checkpoint "$work/adapted/checkpoints/global_step_3"
    grep -q "$work/base" "$work/adapted/checkpoints/global_step_3/metadata.json" || fail "base path not recorded"
    # Unchanged: the resume runs.
    cp -r "$work/adapted" "$work/adapted_again"
    train dense 2:1:1 "$work/adapted_again" --model.model_path "$work/base" --train.checkpoint.load_path auto ||
      fail "resume on the unchanged base"
    # One byte of the last tensor's data flipped: exit 2, both checksums, the path, a hint.
    python3 - "$work/base/model.safetensors" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[-3] ^= 0x01
open(path, "wb").write(bytes(data))
PY
    code=0
    train dense 2:1:1 "$work/adapted" --model.model_path "$work/base" --train.checkpoint.load_path auto \
      >"$work/out" 2>"$work/err" || code=$?
    [ "$code" -eq 2 ] || { cat "$work/out" "$work/err"; fail "exit $code on a changed base, expected 2"; }
    for fragment in "model.safetensors" "checksum" "fnv1a64w:" "$work/base" "hint"; do
      grep -qF -- "$fragment" "$work/err" || { cat "$work/err"; fail "'$fragment' not in the error"; }
    done
    [ "$(grep -o 'fnv1a64w:[0-9a-f]*' "$work/err" | sort -u | wc -l)" -ge 2 ] || { cat "$work/err"; fail "not both checksums"; }
    echo "ok: a changed base is refused with exit 2"
    ;;
  whole_model_tools)
    train dense 1:1:1 "$work/run" --train.max_steps 3 || fail "LoRA run"
    code=0
    "$bin/veomni-ckpt-merge" "$work/run" --out "$work/hf" --no-tokenizer >"$work/out" 2>"$work/err" || code=$?
    [ "$code" -eq 2 ] || { cat "$work/out" "$work/err"; fail "veomni-ckpt-merge exit $code, expected 2"; }
    grep -qF "initialised at random" "$work/err" || { cat "$work/err"; fail "the merge error does not say why"; }
    [ ! -e "$work/hf" ] || fail "the refused merge left $work/hf"
    # A whole-model run cannot resume an adapter checkpoint, nor a LoRA run a whole model's.
    code=0
    mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
      --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8 --train.checkpoint.output_dir "$work/run" \
      --train.checkpoint.load_path auto --train.device cpu --log-level warn >"$work/out" 2>"$work/err" || code=$?
    [ "$code" -eq 2 ] || { cat "$work/out" "$work/err"; fail "whole-model resume of an adapter checkpoint: exit $code"; }
    grep -qF "adapter" "$work/err" || { cat "$work/err"; fail "the resume error does not say why"; }
    echo "ok: tools that need a whole model refuse an adapter checkpoint"
    ;;
  merge_outputs)
    base=tests/fixtures/hf/qwen3_moe_toy/model
    train moe 2:1:2 "$work/run" --model.model_path "$base" --train.max_steps 3 --train.optimizer.lr 1e-2 ||
      fail "LoRA run"
    "$bin/veomni-ckpt-merge" "$work/run" --out "$work/merged" --no-tokenizer --log-level warn >/dev/null ||
      fail "veomni-ckpt-merge of the adapter checkpoint"
    "$bin/veomni-ckpt-merge" "$work/run" --peft --out "$work/peft" --log-level warn >/dev/null || fail "--peft"
    # One more step at a learning rate too small to move a weight: the LoRA model (resumed) and the merged model
    # (a whole model, the same data plan) see the same 4th batch and must give the same loss.
    tiny=(--train.optimizer.lr 1e-30 --train.optimizer.lr_min 0 --train.max_steps 4)
    train moe 2:1:2 "$work/run" --model.model_path "$base" --train.checkpoint.load_path auto "${tiny[@]}" ||
      fail "LoRA resume"
    mpirun --oversubscribe -np 2 "$bin/veomni-train" configs/qwen3_moe_toy.yaml --model.model_path "$work/merged" \
      --data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 4 \
      --train.checkpoint.save_steps -1 --train.checkpoint.output_dir "$work/merged_run" \
      --train.accelerator.ep_size 2 --train.device cpu --log-level warn "${tiny[@]}" || fail "merged-model run"
    python3 - "$work/run/log_dict.json" "$work/merged_run/log_dict.json" "$work/peft" "$base" <<'PY' || exit 1
import json, struct, sys
lora, merged = (json.load(open(p))["loss"][-1] for p in sys.argv[1:3])
print(f"step 4 loss: LoRA model {lora!r}, merged model {merged!r}")
if abs(lora - merged) > 1e-5 * abs(lora):
    sys.exit("FAIL: the merged model does not compute what the LoRA model computes")
with open(sys.argv[3] + "/adapter_model.safetensors", "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
config = json.load(open(sys.argv[3] + "/adapter_config.json"))
base_config = json.load(open(sys.argv[4] + "/config.json"))
experts, r = base_config.get("num_experts") or base_config["num_local_experts"], config["r"]
want = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [r, base_config["hidden_size"]],
        # gate_up_proj stands for gate_proj and up_proj: rank 2r (PEFT's rank_pattern)
        "base_model.model.model.layers.1.mlp.experts.base_layer.lora_A.weight": [experts * 2 * r, base_config["hidden_size"]],
        "base_model.model.model.layers.1.mlp.experts.lora_B.weight": [base_config["hidden_size"], experts * r]}
for name, shape in want.items():
    if header.get(name, {}).get("shape") != shape:
        sys.exit(f"FAIL: {name} is {header.get(name)}, expected shape {shape}")
if (config["peft_type"] != "LORA" or config["target_parameters"] != ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
        or config.get("rank_pattern") != {".*\\.gate_up_proj": 2 * r}):
    sys.exit(f"FAIL: adapter_config.json {config}")
print(f"PEFT directory: {len(header) - ('__metadata__' in header)} tensors, r {r}")
PY
    echo "ok: the merged model computes the LoRA model's loss; PEFT's directory has PEFT's names and shapes"
    ;;
  merge_outputs_vl)
    # A Qwen3-VL base on disk (one full step of the toy recipe, merged), then LoRA on it, vision tower included.
    "$bin/veomni-dummy-data" --type qwen3vl --seq-len 128 --num-samples 48 --seed 5 --out "$work/vl.h5" >/dev/null ||
      fail "VL data"
    vl=(configs/qwen3_vl_toy.yaml --data.train_path "$work/vl.h5" --data.max_seq_len 128 --train.global_batch_size 2
        --train.device cpu --train.checkpoint.save_steps 0 --log-level warn)
    config=$(sed -n 's/^ *config_path: *//p' configs/qwen3_vl_toy.yaml)
    mkdir -p "$work/vl_config"
    sed -E 's/"vocab_size": *[0-9]+/"vocab_size": 2048/' "$config/config.json" >"$work/vl_config/config.json"
    mpirun --oversubscribe -np 1 "$bin/veomni-train" "${vl[@]}" --model.config_path "$work/vl_config" \
      --train.max_steps 1 --train.checkpoint.output_dir "$work/vl_base_run" || fail "VL base run"
    "$bin/veomni-ckpt-merge" "$work/vl_base_run" --out "$work/vl_base" --no-tokenizer --log-level warn >/dev/null ||
      fail "VL base merge"
    lora_vl=("${vl[@]}" --model.config_path "$work/vl_base" --model.model_path "$work/vl_base"
             --model.lora_config.rank 4 --model.lora_config.lora_modules "[q_proj, down_proj, attn.qkv, mlp.linear_fc1]")
    mpirun --oversubscribe -np 2 "$bin/veomni-train" "${lora_vl[@]}" --train.max_steps 3 --train.optimizer.lr 1e-2 \
      --train.checkpoint.output_dir "$work/vl_run" || fail "VL LoRA run"
    "$bin/veomni-ckpt-merge" "$work/vl_run" --out "$work/vl_merged" --no-tokenizer --log-level warn >/dev/null ||
      fail "veomni-ckpt-merge of the VL adapter checkpoint"
    "$bin/veomni-ckpt-merge" "$work/vl_run" --peft --out "$work/vl_peft" --log-level warn >/dev/null || fail "VL --peft"
    # The vision tower's own learning rate (train.vit_lr) must be as small, or the merged model's tower would move.
    tiny=(--train.optimizer.lr 1e-30 --train.optimizer.lr_min 0 --train.vit_lr 1e-30 --train.max_steps 4)
    mpirun --oversubscribe -np 2 "$bin/veomni-train" "${lora_vl[@]}" --train.checkpoint.output_dir "$work/vl_run" \
      --train.checkpoint.load_path auto "${tiny[@]}" || fail "VL LoRA resume"
    mpirun --oversubscribe -np 2 "$bin/veomni-train" "${vl[@]}" --model.config_path "$work/vl_merged" \
      --model.model_path "$work/vl_merged" --train.checkpoint.output_dir "$work/vl_merged_run" "${tiny[@]}" ||
      fail "VL merged-model run"
    python3 - "$work/vl_run/log_dict.json" "$work/vl_merged_run/log_dict.json" "$work/vl_peft" <<'PY' || exit 1
import json, struct, sys
lora, merged = (json.load(open(p))["loss"][-1] for p in sys.argv[1:3])
print(f"step 4 loss: VL LoRA model {lora!r}, merged model {merged!r}")
if abs(lora - merged) > 1e-5 * abs(lora):
    sys.exit("FAIL: the merged VL model does not compute what the LoRA model computes")
with open(sys.argv[3] + "/adapter_model.safetensors", "rb") as f:
    names = set(json.loads(f.read(struct.unpack("<Q", f.read(8))[0])))
for name in ("base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight",
             "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_B.weight"):
    if name not in names:
        sys.exit(f"FAIL: the PEFT directory lacks {name}")
PY
    echo "ok: the merged VL model computes the LoRA model's loss; PEFT's directory holds the vision adapters"
    ;;
  *) fail "unknown case '$case'" ;;
esac
