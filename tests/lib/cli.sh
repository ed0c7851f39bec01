# tests/lib/cli.sh — the part every command-line check tests/cli_*.sh shares, sourced first
# thing by each (`. "$(dirname "$0")/lib/cli.sh"`, with the script's BUILD_DIR argument still
# in $1). On sourcing it sets build (absolute), cnnc, root (the project folder), data (Debian's
# Fashion-MNIST folder), suite (the script's name) and failures=0, and turns on set -u; the
# functions below make the temporary folder, run cnnc, record failures and print the closing
# line. It checks nothing by itself and is no test: tests/run.sh runs only tests/cli_*.sh.
# It does not cd anywhere; each script chooses its own working folder.
# shellcheck shell=sh disable=SC2034 # the variables set here are used by the scripts
set -u
build=$(cd "${1:-build}" 2>/dev/null && pwd) || {
  echo "FAIL: the build folder ${1:-build} is missing (build it first)"
  exit 1
}
cnnc=$build/cnnc
root=$(cd "$(dirname "$0")/.." && pwd)
data=/usr/share/datasets/fashion-mnist
suite=$(basename "$0" .sh)
failures=0

# require_cnnc: stops the script when the command has not been built.
require_cnnc() {
  [ -x "$cnnc" ] || { echo "FAIL: $cnnc is missing (build it first)"; exit 1; }
}

# have_data WHAT: true when the dataset is installed; otherwise says that WHAT is skipped.
have_data() {
  [ -d "$data" ] && return 0
  echo "$suite: skipped $1: $data is missing (Debian package dataset-fashion-mnist)"
  return 1
}

# require_data: ends the script, passed, when the dataset is missing.
require_data() {
  have_data "every check" || exit 0
}

# have_mpi: true when mpirun is installed and this cnnc is built with MPI (`cnnc info`).
have_mpi() {
  command -v mpirun >/dev/null 2>&1 && "$cnnc" info --threads 1 2>/dev/null | grep -q "^MPI: *yes"
}

# make_tmp: a new temporary folder in $tmp, removed (whatever its permissions) when the script
# ends or is interrupted.
make_tmp() {
  tmp=$(mktemp -d) || exit 1
  trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
  trap 'exit 1' INT TERM
}

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run ARGS...: runs cnnc; stdout in $tmp/out, stderr in $tmp/err, exit status in $status.
run() {
  "$cnnc" "$@" >"$tmp/out" 2>"$tmp/err"
  status=$?
}

# expect STATUS TEXT ARGS...: runs cnnc ARGS, which must exit with STATUS and have TEXT (a grep
# pattern) in its message. Records a failure and returns 1 when either is wrong.
expect() {
  expect_status=$1
  expect_text=$2
  shift 2
  run "$@"
  if [ "$status" -ne "$expect_status" ]; then
    fail "cnnc $*: exit status $status, expected $expect_status: $(cat "$tmp/err")"
    return 1
  fi
  if ! grep -q -e "$expect_text" "$tmp/err"; then
    fail "cnnc $*: the message does not mention '$expect_text': $(cat "$tmp/err")"
    return 1
  fi
}

# wait_for FILE TEXT: until TEXT is in FILE (at most 60 s); 1 when it never comes. It looks
# every 20 ms: a signal meant for the middle of a short run must not arrive after its end.
wait_for() {
  i=0
  while ! grep -q -e "$2" "$1" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt 3000 ] && return 1
    sleep 0.02
  done
}

# safetensors_header FILE: the JSON header of a safetensors file, on stdout.
safetensors_header() {
  len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +9 "$1" | head -c "$len"
}

# metrics_figures FILE: the losses and accuracies of each epoch in a --metrics-file, one line an
# epoch: what must not depend on how the run was spread (the times do).
metrics_figures() {
  pattern='.*"train_loss":\([^,]*\),"train_accuracy":\([^,]*\),"test_loss":\([^,]*\),'
  pattern="$pattern"'"test_accuracy":\([^,]*\),.*'
  sed -e "s/$pattern/\\1 \\2 \\3 \\4/" "$1"
}

# finish [DETAIL]: the closing line; exits 1 when any check failed.
# shellcheck disable=SC2120 # DETAIL is optional
# mpi_env: Open MPI's settings for one machine: no network, no ssh, root allowed (containers,
# CI), more processes than cores, shared memory copied through a buffer (containers often
# forbid cross-process memory access). Open MPI keeps allocations at exit, some in plugins it
# has already unloaded, which LeakSanitizer cannot name for a suppression: under `make
# test-sanitize` leaks go unchecked with it (AddressSanitizer's other checks stay on).
mpi_env() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  [ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
  return 0
}

# built_without_mpi: after require_cnnc, whether this cnnc says (cnnc info) it has no MPI.
built_without_mpi() {
  "$cnnc" info --threads 1 | grep -q '^MPI: *no'
}

# require_mpi: after require_cnnc, skips the whole suite (exit 0, saying why) when mpirun is
# missing or this cnnc was built without MPI; otherwise sets mpi_env.
require_mpi() {
  if ! command -v mpirun >/dev/null 2>&1; then
    echo "$suite: skipped every check: mpirun is missing (Debian package openmpi-bin)"
    exit 0
  fi
  mpi_env
  if built_without_mpi; then
    echo "$suite: skipped every check: this cnnc was built without MPI (make MPI=0)"
    exit 0
  fi
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$suite: $failures check(s) failed"
    exit 1
  fi
  echo "$suite: all checks passed${1:+ ($1)}"
  exit 0
}
