#!/usr/bin/env python3
"""Writes tests/fixtures/chat_templates/transformers_renderings.jsonl: transformers' apply_chat_template renderings.

Run where transformers 5.x is installed; no network is needed. It reads the tokenizer from a directory (the one
scripts/setup.sh fills) and the Qwen3-VL template (and Qwen3-Omni's, qwen3_omni_chat_template.json, when it is
stored there) from tests/fixtures/chat_templates/:

    HF_HUB_OFFLINE=1 python3 scripts/gen_chat_template_fixtures.py .cache/tokenizers/qwen3

Each output line is {"template", "name", "record", "messages", "text", "ids", "assistant_mask", "mask_note"}:
"record" is the input record as veomni-preprocess reads it (OpenAI "messages" or ShareGPT "conversations", with
"tools" and "chat_template_kwargs"), "messages" the OpenAI messages this script hands transformers (its own
ShareGPT conversion), "text" apply_chat_template(tokenize=False), "ids" apply_chat_template(tokenize=True), and
"assistant_mask" return_assistant_tokens_mask's mask where the template has {% generation %} blocks (else null,
with the reason in "mask_note"). tests/unit/test_tokenizer_chat_template_model.cc (ChatTemplateFixtures) renders
every record through veomni's node worker and asserts the same messages, byte-identical text and identical ids.
"""
import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "tests/fixtures/chat_templates"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "Now.", "parameters": {}}}


def text_cases():
    """Records for Qwen3's text template: thinking on/off, reasoning, tools, multi-turn, ShareGPT, unicode."""
    return [
        ("single_turn", {"messages": [{"role": "user", "content": "Hello world"},
                                      {"role": "assistant", "content": "Hi! How can I help?"}]}),
        ("thinking_off", {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
                          "chat_template_kwargs": {"enable_thinking": False}}),
        ("reasoning_content_multi_turn", {"messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Two plus two."},
            {"role": "user", "content": "And 3+3?"},
            {"role": "assistant", "content": "6", "reasoning_content": "Three plus three."}]}),
        ("think_in_content", {"messages": [
            {"role": "user", "content": "Why?"},
            {"role": "assistant", "content": "<think>\nBecause.\n</think>\n\nIt is so."}]}),
        ("tools_calls_results", {"tools": [WEATHER_TOOL, TIME_TOOL], "messages": [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome", "unit": "C"}}}]},
            {"role": "tool", "content": "{\"temp\": 18}"},
            {"role": "tool", "content": "{\"temp\": 24}"},
            {"role": "assistant", "content": "Paris 18, Rome 24."}]}),
        ("tool_call_with_text_and_string_arguments", {"tools": [WEATHER_TOOL], "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "content": "cold"},
            {"role": "assistant", "content": "It is cold.", "reasoning_content": "The tool said cold."}],
            "chat_template_kwargs": {"enable_thinking": False}}),
        ("multi_turn_no_system", {"messages": [
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"},
            {"role": "user", "content": "e"}, {"role": "assistant", "content": "f"}]}),
        ("sharegpt", {"system": "Be kind.", "conversations": [
            {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"},
            {"from": "human", "value": "Bye"}, {"from": "gpt", "value": "Goodbye!"}]}),
        ("sharegpt_function_call", {"tools": json.dumps([WEATHER_TOOL]), "conversations": [
            {"from": "human", "value": "Weather in Lima?"},
            {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"city": "Lima"}})},
            {"from": "observation", "value": "warm"},
            {"from": "gpt", "value": "Warm."}]}),
        ("unicode", {"messages": [{"role": "user", "content": "你好，世界！ café 🙂"},
                                  {"role": "assistant", "content": "Grüße ☕ — 再见"}]}),
    ]


