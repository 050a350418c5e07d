#!/usr/bin/env bash
# Peak memory of `veomni-preprocess text` against the input's size: generates plain-text JSONL inputs of the given
# sizes (deterministic, a few hundred tokens a record), preprocesses each (also with --pack and shards) under
# /usr/bin/time -v, and prints one line per run: input MB, records, tokens, seconds, peak RSS MiB. Give a second
# binary to compare (e.g. an older build).
# usage: bench/preprocess_memory.sh TOKENIZER_JSON "SIZES_MB" BINARY [OTHER_BINARY] [-- extra preprocess flags]
# PACK=0 leaves out the runs with --pack --max-seq-len 4096 --num-shards 4 (for the largest inputs).
set -euo pipefail
tokenizer=$1 sizes=$2
shift 2
binaries=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do binaries+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
extra=("$@")
work=$(mktemp -d "${TMPDIR:-/tmp}/veomni-preprocess-memory-XXXXXX")
trap 'rm -rf "$work"' EXIT

# make_input MB FILE: records of 30 to 300 words until the file holds MB megabytes.
make_input() {
  awk -v target=$(($1 * 1000000)) 'BEGIN {
    srand(7); bytes = 0
    for (i = 1; bytes < target; i++) {
      n = 30 + int(rand() * 270); s = "record " i ":"
      for (k = 0; k < n; k++) s = s " w" int(rand() * 5000)
      line = "{\"text\": \"" s "\"}"; print line; bytes += length(line) + 1
    }
  }' >"$2"
}

labels=(A B C D)
for i in "${!binaries[@]}"; do echo "${labels[$i]}: ${binaries[$i]}"; done
printf '%-6s %8s %10s %12s %9s %12s  %s\n' binary input_MB records tokens seconds peak_RSS_MiB flags
for mb in $sizes; do
  make_input "$mb" "$work/in.jsonl"
  for i in "${!binaries[@]}"; do
    binary=${binaries[$i]}
    flag_sets=("")
    [ "${PACK:-1}" = 0 ] || flag_sets+=("--pack --max-seq-len 4096 --num-shards 4")
    for flags in "${flag_sets[@]}"; do
      # shellcheck disable=SC2086
      /usr/bin/time -v "$binary" text --tokenizer "$tokenizer" --input "$work/in.jsonl" --out "$work/out.h5" \
        --overwrite --log-level warn $flags "${extra[@]}" >"$work/summary" 2>"$work/time"
      rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2 / 1024}' "$work/time")
      secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$work/time")
      printf '%-6s %8s %10s %12s %9s %12s  %s\n' "${labels[$i]}" \
        "$mb" "$(awk '/^records:/ {print $2}' "$work/summary")" "$(awk '/^tokens:/ {print $2}' "$work/summary")" \
        "$secs" "$rss" "${flags:-(none)}"
      rm -f "$work"/out*.h5
    done
  done
done
