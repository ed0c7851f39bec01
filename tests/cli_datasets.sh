#!/bin/sh
# cli_datasets.sh — datasets beyond Fashion-MNIST from the command line, made by
# tools/make_dataset.py: a CIFAR-10-format set trains models/cifar10.model and a folder of
# colour PNG and JPEG images trains the grey models/lenet5.model (read as grey because the model
# asks so) to the accuracy required below; eval, predict and the pictures show the data's class
# names; a checkpoint records the data's shape; 1 and 2 threads and 2 processes save the same
# weights from both formats; a model that does not fit the data, and every
# kind of malformed file, is refused before training with one line naming it and no output
# written. Needs /usr/bin/python3 with numpy and PIL (tools/deps.sh test).
# Usage: sh tests/cli_datasets.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp
py=/usr/bin/python3
gen() { "$py" "$root/tools/make_dataset.py" "$@" >/dev/null || fail "make_dataset.py $*"; }
fast="--num-cores 1 --batch-size 32 --momentum 0.9 --threads 2 --plot none -q"

# accuracy_of FILE: the test accuracy of the last epoch in a metrics file.
accuracy_of() {
  tail -n 1 "$1" | sed 's/.*"test_accuracy":\([0-9.]*\).*/\1/' | awk '{ printf "%.2f", $1 }'
}
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# ---------------------------------------------------------------- CIFAR-10's binary format
gen --format cifar10 --out "$tmp/c10" --train 1500 --test 400
# shellcheck disable=SC2086
run train --model "$root/models/cifar10.model" --data-dir "$tmp/c10" --num-epochs 6 \
  --learning-rate 0.02 $fast --save "$tmp/c10.st" --metrics-file "$tmp/c10.jsonl" \
  --result-image "$tmp/c10.png" --checkpoint-dir "$tmp/c10-ck"
[ "$status" -eq 0 ] || fail "cifar10: train: $(cat "$tmp/err")"
acc=$(accuracy_of "$tmp/c10.jsonl")
reached="cifar10.model on cifar10: $acc%"
# Five times chance: the instruction sets, whose last bits differ, end between 59 and 61%.
at_least "$acc" 50 || fail "cifar10: models/cifar10.model reached only $acc% (50% required)"
first=$(sed -n 1p "$tmp/c10/batches.meta.txt")
grep -q "\"classes\":\"$first\\\\n" "$tmp/c10.st" ||
  fail "cifar10: the saved model does not record batches.meta.txt's names"
grep -q '"data_shape":"3x32x32"' "$tmp/c10-ck"/checkpoint-epoch-0006.safetensors ||
  fail "cifar10: the checkpoint does not record the data's shape"
run eval --checkpoint "$tmp/c10.st" --data-dir "$tmp/c10" --confusion "$tmp/c10-conf.png"
[ "$status" -eq 0 ] || fail "cifar10: eval: $(cat "$tmp/err")"
grep -q "^  $first " "$tmp/out" || fail "cifar10: eval does not name the class $first"
grep -q "^Accuracy=$acc%" "$tmp/out" || fail "cifar10: eval's accuracy is not train's $acc%"
# The pictures: colour, at the size their layouts give for 10 classes and 3x32x32 images.
"$py" - "$tmp/c10.png" "$tmp/c10-conf.png" <<'PY' || fail "cifar10: the pictures"
import sys
from PIL import Image
grid, conf = Image.open(sys.argv[1]), Image.open(sys.argv[2])
assert conf.size == (838, 764), conf.size
px = grid.convert("RGB").getdata()
assert sum(1 for r, g, b in px if max(r, g, b) - min(r, g, b) > 60) > 10000, "no colour"
PY
# One test image as a PNG: predict names its class with the data's names.
"$py" - "$tmp/c10/test_batch.bin" "$tmp/c10-0.png" <<'PY' || fail "cifar10: a PNG"
import sys
import numpy as np
from PIL import Image
r = np.frombuffer(open(sys.argv[1], "rb").read(3073), np.uint8)
Image.fromarray(r[1:].reshape(3, 32, 32).transpose(1, 2, 0)).save(sys.argv[2])
PY
run predict --checkpoint "$tmp/c10.st" "$tmp/c10-0.png"
[ "$status" -eq 0 ] || fail "cifar10: predict: $(cat "$tmp/err")"
grep -q "^  $first " "$tmp/out" || fail "cifar10: predict does not name the class $first"

