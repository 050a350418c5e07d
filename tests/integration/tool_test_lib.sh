# The assertions the tool tests share (sourced): each runs "$tool" (set by the caller) with its output in out/err.
fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs the tool with stdout/stderr in out/err and checks the exit code.
expect_exit() {
  local want=$1 got=0
  shift
  "$tool" "$@" >out 2>err || got=$?
  [ "$got" -eq "$want" ] || { cat out err >&2; fail "exit $got, expected $want: $*"; }
}
expect_line() { grep -qxF -- "$1" out || { cat out >&2; fail "missing line: $1"; }; }
expect_in() { grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "'$2' not in $1"; }; }
# The samples of a dataset, header aside: counts and per-key digests from `veomni-preprocess info` ("$tool" is it).
contents() { "$tool" info "$1" | grep -E '^(samples:|tokens:|key )' || fail "veomni-preprocess info $1"; }
