#!/usr/bin/env bash
# veomni-generate end to end on the CPU: token-id prompts on the HF toy (batching, sampling seeds, stop tokens),
# chat prompts through the Qwen3 tokenizer on a 151,936-vocabulary toy trained one step (from its checkpoint and from
# its merged HF directory, with ChatML and with the model's template), bad inputs exit 2 and write nothing (media
# parts included: on a text model, a missing or corrupt image, resolved against the prompt file's directory).
# usage: generate.sh BIN_DIR SOURCE_DIR CASE   (CASE: ids | text | bad_inputs | media_bad_inputs)
set -euo pipefail
bin=$1 src=$2 case=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-generate-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
tool=$bin/veomni-generate
source "$src/tests/integration/tool_test_lib.sh"
cd "$work"
toy=$src/tests/fixtures/hf/qwen3_toy/model
# field FILE LINE KEY: the JSON value of KEY on line LINE (1-based) of a JSONL file.
field() { python3 -c "import json,sys; print(json.dumps(json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])-1])[sys.argv[3]]))" "$@"; }
lines() { wc -l <"$1" | tr -d ' '; }

case "$case" in
ids)
  printf '%s\n' '{"input_ids": [5, 17, 300, 2, 9]}' '' '{"input_ids": [44]}' '{"input_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9]}' \
    >prompts.jsonl
  expect_exit 0 --model "$toy" --prompts prompts.jsonl --out greedy.jsonl --max-new-tokens 6
  [ "$(lines greedy.jsonl)" -eq 3 ] || fail "expected 3 output lines"
  for i in 1 2 3; do
    [ "$(field greedy.jsonl $i index)" -eq $((i - 1)) ] || fail "line $i is not index $((i - 1))"
    [ "$(field greedy.jsonl $i finish_reason)" = '"length"' ] || fail "line $i did not stop at the length"
    python3 -c "import json,sys; ids=json.loads(sys.argv[1]); sys.exit(len(ids) != 6)" "$(field greedy.jsonl $i token_ids)" ||
      fail "line $i does not hold 6 tokens"
  done
  [ "$(field greedy.jsonl 3 prompt_tokens)" -eq 9 ] || fail "prompt_tokens of line 3"
  grep -q '"text"' greedy.jsonl && fail "text written without a tokenizer"
  expect_in err "done: 3 prompts, 15 prompt tokens, 18 new tokens"
  # One prompt per batch, and stdout: the same tokens.
  expect_exit 0 --model "$toy" --prompts prompts.jsonl --max-new-tokens 6 --batch-size 1
  for i in 1 2 3; do [ "$(field out $i token_ids)" = "$(field greedy.jsonl $i token_ids)" ] || fail "batch size 1 line $i"; done
  # Several greedy steps between reads to the host: the same tokens (4 steps, then the last one alone).
  expect_exit 0 --model "$toy" --prompts prompts.jsonl --out sync4.jsonl --max-new-tokens 6 --steps-per-sync 4
  for i in 1 2 3; do [ "$(field sync4.jsonl $i token_ids)" = "$(field greedy.jsonl $i token_ids)" ] || fail "steps per sync 4 line $i"; done
  # Sampling: the same seed draws the same tokens whatever the batching; another seed others.
  sample=(--model "$toy" --prompts prompts.jsonl --max-new-tokens 8 --temperature 1.5 --top-k 50 --top-p 0.95)
  expect_exit 0 "${sample[@]}" --seed 3 --out s3.jsonl
  expect_exit 0 "${sample[@]}" --seed 3 --out s3b.jsonl --batch-size 2
  expect_exit 0 "${sample[@]}" --seed 4 --out s4.jsonl
  for i in 1 2 3; do [ "$(field s3.jsonl $i token_ids)" = "$(field s3b.jsonl $i token_ids)" ] || fail "seed 3 line $i"; done
  cmp -s <(field s3.jsonl 1 token_ids; field s3.jsonl 3 token_ids) <(field s4.jsonl 1 token_ids; field s4.jsonl 3 token_ids) &&
    fail "seeds 3 and 4 drew the same tokens"
  # The first greedy token of prompt 0 as a stop token ends that prompt at once.
  stop=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])[0])" "$(field greedy.jsonl 1 token_ids)")
  expect_exit 0 --model "$toy" --prompts prompts.jsonl --out stop.jsonl --max-new-tokens 6 --stop-token-ids "$stop"
  [ "$(field stop.jsonl 1 finish_reason)" = '"stop"' ] || fail "the stop token did not stop"
  [ "$(field stop.jsonl 1 token_ids)" = "[$stop]" ] || fail "stop tokens: $(field stop.jsonl 1 token_ids)"
  ;;
