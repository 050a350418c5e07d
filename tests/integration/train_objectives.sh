#!/usr/bin/env bash
# veomni-train with the objectives beyond SFT, end to end on the CPU: DPO learns a separable preference set
# (reward_accuracy reaches 1.0), DPO resumes bit-exactly (its reference stays the start weights), and data that lack
# the objective's keys are refused before the first step (exit 2 naming the file and the key).
# Usage: train_objectives.sh CASE BIN_DIR SOURCE_DIR WORKDIR [TOKENIZER_JSON]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4 tokenizer=${5:-}
tool=$bin/veomni-train
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

toy=(--model.config_path "$src/configs/model_configs/qwen3_toy" --train.device cpu --train.checkpoint.save_steps -1
     --log-level warn)
dummy() { "$bin/veomni-dummy-data" --log-level warn --seed 5 "$@" >/dev/null; }
# last_value KEY RUN_DIR: the KEY metric of the run's last step.
last_value() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][-1])" "$2/log_dict.json" "$1"; }

case $case_name in
  dpo_separable)  # every chosen answer agrees, every rejected one refuses: DPO separates them
    [ -f "$tokenizer" ] || fail "the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh"
    for i in $(seq 1 16); do
      printf '{"prompt": [{"role": "user", "content": "Question %d: may I have item %d?"}], ' "$i" $((i * 7))
      printf '"chosen": [{"role": "assistant", "content": "Yes, of course: here it is."}], '
      printf '"rejected": [{"role": "assistant", "content": "No. I will not do that, never."}]}\n'
    done >pairs.jsonl
    "$bin/veomni-preprocess" preference --tokenizer "$tokenizer" --input pairs.jsonl --out pairs.h5 --log-level warn \
      >/dev/null
    expect_exit 0 "$src/configs/qwen3_toy.yaml" --model.config_path "$src/configs/model_configs/qwen3_tiny_vocab151k" \
      --train.device cpu --train.checkpoint.save_steps -1 --log-level warn --data.train_path pairs.h5 \
      --train.objective dpo --train.dpo_config.beta 0.5 --train.global_batch_size 4 --data.max_seq_len 128 \
      --train.num_train_epochs 3 --train.optimizer.lr 3e-3 --train.optimizer.lr_warmup_ratio 0 \
      --train.checkpoint.output_dir run
    accuracy=$(last_value reward_accuracy run) first=$(python3 -c "import json; print(json.load(open('run/log_dict.json'))['dpo_loss'][0])")
    loss=$(last_value dpo_loss run)
    python3 -c "import sys; a, f, l = map(float, sys.argv[1:]); sys.exit(0 if abs(a - 1.0) < 1e-9 and l < f / 2 else 1)" \
      "$accuracy" "$first" "$loss" || fail "reward_accuracy $accuracy (want 1.0), dpo_loss $first -> $loss"
    echo "reward_accuracy $accuracy, dpo_loss $first -> $loss"
    ;;
  dpo_resume)  # steps 3-4 after resuming from step 2 equal the uninterrupted run's, bit for bit
    dummy --type preference --seq-len 48 --num-samples 64 --out pairs.h5
    common=("$src/configs/qwen3_toy.yaml" "${toy[@]}" --data.train_path pairs.h5 --data.max_seq_len 96
            --train.objective dpo --train.max_steps 4 --train.optimizer.lr_warmup_ratio 0)
    expect_exit 0 "${common[@]}" --train.checkpoint.output_dir whole --train.checkpoint.save_steps 2
    expect_exit 0 "${common[@]}" --train.checkpoint.output_dir resumed \
      --train.checkpoint.load_path whole/checkpoints/global_step_2
    python3 - <<'PY' || fail "resumed DPO steps differ from the uninterrupted run"
import json
whole, resumed = json.load(open("whole/log_dict.json")), json.load(open("resumed/log_dict.json"))
for key in ("loss", "dpo_loss", "chosen_rewards", "rejected_rewards", "grad_norm"):
    assert resumed[key] == whole[key], (key, whole[key], resumed[key])
assert len(whole["loss"]) == 4, whole["loss"]
print("resumed steps equal:", whole["loss"])
PY
    ;;
  missing_keys)  # each objective names the key its data lack
    dummy --type text --seq-len 32 --num-samples 64 --out text.h5
    dummy --type preference --seq-len 32 --num-samples 64 --out pairs.h5
    for objective in dpo reward; do
      expect_exit 2 "$src/configs/qwen3_toy.yaml" "${toy[@]}" --data.train_path text.h5 --train.objective $objective \
        --train.checkpoint.output_dir r_$objective
      expect_in err "text.h5: no key 'chosen_length', which train.objective $objective needs"
    done
    expect_exit 2 "$src/configs/qwen3_toy.yaml" "${toy[@]}" --data.train_path pairs.h5 --train.objective value \
      --train.checkpoint.output_dir r_value
    expect_in err "pairs.h5: no key 'returns', which train.objective value needs"
    expect_exit 2 "$src/configs/qwen3_toy.yaml" "${toy[@]}" --data.train_path pairs.h5 --train.objective ppo_actor \
      --train.checkpoint.output_dir r_actor
    expect_in err "pairs.h5: no key 'old_log_probs', which train.objective ppo_actor needs"
    expect_exit 2 "$src/configs/qwen3_toy.yaml" "${toy[@]}" --data.train_path pairs.h5 --train.objective dpo \
      --train.dpo_config.beta -1 --train.checkpoint.output_dir r_beta
    expect_in err "train.dpo_config.beta"
    # A pair longer than data.max_seq_len is refused before the first step (pairs are never truncated).
    expect_exit 2 "$src/configs/qwen3_toy.yaml" "${toy[@]}" --data.train_path pairs.h5 --train.objective dpo \
      --data.max_seq_len 31 --train.checkpoint.output_dir r_long
    expect_in err "pairs.h5: 64 preference pair(s) are longer than data.max_seq_len 31, the first sample 0 (32 tokens)"
    ;;
  *) fail "unknown case $case_name" ;;
esac
