#!/usr/bin/env bash
# Integration checks of veomni-preprocess text --chat-template: chatml unchanged, Qwen3's own template through the
# node worker (counts of trained tokens), content parts, and the errors (template, node missing, flags).
# Usage: preprocess_chat_template.sh CASE BIN_DIR SOURCE_DIR WORKDIR TOKENIZER_JSON
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4 tokenizer=$5
tool=$bin/veomni-preprocess
conversations=$src/tests/fixtures/tokenizer/conversations.jsonl
rm -rf "$work" && mkdir -p "$work" && cd "$work"
[ -f "$tokenizer" ] || { echo "FAIL: the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh" >&2; exit 1; }

text() { expect_exit "$1" text --tokenizer "$tokenizer" --log-level warn "${@:2}"; }

case $case_name in
  chatml_identical)  # the default and --chat-template chatml write the same bytes as before
    text 0 --input "$conversations" --out default.h5
    text 0 --input "$conversations" --out chatml.h5 --chat-template chatml
    expect_line "trained_tokens: 15"
    cmp default.h5 chatml.h5 || fail "--chat-template chatml changed the dataset"
    ;;
  model_qwen3)  # Qwen3's template: the last turn gains "<think>\n\n</think>\n\n", trained with the answer
    text 0 --input "$conversations" --out model.h5 --chat-template model
    expect_line "samples: 3"
    # 4 thinking-block tokens + the answer + <|im_end|>: 4+8+1 and 4+2+1, and the plain text's 2+1
    expect_line "trained_tokens: 23"
    text 0 --input "$conversations" --out off.h5 --chat-template model --chat-template-kwargs '{"enable_thinking": false}'
    # the generation prompt now holds the empty thinking block: only the answers and <|im_end|> are trained
    expect_line "trained_tokens: 15"
    printf '%s\n' '{"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello world"}]}' \
      >sharegpt.jsonl
    text 0 --input sharegpt.jsonl --out sharegpt.h5 --chat-template model
    expect_line "trained_tokens: 7"
    ;;
  model_vl_parts)  # content lists through Qwen3-VL's template: placeholders are rendered, not trained
    printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "image", "image": "a.png"}, {"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": "Hello world"}]}' >vl.jsonl
    text 0 --input vl.jsonl --out vl.h5 --chat-template "$src/tests/fixtures/chat_templates/qwen3_vl_chat_template.json"
    expect_line "tokens: 16"  # <|im_start|> user \n <|vision_start|> <|image_pad|> <|vision_end|> Hi <|im_end|> \n ...
    expect_line "trained_tokens: 3"
    ;;
  errors)
    printf '%s\n' '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}' \
      '{"messages": [{"role": "user", "content": "boom"}, {"role": "assistant", "content": "b"}]}' >in.jsonl
    cp "$src/tests/fixtures/chat_templates/raises_on_boom.jinja" raises.jinja
    text 2 --input in.jsonl --out o.h5 --chat-template raises.jinja
    expect_in err "in.jsonl:2: the chat template failed: no boom"
    [ ! -e o.h5 ] || fail "output written despite the error"
    text 0 --input in.jsonl --out o.h5 --chat-template raises.jinja --skip-bad
    expect_line "bad: 1"
    expect_line "trained_tokens: 2"
    VEOMNI_NODE=/nonexistent/node text 2 --input in.jsonl --out p.h5 --chat-template model
    expect_in err "cannot run '/nonexistent/node'"
    expect_in err "scripts/setup.sh"
    text 2 --input in.jsonl --out p.h5 --chat-template-kwargs '{"enable_thinking": false}'
    expect_in err "--chat-template-kwargs needs --chat-template model"
    text 2 --input in.jsonl --out p.h5 --chat-template model --chat-template-kwargs '[1]'
    expect_in err "is not a JSON object"
    text 2 --input in.jsonl --out p.h5 --chat-template missing.jinja
    expect_in err "--chat-template missing.jinja: no such file"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
