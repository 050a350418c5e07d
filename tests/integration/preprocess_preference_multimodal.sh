#!/usr/bin/env bash
# Integration checks of veomni-preprocess preference --model-type: TRL-layout pairs with images, video and audio in
# the prompt to multimodal pair samples (the media in both halves) that veomni-train's DPO reads; bad records exit 2
# naming the file and line and write nothing.
# Usage: preprocess_preference_multimodal.sh CASE BIN_DIR SOURCE_DIR WORKDIR TOKENIZER_JSON
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4 tokenizer=$5
tool=$bin/veomni-preprocess
inputs=$src/tests/fixtures/media/inputs
rm -rf "$work" && mkdir -p "$work/data/media" && cd "$work"
[ -f "$tokenizer" ] || { echo "FAIL: the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh" >&2; exit 1; }

pref() { expect_exit "$1" preference --tokenizer "$tokenizer" --log-level warn "${@:2}"; }
expect_line() { grep -qxF -- "$1" out || { cat out >&2; fail "missing line: $1"; }; }
nothing_written() { [ -z "$(ls o.h5* 2>/dev/null)" ] || fail "output written despite the error: $(ls o.h5*)"; }

cp "$inputs"/image_rgb_48x64.png "$inputs"/video_h264.mp4 "$inputs"/audio_speech_16k_mono.wav data/media/
part() { printf '{"type": "%s", "%s": "%s"}' "$1" "$1" "$2"; }
text() { printf '{"type": "text", "text": "%s"}' "$1"; }
user() { printf '{"role": "user", "content": [%s]}' "$1"; }
assistant() { printf '{"role": "assistant", "content": "%s"}' "$1"; }
# An explicit-prompt pair: {"prompt": [user PARTS], "chosen": [answer], "rejected": [answer]} (+ EXTRA keys).
pair() {
  printf '{"prompt": [%s], "chosen": [%s], "rejected": [%s]%s}\n' "$(user "$1")" "$(assistant "$2")" \
    "$(assistant "$3")" "${4:-}"
}

case $case_name in
  help)
    expect_exit 0 preference --help
    for flag in --model-type --processor-config --media-root; do expect_in out "$flag"; done
    ;;
  vl_run)  # an image in the prompt: stored twice; veomni-train's DPO on the Qwen3-VL toy reads the pairs
    { pair "$(part image media/image_rgb_48x64.png), $(text 'What colour is it?')" "Red, mostly." "Blue."
      pair "$(text 'Just text.')" "Fine." "Not fine at all."; } >data/in.jsonl
    pref 0 --model-type qwen3_vl --input data/in.jsonl --out vl.h5 --threads 2
    expect_line "pairs: 2"
    expect_line "ref_logps: no"
    expect_line "images: 2"
    expect_line "bad: 0"
    grep -qE '^key: chosen_length +i64' out || fail "no chosen_length key: $(grep '^key' out)"
    grep -qE '^key: position_ids +i64\[3, L\]$' out || fail "position_ids: $(grep position_ids out)"
    [ "$(grep -c '^key:' out)" -eq 11 ] || fail "expected 11 keys"
    # The collator accepts the pairs (positions restart at chosen_length, each half's image within it) and DPO trains.
    "$bin/veomni-train" "$src/configs/qwen3_vl_toy.yaml" --model.config_path "$src/configs/model_configs/qwen3_vl_toy" \
      --data.train_path vl.h5 --data.max_seq_len 512 --train.global_batch_size 1 --train.micro_batch_size 1 \
      --train.max_steps 1 --train.num_train_epochs 1 --train.objective dpo --train.precision fp32 \
      --train.checkpoint.output_dir run --train.checkpoint.save_steps -1 --log-level warn >train.out 2>&1 \
      || { cat train.out >&2; fail "veomni-train dpo on the preprocessed pairs failed"; }
    grep -q '"dpo_loss": \[0.693147' run/log_dict.json || fail "dpo_loss: $(grep dpo_loss run/log_dict.json)"
    ;;
  omni_run)  # shared-prompt layout with audio and video, reference log-probs carried
    prompt="$(user "$(part audio media/audio_speech_16k_mono.wav), $(part video media/video_h264.mp4), $(text 'Describe.')")"
    printf '{"chosen": [%s, %s], "rejected": [%s, %s], "ref_chosen_logps": -3.5, "ref_rejected_logps": -7}\n' \
      "$prompt" "$(assistant 'Speech over a moving scene.')" "$prompt" "$(assistant 'Silence.')" >data/in.jsonl
    pref 0 --model-type qwen3_omni_moe --input data/in.jsonl --out omni.h5
    expect_line "pairs: 1"
    expect_line "ref_logps: yes"
    expect_line "audio_clips: 2"
    expect_line "videos: 2"
    grep -qE '^key: position_ids +f32\[3, L\]$' out || fail "position_ids: $(grep position_ids out)"
    grep -qE '^key: ref_chosen_logps +f32' out || fail "no ref_chosen_logps key"
    [ "$(grep -c '^key:' out)" -eq 16 ] || fail "expected 16 keys"
    ;;
  bad_records)  # exit 2 naming file and line; nothing written
    { pair "$(text fine)" "Yes." "No."
      printf '{"prompt": [%s], "chosen": [{"role": "assistant", "content": [%s]}], "rejected": [%s]}\n' \
        "$(user "$(text look)")" "$(part image media/image_rgb_48x64.png)" "$(assistant No.)"; } >data/in.jsonl
    pref 2 --model-type qwen3_vl --input data/in.jsonl --out o.h5
    expect_in err "data/in.jsonl:2: \"chosen\" message 0 part 0 is an image part; answers are text"
    nothing_written
    { pair "$(text fine)" "Yes." "No."; pair "$(part image media/missing.png)" "Yes." "No."; } >data/in.jsonl
    pref 2 --model-type qwen3_vl --input data/in.jsonl --out o.h5
    expect_in err "data/in.jsonl:2: prompt message 0 part 0 (image)"
    expect_in err "data/media/missing.png"
    nothing_written
    { pair "$(text fine)" "Yes." "No." ', "ref_chosen_logps": -1, "ref_rejected_logps": -2'
      pair "$(text again)" "Yes." "No."; } >data/in.jsonl
    pref 2 --model-type qwen3_vl --input data/in.jsonl --out o.h5
    expect_in err "data/in.jsonl:2: the record has no \"ref_chosen_logps\""
    nothing_written
    pair "$(part audio media/audio_speech_16k_mono.wav)" "Yes." "No." >data/in.jsonl
    pref 2 --model-type qwen3_vl --input data/in.jsonl --out o.h5
    expect_in err "data/in.jsonl:1: \"prompt\": message 0 part 0: audio parts need --model-type qwen3_omni_moe"
    ;;
  usage_errors)
    pair "$(text fine)" "Yes." "No." >data/in.jsonl
    pref 2 --input data/in.jsonl --out o.h5 --media-root data/media
    expect_in err "--processor-config and --media-root need --model-type"
    pref 2 --model-type qwen3_vl --input data/in.jsonl --out o.h5 --num-shards 2
    expect_in err "--num-shards 2 with --model-type"
    nothing_written
    ;;
  *) echo "unknown case $case_name" >&2; exit 2 ;;
esac
echo "PASS: $case_name"
