#!/bin/sh
# cli_predict.sh — `cnnc predict` with the PyTorch-trained model on the image fixtures of
# tools/gen_predict_fixtures.py (PNG: grey, colour, RGBA, grey+alpha; PGM: P5, P2, 16-bit,
# inverted; JPEG: grey, colour, a progressive "photo"; other sizes, scaled by PIL's filters): the
# class and the ten probabilities PyTorch gave for each (within 2e-5) and the note on what was
# done to the image ("[resized from WxH, inverted]"); exactly the output of the same test image
# read from the IDX file; --invert auto (the default; never for IDX data), yes and no; the first
# 20 test images' classes as PyTorch's and as many right as `cnnc eval` counts; a colour model
# (models/cifar10.model) on colour and grey images as PyTorch on PIL's pixels; every refusal
# (damaged PNG and JPEG files among them), with nothing printed.
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
  run predict --checkpoint "$model" "$fix/$name"
  if [ "$status" -ne 0 ]; then
    fail "predict $name: exit status $status: $(cat err)"
    continue
  fi
  cp out image.out
  want=$(class_name image.out "$class")
  case $name in
    *inverted*) note=" [inverted]" ;;
    *photo*) note=" [resized from 100x80, inverted]" ;;
    *-[0-9]*x[0-9]*.*) note=" [resized from $(echo "$name" | sed 's/.*-\([0-9x]*\)\..*/\1/')]" ;;
    *) note="" ;;
  esac
  case $(head -n 1 image.out) in
    "$fix/$name: $want ("*"%)$note") ;;
    *) fail "predict $name: '$(head -n 1 image.out)', expected $want and '$note'" ;;
  esac
  close_enough "$(probs image.out)" "$p" ||
    fail "predict $name: probabilities '$(probs image.out)', PyTorch's '$p'"
  case $name in
    *rgb* | *colour* | *.jpg | *x[0-9]*) ;; # its grey pixels are not the test image's
    *)
      run predict --checkpoint "$model" --idx "$idx" --index "$index"
      [ "$(tail -n +2 out)" = "$(tail -n +2 image.out)" ] ||
        fail "predict $name and --idx ... --index $index print different probabilities" ;;
  esac
  checked=$((checked + 1))
done <"$fix/expected.txt"
[ "$checked" -eq 13 ] || fail "checked $checked image fixtures, expected 13"

# Enlarged to 56x56 and scaled back, test image 10 keeps its class.
run predict --checkpoint "$model" --idx "$idx" --index 10
grep -q "^$idx\[10\]: Coat (" out || fail "test image 10 is no longer a coat: $(head -n 1 out)"
run predict --checkpoint "$model" "$fix/t10k-10-56x56.png"
grep -q "56x56.png: Coat (.*%) \[resized from 56x56\]$" out ||
  fail "test image 10 at 56x56: $(head -n 1 out)"

# ---------------------------------------------------------------- --invert=WHEN
# The inverted fixture is 255 - test image 7: taken as it is with --invert=no, it is what
# --invert=yes makes of the IDX sample; --invert alone means yes.
run predict --checkpoint "$model" --invert=no "$fix/t10k-7-inverted.pgm"
cp out kept.out
run predict --checkpoint "$model" --invert=yes --idx "$idx" --index 7
[ "$(tail -n +2 out)" = "$(tail -n +2 kept.out)" ] ||
  fail "--invert=no on the inverted file and --invert=yes on its IDX sample differ"
grep -q "^$idx\[7\]: .*%) \[inverted\]$" out || fail "--invert=yes on IDX: $(head -n 1 out)"
if grep -q "inverted\]" kept.out; then fail "--invert=no inverted: $(head -n 1 kept.out)"; fi
run predict --checkpoint "$model" "$fix/t10k-7-inverted.pgm"
cp out auto.out
run predict --checkpoint "$model" --invert "$fix/t10k-7-inverted.pgm"
[ "$(cat out)" = "$(cat auto.out)" ] || fail "--invert alone is not --invert=yes: $(head -n 1 out)"
run predict --checkpoint "$model" --invert=yes "$fix/t10k-0.png"
grep -q "t10k-0.png: .*%) \[inverted\]$" out || fail "--invert=yes: $(head -n 1 out)"
# IDX data is never inverted on its own, even on a light background.
printf '\000\000\010\003\000\000\000\001\000\000\000\034\000\000\000\034' >light.idx
tail -c 784 "$fix/t10k-7-inverted.pgm" >>light.idx
run predict --checkpoint "$model" --idx light.idx --index 0
[ "$status" -eq 0 ] || fail "predict --idx light.idx: exit status $status: $(cat err)"
if [ "$(tail -n +2 out)" != "$(tail -n +2 kept.out)" ] || grep -q inverted out; then
  fail "an IDX sample on a light background was inverted: $(head -n 1 out)"
