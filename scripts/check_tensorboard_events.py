#!/usr/bin/env python3
"""Checks a veomni-train run's TensorBoard event files with TensorBoard's own reader.

usage: scripts/check_tensorboard_events.py RUN_DIR   (the run's train.checkpoint.output_dir)

Loads RUN_DIR/tensorboard with tensorboard.backend.event_processing.event_accumulator.EventAccumulator and compares
every scalar with RUN_DIR/log_dict.json: each key of the log must be a scalar tag with one value per step 1..n equal
to the float32 of the log's value. Exit 0 when all agree, 1 otherwise, 2 when the run or tensorboard is missing.
"""
import json
import math
import struct
import sys
from pathlib import Path


def float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    run = Path(argv[1])
    log_path, tb_dir = run / "log_dict.json", run / "tensorboard"
    if not log_path.is_file() or not tb_dir.is_dir():
        print(f"check_tensorboard_events: {run} has no log_dict.json or no tensorboard/ directory", file=sys.stderr)
        return 2
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        print("check_tensorboard_events: python3 cannot import tensorboard (pip install tensorboard)", file=sys.stderr)
        return 2
    log = json.loads(log_path.read_text())
    # size_guidance 0: keep every scalar (the default samples 10000 per tag).
    acc = event_accumulator.EventAccumulator(str(tb_dir), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    failures = []
    eval_steps = [int(step) for step in log.get("eval_step", [])]
    for key, values in log.items():
        if key == "eval_step":
            continue
        if key not in tags:
            failures.append(f"{key}: no scalar tag in {tb_dir} (tags: {sorted(tags)})")
            continue
        # A resumed run writes repeated steps to a newer file; TensorBoard keeps the newest value of a step.
        by_step = {e.step: e.value for e in acc.Scalars(key)}
        # Validation metrics (eval_*) hold one value per evaluation, logged at the steps of eval_step.
        steps = eval_steps if key.startswith("eval_") else range(1, len(values) + 1)
        for step, value in zip(steps, values):
            got = by_step.get(step)
            want = float32(value)
            if got is None:
                failures.append(f"{key} step {step}: missing")
            elif not (got == want or (math.isnan(got) and math.isnan(want))):
                failures.append(f"{key} step {step}: TensorBoard {got!r}, log_dict.json {value!r}")
    for line in failures:
        print(line)
    if failures:
        return 1
    steps = len(log.get("loss", []))
    print(f"agree: TensorBoard's EventAccumulator reads {len(log)} keys over {steps} steps "
          f"({len(eval_steps)} evaluations) as in {log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
