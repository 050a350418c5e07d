#!/usr/bin/env bash
# scripts/plot_loss.sh writes a non-empty PNG for two runs (a run directory, and a log_dict.json with a sparse
# eval_loss keyed by eval_step), and refuses a run without a loss series (exit 2). Exit 77 (skipped) without gnuplot.
# usage: plot_loss.sh SOURCE_DIR
set -uo pipefail
src=$1
command -v gnuplot >/dev/null || { echo "skipped: gnuplot is not installed (Debian gnuplot-nox)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-plot-test-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$work/a" "$work/b" "$work/bad"
echo '{"loss": [3.0, 2.5, 2.2, 2.0], "lr": [1e-4, 1e-4, 1e-4, 1e-4]}' >"$work/a/log_dict.json"
echo '{"loss": [3.1, 2.6, 2.1, 1.9], "eval_loss": [2.7, 2.0], "eval_step": [2, 4]}' >"$work/b/log_dict.json"
echo '{"grad_norm": [1.0]}' >"$work/bad/log_dict.json"

bash "$src/scripts/plot_loss.sh" "$work/out.png" "$work/a" "$work/b/log_dict.json" >"$work/log" 2>&1 ||
  { cat "$work/log"; fail "plot_loss.sh failed"; }
[[ -s $work/out.png ]] || fail "no PNG written"
[[ $(head -c 8 "$work/out.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "out.png is not a PNG"
echo "ok: two runs (one with eval_loss) plotted to a PNG of $(stat -c %s "$work/out.png") bytes"

bash "$src/scripts/plot_loss.sh" "$work/bad.png" "$work/bad" >"$work/log" 2>&1
code=$?
[[ $code -eq 2 ]] || { cat "$work/log"; fail "exit $code for a log without loss, expected 2"; }
grep -q "no 'loss' array" "$work/log" || { cat "$work/log"; fail "the message does not say what is missing"; }
[[ ! -e $work/bad.png ]] || fail "a PNG was written for a bad run"
echo "ok: a log without a loss series is refused (exit 2)"