text)
  tokenizer=$src/.cache/tokenizers/qwen3
  if [ ! -x "$bin/veomni-preprocess" ] || [ ! -f "$tokenizer/tokenizer.json" ]; then
    echo "skipped: no tokenizer library in this build or no $tokenizer/tokenizer.json"
    exit 77
  fi
  "$bin/veomni-dummy-data" --type text --seq-len 24 --num-samples 4 --seed 5 --out data.h5 >/dev/null
  (cd "$src" && "$bin/veomni-train" configs/qwen3_toy.yaml --model.config_path configs/model_configs/qwen3_tiny_vocab151k \
    --model.tokenizer_path "$tokenizer" --data.train_path "$work/data.h5" --data.max_seq_len 24 \
    --train.global_batch_size 1 --train.max_steps 1 --train.checkpoint.output_dir "$work/run" \
    --train.device cpu --log-level warn) >train.log 2>&1 || { cat train.log; fail "veomni-train failed"; }
  "$bin/veomni-ckpt-merge" run --out hf --log-level warn >/dev/null || fail "veomni-ckpt-merge failed"
  printf '%s\n' '{"messages": [{"role": "user", "content": "Hello, who are you?"}]}' \
    '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]}' \
    '{"input_ids": [9707, 11]}' >chat.jsonl
  expect_exit 0 --model hf --prompts chat.jsonl --out hf.jsonl --max-new-tokens 5
  expect_exit 0 --model run --prompts chat.jsonl --out ckpt.jsonl --max-new-tokens 5
  [ "$(lines hf.jsonl)" -eq 3 ] || fail "expected 3 lines"
  for i in 1 2 3; do
    [ "$(field hf.jsonl $i token_ids)" = "$(field ckpt.jsonl $i token_ids)" ] || fail "checkpoint and HF differ on $i"
    field hf.jsonl $i text >/dev/null || fail "line $i has no text"
  done
  # "<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\n": 14 tokens.
  [ "$(field hf.jsonl 1 prompt_tokens)" -eq 14 ] || fail "ChatML prompt of line 1: $(field hf.jsonl 1 prompt_tokens) tokens"
  # The model's own template (Qwen3's, run by node) opens the assistant's turn the same way for these conversations.
  if command -v node >/dev/null && [ -d "$src/.cache/node_modules/@huggingface/jinja" ]; then
    expect_exit 0 --model hf --prompts chat.jsonl --out model.jsonl --max-new-tokens 5 --chat-template model
    for i in 1 2 3; do
      [ "$(field model.jsonl $i prompt_tokens)" = "$(field hf.jsonl $i prompt_tokens)" ] || fail "model template line $i"
    done
  fi
  ;;