fi

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

# Other sizes are scaled, and said to be.
run predict --checkpoint "$model" "$fix/wrong-size.png" "$fix/wrong-size.pgm"
[ "$status" -eq 0 ] || fail "predict of images of other sizes: exit status $status: $(cat err)"
grep -q "wrong-size.png: .*%) \[resized from 32x32\]$" out || fail "32x32: $(head -n 1 out)"
grep -q "wrong-size.pgm: .*%) \[resized from 27x28\]$" out || fail "27x28: $(grep pgm: out)"

# ---------------------------------------------------------------- a colour model
# models/cifar10.model (3x32x32, 10 named classes) with PyTorch's weights: each image read as
# colour (a CMYK JPEG too) and scaled to 32x32 gets PyTorch's probabilities on PIL's pixels (tests/
# predict_colour.py); a light grey image is not inverted for a colour model; IDX input, grey
# only, is refused.
if /usr/bin/python3 "$root/tests/predict_colour.py" "$root" "$tmp" >colour.torch 2>err; then
  run predict --checkpoint colour.safetensors colour.png light.png colour.jpg cmyk.jpg
  [ "$status" -eq 0 ] || fail "predict with a colour model: exit status $status: $(cat err)"
  cp out colour.out
  for name in colour.png light.png colour.jpg cmyk.jpg; do
    grep -A 10 "^$name: " colour.out >one.out
    read -r _ class p <<EOF2
$(grep "^$name " colour.torch)
EOF2
    case $name in
      colour.png) note=" [resized from 48x40]" ;;
      colour.jpg) note=" [resized from 28x28]" ;;
      cmyk.jpg) note=" [resized from 36x30]" ;;
      *) note="" ;;
    esac
    case $(head -n 1 one.out) in
      "$name: $class ("*"%)$note") ;;
      *) fail "colour model, $name: '$(head -n 1 one.out)', expected $class and '$note'" ;;
    esac
    close_enough "$(probs one.out)" "$p" ||
      fail "colour model, $name: probabilities '$(probs one.out)', PyTorch's '$p'"
  done
  expect_quiet 1 "IDX files hold grey images; the model takes 3 channels" \
    predict --checkpoint colour.safetensors --idx "$idx" --index 0
else
  fail "tests/predict_colour.py (needs python3-torch, -numpy, -pil): $(tail -n 1 err)"
fi

# ---------------------------------------------------------------- refusals
expect_quiet 1 "absent.png: cannot open" predict --checkpoint "$model" absent.png
printf 'not an image\n' >text.png
expect_quiet 1 "text.png: not a PNG, JPEG or PGM image" predict --checkpoint "$model" text.png
head -c 300 "$fix/t10k-8.jpg" >truncated.jpg
expect_quiet 1 "truncated.jpg: truncated JPEG: the file ends before its image data" \
  predict --checkpoint "$model" "$fix/t10k-0.png" truncated.jpg
head -c 200 "$fix/t10k-0.png" >truncated.png
expect_quiet 1 "truncated.png: truncated PNG: chunk IDAT at byte 33" \
  predict --checkpoint "$model" truncated.png
cp "$fix/t10k-0.png" damaged.png
printf 'X' | dd of=damaged.png bs=1 seek=50 conv=notrunc 2>/dev/null
expect_quiet 1 "damaged.png: not a valid PNG: chunk IDAT at byte 33 has a wrong CRC" \
  predict --checkpoint "$model" damaged.png
printf 'P5 40000 40000 255\n' >huge.pgm
expect_quiet 1 "huge.pgm: image is 40000x40000 pixels, more than cnnc reads" \
  predict --checkpoint "$model" huge.pgm
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
expect_quiet 2 "--invert=maybe: WHEN is auto, yes or no" predict --checkpoint "$model" \
  --invert=maybe "$fix/t10k-0.png"
expect_quiet 2 "IMAGE 'no' does not exist; to say when to invert, write --invert=no" \
  predict --checkpoint "$model" --invert no "$fix/t10k-0.png"

finish "$checked image files, 20 test images as PyTorch"
