#!/usr/bin/env bash
# Checkpoint tests under mpirun on the CPU (fp32): a run stopped (an injected fault, or a real SIGKILL at any
# moment, also during a save) and resumed reproduces the uninterrupted run bit for bit; a resume under another layout
# (np2 -> np4, EP2 -> EP4, SP on/off) stays aligned at rtol 1e-5; HF -> veomni-ckpt-shard -> veomni-ckpt-merge
# round trips; np1 and np4 runs end with the same weights; merge memory stays bounded by the largest tensor; every
# bad input exits 2 naming the file and leaves nothing under the output name.
# usage: checkpoint.sh BIN_DIR SOURCE_DIR CASE [ARGS...]
set -uo pipefail
bin=$1 src=$2 case=$3
shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-ckpt-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Oversubscribed ranks must yield the core while they wait in collectives.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset VEOMNI_FAULT_INJECT

cd "$src"  # recipes name their model config relative to the repository root
"$bin/veomni-dummy-data" --type text --seq-len 64 --num-samples 48 --seed 5 --out "$work/data.h5" >/dev/null || exit 1

fail() { echo "FAIL: $*"; exit 1; }
model_of() { [[ $1 == moe ]] && echo qwen3_moe_toy || echo qwen3_toy; }
# The metrics that do not depend on the clock (tokens_per_sec and step_time do).
keys_of() { echo "loss,foundation_loss,$([[ $1 == moe ]] && echo aux_loss,)grad_norm,lr,tokens"; }

# train_command KIND NP:SP:EP OUT: sets `command` to the mpirun line of the toy recipe: 8 steps of 4 samples, a
# checkpoint every 3 steps (and at 8); later overrides win.
train_command() {
  local kind=$1 layout=$2 out=$3 np sp ep
  IFS=: read -r np sp ep <<<"$layout"
  command=(mpirun --oversubscribe -np "$np" "$bin/veomni-train" "configs/$(model_of "$kind").yaml"
    --data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 8
    --train.checkpoint.save_steps 3 --train.checkpoint.save_total_limit 2 --train.checkpoint.output_dir "$out"
    --train.accelerator.ulysses_size "$sp" --train.accelerator.ep_size "$ep" --train.device cpu --log-level warn)
}

# train KIND NP:SP:EP OUT [overrides...]
train() {
  train_command "$1" "$2" "$3"
  shift 3
  "${command[@]}" "$@"
}

latest_of() { cat "$1/checkpoints/latest" 2>/dev/null || echo none; }

# same_run KIND A B: equal metrics bit for bit (rtol = atol = 0) and byte-identical final rank shard files.
same_run() {
  "$bin/veomni-align-check" --rtol 0 --atol 0 --keys "$(keys_of "$1")" "$2" "$3" >"$work/align.txt" ||
    { cat "$work/align.txt"; fail "$3 differs from $2"; }
  local final f
  final=$(latest_of "$2")
  [ "$(latest_of "$3")" = "$final" ] || fail "$3 ends at $(latest_of "$3"), $2 at $final"
  for f in "$2/checkpoints/$final"/rank-*.h5; do
    cmp -s "$f" "$3/checkpoints/$final/$(basename "$f")" || fail "$final/$(basename "$f") differs"
  done
  echo "ok: $3 equals $2 bit for bit (metrics $(keys_of "$1"); rank files of $final)"
}

# crash KIND LAYOUT OUT SPEC [overrides...]: a run that VEOMNI_FAULT_INJECT=SPEC stops; it must not exit 0.
crash() {
  local kind=$1 layout=$2 out=$3 spec=$4
  shift 4
  VEOMNI_FAULT_INJECT=$spec train "$kind" "$layout" "$out" "$@" >"$work/crash.out" 2>&1 &&
    { cat "$work/crash.out"; fail "the run with VEOMNI_FAULT_INJECT=$spec exited 0"; }
  echo "stopped by VEOMNI_FAULT_INJECT=$spec; latest: $(latest_of "$out")"
}

