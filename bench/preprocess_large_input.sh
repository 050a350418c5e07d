#!/usr/bin/env bash
# Peak memory of `veomni-preprocess text` on an input larger than memory, without the input on disk: COPIES copies
# of a 1 MB block of word-salad records (30 to 300 words each from 170 common English words, seeded, about 0.18
# tokens a byte) are fed through stdin; the output dataset (about 0.6 bytes an input byte) is written beside
# WORK_DIR and removed afterwards. Prints the tool's summary and /usr/bin/time's wall time and maximum RSS.
# usage: bench/preprocess_large_input.sh BIN_DIR TOKENIZER_JSON WORK_DIR [COPIES=10000 (10 GB)]
set -euo pipefail
bin=$1 tokenizer=$2 work=$3 copies=${4:-10000}
mkdir -p "$work"
python3 - "$work/block.jsonl" <<'PY'
import json, random, sys
words = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an "
         "they you were her she there one all we their time year people way day man thing woman life child world "
         "school state family student group country problem hand part place case week company system program "
         "question work government number night point home water room mother area money story fact month lot right "
         "study book eye job word business issue side kind head house service friend father power hour game line end "
         "member law car city community name president team minute idea kid body information back parent face others "
         "level office door health person art war history party result change morning reason research girl guy "
         "moment air teacher force education").split()
rng, size = random.Random(7), 0
with open(sys.argv[1], "w") as out:
    while size < 1_000_000:
        line = json.dumps({"text": " ".join(rng.choice(words) for _ in range(rng.randint(30, 300)))})
        out.write(line + "\n")
        size += len(line) + 1
PY
echo "input: $copies x $(stat -c %s "$work/block.jsonl") bytes"
(for _ in $(seq "$copies"); do cat "$work/block.jsonl"; done) |
  /usr/bin/time -v "$bin/veomni-preprocess" text --tokenizer "$tokenizer" --input - --out "$work/large.h5" \
    --overwrite --log-level warn 2>"$work/time.txt"
grep -E "Elapsed|Maximum resident" "$work/time.txt"
rm -f "$work/large.h5"
