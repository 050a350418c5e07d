#!/usr/bin/env bash
# Integration checks of veomni-preprocess: usage, ids, summaries, bad inputs, --skip-bad, --pack, shards, training.
# Usage: preprocess_text.sh CASE BIN_DIR SOURCE_DIR WORKDIR TOKENIZER_JSON
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4 tokenizer=$5
tool=$bin/veomni-preprocess
conversations=$src/tests/fixtures/tokenizer/conversations.jsonl
rm -rf "$work" && mkdir -p "$work" && cd "$work"
[ -f "$tokenizer" ] || { echo "FAIL: the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh" >&2; exit 1; }

text() { expect_exit "$1" text --tokenizer "$tokenizer" --log-level warn "${@:2}"; }

# bad_input FILE LINE_TEXT REASON: text fails with exit 2 naming FILE:LINE and the reason, and writes nothing.
bad_input() {
  text 2 --input "$1" --out o.h5
  expect_in err "$1:$2: $3"
  [ -z "$(ls o.h5* 2>/dev/null)" ] || fail "output written despite the error: $(ls o.h5*)"
}

# gen_records N: N plain-text records of 1 to 200 words each (deterministic).
gen_records() {
  awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++) { s = "record " i ":"
    for (k = 0; k < (i * 37) % 200 + 1; k++) s = s " word" (i * k) % 101; print "{\"text\": \"" s "\"}" } }'
}

