#!/bin/sh
# cli_summary.sh — `cnnc summary`: the table of the seed's network has PyTorch's parameter counts
# (conv1 260, bn1 20, conv2 5020, bn2 40, fc1 16050, fc2 510; 21,900 in all); every row's
# parameters and forward MFLOP, and the totals, agree with what this script works out from the
# model file's kernels and the table's shapes; the built-in network, its model file and a
# checkpoint give the same table; bad input gets one message and a non-zero exit. The training
# run for the checkpoint needs Debian's Fashion-MNIST; the other checks run without it.
# Usage: sh tests/cli_summary.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp
seed=$root/models/fashion_mnist.model
lenet=$root/models/lenet5.model

# check_table MODEL_FILE SUMMARY: the rows and totals of SUMMARY (cnnc summary's output) against
# the counts worked out from MODEL_FILE's kernels and the shape each row prints (the input line
# for the first): conv C->O kernel K on HxW outputs: O*(C*K*K+1) parameters, O*OH*OW*C*K*K
# multiply-adds; linear N->O: O*(N+1) and O*N; batchnorm over C: 2*C; 2 FLOP a multiply-add.
# The backward pass counts twice the forward, but the first layer's only once (no input
# gradient). Prints one line per disagreement.
check_table() {
  awk '
    function mflop(flops) {
      if (flops == 0) return "-"
      return flops < 500 ? "<0.001" : sprintf("%.3f", flops / 1e6)
    }
    FNR == NR {
      if ($1 == "conv2d")
        for (i = 2; i <= NF; i++) if ($i ~ /^kernel=/) kernel[++kernels] = substr($i, 8)
      next
    }
    /^Input: / { split($2, s, "x"); c = s[1]; h = s[2]; w = s[3]; next }
    /^ *[0-9]+  / {
      n = split($4, s, "x"); oc = s[1]; oh = n == 3 ? s[2] : 1; ow = n == 3 ? s[3] : 1
      macs = 0; p = 0
      if ($3 == "conv2d") {
        k = kernel[++convs]; macs = oc * oh * ow * c * k * k; p = oc * (c * k * k + 1)
      } else if ($3 == "linear") {
        macs = oc * c * h * w; p = oc * (c * h * w + 1)
      } else if ($3 == "batchnorm2d") p = 2 * oc
      params = $5; gsub(",", "", params)
      if (params != p) print "row " $1 " (" $2 "): " params " parameters, expected " p
      want = mflop(2 * macs)
      if ($6 != want) print "row " $1 " (" $2 "): " $6 " MFLOP, expected " want
      total += p; forward += 2 * macs; both += ($1 == 0 ? 4 : 6) * macs
      c = oc; h = oh; w = ow; rows++
      next
    }
    /^Total parameters: / {
      got = $3; gsub(",", "", got)
      if (got != total) print "total: " got " parameters, expected " total
      kib = sprintf("(%.1f", total * 4 / 1024)
      if ($4 != kib) print "total: " $4 " KiB, expected " kib
    }
    /^Forward: / && $2 != mflop(forward) { print "forward: " $2 ", expected " mflop(forward) }
    /^Forward\+backward: / && $2 != mflop(both) {
      print "forward+backward: " $2 ", expected " mflop(both)
    }
    END { if (rows == 0) print "no table rows" }
  ' "$1" "$2"
}

# table_ok WHAT MODEL_FILE: the last run succeeded and its table agrees with check_table.
table_ok() {
  if [ "$status" -ne 0 ]; then
    fail "$1: exit status $status: $(cat "$tmp/err")"
    return
  fi
  check_table "$2" "$tmp/out" >"$tmp/wrong"
  [ -s "$tmp/wrong" ] && fail "$1: $(cat "$tmp/wrong")"
  awk 'length($0) > 100 { exit 1 }' "$tmp/out" || fail "$1: a line is wider than 100 columns"
  grep -q '^Forward: ' "$tmp/out" || fail "$1: no forward total"
  grep -q '^Forward+backward: ' "$tmp/out" || fail "$1: no forward+backward total"
}

