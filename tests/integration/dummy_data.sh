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
    expect_in out "rollout"
    expect_in out "--ref-logps"
    expect_in out "--media"
    expect_in out "--overwrite"
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
  preference_run)  # pairs of --seq-len tokens, chosen then rejected; reference log-probs on request
    expect_exit 0 --type preference --seq-len 16 --num-samples 3 --seed 2 --out p.h5
    expect_line "type: preference (kind text)"
    expect_line "pair: chosen 8, rejected 8, prompt 4 each"
    expect_line "tokens: 48"
    expect_line "key: chosen_length i64 [1]"
    expect_line "key: position_ids i64 [16]"
    [ "$(grep -c '^key:' out)" -eq 5 ] || fail "expected 5 keys"
    expect_exit 0 --type preference --seq-len 16 --num-samples 3 --seed 2 --ref-logps --out r.h5
    expect_line "key: ref_chosen_logps f32 [1]"
    expect_line "key: ref_rejected_logps f32 [1]"
    expect_exit 0 --type preference --seq-len 16 --num-samples 3 --seed 2 --out p2.h5
    cmp -s p.h5 p2.h5 || fail "same seed, different files"
    expect_exit 2 --type preference --seq-len 3 --num-samples 1 --out short.h5
    expect_in err "--seq-len 3 is too short for preference"
    expect_exit 2 --type text --seq-len 8 --num-samples 1 --ref-logps --out t.h5
    expect_in err "--ref-logps needs --type preference"
    ;;
  preference_media_run)  # multimodal pairs: the prompt's media in both halves, the family's keys and kind
    expect_exit 0 --type preference --media qwen3vl --seq-len 120 --num-samples 3 --seed 2 --out v.h5
    expect_line "type: preference (kind vl)"
    expect_line "pair: chosen 60, rejected 60, prompt 54 each"
    expect_line "pair media: qwen3vl in the prompt of both halves"
    expect_line "tokens_per_sample: 120 (text 24, image 16, audio 0, video 80)"
    expect_line "key: position_ids i64 [3, 120]"
    expect_line "key: pixel_values f32 [64, 1536]"
    expect_line "key: image_grid_thw i64 [4, 3]"
    expect_line "key: video_grid_thw i64 [2, 3]"
    [ "$(grep -c '^key:' out)" -eq 11 ] || fail "expected 11 keys"
    expect_exit 0 --type preference --media qwen3omni --seq-len 320 --num-samples 2 --seed 2 --ref-logps --out o.h5
    expect_line "type: preference (kind omni)"
    expect_line "key: position_ids f32 [3, 320]"
    expect_line "key: audio_feature_lengths i64 [4]"
    expect_line "key: input_features f32 [1600, 128]"
    expect_line "key: ref_chosen_logps f32 [1]"
    expect_exit 0 --type preference --media qwen3vl --seq-len 120 --num-samples 3 --seed 2 --out v2.h5
    expect_exit 0 --type preference --media qwen3vl --seq-len 120 --num-samples 3 --seed 3 --out v3.h5
    cmp -s v.h5 v2.h5 || fail "same seed, different files"
    ! cmp -s v.h5 v3.h5 || fail "different seeds, same file"
    expect_exit 2 --type preference --media qwen3vl --seq-len 99 --num-samples 1 --out short.h5
    expect_in err "--seq-len 99 is too short for qwen3vl preference pairs"
    expect_exit 2 --type text --media qwen3vl --seq-len 64 --num-samples 1 --out t.h5
    expect_in err "--media needs --type preference"
    ;;
  rollout_run)  # rollouts carry the five per-token f32 keys
    expect_exit 0 --type rollout --seq-len 12 --num-samples 2 --seed 4 --out r.h5
    expect_line "type: rollout (kind text)"
    expect_line "rollout: prompt 6, response 6"
    for key in returns old_values advantages old_log_probs ref_log_probs; do expect_line "key: $key f32 [12]"; done
    expect_exit 0 --type rollout --seq-len 12 --num-samples 2 --seed 4 --out r2.h5
    expect_exit 0 --type rollout --seq-len 12 --num-samples 2 --seed 5 --out r3.h5
    cmp -s r.h5 r2.h5 || fail "same seed, different files"
    ! cmp -s r.h5 r3.h5 || fail "different seeds, same file"
    ;;
  out_exists)  # an existing --out is replaced only with --overwrite
    expect_exit 0 --type text --seq-len 8 --num-samples 2 --out t.h5
    cp t.h5 before.h5
    expect_exit 2 --type text --seq-len 8 --num-samples 2 --seed 9 --out t.h5
    expect_in err "--out 't.h5' exists (hint: --overwrite replaces it)"
    cmp -s t.h5 before.h5 || fail "t.h5 changed"
    expect_exit 0 --type text --seq-len 8 --num-samples 2 --seed 9 --out t.h5 --overwrite
    ! cmp -s t.h5 before.h5 || fail "t.h5 not replaced"
    expect_exit 0 --type text --seq-len 8 --num-samples 2 --num-shards 2 --out s.h5
    expect_exit 2 --type text --seq-len 8 --num-samples 2 --num-shards 2 --out s.h5
    expect_in err "s-00000-of-00002.h5' exists"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