media_bad_inputs)
  # A media part on a text-only model needs neither the tokenizer nor the media library.
  mkdir p
  printf '%s\n' '{"input_ids": [1, 2]}' \
    '{"messages": [{"role": "user", "content": [{"type": "image", "image": "cat.png"}, {"type": "text", "text": "?"}]}]}' \
    >p/text_model.jsonl
  expect_exit 2 --model "$toy" --prompts p/text_model.jsonl --out o.jsonl
  expect_in err "p/text_model.jsonl:2: the conversation has image, video or audio parts"
  expect_in err "takes text only"
  tokenizer=$src/.cache/tokenizers/qwen3
  if ! "$bin/veomni-preprocess" multimodal --help >/dev/null 2>&1 || [ ! -f "$tokenizer/tokenizer.json" ]; then
    echo "skipped the media-file cases: no media library in this build or no $tokenizer/tokenizer.json"
    [ ! -e o.jsonl ] || fail "an output file was written"
    exit 77
  fi
  # The Qwen3-VL toy with the Qwen3 tokenizer: its media are read before any id is checked against its vocabulary.
  cp -r "$src/tests/fixtures/generate/qwen3_vl_toy/model" vl
  cp "$tokenizer/tokenizer.json" vl/
  # Media paths resolve against the prompt file's directory: p/missing.png, p/broken.png.
  printf 'not an image\n' >p/broken.png
  printf '%s\n' '{"input_ids": [1, 2]}' \
    '{"messages": [{"role": "user", "content": [{"type": "image", "image": "missing.png"}]}]}' >p/missing.jsonl
  printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "image", "image": "broken.png"}]}]}' >p/broken.jsonl
  printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "image", "image": "broken.png"}]}]}' >broken.jsonl
  expect_exit 2 --model vl --prompts p/missing.jsonl --out o.jsonl
  expect_in err "p/missing.jsonl:2: message 0 part 0 (image)"
  expect_in err "p/missing.png"
  expect_exit 2 --model vl --prompts p/broken.jsonl --out o.jsonl
  expect_in err "p/broken.jsonl:1: message 0 part 0 (image)"
  expect_in err "p/broken.png"
  # The same part from a prompt file elsewhere names another file, which is missing.
  expect_exit 2 --model vl --prompts broken.jsonl --out o.jsonl
  expect_in err "broken.jsonl:1"
  grep -qF "p/broken.png" err && fail "the path did not resolve against the prompt file's directory"
  # Media prompts are rendered with ChatML.
  expect_exit 2 --model vl --prompts p/broken.jsonl --out o.jsonl --chat-template model
  expect_in err "p/broken.jsonl:1: a conversation with media parts is rendered with ChatML"
  [ ! -e o.jsonl ] || fail "an output file was written"
  ;;
bad_inputs)
  printf '%s\n' '{"input_ids": [5, 6]}' '{"input_ids": [5, 6' >broken.jsonl
  printf '%s\n' '{"input_ids": [1, 2]}' >good.jsonl
  python3 -c "print('{\"input_ids\": [' + ','.join(['7'] * 4097) + ']}')" >long.jsonl
  printf '%s\n' '{"messages": [{"role": "user", "content": "hi"}]}' >chat.jsonl
  expect_exit 2 --model "$work/missing" --prompts good.jsonl --out o.jsonl
  expect_in err "no such directory"
  expect_exit 2 --model "$toy" --prompts broken.jsonl --out o.jsonl
  expect_in err "broken.jsonl:2"
  expect_exit 2 --model "$toy" --prompts long.jsonl --out o.jsonl
  expect_in err "max_position_embeddings 4096"
  expect_exit 2 --model "$toy" --prompts chat.jsonl --out o.jsonl
  expect_in err "chat.jsonl:1"
  expect_exit 2 --model "$toy" --prompts good.jsonl --out o.jsonl --device tpu
  expect_exit 2 --model "$toy" --prompts good.jsonl --out o.jsonl --top-p 1.5
  expect_exit 2 --model "$toy" --prompts good.jsonl --out o.jsonl --chat-template nonesuch
  expect_exit 2 --model "$toy" --prompts good.jsonl --out o.jsonl --stop-token-ids 99999
  expect_exit 2 --model "$toy" --prompts good.jsonl --out o.jsonl --steps-per-sync 0
  expect_exit 2 --model "$toy" --prompts missing.jsonl --out o.jsonl
  [ ! -e o.jsonl ] || fail "an output file was written"
  [ -z "$(ls -A | grep -v -e '\.jsonl$' -e '^out$' -e '^err$')" ] || fail "leftover files: $(ls -A)"
  ;;
*) fail "unknown case $case" ;;
esac
echo "generate.$case: ok"
