#!/bin/sh
# cli_signals.sh — `cnnc train` among the signals a shell hands it: a run piped into `head -2`
# stops at its next line of output as SIGTERM would stop it (a checkpoint, the reason on
# stderr, exit status 141) and resumes to the weights of an unstopped run; SIGINT and SIGTERM
# that the parent ignored (`trap '' INT TERM`) stay ignored and the run ends normally, while the
# same run with SIGINT at its default action stops (130). SIGINT and SIGTERM with checkpoints
# in detail are cli_checkpoint.sh's business, several processes cli_mpi.sh's. Needs Debian's
# Fashion-MNIST; skipped without it.
# Usage: sh tests/cli_signals.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

job="train --train-samples 4096 --test-samples 512 --num-cores 2 --batch-size 64 --threads 2
  --result-image none --plot none --log-steps 1"

# gone_within PID SECONDS: true when PID ends within SECONDS; otherwise kills it and fails.
gone_within() {
  i=0
  while kill -0 "$1" 2>/dev/null && [ "$i" -lt $(($2 * 10)) ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -0 "$1" 2>/dev/null || return 0
  kill -KILL "$1"
  return 1
}

# ---------------------------------------------------------------- stdout into `head -2`
# shellcheck disable=SC2086
"$cnnc" $job --num-epochs 4 --save straight.st >/dev/null 2>&1 || fail "the unstopped run failed"
# shellcheck disable=SC2086
{
  timeout 60 "$cnnc" $job --num-epochs 4 --checkpoint-dir piped 2>piped.err
  echo $? >piped.status
} | head -2 >piped.out
status=$(cat piped.status)
[ "$status" -eq 141 ] || fail "| head -2: exit status $status, expected 141: $(cat piped.err)"
[ "$(grep -c . piped.out)" -eq 2 ] || fail "| head -2 read: $(cat piped.out)"
grep -q "^Stopped by SIGPIPE (nothing reads standard output any more) at epoch [1-4]," \
  piped.err || fail "| head -2: stderr does not say why the run stopped: $(cat piped.err)"
grep -q "^Resume with: .*cnnc train --resume piped$" piped.err ||
  fail "| head -2: stderr does not say how to resume: $(cat piped.err)"
grep -q "error" piped.err && fail "| head -2: an error besides the stop: $(cat piped.err)"
ls piped/checkpoint-epoch-*.safetensors >/dev/null 2>&1 ||
  fail "| head -2: no checkpoint of where it stopped in piped/: $(ls piped 2>&1)"
run train --resume piped --threads 2 --save resumed.st
[ "$status" -eq 0 ] || fail "resuming the piped run: exit status $status: $(cat "$tmp/err")"
cmp -s straight.st resumed.st || fail "stopped by | head -2 and resumed: other weights"

# A reader gone before the end's lines: the run is whole (model, last checkpoint), and the
# failure says why; errno of that long-past write is gone, so it must not read "Success".
# shellcheck disable=SC2086
{
  timeout 60 "$cnnc" $job --num-epochs 1 -q --checkpoint-dir late --save late.st 2>late.err
  echo $? >late.status
} | true
status=$(cat late.status)
[ "$status" -eq 1 ] || fail "| true: exit status $status, expected 1: $(cat late.err)"
grep -q "^cnnc: error: cannot write to standard output: nothing reads it any more" late.err ||
  fail "| true: the error does not say what went wrong: $(cat late.err)"
[ -e late.st ] && [ -e late/checkpoint-epoch-0001.safetensors ] ||
  fail "| true: the run's model or last checkpoint is missing: $(ls . late)"

# ---------------------------------------------------------------- ignored SIGINT and SIGTERM
# signal_run NAME SIGNALS COMMAND...: starts COMMAND in the background, sends each of SIGNALS
# (0.2 s apart) once epoch 2 has begun, and waits for it (60 s at most); sets $status. An
# epoch lasts a fraction of a second, so on a busy machine the signal may land in a later one.
signal_run() {
  name=$1 signals=$2
  shift 2
  "$@" >"$name.out" 2>"$name.err" &
  pid=$!
  wait_for "$name.out" "Epoch 2 step 3/" || fail "$name: no epoch 2: $(cat "$name.err")"
  for sig in $signals; do
    kill "-$sig" "$pid" || fail "$name: the run ended before SIG$sig"
    sleep 0.2
  done
  gone_within "$pid" 60 || fail "$name: still running 60 s after the signals"
  wait "$pid"
  status=$?
}

# shellcheck disable=SC2086
signal_run ignored "INT TERM" sh -c "trap '' INT TERM; exec \"\$@\"" sh "$cnnc" $job \
  --num-epochs 12
[ "$status" -eq 0 ] || fail "SIGINT and SIGTERM ignored by the parent stopped the run: exit" \
  "status $status: $(tail -n 2 ignored.out)"
grep -q "^Total Training time" ignored.out || fail "the run with ignored signals did not end"
grep -q "^Stopped by" ignored.out &&
  fail "ignored signals stopped the run: $(tail -n 2 ignored.out)"

# shellcheck disable=SC2086
signal_run default INT env --default-signal=INT "$cnnc" $job --num-epochs 12
[ "$status" -eq 130 ] || fail "SIGINT at its default action: exit status $status, expected 130"
grep -q "^Stopped by SIGINT at epoch \([2-9]\|1[0-2]\)," default.out ||
  fail "SIGINT at its default action did not stop the run: $(grep -v "^Epoch" default.out)"

finish
