#!/usr/bin/env bash
# veomni-generate speaking on the CPU: a small Qwen3-Omni directory with random weights (thinker, talker, code2wav)
# speaks two chat prompts into 24 kHz mono WAV files (--audio-out, with a stage file), [thinker, talker] writes codec
# codes instead; bad stage files and speaking with a model that cannot speak exit 2 and write nothing.
# usage: generate_speech.sh BIN_DIR SOURCE_DIR MAKE_TOY CASE   (CASE: speak | bad_inputs)
set -euo pipefail
bin=$1 src=$2 make_toy=$3 case=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-speech-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
tool=$bin/veomni-generate
source "$src/tests/integration/tool_test_lib.sh"
cd "$work"
field() { python3 -c "import json,sys; print(json.dumps(json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])-1])[sys.argv[3]]))" "$@"; }

# The Omni toy's thinker (width 64) with a 1024-token vocabulary (the chat and tts ids moved inside it) feeding the
# small talker and code2wav of the speech fixture's config; random weights.
mkdir toy
python3 - "$src" toy <<'PY'
import json, sys
src, out = sys.argv[1], sys.argv[2]
thinker = json.load(open(src + "/configs/model_configs/qwen3_omni_moe_toy/config.json"))["thinker_config"]
config = json.load(open(src + "/tests/fixtures/omni_speech/config.json"))
config.update(im_start_token_id=1000, im_end_token_id=1001, system_token_id=1002, user_token_id=1003,
              assistant_token_id=1004, tts_pad_token_id=1005, tts_bos_token_id=1006, tts_eos_token_id=1007,
              enable_audio_output=True)
thinker["text_config"]["vocab_size"] = 1024
thinker.update(audio_token_id=1010, image_token_id=1013, video_token_id=1014, user_token_id=1003)
config["thinker_config"] = thinker
config["talker_config"].update(thinker_hidden_size=thinker["text_config"]["hidden_size"], accept_hidden_layer=1)
json.dump(config, open(out + "/config.json", "w"), indent=1)
PY
"$make_toy" toy 3 >/dev/null || fail "make_omni_speech_toy failed"
# <|im_start|>user\n ... <|im_end|>\n<|im_start|>assistant\n, the second with a system turn first.
printf '%s\n' '{"input_ids": [1000, 1003, 198, 17, 345, 92, 1001, 198, 1000, 1004, 198]}' \
  '{"input_ids": [1000, 1002, 198, 40, 41, 1001, 198, 1000, 1003, 198, 703, 5, 1001, 198, 1000, 1004, 198]}' >chat.jsonl
cat >stages.yaml <<'YAML'
stages: [thinker, talker, code2wav]
speaker: chelsie
thinker: {max_new_tokens: 5}
talker:
  max_new_tokens: 6
  temperature: 0.0
  code_predictor: {temperature: 0.0}
code2wav: {chunk_size: 4, left_context: 2}
YAML

case "$case" in
speak)
  expect_exit 0 --model toy --prompts chat.jsonl --out speech.jsonl --stages stages.yaml --audio-out wav
  expect_in err "speaking: stages thinker, talker, code2wav, speaker chelsie"
  for i in 1 2; do
    wav=wav/$((i - 1)).wav
    [ "$(field speech.jsonl $i audio)" = "\"$wav\"" ] || fail "line $i names $(field speech.jsonl $i audio)"
    frames=$(field speech.jsonl $i codec_frames) samples=$(field speech.jsonl $i audio_samples)
    [ "$frames" -ge 1 ] && [ "$frames" -le 5 ] || fail "line $i: $frames codec frames (at most 6 tokens, the last not fed back)"
    # A frame is 1920 samples at 24 kHz (the toy's upsampling 2 x 2 x 8 x 5 x 4 x 3), less the causal trim.
    python3 - "$wav" "$frames" "$samples" <<'PY' || fail "$wav is not the expected WAV"
