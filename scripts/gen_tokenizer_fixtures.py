#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/qwen3_ids.jsonl: the ids HuggingFace `tokenizers` gives every text of the corpus.

Run where the `tokenizers` package is installed (e.g. the GPU machine), on the same tokenizer.json the C++ tests
use (scripts/setup.sh puts it in .cache/tokenizers/qwen3/):

    python3 scripts/gen_tokenizer_fixtures.py .cache/tokenizers/qwen3/tokenizer.json

Each output line is {"text": ..., "ids": [...]} in corpus order; tests/unit/test_tokenizer_qwen3.cc asserts that
veomni's tokenizer gives the same ids and decodes them back to the (NFC) text.
"""
import argparse
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXPECTED_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokenizer_json", type=pathlib.Path, help="the Qwen3 tokenizer.json")
    parser.add_argument("--corpus", type=pathlib.Path, default=ROOT / "tests/fixtures/tokenizer/corpus.jsonl")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "tests/fixtures/tokenizer/qwen3_ids.jsonl")
    args = parser.parse_args()

    from tokenizers import Tokenizer, __version__ as tokenizers_version

    digest = hashlib.sha256(args.tokenizer_json.read_bytes()).hexdigest()
    if digest != EXPECTED_SHA256:
        print(f"warning: {args.tokenizer_json} has sha256 {digest}, not the pinned {EXPECTED_SHA256}", file=sys.stderr)
    tokenizer = Tokenizer.from_file(str(args.tokenizer_json))

    lines = []
    # Split on "\n" only: the texts hold U+0085 and U+2028 raw, which str.splitlines() would also split on.
    for line in args.corpus.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        text = json.loads(line)["text"]
        ids = tokenizer.encode(text).ids  # add_special_tokens=True: Qwen's ByteLevel post-processor adds none
        lines.append(json.dumps({"text": text, "ids": ids}, ensure_ascii=False))
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} lines to {args.out} (tokenizers {tokenizers_version}, tokenizer sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
