#!/usr/bin/env bash
# Integration checks of veomni-preprocess preference: both record layouts, reference log-probs, every kind of bad
# record (exit 2 naming file and line, nothing written), --skip-bad, --max-seq-len, shards, --overwrite, line limits,
# the spool beyond --buffer-bytes, and the model's chat template (--chat-template).
# Usage: preprocess_preference.sh CASE BIN_DIR SOURCE_DIR WORKDIR TOKENIZER_JSON
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4 tokenizer=$5
tool=$bin/veomni-preprocess
rm -rf "$work" && mkdir -p "$work" && cd "$work"
[ -f "$tokenizer" ] || { echo "FAIL: the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh" >&2; exit 1; }

pref() { expect_exit "$1" preference --tokenizer "$tokenizer" --log-level warn "${@:2}"; }
value() { sed -n "s/^$1: //p" out; }

user='{"role": "user", "content": "What is 2 + 2?"}'
good='{"role": "assistant", "content": "4"}'
bad='{"role": "assistant", "content": "5, I think."}'
# The same pair in the TRL layouts: shared prompt turns, and an explicit prompt.
shared_pair() { printf '{"chosen": [%s, %s], "rejected": [%s, %s]%s}\n' "$user" "$good" "$user" "$bad" "${1:-}"; }
prompt_pair() { printf '{"prompt": [%s], "chosen": [%s], "rejected": [%s]%s}\n' "$user" "$good" "$bad" "${1:-}"; }

# bad_record REASON LINE...: the file of those lines fails naming line 2 (line 1 is good) and writes nothing.
bad_record() {
  local reason=$1
  shift
  { shared_pair; printf '%s\n' "$@"; } >f.jsonl
  pref 2 --input f.jsonl --out o.h5
  expect_in err "f.jsonl:2: $reason"
  [ -z "$(ls o.h5* 2>/dev/null)" ] || fail "output written despite the error: $(ls o.h5*)"
}

