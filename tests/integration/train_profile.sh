#!/usr/bin/env bash
# veomni-train's op profile (VEOMNI_PROFILE_OPS): the table counts every step's ops, VEOMNI_PROFILE_OPS_SKIP_STEPS
# leaves the first N steps out, and a malformed skip count is an input error (exit 2).
# usage: train_profile.sh BIN_DIR SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-profile-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 65 --num-samples 8 --seed 3 --out "$work/data.h5" >/dev/null || exit 1

# profile SKIP: trains 3 steps of one micro-batch with the profile on; prints the table's adamw_step_multi call count.
profile() {
  rm -f "$work/ops.rank0"
  VEOMNI_PROFILE_OPS=1 VEOMNI_PROFILE_OPS_OUT="$work/ops" VEOMNI_PROFILE_OPS_SKIP_STEPS=$1 \
    "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 64 \
    --train.global_batch_size 1 --train.max_steps 3 --train.checkpoint.output_dir "$work/run" \
    --train.checkpoint.save_steps -1 --log-level warn >"$work/out" 2>"$work/err" || { cat "$work/err"; fail "exit $?"; }
  awk '$1 == "adamw_step_multi" { print $2 }' "$work/ops.rank0"
}
[ "$(profile 0)" = 3 ] || fail "without skipping, adamw_step_multi should be called 3 times: $(cat "$work/ops.rank0")"
[ "$(profile 2)" = 1 ] || fail "skipping 2 of 3 steps should leave 1 optimizer call: $(cat "$work/ops.rank0")"
echo "ok: the profile counts 3 optimizer steps, 1 after skipping 2"

VEOMNI_PROFILE_OPS=1 VEOMNI_PROFILE_OPS_SKIP_STEPS=two "$bin/veomni-train" configs/qwen3_toy.yaml \
  --data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 1 --train.max_steps 1 \
  --train.checkpoint.output_dir "$work/run2" >"$work/out" 2>"$work/err"
code=$?
[ "$code" -eq 2 ] || { cat "$work/err"; fail "exit $code for a malformed skip count, expected 2"; }
grep -q "VEOMNI_PROFILE_OPS_SKIP_STEPS is 'two'" "$work/err" || { cat "$work/err"; fail "message does not name the variable"; }
echo "ok: a malformed skip count exits 2 naming the variable"
