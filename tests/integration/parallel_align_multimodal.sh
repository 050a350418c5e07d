#!/usr/bin/env bash
# Multimodal training under mpirun on the CPU (fp32): layouts of the toy Qwen3-Omni thinker and Qwen3-VL-MoE agree
# with one process (veomni-align-check), frozen towers stay bitwise unchanged, and a multimodal run resumes exactly.
# usage: parallel_align_multimodal.sh CASE BIN_DIR SOURCE_DIR [TOKENIZER_JSON]
#   CASE: omni_layouts | vl_layouts | mixed_media (needs TOKENIZER_JSON and veomni-preprocess with media) | freeze |
#         resume
# Environment (for the GPU machine, which has no veomni-preprocess multimodal): MM_DEVICE (cpu | cuda; default cpu),
#   MM_PRECISION (fp32 | bf16; default fp32), MM_RTOL (default 1e-4), MM_DATA (mixed_media: use this dataset instead
#   of preprocessing one, e.g. tests/fixtures/multimodal_train/mixed_media.h5), MM_SAVE_DATA (mixed_media: copy the
#   preprocessed dataset there, which is how that fixture is made), MM_EXPECT_DATA (mixed_media: require the
#   preprocessed dataset to equal this one exactly, and stop there: the MM_DATA case trains it).
set -euo pipefail
case_name=$1 bin=$2 src=$3 tokenizer=${4:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-mm-align-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "$src"  # the recipes name their model config relative to the repository root

source "$src/tests/integration/tool_test_lib.sh"  # fail, small_vocab_config

device=${MM_DEVICE:-cpu} rtol=${MM_RTOL:-1e-4}
case "${MM_PRECISION:-fp32}" in
  fp32) precision_args=(--train.precision fp32) ;;
  bf16) precision_args=(--train.precision mixed --train.accelerator.fsdp_config.mixed_precision.enable true) ;;
  *) echo "MM_PRECISION must be fp32 or bf16, not '${MM_PRECISION}'" >&2; exit 2 ;;
esac

# train RECIPE RUN_NAME NP SP EP [extra overrides...]: 2 steps of global batch 4, micro-batch 1 (fp32 on the CPU
# unless MM_DEVICE / MM_PRECISION say otherwise).
train() {
  local recipe=$1 name=$2 np=$3 sp=$4 ep=$5
  shift 5
  mpirun --oversubscribe --bind-to none -np "$np" "$bin/veomni-train" "configs/$recipe.yaml" \
    --data.train_path "$data" --data.max_seq_len "$seq_len" --train.global_batch_size 4 --train.micro_batch_size 1 \
    --train.max_steps 2 --train.num_train_epochs 1 --train.accelerator.ulysses_size "$sp" \
    --train.accelerator.ep_size "$ep" --train.device "$device" "${precision_args[@]}" \
    --train.checkpoint.output_dir "$work/$name" --train.checkpoint.save_steps -1 --log-level warn "$@"
}

align() { "$bin/veomni-align-check" --rtol "$rtol" --atol 1e-6 --keys loss,foundation_loss,grad_norm "$@"; }

# sha256 of one tensor's bytes in a merged model.safetensors (header: u64 length, JSON with data_offsets).
tensor_sha() {
  local file=$1 name=$2 n header offsets begin end
  n=$(od -An -tu8 -N8 "$file" | tr -d ' ')
  header=$(dd if="$file" iflag=skip_bytes,count_bytes skip=8 count="$n" status=none)
  offsets=$(grep -o "\"$name\":{[^}]*}" <<<"$header" | sed -n 's/.*"data_offsets":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/p')
  [ -n "$offsets" ] || { echo "FAIL: $name not in $file" >&2; return 1; }
  read -r begin end <<<"$offsets"
  dd if="$file" iflag=skip_bytes,count_bytes skip=$((8 + n + begin)) count=$((end - begin)) status=none \
    | sha256sum | cut -d' ' -f1
}

