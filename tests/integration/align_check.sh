#!/usr/bin/env bash
# Drives veomni-align-check through one scenario and checks its exit status and output.
# usage: align_check.sh TOOL CASE   (CASE: aligned, misaligned, json, steps, keys, tolerance, missing_file,
#        invalid_json, nan, unequal_steps, too_few_runs, missing_key, no_common_key, bad_tolerance, help, version,
#        timing_keys)
set -euo pipefail
tool=$1 case=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-align-check-XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL ($case): $*" >&2
  echo "--- stdout" >&2; cat "$work/out" >&2
  echo "--- stderr" >&2; cat "$work/err" >&2
  exit 1
}

# run EXPECTED_STATUS ARGS...: runs the tool, keeps stdout/stderr in $work/out and $work/err.
run() {
  local expected=$1 status=0
  shift
  "$tool" "$@" >"$work/out" 2>"$work/err" || status=$?
  [[ $status -eq $expected ]] || fail "exit status $status, expected $expected"
}
expect_out() { grep -qF -- "$1" "$work/out" || fail "stdout lacks: $1"; }
expect_err() { grep -qF -- "$1" "$work/err" || fail "stderr lacks: $1"; }
last_line_is() { [[ "$(tail -n 1 "$work/out")" == "$1" ]] || fail "last line is not '$1'"; }

# log DIR JSON: a run directory holding log_dict.json.
log() { mkdir -p "$work/$1"; printf '%s\n' "$2" >"$work/$1/log_dict.json"; }

# metrics LOSS GRAD_NORM: a log whose foundation_loss and lr are fixed.
metrics() {
  printf '{"loss": [%s], "foundation_loss": [2.4, 2.2, 1.9], "grad_norm": [%s], "lr": [1e-4, 1e-4, 9e-5]}' "$1" "$2"
}
log base "$(metrics '2.5, 2.25, 2.0' '1.0, 0.9, 0.8')"
log close "$(metrics '2.5, 2.26, 2.0' '1.0, 0.9, 0.805')"
log far "$(metrics '2.5, 2.25, 2.0' '1.0, 0.95, 0.9')"

