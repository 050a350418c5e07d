#!/usr/bin/env bash
# Failure paths of veomni-train under mpirun: every case must end every rank promptly with the right exit code and
# a message naming the problem; plus the per-rank state memory falling as 1/N under FSDP.
# usage: train_failures.sh BIN_DIR SOURCE_DIR CASE
set -uo pipefail
bin=$1 src=$2 case=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-fail-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$src"
"$bin/veomni-dummy-data" --type text --seq-len 64 --num-samples 32 --seed 5 --out "$work/data.h5" >/dev/null || exit 1
common=(--data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 3)

# run NP EXPECTED_CODE PATTERN [args...]: runs veomni-train, checks its exit code and that stderr matches PATTERN.
run() {
  local np=$1 want=$2 pattern=$3
  shift 3
  local start=$SECONDS
  timeout 120 mpirun --oversubscribe -np "$np" "$bin/veomni-train" "$@" --train.device "${RUN_DEVICE:-cpu}" >"$work/out" 2>"$work/err"
  local code=$?
  local took=$((SECONDS - start))
  if [ "$code" -eq 124 ]; then echo "FAIL: hung (killed after 120 s)"; cat "$work/err"; exit 1; fi
  # mpirun reports the first failing rank's code; MPI_Abort's code is ours.
  if [ "$code" -ne "$want" ]; then echo "FAIL: exit $code, expected $want"; cat "$work/err"; exit 1; fi
  if ! grep -qE "$pattern" "$work/err"; then echo "FAIL: stderr lacks /$pattern/"; cat "$work/err"; exit 1; fi
  echo "ok: exit $code in ${took}s, stderr matches /$pattern/"
}

case "$case" in
  injected_fault)  # rank 1 fails at step 2 while rank 0 waits in a collective: both must end
    VEOMNI_FAULT_INJECT="rank=1,step=2" run 2 1 "rank 1.*injected fault at step 2" configs/qwen3_toy.yaml "${common[@]}" \
      --train.checkpoint.output_dir "$work/run" ;;
  nan_loss)  # an absurd learning rate blows the weights up: abort_on_nan ends the run with exit 1
    run 2 1 "loss is (NaN|\+inf|-inf) at step 2" configs/qwen3_toy.yaml "${common[@]}" --train.optimizer.lr 1e30 \
      --train.optimizer.max_grad_norm 0 --train.checkpoint.output_dir "$work/run" ;;
  missing_data)
    run 2 2 "nothing at|does not exist|no such" configs/qwen3_toy.yaml "${common[@]}" --data.train_path "$work/none.h5" \
      --train.checkpoint.output_dir "$work/run" ;;
  bad_token_id)  # data tokenized for a larger vocabulary: refused once, on the host, naming the file and sample
    mkdir -p "$work/small_vocab"
    sed 's/"vocab_size": *[0-9]*/"vocab_size": 100/' configs/model_configs/qwen3_toy/config.json \
      >"$work/small_vocab/config.json"
    run 1 2 "data\.h5 sample [0-9]+: input_ids\[[0-9]+\] = [0-9]+ is outside the model vocabulary \[0, 100\)" \
      configs/qwen3_toy.yaml "${common[@]}" --model.config_path "$work/small_vocab" \
      --train.checkpoint.output_dir "$work/run"
    count=$(grep -c "outside" "$work/err")
    [ "$count" -eq 1 ] || { echo "FAIL: the bad id is reported $count times"; cat "$work/err"; exit 1; } ;;
  unknown_key)
    run 1 2 "unknown key 'train.optimizer.lrr'" configs/qwen3_toy.yaml --train.optimizer.lrr 1 ;;
  bad_layout)  # 4 heads cannot be split over 3 sequence-parallel ranks
    run 3 2 "ulysses_size \(3\) must divide num_attention_heads" configs/qwen3_toy.yaml "${common[@]}" --train.accelerator.ulysses_size 3 \
      --train.checkpoint.output_dir "$work/run" ;;
  no_gpu)  # train.device cuda with no GPU visible (CUDA_VISIBLE_DEVICES hides them; or a build without CUDA)
    CUDA_VISIBLE_DEVICES="" RUN_DEVICE=cuda run 2 2 "train.device is cuda but (no GPU is visible|this build has no CUDA)" \
      configs/qwen3_toy.yaml "${common[@]}" --train.checkpoint.output_dir "$work/run" ;;
  fp8_on_cpu)  # FP8 linears are CUDA-only: refused from the config when train.device is cpu
    run 1 2 "train\.accelerator\.fp8 needs a CUDA device, but train\.device is cpu" configs/qwen3_toy.yaml \
      "${common[@]}" --train.accelerator.fp8 true --train.checkpoint.output_dir "$work/run" ;;
  fp8_auto_without_gpu)  # ... and when train.device auto finds no GPU, once the device is known
    CUDA_VISIBLE_DEVICES="" RUN_DEVICE=auto run 1 2 "train\.accelerator\.fp8 needs a CUDA device with bf16 compute, but this run computes in f32 on cpu" \
      configs/qwen3_toy.yaml "${common[@]}" --train.accelerator.fp8 true \
      --train.accelerator.fsdp_config.mixed_precision.enable true --train.checkpoint.output_dir "$work/run" ;;
  fp8_fp32)  # ... and with float32 compute
    RUN_DEVICE=auto run 1 2 "train\.accelerator\.fp8 needs bf16 compute, but it is float32" configs/qwen3_toy.yaml \
      "${common[@]}" --train.accelerator.fp8 true --train.precision fp32 --train.checkpoint.output_dir "$work/run" ;;
  memory_scaling)  # parameters + gradients + optimizer state per rank fall as 1/N (up to shard padding)
    for np in 1 2 4; do
      mpirun --oversubscribe -np "$np" "$bin/veomni-train" configs/qwen3_toy.yaml "${common[@]}" --train.max_steps 1 \
        --train.checkpoint.output_dir "$work/np$np" --train.device cpu --log-level warn || exit 1
      bytes[$np]=$(sed -n 's/.*"state_bytes_per_rank_max": *\([0-9.e+]*\).*/\1/p' "$work/np$np/run_summary.json")
      echo "np=$np state bytes per rank: ${bytes[$np]}"
    done
    awk -v b1="${bytes[1]}" -v b2="${bytes[2]}" -v b4="${bytes[4]}" 'BEGIN {
      r2 = b1 / b2; r4 = b1 / b4; printf "ratios np1/np2 %.4f np1/np4 %.4f\n", r2, r4;
      exit !(r2 > 1.99 && r2 <= 2.0001 && r4 > 3.97 && r4 <= 4.0001) }' || { echo "FAIL: not 1/N"; exit 1; } ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
