#!/bin/sh
# cli_make_dataset.sh — tools/make_dataset.py, the made-up datasets of the tests: for each
# layout (idx raw and .gz, cifar10, folder in colour and grey, PNG and JPEG) the files it must
# write with the sizes their headers and record counts imply, every class present and balanced,
# the same bytes from the same arguments (and other bytes from another seed), and data that a
# nearest-class-centroid classifier on the pixels learns well above chance while one on the mean
# brightness alone stays near chance; cnnc trains on the idx layout past 85% in 3 epochs (when
# built). Bad flags get one message, exit 2 and no files. The reading here is this script's own
# (numpy and PIL), not the generator's.
# Usage: sh tests/cli_make_dataset.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
make_tmp
py=/usr/bin/python3
gen=$root/tools/make_dataset.py
"$py" -c 'import numpy, PIL' 2>/dev/null || {
  echo "FAIL: $py lacks numpy or PIL (Debian packages python3-numpy python3-pil)"
  exit 1
}

# The checker: reads a dataset DIR of layout FORMAT, prints one line per thing wrong, then
# "accuracy centroid X brightness Y" on stdout's last line. Arguments: FORMAT DIR TRAIN TEST
# CLASSES CHANNELS HEIGHT WIDTH.
cat >"$tmp/check.py" <<'EOF'
import gzip, os, sys
import numpy as np
from PIL import Image

fmt, d = sys.argv[1], sys.argv[2]
n_train, n_test, k, ch, h, w = map(int, sys.argv[3:9])
wrong = []

def idx_file(name, magic, n, dims):
    path = os.path.join(d, name)
    gz = not os.path.exists(path)
    b = gzip.open(path + ".gz").read() if gz else open(path, "rb").read()
    ndim = b[3]
    shape = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    if int.from_bytes(b[:4], "big") != magic:
        wrong.append(f"{name}: magic {b[:4].hex()}")
    if shape != [n] + dims:
        wrong.append(f"{name}: dimensions {shape}, expected {[n] + dims}")
    if len(b) != 4 + 4 * ndim + int(np.prod(shape)):
        wrong.append(f"{name}: {len(b)} bytes, the header implies {4 + 4 * ndim + np.prod(shape)}")
    return np.frombuffer(b[4 + 4 * ndim:], np.uint8).reshape(shape)

def read_idx():
    out = []
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        x = idx_file(prefix + "-images-idx3-ubyte", 0x803, n, [h, w])
        out.append((x[:, None], idx_file(prefix + "-labels-idx1-ubyte", 0x801, n, [])))
    return out

def cifar_file(name, n):
    b = open(os.path.join(d, name), "rb").read()
    if len(b) != n * 3073:
        wrong.append(f"{name}: {len(b)} bytes, expected {n} records of 3073")
    r = np.frombuffer(b, np.uint8).reshape(-1, 3073)
    return r[:, 1:].reshape(-1, 3, 32, 32), r[:, 0]

