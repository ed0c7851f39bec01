#!/bin/sh
# cli_basic.sh — checks the cnnc command line from the outside: help and version, refusal of
# bad flags (exit 2, message naming the flag), failures before any output is written (exit 1),
# and, when Debian's Fashion-MNIST is installed, a tiny train run with all its outputs and an
# eval of the saved model. It does not check the numerics; the C tests do.
# Usage: sh tests/cli_basic.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp
mkdir "$tmp/work"
cd "$tmp/work" || exit 1

# expect_usage NAME ARGS...: exit status 2 and NAME (a flag or argument) in the message.
expect_usage() {
  usage_name=$1
  shift
  expect 2 "cnnc: error: .*$usage_name" "$@"
}

expect_absent() {
  for f in "$@"; do
    [ -e "$f" ] && fail "$f was created by a failing run"
  done
}

train_flags="--data-dir --batch-size --learning-rate --momentum --num-epochs --num-cores
  --threads --log-steps --metrics-debug --seed --precision --train-samples --test-samples --save
  --result-image --metrics-file --checkpoint-dir --save-every --keep --resume --help"
eval_flags="--checkpoint --data-dir --test-samples --threads --batch-size --help"
predict_flags="--checkpoint --idx --index --invert --help"

# ---------------------------------------------------------------- help and version
# expect_help COMMAND TEXT...: `cnnc COMMAND --help` (COMMAND "": `cnnc --help`) succeeds and
# shows every TEXT.
expect_help() {
  help_command=$1
  shift
  run ${help_command:+"$help_command"} --help
  [ "$status" -eq 0 ] || fail "cnnc${help_command:+ $help_command} --help: exit status $status"
  for text in "$@"; do
    grep -q -e "$text" "$tmp/out" ||
      fail "cnnc${help_command:+ $help_command} --help does not show '$text'"
  done
}
expect_help "" train eval predict plot info
# shellcheck disable=SC2086
expect_help train $train_flags "default: 128" "default: 1)" "default: 3)" \
  "exits with status 130 or 143"
# shellcheck disable=SC2086
expect_help eval $eval_flags
# shellcheck disable=SC2086
expect_help predict $predict_flags
run --version
if [ "$status" -ne 0 ] || ! grep -q '[0-9]\.[0-9]' "$tmp/out"; then
  fail "cnnc --version: exit status $status: $(cat "$tmp/out")"
fi

# ---------------------------------------------------------------- bad usage: exit 2
while read -r flag value; do
  expect_usage "$flag" train "$flag" "$value"
done <<EOF
--batch-size abc
--batch-size 0
--batch-size -1
--batch-size 65537
--batch-size 99999999999999999999
--batch-size 12x
--learning-rate 0
--learning-rate -0.1
--learning-rate abc
--learning-rate nan
--learning-rate inf
--learning-rate 1e99
--momentum 1
--momentum -0.5
--momentum x
--num-epochs 0
--num-epochs -3
--num-epochs 100001
--num-cores 0
--num-cores 1025
--threads 0
--threads 1025
--threads two
--log-steps 0
--log-steps -1
--seed -1
--seed abc
--seed 18446744073709551616
--precision fp16
--precision FP32
--precision ""
--train-samples -1
--train-samples 1.5
--test-samples -1
--test-samples 99999999999999999999
EOF
expect_usage --batch-size train --batch-size ""
expect_usage --batch-size train --batch-size
expect_usage --bogus train --bogus
expect_usage --metrics-debug train --metrics-debug=yes
expect_usage stray train stray
expect_usage nonsense nonsense
expect_usage command
expect_usage --checkpoint eval
expect_usage --checkpoint eval --checkpoint
expect_usage --test-samples eval --checkpoint x --test-samples -1
expect_usage --batch-size eval --checkpoint x --batch-size 0
expect_usage --threads eval --checkpoint x --threads abc
expect_usage --bogus eval --bogus
env CNNC_ISA=no-such-isa "$cnnc" train >"$tmp/out" 2>"$tmp/err"
status=$?
if [ "$status" -ne 2 ] || ! grep -q "CNNC_ISA" "$tmp/err"; then
  fail "CNNC_ISA=no-such-isa cnnc train: exit status $status: $(cat "$tmp/err")"
fi
env CNNC_BF16=no-such-kernels "$cnnc" train >"$tmp/out" 2>"$tmp/err"
status=$?
if [ "$status" -ne 2 ] || ! grep -q "CNNC_BF16=no-such-kernels: unknown" "$tmp/err"; then
  fail "CNNC_BF16=no-such-kernels cnnc train: exit status $status: $(cat "$tmp/err")"
fi
# The kernels of the other processor family are named as such, not as a CPU's lack.
if "$cnnc" info --threads 1 | grep -q "^Platform:  arm64"; then other=avx512; else other=neon; fi
env CNNC_ISA=$other "$cnnc" train >"$tmp/out" 2>"$tmp/err"
status=$?
if [ "$status" -ne 2 ] || ! grep -q "CNNC_ISA=$other: kernels of another processor family" "$tmp/err"; then
  fail "CNNC_ISA=$other cnnc train: exit status $status: $(cat "$tmp/err")"
