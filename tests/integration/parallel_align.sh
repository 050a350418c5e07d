#!/usr/bin/env bash
# Trains one model under several parallel layouts (mpirun; CPU fp32 by default, or GPUs) and checks that every
# layout's loss, foundation_loss and grad_norm match the first one with veomni-align-check.
# usage: parallel_align.sh BIN_DIR SOURCE_DIR MODEL RTOL ATOL LAYOUT...
#   LAYOUT = np:ulysses:ep[:micro_batch_size[:device[:precision]]]; device cpu (default) or cuda; precision fp32
#   (default) or bf16 (mixed precision: bf16 compute, fp32 masters). A micro_batch_size of 2 packs two samples per
#   micro-batch: the same global batch with half the accumulation steps.
# Environment: ALIGN_MODEL_CONFIG (a config.json directory replacing the recipe's), ALIGN_GLOBAL_BATCH (4),
#   ALIGN_STEPS (3), ALIGN_SEQ_LEN (95: samples are 96 tokens, so SP layouts pad every row), ALIGN_LR (the recipe's),
#   ALIGN_DATA_TYPE (text; qwen3vl or qwen3omni: veomni-dummy-data's multimodal samples of --seq-len ALIGN_SEQ_LEN,
#   which are shorter than that, for the multimodal recipes), ALIGN_OBJECTIVE (sft; dpo or reward train on
#   veomni-dummy-data --type preference pairs of ALIGN_SEQ_LEN tokens, value and ppo_actor on --type rollout
#   samples; each compares its own metrics), ALIGN_EXTRA (more veomni-train arguments, e.g. an objective's keys), ALIGN_DATA_EXTRA (more
#   veomni-dummy-data arguments, e.g. --ref-logps, or --media qwen3vl for multimodal pairs), ALIGN_VOCAB_SIZE (the
#   model config, ALIGN_MODEL_CONFIG or the recipe's, with this vocab_size: the multimodal toys' 151936-row
#   embedding would dominate the CPU time without changing what is tested).
set -euo pipefail
bin=$1 src=$2 model=$3 rtol=$4 atol=$5
shift 5
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-align-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Oversubscribed ranks must yield the core while they wait in collectives.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
global_batch=${ALIGN_GLOBAL_BATCH:-4} steps=${ALIGN_STEPS:-3} seq_len=${ALIGN_SEQ_LEN:-95}
model_args=()
[ -n "${ALIGN_MODEL_CONFIG:-}" ] && [ -z "${ALIGN_VOCAB_SIZE:-}" ] && model_args+=(--model.config_path "$ALIGN_MODEL_CONFIG")
[ -n "${ALIGN_LR:-}" ] && model_args+=(--train.optimizer.lr "$ALIGN_LR")

cd "$src"  # recipes name their model config relative to the repository root, as VeOmni recipes do
if [ -n "${ALIGN_VOCAB_SIZE:-}" ]; then
  config_dir=${ALIGN_MODEL_CONFIG:-$(sed -n 's/^ *config_path: *//p' "configs/$model.yaml")}
  mkdir -p "$work/model_config"
  sed -E "s/\"vocab_size\": *[0-9]+/\"vocab_size\": $ALIGN_VOCAB_SIZE/" "$config_dir/config.json" \
    >"$work/model_config/config.json"
  model_args+=(--model.config_path "$work/model_config")
fi
samples=$((global_batch * steps * 4))
objective=${ALIGN_OBJECTIVE:-sft}
keys=loss,foundation_loss,grad_norm
case "$objective" in
  sft) data_type=${ALIGN_DATA_TYPE:-text} ;;
  dpo) data_type=preference keys=loss,dpo_loss,chosen_rewards,rejected_rewards,reward_margin,grad_norm ;;
  reward) data_type=preference keys=loss,rm_loss,chosen_reward,rejected_reward,grad_norm ;;
  value) data_type=rollout keys=loss,vf_loss,vf_clipfrac,grad_norm ;;
  ppo_actor) data_type=rollout keys=loss,pg_loss,pg_clipfrac,ppo_kl,entropy,grad_norm ;;
  *) echo "unknown ALIGN_OBJECTIVE '$objective'" >&2; exit 2 ;;
esac
read -r -a extra_args <<<"${ALIGN_EXTRA:-}"
data_seq_len=$seq_len
[ "$data_type" = text ] && data_seq_len=$((seq_len + 1))
"$bin/veomni-dummy-data" --type "$data_type" --seq-len "$data_seq_len" --num-samples "$samples" --seed 3 \
  ${ALIGN_DATA_EXTRA:-} --out "$work/data.h5" >/dev/null

runs=()
for layout in "$@"; do
  IFS=: read -r np sp ep mbs device precision <<<"$layout"
  mbs=${mbs:-1} device=${device:-cpu} precision=${precision:-fp32}
  case "$precision" in
    fp32) precision_args=(--train.precision fp32) ;;
    bf16) precision_args=(--train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true
                          --train.accelerator.fsdp_config.mixed_precision.param_dtype bfloat16) ;;
    *) echo "unknown precision '$precision' in layout $layout" >&2; exit 2 ;;
  esac
  run="$work/np${np}_sp${sp}_ep${ep}_mbs${mbs}_${device}_${precision}"
  echo "== layout np=$np ulysses=$sp ep=$ep micro_batch_size=$mbs device=$device precision=$precision"
  # GPU ranks have the cores to themselves: let each use its share for weight initialisation.
  threads=1
  # mpirun binds a rank to one core by default (np <= 2), which would serialise these threads: --bind-to none.
  [ "$device" = cuda ] && threads=$(( $(nproc) / np > 0 ? $(nproc) / np : 1 ))
  mpirun --oversubscribe --bind-to none -np "$np" -x OMP_NUM_THREADS="$threads" "$bin/veomni-train" "$src/configs/$model.yaml" "${model_args[@]}" \
    --data.train_path "$work/data.h5" --data.max_seq_len "$seq_len" \
    --train.global_batch_size "$global_batch" --train.micro_batch_size "$mbs" --train.max_steps "$steps" \
    --train.num_train_epochs 1 --train.accelerator.ulysses_size "$sp" --train.accelerator.ep_size "$ep" \
    --train.device "$device" "${precision_args[@]}" --train.objective "$objective" ${extra_args[@]+"${extra_args[@]}"} \
    --train.checkpoint.output_dir "$run" --train.checkpoint.save_steps -1 --log-level warn
  runs+=("$run")
done
"$bin/veomni-align-check" --rtol "$rtol" --atol "$atol" --keys "$keys" "${runs[@]}"
# An objective whose data give it nothing to learn (no pairs, no response tokens) would align trivially at zero.
python3 -c "import json, sys; sys.exit(0 if any(v != 0 for v in json.load(open(sys.argv[1]))['loss']) else 1)" \
  "${runs[0]}/log_dict.json" || { echo "the first layout's loss is 0 at every step: nothing was trained" >&2; exit 1; }
