#!/usr/bin/env bash
# Makes the small test videos under tests/fixtures/media/inputs/ with the ffmpeg CLI, each with a raw RGB24 dump of
# every frame (the GPU machine cannot decode video in Python, so scripts/media_fixtures/video.py reads the dumps) and
# a JSON of what ffprobe reports (frame rate, frame count, size).
# Usage: scripts/media_fixtures/make_video_media.sh [OUT_DIR]   (default: tests/fixtures/media/inputs)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/../../tests/fixtures/media/inputs}"
mkdir -p "$out"
ff=(ffmpeg -hide_banner -loglevel error -nostdin -y)

# name, lavfi source, encoder options, extension
make_video() {
  local name="$1" source="$2" ext="$4"
  local -a codec
  read -r -a codec <<<"$3"
  "${ff[@]}" -f lavfi -i "$source" "${codec[@]}" -map_metadata -1 -fflags +bitexact "$out/$name.$ext"
  # The dump converts as our decoder does (swscale, bilinear, the stream's matrix and range, full-range RGB out).
  "${ff[@]}" -i "$out/$name.$ext" -sws_flags bilinear -f rawvideo -pix_fmt rgb24 "$out/$name.rgb"
  local fps frames width height
  fps=$(ffprobe -v error -select_streams v:0 -show_entries stream=avg_frame_rate -of csv=p=0 "$out/$name.$ext")
  frames=$(ffprobe -v error -select_streams v:0 -count_packets -show_entries stream=nb_read_packets -of csv=p=0 \
    "$out/$name.$ext")
  width=$(ffprobe -v error -select_streams v:0 -show_entries stream=width -of csv=p=0 "$out/$name.$ext")
  height=$(ffprobe -v error -select_streams v:0 -show_entries stream=height -of csv=p=0 "$out/$name.$ext")
  local fps_value
  fps_value=$(python3 -c "from fractions import Fraction; print(float(Fraction('$fps')))")
  printf '{"file": "%s.%s", "raw_rgb": "%s.rgb", "fps": %s, "num_frames": %s, "width": %s, "height": %s}\n' \
    "$name" "$ext" "$name" "$fps_value" "$frames" "$width" "$height" >"$out/$name.json"
}

# H.264 with B-frames (decode order differs from display order): 3 s at 10 fps, 64x48 -> 30 frames.
make_video video_h264 "testsrc2=size=64x48:rate=10:duration=3" \
  "-c:v libx264 -pix_fmt yuv420p -preset medium -crf 20 -bf 2 -g 12 -threads 1" mp4
# VP9 in WebM: 2.5 s at 10 fps, 56x40 (sides not multiples of 32) -> 25 frames (an odd sampled count).
make_video video_vp9 "testsrc2=size=56x40:rate=10:duration=2.5" \
  "-c:v libvpx-vp9 -pix_fmt yuv420p -crf 30 -b:v 0 -deadline good -cpu-used 4 -threads 1" webm
# MPEG-4 part 2 in AVI with B-frames: 1 s at 12 fps, 48x32 -> 12 frames.
make_video video_mpeg4 "testsrc2=size=48x32:rate=12:duration=1" "-c:v mpeg4 -q:v 4 -bf 2 -g 6" avi

# Bad inputs: audio only; a video stream that holds no frame; audio whose only picture is attached cover art.
"${ff[@]}" -f lavfi -i "sine=frequency=440:sample_rate=8000:duration=0.1" -c:a pcm_s16le -map_metadata -1 \
  -fflags +bitexact "$out/video_audio_only.wav"
"${ff[@]}" -f lavfi -i "testsrc2=size=64x48:rate=10" -frames:v 0 -c:v mpeg4 -fflags +bitexact \
  "$out/video_zero_frames.avi"
"${ff[@]}" -f lavfi -i "sine=frequency=440:sample_rate=8000:duration=0.2" \
  -f lavfi -i "testsrc2=size=32x32:rate=1:duration=1" -map 0:a -map 1:v -frames:v 1 -c:a libmp3lame -b:a 32k -c:v png \
  -disposition:v attached_pic -map_metadata -1 "$out/video_cover_art.mp3"

ls -l "$out"/video_*