# ---------------------------------------------------------------- an image folder
gen --format folder --out "$tmp/folder" --classes 10 --channels 3 --height 28 --width 28 \
  --train 1500 --test 300 --image-format mixed
# shellcheck disable=SC2086
run train --model "$root/models/lenet5.model" --data-dir "$tmp/folder" --num-epochs 8 \
  --learning-rate 0.03 $fast --metrics-file "$tmp/f.jsonl" --result-image "$tmp/f.png" \
  --save "$tmp/f.st"
[ "$status" -eq 0 ] || fail "folder: train: $(cat "$tmp/err")"
acc=$(accuracy_of "$tmp/f.jsonl")
reached="$reached, lenet5.model on a folder: $acc%"
at_least "$acc" 70 || fail "folder: models/lenet5.model reached only $acc% (70% required)"
first=$(ls "$tmp/folder/train" | sed -n 1p)
grep -q "\"classes\":\"$first\\\\n" "$tmp/f.st" ||
  fail "folder: the saved model does not record the folders' names"
run eval --checkpoint "$tmp/f.st" --data-dir "$tmp/folder" --data-format folder
grep -q "^  $first " "$tmp/out" || fail "folder: eval does not name the class $first"

# ---------------------------------------------------------------- the same weights
# Two replicas on 1 and 2 threads, and as 2 processes, save the same bytes, from both formats.
same="--num-cores 2 --batch-size 16 --num-epochs 2 --plot none --result-image none -q"
# shellcheck disable=SC2086
for t in 1 2; do
  "$cnnc" train --model "$root/models/lenet5.model" --data-dir "$tmp/folder" $same \
    --threads $t --save "$tmp/f$t.st" >/dev/null 2>"$tmp/err" || fail "folder: $(cat "$tmp/err")"
  "$cnnc" train --model "$root/models/cifar10.model" --data-dir "$tmp/c10" $same \
    --train-samples 256 --threads $t --save "$tmp/c$t.st" >/dev/null 2>"$tmp/err" ||
    fail "cifar10: $(cat "$tmp/err")"
done
cmp -s "$tmp/f1.st" "$tmp/f2.st" || fail "folder: 1 and 2 threads saved other weights"
cmp -s "$tmp/c1.st" "$tmp/c2.st" || fail "cifar10: 1 and 2 threads saved other weights"
if have_mpi; then
  mpi_env
  # shellcheck disable=SC2086
  timeout 120 mpirun -np 2 "$cnnc" train --model "$root/models/lenet5.model" \
    --data-dir "$tmp/folder" $same --save "$tmp/fp.st" >/dev/null 2>"$tmp/err" ||
    fail "folder: mpirun -np 2: $(cat "$tmp/err")"
  cmp -s "$tmp/f1.st" "$tmp/fp.st" || fail "folder: 2 processes saved other weights"
fi

# ---------------------------------------------------------------- refusals before training
# refused NAME TEXT ARGS...: exit 1, TEXT in the one-line message, and nothing written.
refused() {
  name=$1 text=$2
  shift 2
  rm -f "$tmp/never.st" "$tmp/never.png"
  expect 1 "$text" train --num-epochs 1 --num-cores 1 --batch-size 8 --threads 2 \
    --save "$tmp/never.st" --result-image "$tmp/never.png" --plot none "$@" ||
    echo "  ($name)"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$name: more than one line: $(cat "$tmp/err")"
  [ -e "$tmp/never.st" ] || [ -e "$tmp/never.png" ] && fail "$name: an output was written"
}
refused "the seed's network on colour data" "the seed's network: the model reads 1x28x28 \
images into 10 classes, but the data has 3x32x32 images in 10 classes ($tmp/c10, cifar10)" \
  --data-dir "$tmp/c10"
gen --format folder --out "$tmp/three" --classes 3 --channels 1 --height 28 --width 28 \
  --train 30 --test 9
refused "a model of other classes" "lenet5.model: the model reads 1x28x28 images into 10 \
classes, but the data has 1x28x28 images in 3 classes" --data-dir "$tmp/three" \
  --model "$root/models/lenet5.model"
refused "a format that is not there" "data_batch_1.bin: No such file" \
  --data-dir "$tmp/three" --data-format cifar10
