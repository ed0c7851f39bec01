#!/bin/sh
# cli_model_layers.sh — a model file with every layer type (convolutions with padding and
# stride, both poolings, global average pooling, dropout, both BatchNorms, one of them running
# a relu and a max-pool inside its passes, a convolution whose backward goes through a relu and
# a max-pool's picks, a linear layer without bias) trains from the command line on
# Fashion-MNIST, and its weights do not depend on
# how the work is spread: --threads 1, 2 and 3 and `mpirun -np 2` save the same bytes; a run
# resumed from its first epoch's checkpoint ends with the same bytes as one that never stopped
# (dropout draws from the step, not from a stream); `eval` of the saved file prints the test
# accuracy training printed; `summary` reads the file. It does not test the layers' arithmetic
# (test_layers*.c do). The mpirun part is skipped when mpirun or MPI in this cnnc is missing.
# Usage: sh tests/cli_model_layers.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

cat >every.model <<'EOF'
input       channels=1 height=28 width=28 mean=0.1307 std=0.3081
conv2d      name=stem out=8 kernel=3 padding=1
batchnorm2d name=bn0 momentum=0.2 eps=0.001
relu
avgpool2d   kernel=3 stride=2
conv2d      out=8 kernel=2
relu
maxpool2d   kernel=2
conv2d      out=12 kernel=3 stride=2 padding=1
relu
conv2d      out=16 kernel=3 padding=1 bias=0
batchnorm2d name=bn2
relu
maxpool2d   kernel=2
dropout     p=0.2
global_avgpool
linear      out=24 bias=0
batchnorm1d name=bn1
relu
dropout     p=0.5
linear      name=head out=10
log_softmax
EOF
small="--model every.model --num-epochs 2 --train-samples 1536 --test-samples 256
  --num-cores 4 --batch-size 32 --plot none --result-image none"

run summary --model every.model
[ "$status" -eq 0 ] || fail "summary --model every.model: exit $status: $(cat "$tmp/err")"
grep -q "global_avgpool *16 " "$tmp/out" || fail "summary: no flat 16 after global_avgpool"

for t in 1 2 3; do
  # shellcheck disable=SC2086
  "$cnnc" train $small --threads "$t" --save "t$t.st" >"t$t.out" 2>"t$t.err" ||
    fail "--threads $t: exit status $?: $(cat "t$t.err")"
done
cmp -s t1.st t2.st || fail "--threads 2 saved other weights than --threads 1"
cmp -s t1.st t3.st || fail "--threads 3 saved other weights than --threads 1"
acc=$(sed -n 's/^Epoch 2\/2 .*test loss [0-9.]* acc \([0-9.]*\)%.*/\1/p' t1.out)
[ -n "$acc" ] || fail "no test accuracy in the training log: $(cat t1.out)"

run eval --checkpoint t1.st --test-samples 256
grep -q "^Accuracy=$acc%$" "$tmp/out" ||
  fail "eval says $(grep Accuracy "$tmp/out"), training said $acc%: $(cat "$tmp/err")"

# Stopped after the first epoch and resumed: the same bytes as the run that never stopped.
# shellcheck disable=SC2086
"$cnnc" train $small --num-epochs 1 --threads 2 --checkpoint-dir part >part.out 2>part.err ||
  fail "first epoch alone: exit status $?: $(cat part.err)"
"$cnnc" train --resume part --num-epochs 2 --threads 1 --save resumed.st --plot none \
  --result-image none >resumed.out 2>resumed.err ||
  fail "resume: exit status $?: $(cat resumed.err)"
cmp -s t1.st resumed.st || fail "the resumed run saved other weights than the straight run"

detail="threads 1, 2, 3 and a resumed run equal, bit for bit"
if have_mpi; then
  mpi_env
  # shellcheck disable=SC2086
  timeout 120 mpirun -np 2 "$cnnc" train $small --save p2.st >p2.out 2>p2.err ||
    fail "mpirun -np 2: exit status $?: $(cat p2.err)"
  cmp -s t1.st p2.st || fail "2 processes saved other weights than one process"
  detail="$detail; so do 2 processes"
else
  detail="$detail; mpirun part skipped (no mpirun or no MPI in this cnnc)"
fi
finish "$detail"
