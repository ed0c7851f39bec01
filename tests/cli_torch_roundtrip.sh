#!/bin/sh
# cli_torch_roundtrip.sh — cnnc and PyTorch read each other's models, for every model file in
# $models (paths in the project folder): (a) a model trained by `cnnc train --save` scores in
# PyTorch (tools/cnnc_torch.py, the network rebuilt from the file's metadata) what `cnnc eval`
# scores; (b) the same model file trained in PyTorch and written as a model-only safetensors
# file, with the model text in its metadata and without it (then `cnnc eval --model`), scores
# in `cnnc eval` what it scored in PyTorch. Both on the whole test set. Needs Debian's
# python3-torch and python3-numpy (`make test` installs them; without them this fails) and
# Fashion-MNIST (skipped without it).
#
# Equal scores means the same number of correct answers, up to the near ties: a test image whose
# two largest log-probabilities are closer than 1e-4 in PyTorch (cnnc_torch.py counts them as
# near_ties) may be answered either way by two float32 implementations that sum in different
# orders; every other image must get the same answer, so the counts may differ by at most the
# near ties.
# Usage: sh tests/cli_torch_roundtrip.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
models="models/fashion_mnist.model models/lenet5.model tests/fixtures/new_layers.model
  tests/fixtures/padded.model"
python=/usr/bin/python3
tool="$root/tools/cnnc_torch.py"
recipe="--train-samples 6000 --batch-size 32 --learning-rate 0.05 --momentum 0.9"
require_cnnc
require_data
make_tmp
"$python" -c 'import numpy, torch' 2>"$tmp/err" || {
  fail "$python cannot import torch and numpy (Debian's python3-torch, python3-numpy; \
tools/deps.sh test installs them): $(tail -n 1 "$tmp/err")"
  finish
}

# cnnc_correct OUT: the correct answers of a `cnnc eval` output, the sum of its per-class counts.
cnnc_correct() {
  sed -n 's/.*(\([0-9]*\)\/[0-9]*)$/\1/p' "$1" | awk '{ s += $1 } END { if (NR) print s }'
}

# torch_field OUT KEY: KEY's value on cnnc_torch.py's `correct=N samples=N near_ties=N` line.
torch_field() {
  tr ' ' '\n' <"$1" | sed -n "s/^$2=//p" | tail -n 1
}

# agree WHAT CNNC_OUT TORCH_OUT: the two scored the same, up to PyTorch's near ties.
agree() {
  c=$(cnnc_correct "$2")
  t=$(torch_field "$3" correct)
  ties=$(torch_field "$3" near_ties)
  if [ -z "$c" ] || [ -z "$t" ] || [ -z "$ties" ]; then
    fail "$1: no score: cnnc: $(cat "$2"); PyTorch: $(cat "$3")"
  elif [ $((c > t ? c - t : t - c)) -gt "$ties" ]; then
    fail "$1: cnnc eval has $c correct, PyTorch $t ($ties near ties)"
  else
    echo "$1: cnnc $c correct, PyTorch $t ($ties near ties)"
  fi
}

for file in $models; do
  model=$root/$file
  name=$(basename "$file" .model)
  # (a) trained in cnnc, scored in both
  # shellcheck disable=SC2086
  run train --model "$model" $recipe --num-cores 1 --num-epochs 1 --test-samples 1000 \
    --threads 2 --result-image none --plot none -q --save "$tmp/$name.cnnc.st"
  [ "$status" -eq 0 ] || fail "$name: cnnc train: $(cat "$tmp/err")"
  run eval --checkpoint "$tmp/$name.cnnc.st"
  cp "$tmp/out" "$tmp/$name.cnnc.eval"
  "$python" "$tool" eval --checkpoint "$tmp/$name.cnnc.st" >"$tmp/$name.torch.eval" \
    2>"$tmp/err" || fail "$name: cnnc_torch.py eval: $(cat "$tmp/err")"
  agree "$name trained in cnnc" "$tmp/$name.cnnc.eval" "$tmp/$name.torch.eval"

  # (b) trained in PyTorch, scored in both: the file with the model text, then without it
  # shellcheck disable=SC2086
  "$python" "$tool" train --model "$model" $recipe --epochs 1 --save "$tmp/$name.torch.st" \
    >"$tmp/$name.torch.train" 2>"$tmp/err" || fail "$name: cnnc_torch.py train: $(cat "$tmp/err")"
  run eval --checkpoint "$tmp/$name.torch.st"
  [ "$status" -eq 0 ] || fail "$name: cnnc eval of PyTorch's file: $(cat "$tmp/err")"
  agree "$name trained in PyTorch" "$tmp/out" "$tmp/$name.torch.train"

  # a file without "model" takes --model (the seed's network without it)
  with_model="--model $model"
  [ "$name" = fashion_mnist ] && with_model=""
  # shellcheck disable=SC2086
  "$python" "$tool" train --model "$model" $recipe --epochs 1 --no-model-metadata \
    --save "$tmp/$name.bare.st" >"$tmp/$name.bare.train" 2>"$tmp/err" ||
    fail "$name: cnnc_torch.py train --no-model-metadata: $(cat "$tmp/err")"
  # shellcheck disable=SC2086
  run eval --checkpoint "$tmp/$name.bare.st" $with_model
  [ "$status" -eq 0 ] || fail "$name: cnnc eval of PyTorch's file without metadata: \
$(cat "$tmp/err")"
  agree "$name trained in PyTorch, no model text" "$tmp/out" "$tmp/$name.bare.train"
done
finish "models: $models"
