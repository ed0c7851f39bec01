#!/bin/sh
# cli_plot.sh — the pictures and per-class figures from the command line: `cnnc plot` on good and
# bad metrics files (one message naming file and line, no picture left), `cnnc train --plot`
# (written by default, 'none' skips it, a bad folder refused before training), and `cnnc eval`
# with per-class accuracy for all ten classes that adds up to the overall accuracy, and the
# --confusion picture. PNG files are checked for their signature and stated size; their pixels
# are checked by tests/test_plot.c. The training parts need Debian's Fashion-MNIST.
# Usage: sh tests/cli_plot.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp
cd "$tmp" || exit 1

# png_size FILE: "WIDTHxHEIGHT" from the IHDR chunk, or "not a PNG".
png_size() {
  signature=$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  if [ "$signature" != "89504e470d0a1a0a" ]; then
    echo "not a PNG"
    return
  fi
  od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%dx%d\n", $1*16777216 + $2*65536 + $3*256 + $4,
    $5*16777216 + $6*65536 + $7*256 + $8 }'
}

expect_png() { # expect_png FILE SIZE
  size=$(png_size "$1")
  [ "$size" = "$2" ] || fail "$1: $size, expected a PNG of $2"
}

# expect_refusal STATUS TEXT ARGS...: exit status, TEXT in a one-line message, no picture.
expect_refusal() {
  want=$1 text=$2
  shift 2
  rm -f curves.png training_curves.png
  if expect "$want" "^cnnc: error: .*$text" "$@" && [ "$want" -eq 1 ] &&
    [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    fail "cnnc $*: more than one line on stderr: $(cat "$tmp/err")"
  fi
  [ -e curves.png ] || [ -e training_curves.png ] && fail "cnnc $*: left a picture behind"
  ls "$tmp" | grep -q '\.tmp\.' && fail "cnnc $*: left a temporary file behind"
}

# ---------------------------------------------------------------- cnnc plot
cat >good.jsonl <<'EOF'
{"epoch":1,"train_loss":0.9,"test_loss":0.6,"test_accuracy":78.5,"epoch_seconds":1.2}
{"epoch":2,"train_loss":0.5,"test_loss":0.48,"test_accuracy":83.1,"epoch_seconds":1.1}

{"epoch":3,"train_loss":0.41,"test_loss":null,"test_accuracy":84.9,"epoch_seconds":1.1}
EOF
run plot good.jsonl -o curves.png
[ "$status" -eq 0 ] || fail "cnnc plot good.jsonl: exit status $status: $(cat "$tmp/err")"
grep -q "Plotted 3 epochs from good.jsonl to curves.png" "$tmp/out" ||
  fail "cnnc plot says: $(cat "$tmp/out")"
expect_png curves.png 960x720
run plot good.jsonl --width 1200 --height 400 --title "My run"
[ "$status" -eq 0 ] || fail "cnnc plot --width --height: exit status $status"
expect_png training_curves.png 1200x400

printf '{"epoch":1,"train_loss":1,"test_loss":1,"test_accuracy":50}\n{"epoch":2,"train_loss":1}\n' \
  >missing.jsonl
printf '{"epoch":1,"train_loss":1,"test_loss":1,"test_accuracy":50}\nnot json\n' >garbage.jsonl
printf '{"epoch":%d,"train_loss":1,"test_loss":1,"test_accuracy":50}\n' 2 1 >backwards.jsonl
printf '{"epoch":"one","train_loss":1,"test_loss":1,"test_accuracy":50}\n' >badepoch.jsonl
printf '[1,2,3]\n' >array.jsonl
printf '\n\n' >blank.jsonl
head -c 70000 /dev/zero | tr '\0' ' ' >long.jsonl
expect_refusal 1 'missing.jsonl:2: "test_loss" is missing' plot missing.jsonl -o curves.png
expect_refusal 1 "garbage.jsonl:2: not JSON" plot garbage.jsonl -o curves.png
expect_refusal 1 "backwards.jsonl:2: epoch 1 follows epoch 2" plot backwards.jsonl -o curves.png
expect_refusal 1 'badepoch.jsonl:1: "epoch"' plot badepoch.jsonl -o curves.png
expect_refusal 1 "array.jsonl:1: not a JSON object" plot array.jsonl -o curves.png
expect_refusal 1 "blank.jsonl: no epochs" plot blank.jsonl -o curves.png
expect_refusal 1 "long.jsonl:1: line longer than" plot long.jsonl -o curves.png
expect_refusal 1 "no-such.jsonl: cannot open: No such file" plot no-such.jsonl -o curves.png
expect_refusal 1 "$tmp: not a regular file (a folder)" plot "$tmp" -o curves.png
expect_refusal 1 "--output: .*no-dir" plot good.jsonl -o no-dir/curves.png
expect_refusal 2 "missing the metrics file" plot
expect_refusal 2 "unexpected argument 'extra'" plot good.jsonl extra
expect_refusal 2 "--width" plot good.jsonl --width 399
expect_refusal 2 "--height" plot good.jsonl --height abc
expect_refusal 2 "the metrics file itself" plot good.jsonl -o good.jsonl
run plot --help
[ "$status" -eq 0 ] && grep -q -e "--output FILE .*default: training_curves.png" "$tmp/out" ||
  fail "cnnc plot --help: $status: $(cat "$tmp/out")"

if have_data "the training checks"; then
  # ---------------------------------------------------------------- train --plot
  small="train --num-epochs 2 --train-samples 2048 --test-samples 1000 --num-cores 2
    --batch-size 64 --threads 2 --result-image none"
  rm -f training_curves.png
  # shellcheck disable=SC2086
  run $small --metrics-file m.jsonl --save m.safetensors
  [ "$status" -eq 0 ] || fail "train: exit status $status: $(cat "$tmp/err")"
  expect_png training_curves.png 960x720
  grep -q "Saved training curves to training_curves.png" "$tmp/out" ||
    fail "train does not say where the curves went"
  run plot m.jsonl -o from-metrics.png
  [ "$status" -eq 0 ] || fail "cnnc plot of train's own metrics: $status: $(cat "$tmp/err")"
  expect_png from-metrics.png 960x720
  rm -f training_curves.png
  # shellcheck disable=SC2086
  run $small --plot none
  [ -e training_curves.png ] && fail "--plot none still wrote training_curves.png"
  # shellcheck disable=SC2086
  run $small --plot own.png --quiet
  expect_png own.png 960x720
  [ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "--quiet with --plot printed: $(cat "$tmp/out")"
  # shellcheck disable=SC2086
  expect_refusal 1 "--plot: .*no-dir" $small --plot no-dir/c.png --save never.safetensors
  [ -e never.safetensors ] && fail "a refused --plot still trained and saved"
  # shellcheck disable=SC2086
  expect_refusal 2 "--metrics-file same.x and --plot same.x are the same file" $small \
    --plot same.x --metrics-file same.x

  # ---------------------------------------------------------------- eval: classes, confusion
  run eval --checkpoint m.safetensors --test-samples 1000 --confusion confusion.png
  [ "$status" -eq 0 ] || fail "eval --confusion: exit status $status: $(cat "$tmp/err")"
  expect_png confusion.png 838x764
  for name in "T-shirt/top" Trouser Pullover Dress Coat Sandal Shirt Sneaker Bag "Ankle boot"; do
    grep -q "^  $name  *[0-9.]*%  ([0-9]*/[0-9]*)$" "$tmp/out" ||
      fail "eval does not print the accuracy of $name: $(cat "$tmp/out")"
  done
  # The classes' right and total counts add up to the overall accuracy and image count.
  overall=$(sed -n 's/^Accuracy=\([0-9.]*\)%$/\1/p' "$tmp/out")
  sums=$(sed -n 's/^  .* (\([0-9]*\)\/\([0-9]*\))$/\1 \2/p' "$tmp/out" |
    awk '{ r += $1; t += $2 } END { printf "%d %d %.2f", r, t, t ? 100 * r / t : -1 }')
  [ "${sums#* }" = "1000 $overall" ] ||
    fail "per-class counts (right, total, percent: $sums) disagree with Accuracy=$overall%"
  run eval --checkpoint m.safetensors --test-samples 100
  grep -q "Per-class accuracy:" "$tmp/out" || fail "eval without --confusion lacks per-class"
  grep -q "confusion" "$tmp/out" && fail "eval without --confusion mentions a confusion picture"
  expect_refusal 1 "--confusion: .*no-dir" eval --checkpoint m.safetensors --confusion no-dir/c.png
fi

finish
