#!/usr/bin/env bash
# Optimizer offload checks (train.accelerator.fsdp_config.offload, issue #19): the same bits with and without it.
# usage: fsdp_offload.sh unit UNIT_TEST_BINARY
#          the FsdpOffload gtests on two MPI ranks (CPU)
#        fsdp_offload.sh train BIN_DIR SOURCE_DIR DEVICE PRECISION NP [MODEL [EP [REDUCE_DTYPE]]]
#          veomni-train on MODEL (qwen3_toy) on NP ranks, 3 steps of 2 micro-batches with gradient clipping active,
#          offload false then true: every step's loss, foundation_loss and grad_norm must be the same bits, and the
#          final checkpoint's rank files (masters, moments, step) the same bytes. PRECISION fp32 or bf16;
#          REDUCE_DTYPE (bf16 only) float32 (default) or bfloat16.
#          On a GPU a second offload-false run first shows whether training is bitwise reproducible there at all
#          (float atomics in some backward kernels); when it is not, the runs are compared at FSDP_OFFLOAD_RTOL
#          (default 1e-4 for fp32, 2e-2 for bf16) and the rank files are not compared. On a GPU in bf16 the peak
#          allocated memory per rank (run_summary.json) must also drop by at least the AdamW moments' size (8 bytes a
#          parameter over NP ranks; it drops by about 10: the master and moments go, a bf16 copy stays, the f32
#          gradients stay on the GPU as without offload).
#        fsdp_offload.sh lora BIN_DIR SOURCE_DIR MODEL EP
#          as train on two CPU ranks in fp32 with LoRA adapters (model.lora_config rank 4): the adapters' masters and
#          moments offloaded, the frozen base untouched; the same bits and adapter checkpoint bytes as without offload.
#        fsdp_offload.sh resume BIN_DIR SOURCE_DIR
#          two CPU ranks: an offloaded run's step-2 checkpoint resumed with offload and without it both end where
#          an uninterrupted run without offload ends, bit for bit (metrics and rank files).
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Oversubscribed ranks must yield the core while they wait in collectives.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
unset VEOMNI_FAULT_INJECT
fail() { echo "FAIL: $*" >&2; exit 1; }

keys=loss,foundation_loss,grad_norm
# same_rank_files A B STEP: the rank files of both runs' global_step_STEP hold the same bytes.
same_rank_files() {
  local f n=0
  for f in "$1/checkpoints/global_step_$3"/rank-*.h5; do
    [ -f "$f" ] || fail "no rank files in $1/checkpoints/global_step_$3"
    cmp -s "$f" "$2/checkpoints/global_step_$3/$(basename "$f")" || fail "global_step_$3/$(basename "$f") of $2 differs from $1's"
    n=$((n + 1))
  done
  echo "ok: $n rank file(s) of global_step_$3 the same bytes ($1, $2)"
}
same_metrics() {  # A B
  "$bin/veomni-align-check" --rtol 0 --atol 0 --keys "$keys" "$1" "$2" || fail "$2 differs from $1 (metrics above)"
}
summary_number() {  # RUN KEY
  grep -o "\"$2\": *[-0-9.e+]*" "$1/run_summary.json" | sed 's/.*: *//'
}

