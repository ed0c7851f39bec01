#!/bin/sh
# cli_predict.sh — `cnnc predict` with the PyTorch-trained model on the image fixtures of
# tools/gen_predict_fixtures.py (PNG: grey, colour, RGBA, grey+alpha; PGM: P5, P2, 16-bit,
# inverted): the class and the ten probabilities PyTorch gave for each (within 2e-5); exactly the
# output of the same test image read from the IDX file; the first 20 test images' classes as
# PyTorch's and as many right as `cnnc eval` counts; every refusal, with nothing printed.
# Needs Debian's Fashion-MNIST; skipped without it.
# Usage: sh tests/cli_predict.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
model=$root/tests/fixtures/pytorch_model.safetensors
fix=$root/tests/fixtures/predict
idx=$data/t10k-images-idx3-ubyte.gz
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

# expect_quiet STATUS TEXT ARGS...: as expect, and nothing on stdout.
expect_quiet() {
  expect "$@" || return
  shift 2
  if [ -s out ]; then fail "cnnc $*: printed something before failing: $(head -n 2 out)"; fi
}

# The ten probabilities of the first prediction in FILE, on one line.
probs() {
  sed -n '2,11s/^  .* \([0-9.]*\)$/\1/p' "$1" | tr '\n' ' '
}

# The class name on line C + 2 of FILE (the probability list starts on line 2).
class_name() {
  sed -n "$(($2 + 2))s/^  \(.*[^ ]\)  *[0-9][0-9.]*$/\1/p" "$1"
}

# close_enough "A0 .. A9" "B0 .. B9": every pair within 2e-5.
close_enough() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (split(a, x, " ") != 10 || split(b, y, " ") != 10) exit 1
    for (i = 1; i <= 10; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 2e-5) exit 1 }
  }'
}

# ---------------------------------------------------------------- image files against PyTorch
checked=0
while read -r name index class p; do
  [ "$name" = idx ] && continue
  flags=""
  case $name in *inverted*) flags=--invert ;; esac
  # shellcheck disable=SC2086
  run predict --checkpoint "$model" $flags "$fix/$name"
  if [ "$status" -ne 0 ]; then
    fail "predict $name: exit status $status: $(cat err)"
    continue
  fi
  cp out image.out
  want=$(class_name image.out "$class")
  head -n 1 image.out | grep -q -F "$fix/$name: $want (" ||
    fail "predict $name: '$(head -n 1 image.out)', PyTorch says $want"
  close_enough "$(probs image.out)" "$p" ||
    fail "predict $name: probabilities '$(probs image.out)', PyTorch's '$p'"
  case $name in
    *rgb*) ;; # its grey pixels are not the test image's
    *)
      run predict --checkpoint "$model" --idx "$idx" --index "$index"
      [ "$(tail -n +2 out)" = "$(tail -n +2 image.out)" ] ||
        fail "predict $name and --idx ... --index $index print different probabilities" ;;
  esac
  checked=$((checked + 1))
done <"$fix/expected.txt"
[ "$checked" -eq 8 ] || fail "checked $checked image fixtures, expected 8"

# All at once: the same blocks, in the order given.
run predict --checkpoint "$model" "$fix/t10k-0.png" "$fix/t10k-1.pgm" --idx "$idx" --index 2
[ "$status" -eq 0 ] || fail "predict of several inputs: exit status $status: $(cat err)"
[ "$(grep -c '^[^ ]' out)" -eq 3 ] || fail "predict of 3 inputs printed: $(grep '^[^ ]' out)"
grep -q "^$idx\[2\]: Trouser (" out || fail "the IDX sample is not named FILE[2]: $(cat out)"

# ---------------------------------------------------------------- test images 0..19
correct=0
while read -r tag index label class p; do
  [ "$tag" = idx ] || continue
  run predict --checkpoint "$model" --idx "$idx" --index "$index"
  want=$(class_name out "$class")
  head -n 1 out | grep -q -F "]: $want (" || fail "test image $index: '$(head -n 1 out)', PyTorch says $want"
  close_enough "$(probs out)" "$p" || fail "test image $index: '$(probs out)', PyTorch's '$p'"
  [ "$class" = "$label" ] && correct=$((correct + 1))
done <"$fix/expected.txt"
run eval --checkpoint "$model" --test-samples 20 --threads 2
accuracy=$(awk -v c="$correct" 'BEGIN { printf "Accuracy=%.2f%%", 100 * c / 20 }')
grep -q -x -e "$accuracy" out || fail "eval of 20 test images: $(grep Accuracy out), predict: $accuracy"

# ---------------------------------------------------------------- refusals
expect_quiet 1 "wrong-size.png: image is 32x32 pixels; the model takes 28x28" \
  predict --checkpoint "$model" "$fix/wrong-size.png"
expect_quiet 1 "wrong-size.pgm: image is 27x28 pixels" predict --checkpoint "$model" \
  "$fix/t10k-0.png" "$fix/wrong-size.pgm"
expect_quiet 1 "absent.png: cannot open" predict --checkpoint "$model" absent.png
printf 'not an image\n' >text.png
expect_quiet 1 "text.png: not a PNG or PGM image" predict --checkpoint "$model" text.png
expect_quiet 1 "absent.safetensors: cannot open" predict --checkpoint absent.safetensors \
  "$fix/t10k-0.png"
expect_quiet 1 "labels" predict --checkpoint "$model" --idx "$data/t10k-labels-idx1-ubyte.gz" \
  --index 0
expect_quiet 2 "--checkpoint FILE is required" predict "$fix/t10k-0.png"
expect_quiet 2 "nothing to predict" predict --checkpoint "$model"
expect_quiet 2 "--index needs --idx" predict --checkpoint "$model" --index 3
expect_quiet 2 "--idx needs --index" predict --checkpoint "$model" --idx "$idx"
expect_quiet 2 "--index" predict --checkpoint "$model" --idx "$idx" --index -1
expect_quiet 2 "--index 10000: .* holds 10000 images (0..9999)" predict --checkpoint "$model" \
  --idx "$idx" --index 10000
expect_quiet 2 "--bogus" predict --bogus

finish "$checked image files, 20 test images as PyTorch"
