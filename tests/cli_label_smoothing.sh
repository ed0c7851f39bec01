#!/bin/sh
# cli_label_smoothing.sh — `cnnc train --label-smoothing A` from the outside: a smoothed run
# trains, gives other weights than an unsmoothed one, the same bytes on 1 and 2 threads, records
# A in its checkpoints, and a resume keeps A (bit-identical to a straight run) and refuses
# another; out-of-range values are usage errors. The numbers themselves are test_layers' and
# test_model_steps' business. Needs Debian's Fashion-MNIST; skipped without it.
# Usage: sh tests/cli_label_smoothing.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

small="--train-samples 1024 --test-samples 128 --num-cores 2 --batch-size 32"
quiet="--result-image none --plot none -q"

run train $small $quiet --num-epochs 2 --threads 1 --label-smoothing 0.1 --save t1.st \
  --checkpoint-dir straight
[ "$status" -eq 0 ] || fail "--label-smoothing 0.1 on 1 thread: exit status $status: $(cat err)"
run train $small --result-image none --plot none --num-epochs 2 --threads 2 \
  --label-smoothing 0.1 --save t2.st
[ "$status" -eq 0 ] || fail "--label-smoothing 0.1 on 2 threads: exit status $status: $(cat err)"
grep -q "^  loss: cross-entropy with label smoothing 0.1 " out ||
  fail "the settings do not mention the label smoothing: $(head -3 out)"
cmp -s t1.st t2.st || fail "--label-smoothing 0.1: 1 and 2 threads give different models"
run train $small $quiet --num-epochs 2 --threads 2 --save plain.st
[ "$status" -eq 0 ] || fail "the unsmoothed run: exit status $status: $(cat err)"
cmp -s t1.st plain.st && fail "--label-smoothing 0.1 gives the same model as no smoothing"
run train $small $quiet --num-epochs 2 --threads 2 --label-smoothing 0 --save zero.st
cmp -s zero.st plain.st || fail "--label-smoothing 0 gives another model than no smoothing"

# ---------------------------------------------------------------- checkpoints and resume
last=straight/checkpoint-epoch-0002.safetensors
safetensors_header $last | grep -q '"label_smoothing":"0.1"' ||
  fail "the checkpoint does not record label_smoothing 0.1: $(safetensors_header $last)"
run train $small $quiet --num-epochs 1 --threads 2 --label-smoothing 0.1 --checkpoint-dir part
[ "$status" -eq 0 ] || fail "the 1-epoch run: exit status $status: $(cat err)"
expect 2 "--label-smoothing 0.2 differs from the checkpoint's 0.1" \
  train --resume part --num-epochs 2 --label-smoothing 0.2
expect 2 "--label-smoothing 0 differs from the checkpoint's 0.1" \
  train --resume part --num-epochs 2 --label-smoothing 0
run train --resume part --num-epochs 2 $quiet --test-samples 128 --save r2.st
[ "$status" -eq 0 ] || fail "the resume: exit status $status: $(cat err)"
cmp -s t1.st r2.st || fail "resumed after 1 epoch: the model differs from the straight run's"

# ---------------------------------------------------------------- refusals
expect 2 "--label-smoothing: '1' is out of range" train $small --label-smoothing 1
expect 2 "--label-smoothing: '-0.1' is out of range" train $small --label-smoothing -0.1
expect 2 "--label-smoothing" train $small --label-smoothing abc
finish
