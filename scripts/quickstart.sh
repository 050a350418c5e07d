#!/usr/bin/env bash
# The main job end to end on small embedded defaults: install, build, make a dummy dataset, train the toy
# Qwen3 model on two MPI ranks (FSDP, checkpointing as it goes), and merge its last checkpoint into a HuggingFace
# model directory. Output goes to quickstart-out/ (or $1).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
out=$(realpath -m "${1:-$veomni_root/quickstart-out}")

"$here/setup.sh"
veomni_build
bin="$veomni_build_dir/bin"
mkdir -p "$out"
cd "$veomni_root"  # the recipes name configs/model_configs/... relative to the repository root

veomni_say "1/3 dummy dataset -> $out/data/text.h5"
"$bin/veomni-dummy-data" --type text --seq-len 128 --num-samples 256 --seed 1 --out "$out/data/text.h5" --overwrite
"$bin/veomni-dummy-data" --type text --seq-len 128 --num-samples 32 --seed 2 --out "$out/data/eval.h5" --overwrite

veomni_say "2/3 training the toy Qwen3 model on 2 ranks (FSDP) -> $out/run"
mpirun --oversubscribe -np 2 "$bin/veomni-train" "$veomni_root/configs/qwen3_toy.yaml" \
  --data.train_path "$out/data/text.h5" --data.eval_path "$out/data/eval.h5" --train.eval_steps 4 \
  --train.checkpoint.output_dir "$out/run"

veomni_say "3/3 merging the last checkpoint ($(cat "$out/run/checkpoints/latest")) -> $out/hf"
"$bin/veomni-ckpt-merge" "$out/run" --out "$out/hf" --overwrite

veomni_say "done: datasets in $out/data; effective config, metrics (log_dict.json, eval_loss on the eval set) and checkpoints in $out/run;"
veomni_say "      the trained model as a HuggingFace directory (config.json + model.safetensors) in $out/hf"
if [ -d "$out/run/tensorboard" ]; then
  veomni_say "TensorBoard event files in $out/run/tensorboard; view them with:"
  veomni_say "      tensorboard --logdir $out/run/tensorboard"
else
  veomni_say "no TensorBoard files: this build has no protobuf (install libprotobuf-dev and protobuf-compiler)"
fi
veomni_say "loss curve as a PNG: scripts/plot_loss.sh $out/loss.png $out/run"
