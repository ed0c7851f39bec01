#!/bin/sh
# cli_example.sh — runs examples/train_mnist (built by make check against the public header
# only): it must train its own small CNN to a useful accuracy, print per-class counts that add
# up to that accuracy, and save a model that `cnnc eval` scores with the network the file
# records (its __metadata__ "model"), not the seed's. Needs Debian's Fashion-MNIST; without it, only the failure.
# Usage: sh tests/cli_example.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
example=$build/examples/train_mnist
[ -x "$example" ] || { echo "FAIL: $example is missing (make check builds it)"; exit 1; }
make_tmp

"$example" "$tmp/no-data" >"$tmp/out" 2>"$tmp/err"
status=$?
[ "$status" -eq 1 ] && grep -q "^train_mnist: .*no-data" "$tmp/err" ||
  fail "the example without data: exit status $status: $(cat "$tmp/err")"

if have_data "the training checks"; then
  "$example" "$data" "$tmp/small.safetensors" >"$tmp/out" 2>"$tmp/err"
  status=$?
  [ "$status" -eq 0 ] || fail "the example: exit status $status: $(cat "$tmp/err")"
  grep -q "^model: 10 layers, 5274 parameters$" "$tmp/out" || fail "the example's model line"
  [ "$(grep -c "^epoch [1-3]: 32 steps" "$tmp/out")" -eq 3 ] || fail "the example's epochs"
  accuracy=$(sed -n 's/^test loss [0-9.]*, accuracy \([0-9.]*\)% on 1000 images$/\1/p' "$tmp/out")
  awk -v a="$accuracy" 'BEGIN { exit !(a + 0 >= 65) }' ||
    fail "the example reached only '$accuracy'% (expected at least 65%)"
  sums=$(sed -n 's/^  .* \([0-9]*\) of \([0-9]*\) right$/\1 \2/p' "$tmp/out" |
    awk '{ r += $1; t += $2; n++ } END { printf "%d %d %.2f", n, t, t ? 100 * r / t : -1 }')
  [ "$sums" = "10 1000 $accuracy" ] ||
    fail "per-class counts (classes, images, percent: $sums) disagree with $accuracy%"
  [ -s "$tmp/small.safetensors" ] || fail "the example saved no model"
  run eval --checkpoint "$tmp/small.safetensors"
  [ "$status" -eq 0 ] && grep -q '^Accuracy=[0-9.]*%$' "$tmp/out" ||
    fail "cnnc eval of the example's network: exit status $status: $(cat "$tmp/err")"
fi

finish
