#!/usr/bin/env bash
# A rank that stops answering (SIGSTOP) must make the others abort within the collective timeout, with a message
# naming it (rank, host, pid), while they wait without holding a core; the stopped process is removed afterwards.
# usage: collective_timeout.sh BIN_DIR SOURCE_DIR CASE [DEVICE [TIMEOUT_S]]
#   CASE config: the timeout from train.accelerator.dist_timeout; env: VEOMNI_COLLECTIVE_TIMEOUT overrides it.
#   DEVICE cuda: one GPU per rank, NCCL (its watchdog thread or the MPI wait, whichever waits first, names rank 1);
#   the CPU-use check is skipped there (the CUDA runtime spins in its own synchronisation).
set -uo pipefail
bin=$1 src=$2 case=$3 device=${4:-cpu} timeout=${5:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-timeout-XXXXXX")
stopped=""
cleanup() {
  if [ -n "$stopped" ]; then kill -KILL "$stopped" 2>/dev/null; kill -CONT "$stopped" 2>/dev/null; fi
  [ -n "${launcher:-}" ] && kill -KILL "$launcher" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$work/err" 2>/dev/null; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
unset VEOMNI_COLLECTIVE_TIMEOUT
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 64 --num-samples 64 --seed 5 --out "$work/data.h5" >/dev/null || exit 1

case "$case" in
  config) timeout_args=(--train.accelerator.dist_timeout "$timeout") ;;
  env) export VEOMNI_COLLECTIVE_TIMEOUT=$timeout; timeout_args=(--train.accelerator.dist_timeout 100000) ;;
  *) echo "unknown case $case"; exit 2 ;;
esac

# Many epochs: the run is still training when rank 1 is stopped.
timeout 300 mpirun --oversubscribe -np 2 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
  --data.max_seq_len 64 --train.global_batch_size 4 --train.num_train_epochs 100000 --train.max_steps 2 \
  --train.checkpoint.save_steps -1 --train.checkpoint.output_dir "$work/run" --train.device "$device" \
  "${timeout_args[@]}" >"$work/out" 2>"$work/err" &
launcher=$!

# The process of world rank R of this run (OpenMPI puts the rank in each process's environment; the run's own data
# path in the command line keeps another run of this test on the same machine out).
rank_pid() {
  local pid
  for pid in $(pgrep -f "$bin/veomni-train .*$work/data.h5"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$pid"; return; fi
  done
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# Wait until training runs (rank 0 logs its first step on stderr), then stop rank 1.
for _ in $(seq 600); do
  grep -q "] step 1/" "$work/err" 2>/dev/null && break
  kill -0 "$launcher" 2>/dev/null || fail "the run ended before rank 1 could be stopped"
  sleep 0.1
done
waiter=$(rank_pid 0)
stopped=$(rank_pid 1)
[ -n "$waiter" ] && [ -n "$stopped" ] || fail "ranks not found (rank 0 '$waiter', rank 1 '$stopped')"
kill -STOP "$stopped"
start=$SECONDS
echo "stopped rank 1 (pid $stopped)"

# Rank 0 waits in a collective: over two seconds it must use well under one core (polling with a sleep).
sleep 0.5
if [ "$device" = cpu ]; then
  before=$(cpu_ticks "$waiter") || fail "rank 0 ended before its timeout"
  sleep 2
  after=$(cpu_ticks "$waiter") || fail "rank 0 ended before its timeout"
  hz=$(getconf CLK_TCK)
  echo "rank 0 used $((after - before)) ticks of CPU in 2 s while waiting (${hz} per second)"
  [ $((after - before)) -le $((hz / 2)) ] || fail "rank 0 spins while waiting: $((after - before)) ticks in 2 s"
fi

wait "$launcher"
code=$?
launcher=""
took=$((SECONDS - start))
echo "run ended with exit $code ${took}s after rank 1 stopped"
[ "$code" -ne 124 ] || fail "hung: the run did not end within 300 s"
[ "$code" -ne 0 ] || fail "exit 0 although rank 1 was stopped"
[ "$took" -le $((timeout + 60)) ] || fail "the run took ${took}s to end after the ${timeout}s timeout"
pattern="timed out after $timeout s.*rank 1 \(host [^,]+, pid $stopped\)"
grep -qE "$pattern" "$work/err" || fail "stderr lacks /$pattern/"
grep -E "timed out" "$work/err" | head -3
echo "ok"