case $case_name in
  help)
    expect_exit 0 --help
    expect_in out "tokenize"
    expect_in out "text"
    expect_exit 0 text --help
    expect_in out "--truncation"
    expect_in out "--pack"
    ;;
  version)
    expect_exit 0 --version
    grep -qE '^veomni-preprocess [0-9]+\.[0-9]+\.[0-9]+' out || fail "version line: $(cat out)"
    ;;
  usage_errors)
    expect_exit 2
    expect_exit 2 text --tokenizer "$tokenizer" --input "$conversations"  # no --out
    expect_exit 2 text --tokenizer "$tokenizer" --input "$conversations" --out o.h5 --truncation middle
    expect_exit 2 text --tokenizer missing.json --input "$conversations" --out o.h5
    text 2 --input "$conversations" --out o.h5 --pack
    expect_in err "--pack needs --max-seq-len"
    text 2 --input "$conversations" --out -
    expect_in err "seekable"
    ;;
  tokenize_known_ids)  # REFERENCE.md's ids, from stdin
    printf '%s\n' '{"text": "Hello world"}' '{"text": " Hello world"}' '{"text": "你好，世界！ 123"}' \
      '{"text": "<|im_start|>user\n"}' >in.jsonl
    "$tool" tokenize --tokenizer "$tokenizer" --log-level warn <in.jsonl >out 2>err || { cat err; fail "exit $?"; }
    printf '%s\n' '[9707,1879]' '[21927,1879]' '[108386,3837,99489,6313,220,16,17,18]' '[151644,872,198]' >want
    diff want out || fail "ids differ"
    echo '{"text": "ok"}' >a.jsonl && printf '\n{"text": 5}\n' >b.jsonl
    expect_exit 2 tokenize --tokenizer "$tokenizer" --input a.jsonl --input b.jsonl
    expect_in err "b.jsonl:2: expected an object with a string \"text\""
    ;;
  text_run)
    text 0 --input "$conversations" --out data/conv.h5
    expect_line "records: 4"
    expect_line "samples: 3"
    expect_line "rows: 3"
    expect_line "tokens: 43"
    expect_line "trained_tokens: 15"
    expect_line "truncated: 0"
    expect_line "dropped: 1 (too long 0, no assistant token 1)"
    expect_line "bad: 0"
    expect_line "tokenizer: tokenizer.json sha256:aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
    expect_line "file: data/conv.h5"
    [ -f data/conv.h5 ] || fail "no data/conv.h5"
    ;;
  pack_and_shards)
    text 0 --input "$conversations" --out packed.h5 --pack --max-seq-len 24
    expect_line "rows: 2"
    expect_line "padding: 5 (10.42%)"
    text 0 --input "$conversations" --out sharded.h5 --num-shards 3
    expect_line "file: sharded-00000-of-00003.h5"
    expect_line "file: sharded-00002-of-00003.h5"
    text 2 --input "$conversations" --out many.h5 --num-shards 4
    expect_in err "--num-shards 4 is more than the 3 samples"
    ;;
  progress_and_threads)  # progress lines on stderr at info level; one thread or two, the same bytes of ids
    line='{"text": "The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸。"}'
    for _ in $(seq 1 3000); do echo "$line"; done >many.jsonl
    "$tool" tokenize --tokenizer "$tokenizer" --input many.jsonl --threads 1 >one 2>err1 || fail "tokenize 1 thread"
    "$tool" tokenize --tokenizer "$tokenizer" --input many.jsonl --threads 2 >two 2>err2 || fail "tokenize 2 threads"
    cmp one two || fail "thread count changed the ids"
    [ "$(wc -l <one)" -eq 3000 ] || fail "expected 3000 lines"
    expect_in err2 "tokenized 3000 records into"
    ;;
  bad_json)
    printf '%s\n' '{"text": "fine"}' '{"text": "unfinished' >f.jsonl
    bad_input f.jsonl 2 "invalid JSON at column"
    ;;
  bad_missing_messages)
    printf '%s\n' '{"text": "fine"}' '{"conversation": []}' >f.jsonl
    bad_input f.jsonl 2 'the record has neither "messages" nor "text"'
    ;;
  bad_role)
    printf '%s\n' '{"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}' >f.jsonl
    bad_input f.jsonl 1 "message 1: unknown role 'robot'"
    ;;
  bad_content)
    printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "image"}]}]}' >f.jsonl
    bad_input f.jsonl 1 'message 0: "content" is array, expected a string'
    ;;
  bad_utf8)
    printf '{"text": "ok"}\n{"text": "caf\xe9"}\n' >f.jsonl
    bad_input f.jsonl 2 "not valid UTF-8: byte 0xe9 at column 14"
    ;;
  bad_empty)
    : >empty.jsonl
    text 2 --input empty.jsonl --out o.h5
    expect_in err "empty.jsonl: no records (the file is empty)"
    [ ! -e o.h5 ] || fail "o.h5 written"
    printf '[]' >empty.json
    text 2 --input empty.json --out o.h5
    expect_in err "empty.json: no records"
    ;;
  bad_array)
    printf '[{"text": "a"},\n {"messages": "no"}]' >f.json
    text 2 --input f.json --out o.h5
    expect_in err 'f.json: element 1: "messages" is string, expected an array'
    printf '[{"text": "a"},\n oops]' >g.json
    text 2 --input g.json --out o.h5
    expect_in err "g.json:2:"
    ;;
  skip_bad)
    {
      cat "$conversations"
      echo '{"text": "unfinished'
      echo '{"conversation": []}'
      echo '{"messages": [{"role": "robot", "content": "b"}]}'
      printf '{"text": "caf\xe9"}\n'
      echo '[1, 2]'
    } >mixed.jsonl
    text 0 --input mixed.jsonl --out o.h5 --skip-bad
    expect_line "records: 9"
    expect_line "samples: 3"
    expect_line "bad: 5"
    [ -f o.h5 ] || fail "no o.h5"
    "$tool" text --tokenizer "$tokenizer" --input mixed.jsonl --out o2.h5 --skip-bad >out 2>err
    [ "$(grep -c 'skipped mixed.jsonl:' err)" -eq 5 ] || { cat err; fail "expected 5 'skipped' warnings"; }
    printf '%s\n' '{"text": "unfinished' >allbad.jsonl
    text 2 --input allbad.jsonl --out o3.h5 --skip-bad
    expect_in err "no sample to write: 1 record(s) read, 1 bad"
    ;;
  trains)  # the real-vocabulary ids train a 151936-vocab toy model; the first loss is about ln(151936) = 11.93
    text 0 --input "$conversations" --out packed.h5 --pack --max-seq-len 24
    cd "$src"
    "$bin/veomni-train" configs/qwen3_toy.yaml --model.config_path configs/model_configs/qwen3_tiny_vocab151k \
      --data.train_path "$work/packed.h5" --data.max_seq_len 24 --train.global_batch_size 1 --train.max_steps 2 \
      --train.checkpoint.output_dir "$work/run" --train.checkpoint.save_steps 0 --train.device cpu --log-level warn \
      >"$work/out" 2>"$work/err" || { cat "$work/err"; fail "veomni-train failed"; }
    losses=$(tr -d ' \n' <"$work/run/log_dict.json" | sed -n 's/.*"loss":\[\([^]]*\)\].*/\1/p')
    echo "losses: $losses"
    awk -F, -v l="$losses" 'BEGIN { n = split(l, v, ","); exit !(n == 2 && v[1] > 11.5 && v[1] < 12.3 &&
      v[2] > 11.0 && v[2] < 12.3) }' || fail "losses $losses: expected 2 steps near ln(151936)"
    ;;
  out_is_input)  # --out naming an input (or the same file by another name) is refused, the input untouched
    cp "$conversations" in.jsonl && ln -s in.jsonl alias.h5
    text 2 --input in.jsonl --out in.jsonl --overwrite
    expect_in err "--out 'in.jsonl' is the input 'in.jsonl'"
    text 2 --input in.jsonl --out alias.h5 --overwrite
    expect_in err "is the input"
    cmp in.jsonl "$conversations" || fail "the input changed"
    ;;
  out_exists)  # an existing --out is replaced only with --overwrite
    text 0 --input "$conversations" --out o.h5
    text 2 --input "$conversations" --out o.h5
    expect_in err "--out 'o.h5' exists (hint: --overwrite replaces it)"
    text 0 --input "$conversations" --out o.h5 --overwrite
    text 0 --input "$conversations" --out s.h5 --num-shards 2
    text 2 --input "$conversations" --out s.h5 --num-shards 2
    expect_in err "s-00000-of-00002.h5' exists"
    ;;
  nul_byte)  # a raw NUL inside a line is an error with the line and column, in both modes
    printf '{"text": "fine"}\n{"text": "ok"}\0{"text": "hidden"}\n' >f.jsonl
    bad_input f.jsonl 2 "a NUL byte at column 15 is not allowed"
    expect_exit 2 tokenize --tokenizer "$tokenizer" --input f.jsonl
    expect_in err "f.jsonl:2: a NUL byte at column 15 is not allowed"
    ;;
  number_overflow)  # 1e999 is a bad record naming file, line and column; --skip-bad skips it
    printf '%s\n' '{"text": "fine"}' '{"text": "x", "n": 1e999}' >f.jsonl
    bad_input f.jsonl 2 "invalid JSON at column 20: number overflow"
    expect_exit 2 tokenize --tokenizer "$tokenizer" --input f.jsonl
    expect_in err "f.jsonl:2: invalid JSON at column 20: number overflow"
    text 0 --input f.jsonl --out o.h5 --skip-bad
    expect_line "bad: 1"
    expect_line "samples: 1"
    ;;
  endless_line)  # input without line breaks stops at the line-length limit, naming the line
    text 2 --input /dev/zero --out o.h5 --max-line-bytes 4096
    expect_in err "/dev/zero:1: the line is longer than 4096 bytes"
    expect_exit 2 tokenize --tokenizer "$tokenizer" --input /dev/zero
    expect_in err "/dev/zero:1: the line is longer than 67108864 bytes"
    head -c 5000 /dev/zero | tr '\0' 'x' >long.jsonl && echo >>long.jsonl
    text 2 --input long.jsonl --out o.h5 --max-line-bytes 4096
    expect_in err "long.jsonl:1: the line is longer than 4096 bytes (not JSONL? --max-line-bytes raises the limit)"
    ;;
  streaming_identical)  # tokens through the spool file (a 64-byte buffer) give the bytes the in-memory path gives
    gen_records 3000 >gen.jsonl
    for buffer in 64 1073741824; do
      mkdir "b$buffer"
      text 0 --input "$conversations" --out "b$buffer/p.h5" --pack --max-seq-len 24 --buffer-bytes "$buffer"
      text 0 --input "$conversations" --out "b$buffer/s.h5" --num-shards 3 --buffer-bytes "$buffer"
      text 0 --input gen.jsonl --out "b$buffer/g.h5" --pack --max-seq-len 64 --num-shards 3 --threads 2 \
        --buffer-bytes "$buffer"
    done
    [ "$(ls b64 | wc -l)" -eq 7 ] || fail "expected 7 files: $(ls b64)"
    for f in b64/*; do cmp "$f" "b1073741824/${f#b64/}" || fail "$f differs between the spooled and in-memory runs"; done
    [ -z "$(ls -A b64 | grep -v '\.h5$')" ] || fail "a temporary file was left behind: $(ls -A b64)"
    ;;
  streaming_memory)  # peak memory does not grow with the input's tokens: 8x the records, about the same RSS
    gen_records 4000 >small.jsonl
    gen_records 32000 >large.jsonl
    rss() { awk '/^peak_rss_mib:/ {print $2}' out; }
    text 0 --input small.jsonl --out small.h5 --threads 2 --pack --max-seq-len 512 --buffer-bytes 1048576
    small=$(rss)
    text 0 --input large.jsonl --out large.h5 --threads 2 --pack --max-seq-len 512 --buffer-bytes 1048576
    large=$(rss) tokens=$(awk '/^tokens:/ {print $2}' out)
    echo "peak RSS $small MiB for 4000 records, $large MiB for 32000 ($tokens tokens)"
    # Holding the tokens would add 5 bytes each (about 20 MiB here); the offsets add 8 bytes a sample.
    awk -v a="$small" -v b="$large" 'BEGIN { exit !(b - a < 6) }' ||
      fail "peak RSS grew from $small to $large MiB with the input"
    ;;
  range_messages)  # out-of-range flags say the bound in words, not as 300-digit doubles
    text 2 --input "$conversations" --out o.h5 --max-seq-len 0
    expect_in err "--max-seq-len: must be at least 1, got 0"
    text 2 --input "$conversations" --out o.h5 --num-shards 0
    expect_in err "--num-shards: must be at least 1, got 0"
    text 2 --input "$conversations" --out o.h5 --threads -1
    expect_in err "--threads: must be at least 0, got -1"
    ! grep -q 1797693 err || fail "the bound is printed as a double"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