expect 2 "--data-format: 'png' is not auto, idx, cifar10 or folder" train \
  --data-dir "$tmp/three" --data-format png

cp -r "$tmp/c10" "$tmp/cut"
head -c 3072 "$tmp/c10/test_batch.bin" >"$tmp/cut/test_batch.bin"
refused "a truncated CIFAR-10 file" "test_batch.bin: 3072 bytes is not a whole number of \
CIFAR-10 records" --data-dir "$tmp/cut" --model "$root/models/cifar10.model"
cp "$tmp/c10/test_batch.bin" "$tmp/cut/test_batch.bin"
printf '\012' | dd of="$tmp/cut/data_batch_2.bin" bs=1 seek=3073 conv=notrunc 2>/dev/null
refused "a CIFAR-10 label past the classes" "data_batch_2.bin: record 1 has label 10" \
  --data-dir "$tmp/cut" --model "$root/models/cifar10.model"

cp -r "$tmp/three" "$tmp/bad"
one=$(ls "$tmp/bad/train" | sed -n 1p)
some=$(ls "$tmp/bad/train/$one" | sed -n 1p)
"$py" -c "from PIL import Image; Image.new('L', (27, 28)).save('$tmp/bad/train/$one/zz.png')"
refused "images of mixed sizes" "zz.png: .*27x28.*(--resize scales them" --data-dir "$tmp/bad" \
  --model "$root/models/lenet5.model"
# --resize: scaled to the model's size, as predict scales them (test_folder checks the pixels);
# recorded, so that --resume (which refuses to switch it on) and eval take the same images.
sed 's/out=10/out=3/' "$root/models/lenet5.model" >"$tmp/lenet3.model"
run train --model "$tmp/lenet3.model" --data-dir "$tmp/bad" --resize --num-epochs 1 \
  --num-cores 1 --batch-size 8 --threads 2 --plot none -q --checkpoint-dir "$tmp/rs-ck" \
  --result-image none
[ "$status" -eq 0 ] || fail "--resize: train: $(cat "$tmp/err")"
grep -q '"run.resize":"1"' "$tmp/rs-ck/checkpoint-epoch-0001.safetensors" ||
  fail "--resize: the checkpoint does not record it"
run train --resume "$tmp/rs-ck" --num-epochs 2 --threads 2 -q --plot none --result-image none
[ "$status" -eq 0 ] || fail "--resize: resume without it: $(cat "$tmp/err")"
run eval --checkpoint "$tmp/rs-ck" --data-dir "$tmp/bad" --resize
grep -q "^Accuracy=" "$tmp/out" || fail "--resize: eval: $(cat "$tmp/err")"
expect 2 "--resize: the run of .*c10-ck.* went without it" train --resume "$tmp/c10-ck" \
  --num-epochs 7 --resize
refused "--resize on CIFAR-10" "--resize: $tmp/c10 holds cifar10 data: only the images of \
folder data are scaled" --data-dir "$tmp/c10" --model "$root/models/cifar10.model" --resize
gen --format folder --out "$tmp/big" --classes 10 --channels 1 --height 30 --width 28 \
  --train 20 --test 10
refused "folder images of another size" "the data has 1x30x28 images in 10 classes ($tmp/big, \
folder); --resize scales the images to the model's size" --data-dir "$tmp/big" \
  --model "$root/models/lenet5.model"
rm "$tmp/bad/train/$one/zz.png"
printf 'not an image' >"$tmp/bad/train/$one/zz.png"
refused "an undecodable image" "zz.png" --data-dir "$tmp/bad" --model "$root/models/lenet5.model"
rm "$tmp/bad/train/$one/zz.png"
mkdir "$tmp/bad/train/zz-empty"
printf 'notes\n' >"$tmp/bad/train/zz-empty/notes.txt"
refused "a class folder without images" "zz-empty: a class folder without images (no .png, \
.jpg or .jpeg files in it or below it)" --data-dir "$tmp/bad" --model "$root/models/lenet5.model"
rm -r "$tmp/bad/train/zz-empty"
# as ImageFolder: the folders below a class folder are read, files not named as images are left
# out and counted, and both train and info say how many
mkdir -p "$tmp/three/train/$one/more/deeper"
mv "$tmp/three/train/$one/$some" "$tmp/three/train/$one/more/deeper/"
printf 'notes\n' >"$tmp/three/train/$one/notes.txt"
printf 'x' >"$tmp/three/test/$one/Thumbs.db"
printf 'x' >"$tmp/three/test/$one/labels.csv"
left="left out: 1 file in train/ and 2 in test/ not named as images (.png, .jpg, .jpeg)"
run train --model "$tmp/lenet3.model" --data-dir "$tmp/three" --num-epochs 1 --num-cores 1 \
  --batch-size 8 --threads 2 --plot none --result-image none
