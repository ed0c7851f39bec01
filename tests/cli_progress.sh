#!/bin/sh
# cli_progress.sh — what `cnnc train` shows while it runs: under a pseudo-terminal (script(1)) a
# bar redrawn in place with \r, never wider than the terminal, with the epoch's mean loss and
# training accuracy so far (at the epoch's end they are the summary's), the elapsed time and the
# time left, samples/s where there is room, ended by the epoch summaries; in a pipe only whole
# lines (the step losses, "Finished training epoch N") and no \r at all; the settings and the
# summaries fit 80 columns and say "1 thread", not "1 threads"; --quiet keeps the last summary
# and the total time only; --verbose adds the time breakdown. Needs Debian's Fashion-MNIST;
# skips without it.
# Usage: sh tests/cli_progress.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
require_data
command -v script >/dev/null || { echo "FAIL: script(1) from bsdutils is missing"; exit 1; }
make_tmp
cd "$tmp" || exit 1

cr=$(printf '\r')
# 2 epochs of 64 steps each (8192 images / 2 replicas / 64).
small="train --num-epochs 2 --train-samples 8192 --test-samples 500 --num-cores 2 --batch-size 64
  --threads 2 --result-image none --plot none"

# Runs cnnc under a pseudo-terminal of the given width; the session's output in $tmp/tty.
on_terminal() { # on_terminal COLUMNS TERM ARGS...
  columns=$1 term=$2
  shift 2
  script -qec "env COLUMNS=$columns TERM=$term $cnnc $*" /dev/null </dev/null >"$tmp/tty" 2>&1
  status=$?
}

# Redraws: a \r that does not end a line (the terminal itself turns every \n into \r\n).
redraws() { sed "s/$cr\$//" "$1" | grep -o "$cr" | wc -l; }
# The widest bar drawn: the longest piece between \r and \n that shows "Epoch N/M" and is not
# an epoch's summary.
bar_width() {
  tr "$cr" '\n' <"$1" | awk '/^Epoch [0-9]+\/[0-9]+/ && !/train loss/ {
    if (length($0) > w) w = length($0) } END { print w + 0 }'
}
# The last bar of epoch E (its step count 64/64) and its summary line, as "loss acc" each.
last_bar() {
  tr "$cr" '\n' <"$1" | sed -n "s|^Epoch $2/2 .* 64/64 loss \([0-9.]*\) acc \([0-9.]*\)%.*|\1 \2|p" |
    tail -n 1
}
summary() {
  tr "$cr" '\n' <"$1" |
    sed -n "s|^Epoch $2/2  train loss \([0-9.]*\) acc \([0-9.]*\)%  test loss.*|\1 \2|p"
}

# ---------------------------------------------------------------- a terminal: the bar
# shellcheck disable=SC2086
on_terminal 80 xterm $small
[ "$status" -eq 0 ] || fail "train on a terminal: exit status $status: $(cat "$tmp/tty")"
n=$(redraws "$tmp/tty")
[ "$n" -ge 4 ] || fail "on a terminal the bar was drawn $n times, expected at least 2 per epoch"
for text in "Epoch 1/2 \[" "Epoch 2/2 \[" " 64/64 " " elapsed, " " left" "loss " " acc "; do
  grep -q "$text" "$tmp/tty" || fail "the bar lacks '$text': $(head -c 600 "$tmp/tty")"
done
for epoch in 1 2; do
  grep -q "Epoch $epoch/2  train loss .* acc .*%  test loss .* acc .*%" "$tmp/tty" ||
    fail "no summary line for epoch $epoch on a terminal"
  # the bar shows the epoch's mean loss and accuracy so far, not the last step's
  [ -n "$(summary "$tmp/tty" $epoch)" ] &&
    [ "$(last_bar "$tmp/tty" $epoch)" = "$(summary "$tmp/tty" $epoch)" ] ||
    fail "epoch $epoch: the last bar shows '$(last_bar "$tmp/tty" $epoch)', the summary" \
      "'$(summary "$tmp/tty" $epoch)'"
done
tr "$cr" '\n' <"$tmp/tty" | grep -v '^Epoch [0-9]*/[0-9]* [[ ]' |
  awk -v f="$tmp/long" 'length($0) > 79 { print > f }'
