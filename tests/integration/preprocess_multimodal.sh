#!/usr/bin/env bash
# Integration checks of veomni-preprocess multimodal: usage, Qwen3-VL and Qwen3-Omni runs with relative media paths,
# the schema against veomni-dummy-data's, bad media, --skip-bad, --max-seq-len, and a throughput measurement.
# Usage: preprocess_multimodal.sh CASE BIN_DIR SOURCE_DIR WORKDIR TOKENIZER_JSON
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4 tokenizer=$5
tool=$bin/veomni-preprocess
inputs=$src/tests/fixtures/media/inputs
rm -rf "$work" && mkdir -p "$work/data/media" && cd "$work"
[ -f "$tokenizer" ] || { echo "FAIL: the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh" >&2; exit 1; }

mm() { expect_exit "$1" multimodal --tokenizer "$tokenizer" --log-level warn "${@:2}"; }

# The media beside the JSONL, under data/media/, referenced by relative paths.
cp "$inputs"/image_rgb_48x64.png "$inputs"/image_photo_100x300.jpg "$inputs"/video_h264.mp4 \
  "$inputs"/audio_speech_16k_mono.wav "$inputs"/audio_speech_22k.mp3 data/media/
user() { printf '{"role": "user", "content": [%s]}' "$1"; }
part() { printf '{"type": "%s", "%s": "%s"}' "$1" "$1" "$2"; }
text() { printf '{"type": "text", "text": "%s"}' "$1"; }
answer='{"role": "assistant", "content": "Fine."}'
record() { printf '{"messages": [%s, %s]}\n' "$(user "$1")" "$answer"; }

# "name dtype" of every key line, sorted: the schema without the shapes.
schema() { sed -n 's/^key: *\([a-z_]*\) *\([a-z0-9]*\)\[.*/\1 \2/p' "$1" | sort; }
# Compares this run's schema with veomni-dummy-data's for the same family.
same_schema_as_dummy() {
  local type=$1 seq=$2
  schema out >ours
  "$bin/veomni-dummy-data" --type "$type" --seq-len "$seq" --num-samples 1 --out dummy.h5 >dummy.out 2>dummy.err \
    || { cat dummy.err >&2; fail "veomni-dummy-data failed"; }
  sed -n 's/^key: *\([a-z_]*\) *\([a-z0-9]*\) .*/\1 \2/p' dummy.out | sort >theirs
  [ -s theirs ] || fail "no key lines from veomni-dummy-data"
}

