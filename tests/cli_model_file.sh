#!/bin/sh
# cli_model_file.sh — `cnnc train --model FILE`: the seed's model file trains to exactly the
# weights of the default run; a model that does not read the data's images into its classes,
# or a model file with a mistake, is refused before training with the file named; a model file
# without mean= and std= gets the training images'; models/lenet5.model learns. Needs Debian's Fashion-MNIST; the checks without data run without it.
# Usage: sh tests/cli_model_file.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp
short="--train-samples 2048 --test-samples 200 --num-epochs 2 --batch-size 32 --threads 2
       --result-image none --plot none -q"

input='input channels=1 height=28 width=28 mean=0.1307 std=0.3081'
printf '%s\nflatten\nlinear out=5\nlog_softmax\n' "$input" >"$tmp/five.model"
printf 'input channels=1 height=14 width=14 mean=0.1307 std=0.3081\nflatten\nlinear out=10\n'\
'log_softmax\n' >"$tmp/small.model"
printf 'input channels=1 height=28 width=28\nflatten\nlinear out=10\nlog_softmax\n' \
  >"$tmp/nomean.model"
# shellcheck disable=SC2086
expect 1 "five.model: the model reads 1x28x28 images into 5 classes, but the data has \
1x28x28 images in 10 classes" train --model "$tmp/five.model" $short \
  --save "$tmp/never.st"
[ -e "$tmp/never.st" ] && fail "a refused model still wrote --save"
expect 1 "small.model: the model reads 1x14x14 images into 10 classes, but the data has \
1x28x28" \
  train --model "$tmp/small.model"
expect 1 "missing.model: cannot open" train --model "$tmp/missing.model"
expect 2 "--model: empty name" train --model ''
run train --help
grep -q -e '--model FILE' "$tmp/out" || fail "cnnc train --help does not mention --model"

have_data "the training runs" || finish
# Without mean= and std= the training images' are computed (numpy's figures for the first
# 2048), printed, and recorded in the saved model's text.
"$cnnc" train --model "$tmp/nomean.model" --train-samples 2048 --test-samples 200 \
  --num-epochs 1 --batch-size 32 --threads 2 --result-image none --plot none \
  --save "$tmp/nomean.st" --data-dir "$data" >"$tmp/out" 2>&1 || fail "nomean.model: $(cat "$tmp/out")"
/usr/bin/python3 - "$data" "$tmp/nomean.st" <<'PY' || fail "nomean.model: the figures"
import gzip, json, struct, sys
import numpy as np
raw = gzip.open(sys.argv[1] + "/train-images-idx3-ubyte.gz").read()
x = np.frombuffer(raw, np.uint8, offset=16)[:2048 * 784].astype(np.float64) / 255
head = open(sys.argv[2], "rb").read()
text = json.loads(head[8:8 + struct.unpack("<Q", head[:8])[0]])["__metadata__"]["model"]
words = dict(w.split("=") for w in text.splitlines()[0].split()[1:])
got = float(words["mean"]), float(words["std"])
want = np.float32(x.mean()), np.float32(x.std())
assert abs(got[0] - want[0]) < 1e-6 and abs(got[1] - want[1]) < 1e-6, (got, want)
PY
grep -q "^Normalisation computed from the 2048 training images: mean=0\.[0-9]\{4\} std=" \
  "$tmp/out" || fail "nomean.model: no line on the normalisation: $(cat "$tmp/out")"
# The seed's model file and the built-in default: the same bytes, whatever the folder.
# shellcheck disable=SC2086
(cd "$tmp" && "$cnnc" train $short --save "$tmp/default.st" >/dev/null 2>"$tmp/err") ||
  fail "the default run failed: $(cat "$tmp/err")"
# shellcheck disable=SC2086
"$cnnc" train $short --model "$root/models/fashion_mnist.model" --save "$tmp/file.st" \
  >/dev/null 2>"$tmp/err" || fail "the --model run failed: $(cat "$tmp/err")"
cmp -s "$tmp/default.st" "$tmp/file.st" ||
  fail "--model models/fashion_mnist.model saved other bytes than the default run"

# set_classes IN OUT NAMES: a copy of the safetensors file IN whose __metadata__ "classes" is
# NAMES (one per line).
set_classes() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
header["__metadata__"]["classes"] = sys.argv[3]
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
}

# LeNet-5 learns: 2 epochs on 4096 images, scored on 1000.
run train --model "$root/models/lenet5.model" --train-samples 4096 --test-samples 1000 \
  --num-epochs 2 --num-cores 1 --batch-size 32 --learning-rate 0.05 --momentum 0.9 \
  --threads 2 --result-image none --plot none -q --save "$tmp/lenet.st" --checkpoint-dir "$tmp/ck"