grep -q "^  data: 30 training images" "$tmp/out" && grep -q "^  $left\$" "$tmp/out" ||
  fail "a folder with files below its classes and beside them: $(cat "$tmp/out" "$tmp/err")"
run info --data-dir "$tmp/three"
grep -q "^ *$left\$" "$tmp/out" || fail "info: the files left out: $(cat "$tmp/out")"
printf 'a\nb\n' >"$tmp/two.txt"
refused "names of --classes for other classes" "two.txt: names 2 classes, the data has 3" \
  --data-dir "$tmp/bad" --classes "$tmp/two.txt" --model "$root/models/lenet5.model"
[ -n "$some" ] || fail "the folder set has no images"

# ---------------------------------------------------------------- a folder of class folders
# --test-percent: CLASS/IMAGE without train/ and test/, an image a test image when the CRC-32
# of its path below the folder, modulo 100, is below the share (zlib.crc32 counts them here);
# recorded, resumed, and eval scores the same images; refused for data with its own splits.
mkdir "$tmp/classes"
for class in "$tmp/three/train/"*; do
  name=$(basename "$class")
  cp -r "$class" "$tmp/classes/$name"
  for f in "$tmp/three/test/$name/"*.png; do cp "$f" "$tmp/classes/$name/t-$(basename "$f")"; done
done
count=$("$py" -c "import os, sys, zlib
d = sys.argv[1]
print(sum(zlib.crc32(os.path.relpath(os.path.join(r, f), d).encode()) % 100 < 25
          for r, _, fs in os.walk(d) for f in fs if f.endswith('.png')))" "$tmp/classes")
run train --model "$tmp/lenet3.model" --data-dir "$tmp/classes" --test-percent 25 --num-epochs 2 \
  --num-cores 1 --batch-size 8 --threads 2 --plot none --result-image none \
  --checkpoint-dir "$tmp/share-ck" --metrics-file "$tmp/share.jsonl"
[ "$status" -eq 0 ] || fail "--test-percent: train: $(cat "$tmp/err")"
grep -q "^  data: $((39 - count)) training images .*, $count test images" "$tmp/out" ||
  fail "--test-percent 25: not $count test images (Python's count): $(grep data: "$tmp/out")"
grep -q "^  test split: about 25% of the images of $tmp/classes, by the CRC-32 of each path" \
  "$tmp/out" || fail "--test-percent: the settings do not say how the test split was made"
grep -q '"run.test_percent":"25"' "$tmp/share-ck/checkpoint-epoch-0002.safetensors" ||
  fail "--test-percent: the checkpoint does not record it"
run eval --checkpoint "$tmp/share-ck" --data-dir "$tmp/classes" --test-percent 25
grep -q "^Accuracy=$(accuracy_of "$tmp/share.jsonl")%" "$tmp/out" ||
  fail "--test-percent: eval: $(cat "$tmp/out" "$tmp/err"), training's $(accuracy_of "$tmp/share.jsonl")%"
expect 2 "--test-percent 30 differs from the checkpoint's 25" train --resume "$tmp/share-ck" \
  --num-epochs 3 --test-percent 30
refused "a folder of classes without a share" "(for CLASS/ alone, --test-percent P)" \
  --data-dir "$tmp/classes" --model "$tmp/lenet3.model"
refused "a share of IDX data" "--test-percent: .* holds idx data, with its own test split" \
  --data-dir "$data" --test-percent 20
refused "a share of a folder with splits" "holds train/ and test/, its own splits" \
  --data-dir "$tmp/three" --model "$tmp/lenet3.model" --test-percent 20
expect 2 "--test-percent" train --test-percent 100
run info --data-dir "$tmp/classes" --test-percent 25 --threads 2
grep -q "folder, $((39 - count)) training and $count test images of" "$tmp/out" ||
  fail "info --test-percent 25: $(cat "$tmp/out" "$tmp/err")"
finish "$reached"
