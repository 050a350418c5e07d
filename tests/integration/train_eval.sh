#!/usr/bin/env bash
# Validation during training (data.eval_path, train.eval_steps): the eval metrics of every parallel layout agree
# with one process; a resumed run logs what an uninterrupted one logs; every objective reports its eval_* metrics;
# a missing or mismatched eval set is refused with exit 2 naming data.eval_path.
# usage: train_eval.sh BIN_DIR SOURCE_DIR layouts|resume|objectives|errors [cpu|cuda]
# Environment: EVAL_RTOL (1e-6), the tolerance of the layouts case.
set -euo pipefail
bin=$1 src=$2 case=$3 device=${4:-cpu}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-eval-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"

data() {  # TYPE NAME SAMPLES SEED: text of 33 tokens (32 after the shift), pairs and rollouts of 32
  local len=32
  [ "$1" = text ] && len=33
  "$bin/veomni-dummy-data" --type "$1" --seq-len "$len" --num-samples "$3" --seed "$4" --out "$work/$2.h5" >/dev/null
}
# NP RECIPE OUT ARGS...: a short fp32 CPU run of the toy recipe with an eval set.
train() {
  local np=$1 recipe=$2 out=$3
  shift 3
  mpirun --oversubscribe --bind-to none -np "$np" "$bin/veomni-train" "configs/$recipe.yaml" \
    --data.max_seq_len 32 --train.global_batch_size 2 --train.micro_batch_size 1 --train.num_train_epochs 1 \
    --train.precision fp32 --train.device "$device" --train.checkpoint.output_dir "$out" --log-level info "$@" \
    >"$out.log" 2>&1 || { cat "$out.log" >&2; fail "veomni-train $*"; }
}
eval_steps_of() { tr -d '\n ' <"$1/log_dict.json" | sed 's/.*"eval_step":\[\([^]]*\)\].*/\1/'; }

case "$case" in
  layouts)
    # MoE toy; 5 eval micro-batches, so under two data-parallel ranks one rank runs a filler forward. A learning
    # rate of 1e-9 leaves the weights of every layout equal to far below 1e-6: what is compared is the evaluation.
    data text train 16 3
    data text eval 5 4
    runs=()
    for layout in 1:1:1 2:1:1 2:2:1 2:1:2; do
      IFS=: read -r np sp ep <<<"$layout"
      run="$work/np${np}_sp${sp}_ep${ep}"
      train "$np" qwen3_moe_toy "$run" --data.train_path "$work/train.h5" --data.eval_path "$work/eval.h5" \
        --train.max_steps 4 --train.eval_steps 3 --train.optimizer.lr 1e-9 --train.optimizer.lr_min 0 --train.optimizer.lr_warmup_ratio 0 \
        --train.accelerator.ulysses_size "$sp" --train.accelerator.ep_size "$ep" --train.checkpoint.save_steps -1
      [ "$(eval_steps_of "$run")" = "3,4" ] || fail "$layout evaluated after steps [$(eval_steps_of "$run")], not [3,4]"
      grep -q "eval step 3/4 | eval_loss " "$run.log" || { cat "$run.log" >&2; fail "no eval progress line"; }
      grep -q '"final_eval": {' "$run/run_summary.json" || { cat "$run/run_summary.json" >&2; fail "run_summary"; }
      runs+=("$run")
    done
    "$bin/veomni-align-check" --rtol "${EVAL_RTOL:-1e-6}" --atol 0 --keys eval_loss,eval_foundation_loss "${runs[@]}"
    ;;
  resume)
    # Evaluations after steps 2 and 4, a checkpoint after step 2; the interrupted run fails at step 3's start.
    data text train 16 3
    data text eval 4 4
    args=(--data.train_path "$work/train.h5" --data.eval_path "$work/eval.h5" --train.max_steps 4
          --train.eval_steps 2 --train.checkpoint.save_steps 2)
    train 1 qwen3_toy "$work/whole" "${args[@]}"
    code=0
    VEOMNI_FAULT_INJECT="rank=0,step=3" mpirun --oversubscribe --bind-to none -np 1 "$bin/veomni-train" \
      configs/qwen3_toy.yaml --data.max_seq_len 32 --train.global_batch_size 2 --train.micro_batch_size 1 \
      --train.num_train_epochs 1 --train.precision fp32 --train.device "$device" \
      --train.checkpoint.output_dir "$work/split" "${args[@]}" >"$work/split.log" 2>&1 || code=$?
    [ "$code" -ne 0 ] || fail "the injected fault did not stop the run"
    [ "$(eval_steps_of "$work/split")" = "2" ] || fail "interrupted log: eval_step [$(eval_steps_of "$work/split")]"
    train 1 qwen3_toy "$work/split" "${args[@]}" --train.checkpoint.load_path auto
    [ "$(eval_steps_of "$work/split")" = "2,4" ] || fail "resumed log: eval_step [$(eval_steps_of "$work/split")]"
    "$bin/veomni-align-check" --rtol 0 --atol 0 "$work/whole" "$work/split"
    ;;
  objectives)
    # Each objective's own metrics, prefixed eval_, in log_dict.json and run_summary.json.
    data preference pairs 8 3
    data preference pairs_eval 3 4
    data rollout rollouts 8 3
    data rollout rollouts_eval 3 4
    check() {  # OBJECTIVE DATA KEY...
      local objective=$1 set=$2 run="$work/$1"
      shift 2
      train 1 qwen3_toy "$run" --train.objective "$objective" --data.train_path "$work/$set.h5" \
        --data.eval_path "$work/${set}_eval.h5" --train.max_steps 1 --train.checkpoint.save_steps -1
      for key in eval_loss "$@"; do
        grep -q "\"$key\": \[" "$run/log_dict.json" || { cat "$run/log_dict.json" >&2; fail "$objective: no $key"; }
        grep -q "\"$key\": " "$run/run_summary.json" || { cat "$run/run_summary.json" >&2; fail "$objective: $key"; }
      done
    }
    check dpo pairs eval_dpo_loss eval_chosen_rewards eval_rejected_rewards eval_reward_accuracy eval_reward_margin
    check reward pairs eval_rm_loss eval_reward_accuracy eval_chosen_reward eval_rejected_reward
    check value rollouts eval_vf_loss eval_vf_clipfrac
    check ppo_actor rollouts eval_pg_loss eval_pg_clipfrac eval_ppo_kl eval_entropy
    ;;
  errors)
    data text train 8 3
    data preference pairs 4 3
    refused() {  # FRAGMENT ARGS...: exit 2 and the fragment on stderr
      local fragment=$1 code=0
      shift
      "$bin/veomni-train" configs/qwen3_toy.yaml --data.train_path "$work/train.h5" --data.max_seq_len 32 \
        --train.global_batch_size 2 --train.max_steps 1 --train.checkpoint.output_dir "$work/refused" \
        --train.checkpoint.save_steps -1 "$@" >/dev/null 2>"$work/err" || code=$?
      [ "$code" -eq 2 ] || { cat "$work/err" >&2; fail "exit $code, expected 2: $*"; }
      grep -qF -- "$fragment" "$work/err" || { cat "$work/err" >&2; fail "'$fragment' not in the message"; }
    }
    refused "data.eval_path: " --data.eval_path "$work/absent.h5"
    refused "key 'chosen_length'" --data.eval_path "$work/pairs.h5"
    refused "train.eval_steps must be >= 0" --data.eval_path "$work/train.h5" --train.eval_steps -1
    ;;
  *) fail "unknown case '$case'" ;;
esac
echo "train_eval $case: ok"