acc=$(sed -n 's/^Epoch 2\/2 .*test loss [0-9.]* acc \([0-9.]*\)%.*/\1/p' "$tmp/out")
if [ "$status" -ne 0 ] || [ -z "$acc" ]; then
  fail "lenet5 did not train: status $status: $(cat "$tmp/err" "$tmp/out")"
elif ! awk -v a="$acc" 'BEGIN { exit !(a > 60) }'; then
  fail "lenet5 reached only $acc% on 1000 test images"
fi

# The saved model and the checkpoints carry their network: eval, predict and --resume rebuild
# it without --model; a --resume with another --model is refused.
grep -q '"model":"input channels=1 height=28 width=28' "$tmp/lenet.st" ||
  fail "--save did not record the model in __metadata__"
run eval --checkpoint "$tmp/lenet.st"
grep -q '^Accuracy=[0-9.]*%$' "$tmp/out" || fail "eval of lenet5: $(cat "$tmp/err")"
run predict --checkpoint "$tmp/ck" "$root/tests/fixtures/predict/t10k-0.png"
[ "$status" -eq 0 ] || fail "predict with lenet5: $(cat "$tmp/err")"
# The class names travel with the model: --save and checkpoints record them, eval and predict
# print a file's own, and names that do not fit the model are refused.
grep -q '"classes":"T-shirt/top\\nTrouser\\n' "$tmp/lenet.st" ||
  fail "--save did not record the class names in __metadata__"
digits="zero one two three four five six seven eight nine"
set_classes "$tmp/lenet.st" "$tmp/digits.st" "$(printf '%s\n' $digits | head -c -1)"
run eval --checkpoint "$tmp/digits.st" --test-samples 100
grep -q '^  seven ' "$tmp/out" ||
  fail "eval does not print the file's class names: $(cat "$tmp/out")"
run predict --checkpoint "$tmp/digits.st" "$root/tests/fixtures/predict/t10k-0.png"
grep -q '^  nine ' "$tmp/out" || fail "predict does not print the file's class names"
set_classes "$tmp/lenet.st" "$tmp/nine.st" "$(printf '%s\n' $digits | head -n 9 | head -c -1)"
expect 1 'nine.st: __metadata__ "classes" names 9 classes, the model has 10' \
  eval --checkpoint "$tmp/nine.st"
set_classes "$tmp/lenet.st" "$tmp/tab.st" "$(printf 'a\tb\n%s' "$(printf '%s\n' $digits | \
  head -n 9 | head -c -1)")"
expect 1 'tab.st: __metadata__ "classes": class 0: a name may not hold control characters' \
  eval --checkpoint "$tmp/tab.st"

# --model names the network of a file that records none; for one that records its own it must
# be that network.
run eval --checkpoint "$tmp/lenet.st" --model "$root/models/lenet5.model" --test-samples 100
[ "$status" -eq 0 ] || fail "eval with the file's own --model: $(cat "$tmp/err")"
expect 2 "--model $root/models/fashion_mnist.model is not the network of the checkpoint" \
  eval --checkpoint "$tmp/lenet.st" --model "$root/models/fashion_mnist.model"
expect 2 "--model $root/models/fashion_mnist.model is not the network of the checkpoint" \
  predict --checkpoint "$tmp/lenet.st" --model "$root/models/fashion_mnist.model" \
  "$root/tests/fixtures/predict/t10k-0.png"
expect 1 "pytorch_model.safetensors: tensor 0.weight is missing, but the file records no \
network and was read as $root/models/lenet5.model; give --model" \
  eval --checkpoint "$root/tests/fixtures/pytorch_model.safetensors" \
  --model "$root/models/lenet5.model"
expect 2 "--model $root/models/fashion_mnist.model is not the network of the checkpoint" \
  train --resume "$tmp/ck" --model "$root/models/fashion_mnist.model" --num-epochs 3
run train --resume "$tmp/ck" --model "$root/models/lenet5.model" --num-epochs 3 -q
[ "$status" -eq 0 ] || fail "--resume with its own --model: $(cat "$tmp/err")"
run train --resume "$tmp/ck" --num-epochs 4 -q
grep -q '^Epoch 4/4 ' "$tmp/out" || fail "--resume of lenet5 without --model: $(cat "$tmp/err")"
finish "lenet5: ${acc:-?}%"
