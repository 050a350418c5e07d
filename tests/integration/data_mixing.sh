#!/usr/bin/env bash
# Data mixing (data.datasets) under mpirun on the CPU (fp32): a mixed run stopped and resumed reproduces the
# uninterrupted one bit for bit (metrics with the per-source losses, and weights); resumed under another layout it stays
# aligned; the per-source losses weighted by their target counts give the foundation loss; a weight-0 source is never
# trained on; bad mixes exit 2 naming the key or the file.
# usage: data_mixing.sh BIN_DIR SOURCE_DIR CASE
set -uo pipefail
bin=$1 src=$2 case=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-mix-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset VEOMNI_FAULT_INJECT

cd "$src"
fail() { echo "FAIL: $*"; exit 1; }
dummy() { "$bin/veomni-dummy-data" --log-level warn "$@" >/dev/null || fail "veomni-dummy-data $*"; }
dummy --type text --seq-len 64 --num-samples 40 --seed 5 --out "$work/long.h5"
dummy --type text --seq-len 24 --num-samples 12 --seed 6 --out "$work/short.h5"
keys=loss,foundation_loss,grad_norm,lr,tokens,loss_long,loss_short,tokens_long,tokens_short
mix=("{path: $work/long.h5, weight: 0.6, name: long}" "{path: $work/short.h5, weight: 0.4, name: short}")

# train NP:SP OUT [overrides...]: 8 steps of 4 samples over the mix, a checkpoint every 3 steps (and at 8).
train() {
  local np sp out=$2
  IFS=: read -r np sp <<<"$1"
  shift 2
  mpirun --oversubscribe -np "$np" "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "" \
    --data.datasets "${mix[@]}" --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8 \
    --train.num_train_epochs 2 --train.checkpoint.save_steps 3 --train.checkpoint.output_dir "$out" \
    --train.accelerator.ulysses_size "$sp" --train.device cpu --log-level warn "$@"
}
latest_of() { cat "$1/checkpoints/latest" 2>/dev/null || echo none; }
crash_and_resume() {  # LAYOUT_BEFORE LAYOUT_AFTER OUT
  VEOMNI_FAULT_INJECT=rank=0,step=5 train "$1" "$3" >"$work/crash.out" 2>&1 && fail "the injected fault did not stop $3"
  [ "$(latest_of "$3")" = global_step_3 ] || fail "latest is $(latest_of "$3"), expected global_step_3"
  train "$2" "$3" --train.checkpoint.load_path auto || fail "resume of $3 failed"
  grep -q '"resumed_from": ".*global_step_3' "$3/run_summary.json" || fail "$3 did not resume"
}

case "$case" in
  resume)  # the same layout: bit for bit, metrics and rank files
    train 2:1 "$work/full" || fail "uninterrupted run failed"
    crash_and_resume 2:1 2:1 "$work/run"
    "$bin/veomni-align-check" --rtol 0 --atol 0 --keys "$keys" "$work/full" "$work/run" || fail "metrics differ"
    final=$(latest_of "$work/full")
    [ "$final" = "$(latest_of "$work/run")" ] || fail "the runs end at different checkpoints"
    for f in "$work/full/checkpoints/$final"/rank-*.h5; do
      cmp -s "$f" "$work/run/checkpoints/$final/$(basename "$f")" || fail "$final/$(basename "$f") differs"
    done
    grep -q '"format_version": 4' "$work/full/checkpoints/$final/metadata.json" || fail "metadata is not version 4"
    echo "ok: the resumed mixed run equals the uninterrupted one bit for bit" ;;

  reshard)  # saved under np1, resumed under np4 with SP 2: aligned, per-source losses included
    train 1:1 "$work/full" || fail "uninterrupted run failed"
    crash_and_resume 1:1 4:2 "$work/run"
    "$bin/veomni-align-check" --rtol 1e-5 --atol 0 --keys "$keys" "$work/full" "$work/run" ||
      fail "the resume under np4 / SP 2 is not aligned with np1" ;;

  per_source_loss)  # tokens-weighted mean of loss_<name> = foundation_loss; a weight-0 source has no token
    train 2:1 "$work/run" || fail "run failed"
    python3 - "$work/run/log_dict.json" <<'PY' || fail "per-source losses do not add up to the foundation loss"
