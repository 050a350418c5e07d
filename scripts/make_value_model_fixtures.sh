#!/usr/bin/env bash
# Makes tests/fixtures/merged_value/ (run where torch + transformers are, e.g. the GPU machine): builds the CPU tools,
# trains 2 steps of train.objective reward (on `veomni-dummy-data --type preference` pairs) and of train.objective
# value (on `--type rollout` data) for the toy dense and MoE models, each started from its transformers causal-LM
# fixture (tests/fixtures/hf/<model>/model: the value head starts as transformers initialises it), merges each
# checkpoint with veomni-ckpt-merge into tests/fixtures/merged_value/<model>_<reward|value>/model, and records
# transformers' rewards and values with scripts/check_merged_value_models.py. CI then compares ours with them
# (tests/unit/test_value_models_in_transformers.cc).
# Environment: VEOMNI_FIXTURE_BUILD_DIR (default build-fixtures), PYTHON (default python3).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
build_dir=${VEOMNI_FIXTURE_BUILD_DIR:-$veomni_root/build-fixtures}
out_root=$veomni_root/tests/fixtures/merged_value
python=${PYTHON:-python3}

veomni_say "building the CPU tools in $build_dir"
cmake -S "$veomni_root" -B "$build_dir" -G Ninja -DVEOMNI_CUDA=OFF -DVEOMNI_WERROR=OFF >/dev/null
cmake --build "$build_dir" --target veomni-train veomni-ckpt-merge veomni-dummy-data -- -j"$(nproc)"
bin=$build_dir/bin

work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-value-fixtures-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bin/veomni-dummy-data" --type preference --seq-len 32 --num-samples 16 --seed 3 --out "$work/reward.h5" >/dev/null
"$bin/veomni-dummy-data" --type rollout --seq-len 32 --num-samples 16 --seed 4 --out "$work/value.h5" >/dev/null

cd "$veomni_root"  # the recipes name their model config relative to the repository root
for model in qwen3_toy qwen3_moe_toy; do
  for objective in reward value; do
    name=${model}_${objective}
    veomni_say "training $name (2 steps) and merging it"
    "$bin/veomni-train" "configs/$model.yaml" --model.model_path "tests/fixtures/hf/$model/model" \
      --data.train_path "$work/$objective.h5" --data.max_seq_len 64 --train.objective "$objective" \
      --train.global_batch_size 4 --train.max_steps 2 --train.checkpoint.save_steps 2 --train.device cpu \
      --train.checkpoint.output_dir "$work/$name" --log-level warn
    mkdir -p "$out_root/$name"
    "$bin/veomni-ckpt-merge" "$work/$name" --out "$out_root/$name/model" --overwrite --no-tokenizer >/dev/null
  done
done

veomni_say "loading the merged models in transformers"
# Local directories only: no hub look-ups (the machine may have no network).
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$python" "$here/check_merged_value_models.py" "$out_root"
veomni_say "done: commit $out_root"
