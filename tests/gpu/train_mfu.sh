#!/usr/bin/env bash
# veomni-train's mfu on a GPU: 3 bf16 steps of the toy model, each of 2 micro-batches holding one 64-token sample;
# every step's mfu x step_time x peak equals the hand count 6·N·tokens + 12·Σ s²·head_dim·heads·layers
# (N = 139264 for qwen3_toy, man veomni-train) with the peak of the GPU's name (989.4 TFLOP/s on an H100 SXM or H200;
# a GPU outside the table must log 0); tokens_per_sec_per_gpu equals tokens_per_sec on one GPU; an fp32 run logs
# mfu 0; the TensorBoard file (where the build writes one) holds mfu as in log_dict.json.
# usage: train_mfu.sh BIN_DIR SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-mfu-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 65 --num-samples 8 --seed 3 --out "$work/data.h5" >/dev/null || exit 1
train() {
  local out=$1 precision=$2
  "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 64 \
    --train.micro_batch_size 1 --train.global_batch_size 2 --train.max_steps 3 --train.device cuda \
    --train.precision "$precision" --train.accelerator.fsdp_config.mixed_precision.enable true \
    --train.checkpoint.output_dir "$out" --train.checkpoint.save_steps -1 --log-level info >"$work/out" 2>&1 ||
    { cat "$work/out"; fail "training ($precision) failed"; }
}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)
train "$work/bf16" mixed
python3 - "$work/bf16/log_dict.json" "$gpu" <<'PY' || fail "mfu disagrees with the hand count"
import json, sys
log, gpu = json.load(open(sys.argv[1])), sys.argv[2]
table = [("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.4), ("H200", 989.4), ("H800", 989.4), ("A100", 312.0)]
peak = next((t for name, t in table if name in gpu), 0.0) * 1e12
n = 2 * (64 * (2 * 64 + 2 * 32) + 3 * 64 * 128) + 1024 * 64  # qwen3_toy: 139264
assert n == 139264
for i, (mfu, seconds, tokens) in enumerate(zip(log["mfu"], log["step_time"], log["tokens"]), start=1):
    seq = tokens / 2  # two micro-batches of one sample each
    flops = 6 * n * tokens + 12 * 2 * seq * seq * 16 * 4 * 2
    want = flops / seconds / peak if peak else 0.0
    if abs(mfu - want) > 1e-9 * max(want, 1e-30):
        sys.exit(f"step {i}: mfu {mfu!r}, hand count {want!r} ({gpu}, {tokens} tokens, {seconds} s)")
    tps, per_gpu = log["tokens_per_sec"][i - 1], log["tokens_per_sec_per_gpu"][i - 1]
    if per_gpu != tps:
        sys.exit(f"step {i}: tokens_per_sec_per_gpu {per_gpu} != tokens_per_sec {tps} on one GPU")
print(f"ok: mfu of {len(log['mfu'])} steps = hand count / step time / {peak / 1e12:g} TFLOP/s ({gpu})")
PY
grep -q "| MFU [0-9.]*%" "$work/out" || [[ $(python3 -c "print('H100' in '$gpu' or 'H200' in '$gpu')") == False ]] ||
  { cat "$work/out"; fail "the progress line shows no MFU"; }
if [[ -d $work/bf16/tensorboard ]]; then
  "$bin/tensorboard_vs_log" "$work/bf16/tensorboard" "$work/bf16/log_dict.json" mfu tokens_per_sec_per_gpu \
    max_memory_allocated_gib loss grad_norm lr >/dev/null || fail "the event file disagrees with log_dict.json"
  echo "ok: the TensorBoard file holds mfu, tokens/s per GPU and peak memory as log_dict.json does"
fi
train "$work/fp32" fp32
python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['mfu']; sys.exit(0 if m and all(v == 0 for v in m) else f'fp32 mfu {m}')" \
  "$work/fp32/log_dict.json" || fail "an fp32 run should log mfu 0"
echo "ok: an fp32 run logs mfu 0"
