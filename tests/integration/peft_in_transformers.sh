#!/usr/bin/env bash
# A LoRA run on the MoE toy (rank 4 on the attention projections and the experts' fused tensors, started from its HF
# directory, two steps under EP2) written by veomni-ckpt-merge as a PEFT adapter directory and as a merged model,
# then checked against transformers + PEFT by scripts/check_peft_adapter.py: PeftModel.from_pretrained loads the
# directory onto the HF base and gives our label log-probs (veomni-score on the merged model, 1e-4), and the merged
# model is the base plus scale * B A. Skipped (77) without python3, transformers, peft and h5py.
# usage: peft_in_transformers.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
python3 -c 'import transformers, peft, h5py' 2>/dev/null ||
  { echo "SKIPPED: needs python3 with transformers, peft and h5py"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-peft-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "$src"
base=tests/fixtures/hf/qwen3_moe_toy/model
"$bin/veomni-dummy-data" --type text --seq-len 65 --num-samples 16 --seed 7 --out "$work/data.h5" --log-level warn
mpirun --oversubscribe -np 2 "$bin/veomni-train" configs/qwen3_moe_toy.yaml --model.model_path "$base" \
  --model.lora_config.rank 4 --model.lora_config.alpha 8 --train.accelerator.ep_size 2 \
  --data.train_path "$work/data.h5" --data.max_seq_len 64 --train.global_batch_size 4 --train.max_steps 2 \
  --train.optimizer.lr 1e-2 --train.device cpu --train.precision fp32 --train.checkpoint.output_dir "$work/run" \
  --train.checkpoint.save_steps 0 --log-level warn
"$bin/veomni-ckpt-merge" "$work/run" --peft --out "$work/peft" --log-level warn
"$bin/veomni-ckpt-merge" "$work/run" --out "$work/merged" --log-level warn
"$bin/veomni-score" --model "$work/merged" --data "$work/data.h5" --out "$work/scores.h5" --what logprobs \
  --train.device cpu --log-level warn
python3 scripts/check_peft_adapter.py --base "$base" --peft "$work/peft" --merged "$work/merged" \
  --data "$work/data.h5" --scores "$work/scores.h5"