case $case_name in
  help)
    expect_exit 0 --help
    expect_in out "multimodal"
    expect_exit 0 multimodal --help
    for flag in --model-type --processor-config --media-root --max-seq-len --too-long --skip-bad --threads \
      --max-line-bytes; do
      expect_in out "$flag"
    done
    ;;
  endless_line)  # input without line breaks stops at --max-line-bytes, naming the line, and writes nothing
    mm 2 --model-type qwen3_vl --input /dev/zero --out o.h5 --max-line-bytes 4096
    expect_in err "/dev/zero:1: the line is longer than 4096 bytes (not JSONL? --max-line-bytes raises the limit)"
    [ -z "$(ls o.h5* 2>/dev/null)" ] || fail "output written: $(ls o.h5*)"
    record "$(text hi)" >data/in.jsonl
    mm 0 --model-type qwen3_vl --input data/in.jsonl --out o.h5 --max-line-bytes 4096
    ;;
  version)
    expect_exit 0 --version
    grep -qE '^veomni-preprocess [0-9]+\.[0-9]+\.[0-9]+' out || fail "version line: $(cat out)"
    ;;
  usage_errors)
    record "$(text hi)" >data/in.jsonl
    mm 2 --input data/in.jsonl --out o.h5                             # no --model-type
    mm 2 --model-type qwen2_vl --input data/in.jsonl --out o.h5
    expect_in err "qwen2_vl"
    mm 2 --model-type qwen3_vl --input data/in.jsonl --out o.h5 --too-long cut
    mm 2 --model-type qwen3_vl --input data/in.jsonl --out -
    expect_in err "seekable"
    record "$(part audio media/audio_speech_16k_mono.wav)" >data/audio.jsonl
    mm 2 --model-type qwen3_vl --input data/audio.jsonl --out o.h5
    expect_in err "data/audio.jsonl:1: message 0 part 0: audio parts need --model-type qwen3_omni_moe"
    ;;
  vl_run)  # two images and a video in one conversation, a text-only one; schema as veomni-dummy-data --type qwen3vl
    { record "$(part image media/image_rgb_48x64.png), $(text 'and'), $(part image media/image_photo_100x300.jpg), \
$(part video media/video_h264.mp4), $(text 'What moves?')"
      record "$(text 'Just text.')"; } >data/in.jsonl
    mm 0 --model-type qwen3_vl --input data/in.jsonl --out vl.h5 --threads 2
    expect_line "records: 2"
    expect_line "samples: 2"
    expect_line "images: 2"
    expect_line "videos: 1"
    expect_line "audio_clips: 0"
    expect_line "bad: 0"
    expect_line "file: vl.h5"
    grep -qE '^key: position_ids +i64\[3, L\]$' out || fail "position_ids: $(grep position_ids out)"
    grep -qE '^key: pixel_values +f32\[L, 1536\]$' out || fail "pixel_values: $(grep 'pixel_values ' out)"
    grep -qE '^key: video_grid_thw +i64\[L, 3\]$' out || fail "video_grid_thw: $(grep video_grid out)"
    [ "$(grep -c '^key:' out)" -eq 10 ] || fail "expected 10 keys"
    [ "$(sed -n 's/^bytes: //p' out)" -eq "$(stat -c %s vl.h5)" ] || fail "bytes differ from the file size"
    same_schema_as_dummy qwen3vl 64
    diff theirs ours || fail "the schema differs from veomni-dummy-data --type qwen3vl's"
    ;;
  omni_run)  # image, audio (resampled MP3), video; the schema is veomni-dummy-data's (f32 positions in both)
    { record "$(part image media/image_rgb_48x64.png), $(part audio media/audio_speech_22k.mp3), $(text 'Hear this.')"
      record "$(part video media/video_h264.mp4), $(part audio media/audio_speech_16k_mono.wav)"; } >data/in.jsonl
    expect_exit 0 multimodal --tokenizer "$tokenizer" --model-type qwen3_omni_moe --input data/in.jsonl --out omni.h5
    expect_line "samples: 2"
    expect_line "images: 1"
    expect_line "videos: 1"
    expect_line "audio_clips: 2"
    expect_in err "using Qwen3-Omni's ids 151669/151670/151675"
    grep -qE '^key: position_ids +f32\[3, L\]$' out || fail "position_ids: $(grep position_ids out)"
    grep -qE '^key: input_features +f32\[L, 128\]$' out || fail "input_features: $(grep input_features out)"
    [ "$(grep -c '^key:' out)" -eq 13 ] || fail "expected 13 keys"
    same_schema_as_dummy qwen3omni 2048
    grep -qxF "position_ids f32" ours || fail "position_ids should be f32"
    diff theirs ours || fail "the schema differs from veomni-dummy-data --type qwen3omni's"
    ;;
  media_root)  # relative paths against --media-root instead of the JSONL's directory
    record "$(part image image_rgb_48x64.png)" >in.jsonl
    mm 2 --model-type qwen3_vl --input in.jsonl --out o.h5
    expect_in err "image_rgb_48x64.png"
    mm 0 --model-type qwen3_vl --input in.jsonl --out o.h5 --media-root data/media
    expect_line "images: 1"
    ;;
  bad_media)  # exit 2 naming the JSONL file and line and the media path; nothing written
    printf 'not an image' >data/media/broken.png
    { record "$(text fine)"; record "$(part image media/broken.png)"; } >data/in.jsonl
    mm 2 --model-type qwen3_vl --input data/in.jsonl --out o.h5
    expect_in err "data/in.jsonl:2: message 0 part 0 (image)"
    expect_in err "data/media/broken.png"
    [ -z "$(ls o.h5* 2>/dev/null)" ] || fail "output written despite the error: $(ls o.h5*)"
    { record "$(text fine)"; record "$(part audio media/missing.wav)"; } >data/in.jsonl
    mm 2 --model-type qwen3_omni_moe --input data/in.jsonl --out o.h5
    expect_in err "data/in.jsonl:2: message 0 part 0 (audio)"
    expect_in err "data/media/missing.wav"
    ;;
  skip_bad)
    printf 'not an image' >data/media/broken.png
    { record "$(part image media/broken.png)"; record "$(text fine)"; record "$(part video media/nothing.mp4)"; } \
      >data/in.jsonl
    mm 0 --model-type qwen3_vl --input data/in.jsonl --out o.h5 --skip-bad
    expect_line "records: 3"
    expect_line "samples: 1"
    expect_line "bad: 2"
    expect_in err "skipped data/in.jsonl:1"
    expect_in err "skipped data/in.jsonl:3"
    ;;
  too_long)  # never truncated: dropped and counted, or an error with --too-long error
    { record "$(part image media/image_rgb_48x64.png)"; record "$(text short)"; } >data/in.jsonl
    mm 0 --model-type qwen3_vl --input data/in.jsonl --out o.h5 --max-seq-len 40
    expect_line "samples: 1"
    expect_line "dropped: 1 (too long 1, no assistant token 0)"
    mm 2 --model-type qwen3_vl --input data/in.jsonl --out o2.h5 --max-seq-len 40 --too-long error
    expect_in err "data/in.jsonl:1: "
    expect_in err "more than --max-seq-len 40 (media blocks cannot be truncated)"
    ;;
  throughput)  # samples/s for a 448x448 image sample and a 10 s audio sample, inputs made here
    n=${VEOMNI_MM_BENCH_SAMPLES:-8}  # 40 or more to measure; 8 checks the threaded path
    ffmpeg -v error -f lavfi -i testsrc2=size=448x448 -frames:v 1 data/media/bench.png
    ffmpeg -v error -f lavfi -i "sine=frequency=440:sample_rate=16000:duration=10" -ac 1 data/media/bench.wav
    for ((i = 0; i < n; i++)); do record "$(part image media/bench.png), $(text "Describe picture $i.")"; done \
      >data/image.jsonl
    for ((i = 0; i < n; i++)); do record "$(part audio media/bench.wav), $(text "Transcribe clip $i.")"; done \
      >data/audio.jsonl
    for threads in 1 2; do
      mm 0 --model-type qwen3_vl --input data/image.jsonl --out image.h5 --threads $threads --overwrite
      expect_line "samples: $n"
      echo "image 448x448, threads $threads: $(grep '^seconds:' out)"
      mm 0 --model-type qwen3_omni_moe --input data/audio.jsonl --out audio.h5 --threads $threads --overwrite
      expect_line "samples: $n"
      echo "audio 10 s, threads $threads: $(grep '^seconds:' out)"
    done
    ;;
  *) fail "unknown case $case_name" ;;
esac
