#!/usr/bin/env bash
# train.optimizer.no_decay_modules / no_decay_params: a run whose no_decay_params cover every parameter ends with
# the weights of a run without weight decay, byte for byte; the default rule decays (other weights); an entry that
# matches no parameter or module type is refused with exit 2 naming the key.
# usage: train_no_decay.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-nodecay-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 33 --num-samples 8 --seed 3 --out "$work/data.h5" >/dev/null
train() {  # NAME ARGS...: 3 steps of the MoE toy, merged to $work/NAME.hf
  local name=$1
  shift
  "$bin/veomni-train" configs/qwen3_moe_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 32 \
    --train.global_batch_size 2 --train.max_steps 3 --train.num_train_epochs 1 --train.precision fp32 \
    --train.device cpu --train.optimizer.lr 1e-2 --train.optimizer.lr_warmup_ratio 0 \
    --train.checkpoint.output_dir "$work/$name" --train.checkpoint.save_steps 0 --log-level warn "$@" ||
    fail "veomni-train $*"
  "$bin/veomni-ckpt-merge" "$work/$name" --out "$work/$name.hf" --log-level warn >/dev/null || fail "merge $name"
}
train no_decay --train.optimizer.weight_decay 0
train all_excluded --train.optimizer.weight_decay 0.5 --train.optimizer.no_decay_params '[proj, gate, embed, norm, lm_head]'
cmp "$work/no_decay.hf/model.safetensors" "$work/all_excluded.hf/model.safetensors" ||
  fail "no_decay_params covering every parameter changed the weights"
train by_module --train.optimizer.weight_decay 0.5 --train.optimizer.no_decay_params '[]' \
  --train.optimizer.no_decay_modules '[Qwen3MoeRMSNorm, Embedding, Linear, Experts]'
cmp "$work/no_decay.hf/model.safetensors" "$work/by_module.hf/model.safetensors" ||
  fail "no_decay_modules covering every module type changed the weights"
train default_rule --train.optimizer.weight_decay 0.5
cmp -s "$work/no_decay.hf/model.safetensors" "$work/default_rule.hf/model.safetensors" &&
  fail "weight_decay 0.5 with the default rule left the weights as without decay"
echo "ok: covering every parameter equals weight_decay 0; the default rule decays"
refused() {  # FRAGMENT ARGS...
  local fragment=$1 code=0
  shift
  "$bin/veomni-train" configs/qwen3_moe_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 32 \
    --train.global_batch_size 2 --train.max_steps 1 --train.checkpoint.output_dir "$work/refused" \
    --train.checkpoint.save_steps -1 "$@" >/dev/null 2>"$work/err" || code=$?
  [ "$code" -eq 2 ] || { cat "$work/err" >&2; fail "exit $code, expected 2: $*"; }
  grep -qF -- "$fragment" "$work/err" || { cat "$work/err" >&2; fail "'$fragment' not in the message"; }
}
refused "train.optimizer.no_decay_params: 'bias'" --train.optimizer.no_decay_params '[bias]'
refused "train.optimizer.no_decay_modules: 'LayerNorm'" --train.optimizer.no_decay_modules '[LayerNorm]'
echo "train_no_decay: ok"