case $case_name in
  help)
    expect_exit 0 --help
    expect_in out "preference"
    expect_exit 0 preference --help
    for flag in --input --out --system --max-seq-len --num-shards --skip-bad --max-line-bytes --overwrite \
      --chat-template --chat-template-kwargs --buffer-bytes; do
      expect_in out "$flag"
    done
    ;;
  good_run)  # the layouts give the same pair; its tokens are those of the two conversations `text` renders
    { shared_pair; prompt_pair; shared_pair ', "prompt": "What is 2 + 2?", "score_chosen": 9.0'; } >pairs.jsonl
    pref 0 --input pairs.jsonl --out data/pairs.h5
    expect_line "records: 3"
    expect_line "pairs: 3"
    expect_line "bad: 0"
    expect_line "ref_logps: no"
    expect_line "file: data/pairs.h5"
    printf '{"messages": [%s, %s]}\n{"messages": [%s, %s]}\n' "$user" "$good" "$user" "$bad" >convs.jsonl
    tokens=$(value tokens) trained=$(value trained_tokens)
    expect_exit 0 text --tokenizer "$tokenizer" --log-level warn --input convs.jsonl --out convs.h5
    [ "$tokens" -eq $((3 * $(value tokens))) ] || fail "pair tokens $tokens, conversations $(value tokens) per copy"
    [ "$trained" -eq $((3 * $(value trained_tokens))) ] || fail "pair targets $trained, answers $(value trained_tokens)"
    ;;
  ref_logps)  # reference log-probs travel with every pair, or none
    {
      shared_pair ', "ref_chosen_logps": -3.5, "ref_rejected_logps": -9'
      prompt_pair ', "ref_chosen_logps": -1, "ref_rejected_logps": -2.25'
    } >r.jsonl
    pref 0 --input r.jsonl --out r.h5
    expect_line "pairs: 2"
    expect_line "ref_logps: yes"
    bad_record 'the record has "ref_chosen_logps" but no "ref_rejected_logps"' \
      "$(shared_pair ', "ref_chosen_logps": -3.5' | tr -d '\n')"
    bad_record '"ref_rejected_logps" is string, expected a number' \
      "$(shared_pair ', "ref_chosen_logps": -3.5, "ref_rejected_logps": "low"' | tr -d '\n')"
    bad_record 'the record has "ref_chosen_logps" and "ref_rejected_logps" but earlier pairs have none' \
      "$(shared_pair ', "ref_chosen_logps": -1, "ref_rejected_logps": -2' | tr -d '\n')"
    ;;
  bad_missing_rejected)
    bad_record 'the record has "chosen" but no "rejected": a preference pair needs both' \
      "{\"chosen\": [$user, $good]}"
    bad_record 'the record has neither "chosen" nor "rejected"' "{\"messages\": [$user, $good]}"
    ;;
  bad_different_prompts)
    bad_record '"chosen" and "rejected" have different prompts: their first messages differ' \
      "{\"chosen\": [$user, $good], \"rejected\": [{\"role\": \"user\", \"content\": \"What is 3 + 3?\"}, $bad]}"
    system='{"role": "system", "content": "Be brief."}'
    other='{"role": "user", "content": "3 + 3?"}'
    bad_record '"chosen" and "rejected" have different prompts: they differ from message 1 on, and "chosen"' \
      "{\"chosen\": [$system, $user, $good], \"rejected\": [$system, $other, $bad]}"
    bad_record '"chosen" message 0 is a user message; the answer after the prompt holds assistant messages only' \
      "{\"prompt\": [$user], \"chosen\": [$user, $good], \"rejected\": [$bad]}"
    ;;
  bad_empty_answer)
    bad_record 'the chosen answer is empty' \
      "{\"prompt\": [$user], \"chosen\": [{\"role\": \"assistant\", \"content\": \"\"}], \"rejected\": [$bad]}"
    bad_record '"rejected" has no answer: all its 1 messages are the prompt it shares with "chosen"' \
      "{\"chosen\": [$user, $good], \"rejected\": [$user]}"
    bad_record '"rejected" is empty' "{\"prompt\": [$user], \"chosen\": [$good], \"rejected\": []}"
    ;;
  bad_json)
    bad_record 'invalid JSON at column' '{"chosen": ['
    robot='{"role": "robot", "content": "x"}'
    bad_record '"chosen" message 1: unknown role' "{\"chosen\": [$user, $robot], \"rejected\": [$user, $bad]}"
    ;;
  skip_bad)  # bad records are counted and skipped; an all-bad input still writes nothing
    {
      shared_pair
      echo "{\"chosen\": [$user, $good]}"
      echo "{\"chosen\": [$user, $good], \"rejected\": [{\"role\": \"user\", \"content\": \"other\"}, $bad]}"
      echo "{\"prompt\": [$user], \"chosen\": [{\"role\": \"assistant\", \"content\": \"\"}], \"rejected\": [$bad]}"
      echo '{"chosen": ['
      prompt_pair
    } >mixed.jsonl
    pref 0 --input mixed.jsonl --out o.h5 --skip-bad
    expect_line "records: 6"
    expect_line "pairs: 2"
    expect_line "bad: 4"
    [ "$(grep -c 'skipped mixed.jsonl:' err)" -eq 4 ] || { cat err; fail "expected 4 'skipped' warnings"; }
    echo "{\"chosen\": [$user, $good]}" >allbad.jsonl
    pref 2 --input allbad.jsonl --out none.h5 --skip-bad
    expect_in err "no pair to write: 1 record(s) read, 1 bad"
    [ -z "$(ls none.h5* 2>/dev/null)" ] || fail "output written: $(ls none.h5*)"
    ;;
  too_long)  # --max-seq-len bounds the pair (chosen + rejected); longer pairs are dropped and counted
    { shared_pair; printf '{"prompt": [%s], "chosen": [%s], "rejected": [{"role": "assistant", "content": "%s"}]}\n' \
      "$user" "$good" "$(printf 'word %.0s' $(seq 1 200))"; } >p.jsonl
    pref 0 --input p.jsonl --out o.h5 --max-seq-len 64
    expect_line "pairs: 1"
    expect_line "dropped: 1 (too long)"
    pref 2 --input p.jsonl --out o2.h5 --max-seq-len 8
    expect_in err "no pair to write: 2 record(s) read, 0 bad, 2 too long"
    ;;
  shards_and_overwrite)
    for _ in 1 2 3; do shared_pair; done >p.jsonl
    pref 0 --input p.jsonl --out s.h5 --num-shards 2
    expect_line "file: s-00000-of-00002.h5"
    expect_line "file: s-00001-of-00002.h5"
    pref 2 --input p.jsonl --out s.h5 --num-shards 2
    expect_in err "s-00000-of-00002.h5' exists (hint: --overwrite replaces it)"
    pref 0 --input p.jsonl --out s.h5 --num-shards 2 --overwrite
    pref 2 --input p.jsonl --out p.jsonl --overwrite
    expect_in err "is the input"
    ;;
  endless_line)
    pref 2 --input /dev/zero --out o.h5 --max-line-bytes 4096
    expect_in err "/dev/zero:1: the line is longer than 4096 bytes"
    [ -z "$(ls o.h5* 2>/dev/null)" ] || fail "output written: $(ls o.h5*)"
    ;;
  streaming)  # pairs beyond --buffer-bytes wait in a spool file: the same dataset, reference log-probs included
    for _ in $(seq 40); do shared_pair; prompt_pair; done >p.jsonl
    pref 0 --input p.jsonl --out memory.h5
    pref 0 --input p.jsonl --out spooled.h5 --buffer-bytes 64
    cmp memory.h5 spooled.h5 || fail "--buffer-bytes 64 changed the dataset"
    for _ in $(seq 40); do shared_pair ', "ref_chosen_logps": -3.5, "ref_rejected_logps": -9'; done >r.jsonl
    pref 0 --input r.jsonl --out r_memory.h5
    pref 0 --input r.jsonl --out r_spooled.h5 --buffer-bytes 64 --num-shards 3
    pref 0 --input r.jsonl --out r_memory3.h5 --num-shards 3
    for k in 0 1 2; do
      cmp "r_memory3-0000$k-of-00003.h5" "r_spooled-0000$k-of-00003.h5" || fail "shard $k differs with --buffer-bytes 64"
    done
    ;;
  template_chatml_file)  # a Jinja ChatML template writes the built-in template's dataset; prompt turns stay untrained
    user2='{"role": "user", "content": "And 3 + 3?"}'
    {
      shared_pair
      prompt_pair
      printf '{"prompt": [%s, %s, %s], "chosen": [%s], "rejected": [%s]}\n' "$user" "$good" "$user2" "$good" "$bad"
      printf '{"chosen": [%s, %s, %s, %s], "rejected": [%s, %s, %s, %s]}\n' "$user" "$good" "$user2" "$good" \
        "$user" "$good" "$user2" "$bad"
    } >p.jsonl
    cp "$src/tests/fixtures/chat_templates/chatml.jinja" chatml.jinja
    pref 0 --input p.jsonl --out builtin.h5 --system "Be brief."
    builtin_trained=$(value trained_tokens)
    pref 0 --input p.jsonl --out file.h5 --system "Be brief." --chat-template chatml.jinja
    [ "$(value trained_tokens)" -eq "$builtin_trained" ] || fail "trained tokens $(value trained_tokens), built-in $builtin_trained"
    diff <(contents builtin.h5) <(contents file.h5) ||
      fail "the ChatML template file wrote other samples than the built-in template"
    ;;
  template_model)  # Qwen3's own template: a pair holds the tokens and targets of its two conversations rendered alone
    { shared_pair; prompt_pair; } >p.jsonl
    pref 0 --input p.jsonl --out model.h5 --chat-template model
    expect_line "pairs: 2"
    tokens=$(value tokens) trained=$(value trained_tokens)
    printf '{"messages": [%s, %s]}\n{"messages": [%s, %s]}\n' "$user" "$good" "$user" "$bad" >convs.jsonl
    expect_exit 0 text --tokenizer "$tokenizer" --log-level warn --input convs.jsonl --out convs.h5 --chat-template model
    [ "$tokens" -eq $((2 * $(value tokens))) ] || fail "pair tokens $tokens, conversations $(value tokens) per copy"
    [ "$trained" -eq $((2 * $(value trained_tokens))) ] || fail "pair targets $trained, answers $(value trained_tokens)"
    pref 0 --input p.jsonl --out off.h5 --chat-template model --chat-template-kwargs '{"enable_thinking": false}'
    # without thinking the empty thinking block belongs to the generation prompt: 4 fewer targets a conversation
    [ "$(value trained_tokens)" -eq $((trained - 16)) ] || fail "enable_thinking false: $(value trained_tokens) targets"
    ;;
  template_errors)
    { shared_pair; printf '{"chosen": [{"role": "user", "content": "boom"}, %s], "rejected": [{"role": "user", "content": "boom"}, %s]}\n' "$good" "$bad"; } >in.jsonl
    cp "$src/tests/fixtures/chat_templates/raises_on_boom.jinja" raises.jinja
    pref 2 --input in.jsonl --out o.h5 --chat-template raises.jinja
    expect_in err "in.jsonl:2: the chat template failed: no boom"
    [ ! -e o.h5 ] || fail "output written despite the error"
    pref 0 --input in.jsonl --out o.h5 --chat-template raises.jinja --skip-bad
    expect_line "bad: 1"
    expect_line "pairs: 1"
    pref 2 --input in.jsonl --out p.h5 --chat-template raises.jinja --skip-bad --max-seq-len 4
    expect_in err "no pair to write"
    pref 2 --input in.jsonl --out p.h5 --chat-template-kwargs '{"enable_thinking": false}'
    expect_in err "--chat-template-kwargs needs --chat-template model"
    { printf '{"chosen": [%s], "rejected": [%s, %s]}\n' "$user" "$user" "$bad"; } >layout.jsonl
    pref 2 --input layout.jsonl --out p.h5 --chat-template raises.jinja
    expect_in err "layout.jsonl:1: \"chosen\" has no answer"
    if "$tool" preference --help | grep -q -- --model-type; then
      pref 2 --input in.jsonl --out p.h5 --chat-template raises.jinja --model-type qwen3_vl
      expect_in err "multimodal preference pairs use our ChatML only"
    fi
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