def read_cifar():
    parts = [cifar_file(f"data_batch_{i}.bin", n_train // 5 + (i <= n_train % 5))
             for i in range(1, 6)]
    names = open(os.path.join(d, "batches.meta.txt")).read()
    if not names.endswith("\n\n") or len(names[:-2].split("\n")) != k:
        wrong.append(f"batches.meta.txt: not {k} names and an empty last line: {names!r}")
    train = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    return [train, cifar_file("test_batch.bin", n_test)]

def read_folder():
    out = []
    mode = "L" if ch == 1 else "RGB"
    for split, n in (("train", n_train), ("test", n_test)):
        classes = sorted(os.listdir(os.path.join(d, split)))
        if len(classes) != k:
            wrong.append(f"{split}: {len(classes)} class folders, expected {k}")
        xs, ys = [], []
        for c, name in enumerate(classes):
            for f in sorted(os.listdir(os.path.join(d, split, name))):
                im = Image.open(os.path.join(d, split, name, f))
                if im.mode != mode or im.size != (w, h) or \
                        im.format != {".png": "PNG", ".jpg": "JPEG"}.get(f[-4:]):
                    wrong.append(f"{split}/{name}/{f}: {im.format} {im.mode} {im.size}")
                a = np.asarray(im)
                xs.append(a[None] if a.ndim == 2 else a.transpose(2, 0, 1))
                ys.append(c)
        if len(ys) != n:
            wrong.append(f"{split}: {len(ys)} images, expected {n}")
        out.append((np.array(xs), np.array(ys)))
    return out

(tx, ty), (vx, vy) = {"idx": read_idx, "cifar10": read_cifar, "folder": read_folder}[fmt]()
for split, y in (("train", ty), ("test", vy)):
    counts = np.bincount(y, minlength=k)
    if len(counts) != k or counts.min() == 0 or counts.max() - counts.min() > 1:
        wrong.append(f"{split}: labels not balanced over {k} classes: {counts.tolist()}")
    if fmt != "folder" and len(y) >= 4 * k and (np.diff(y) != 0).mean() < 0.5:
        wrong.append(f"{split}: the labels are not shuffled")
for line in wrong[:10]:
    print(line)
tx = tx.reshape(len(tx), -1).astype(np.float64)
vx = vx.reshape(len(vx), -1).astype(np.float64)
centroids = np.array([tx[ty == c].mean(0) for c in range(k)])
dist = (vx * vx).sum(1)[:, None] - 2 * vx @ centroids.T + (centroids * centroids).sum(1)
centroid = (dist.argmin(1) == vy).mean()
# The brightness classifier: 10 bins of the mean pixel (train quantiles), each predicting
# its most common training class.
tb, vb = tx.mean(1), vx.mean(1)
edges = np.quantile(tb, np.linspace(0, 1, 11)[1:-1])
tbin, vbin = np.searchsorted(edges, tb), np.searchsorted(edges, vb)
majority = np.array([np.bincount(ty[tbin == b], minlength=k).argmax() for b in range(10)])
print(f"accuracy centroid {centroid:.3f} brightness {(majority[vbin] == vy).mean():.3f}")
EOF

# dataset NAME FORMAT TRAIN TEST CLASSES CHANNELS HEIGHT WIDTH [FLAGS...]: makes $tmp/NAME with
# those sizes (given to the script too), checks it, and when FLAGS hold no --seed makes it a
# second time into $tmp/NAME.again, which must have the same bytes.
dataset() {
  name=$1 fmt=$2 n_train=$3 n_test=$4 k=$5 ch=$6 h=$7 w=$8
  shift 8
  args="--format $fmt --train $n_train --test $n_test --classes $k --height $h --width $w"
  [ "$fmt" = idx ] || args="$args --channels $ch"
  # shellcheck disable=SC2086 # args is a list of words
  if ! "$py" "$gen" $args "$@" --out "$tmp/$name" 2>"$tmp/err"; then
    fail "$name: make_dataset.py $args $*: $(cat "$tmp/err")"
    return 1
  fi
  [ -s "$tmp/err" ] && fail "$name: it printed on stderr: $(cat "$tmp/err")"
  "$py" "$tmp/check.py" "$fmt" "$tmp/$name" "$n_train" "$n_test" "$k" "$ch" "$h" "$w" \
    >"$tmp/check" 2>&1 || fail "$name: the checker failed: $(cat "$tmp/check")"
  grep -v '^accuracy ' "$tmp/check" | while IFS= read -r line; do echo "FAIL: $name: $line"; done
  grep -q -v '^accuracy ' "$tmp/check" && failures=$((failures + 1))
  # shellcheck disable=SC2086
  "$py" "$gen" $args "$@" --out "$tmp/$name.again" 2>/dev/null
  diff -r "$tmp/$name" "$tmp/$name.again" >/dev/null ||
    fail "$name: the same arguments gave other files"
  return 0
}

# learnable NAME MIN_CENTROID MAX_BRIGHTNESS: the accuracies of the last check.
learnable() {
  set -- "$1" "$2" "$3" "$(awk '/^accuracy /{print $3, $5}' "$tmp/check")"
  echo "$suite: $1: nearest centroid ${4% *}, mean brightness ${4#* } (test split)"
  awk -v a="${4% *}" -v m="$2" 'BEGIN { exit !(a >= m) }' ||
    fail "$1: nearest centroid ${4% *}, expected at least $2"
  awk -v a="${4#* }" -v m="$3" 'BEGIN { exit !(a <= m) }' ||
    fail "$1: mean brightness alone ${4#* }, expected at most $3 (near chance)"
}

# ---------------------------------------------------------------- each layout
# Chance is 1/classes; the brightness bound leaves room for 500 test samples' spread.
dataset idx idx 2000 500 10 1 28 28 && learnable idx 0.35 0.18
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
  t10k-labels-idx1-ubyte; do
  [ -f "$tmp/idx/$f" ] || fail "idx: $f is missing"
done
[ -e "$tmp/idx/classes.txt" ] && fail "idx: classes.txt written without --names"
dataset idx-gz idx 2000 500 10 1 28 28 --gzip --names
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
  t10k-labels-idx1-ubyte; do
  gzip -dc "$tmp/idx-gz/$f.gz" 2>/dev/null | cmp -s - "$tmp/idx/$f" ||
    fail "idx --gzip: $f.gz is not the raw file compressed"
done
[ "$(wc -l <"$tmp/idx-gz/classes.txt" 2>/dev/null)" = 10 ] || fail "idx --names: no 10 names"
dataset cifar10 cifar10 2000 500 10 3 32 32 && learnable cifar10 0.35 0.18
dataset folder folder 600 300 3 3 32 32 --image-format mixed &&
  learnable folder 0.7 0.45
ls "$tmp/folder/train"/*/*.png >/dev/null 2>&1 || fail "folder mixed: no PNG"
ls "$tmp/folder/train"/*/*.jpg >/dev/null 2>&1 || fail "folder mixed: no JPEG"
dataset grey folder 120 40 20 1 12 20 --image-format jpeg
dataset many idx 1200 300 100 1 8 9 && learnable "100 classes of 8x9" 0.03 0.025

# Another seed, other bytes.
"$py" "$gen" --format cifar10 --seed 2 --out "$tmp/seed2"
cmp -s "$tmp/seed2/test_batch.bin" "$tmp/cifar10/test_batch.bin" &&
  fail "--seed 2 gave the bytes of --seed 1"

# ---------------------------------------------------------------- cnnc learns it
if [ -x "$cnnc" ]; then
  (cd "$tmp" && "$cnnc" train --data-dir "$tmp/idx" --num-epochs 3 --num-cores 1 \
    --batch-size 32 --learning-rate 0.05 --momentum 0.9 --result-image none --plot none \
    >"$tmp/train.out" 2>&1) || fail "cnnc train on the idx layout: $(tail -n 3 "$tmp/train.out")"
  acc=$(awk '/^Epoch 3\/3 /{ v = $(NF - 2); sub("%", "", v); print v }' "$tmp/train.out")
  echo "$suite: cnnc train, 3 epochs on the idx layout: ${acc:-no} test accuracy"
  awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 85) }' ||
    fail "cnnc train on the idx layout: test accuracy ${acc:-missing}%, expected at least 85%"