resume() {
  local kind=$1 layout=$2 out=$3
  shift 3
  train "$kind" "$layout" "$out" --train.checkpoint.load_path auto "$@" || fail "resume of $out failed"
  grep -q '"resumed_from": ".*global_step_' "$out/run_summary.json" || fail "$out did not resume"
  ls "$out/checkpoints" | grep -q '\.tmp-' && fail "unfinished saves left in $out/checkpoints"
  return 0
}

# expect_bad_input PATTERN COMMAND...: exit status 2 and stderr matching PATTERN.
expect_bad_input() {
  local pattern=$1
  shift
  "$@" >"$work/out" 2>"$work/err"
  local code=$?
  [ "$code" -eq 2 ] || { cat "$work/err"; fail "exit $code, expected 2: $*"; }
  grep -qE "$pattern" "$work/err" || { cat "$work/err"; fail "stderr lacks /$pattern/"; }
  echo "ok: exit 2, stderr matches /$pattern/"
}

# tensors_agree A.safetensors B.safetensors RTOL: identical headers (names, shapes, offsets), and for every tensor
# ||a - b||_2 <= RTOL * ||a||_2 (f32 data read with od).
tensors_agree() {
  local a=$1 b=$2 rtol=$3 n ends
  n=$(od -An -tu8 -N8 "$a" | tr -d ' ')
  cmp -s -n $((8 + n)) "$a" "$b" || fail "$a and $b have different headers"
  ends=$(head -c $((8 + n)) "$a" | tail -c "$n" | grep -o '"data_offsets":\[[0-9]*,[0-9]*\]' |
    sed 's/.*,\([0-9]*\)\]/\1/' | sort -n | tr '\n' ' ')
  paste <(tail -c +$((9 + n)) "$a" | od -An -v -tf4 -w4) <(tail -c +$((9 + n)) "$b" | od -An -v -tf4 -w4) |
    awk -v ends="$ends" -v rtol="$rtol" '
      BEGIN { nt = split(ends, e, " "); t = 1 }
      { while (t <= nt && (NR - 1) * 4 >= e[t]) t++; d = $1 - $2; ss[t] += $1 * $1; dd[t] += d * d }
      END { worst = 0
            for (i = 1; i <= nt; i++) { r = ss[i] > 0 ? sqrt(dd[i] / ss[i]) : sqrt(dd[i]); if (r > worst) worst = r }
            printf "%d tensors, %d values: worst relative L2 difference %.3g (rtol %g)\n", nt, NR, worst, rtol
            exit !(worst <= rtol) }' || fail "$a and $b differ beyond rtol $rtol"
}

