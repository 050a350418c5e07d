#!/usr/bin/env bash
# Makes the small image test inputs (tests/fixtures/media/inputs/image_*) with ffmpeg: one PNG per colour type and
# bit depth that decode_image converts, and baseline JPEGs with 4:2:0 and 4:4:4 chroma. Names give height x width.
# Usage: scripts/media_fixtures/make_image_media.sh [OUT_DIR]   (default: tests/fixtures/media/inputs)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${root}/tests/fixtures/media/inputs}"
mkdir -p "${out}"

# testsrc2 (sharp edges, colour ramps) plus seeded noise exercises the resampler; -fflags +bitexact keeps the bytes
# reproducible.
# testsrc2 only makes even sizes, so each picture is cropped from a larger one.
make() {  # make HEIGHT WIDTH FILTERS PIX_FMT OUTPUT [encoder options...]
  local height="$1" width="$2" filters="$3" pix_fmt="$4" output="$5"
  shift 5
  ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=320x240:rate=1" -frames:v 1 \
    -vf "noise=alls=24,format=rgb24,crop=${width}:${height}:7:5,${filters}" -pix_fmt "${pix_fmt}" -map_metadata -1 \
    -fflags +bitexact -flags +bitexact "$@" "${out}/${output}"
}

make 48 64 null rgb24 image_rgb_48x64.png
# Alpha ramps across the image: decoding must drop it, not blend it.
make 60 80 "format=rgba,geq=r='r(X,Y)':g='g(X,Y)':b='b(X,Y)':a='255-3*X'" rgba image_rgba_60x80.png
make 33 77 null gray image_grey_33x77.png
make 40 50 "format=yuva444p,geq=lum='lum(X,Y)':cb=128:cr=128:a='5*Y'" ya8 image_greyalpha_40x50.png
make 40 50 null pal8 image_palette_40x50.png
make 40 50 null monob image_mono_40x50.png
make 40 50 null rgb48be image_rgb16_40x50.png
# 16-bit grey spanning 0..~450: PIL's I;16 -> RGB clips at 255, so both sides of the clip appear.
make 40 50 "format=gray16le,geq=lum='8*X+Y'" gray16be image_grey16_40x50.png
make 100 300 null yuvj420p image_photo_100x300.jpg -q:v 3
make 40 50 null yuvj444p image_444_40x50.jpg -q:v 2

ls -l "${out}"/image_*
