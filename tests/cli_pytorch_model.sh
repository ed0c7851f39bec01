#!/bin/sh
# cli_pytorch_model.sh — `cnnc eval` on a model trained and exported by PyTorch
# (tests/fixtures/pytorch_model.safetensors, from tools/gen_fixtures.py) must print the accuracy
# PyTorch computed for it on the whole test set, recorded in the file's __metadata__.
# Usage: sh tests/cli_pytorch_model.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
model=$root/tests/fixtures/pytorch_model.safetensors
require_cnnc
require_data
make_tmp

expected=$(head -c 4096 "$model" | grep -a -o '"test_accuracy":"[0-9.]*"' | grep -o '[0-9][0-9.]*')
[ -n "$expected" ] || { fail "no test_accuracy in $model's metadata"; finish; }
run eval --checkpoint "$model"
got=$(sed -n 's/^Accuracy=\([0-9.]*\)%$/\1/p' "$tmp/out")
if [ "$status" -ne 0 ] || [ "$got" != "$expected" ]; then
  fail "PyTorch says $expected%, cnnc eval says '$got' (exit $status)"
  cat "$tmp/out" "$tmp/err"
fi
finish "PyTorch's model scores $got% in cnnc, as in PyTorch"