import json, sys
log = json.load(open(sys.argv[1]))
steps = len(log["loss"])
assert steps == 16 and all(len(v) == steps for v in log.values()), "unequal series"
both = 0
for i in range(steps):
    n = [log["tokens_long"][i], log["tokens_short"][i]]
    mean = sum(log["loss_" + k][i] * log["tokens_" + k][i] for k in ("long", "short")) / sum(n)
    assert abs(mean - log["foundation_loss"][i]) <= 1e-6 * abs(mean), (i, mean, log["foundation_loss"][i])
    both += min(n) > 0
assert both > 0, "no step mixes both sources"
print(f"ok: {steps} steps, {both} with both sources; weighted per-source losses = foundation_loss")
PY
    mix=("{path: $work/long.h5, weight: 1, name: long}" "{path: $work/short.h5, weight: 0, name: short}")
    train 1:1 "$work/zero" --train.num_train_epochs 1 >"$work/zero.out" 2>&1 || { cat "$work/zero.out"; fail "run"; }
    python3 - "$work/zero/log_dict.json" <<'PY' || fail "the weight-0 source was trained on"
import json, sys
log = json.load(open(sys.argv[1]))
assert all(t == 0 for t in log["tokens_short"]) and all(v == 0 for v in log["loss_short"]), log["tokens_short"]
assert log["loss_long"] == log["foundation_loss"], "a lone source's loss is the foundation loss"
print("ok: weight 0 never drawn; the lone source's loss is the foundation loss")
PY
    ;;

  veomni_file)  # VeOmni's multisource file in data.train_path mixes as the same data.datasets do, bit for bit
    cat >"$work/mix.yaml" <<YAML
sources:
- $work/long.h5
- $work/short.h5
names:
- long
- short
schedule:
- schedule_type: const
  init_token: 0
  end_token: 100000000000000
  weights: [0.6, 0.4]
YAML
    train 1:1 "$work/listed" --train.num_train_epochs 1 || fail "data.datasets run failed"
    mix=()
    mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/mix.yaml" \
      --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8 --train.checkpoint.save_steps 0 \
      --train.checkpoint.output_dir "$work/file" --train.device cpu --log-level warn || fail "multisource file run failed"
    "$bin/veomni-align-check" --rtol 0 --atol 0 --keys "$keys" "$work/listed" "$work/file" ||
      fail "the multisource file does not mix as data.datasets does"
    printf 'sources: [%s]\nschedule:\n- {schedule_type: const, weights: [1]}\n- {schedule_type: const, weights: [1]}\n' \
      "$work/long.h5" >"$work/phases.yaml"
    mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/phases.yaml" \
      --train.device cpu --train.checkpoint.output_dir "$work/phases" >"$work/out" 2>&1
    [ $? -eq 2 ] && grep -q "phases.yaml: key 'schedule' has 2 entries" "$work/out" || { cat "$work/out"; fail "phases"; }
    echo "ok: VeOmni's multisource file mixes like data.datasets" ;;

  bad_inputs)
    train 1:1 "$work/both" --data.train_path "$work/long.h5" >"$work/out" 2>&1
    [ $? -eq 2 ] && grep -q "data.train_path and data.datasets are both set" "$work/out" || { cat "$work/out"; fail "both"; }
    dummy --type preference --seq-len 32 --num-samples 8 --seed 1 --out "$work/pairs.h5"
    mix=("{path: $work/long.h5, name: long}" "{path: $work/pairs.h5, name: pairs}")
    train 1:1 "$work/kinds" >"$work/out" 2>&1
    [ $? -eq 2 ] && grep -q "pairs.h5: data.datasets\[1\] has keys" "$work/out" || { cat "$work/out"; fail "kinds"; }
    mix=("{path: $work/long.h5, weight: -2}")
    train 1:1 "$work/weight" >"$work/out" 2>&1
    [ $? -eq 2 ] && grep -q "data.datasets\[0\].weight" "$work/out" || { cat "$work/out"; fail "weight"; }
    echo "ok: bad mixes exit 2 naming the key or the file" ;;

  *) fail "unknown case $case" ;;
esac