fi
expect_absent test_result.png

# The last --precision counts (make train-best TRAIN_ARGS='--precision fp32' on a CPU without
# AVX512_BF16): fp32 after bf16 gets on to the data; bf16 after fp32 asks the CPU.
expect 1 dataset-fashion-mnist train --precision bf16 --precision fp32 --data-dir "$tmp/no-such-data"
if "$cnnc" info --threads 1 | grep -q "^BF16: *none"; then
  expect 2 "--precision bf16: this CPU cannot run it" train --precision fp32 --precision bf16
fi

# ---------------------------------------------------------------- failures before work: exit 1
expect 1 dataset-fashion-mnist train --data-dir "$tmp/no-such-data" --save m0.safetensors
expect_absent test_result.png m0.safetensors
expect 1 "--save" train --save "$tmp/no-such-folder/m.safetensors"
expect 1 "--result-image" train --result-image "$tmp"
expect_absent test_result.png
expect 1 "$tmp/missing.safetensors" eval --checkpoint "$tmp/missing.safetensors"
printf 'this is not a safetensors file, just some text of a decent length\n' >"$tmp/garbage.st"
expect 1 "$tmp/garbage.st" eval --checkpoint "$tmp/garbage.st"

# ---------------------------------------------------------------- a tiny run (needs the data)
if have_data "the training checks"; then
  expect_usage --num-cores train --train-samples 100 --result-image none
  expect_absent test_result.png

  run train --num-epochs 1 --train-samples 2048 --test-samples 500 --num-cores 2 \
    --batch-size 64 --save "$tmp/m.safetensors" --metrics-file "$tmp/m.jsonl" \
    --result-image "$tmp/r.png" --threads 2
  cp "$tmp/out" "$tmp/train.out"
  [ "$status" -eq 0 ] || fail "tiny train run: exit status $status: $(cat "$tmp/err")"
  for text in "Finished training epoch 1" "test loss" "Total Training time =" "step 0/16"; do
    grep -q "$text" "$tmp/train.out" || fail "tiny train run does not print '$text'"
  done
  [ -s "$tmp/m.safetensors" ] || fail "no safetensors file"
  [ "$(dd if="$tmp/m.safetensors" bs=1 skip=8 count=1 2>/dev/null)" = "{" ] ||
    fail "m.safetensors has no JSON header after the length"
  grep -aq '"conv1.weight"' "$tmp/m.safetensors" 2>/dev/null || fail "m.safetensors lacks conv1.weight"
  signature=$(head -c 8 "$tmp/r.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  [ "$signature" = "89504e470d0a1a0a" ] || fail "r.png is not a PNG (starts with $signature)"
  if [ ! -f "$tmp/m.jsonl" ]; then
    fail "no metrics file m.jsonl"
  elif [ "$(wc -l <"$tmp/m.jsonl")" -ne 1 ]; then
    fail "m.jsonl should have 1 line: $(cat "$tmp/m.jsonl")"
  else
    for key in epoch train_loss train_accuracy test_loss test_accuracy epoch_seconds \
      train_samples_per_second eval_seconds; do
      grep -q "\"$key\":" "$tmp/m.jsonl" || fail "m.jsonl lacks $key"
    done
  fi
  expect_absent test_result.png

  train_accuracy=$(sed -n 's/.* test loss [0-9.]* acc \([0-9.]*%\) .*/Accuracy=\1/p' \
    "$tmp/train.out" | tail -n 1)
  run eval --checkpoint "$tmp/m.safetensors" --test-samples 500 --threads 2
  [ "$status" -eq 0 ] || fail "eval: exit status $status: $(cat "$tmp/err")"
  eval_accuracy=$(grep -x 'Accuracy=[0-9.]*%' "$tmp/out")
  if [ -z "$train_accuracy" ] || [ "$eval_accuracy" != "$train_accuracy" ]; then
    fail "eval says '$eval_accuracy', the train run said '$train_accuracy'"
  fi

  # The default picture lands in the working folder; --threads never changes the weights.
  small="train --num-epochs 1 --train-samples 512 --test-samples 30 --num-cores 2 --batch-size 32"
  # shellcheck disable=SC2086
  run $small --threads 1 --save "$tmp/t1.safetensors"
  [ "$status" -eq 0 ] || fail "small run: exit status $status: $(cat "$tmp/err")"
  [ -f test_result.png ] || fail "the default --result-image test_result.png was not written"
  # shellcheck disable=SC2086
  run $small --threads 3 --save "$tmp/t3.safetensors" --result-image none
  [ "$status" -eq 0 ] || fail "small run with 3 threads: exit status $status"
  cmp -s "$tmp/t1.safetensors" "$tmp/t3.safetensors" ||
    fail "--threads 1 and --threads 3 saved different models"
fi

finish