mode=$1
shift
case "$mode" in
  unit)
    mpirun --oversubscribe --bind-to none -np 2 "$1" --gtest_filter='FsdpOffload*' --gtest_brief=1
    ;;
  train|resume|lora)
    bin=$1 src=$2
    extra=()
    if [ "$mode" = train ]; then
      device=$3 precision=$4 np=$5 model=${6:-qwen3_toy} ep=${7:-1} reduce=${8:-float32}
    elif [ "$mode" = lora ]; then
      device=cpu precision=fp32 np=2 model=$3 ep=$4 reduce=float32
      extra=(--model.lora_config.rank 4 --model.lora_config.alpha 8)
    else
      device=cpu precision=fp32 np=2 model=qwen3_toy ep=1 reduce=float32
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-fsdp-offload-XXXXXX")
    trap 'rm -rf "$work"' EXIT
    case "$precision" in
      fp32) precision_args=(--train.precision fp32) rtol=${FSDP_OFFLOAD_RTOL:-1e-4} ;;
      bf16) precision_args=(--train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true
                            --train.accelerator.fsdp_config.mixed_precision.param_dtype bfloat16
                            --train.accelerator.fsdp_config.mixed_precision.reduce_dtype "$reduce")
            rtol=${FSDP_OFFLOAD_RTOL:-2e-2} ;;
      *) fail "unknown precision '$precision'" ;;
    esac
    cd "$src"  # the recipe names its model config relative to the repository root
    "$bin/veomni-dummy-data" --type text --seq-len 96 --num-samples 48 --seed 3 --out "$work/data.h5" >/dev/null
    train() {  # OFFLOAD RUN_DIR [overrides...]
      local offload=$1 out=$2
      shift 2
      # max_grad_norm 0.05: clipping scales every step, so the host gradient norm and scale enter the updates.
      mpirun --oversubscribe --bind-to none -np "$np" "$bin/veomni-train" "$src/configs/$model.yaml" \
        --data.train_path "$work/data.h5" --data.max_seq_len 95 --train.global_batch_size 4 \
        --train.micro_batch_size 1 --train.num_train_epochs 1 --train.device "$device" \
        --train.accelerator.ep_size "$ep" --train.optimizer.max_grad_norm 0.05 --train.optimizer.weight_decay 0.1 \
        "${precision_args[@]}" --train.accelerator.fsdp_config.offload "$offload" \
        --train.checkpoint.output_dir "$out" --log-level warn "${extra[@]}" "$@" || fail "training $out"
    }
    if [ "$mode" = resume ]; then
      train false "$work/full" --train.max_steps 4 --train.checkpoint.save_steps 2
      train true "$work/offload" --train.max_steps 4 --train.checkpoint.save_steps 2
      same_metrics "$work/full" "$work/offload"
      same_rank_files "$work/full" "$work/offload" 2
      for offload in true false; do
        train "$offload" "$work/resumed_$offload" --train.max_steps 4 --train.checkpoint.save_steps 2 \
          --train.checkpoint.load_path "$work/offload/checkpoints/global_step_2"
        grep -q '"resumed_from": ".*global_step_2' "$work/resumed_$offload/run_summary.json" ||
          fail "resumed_$offload did not resume"
        same_metrics "$work/full" "$work/resumed_$offload"
        same_rank_files "$work/full" "$work/resumed_$offload" 4
      done
      echo "ok: an offloaded run's checkpoint resumes with and without offload to the uninterrupted run's bits"
      exit 0
    fi
    train false "$work/off" --train.max_steps 3 --train.checkpoint.save_steps 0
    train true "$work/on" --train.max_steps 3 --train.checkpoint.save_steps 0
    reproducible=true
    if [ "$device" = cuda ]; then
      train false "$work/off_again" --train.max_steps 3 --train.checkpoint.save_steps 0
      "$bin/veomni-align-check" --rtol 0 --atol 0 --keys "$keys" "$work/off" "$work/off_again" >/dev/null ||
        reproducible=false
    fi
    if $reproducible; then
      same_metrics "$work/off" "$work/on"
      same_rank_files "$work/off" "$work/on" 3
      echo "ok: offload true and false give the same bits ($model, ep $ep, np $np, $device $precision, reduce $reduce)"
    else
      echo "note: two offload-false runs on $device differ, so bits cannot be compared; comparing at rtol $rtol"
      "$bin/veomni-align-check" --rtol "$rtol" --atol 1e-6 --keys "$keys" "$work/off" "$work/on" ||
        fail "offload true and false are not aligned"
    fi
    if [ "$device" = cuda ] && [ "$precision" = bf16 ]; then
      off=$(summary_number "$work/off" peak_gpu_memory_allocated_bytes)
      on=$(summary_number "$work/on" peak_gpu_memory_allocated_bytes)
      params=$(summary_number "$work/off" parameters)
      awk -v off="$off" -v on="$on" -v p="$params" -v np="$np" 'BEGIN {
            need = 8 * p / np
            printf "peak GPU memory per rank: %.0f bytes without offload, %.0f with (saved %.0f, %.2f bytes a parameter of the shard; moments %.0f)\n",
                   off, on, off - on, (off - on) * np / p, need
            exit !(off - on >= need) }' || fail "offload saved less GPU memory than the optimizer moments take"
    fi
    ;;
  *) fail "unknown mode '$mode' (unit, train, lora or resume)" ;;
esac
