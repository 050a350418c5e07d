#!/usr/bin/env bash
# veomni-train's TensorBoard event files under <output_dir>/tensorboard.
#   events:   3 steps write one file (TensorBoard's name) holding every metric of log_dict.json at every step as the
#             float32 of its value; on 2 ranks rank 0 alone writes; train.use_tensorboard false writes none; a resumed run appends a second file and
#             the two agree with the final log; a corrupted record is reported with the file and its byte offset.
#   python:   TensorBoard's own EventAccumulator agrees with log_dict.json (scripts/check_tensorboard_events.py),
#             also after a resume that repeats two steps; exit 77 (skipped) where python3 cannot import tensorboard.
#   disabled: a build without protobuf refuses train.use_tensorboard true with a hint, and trains without it.
# usage: tensorboard.sh BIN_DIR SOURCE_DIR events|python|disabled
set -uo pipefail
bin=$1 src=$2 mode=$3
if [[ $mode == python ]] && ! python3 -c "import tensorboard" 2>/dev/null; then
  echo "skipped: python3 cannot import tensorboard (pip install tensorboard)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-tensorboard-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 65 --num-samples 16 --seed 3 --out "$work/data.h5" >/dev/null || exit 1

# train OUT [overrides...]: the toy recipe, 2 samples a step, 3 steps unless overridden.
train() {
  local out=$1
  shift
  "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" --data.max_seq_len 64 \
    --train.global_batch_size 2 --train.max_steps 3 --train.checkpoint.output_dir "$out" \
    --train.checkpoint.save_steps -1 --train.device cpu --log-level info "$@" >"$work/out" 2>"$work/err"
}

