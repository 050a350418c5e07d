#!/usr/bin/env bash
# Hostile-input and operations cases of veomni-train and veomni-ckpt-merge under mpirun on the CPU: one run per
# output_dir (lock), output_dir checks, lazy epoch planning, resume-position checks, untrained-data warnings and
# refusals, token budgets, NaN weights, merge cross-checks, and SIGTERM stopping with a
# checkpoint that resumes bit for bit.
# usage: train_reliability.sh BIN_DIR SOURCE_DIR CASE
set -uo pipefail
bin=$1 src=$2 case=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-rel-XXXXXX")
cleanup() {
  [ -n "${launcher:-}" ] && kill -9 "$launcher" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset VEOMNI_FAULT_INJECT
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 64 --num-samples 48 --seed 5 --out "$work/data.h5" >/dev/null || exit 1

fail() { echo "FAIL: $*"; exit 1; }

# train NP OUT [overrides...]: the toy recipe, 4 samples a step, 8 steps, a checkpoint every 3.
train() {
  local np=$1 out=$2
  shift 2
  mpirun --oversubscribe -np "$np" "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
    --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8 --train.checkpoint.save_steps 3 \
    --train.checkpoint.output_dir "$out" --train.device cpu --log-level warn "$@"
}

# expect CODE PATTERN COMMAND...: exit status CODE and stderr matching PATTERN.
expect() {
  local want=$1 pattern=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local code=$?
  [ "$code" -eq "$want" ] || { cat "$work/err"; fail "exit $code, expected $want: $*"; }
  grep -qE -- "$pattern" "$work/err" || { cat "$work/err"; fail "stderr lacks /$pattern/"; }
  echo "ok: exit $code, stderr matches /$pattern/"
}

latest_of() { cat "$1/checkpoints/latest" 2>/dev/null || echo none; }

# same_run A B: equal metrics bit for bit and byte-identical final rank files.
same_run() {
  "$bin/veomni-align-check" --rtol 0 --atol 0 --keys loss,foundation_loss,grad_norm,lr,tokens "$1" "$2" \
    >"$work/align.txt" || { cat "$work/align.txt"; fail "$2 differs from $1"; }
  local final f
  final=$(latest_of "$1")
  [ "$(latest_of "$2")" = "$final" ] || fail "$2 ends at $(latest_of "$2"), $1 at $final"
  for f in "$1/checkpoints/$final"/rank-*.h5; do
    cmp -s "$f" "$2/checkpoints/$final/$(basename "$f")" || fail "$final/$(basename "$f") differs"
  done
  echo "ok: $2 equals $1 bit for bit (metrics and rank files of $final)"
}

# json_edit FILE PYTHON: applies a Python statement to the JSON object `j` of FILE.
json_edit() {
  python3 -c "import json,sys; f=sys.argv[1]; j=json.load(open(f)); $2; json.dump(j, open(f,'w'), indent=2)" "$1" ||
    fail "cannot edit $1"
}

# rank_pids PID: the veomni-train processes below PID (a backgrounded function's subshell, then mpirun).
rank_pids() {
  local level=$1 next p
  while [ -n "${level// /}" ]; do
    next=
    for p in $level; do
      ps -o comm= -p "$p" | grep -q '^veomni-train' && echo -n "$p "
      next="$next $(ps -o pid= --ppid "$p" | tr -s ' \n' ' ')"
    done
    level=$next
  done
}

# wait_for FILE: up to 60 s.
wait_for() {
  for _ in $(seq 1 600); do [ -e "$1" ] && return 0; sleep 0.1; done
  fail "$1 did not appear"
}

case "$case" in
  lock)  # a second run on a live run's output_dir fails at once naming its pid; the first ends unharmed
    train 1 "$work/a" --train.num_train_epochs 1000 --train.checkpoint.save_steps 0 >"$work/a.out" 2>&1 &
    launcher=$!
    wait_for "$work/a/log_dict.json"
    holder=$(rank_pids "$launcher")
    [ -n "${holder// /}" ] || fail "no rank of the first run found"
    cp "$work/a/veomni_cli.yaml" "$work/a_config.yaml"
    start=$SECONDS
    expect 2 "output_dir '$work/a' is in use by another run \(host .*pid ${holder// /}; lock file" \
      train 1 "$work/a" --train.checkpoint.load_path auto --train.optimizer.lr 2e-3
    expect 2 "in use by another run.*pid ${holder// /}" train 2 "$work/a" --train.optimizer.lr 2e-3
    [ $((SECONDS - start)) -lt 30 ] || fail "the second runs took $((SECONDS - start)) s to fail"
    cmp -s "$work/a/veomni_cli.yaml" "$work/a_config.yaml" || fail "the second run rewrote veomni_cli.yaml"
    kill -TERM $holder
    wait "$launcher"
    code=$?
    launcher=
    [ "$code" -eq 0 ] || { cat "$work/a.out"; fail "the first run exited $code after SIGTERM"; }
    grep -q '"stopped_by_signal": "SIGTERM"' "$work/a/run_summary.json" || fail "the first run did not stop cleanly"
    ls "$work/a/checkpoints" | grep -q '\.tmp-' && fail "unfinished saves left in the first run's checkpoints"
    "$bin/veomni-ckpt-merge" "$work/a" --out "$work/a_hf" --log-level warn >/dev/null || fail "its checkpoint does not merge"
    echo "ok: the first run saved $(latest_of "$work/a") and ended with exit 0" ;;

  stale_lock)  # a lock file left by a dead process is taken over and records the new holder
    mkdir -p "$work/s"
    printf 'host elsewhere\npid 999999\n' >"$work/s/.veomni.lock"
    train 1 "$work/s" --train.max_steps 1 || fail "the run did not take over the stale lock"
    grep -q "^host $(hostname)$" "$work/s/.veomni.lock" || { cat "$work/s/.veomni.lock"; fail "holder not recorded"; }
    grep -q "999999" "$work/s/.veomni.lock" && fail "the stale holder is still recorded"
    echo "ok: stale lock taken over" ;;

  output_dir)  # output_dir problems are bad input (exit 2), found before anything runs
    echo x >"$work/file"
    expect 2 "output_dir '$work/file' exists and is not a directory" train 2 "$work/file"
    expect 2 "output_dir '$work/file/run' lies under '$work/file', which is a file" train 2 "$work/file/run"
    expect 2 "output_dir .* has 300 characters" train 1 "$work/$(printf 'a%.0s' $(seq 1 300))"
    long="$work"
    while [ ${#long} -lt 4100 ]; do long="$long/$(printf 'b%.0s' $(seq 1 200))"; done
    expect 2 "output_dir .* characters long" train 1 "$long"
    if unshare -rm true 2>/dev/null; then  # a read-only mount in a private mount namespace
      mkdir -p "$work/ro"
      expect 2 "output_dir '$work/ro/run' cannot be created: Read-only file system" unshare -rm bash -c \
        'mount -t tmpfs -o ro none "$1" && shift && "$@"' _ "$work/ro" \
        mpirun --oversubscribe -np 1 "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/data.h5" \
        --train.checkpoint.output_dir "$work/ro/run" --train.device cpu
    else
      echo "note: no user namespaces here; the read-only case is covered by the EROFS message of mkdir"
    fi ;;

  many_epochs)  # start-up does not grow with num_train_epochs: ten million epochs reach step 1 within 20 s
    train 1 "$work/m" --train.max_steps 2 --train.num_train_epochs 10000000 >"$work/m.out" 2>&1 &
    launcher=$!
    for _ in $(seq 1 200); do [ -e "$work/m/log_dict.json" ] && break; sleep 0.1; done
    [ -e "$work/m/log_dict.json" ] || { kill -9 "$launcher"; cat "$work/m.out"; fail "no step within 20 s"; }
    kill -TERM $(rank_pids "$launcher")
    wait "$launcher" || { cat "$work/m.out"; fail "the run did not stop cleanly (exit $?)"; }
    launcher=
    grep -q '"lr_total_steps": 20000000' "$work/m/checkpoints/$(latest_of "$work/m")/metadata.json" ||
      fail "the run does not span 20000000 steps"
    echo "ok: step 1 of 20000000 within 20 s; stopped at $(latest_of "$work/m")" ;;

  resume_position)  # a position that the data plan cannot reach is bad input naming metadata.json and the key
    train 2 "$work/r" --train.max_steps 3 --train.checkpoint.save_steps 0 || fail "run failed"
    meta="$work/r/checkpoints/global_step_3/metadata.json"
    cp "$meta" "$work/meta.json"
    resume() { train 2 "$work/r" --train.max_steps 3 --train.checkpoint.save_steps 0 --train.checkpoint.load_path auto; }
    json_edit "$meta" "j['position']['epoch']=99; j['position']['step_in_epoch']=1000000"
    expect 2 "metadata.json: key 'position.epoch' is 99" resume
    cp "$work/meta.json" "$meta"
    json_edit "$meta" "j['position']['step_in_epoch']=1000000"
    expect 2 "metadata.json: key 'position.step_in_epoch' is 1000000 but epoch 0 .* has 3 steps" resume
    cp "$work/meta.json" "$meta"
    json_edit "$meta" "j['position']['step_in_epoch']=2"
    expect 2 "metadata.json: key 'position.global_step' is 3 but epoch 0 step 2 is step 2" resume
    cp "$work/meta.json" "$meta"
    resume >/dev/null 2>&1 || fail "the intact checkpoint does not resume"
    echo "ok: the intact checkpoint resumes" ;;

  untrained_data)  # truncation is reported with counts; data without a label token is refused
    "$bin/veomni-dummy-data" --type text --seq-len 1000 --num-samples 16 --seed 3 --out "$work/long.h5" >/dev/null ||
      fail "dummy data"
    expect 0 "data: [0-9]+ of 16 samples are longer than data.max_seq_len 64 and are truncated: [0-9]+ of [0-9]+ tokens" \
      train 1 "$work/t" --data.train_path "$work/long.h5" --train.max_steps 1
    expect 2 "data.h5: none of the 4 samples the run trains on has a label token \(.*data.max_seq_len 1;" \
      train 1 "$work/t1" --data.max_seq_len 1 --train.max_steps 1 ;;

  token_budget)  # micro_batch_size x max_seq_len past what a packed row can index: exit 2 naming both keys
    expect 2 "train.micro_batch_size \(4\) x data.max_seq_len \(4611686018427387904\)" \
      train 1 "$work/z" --train.micro_batch_size 4 --data.max_seq_len 4611686018427387904 ;;

  nan_weights)  # NaN in the HF weights: exit 2 naming the tensor and the file
    cp -r tests/fixtures/hf/qwen3_toy/model "$work/nan_model"
    python3 - "$work/nan_model/model.safetensors" <<'PY' || fail "cannot poison the weights"
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = "model.norm.weight"
begin = header[name]["data_offsets"][0]
assert header[name]["dtype"] == "F32"
data[8 + n + begin + 4:8 + n + begin + 8] = struct.pack("<f", float("nan"))
open(path, "wb").write(data)
PY
    expect 2 "nan_model/model.safetensors: tensor 'model.norm.weight' \[64\] holds 1 non-finite value" \
      train 2 "$work/n" --model.config_path "$work/nan_model" --model.model_path "$work/nan_model" ;;

  merge_crosscheck)  # metadata.json that does not match its own config or its rank files: exit 2, nothing written
    train 2 "$work/c" --train.max_steps 1 || fail "run failed"
    ck="$work/c/checkpoints/global_step_1"
    cp "$ck/metadata.json" "$work/meta.json"
    merge() {
      expect 2 "$1" "$bin/veomni-ckpt-merge" "$ck" --out "$work/hf" --no-tokenizer
      [ -e "$work/hf" ] && fail "merge left $work/hf"
      return 0
    }
    json_edit "$ck/metadata.json" "j['model_config']['num_hidden_layers']=3"
    merge "metadata.json: key 'parameters' lacks 'model.layers.2.*which the model of key 'model_config' implies"
    cp "$work/meta.json" "$ck/metadata.json"
    json_edit "$ck/metadata.json" "j['model_config']['num_hidden_layers']=1"
    merge "metadata.json: key 'parameters\[[0-9]+\]' is 'model.layers.1.*does not have"
    cp "$work/meta.json" "$ck/metadata.json"
    json_edit "$ck/metadata.json" "j['model_config']['vocab_size']=2048"
    merge "metadata.json: key 'parameters\[0\]' \('model.embed_tokens.weight'\) has shape \[1024, 64\] but .* implies \[2048, 64\]"
    cp "$work/meta.json" "$ck/metadata.json"
    json_edit "$ck/metadata.json" "j['parameters']=[p for p in j['parameters'] if p['name']!='model.norm.weight']"
    merge "metadata.json: key 'parameters' lacks 'model.norm.weight'"
    cp "$work/meta.json" "$ck/metadata.json"
    json_edit "$ck/metadata.json" "j['model_config']['num_hidden_layers']=1; j['parameters']=[p for p in j['parameters'] if '.layers.1.' not in p['name']]"
    merge "rank-00000-of-00002.h5: holds 'master/model.layers.1.*which metadata.json's key 'parameters' does not list"
    cp "$work/meta.json" "$ck/metadata.json"
    # An expert tensor listed flat (same elements, so its shard spec still validates) used to reach an internal check.
    train 1 "$work/e" --train.max_steps 1 --model.config_path configs/model_configs/qwen3_moe_toy || fail "MoE run failed"
    eck="$work/e/checkpoints/global_step_1"
    json_edit "$eck/metadata.json" "p=[p for p in j['parameters'] if p['name'].endswith('experts.gate_up_proj')][0]; p['shape']=[p['shape'][0], p['shape'][1]*p['shape'][2]]"
    expect 2 "metadata.json: key 'parameters\[[0-9]+\]' \('model.layers.0.mlp.experts.gate_up_proj'\) has shape \[8, 4096\] \(experts\) but .* implies \[8, 64, 64\] \(experts\)" \
      "$bin/veomni-ckpt-merge" "$eck" --out "$work/hf_e" --no-tokenizer
    cp "$work/meta.json" "$ck/metadata.json"
    expect 2 "tokenizer '/nonexistent' \(given with --tokenizer\) does not exist" \
      "$bin/veomni-ckpt-merge" "$ck" --out "$work/hf" --tokenizer /nonexistent
    "$bin/veomni-ckpt-merge" "$ck" --out "$work/hf" --no-tokenizer --log-level warn >/dev/null || fail "intact merge failed"
    echo "ok: the intact checkpoint merges" ;;

  signal)  # SIGTERM reaching one rank stops both after the same step, with a checkpoint that resumes bit for bit
    train 2 "$work/full" || fail "uninterrupted run failed"
    VEOMNI_FAULT_INJECT="rank=1,step=5,kill=term" train 2 "$work/stop" >"$work/stop.out" 2>&1 ||
      { cat "$work/stop.out"; fail "the stopped run did not exit 0"; }
    grep -q "stopped by SIGTERM after step 5" "$work/stop.out" || { cat "$work/stop.out"; fail "no stop message"; }
    [ "$(latest_of "$work/stop")" = global_step_5 ] || fail "latest is $(latest_of "$work/stop"), expected global_step_5"
    grep -q '"stopped_by_signal": "SIGTERM"' "$work/stop/run_summary.json" || fail "run_summary lacks the signal"
    train 2 "$work/stop" --train.checkpoint.load_path auto || fail "resume failed"
    same_run "$work/full" "$work/stop"
    # From outside, to one rank, at whatever step it is in.
    train 2 "$work/ext" --train.max_steps 40 --train.checkpoint.save_steps 0 >"$work/ext.out" 2>&1 &
    launcher=$!
    wait_for "$work/ext/log_dict.json"
    pids=($(rank_pids "$launcher"))
    kill -TERM "${pids[1]}"
    wait "$launcher" || { cat "$work/ext.out"; fail "the run stopped from outside did not exit 0"; }
    launcher=
    step=$(latest_of "$work/ext")
    echo "stopped from outside at $step"
    train 2 "$work/ext_full" --train.max_steps 40 --train.checkpoint.save_steps 0 || fail "uninterrupted 40 steps"
    if [ "$step" != global_step_40 ]; then
      grep -q '"stopped_by_signal": "SIGTERM"' "$work/ext/run_summary.json" || fail "not stopped by the signal"
      train 2 "$work/ext" --train.max_steps 40 --train.checkpoint.save_steps 0 --train.checkpoint.load_path auto ||
        fail "resume after the outside signal failed"
    fi
    same_run "$work/ext_full" "$work/ext"
    # save_on_signal false: the signal ends the process as before, no checkpoint of step 5.
    VEOMNI_FAULT_INJECT="rank=1,step=5,kill=term" train 2 "$work/off" --train.checkpoint.save_on_signal false \
      >/dev/null 2>&1 && fail "with save_on_signal false the run exited 0"
    [ "$(latest_of "$work/off")" = global_step_3 ] || fail "latest is $(latest_of "$work/off")"
    echo "ok: save_on_signal false leaves the default action" ;;

  *) echo "unknown case $case"; exit 2 ;;
esac
echo "PASS: $case"