omni_data() {
  small_vocab_config qwen3_omni_moe_toy "$work/omni_config"
  data=$work/omni.h5 seq_len=256
  "$bin/veomni-dummy-data" --type qwen3omni --seq-len "$seq_len" --num-samples "${1:-8}" --seed 3 --out "$data" \
    >/dev/null
}

case $case_name in
  omni_layouts)  # FSDP2, SP2, EP2, SP2 x EP2 over 4 ranks against one process
    omni_data
    for layout in 1:1:1 2:1:1 2:2:1 2:1:2 4:2:2; do
      IFS=: read -r np sp ep <<<"$layout"
      train qwen3_omni_moe_toy "np${np}_sp${sp}_ep${ep}" "$np" "$sp" "$ep" --model.config_path "$work/omni_config"
    done
    align "$work"/np1_sp1_ep1 "$work"/np2_sp1_ep1 "$work"/np2_sp2_ep1 "$work"/np2_sp1_ep2 "$work"/np4_sp2_ep2
    ;;
  vl_layouts)  # Qwen3-VL-MoE (deepstack): FSDP2, SP2, EP2
    small_vocab_config qwen3_vl_moe_toy "$work/vl_config"
    data=$work/vl.h5 seq_len=128
    "$bin/veomni-dummy-data" --type qwen3vl --seq-len "$seq_len" --num-samples 8 --seed 3 --out "$data" >/dev/null
    for layout in 1:1:1 2:1:1 2:2:1 2:1:2; do
      IFS=: read -r np sp ep <<<"$layout"
      train qwen3_vl_moe_toy "np${np}_sp${sp}_ep${ep}" "$np" "$sp" "$ep" --model.config_path "$work/vl_config"
    done
    align "$work"/np1_sp1_ep1 "$work"/np2_sp1_ep1 "$work"/np2_sp2_ep1 "$work"/np2_sp1_ep2
    ;;
  mixed_media)  # samples with and without media, in order: FSDP rank 0 gets no image and no audio at all
    data=$work/mixed.h5 seq_len=256
    if [ -n "${MM_DATA:-}" ]; then
      [ -f "$MM_DATA" ] || fail "MM_DATA names no file: $MM_DATA"
      cp "$MM_DATA" "$data"
    else
      [ -f "$tokenizer" ] || fail "the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh"
      inputs=$src/tests/fixtures/media/inputs
      user() { printf '{"role": "user", "content": [%s]}' "$1"; }
      part() { printf '{"type": "%s", "%s": "%s"}' "$1" "$1" "$2"; }
      text() { printf '{"type": "text", "text": "%s"}' "$1"; }
      # A 150-word preamble in every record makes each sample longer than half of max_seq_len: one sample per
      # micro-batch, so micro-batches 0 and 2 (FSDP rank 0's) hold text only, and 1 and 3 image and audio.
      filler=$(printf 'alpha %.0s' $(seq 150))
      record() {
        printf '{"messages": [%s, {"role": "assistant", "content": "Fine, thanks."}]}\n' "$(user "$(text "$filler"), $1")"
      }
      { record "$(text 'How are you today?')"
        record "$(part image "$inputs/image_rgb_48x64.png"), $(part audio "$inputs/audio_speech_16k_mono.wav"), $(text 'Hear this.')"
        record "$(text 'Only words here, nothing else.')"
        record "$(part image "$inputs/image_photo_100x300.jpg"), $(part audio "$inputs/audio_speech_16k_mono.wav")"
        record "$(text 'Plain text again.')"
        record "$(part audio "$inputs/audio_speech_16k_mono.wav")"
        record "$(text 'The last words.')"
        record "$(part image "$inputs/image_rgb_48x64.png")"; } >"$work/in.jsonl"
      "$bin/veomni-preprocess" multimodal --tokenizer "$tokenizer" --model-type qwen3_omni_moe --input "$work/in.jsonl" \
        --out "$data" --log-level warn >/dev/null
      if [ -n "${MM_SAVE_DATA:-}" ]; then cp "$data" "$MM_SAVE_DATA"; fi
      # The committed dataset trains across layouts in its own case: equal bytes here make that run this one's.
      if [ -n "${MM_EXPECT_DATA:-}" ]; then
        "$bin/dataset_diff" "$data" "$MM_EXPECT_DATA" 0 0 || fail "the preprocessed dataset differs from $MM_EXPECT_DATA (remake it with MM_SAVE_DATA)"
        exit 0
      fi
    fi
    # The real token ids need the full 151,936-row vocabulary: two parallel layouts only (EP is covered above).
    for layout in 1:1:1 2:1:1 2:2:1; do
      IFS=: read -r np sp ep <<<"$layout"
      train qwen3_omni_moe_toy "np${np}_sp${sp}_ep${ep}" "$np" "$sp" "$ep" --data.dataloader.shuffle false
    done
    align "$work"/np1_sp1_ep1 "$work"/np2_sp1_ep1 "$work"/np2_sp2_ep1
    ;;
  freeze)  # frozen tower parameters keep their values bitwise; the Omni merger and audio proj1 still train
    omni_data
    frozen=(--train.freeze_vit true --train.freeze_audio_tower true --train.checkpoint.save_steps 1)
    train qwen3_omni_moe_toy frozen 2 1 1 --model.config_path "$work/omni_config" "${frozen[@]}"
    for step in 1 2; do
      "$bin/veomni-ckpt-merge" "$work/frozen/checkpoints/global_step_$step" --out "$work/hf$step" --no-tokenizer \
        --log-level warn >/dev/null
    done
    # The merge writes the model's own config.json (the thinker's, not its text model's).
    grep -q '"model_type": *"qwen3_omni_moe"' "$work/hf1/config.json" || fail "merged config.json: $(head -c 300 "$work/hf1/config.json")"
    grep -q '"audio_config"' "$work/hf1/config.json" || fail "merged config.json lacks the audio encoder's config"
    sha() { tensor_sha "$work/hf$1/model.safetensors" "$2"; }
    for name in thinker.visual.blocks.0.attn.qkv.weight thinker.visual.patch_embed.proj.weight \
                thinker.visual.merger_list.0.mlp.0.weight thinker.audio_tower.conv2d1.weight \
                thinker.audio_tower.layers.1.fc2.weight thinker.audio_tower.proj2.weight; do
      a=$(sha 1 "$name") b=$(sha 2 "$name")
      [ -n "$a" ] && [ "$a" = "$b" ] || fail "frozen $name changed between steps 1 and 2"
    done
    for name in thinker.visual.merger.mlp.0.weight thinker.audio_tower.proj1.weight \
                thinker.model.layers.0.self_attn.q_proj.weight; do
      a=$(sha 1 "$name") b=$(sha 2 "$name")
      [ -n "$a" ] && [ "$a" != "$b" ] || fail "trainable $name did not change between steps 1 and 2"
    done
    ;;
  resume)  # 4 steps in one go vs 2 steps, then resumed under another layout (SP2) for 2 more; constant LR so that
    # the shorter first run has the same schedule
    omni_data 16
    common=(--model.config_path "$work/omni_config" --train.optimizer.lr_decay_style constant
            --train.optimizer.lr_warmup_ratio 0)
    train qwen3_omni_moe_toy full 2 1 1 "${common[@]}" --train.max_steps 4
    train qwen3_omni_moe_toy part 2 1 1 "${common[@]}" --train.checkpoint.save_steps 0
    train qwen3_omni_moe_toy part 2 2 1 "${common[@]}" --train.max_steps 4 --train.checkpoint.load_path auto
    [ "$(grep -o '"loss": \[[^]]*\]' "$work/part/log_dict.json" | tr ',' '\n' | wc -l)" -eq 4 ] \
      || fail "the resumed run's log_dict.json does not hold 4 steps: $(cat "$work/part/log_dict.json")"
    "$bin/veomni-align-check" --rtol 1e-5 --atol 1e-7 --keys loss,foundation_loss,grad_norm "$work/full" "$work/part"
    ;;
  *) fail "unknown case '$case_name'" ;;
esac