case $mode in
  events)
    train "$work/run" || { cat "$work/err"; fail "training failed"; }
    files=("$work"/run/tensorboard/events.out.tfevents.*)
    [[ ${#files[@]} -eq 1 && -s ${files[0]} ]] || fail "expected one event file, found: ${files[*]}"
    [[ $(basename "${files[0]}") =~ ^events\.out\.tfevents\.[0-9]{10}\.[^/]+$ ]] || fail "bad name ${files[0]}"
    cat "$work/out" "$work/err" | grep -q "tensorboard --logdir $work/run/tensorboard" ||
      fail "the run does not say where its TensorBoard files are"
    "$bin/tensorboard_vs_log" "$work/run/tensorboard" "$work/run/log_dict.json" >"$work/check" ||
      { cat "$work/check"; fail "the event file disagrees with log_dict.json"; }
    grep -q "agree: .* x 3 steps" "$work/check" || { cat "$work/check"; fail "not 3 steps"; }
    for key in loss grad_norm lr tokens_per_sec tokens_per_sec_per_gpu step_time data_time compute_time \
      optimizer_time; do
      "$bin/tensorboard_vs_log" "$work/run/tensorboard" "$work/run/log_dict.json" "$key" >/dev/null ||
        fail "$key is not in the event file at every step"
    done
    echo "ok: one event file holds every metric of log_dict.json at every step"

    # Validation metrics land at the steps they were evaluated after.
    train "$work/run_eval" --data.eval_path "$work/data.h5" --train.eval_steps 2 ||
      { cat "$work/err"; fail "training with an eval set failed"; }
    "$bin/tensorboard_vs_log" "$work/run_eval/tensorboard" "$work/run_eval/log_dict.json" eval_loss >"$work/check" ||
      { cat "$work/check"; fail "eval_loss is not in the event file at the evaluated steps"; }
    "$bin/tensorboard_vs_log" "$work/run_eval/tensorboard" "$work/run_eval/log_dict.json" >"$work/check" ||
      { cat "$work/check"; fail "the event file disagrees with a log_dict.json holding eval series"; }
    echo "ok: eval_loss is written at the evaluated steps (2 and 3)"

    # Two ranks: rank 0 alone writes (one file), and tokens/s per GPU is the world's tokens/s over 2.
    mpirun --oversubscribe -np 2 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
      --data.max_seq_len 64 --train.global_batch_size 2 --train.max_steps 2 --train.checkpoint.output_dir "$work/np2" \
      --train.checkpoint.save_steps -1 --train.device cpu --log-level warn >"$work/out" 2>"$work/err" ||
      { cat "$work/err"; fail "training on 2 ranks failed"; }
    files=("$work"/np2/tensorboard/*)
    [[ ${#files[@]} -eq 1 ]] || fail "2 ranks should write one event file (rank 0's), found: ${files[*]}"
    "$bin/tensorboard_vs_log" "$work/np2/tensorboard" "$work/np2/log_dict.json" >"$work/check" ||
      { cat "$work/check"; fail "the 2-rank event file disagrees with log_dict.json"; }
    python3 -c "
import json, sys
log = json.load(open(sys.argv[1]))
for tps, per_gpu in zip(log['tokens_per_sec'], log['tokens_per_sec_per_gpu']):
    assert per_gpu == tps / 2, (tps, per_gpu)" "$work/np2/log_dict.json" || fail "tokens_per_sec_per_gpu is not tokens_per_sec / 2"
    echo "ok: on 2 ranks rank 0 alone writes the event file; tokens/s per GPU is the total over 2"

    train "$work/off" --train.use_tensorboard false || { cat "$work/err"; fail "training without TensorBoard failed"; }
    [[ ! -e $work/off/tensorboard ]] || fail "train.use_tensorboard false wrote $work/off/tensorboard"
    echo "ok: train.use_tensorboard false writes no event file"

    # Resume: 4 steps with checkpoints at 2 and 4, then again from step 2: steps 3 and 4 are logged twice.
    train "$work/res" --train.max_steps 4 --train.checkpoint.save_steps 2 || { cat "$work/err"; fail "run failed"; }
    sleep 1  # a later second: the second file sorts after the first, as TensorBoard orders them
    train "$work/res" --train.max_steps 4 --train.checkpoint.save_steps 2 \
      --train.checkpoint.load_path "$work/res/checkpoints/global_step_2" || { cat "$work/err"; fail "resume failed"; }
    files=("$work"/res/tensorboard/events.out.tfevents.*)
    [[ ${#files[@]} -eq 2 ]] || fail "a resumed run should add a second event file, found: ${files[*]}"
    "$bin/tensorboard_vs_log" "$work/res/tensorboard" "$work/res/log_dict.json" >"$work/check" ||
      { cat "$work/check"; fail "the resumed run's event files disagree with log_dict.json"; }
    echo "ok: a resumed run appends a second event file; both agree with the final log"

    # A corrupted byte in the last record: the reader names the file and the record's offset (exit 2).
    file=${files[0]}
    size=$(stat -c %s "$file")
    printf '\xff' | dd of="$file" bs=1 seek=$((size - 10)) conv=notrunc status=none
    "$bin/tensorboard_vs_log" "$work/res/tensorboard" "$work/res/log_dict.json" >"$work/check" 2>"$work/err"
    code=$?
    [[ $code -eq 2 ]] || { cat "$work/check" "$work/err"; fail "exit $code for a corrupt record, expected 2"; }
    grep -q "$file: record at byte offset [0-9]*: the CRC of its [0-9]* data bytes does not match" "$work/err" ||
      { cat "$work/err"; fail "the message does not name the file and the record's offset"; }
    echo "ok: a corrupt record is reported with the file and its byte offset"
    ;;
  python)
    eval_set=(--data.eval_path "$work/data.h5" --train.eval_steps 2)
    train "$work/run" --train.max_steps 4 --train.checkpoint.save_steps 2 "${eval_set[@]}" ||
      { cat "$work/err"; fail "run failed"; }
    python3 scripts/check_tensorboard_events.py "$work/run" || fail "TensorBoard's reader disagrees with log_dict.json"
    # Resumed from step 2: steps 3 and 4 repeat in a second file; TensorBoard keeps the newer values.
    sleep 1
    train "$work/run" --train.max_steps 4 --train.checkpoint.save_steps 2 "${eval_set[@]}" \
      --train.checkpoint.load_path "$work/run/checkpoints/global_step_2" || { cat "$work/err"; fail "resume failed"; }
    python3 scripts/check_tensorboard_events.py "$work/run" ||
      fail "TensorBoard's reader disagrees with the resumed run's log_dict.json"
    ;;
  disabled)
    train "$work/run" --train.use_tensorboard true
    code=$?
    [[ $code -eq 2 ]] || { cat "$work/err"; fail "exit $code for train.use_tensorboard true without protobuf"; }
    grep -q "cannot write TensorBoard files.*train.use_tensorboard false" "$work/err" || { cat "$work/err"; fail "no hint"; }
    train "$work/run2" || { cat "$work/err"; fail "the default (off in this build) should train"; }
    [[ ! -e $work/run2/tensorboard ]] || fail "a build without protobuf wrote event files"
    echo "ok: without protobuf, train.use_tensorboard true is refused and the default trains without it"
    ;;
  *) fail "unknown mode $mode" ;;
esac