[ -s "$tmp/long" ] && fail "lines wider than 80 columns: $(cat "$tmp/long")"
# A wide terminal has room for the rate as well.
# shellcheck disable=SC2086
on_terminal 120 xterm $small
grep -q " samples/s" "$tmp/tty" || fail "a 120-column bar lacks samples/s: $(head -c 600 "$tmp/tty")"
# shellcheck disable=SC2086
on_terminal 80 xterm $small
grep -q "Epoch 1 step 0/64" "$tmp/tty" && fail "a terminal got the plain step lines too"
grep -q "Finished training epoch" "$tmp/tty" && fail "a terminal got 'Finished training epoch'"
grep -q "Total Training time =" "$tmp/tty" || fail "no total time on a terminal"
# Every piece between \r and \n fits the terminal, so the bar never wraps.
widest=$(bar_width "$tmp/tty")
[ "$widest" -ge 60 ] && [ "$widest" -le 79 ] ||
  fail "a bar line is $widest characters wide on an 80-column terminal"

# A narrow terminal: the bar shrinks or goes, the line is cut, nothing wraps.
# shellcheck disable=SC2086
on_terminal 50 xterm $small
[ "$status" -eq 0 ] || fail "train on a 50-column terminal: exit status $status"
widest=$(bar_width "$tmp/tty")
[ "$widest" -ge 20 ] && [ "$widest" -le 49 ] ||
  fail "on a 50-column terminal the bar line is $widest characters wide"

# --quiet on a terminal: no bar either.
# shellcheck disable=SC2086
on_terminal 80 xterm $small --quiet
[ "$(redraws "$tmp/tty")" -eq 0 ] || fail "--quiet on a terminal still draws a bar"
# TERM=dumb cannot redraw: plain lines.
# shellcheck disable=SC2086
on_terminal 80 dumb $small
[ "$(redraws "$tmp/tty")" -eq 0 ] || fail "TERM=dumb still gets a bar"
grep -q "Epoch 1 step 0/64 Loss=" "$tmp/tty" || fail "TERM=dumb lacks the plain step lines"

# ---------------------------------------------------------------- a pipe: plain lines
# shellcheck disable=SC2086
"$cnnc" $small --log-steps 20 2>"$tmp/err" | cat >"$tmp/pipe"
grep -q "$cr" "$tmp/pipe" && fail "output into a pipe contains \\r"
for text in "Epoch 1 step 0/64 Loss=" "Epoch 1 step 60/64 Loss=" "Epoch 2 step 40/64 Loss=" \
  "Finished training epoch 1" "Finished training epoch 2" "Epoch 2/2  train loss " \
  "Total Training time ="; do
  grep -q "$text" "$tmp/pipe" || fail "output into a pipe lacks '$text'"
done
steps=$(grep -c "step [0-9]*/64 Loss=" "$tmp/pipe")
[ "$steps" -eq 8 ] || fail "--log-steps 20 over 2 x 64 steps printed $steps step lines, not 8"
[ -s "$tmp/err" ] && fail "a good run wrote to stderr: $(cat "$tmp/err")"

# ---------------------------------------------------------------- --quiet and --verbose
# shellcheck disable=SC2086
"$cnnc" $small --quiet >"$tmp/quiet" 2>&1
[ "$(wc -l <"$tmp/quiet")" -eq 2 ] ||
  fail "--quiet printed more than two lines: $(cat "$tmp/quiet")"
grep -q "^Epoch 2/2 .* test loss [0-9.]* acc [0-9.]*%" "$tmp/quiet" ||
  fail "--quiet lacks the final summary"
grep -q "^Total Training time =" "$tmp/quiet" || fail "--quiet lacks the total time"
# shellcheck disable=SC2086
"$cnnc" $small -v >"$tmp/verbose" 2>&1
for epoch in 1 2; do
  grep -q "^Epoch $epoch time: data .* forward .* backward .* eval .*; epoch" "$tmp/verbose" ||
    fail "--verbose lacks epoch $epoch's time breakdown"
done
grep -q "Finished training epoch 2" "$tmp/verbose" || fail "--verbose dropped the normal lines"
grep -q "Epoch 1 time:" "$tmp/pipe" && fail "the normal level shows the time breakdown"

# ---------------------------------------------------------------- English for one of a kind
"$cnnc" train --num-epochs 1 --train-samples 512 --test-samples 100 --num-cores 1 \
  --batch-size 512 --threads 1 --result-image none --plot none >"$tmp/one" 2>&1
grep -q "^cnnc [0-9.]*: 1 epoch of 1 step, 1 replica x batch 512, 1 thread (" "$tmp/one" ||
  fail "the settings of a run of one: $(head -n 3 "$tmp/one")"
grep -q "1 threads\|1 epochs\|1 replicas\|1 steps" "$tmp/one" && fail "plurals: $(cat "$tmp/one")"
awk 'length($0) > 79' "$tmp/pipe" "$tmp/one" >"$tmp/long"
[ -s "$tmp/long" ] && fail "lines wider than 80 columns: $(cat "$tmp/long")"

finish