case "$case" in
  resume)  # ARGS: KIND LAYOUT. Stopped at step 5 (after the step-3 save), resumed with load_path auto.
    kind=$1 layout=$2
    train "$kind" "$layout" "$work/full" || fail "uninterrupted run failed"
    crash "$kind" "$layout" "$work/run" "rank=0,step=5"
    [ "$(latest_of "$work/run")" = global_step_3 ] || fail "latest is $(latest_of "$work/run"), expected global_step_3"
    resume "$kind" "$layout" "$work/run"
    same_run "$kind" "$work/full" "$work/run" ;;

  kill9)  # real SIGKILLs: from outside at an arbitrary moment, inside a save, and between a save and its `latest`
    train dense 2:1:1 "$work/full" --train.max_steps 12 --train.checkpoint.save_steps 2 || fail "uninterrupted run"
    train_command dense 2:1:1 "$work/outside"
    "${command[@]}" --train.max_steps 12 --train.checkpoint.save_steps 2 >/dev/null 2>&1 &
    launcher=$!  # mpirun; the ranks are its children
    for _ in $(seq 1 500); do [ -f "$work/outside/checkpoints/latest" ] && break; sleep 0.02; done
    sleep 0.15
    ranks=$(ps -o pid= --ppid "$launcher" | tr -s ' \n' ' ')
    [ -n "${ranks// /}" ] || echo "note: the run ended before the kill (resume then continues from its end)"
    echo "kill -9 of ranks [$ranks] of mpirun $launcher with latest at $(latest_of "$work/outside")"
    for pid in $ranks; do kill -9 "$pid" 2>/dev/null; done
    wait "$launcher"
    echo "mpirun exit $?; latest $(latest_of "$work/outside")"
    for pid in $ranks; do  # gone, or a zombie nobody reaped yet (its pid may also have been reused)
      ps -o stat=,comm= -p "$pid" | grep -qE '^[^Z].*veomni-train' && fail "rank $pid of the killed run survives"
    done
    resume dense 2:1:1 "$work/outside" --train.max_steps 12 --train.checkpoint.save_steps 2
    same_run dense "$work/full" "$work/outside"

    crash dense 2:1:1 "$work/in_save" "rank=1,step=6,kill=save" --train.max_steps 12 --train.checkpoint.save_steps 2
    [ "$(latest_of "$work/in_save")" = global_step_4 ] || fail "latest is $(latest_of "$work/in_save")"
    ls -d "$work"/in_save/checkpoints/global_step_6.tmp-* >/dev/null 2>&1 || fail "no unfinished save of step 6 left"
    [ -e "$work/in_save/checkpoints/global_step_6" ] && fail "an unfinished save appeared under global_step_6"
    resume dense 2:1:1 "$work/in_save" --train.max_steps 12 --train.checkpoint.save_steps 2
    same_run dense "$work/full" "$work/in_save"

    crash dense 2:1:1 "$work/in_commit" "rank=0,step=6,kill=commit" --train.max_steps 12 --train.checkpoint.save_steps 2
    [ "$(latest_of "$work/in_commit")" = global_step_4 ] || fail "latest is $(latest_of "$work/in_commit")"
    [ -f "$work/in_commit/checkpoints/global_step_6/metadata.json" ] || fail "global_step_6 was not in place"
    resume dense 2:1:1 "$work/in_commit" --train.max_steps 12 --train.checkpoint.save_steps 2
    same_run dense "$work/full" "$work/in_commit" ;;

  reshard)  # ARGS: KIND FROM TO. Saved under one layout at step 3, resumed under another.
    kind=$1 from=$2 to=$3
    train "$kind" "$from" "$work/full" || fail "uninterrupted run failed"
    crash "$kind" "$from" "$work/run" "rank=0,step=5"
    resume "$kind" "$to" "$work/run"
    "$bin/veomni-align-check" --rtol 1e-5 --atol 0 --keys "$(keys_of "$kind")" "$work/full" "$work/run" ||
      fail "resume under $to is not aligned with the run under $from"
    "$bin/veomni-align-check" --rtol 0 --atol 0 --steps 3 --keys "$(keys_of "$kind")" "$work/full" "$work/run" \
      >/dev/null || fail "the first 3 steps (from the checkpoint's log) differ" ;;

  hf_roundtrip)  # HF -> shard (4 ranks, SP 2, EP 2) -> merge -> shard (2 ranks) -> merge: identical files
    fixture=tests/fixtures/hf/qwen3_moe_toy/model
    "$bin/veomni-ckpt-shard" "$fixture" --out "$work/ck_a" --world 4 --ulysses 2 --ep 2 --log-level warn || fail shard
    "$bin/veomni-ckpt-merge" "$work/ck_a" --out "$work/hf_a" --log-level warn || fail merge
    "$bin/veomni-ckpt-shard" "$work/hf_a" --out "$work/ck_b" --world 2 --log-level warn || fail "shard of merged"
    "$bin/veomni-ckpt-merge" "$work/ck_b" --out "$work/hf_b" --log-level warn || fail "merge again"
    cmp "$work/hf_a/model.safetensors" "$work/hf_b/model.safetensors" || fail "round trip changed the weights"
    cmp "$work/hf_a/config.json" "$work/hf_b/config.json" || fail "round trip changed config.json"
    [ "$(stat -c %s "$work/hf_a/model.safetensors")" -eq "$(stat -c %s "$fixture/model.safetensors")" ] ||
      echo "note: header size differs from transformers' file (tensor order); tensors compared in unit tests"
    echo "ok: HF -> 4:2:2 -> HF -> 2:1:1 -> HF is byte-identical"
    # bf16, stacked experts, several files plus an index: read back and written again identically.
    "$bin/veomni-ckpt-merge" "$work/ck_a" --out "$work/hf_c" --dtype bf16 --experts stacked --max-shard-size 300KB \
      --log-level warn >"$work/merge.txt" || fail "bf16 merge"
    [ -f "$work/hf_c/model.safetensors.index.json" ] && [ "$(grep -c '^weights:' "$work/merge.txt")" -ge 2 ] ||
      fail "no sharded output"
    "$bin/veomni-ckpt-shard" "$work/hf_c" --out "$work/ck_c" --world 1 --log-level warn || fail "reading bf16 shards"
    "$bin/veomni-ckpt-merge" "$work/ck_c" --out "$work/hf_d" --dtype bf16 --experts stacked --max-shard-size 300KB \
      --log-level warn >/dev/null || fail "bf16 merge again"
    for f in "$work"/hf_c/*; do cmp "$f" "$work/hf_d/$(basename "$f")" || fail "bf16 round trip changed $f"; done
    echo "ok: bf16 stacked sharded output reads back and rewrites identically"
    # Tied embeddings: no lm_head.weight.
    "$bin/veomni-ckpt-shard" tests/fixtures/hf/qwen3_toy_tied/model --out "$work/ck_t" --world 2 --log-level warn &&
      "$bin/veomni-ckpt-merge" "$work/ck_t" --out "$work/hf_t" --log-level warn >/dev/null || fail "tied merge"
    grep -q '"lm_head.weight"' "$work/hf_t/model.safetensors" && fail "tied model merged with an lm_head.weight"
    echo "ok: tied model has no lm_head.weight"
    # Training from a sharded step-0 checkpoint equals training from the HF weights directly, bit for bit.
    "$bin/veomni-ckpt-shard" "$fixture" --out "$work/ck_0" --world 2 --ep 2 --log-level warn || fail "shard 2:1:2"
    train moe 2:1:2 "$work/from_hf" --model.config_path "$fixture" --model.model_path "$fixture" || fail "train from HF"
    train moe 2:1:2 "$work/from_ck" --model.config_path "$fixture" --train.checkpoint.load_path "$work/ck_0" ||
      fail "train from the sharded checkpoint"
    same_run moe "$work/from_hf" "$work/from_ck" ;;

  np1_np4_weights)  # the final weights of an np1 and an np4 run agree
    train dense 1:1:1 "$work/np1" || fail "np1 run failed"
    train dense 4:1:1 "$work/np4" || fail "np4 run failed"
    "$bin/veomni-ckpt-merge" "$work/np1" --out "$work/hf1" --log-level warn >/dev/null || fail "merge np1"
    "$bin/veomni-ckpt-merge" "$work/np4" --out "$work/hf4" --log-level warn >/dev/null || fail "merge np4"
    tensors_agree "$work/hf1/model.safetensors" "$work/hf4/model.safetensors" 1e-5 ;;

  merge_memory)  # a 65 MB model merges with memory bounded by its largest tensor (1 MB), not the model
    cat >"$work/config.json" <<'EOF'
{"model_type": "qwen3", "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 16,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "tie_word_embeddings": false}
EOF
    train dense 1:1:1 "$work/big" --model.config_path "$work/config.json" --train.max_steps 1 \
      --train.global_batch_size 1 --data.max_seq_len 16 || fail "big model run failed"
    train dense 1:1:1 "$work/toy" --train.max_steps 1 --train.global_batch_size 1 || fail "toy run failed"
    # Under AddressSanitizer freed memory waits in a quarantine (256 MB) and the peak would count every tensor ever
    # freed; without the quarantine the peak means what it means in a normal build (which ignores the variable).
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0
    "$bin/veomni-ckpt-merge" "$work/toy" --out "$work/hf_toy" --log-level warn >"$work/toy.txt" || fail "toy merge"
    "$bin/veomni-ckpt-merge" "$work/big" --out "$work/hf_big" --log-level warn >"$work/big.txt" || fail "big merge"
    model=$(sed -n 's/^tensor_bytes: //p' "$work/big.txt")
    toy=$(sed -n 's/^peak_memory_bytes: //p' "$work/toy.txt")
    big=$(sed -n 's/^peak_memory_bytes: //p' "$work/big.txt")
    echo "model $model bytes; merge peak memory: toy $toy, big $big (+$(((big - toy) / 1048576)) MiB)"
    [ "$model" -gt 60000000 ] || fail "the big model has only $model bytes"
    [ $((big - toy)) -lt $((model / 4)) ] || fail "merge memory grows with the model" ;;

  bad_inputs)
    train dense 2:1:1 "$work/run" --train.max_steps 3 || fail "run failed"
    ck="$work/run/checkpoints/global_step_3"
    cp -r "$ck" "$work/good"
    restore() { rm -rf "$ck" && cp -r "$work/good" "$ck"; }
    resume_2() { train dense 2:1:1 "$work/run" --train.max_steps 6 --train.checkpoint.load_path auto "$@"; }
    merge_2() {
      expect_bad_input "$1" "$bin/veomni-ckpt-merge" "$work/run" --out "$work/hf"
      [ -e "$work/hf" ] && fail "merge left $work/hf"
      ls "$work" | grep -q '^hf\.tmp-' && fail "merge left a temporary directory"
      return 0
    }
    rank1="$ck/rank-00001-of-00002.h5"
    size=$(stat -c %s "$rank1")
    head -c $((size / 2)) "$work/good/rank-00001-of-00002.h5" >"$rank1"
    expect_bad_input "rank-00001-of-00002.h5.*truncated" resume_2
    merge_2 "rank-00001-of-00002.h5.*truncated"
    restore
    printf '\xde\xad\xbe\xef\xde\xad\xbe\xef' | dd of="$rank1" bs=1 seek=$((size / 2)) conv=notrunc status=none
    expect_bad_input "rank-00001-of-00002.h5.*checksum.*damaged" resume_2
    merge_2 "rank-00001-of-00002.h5.*checksum.*damaged"
    restore
    rm "$rank1"
    expect_bad_input "rank-00001-of-00002.h5.*missing" resume_2
    merge_2 "rank-00001-of-00002.h5.*missing"
    restore
    echo '{"format": "veomni-checkpoint", "format_version": 7}' >"$ck/metadata.json"
    expect_bad_input "metadata.json.*format version 7" resume_2
    restore
    expect_bad_input "metadata.json.*different model.*tie_word_embeddings: false vs true" resume_2 \
      --model.config_path tests/fixtures/hf/qwen3_toy_tied/model
    echo "global_step_99" >"$work/run/checkpoints/latest"
    expect_bad_input "checkpoints/latest.*global_step_99" resume_2
    echo "global_step_3" >"$work/run/checkpoints/latest"
    expect_bad_input "nowhere.*does not exist" resume_2 --train.checkpoint.load_path "$work/nowhere"
    mkdir -p "$work/taken" && echo mine >"$work/taken/file"
    expect_bad_input "not empty.*--overwrite" "$bin/veomni-ckpt-merge" "$ck" --out "$work/taken"
    [ "$(cat "$work/taken/file")" = mine ] || fail "merge touched an existing directory"
    expect_bad_input "5 parsecs" "$bin/veomni-ckpt-merge" "$ck" --out "$work/hf" --max-shard-size "5 parsecs"
    expect_bad_input "ep_size" "$bin/veomni-ckpt-shard" tests/fixtures/hf/qwen3_moe_toy/model --out "$work/ck3" \
      --world 3 --ep 3
    [ -e "$work/ck3" ] && fail "shard left $work/ck3"
    # A good checkpoint still merges after all that.
    "$bin/veomni-ckpt-merge" "$work/run" --out "$work/hf" --log-level warn >/dev/null || fail "good merge failed"
    echo "ok: the intact checkpoint merges" ;;

  cli)
    for tool in veomni-ckpt-merge veomni-ckpt-shard; do
      "$bin/$tool" --help | grep -q -- "--out" || fail "$tool --help"
      "$bin/$tool" --version | grep -q "^$tool [0-9]" || fail "$tool --version"
      expect_bad_input "required" "$bin/$tool"
    done ;;

  *) echo "unknown case $case"; exit 2 ;;
esac
echo "PASS: $case $*"
