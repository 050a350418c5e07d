#!/usr/bin/env bash
# veomni-ckpt-merge of a Qwen3-Omni checkpoint keeps the talker.* and code2wav.* tensors of the Omni model the run
# started from (model.model_path), or of --speech-from; without either the merge warns and writes the thinker only;
# a model without audio output (enable_audio_output false) gets none.
# usage: ckpt_merge_omni_speech.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-merge-speech-XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
cd "$src"  # the recipe names its model config relative to the repository root

source "$src/tests/integration/tool_test_lib.sh"  # fail, small_vocab_config

# The toy thinker with a vocabulary of 2048 (the dummy tokens are below 1024), with audio output (the talker and
# code2wav exist in transformers only then); config_mute keeps the toy's enable_audio_output false.
mkdir -p "$work/config"
small_vocab_config qwen3_omni_moe_toy "$work/config_mute"
sed 's/"enable_audio_output": false/"enable_audio_output": true/' "$work/config_mute/config.json" \
  >"$work/config/config.json"
grep -q '"enable_audio_output": true' "$work/config/config.json" || fail "the toy config changed: no enable_audio_output"
"$bin/veomni-dummy-data" --type qwen3omni --seq-len 256 --num-samples 2 --seed 3 --out "$work/omni.h5" >/dev/null

# train NAME [overrides...]: one step, one checkpoint.
train() {
  local name=$1
  shift
  "$bin/veomni-train" configs/qwen3_omni_moe_toy.yaml --model.config_path "$work/config" \
    --data.train_path "$work/omni.h5" --train.global_batch_size 1 --train.micro_batch_size 1 --train.max_steps 1 \
    --train.checkpoint.output_dir "$work/$name" --train.checkpoint.save_steps 1 --log-level warn "$@" >/dev/null
}
merge() { "$bin/veomni-ckpt-merge" "$1/checkpoints/global_step_1" --out "$2" --no-tokenizer "${@:3}"; }

# 1. From a random initialisation: no base to copy from, the merge warns and keeps the thinker only.
train random
merge "$work/random" "$work/thinker_only" >"$work/out1" 2>"$work/err1" || fail "merge: $(cat "$work/err1")"
grep -q "no talker or code2wav weights" "$work/err1" || fail "no warning about the missing speech stages"
grep -q '"talker\.' "$work/thinker_only/model.safetensors" && fail "talker tensors out of nowhere"

# 2. An Omni base: the merged thinker as shard 1, talker and code2wav tensors (f32 and bf16) as shard 2, an index.
python3 - "$work/thinker_only" "$work/base" <<'PY'
import json, os, shutil, struct, sys
src, base = sys.argv[1], sys.argv[2]
os.makedirs(base)
shutil.copy(os.path.join(src, "config.json"), base)
shutil.copy(os.path.join(src, "model.safetensors"), os.path.join(base, "model-00001-of-00002.safetensors"))
with open(os.path.join(src, "model.safetensors"), "rb") as f:
    thinker = [k for k in json.loads(f.read(struct.unpack("<Q", f.read(8))[0])) if k != "__metadata__"]
speech = {  # name: (dtype, shape, bytes)
    "talker.codec_head.weight": ("F32", [3, 2], struct.pack("<6f", 0.5, -1.25, 2.0, 3.5, -0.75, 1.0)),
    "code2wav.code_embedding.weight": ("BF16", [2, 2], struct.pack("<4H", 0x3F80, 0xC000, 0x3E00, 0x4040)),
}
header, data = {}, b""
for name, (dtype, shape, raw) in speech.items():
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(os.path.join(base, "model-00002-of-00002.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
weight_map = {n: "model-00001-of-00002.safetensors" for n in thinker}
weight_map.update({n: "model-00002-of-00002.safetensors" for n in speech})
with open(os.path.join(base, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": weight_map}, f)
PY

# check_speech DIR: the merged model holds both speech tensors, in f32 with the base's values.
check_speech() {
  python3 - "$1/model.safetensors" <<'PY' || fail "speech tensors of $1"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    body = f.read()
def values(name):
    e = header[name]
    assert e["dtype"] == "F32", e
    b, t = e["data_offsets"]
    return list(struct.unpack("<%df" % ((t - b) // 4), body[b:t])), e["shape"]
assert values("talker.codec_head.weight") == ([0.5, -1.25, 2.0, 3.5, -0.75, 1.0], [3, 2]), values("talker.codec_head.weight")
assert values("code2wav.code_embedding.weight") == ([1.0, -2.0, 0.125, 3.0], [2, 2]), values("code2wav.code_embedding.weight")
assert any(k.startswith("thinker.") for k in header)
PY
}

# 3. A run from the Omni base: the merge takes the speech stages from its model.model_path.
train from_base --model.model_path "$work/base"
merge "$work/from_base" "$work/merged" >"$work/out3" 2>"$work/err3" || fail "merge: $(cat "$work/err3")"
check_speech "$work/merged"
grep -q "speech_tensors: 2 from $work/base" "$work/out3" || fail "summary: $(cat "$work/out3")"

# 4. Without audio output (enable_audio_output false) there is nothing to keep, and no warning.
train mute --model.model_path "$work/base" --model.config_path "$work/config_mute"
merge "$work/mute" "$work/merged_mute" >/dev/null 2>"$work/err_mute" || fail "merge: $(cat "$work/err_mute")"
grep -q "no talker or code2wav" "$work/err_mute" && fail "a warning for a model without audio output"
grep -q '"talker\.' "$work/merged_mute/model.safetensors" && fail "talker tensors for a model without audio output"

# 5. --speech-from gives them to the random-init run's merge too.
merge "$work/random" "$work/merged_from" --speech-from "$work/base" >/dev/null 2>"$work/err4" || fail "$(cat "$work/err4")"
check_speech "$work/merged_from"

# 6. --speech-from naming a model without speech tensors is bad input (exit 2), leaving nothing.
set +e
merge "$work/random" "$work/bad" --speech-from "$work/thinker_only" >/dev/null 2>"$work/err5"
rc=$?
set -e
[ "$rc" = 2 ] || fail "--speech-from without speech tensors exited $rc: $(cat "$work/err5")"
grep -q "holds no talker" "$work/err5" || fail "message: $(cat "$work/err5")"
[ ! -e "$work/bad" ] || fail "a failed merge left $work/bad"
echo "ckpt_merge_omni_speech: ok"
