#!/usr/bin/env bash
# Integration checks of veomni-dummy-data: usage, exit codes, a real run's summary and files.
# Usage: dummy_data.sh CASE TOOL WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 tool=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"

# The summary line (whitespace squeezed) must be present exactly.
# Lines compared with runs of spaces squeezed (the summary table aligns its columns).
expect_line() { tr -s ' ' <out | grep -qxF -- "$1" || { cat out >&2; fail "missing line: $1"; }; }

case $case_name in
  help)
    expect_exit 0 --help
    expect_in out "--seq-len"
    expect_in out "qwen3omni"
    ;;
  version)
    expect_exit 0 --version
    grep -qE '^veomni-dummy-data [0-9]+\.[0-9]+\.[0-9]+' out || fail "version line: $(cat out)"
    ;;
  bad_flag)
    expect_exit 2 --type text --seq-len 8 --num-samples 1 --out t.h5 --bogus
    expect_in err "--bogus"
    ;;
  bad_type)
    expect_exit 2 --type qwen9 --seq-len 8 --num-samples 1 --out t.h5
    expect_in err "qwen9"
    ;;
  bad_seq_len)
    expect_exit 2 --type qwen3omni --seq-len 100 --num-samples 1 --out t.h5
    expect_in err "too short"
    [ ! -e t.h5 ] || fail "t.h5 written despite the error"
    ;;
  huge_seq_len)  # sizes beyond any sample are refused before anything is allocated
    expect_exit 2 --type text --seq-len 2305843009213693952 --num-samples 1 --out t.h5
    expect_in err "--seq-len: must be at most 16777216, got 2305843009213693952"
    expect_exit 2 --type text --seq-len 99999999999999999999 --num-samples 1 --out t.h5
    expect_in err "--seq-len: 99999999999999999999 is too large"
    [ ! -e t.h5 ] || fail "t.h5 written despite the error"
    ;;
  range_messages)  # out-of-range flags say the bound in words
    expect_exit 2 --type text --seq-len 0 --num-samples 1 --out t.h5
    expect_in err "--seq-len: must be at least 1, got 0"
    expect_exit 2 --type text --seq-len 8 --num-samples 1 --num-shards 0 --out t.h5
    expect_in err "--num-shards: must be at least 1, got 0"
    expect_exit 2 --type text --seq-len 8 --num-samples -1 --out t.h5
    expect_in err "--num-samples: must be at least 0, got -1"
    ! grep -q 1797693 err || fail "the bound is printed as a double"
    ;;
  stdout_refused)
    expect_exit 2 --type text --seq-len 8 --num-samples 1 --out -
    expect_in err "seekable"
    ;;
  text_run)
    expect_exit 0 --type text --seq-len 16 --num-samples 4 --seed 1 --out data/t.h5
    expect_line "type: text (kind text)"
    expect_line "samples: 4"
    expect_line "tokens: 64"
    expect_line "file: data/t.h5"
    expect_line "key: attention_mask i64 [16]"
    expect_line "key: input_ids i64 [16]"
    expect_line "key: labels i64 [16]"
    expect_line "key: position_ids i64 [16]"
    [ "$(grep -c '^key:' out)" -eq 4 ] || fail "expected 4 keys"
    bytes=$(sed -n 's/^bytes: //p' out)
    [ "$bytes" -eq "$(stat -c %s data/t.h5)" ] || fail "bytes $bytes differ from the file size"
    ;;
  qwen3omni_run)
    expect_exit 0 --type qwen3omni --seq-len 2048 --num-samples 2 --out omni.h5
    expect_line "tokens_per_sample: 1952 (text 1800, image 8, audio 104, video 40)"
    expect_line "tokens: 3904"
    expect_line "key: input_features f32 [800, 128]"
    expect_line "key: audio_feature_lengths i64 [2]"
    expect_line "key: position_ids f32 [3, 1952]"
    expect_line "key: pixel_values f32 [32, 1536]"
    expect_line "key: pixel_values_videos f32 [160, 1536]"
    expect_line "key: audio_mask bool [1952]"
    ;;
  shards_run)
    expect_exit 0 --type qwen2vl --seq-len 64 --num-samples 5 --num-shards 2 --out vl.h5
    expect_line "file: vl-00000-of-00002.h5"
    expect_line "file: vl-00001-of-00002.h5"
    expect_line "key: pixel_values f32 [32, 1176]"
    [ -f vl-00000-of-00002.h5 ] && [ -f vl-00001-of-00002.h5 ] || fail "shard files missing"
    [ -z "$(ls | grep -F .tmp-)" ] || fail "temporary files left: $(ls)"
    ;;
  deterministic)
    expect_exit 0 --type qwen3vl --seq-len 64 --num-samples 3 --seed 5 --out a.h5
    expect_exit 0 --type qwen3vl --seq-len 64 --num-samples 3 --seed 5 --out b.h5
    expect_exit 0 --type qwen3vl --seq-len 64 --num-samples 3 --seed 6 --out c.h5
    cmp -s a.h5 b.h5 || fail "same seed, different files"
    ! cmp -s a.h5 c.h5 || fail "different seeds, same file"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
