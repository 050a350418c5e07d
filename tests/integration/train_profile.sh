#!/usr/bin/env bash
# veomni-train's op profile (train.op_profile, or VEOMNI_PROFILE_OPS): the table counts every step's ops, skip_steps
# leaves the first N steps out, the environment overrides the config (logged, and recorded in veomni_cli.yaml), and a
# malformed skip count is an input error (exit 2).
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

# The same through the config keys alone; the environment unset.
rm -f "$work/ops.rank0"
"$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 64 \
  --train.global_batch_size 1 --train.max_steps 3 --train.checkpoint.output_dir "$work/run3" \
  --train.checkpoint.save_steps -1 --train.op_profile.enable true --train.op_profile.out "$work/ops" \
  --train.op_profile.skip_steps 1 --log-level warn >"$work/out" 2>"$work/err" || { cat "$work/err"; fail "exit $?"; }
[ "$(awk '$1 == "adamw_step_multi" { print $2 }' "$work/ops.rank0")" = 2 ] ||
  fail "train.op_profile.skip_steps 1 of 3 steps should leave 2 optimizer calls: $(cat "$work/ops.rank0")"
echo "ok: train.op_profile.* keys profile as the variables do"

# The environment overrides the config: logged, and recorded in the saved config.
VEOMNI_PROFILE_OPS_SKIP_STEPS=2 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
  --data.max_seq_len 64 --train.global_batch_size 1 --train.max_steps 1 --train.checkpoint.output_dir "$work/run4" \
  --train.checkpoint.save_steps -1 --train.op_profile.skip_steps 1 >"$work/out" 2>"$work/err" ||
  { cat "$work/err"; fail "exit $?"; }
grep -q "VEOMNI_PROFILE_OPS_SKIP_STEPS=2 overrides train.op_profile.skip_steps (was 1)" "$work/out" "$work/err" ||
  { cat "$work/out" "$work/err"; fail "the override is not logged"; }
grep -A3 "^  op_profile:" "$work/run4/veomni_cli.yaml" | grep -q "skip_steps: 2" ||
  { cat "$work/run4/veomni_cli.yaml"; fail "veomni_cli.yaml does not record the environment's value"; }
echo "ok: the environment overrides the key, says so, and the saved config records it"

VEOMNI_PROFILE_OPS=1 VEOMNI_PROFILE_OPS_SKIP_STEPS=two "$bin/veomni-train" configs/qwen3_toy.yaml \
  --data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 1 --train.max_steps 1 \
  --train.checkpoint.output_dir "$work/run2" >"$work/out" 2>"$work/err"
code=$?
[ "$code" -eq 2 ] || { cat "$work/err"; fail "exit $code for a malformed skip count, expected 2"; }
grep -q "VEOMNI_PROFILE_OPS_SKIP_STEPS='two'" "$work/err" || { cat "$work/err"; fail "message does not name the variable"; }
echo "ok: a malformed skip count exits 2 naming the variable"
