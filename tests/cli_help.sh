#!/bin/sh
# cli_help.sh — checks how the cnnc command line helps a user who is finding their way: the
# short overview of `cnnc --help`, `cnnc help COMMAND` as `cnnc COMMAND --help`, the "did you
# mean" hints for mistyped flags and commands (and none when nothing is close), prefixes of
# flags, and --replicas as the same setting as --num-cores (same model bytes, conflicting
# values refused, resume). It does not check the numerics; the C tests do.
# Usage: sh tests/cli_help.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp
cd "$tmp" || exit 1
commands="train eval predict plot info summary"

# ---------------------------------------------------------------- the overview
run --help
cp out overview
[ "$status" -eq 0 ] || fail "cnnc --help: exit status $status"
lines=$(wc -l <overview)
[ "$lines" -le 30 ] || fail "cnnc --help is $lines lines long (at most 30)"
for command in $commands help; do
  grep -q "^  $command  " overview || fail "cnnc --help does not list the command $command"
done
for text in "cnnc COMMAND --help" "cnnc help COMMAND" "man cnnc" "--version"; do
  grep -q -e "$text" overview || fail "cnnc --help does not mention '$text'"
done
for args in help -h; do
  run $args
  [ "$status" -eq 0 ] && cmp -s out overview || fail "cnnc $args differs from cnnc --help"
done

# ---------------------------------------------------------------- help COMMAND
for command in $commands; do
  run "$command" --help
  cp out "help-$command"
  [ "$status" -eq 0 ] && [ -s out ] || fail "cnnc $command --help: exit status $status"
  for form in "help $command" "--help $command"; do
    # shellcheck disable=SC2086 # form is two words
    run $form
    [ "$status" -eq 0 ] || fail "cnnc $form: exit status $status: $(cat err)"
    cmp -s out "help-$command" || fail "cnnc $form differs from cnnc $command --help"
    [ -s err ] && fail "cnnc $form wrote to stderr: $(cat err)"
  done
done

# ---------------------------------------------------------------- mistakes and hints
# expect_line TEXT ARGS...: cnnc ARGS exits with status 2, and its one error line is exactly
# "cnnc: error: TEXT".
expect_line() {
  line_text=$1
  shift
  run "$@"
  if [ "$status" -ne 2 ]; then
    fail "cnnc $*: exit status $status, expected 2: $(cat err)"
  elif [ "$(grep 'cnnc: error:' err)" != "cnnc: error: $line_text" ]; then
    fail "cnnc $*: said '$(grep 'cnnc: error:' err)', expected 'cnnc: error: $line_text'"
  fi
}
expect_line "unknown option '--epochs' (did you mean --warmup-epochs, --lr-step-epochs or \
--num-epochs?)" train --epochs 3
expect_line "unknown option '--cores' (did you mean --num-cores?)" train --cores 2
expect_line "ambiguous option '--lr' (could be --lr-schedule, --lr-step-epochs or --lr-gamma; \
did you mean --learning-rate?)" train --lr 0.1
expect_line "ambiguous option '--lr' (could be --lr-schedule, --lr-step-epochs or --lr-gamma; \
did you mean --learning-rate?)" train --lr=0.1
expect_line "unknown option '--lerning-rate' (did you mean --learning-rate?)" \
  train --lerning-rate 0.1
expect_line "unknown option '--Seed' (did you mean --seed?)" train --Seed=3
expect_line "unknown option '--sample' (did you mean --train-samples, --test-samples or \
--val-samples?)" train --sample 9
expect_line "ambiguous option '--s' (could be --seed, --save or --save-every)" train --s 1
expect_line "ambiguous option '--metrics' (could be --metrics-debug or --metrics-file)" \
  train --metrics=x
expect_line "unknown option '--zzzzz'" train --zzzzz
expect_line "unknown option '--num-epochs'" eval --num-epochs 3
expect_line "unknown option '--outptu' (did you mean --output?)" plot m.jsonl --outptu x
expect_line "unknown option '--invrt' (did you mean --invert?)" predict --invrt
expect_line "unknown option '--treads' (did you mean --threads?)" info --treads 2
expect_line "unknown command 'tarin' (did you mean train?)" tarin
expect_line "unknown command 'evaluate' (did you mean eval?)" evaluate
expect_line "unknown command 'tarin' (did you mean train?)" help tarin
expect_line "unknown command 'nosuch' (the commands: train, eval, predict, plot, info, summary \
or help)" help nosuch
expect_line "unknown option '--verison' (did you mean --version?)" --verison
expect_line "unexpected argument 'eval' (help takes one command)" help train eval
expect_line "--metrics-debug: takes no value" train --metrics-debug=yes
# A prefix that names one flag alone is that flag: the value is checked as --num-epochs'.
expect_line "--num-epochs: '0' is out of range (1..100000)" train --num-ep 0
expect_line "--learning-rate: '0' must be greater than 0" train --learning-r=0

# ---------------------------------------------------------------- --replicas
expect_line "--num-cores 3 and --replicas 2 differ: they are one setting (the number of \
replicas); give one of them" train --replicas 2 --num-cores 3
expect_line "--replicas: '0' is out of range (1..1024)" train --replicas 0
grep -q -e "--replicas N" help-train || fail "cnnc train --help does not list --replicas"
grep -q -e "averaged" help-train || fail "cnnc train --help does not say what a replica is"
grep -qF '\-\-replicas' "$root/man/cnnc.1" || fail "man/cnnc.1 does not document --replicas"
# Equal values agree: the run gets past the flags to the (missing) data.
run train --replicas 2 --num-cores 2 --data-dir "$tmp/none"
[ "$status" -eq 1 ] && grep -q "$tmp/none" err ||
  fail "--replicas 2 --num-cores 2: exit status $status: $(cat err)"

if have_data "the training runs with --replicas"; then
  tiny="--train-samples 512 --test-samples 100 --num-epochs 1 --batch-size 32 --threads 2
    --result-image none --plot none"
  # shellcheck disable=SC2086
  run train $tiny --replicas 2 --save replicas.st --checkpoint-dir ck
  [ "$status" -eq 0 ] || fail "train --replicas 2: exit status $status: $(cat err)"
  grep -q "2 replicas x batch 32" out || fail "train --replicas 2: $(head -n 1 out)"
  # shellcheck disable=SC2086
  run train $tiny --num-cores 2 --save cores.st
  [ "$status" -eq 0 ] || fail "train --num-cores 2: exit status $status: $(cat err)"
  cmp -s replicas.st cores.st || fail "--replicas 2 and --num-cores 2 saved different models"
  # A resumed run keeps the checkpoint's replicas, under either name.
  expect_line "--num-cores/--replicas 4 differs from the checkpoint's 2 \
(ck/checkpoint-epoch-0001.safetensors): a resumed run keeps the settings that define the math; \
leave --num-cores/--replicas out to use it" train --resume ck --num-epochs 2 --replicas 4
  # shellcheck disable=SC2086
  run train $tiny --resume ck --num-epochs 2 --replicas 2
  [ "$status" -eq 0 ] || fail "--resume with the same --replicas: exit status $status: $(cat err)"
fi

finish
