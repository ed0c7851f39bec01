#!/bin/sh
# cli_recipes.sh — `cnnc train` with the optimisers and learning-rate schedules of its flags
# (--optimizer, --nesterov, --weight-decay, --lr-schedule, --warmup-epochs, --lr-step-epochs,
# --lr-gamma) from the outside: each trains to other weights than the defaults; adamw with a
# cosine schedule after a warmup gives the same bytes on 1 and 2 threads (and, when mpirun is
# there, in 2 processes), resumes from an epoch's checkpoint and from a stop inside an epoch to
# the straight run's model, metrics and curves; the metrics file's learning_rate follows the
# schedule, and `cnnc plot` draws the curves `cnnc train --plot` does; bad values, values that
# differ from a resumed checkpoint's and a new length of a cosine run are usage errors. The
# update rules and rates themselves are test_optimizers',
# test_lr_schedule's and test_trainer_schedule's business. Needs Debian's Fashion-MNIST;
# skipped without it.
# Usage: sh tests/cli_recipes.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

# 512 images, 2 replicas x 32: 8 steps an epoch.
small="--train-samples 512 --test-samples 64 --num-cores 2 --batch-size 32 --threads 2"
quiet="--result-image none --plot none -q"
recipe="--optimizer adamw --learning-rate 0.001 --weight-decay 0.01 --lr-schedule cosine
  --warmup-epochs 1"


# math FILE: the metrics lines without their timings.
math() {
  sed 's/,"epoch_seconds".*"train_samples":/,"train_samples":/;
       s/,"data_seconds".*"communicate_seconds":[^,}]*//' "$1"
}

# rates FILE: each epoch's learning_rate, one a line.
rates() {
  sed 's/.*"learning_rate":\([^,}]*\).*/\1/' "$1"
}

# ---------------------------------------------------------------- each recipe trains
# shellcheck disable=SC2086
run train $small $quiet --num-epochs 2 --save plain.st
[ "$status" -eq 0 ] || fail "the default run: exit status $status: $(cat err)"
i=0
for flags in "--optimizer adamw --learning-rate 0.001" "--optimizer sgd --nesterov" \
  "--weight-decay 0.05" "--lr-schedule step --lr-step-epochs 1 --lr-gamma 0.5" \
  "--lr-schedule cosine" "--lr-schedule onecycle" "--warmup-epochs 1"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  run train $small $quiet --num-epochs 2 $flags --save "r$i.st"
  [ "$status" -eq 0 ] || fail "$flags: exit status $status: $(cat err)"
  cmp -s plain.st "r$i.st" && fail "$flags gives the same model as the defaults"
done

# ---------------------------------------------------------------- threads, settings, rates
# shellcheck disable=SC2086
run train $small --result-image none --plot straight.png $recipe --num-epochs 3 --threads 1 \
  --save t1.st --metrics-file straight.jsonl --checkpoint-dir straight
[ "$status" -eq 0 ] || fail "adamw+cosine on 1 thread: exit status $status: $(cat err)"
grep -q "^  AdamW: learning rate 0.002 (0.001 x 2), betas 0.9 0.999, seed 1, fp32$" out ||
  fail "the settings do not name adamw: $(head -4 out)"
grep -q "^  schedule: cosine over 3 epochs, warmup 1 epoch, weight decay 0.01$" out ||
  fail "the settings do not give the schedule: $(head -4 out)"
# shellcheck disable=SC2086
run train $small $quiet $recipe --num-epochs 3 --save t2.st
[ "$status" -eq 0 ] || fail "adamw+cosine on 2 threads: exit status $status: $(cat err)"
cmp -s t1.st t2.st || fail "adamw+cosine+warmup: 1 and 2 threads give different models"
ck=straight/checkpoint-epoch-0001.safetensors
for pair in '"optimizer":"adamw"' '"nesterov":"0"' '"weight_decay":"0.01"' \
  '"optimizer_steps":"8"' '"lr_schedule":"cosine"' '"warmup_steps":"8"' \
  '"lr_total_steps":"24"' '"adamw_beta2":"0.999"'; do
  safetensors_header "$ck" | grep -q "$pair" || fail "$ck does not record $pair"
done
safetensors_header "$ck" | grep -q 'optimizer.fc2.bias.exp_avg_sq' || fail "$ck holds no exp_avg_sq"
safetensors_header "$ck" | grep -q 'momentum_buffer' && fail "$ck of an adamw run holds momentum buffers"
# The last step of each epoch: warmup (1/3 + 2/3 x 7/8 of the rate), then cosine falling.
# shellcheck disable=SC2046
set -- $(rates straight.jsonl)
[ $# -eq 3 ] || fail "straight.jsonl: $# learning rates: $(cat straight.jsonl)"
awk -v a="${1:-}" -v b="${2:-}" -v c="${3:-}" 'BEGIN { pi = atan2(0, -1);
  exit !((a - 0.001 * (1 / 3 + 2 / 3 * 7 / 8))^2 < 1e-18 && b > c && c > 0 &&
         (b - 0.001 * (1 + cos(pi * 7 / 16)) / 2)^2 < 1e-18) }' ||
  fail "the learning rates $* do not follow the warmup and the cosine"
# shellcheck disable=SC2086
run train $small $quiet --num-epochs 4 --lr-schedule cosine --warmup-epochs 2 \
  --metrics-file rising.jsonl
# shellcheck disable=SC2046
set -- $(rates rising.jsonl)
awk -v a="${1:-}" -v b="${2:-}" -v c="${3:-}" -v d="${4:-}" \
  'BEGIN { exit !(a < b && b > c && c > d) }' ||
  fail "warmup 2 then cosine over 4 epochs: the rates $* do not rise then fall"
