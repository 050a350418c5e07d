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
# small_vocab_config MODEL DIR: configs/model_configs/MODEL/config.json with a vocabulary of 2048, in DIR/config.json.
# For the dummy data (text tokens below 1024): the 152k-row embedding and head would dominate the CPU time of the toy
# models without changing what is tested.
small_vocab_config() {
  mkdir -p "$2"
  sed 's/"vocab_size": 151936/"vocab_size": 2048/' "configs/model_configs/$1/config.json" >"$2/config.json"
  grep -q '"vocab_size": 2048' "$2/config.json" || fail "configs/model_configs/$1/config.json has no vocab_size 151936"
}
