#!/bin/sh
# cli_augment.sh — `cnnc train --augment SPEC` from the outside: an augmented run trains, says
# so at the start, gives other weights than a plain one, the same bytes on 1 and 2 threads (and
# as 2 processes under mpirun, when it works here), records the setting in its checkpoints, and
# a resume keeps it (bit-identical to a straight run) and refuses another; malformed specs and a
# padding the images cannot take are usage errors. The crops and flips themselves are
# test_augment's business. Needs Debian's Fashion-MNIST; skipped without it.
# Usage: sh tests/cli_augment.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

small="--train-samples 1024 --test-samples 128 --num-cores 2 --batch-size 32"
quiet="--result-image none --plot none -q"

run train $small $quiet --num-epochs 2 --threads 1 --augment crop=2,hflip --save t1.st \
  --checkpoint-dir straight
[ "$status" -eq 0 ] || fail "--augment crop=2,hflip on 1 thread: exit status $status: $(cat err)"
run train $small --result-image none --plot none --num-epochs 2 --threads 2 \
  --augment hflip,crop=2 --save t2.st
[ "$status" -eq 0 ] || fail "--augment hflip,crop=2 on 2 threads: exit status $status: $(cat err)"
grep -q "^  augment: random crop after zero padding 2, horizontal flip (training images only)$" \
  out || fail "the settings do not mention the augmentation: $(head -4 out)"
cmp -s t1.st t2.st || fail "--augment crop=2,hflip: 1 and 2 threads give different models"
run train $small --result-image none --plot none --num-epochs 2 --threads 2 --save plain.st
[ "$status" -eq 0 ] || fail "the plain run: exit status $status: $(cat err)"
grep -q "augment" out && fail "a plain run mentions augmentation: $(head -4 out)"
cmp -s t1.st plain.st && fail "--augment crop=2,hflip gives the same model as no augmentation"
run train $small $quiet --num-epochs 2 --threads 2 --augment none --save none.st
cmp -s none.st plain.st || fail "--augment none gives another model than no augmentation"
run train $small $quiet --num-epochs 2 --threads 2 --augment hflip --save flip.st
[ "$status" -eq 0 ] || fail "--augment hflip: exit status $status: $(cat err)"
cmp -s flip.st plain.st && fail "--augment hflip gives the same model as no augmentation"
cmp -s flip.st t1.st && fail "--augment hflip gives the same model as crop=2,hflip"

# ---------------------------------------------------------------- checkpoints and resume
last=straight/checkpoint-epoch-0002.safetensors
safetensors_header $last | grep -q '"augment":"crop=2,hflip"' ||
  fail "the checkpoint does not record augment crop=2,hflip: $(safetensors_header $last)"
safetensors_header flip.st | grep -q '"augment"' &&
  fail "a saved model (not a checkpoint) records augment"
run train $small $quiet --num-epochs 1 --threads 2 --augment crop=2,hflip --checkpoint-dir part
[ "$status" -eq 0 ] || fail "the 1-epoch run: exit status $status: $(cat err)"
expect 2 "--augment crop=3,hflip differs from the checkpoint's crop=2,hflip" \
  train --resume part --num-epochs 2 --augment crop=3,hflip
expect 2 "--augment none differs from the checkpoint's crop=2,hflip" \
  train --resume part --num-epochs 2 --augment none
run train --resume part --num-epochs 2 $quiet --test-samples 128 --augment hflip,crop=2 \
  --save r2.st --checkpoint-dir part2
[ "$status" -eq 0 ] || fail "the resume: exit status $status: $(cat err)"
cmp -s t1.st r2.st || fail "resumed after 1 epoch: the model differs from the straight run's"
rm -rf part2
run train --resume part --num-epochs 2 $quiet --test-samples 128 --save r3.st
[ "$status" -eq 0 ] || fail "the resume without --augment: exit status $status: $(cat err)"
cmp -s t1.st r3.st || fail "resumed without --augment: the model differs from the straight run's"

# ---------------------------------------------------------------- refusals
expect 2 "--augment: 'crop=2,vflip': unknown item 'vflip'" train $small --augment crop=2,vflip
expect 2 "--augment: 'crop=2,crop=3': crop is given twice" train $small --augment crop=2,crop=3
expect 2 "--augment: 'hflip,hflip': hflip is given twice" train $small --augment hflip,hflip
expect 2 "--augment: 'crop=x': P of crop=P must be an integer in 0..1024" \
  train $small --augment crop=x
expect 2 "--augment: 'crop=-1': P of crop=P" train $small --augment crop=-1
expect 2 "--augment: 'crop=2,': an empty item" train $small --augment crop=2,
expect 2 "--augment: 'none,hflip': unknown item 'none' .*none stands alone" \
  train $small --augment none,hflip
expect 2 "--augment crop=28: crop padding 28 is out of range for 28x28 images (0..27)" \
  train $small --augment crop=28
expect 2 "--augment" train $small --augment
[ "$(wc -l <err)" -le 2 ] || fail "a refusal says more than the error and the hint: $(cat err)"

# ---------------------------------------------------------------- processes
if have_mpi; then
  mpi_env
  # shellcheck disable=SC2086
  timeout 120 mpirun -np 2 "$cnnc" train $small $quiet --num-epochs 2 --threads 1 \
    --augment crop=2,hflip --save np2.st >out 2>err ||
    fail "2 processes with --augment: exit status $?: $(cat err)"
  cmp -s t1.st np2.st || fail "--augment crop=2,hflip: 2 processes give another model than 1"
  # shellcheck disable=SC2086
  if timeout 120 mpirun \
    -np 1 "$cnnc" train $small $quiet --num-epochs 1 --augment hflip : \
    -np 1 "$cnnc" train $small $quiet --num-epochs 1 --augment crop=2,hflip >out 2>err ||
    ! grep -q "rank 1 runs with another --augment than rank 0" err; then
    fail "ranks with different --augment were not refused: $(cat err)"
  fi
else
  echo "$suite: skipped the checks with 2 processes: mpirun or MPI in this cnnc is missing"
fi
finish