# ---------------------------------------------------------------- the seed's network
run summary
table_ok "cnnc summary" "$seed"
cp "$tmp/out" "$tmp/builtin"
grep -q '^Input: 1x28x28 ' "$tmp/out" || fail "summary: no input shape: $(head -n 2 "$tmp/out")"
for pair in conv1:260 bn1:20 conv2:5,020 bn2:40 fc1:16,050 fc2:510; do
  name=${pair%%:*} count=${pair#*:}
  awk -v n="$name" -v c="$count" '$2 == n && $5 == c { found = 1 } END { exit !found }' \
    "$tmp/out" || fail "summary: $name does not have PyTorch's $count parameters"
done
grep -q '^Total parameters:  21,900 (85.5 KiB as fp32)$' "$tmp/out" ||
  fail "summary: total: $(grep '^Total' "$tmp/out")"
grep -q '^ 8  flatten8 *flatten  *320 ' "$tmp/out" || fail "summary: flatten's output is not flat"
run summary --model "$seed"
table_ok "summary --model fashion_mnist.model" "$seed"
tail -n +2 "$tmp/out" >"$tmp/file"
tail -n +2 "$tmp/builtin" | cmp -s - "$tmp/file" ||
  fail "the seed's model file and the built-in network give other tables"
run summary --model "$lenet"
table_ok "summary --model lenet5.model" "$lenet"
grep -q '^Total parameters:  44,426 ' "$tmp/out" || fail "lenet5: $(grep '^Total' "$tmp/out")"
cp "$tmp/out" "$tmp/lenet-table"
# Any network, not only one for Fashion-MNIST.
printf 'input channels=1 height=32 width=32 mean=0.1307 std=0.3081\nconv2d name=c out=3 kernel=3\n'\
'maxpool2d kernel=2\nflatten\nlinear name=out out=4\nlog_softmax\n' >"$tmp/other.model"
run summary --model "$tmp/other.model"
table_ok "summary of a 1x32x32 network with 4 classes" "$tmp/other.model"

# A PyTorch state_dict records no network: the seed's, or --model's.
run summary --checkpoint "$root/tests/fixtures/pytorch_model.safetensors"
table_ok "summary of a PyTorch state_dict" "$seed"

# ---------------------------------------------------------------- bad input
# refused STATUS TEXT ARGS...: expect, and the message is one line with no table printed.
refused() {
  expect "$@" || return
  shift 2
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "cnnc $*: more than one line: $(cat "$tmp/err")"
  [ -s "$tmp/out" ] && fail "cnnc $*: printed a table although refused"
}
refused 1 "missing.model: cannot open" summary --model "$tmp/missing.model"
printf 'input channels=1 height=28 width=28 mean=0.1307 std=0.3081\nconv2d out=4\n' \
  >"$tmp/bad.model"
refused 1 "bad.model:2: " summary --model "$tmp/bad.model"
refused 1 "missing.st" summary --checkpoint "$tmp/missing.st"
refused 1 "bad.model: not a safetensors file" summary --checkpoint "$tmp/bad.model"
refused 1 "tensor 0.weight is missing" summary --model "$lenet" \
  --checkpoint "$root/tests/fixtures/pytorch_model.safetensors"
# Usage errors: the message and a pointer to the help.
expect 2 "unknown option '--modle' (did you mean --model?)" summary --modle "$seed"
expect 2 "--model: empty file name" summary --model ''
expect 2 "unexpected argument" summary "$seed"
[ -s "$tmp/out" ] && fail "a usage error printed a table"

# ---------------------------------------------------------------- help and documentation
run summary --help
[ "$status" -eq 0 ] || fail "summary --help: exit status $status"
for flag in --model --checkpoint; do
  grep -q -e "^  $flag " "$tmp/out" || fail "summary --help lacks $flag"
  grep -q -e "$(echo "$flag" | sed 's/-/\\\\-/g')" "$root/man/cnnc.1" ||
    fail "man/cnnc.1 does not document $flag"
done
grep -q '^\.SS "cnnc summary"' "$root/man/cnnc.1" || fail "man/cnnc.1 has no summary section"
grep -q '^## `cnnc summary`' "$root/docs/commands.md" || fail "docs/commands.md lacks summary"
run --help
grep -q '^  summary ' "$tmp/out" || fail "cnnc --help does not list summary"

# ---------------------------------------------------------------- a checkpoint
have_data "the checkpoint of a training run" || finish
run train --model "$lenet" --train-samples 256 --test-samples 64 --num-epochs 1 --num-cores 1 \
  --batch-size 32 --threads 2 --result-image none --plot none -q --save "$tmp/lenet.st" \
  --checkpoint-dir "$tmp/ck"
[ "$status" -eq 0 ] || fail "the training run failed: $(cat "$tmp/err")"
tail -n +2 "$tmp/lenet-table" >"$tmp/want"
for checkpoint in "$tmp/lenet.st" "$tmp/ck"; do
  run summary --checkpoint "$checkpoint"
  table_ok "summary --checkpoint $checkpoint" "$lenet"
  tail -n +2 "$tmp/out" | cmp -s - "$tmp/want" ||
    fail "summary --checkpoint $checkpoint gives another table than its --model file"
done
run summary --checkpoint "$tmp/lenet.st" --model "$lenet"
[ "$status" -eq 0 ] || fail "--checkpoint with its own --model: $(cat "$tmp/err")"
expect 2 "--model $seed is not the network that the checkpoint" summary \
  --checkpoint "$tmp/lenet.st" --model "$seed"
finish
