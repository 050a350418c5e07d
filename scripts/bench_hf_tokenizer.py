#!/usr/bin/env python3
"""Tokenizer throughput of HuggingFace `tokenizers` on a JSONL corpus, to set beside bench/tokenizer.cc's figures.

    python3 scripts/bench_hf_tokenizer.py --make-corpus runs/tokenizer_corpus.jsonl     # anywhere, no packages
    python3 scripts/bench_hf_tokenizer.py .cache/tokenizers/qwen3/tokenizer.json runs/tokenizer_corpus.jsonl
    build/bench/bench_tokenizer .cache/tokenizers/qwen3/tokenizer.json runs/tokenizer_corpus.jsonl

The corpus is deterministic: every paragraph of the repository's C++ sources, headers, man pages and Markdown
(code and English), the tokenizer fixture corpus 20 times (many scripts, emoji, whitespace runs), and 5000 seeded
random mixed-script texts. One thread: Tokenizer.encode per document. All threads: encode_batch (Rust threads;
RAYON_NUM_THREADS caps them). Both passes run for at least MIN_SECONDS, as the C++ benchmark does.
"""
import argparse
import json
import os
import pathlib
import random
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def make_corpus(out: pathlib.Path) -> None:
    texts = []
    for pattern in ("libcommon/**/*.h", "libcommon/**/*.cc", "kernels/**/*.cc", "tools/**/*.cc", "man/*", "*.md"):
        for path in sorted(ROOT.glob(pattern)):
            texts += [p for p in path.read_text(encoding="utf-8", errors="replace").split("\n\n") if p.strip()]
    fixture = ROOT / "tests/fixtures/tokenizer/corpus.jsonl"
    fixture_texts = [json.loads(line)["text"] for line in fixture.read_text(encoding="utf-8").split("\n") if line]
    texts += [t for t in fixture_texts if t] * 20
    rng = random.Random(1234)
    pools = ["the model of data and code ", "机器学习是人工智能的一个分支", "こんにちは世界 カタカナ", "مرحبا بالعالم ",
             "Привет мир ", "0123456789", " \t\n", ".,;:!?()[]{}<>", "🍕🎉👍🏽", "e\u0301a\u0308 ", "'s 'T 'll "]
    for _ in range(5000):
        texts.append("".join(rng.choice(pools) for _ in range(rng.randint(5, 60))))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    size = sum(len(t.encode()) for t in texts) / 1e6
    print(f"wrote {out}: {len(texts)} documents, {size:.2f} MB")


def measure(encode, texts, min_seconds):
    tokens, megabytes, start = 0, 0.0, time.perf_counter()
    while True:
        tokens += encode(texts)
        megabytes += sum(len(t.encode()) for t in texts) / 1e6
        seconds = time.perf_counter() - start
        if seconds >= min_seconds:
            return tokens, megabytes, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokenizer_json", nargs="?", type=pathlib.Path)
    parser.add_argument("corpus", nargs="?", type=pathlib.Path)
    parser.add_argument("--min-seconds", type=float, default=3.0)
    parser.add_argument("--make-corpus", type=pathlib.Path, metavar="OUT", help="write the corpus and exit")
    args = parser.parse_args()
    if args.make_corpus:
        make_corpus(args.make_corpus)
        return 0
    if not args.tokenizer_json or not args.corpus:
        parser.error("give TOKENIZER_JSON and CORPUS (or --make-corpus OUT)")

    from tokenizers import Tokenizer, __version__ as tokenizers_version

    start = time.perf_counter()
    tokenizer = Tokenizer.from_file(str(args.tokenizer_json))
    load = time.perf_counter() - start
    texts = [json.loads(line)["text"] for line in args.corpus.read_text(encoding="utf-8").split("\n") if line]
    size = sum(len(t.encode()) for t in texts) / 1e6
    print(f"tokenizers {tokenizers_version} (loaded in {load:.2f} s)")
    print(f"corpus: {args.corpus} ({len(texts)} documents, {size:.2f} MB)")

    def one_thread(batch):
        return sum(len(tokenizer.encode(t).ids) for t in batch)

    def all_threads(batch):
        return sum(len(e.ids) for e in tokenizer.encode_batch(batch))

    threads = os.environ.get("RAYON_NUM_THREADS", str(os.cpu_count()))
    for label, encode in (("1", one_thread), (threads, all_threads)):
        tokens, megabytes, seconds = measure(encode, texts, args.min_seconds)
        print(f"threads {label}: {tokens / seconds:.0f} tokens/s, {megabytes / seconds:.2f} MB/s "
              f"({tokens} tokens in {seconds:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
