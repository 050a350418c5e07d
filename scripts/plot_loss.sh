#!/usr/bin/env bash
# Plots the loss curves of one or several veomni-train runs into a PNG with gnuplot: loss against step, one line per
# run, and each run's eval_loss as points where its log_dict.json has one (a sparse series keyed by eval_step, or
# one value per step).
# usage: scripts/plot_loss.sh OUT.png RUN [RUN ...]   (RUN: a run's output_dir, or its log_dict.json)
# Needs gnuplot (Debian gnuplot-nox) and python3. Exit 2 on bad usage or input, 1 when gnuplot fails.
set -euo pipefail
die() { echo "plot_loss.sh: $*" >&2; exit 2; }
[[ $# -ge 2 ]] || die "usage: plot_loss.sh OUT.png RUN [RUN ...] (RUN: a run directory or its log_dict.json)"
out=$1
shift
command -v gnuplot >/dev/null || die "gnuplot is not installed (Debian: apt-get install gnuplot-nox)"
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-plot-XXXXXX")
trap 'rm -rf "$work"' EXIT

# One data file per series: <i>.loss (step loss) and, where the run has eval_loss, <i>.eval (step eval_loss).
python3 - "$work" "$@" <<'PY' || exit 2
import json, os, sys
work, runs = sys.argv[1], sys.argv[2:]
for i, run in enumerate(runs):
    path = os.path.join(run, "log_dict.json") if os.path.isdir(run) else run
    try:
        with open(path) as f:
            log = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"plot_loss.sh: {path}: {e}")
    if not isinstance(log, dict) or not isinstance(log.get("loss"), list):
        sys.exit(f"plot_loss.sh: {path}: no 'loss' array (is it a veomni-train log_dict.json?)")
    name = os.path.basename(os.path.dirname(os.path.abspath(path)))  # the run directory's name
    with open(os.path.join(work, f"{i}.name"), "w") as f:
        f.write(name.replace('"', "'"))
    with open(os.path.join(work, f"{i}.loss"), "w") as f:
        for step, value in enumerate(log["loss"], start=1):
            f.write(f"{step} {value}\n")
    evals = log.get("eval_loss")
    if isinstance(evals, list) and evals:
        steps = log.get("eval_step")
        if not isinstance(steps, list) or len(steps) != len(evals):
            if len(evals) != len(log["loss"]):
                sys.exit(f"plot_loss.sh: {path}: eval_loss has {len(evals)} values but no eval_step of that length")
            steps = range(1, len(evals) + 1)
        with open(os.path.join(work, f"{i}.eval"), "w") as f:
            for step, value in zip(steps, evals):
                if value is not None:
                    f.write(f"{step} {value}\n")
PY

plots=()
for ((i = 0; i < $#; ++i)); do
  name=$(<"$work/$i.name")
  plots+=("'$work/$i.loss' using 1:2 with lines linewidth 2 title \"$name loss\"")
  [[ -f $work/$i.eval ]] && plots+=("'$work/$i.eval' using 1:2 with linespoints pointtype 7 title \"$name eval_loss\"")
done
joined=$(IFS=,; echo "${plots[*]}")
gnuplot <<GP || { echo "plot_loss.sh: gnuplot failed" >&2; exit 1; }
set terminal pngcairo size 1000,600 noenhanced
set output "$out"
set xlabel "step"
set ylabel "loss"
set grid
set key top right
plot $joined
GP
echo "plot_loss.sh: wrote $out"
