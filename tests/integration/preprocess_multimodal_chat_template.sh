#!/usr/bin/env bash
# Integration checks of veomni-preprocess multimodal --chat-template: chatml unchanged, Qwen3-VL's own template
# (from the tokenizer folder or a file) writing the same dataset as our ChatML where both render alike, and a template
# whose media placeholders do not match the record's media.
# Usage: preprocess_multimodal_chat_template.sh CASE BIN_DIR SOURCE_DIR WORKDIR TOKENIZER_JSON
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tool_test_lib.sh"
case_name=$1 bin=$2 src=$3 work=$4 tokenizer=$5
tool=$bin/veomni-preprocess
inputs=$src/tests/fixtures/media/inputs
vl_template=$src/tests/fixtures/chat_templates/qwen3_vl_chat_template.json
rm -rf "$work" && mkdir -p "$work" && cd "$work"
[ -f "$tokenizer" ] || { echo "FAIL: the Qwen3 tokenizer is missing at $tokenizer: run scripts/setup.sh" >&2; exit 1; }

mm() { expect_exit "$1" multimodal --model-type qwen3_vl --media-root "$inputs" --log-level warn "${@:2}"; }
image_record() {  # a user turn of an image and a question, the assistant's answer (transformers' vl_image_text)
  printf '{"messages": [{"role": "user", "content": [{"type": "image", "image": "%s"}, {"type": "text", "text": "%s"}]}, {"role": "assistant", "content": "A cat."}]}\n' "$1" "$2"
}

case $case_name in
  chatml_identical)  # the default and --chat-template chatml write the same bytes
    { image_record image_rgb_48x64.png "What is it?"; image_record image_photo_100x300.jpg "And this?"; } >in.jsonl
    mm 0 --tokenizer "$tokenizer" --input in.jsonl --out default.h5
    mm 0 --tokenizer "$tokenizer" --input in.jsonl --out chatml.h5 --chat-template chatml
    expect_line "images: 2"
    cmp default.h5 chatml.h5 || fail "--chat-template chatml changed the dataset"
    ;;
  model_identical)  # Qwen3-VL's template renders this exchange as our ChatML does: the same dataset, byte for byte
    mkdir tok && cp "$tokenizer" "$(dirname "$tokenizer")/tokenizer_config.json" tok/
    cp "$vl_template" tok/chat_template.json  # found before tokenizer_config.json's (Qwen3's) template
    image_record image_rgb_48x64.png "What is it?" >in.jsonl
    mm 0 --tokenizer tok/tokenizer.json --input in.jsonl --out chatml.h5
    expect_line "tokens: 89"  # 19 text tokens and the image's 70
    expect_line "trained_tokens: 4"
    mm 0 --tokenizer tok/tokenizer.json --input in.jsonl --out model.h5 --chat-template model
    # the same samples; the headers differ in the template they record
    diff <(contents chatml.h5) <(contents model.h5) ||
      fail "--chat-template model (Qwen3-VL's) differs from chatml on a conversation both render alike"
    mm 0 --tokenizer tok/tokenizer.json --input in.jsonl --out file.h5 --chat-template "$vl_template"
    # the same template read from another file: the same bytes, its recorded identity included
    cmp model.h5 file.h5 || fail "--chat-template FILE differs from --chat-template model with the same template"
    # A conversation they render differently: the tool turn is a user turn with <tool_response> in Qwen3-VL's
    printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "image", "image": "image_rgb_48x64.png"}]}, {"role": "assistant", "content": "Wait."}, {"role": "tool", "content": "dry"}, {"role": "assistant", "content": "No rain."}]}' >tool.jsonl
    mm 0 --tokenizer tok/tokenizer.json --input tool.jsonl --out tool_chatml.h5
    mm 0 --tokenizer tok/tokenizer.json --input tool.jsonl --out tool_model.h5 --chat-template model
    expect_line "trained_tokens: 7"  # "Wait." <|im_end|> and "No rain." <|im_end|>
    ! cmp -s tool_chatml.h5 tool_model.h5 || fail "the tool turn rendered alike by both templates"
    ;;
  mismatch)  # a template that drops the media: an input error naming the record's line, no output
    expect_exit 0 multimodal --help
    expect_in out "--chat-template"
    cat >text_only.jinja <<'TEMPLATE'
{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}
TEMPLATE
    { printf '%s\n' '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}'
      image_record image_rgb_48x64.png "What is it?"; } >in.jsonl
    mm 2 --tokenizer "$tokenizer" --input in.jsonl --out o.h5 --chat-template text_only.jinja
    expect_in err "in.jsonl:2: the chat template renders 0 media placeholder(s) (<|image_pad|>, <|video_pad|>, <|audio_pad|>) for the record's 1 media part(s)"
    [ ! -e o.h5 ] || fail "output written despite the error"
    mm 0 --tokenizer "$tokenizer" --input in.jsonl --out o.h5 --chat-template text_only.jinja --skip-bad
    expect_line "bad: 1"
    expect_line "samples: 1"
    mm 2 --tokenizer "$tokenizer" --input in.jsonl --out p.h5 --chat-template-kwargs '{"enable_thinking": false}'
    expect_in err "--chat-template-kwargs needs --chat-template model"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: preprocess_multimodal_chat_template $case_name"
