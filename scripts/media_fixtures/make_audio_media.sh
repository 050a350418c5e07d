#!/usr/bin/env bash
# Makes the small audio test inputs (tests/fixtures/media/inputs/audio_*) from espeak-ng speech with ffmpeg.
# Usage: scripts/media_fixtures/make_audio_media.sh [OUT_DIR]   (default: tests/fixtures/media/inputs)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${root}/tests/fixtures/media/inputs}"
mkdir -p "${out}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# About 3.2 s of speech at espeak-ng's native 22,050 Hz mono; every other file is converted from this one.
espeak-ng -v en-us -s 160 -w "${work}/speech.wav" "The quick brown fox jumps over the lazy dog."

# Bit-exact, metadata-free outputs so that re-running the script gives the same bytes where the codec allows it.
convert() {
  ffmpeg -nostdin -hide_banner -loglevel error -y -i "${work}/speech.wav" -map_metadata -1 -fflags +bitexact "$@"
}

# 16 kHz mono 16-bit PCM: the clip the HF fixture (scripts/media_fixtures/audio.py) reads with Python's wave module.
convert -ar 16000 -ac 1 -c:a pcm_s16le "${out}/audio_speech_16k_mono.wav"
# Lossless copy of the same samples: FLAC must decode to exactly the WAV's samples.
convert -ar 16000 -ac 1 -c:a flac "${out}/audio_speech_16k_mono.flac"
# 44.1 kHz stereo, first second only (size), right channel at half level so that mono mixing is visible.
convert -t 1 -ar 44100 -af "pan=stereo|c0=c0|c1=0.5*c0" -c:a pcm_s16le "${out}/audio_speech_44k_stereo.wav"
# Lossy codecs at the source rate, so decoding them also resamples 22,050 -> 16,000 Hz.
convert -ac 1 -c:a libvorbis -q:a 2 "${out}/audio_speech_22k.ogg"
convert -ac 1 -c:a libmp3lame -b:a 32k "${out}/audio_speech_22k.mp3"

ls -l "${out}"/audio_*
