#!/usr/bin/env bash
# Runs a GPU training check when the machine has enough GPUs, else exits 77 (ctest reports it as skipped).
# usage: train_gpu.sh GPUS_NEEDED SCRIPT ARGS...   (SCRIPT is run as `bash SCRIPT ARGS...`)
set -uo pipefail
need=$1 script=$2
shift 2
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${have:-0}" -lt "$need" ]; then
  echo "SKIPPED: needs $need GPU(s), this machine has ${have:-0}"
  exit 77
fi
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on the lent multi-GPU machines
exec bash "$script" "$@"