case $case in
  aligned)
    run 0 "$work/base" "$work/close" "$work/base/log_dict.json"
    expect_out "loss"
    expect_out "pass"
    last_line_is "aligned"
    ;;
  misaligned)
    run 1 "$work/base" "$work/close" "$work/far"
    # grad_norm of "far": step 3 is furthest beyond 0.01 + 0.01*0.8 (|0.9 - 0.8| = 0.1), and steps 2 and 3 fail.
    grep -E "^grad_norm +$work/far +3 +0.8 +0.9 +1.000e-01 +1.250e-01 +FAIL \(2 of 3 steps\)$" "$work/out" >/dev/null ||
      fail "no grad_norm FAIL row for step 3"
    last_line_is "NOT aligned"
    ;;
  json)
    run 1 --json "$work/base" "$work/far"
    expect_out '"aligned": false'
    expect_out '"worst_step": 3'
    expect_out '"failing_steps": 2'
    tail -n 1 "$work/out" | grep -qx '}' || fail "JSON output has text after the object"
    ;;
  steps)
    log longer '{"loss": [2.5, 2.25, 2.0, 1.0], "grad_norm": [1.0, 0.9, 0.8, 5.0]}'
    run 2 "$work/base" "$work/longer"
    expect_err "has 4 steps but the baseline"
    expect_err "--steps"
    run 0 --steps 3 "$work/base" "$work/longer"
    expect_out "3 steps compared"
    run 2 --steps 4 "$work/base" "$work/longer"
    expect_err "$work/base/log_dict.json: has 3 steps, fewer than --steps 4"
    ;;
  keys)
    run 0 --keys loss,foundation_loss "$work/base" "$work/far"
    run 2 --keys loss,,lr "$work/base" "$work/far"
    expect_err "empty metric name"
    run 0 --keys loss,foundation_loss "$work/base" "$work/far"
    expect_out "foundation_loss"
    if grep -q "^grad_norm" "$work/out"; then fail "grad_norm compared although not requested"; fi
    last_line_is "aligned"
    ;;
  timing_keys)
    # Same numerics, different timings: aligned by default (timing and resource metrics are not compared) and
    # NOT aligned when step_time is asked for by name.
    log fast '{"loss": [2.5, 2.25], "step_time": [0.5, 0.4], "tokens_per_sec": [900, 1100], "max_memory_allocated_gib": [1.0, 1.0]}'
    log slow '{"loss": [2.5, 2.25], "step_time": [0.9, 0.8], "tokens_per_sec": [500, 560], "max_memory_allocated_gib": [2.0, 2.0]}'
    run 0 "$work/fast" "$work/slow"
    last_line_is "aligned"
    if grep -qE "^(step_time|tokens_per_sec|max_memory)" "$work/out"; then fail "a timing metric was compared"; fi
    run 1 --keys loss,step_time "$work/fast" "$work/slow"
    expect_out "step_time"
    last_line_is "NOT aligned"
    log timeonly '{"step_time": [0.5, 0.4]}'
    run 2 "$work/timeonly" "$work/slow"
    expect_err "measure time or resources only (step_time)"
    ;;
  tolerance)
    run 0 --rtol 0 --atol 0.2 "$work/base" "$work/far"
    run 1 --rtol 0 --atol 0 "$work/base" "$work/close"
    last_line_is "NOT aligned"
    # A zero baseline has no relative difference: shown as inf, judged by atol alone.
    log zero '{"aux_loss": [0.0, 1.0]}'
    log half '{"aux_loss": [0.5, 1.0]}'
    run 0 --atol 0.5 "$work/zero" "$work/half"
    grep -E "^aux_loss +$work/half +1 +0 +0.5 +5.000e-01 +inf +pass$" "$work/out" >/dev/null || fail "no inf row"
    ;;
  missing_file)
    run 2 "$work/base" "$work/nowhere"
    expect_err "$work/nowhere"
    expect_err "does not exist"
    ;;
  invalid_json)
    printf '{"loss": [1.0,\n 2.0,,]}\n' >"$work/broken.json"
    run 2 "$work/base" "$work/broken.json"
    expect_err "$work/broken.json:2:6: invalid JSON"
    ;;
  nan)
    log nanrun "$(metrics '2.5, NaN, 2.0' '1.0, 0.9, 0.8')"
    run 2 "$work/base" "$work/nanrun"
    expect_err "$work/nanrun/log_dict.json: key 'loss' index 1 is NaN"
    ;;
  unequal_steps)
    log ragged '{"loss": [2.5, 2.25, 2.0], "grad_norm": [1.0, 0.9]}'
    run 2 "$work/base" "$work/ragged"
    expect_err "$work/ragged/log_dict.json: key 'grad_norm' has 2 steps but 'loss' has 3"
    ;;
  too_few_runs)
    run 2 "$work/base"
    expect_err "need at least two runs"
    run 2
    ;;
  missing_key)
    log lossonly '{"loss": [2.5, 2.25, 2.0]}'
    run 2 --keys loss,grad_norm "$work/base" "$work/lossonly"
    expect_err "$work/lossonly/log_dict.json: no metric 'grad_norm'"
    ;;
  no_common_key)
    log other '{"tokens": [1, 2, 3]}'
    run 2 "$work/base" "$work/other"
    expect_err "no metric is present in every run"
    ;;
  bad_tolerance)
    run 2 --rtol -1 "$work/base" "$work/close"
    expect_err "tolerances must be non-negative"
    run 2 --steps 0 "$work/base" "$work/close"
    expect_err "must be at least 1, got 0"
    run 2 --no-such-flag "$work/base" "$work/close"
    ;;
  help)
    run 0 --help
    expect_out "Usage:"
    expect_out "--rtol"
    ;;
  version)
    run 0 --version
    grep -qE '^veomni-align-check [0-9]+\.[0-9]+\.[0-9]+' "$work/out" || fail "no version line"
    ;;
  *)
    echo "unknown case '$case'" >&2
    exit 2
    ;;
esac
echo "ok ($case)"