# shellcheck disable=SC2086
run train $small $quiet --num-epochs 2 --metrics-file flat.jsonl
[ "$(rates flat.jsonl | sort -u)" = "0.00999999978" ] ||
  fail "a constant rate: learning_rate is not --learning-rate: $(rates flat.jsonl)"

# ---------------------------------------------------------------- resume
run train --resume "$ck" $quiet --save from1.st --metrics-file from1.jsonl --plot from1.png
[ "$status" -eq 0 ] || fail "resuming from epoch 1: exit status $status: $(cat err)"
cmp -s t1.st from1.st || fail "resumed from epoch 1 of 3: the model differs from the straight run"
cmp -s straight.png from1.png ||
  fail "resumed from epoch 1: the curves (losses, accuracy, rate) differ from the straight run's"
"$cnnc" plot straight.jsonl -o replotted.png >/dev/null 2>&1 || fail "cnnc plot straight.jsonl"
cmp -s straight.png replotted.png || fail "cnnc plot draws other curves than cnnc train --plot"
math straight.jsonl | tail -2 >want.jsonl
math from1.jsonl >got.jsonl
cmp -s want.jsonl got.jsonl ||
  fail "resumed from epoch 1: other metrics: $(cat got.jsonl) instead of $(cat want.jsonl)"
# A stop inside an epoch (stdout closed after a few step lines, as cli_signals.sh does).
# shellcheck disable=SC2086
{
  timeout 60 "$cnnc" train $small --result-image none --plot none $recipe --num-epochs 3 \
    --log-steps 1 --checkpoint-dir piped 2>piped.err
  echo $? >piped.status
} | head -19 >/dev/null
[ "$(cat piped.status)" -eq 141 ] || fail "| head -19: exit status $(cat piped.status)"
ls piped/checkpoint-epoch-0002-step-*.safetensors >/dev/null 2>&1 ||
  fail "| head -19: no checkpoint inside epoch 2: $(ls piped 2>&1)"
run train --resume piped $quiet --save piped.st
[ "$status" -eq 0 ] || fail "resuming the stopped run: exit status $status: $(cat err)"
cmp -s t1.st piped.st || fail "stopped inside an epoch and resumed: other weights"

# ---------------------------------------------------------------- refusals
expect 2 "--optimizer: 'adam' is not sgd or adamw" train $small --optimizer adam
expect 2 "--weight-decay: '-1' must be at least 0" train $small --weight-decay -1
expect 2 "--lr-schedule: 'linear' is not constant, step" train $small --lr-schedule linear
expect 2 "--warmup-epochs" train $small --warmup-epochs -1
expect 2 "--lr-gamma: '0' must be greater than 0" train $small --lr-schedule step \
  --lr-step-epochs 1 --lr-gamma 0
expect 2 "--lr-step-epochs" train $small --lr-schedule step --lr-step-epochs 0
expect 2 "--momentum is sgd's: adamw does not use it" train $small --optimizer adamw \
  --momentum 0.9
expect 2 "--nesterov is sgd's" train $small --optimizer adamw --nesterov
expect 2 "--nesterov needs --momentum above 0" train $small --nesterov --momentum 0
expect 2 "--lr-gamma needs --lr-schedule step" train $small --lr-gamma 0.5
expect 2 "--lr-step-epochs needs --lr-schedule step" train $small --lr-schedule cosine \
  --lr-step-epochs 2
expect 2 "--lr-schedule step needs --lr-step-epochs" train $small --lr-schedule step
expect 2 "--lr-schedule cosine needs at least 2 steps after the warmup" train $small \
  --lr-schedule cosine --num-epochs 2 --warmup-epochs 2 --result-image none --plot none
expect 2 "--optimizer sgd differs from the checkpoint's adamw" train --resume "$ck" \
  --optimizer sgd
expect 2 "--lr-schedule step differs from the checkpoint's cosine" train --resume "$ck" \
  --lr-schedule step --lr-step-epochs 1
expect 2 "--warmup-epochs 2 differs from the checkpoint's 1" train --resume "$ck" \
  --warmup-epochs 2
expect 2 "--weight-decay 0.1 differs from the checkpoint's 0.01" train --resume "$ck" \
  --weight-decay 0.1
expect 2 "--momentum is sgd's" train --resume "$ck" --momentum 0.5
expect 2 "--num-epochs 4: the cosine schedule of .* spans 3 epochs (24 steps)" \
  train --resume "$ck" --num-epochs 4
# A constant or step schedule may be extended, as before.
# shellcheck disable=SC2086
run train $small $quiet --num-epochs 1 --lr-schedule step --lr-step-epochs 1 \
  --checkpoint-dir stepped
run train --resume stepped $quiet --num-epochs 2
[ "$status" -eq 0 ] || fail "extending a step schedule: exit status $status: $(cat err)"

# ---------------------------------------------------------------- processes
if have_mpi; then
  mpi_env
  # shellcheck disable=SC2086
  timeout 120 mpirun -np 2 "$cnnc" train $small $quiet $recipe --num-epochs 3 --threads 1 \
    --save np2.st >np2.out 2>&1 || fail "adamw+cosine under mpirun -np 2: $(cat np2.out)"
  cmp -s t1.st np2.st || fail "adamw+cosine: 2 processes give another model than one"
else
  echo "$suite: skipped 2 processes: mpirun is missing or this cnnc has no MPI"
fi
finish