fi

# ---------------------------------------------------------------- bad flags
# refused TEXT ARGS...: exit 2, one line on stderr naming TEXT, nothing written.
refused() {
  text=$1
  shift
  "$py" "$gen" "$@" --out "$tmp/refused" >"$tmp/out" 2>"$tmp/err"
  status=$?
  [ "$status" -eq 2 ] || fail "make_dataset.py $*: exit status $status, expected 2"
  grep -q -e "$text" "$tmp/err" || fail "make_dataset.py $*: no '$text': $(cat "$tmp/err")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "make_dataset.py $*: not one line: $(cat "$tmp/err")"
  [ -e "$tmp/refused" ] && fail "make_dataset.py $*: wrote $tmp/refused although refused"
}
refused "classes 1: must be 2..100" --format idx --classes 1
refused "classes 101" --format folder --classes 101
refused "idx holds grey images only" --format idx --channels 3
refused "cifar10 holds 32x32 colour" --format cifar10 --width 28
refused "height 7: must be 8" --format folder --height 7
refused "train 5: must be 10" --format idx --train 5
refused "gzip: only for --format idx" --format cifar10 --gzip
refused "image-format: only for --format folder" --format idx --image-format png
refused "invalid choice" --format tfrecord
"$py" "$gen" --help >"$tmp/out" 2>&1 || fail "--help: exit status $?"
for flag in --format --out --train --test --classes --channels --height --width --seed --gzip \
  --image-format --names; do
  grep -q -e "$flag" "$tmp/out" || fail "--help does not describe $flag"
done
grep -q 'tools/make_dataset.py' "$root/docs/testing.md" || fail "docs/testing.md lacks it"
finish
