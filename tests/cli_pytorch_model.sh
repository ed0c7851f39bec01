#!/bin/sh
# cli_pytorch_model.sh — `cnnc eval` on a model trained and exported by PyTorch
# (tests/fixtures/pytorch_model.safetensors, from tools/gen_fixtures.py) must print the accuracy
# PyTorch computed for it on the whole test set, recorded in the file's __metadata__.
# Usage: sh tests/cli_pytorch_model.sh BUILD_DIR
set -u
cnnc="${1:-build}/cnnc"
model=tests/fixtures/pytorch_model.safetensors
data=/usr/share/datasets/fashion-mnist
if [ ! -d "$data" ]; then
  echo "cli_pytorch_model: skipped ($data missing)"
  exit 0
fi
expected=$(head -c 4096 "$model" | grep -a -o '"test_accuracy":"[0-9.]*"' | grep -o '[0-9][0-9.]*')
if [ -z "$expected" ]; then
  echo "cli_pytorch_model: FAIL: no test_accuracy in $model's metadata"
  exit 1
fi
out=$("$cnnc" eval --checkpoint "$model" 2>&1)
status=$?
got=$(printf '%s\n' "$out" | sed -n 's/^Accuracy=\([0-9.]*\)%$/\1/p')
if [ "$status" -ne 0 ] || [ "$got" != "$expected" ]; then
  echo "cli_pytorch_model: FAIL: PyTorch says $expected%, cnnc eval says '$got' (exit $status)"
  printf '%s\n' "$out"
  exit 1
fi
echo "cli_pytorch_model: PyTorch's model scores $got% in cnnc, as in PyTorch"