def vl_cases():
    """Records for Qwen3-VL's template: content lists of text, image and video parts."""
    return [
        ("vl_image_text", {"messages": [
            {"role": "user", "content": [{"type": "image", "image": "cat.png"}, {"type": "text", "text": "What is it?"}]},
            {"role": "assistant", "content": "A cat."}]}),
        ("vl_video_multi_turn", {"messages": [
            {"role": "system", "content": [{"type": "text", "text": "Describe media."}]},
            {"role": "user", "content": [{"type": "video", "video": "clip.mp4"}, {"type": "text", "text": "And?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "A dog runs."}]},
            {"role": "user", "content": [{"type": "text", "text": "Two images:"}, {"type": "image", "image": "a.png"},
                                         {"type": "image", "image": "b.png"}]},
            {"role": "assistant", "content": "Both red."}]}),
        ("vl_tools", {"tools": [WEATHER_TOOL], "messages": [
            {"role": "user", "content": [{"type": "image", "image": "sky.png"}, {"type": "text", "text": "Rain?"}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Here"}}}]},
            {"role": "tool", "content": "dry"},
            {"role": "assistant", "content": "No rain."}]}),
    ]


def omni_cases():
    """Records for Qwen3-Omni's template (when its chat_template.json is stored): audio, image and video parts."""
    return [
        ("omni_audio_text", {"messages": [
            {"role": "user", "content": [{"type": "audio", "audio": "a.wav"}, {"type": "text", "text": "Transcribe."}]},
            {"role": "assistant", "content": "Hello there."}]}),
        ("omni_mixed_parts", {"messages": [
            {"role": "system", "content": "You are Qwen."},
            {"role": "user", "content": [{"type": "image", "image": "x.png"}, {"type": "video", "video": "y.mp4"},
                                         {"type": "audio", "audio": "z.wav"}, {"type": "text", "text": "Describe."}]},
            {"role": "assistant", "content": "A scene with sound."}]}),
    ]


def sharegpt_to_messages(record):
    """veomni's ShareGPT mapping (man veomni-preprocess): human/gpt/system/observation/function_call turns."""
    roles = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
             "observation": "tool", "tool": "tool"}
    messages = [{"role": "system", "content": record["system"]}] if "system" in record else []
    for turn in record["conversations"]:
        if turn["from"] == "function_call":
            calls = json.loads(turn["value"])
            calls = calls if isinstance(calls, list) else [calls]
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": c["name"], "arguments": c.get("arguments", {})}}
                for c in calls]})
        else:
            messages.append({"role": roles[turn["from"]], "content": turn["value"]})
    return messages


def render(tokenizer, template, record):
    messages = record["messages"] if "messages" in record else sharegpt_to_messages(record)
    tools = record.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools)
    kwargs = dict(record.get("chat_template_kwargs", {}))
    common = dict(tools=tools or None, chat_template=template, add_generation_prompt=False, **kwargs)
    text = tokenizer.apply_chat_template(messages, tokenize=False, **common)
    has_generation = "{% generation %}" in template or "{%- generation %}" in template
    encoded = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True,
                                            return_assistant_tokens_mask=has_generation, **common)
    ids = list(encoded["input_ids"])
    if ids != tokenizer(text, add_special_tokens=False)["input_ids"]:
        sys.exit(f"tokenize=True and tokenizing the text disagree for {messages}")
    mask = list(encoded["assistant_masks"]) if has_generation else None
    note = "" if has_generation else "the template has no {% generation %} blocks: no transformers assistant mask"
    return messages, text, ids, mask, note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokenizer_dir", type=pathlib.Path, help="folder with tokenizer.json and tokenizer_config.json")
    parser.add_argument("--out", type=pathlib.Path, default=TEMPLATES / "transformers_renderings.jsonl")
    args = parser.parse_args()

    import transformers
    from transformers import AutoTokenizer

    if int(transformers.__version__.split(".")[0]) < 5:
        print(f"warning: transformers {transformers.__version__}; the fixtures are meant for 5.x", file=sys.stderr)
    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer_dir), local_files_only=True)
    config = json.loads((args.tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    vl_file = "qwen3_vl_chat_template.json"
    templates = {
        "qwen3": (config["chat_template"], text_cases()),
        vl_file: (json.loads((TEMPLATES / vl_file).read_text(encoding="utf-8"))["chat_template"], vl_cases()),
    }
    omni_file = "qwen3_omni_chat_template.json"
    if (TEMPLATES / omni_file).exists():
        omni = json.loads((TEMPLATES / omni_file).read_text(encoding="utf-8"))["chat_template"]
        templates[omni_file] = (omni, omni_cases())
    else:
        print(f"note: no {TEMPLATES / omni_file}: Qwen3-Omni cases left out", file=sys.stderr)
    lines = []
    for name, (template, cases) in templates.items():
        for case, record in cases:
            messages, text, ids, mask, note = render(tokenizer, template, record)
            lines.append(json.dumps({"template": name, "name": case, "record": record, "messages": messages,
                                     "text": text, "ids": ids, "assistant_mask": mask, "mask_note": note},
                                    ensure_ascii=False))
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {len(lines)} renderings to {args.out} (transformers {transformers.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
