#!/usr/bin/env bash
# Every man page under man/ renders with groff without a warning (-ww: all of them), so that an escape such as a
# literal \n in an example, read by troff as a number register, cannot slip into a page; and every tool in tools/
# has a page in section 1.
# usage: man_pages.sh SOURCE_DIR
set -uo pipefail
src=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v groff >/dev/null || fail "groff is not installed (Debian groff-base; scripts/setup.sh installs it)"
pages=("$src"/man/*.[1-9])
[[ ${#pages[@]} -gt 0 && -f ${pages[0]} ]] || fail "no man pages under $src/man"
for page in "${pages[@]}"; do
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  [[ -z $warnings ]] || fail "$(basename "$page") renders with warnings:"$'\n'"$warnings"
done
for tool in "$src"/tools/*/; do
  name=$(basename "$tool")
  [[ $name == veomni-* ]] || continue
  [[ -f $src/man/$name.1 ]] || fail "tools/$name has no man/$name.1"
done
echo "ok: ${#pages[@]} man pages render without warnings"