import sys, wave
path, frames, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with wave.open(path) as w:
    assert w.getframerate() == 24000, w.getframerate()
    assert w.getnchannels() == 1, w.getnchannels()
    assert w.getsampwidth() == 2, w.getsampwidth()
    assert w.getnframes() == samples, (w.getnframes(), samples)
    assert frames * 1920 - 1920 < samples <= frames * 1920, (frames, samples)
    pcm = w.readframes(samples)
assert any(pcm), "silence"
PY
  done
  cmp -s wav/0.wav wav/1.wav && fail "two prompts gave the same waveform"
  # Greedy throughout: a second run writes the same files.
  expect_exit 0 --model toy --prompts chat.jsonl --out again.jsonl --stages stages.yaml --audio-out wav2
  cmp wav/0.wav wav2/0.wav && cmp wav/1.wav wav2/1.wav || fail "greedy speaking is not reproducible"
  # [thinker, talker]: the codec codes in the output lines, no WAV.
  sed -e 's/^stages: .*/stages: [thinker, talker]/' stages.yaml >codes.yaml
  expect_exit 0 --model toy --prompts chat.jsonl --out codes.jsonl --stages codes.yaml
  python3 - codes.jsonl speech.jsonl <<'PY' || fail "codec codes of [thinker, talker]"
import json, sys
codes = [json.loads(l) for l in open(sys.argv[1])]
speech = [json.loads(l) for l in open(sys.argv[2])]
for c, s in zip(codes, speech):
    assert "audio" not in c and len(c["codec_codes"]) == c["codec_frames"] == s["codec_frames"], c
    assert all(len(frame) == 4 for frame in c["codec_codes"]), c["codec_codes"]
    assert c["token_ids"] == s["token_ids"]
PY
  ;;
bad_inputs)
  bad() {  # bad NAME YAML EXPECTED_TEXT: the stage file NAME.yaml is refused naming itself and the key
    printf '%s\n' "$2" >"$1.yaml"
    expect_exit 2 --model toy --prompts chat.jsonl --out o.jsonl --stages "$1.yaml" --audio-out wav
    expect_in err "$1.yaml"
    expect_in err "$3"
  }
  bad unknown_stage 'stages: [thinker, vocoder]' "unknown stage 'vocoder'"
  bad unknown_key $'talker:\n  temprature: 0.5' "talker.temprature"
  bad bad_value $'talker:\n  temperature: -1' "talker.temperature"
  bad bad_type $'talker:\n  max_new_tokens: many' "talker.max_new_tokens"
  bad bad_device $'code2wav:\n  device: tpu' "code2wav.device"
  bad bad_chain 'stages: [thinker, code2wav]' "key 'stages'"
  bad bad_speaker 'speaker: nobody' "speaker 'nobody'"
  # --audio-out on a model without a talker; code2wav without --audio-out; --audio-out with a text-only stage file.
  expect_exit 2 --model "$src/tests/fixtures/hf/qwen3_toy/model" --prompts chat.jsonl --out o.jsonl --audio-out wav
  expect_in err "this model cannot speak"
  expect_exit 2 --model toy --prompts chat.jsonl --out o.jsonl --stages stages.yaml
  expect_in err "give --audio-out DIR"
  printf '%s\n' 'stages: [thinker]' >text.yaml
  expect_exit 2 --model toy --prompts chat.jsonl --out o.jsonl --stages text.yaml --audio-out wav
  expect_in err "stop before code2wav"
  # A prompt that is not a chat ending in an open assistant turn cannot be spoken.
  printf '%s\n' '{"input_ids": [1000, 1003, 198, 17, 1001, 198]}' >user_only.jsonl
  expect_exit 2 --model toy --prompts user_only.jsonl --out o.jsonl --stages stages.yaml --audio-out wav
  expect_in err "open assistant turn"
  [ ! -e o.jsonl ] || fail "an output file was written"
  [ ! -e wav ] || fail "an audio directory was written"
  ;;
*) fail "unknown case $case" ;;
esac
echo "generate_speech.$case: ok"
