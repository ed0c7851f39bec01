#!/bin/sh
# cli_bad_input.sh — hostile files and folders fed to cnnc from the outside. Every case must end with the
# right exit status and one message that names the file and what is wrong, within a few
# seconds and a small amount of memory, and must write or overwrite nothing: the outputs the
# run was asked for stay absent, and a file already at the --save path keeps its bytes.
# Data files are built here from scratch (tiny valid IDX sets, then damaged copies), so no
# download is needed. Usage: sh tests/cli_bad_input.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
model=$root/tests/fixtures/pytorch_model.safetensors
require_cnnc
make_tmp
chmod 755 "$tmp"
cd "$tmp" || exit 1
max_seconds=5
max_rss_kb=262144 # 256 MiB: far below what the corrupt headers below ask for

# ---------------------------------------------------------------- building IDX files
be32() { # big-endian 32-bit integer as raw bytes
  printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) \
    $(($1 >> 8 & 255)) $(($1 & 255)))"
}
images() { # images FILE COUNT ROWS COLS: a valid IDX image file of grey pixels
  { printf '\000\000\010\003'; be32 "$2"; be32 "$3"; be32 "$4"
    head -c $(($2 * $3 * $4)) /dev/zero | tr '\000' '\177'; } >"$1"
}
labels() { # labels FILE COUNT: a valid IDX label file, labels 0..9 repeating
  { printf '\000\000\010\001'; be32 "$2"
    i=0; while [ $i -lt "$2" ]; do printf "\\$(printf '%03o' $((i % 10)))"; i=$((i + 1)); done
  } >"$1"
}
good_set() { # good_set DIR: a tiny valid Fashion-MNIST-shaped data folder
  mkdir -p "$1"
  images "$1/train-images-idx3-ubyte" 64 28 28
  labels "$1/train-labels-idx1-ubyte" 64
  images "$1/t10k-images-idx3-ubyte" 16 28 28
  labels "$1/t10k-labels-idx1-ubyte" 16
}
# case_set NAME: a copy of the good set to damage; prints its folder
case_set() {
  rm -rf "$tmp/$1"
  cp -r "$tmp/good" "$tmp/$1"
  echo "$tmp/$1"
}

# ---------------------------------------------------------------- running a case
# check CASE STATUS TEXT ARGS...: cnnc ARGS must exit with STATUS, with TEXT in its message,
# within max_seconds and max_rss_kb, leaving the outputs absent and precious.st untouched.
check() {
  name=$1 want=$2 text=$3
  shift 3
  rm -f out.png out.jsonl
  printf 'precious bytes' >precious.st
  start=$(date +%s%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o rss "$cnnc" "$@" >stdout 2>stderr
    status=$?
    rss=$(tail -n 1 rss)
  else
    "$cnnc" "$@" >stdout 2>stderr
    status=$?
    rss=0
  fi
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$status" -ne "$want" ]; then
    fail "$name: exit status $status, expected $want: $(cat stderr)"
  elif ! grep -q -e "cnnc: error: .*$text" stderr; then
    fail "$name: the message does not name '$text': $(cat stderr)"
  elif [ "$(grep -c 'cnnc: error:' stderr)" -ne 1 ]; then
    fail "$name: expected one error line: $(cat stderr)"
  fi
  [ "$ms" -le $((max_seconds * 1000)) ] || fail "$name: took $ms ms"
  [ "$rss" -le "$max_rss_kb" ] || fail "$name: peak memory $rss KiB"
  for f in out.png out.jsonl; do [ -e "$f" ] && fail "$name: wrote $f"; done
  [ "$(cat precious.st)" = "precious bytes" ] || fail "$name: overwrote the --save file"
}
train_case() { # train_case NAME TEXT DATA_DIR: a training run that must fail on its data
  check "$1" 1 "$2" train --data-dir "$3" --num-epochs 1 --num-cores 1 --batch-size 8 \
    --save precious.st --result-image out.png --metrics-file out.jsonl --threads 1
}

# The undamaged set must train, or the cases below would prove nothing.
good_set "$tmp/good"
"$cnnc" train --data-dir "$tmp/good" --num-epochs 1 --num-cores 1 --batch-size 8 \
  --result-image out.png --threads 1 >stdout 2>stderr ||
  fail "the undamaged set does not train: $(cat stderr)"
[ -s out.png ] || fail "the undamaged set: no picture"

# ---------------------------------------------------------------- damaged data files
d=$(case_set truncated)
head -c 30000 "$tmp/good/train-images-idx3-ubyte" >"$d/train-images-idx3-ubyte"
train_case "truncated images" "train-images-idx3-ubyte" "$d"

d=$(case_set empty)
: >"$d/train-labels-idx1-ubyte"
train_case "empty labels" "train-labels-idx1-ubyte" "$d"

d=$(case_set wrong-type)
{ printf '\000\000\011\003'; tail -c +5 "$tmp/good/train-images-idx3-ubyte"; } \
  >"$d/train-images-idx3-ubyte"
train_case "wrong element type" "train-images-idx3-ubyte" "$d"

d=$(case_set bit-flipped-magic)
{ printf '\200\000\010\003'; tail -c +5 "$tmp/good/train-images-idx3-ubyte"; } \
  >"$d/train-images-idx3-ubyte"
train_case "bit-flipped magic" "train-images-idx3-ubyte" "$d"

d=$(case_set oversized-header)
{ printf '\000\000\010\003'; be32 2147483647; be32 28; be32 28; head -c 4096 /dev/zero; } \
  >"$d/train-images-idx3-ubyte"
train_case "oversized header (2^31-1 images in 4 KiB)" "train-images-idx3-ubyte" "$d"

d=$(case_set huge-dims)
{ printf '\000\000\010\003'; be32 65536; be32 65536; be32 65536; } >"$d/train-images-idx3-ubyte"
train_case "dimensions past any size" "train-images-idx3-ubyte" "$d"

d=$(case_set wrong-ndim)
labels "$d/train-images-idx3-ubyte" 64
train_case "a label file where images belong" "train-images-idx3-ubyte" "$d"

d=$(case_set trailing)
printf 'extra' >>"$d/t10k-labels-idx1-ubyte"
train_case "trailing bytes" "t10k-labels-idx1-ubyte" "$d"

d=$(case_set small-images)
images "$d/train-images-idx3-ubyte" 64 27 28
train_case "27x28 images" "the training images are 1x27x28 in 10 classes, the test images 1x28x28" "$d"

d=$(case_set count-mismatch)
labels "$d/train-labels-idx1-ubyte" 63
train_case "63 labels for 64 images" "train-labels-idx1-ubyte" "$d"

d=$(case_set label-range)
{ printf '\000\000\010\001'; be32 64; head -c 63 /dev/zero; printf '\012'; } \
  >"$d/train-labels-idx1-ubyte"
train_case "label 10" "the model reads 1x28x28 images into 10 classes, but the data has 1x28x28 images in 11 classes" "$d"

# Noisy pixels, so that the compressed stream is long enough to cut and damage.
{ printf '\000\000\010\003'; be32 64; be32 28; be32 28; head -c $((64 * 784)) /dev/urandom; } |
  gzip -n -c >"$tmp/noisy.gz"
size=$(wc -c <"$tmp/noisy.gz")
d=$(case_set gzip-truncated)
head -c $((size / 2)) "$tmp/noisy.gz" >"$d/train-images-idx3-ubyte.gz"
rm "$d/train-images-idx3-ubyte"
train_case "truncated .gz" "train-images-idx3-ubyte.gz" "$d"

d=$(case_set gzip-corrupt)
{ head -c $((size / 2)) "$tmp/noisy.gz"; printf '\377\377\377\377'
  tail -c $((size - size / 2 - 4)) "$tmp/noisy.gz"; } >"$d/train-images-idx3-ubyte.gz"
rm "$d/train-images-idx3-ubyte"
train_case "corrupt deflate stream" "train-images-idx3-ubyte.gz" "$d"

d=$(case_set gzip-lying-header)
{ printf '\000\000\010\003'; be32 1000000; be32 28; be32 28; head -c $((64 * 784)) /dev/zero; } |
  gzip -n -c >"$d/train-images-idx3-ubyte.gz"
rm "$d/train-images-idx3-ubyte"
train_case "a .gz whose header claims 1,000,000 images and holds 64" \
  "train-images-idx3-ubyte.gz" "$d"

d=$(case_set a-folder)
rm "$d/t10k-images-idx3-ubyte"
mkdir "$d/t10k-images-idx3-ubyte"
train_case "a folder where a file belongs" "t10k-images-idx3-ubyte" "$d"

train_case "a data folder that is a file" "$tmp/good/train-labels-idx1-ubyte" \
  "$tmp/good/train-labels-idx1-ubyte"

# A folder that cannot be read. Root reads everything, so as root the run drops to nobody.
d=$(case_set unreadable)
chmod 000 "$d"
if [ "$(id -u)" -eq 0 ]; then
  if command -v runuser >/dev/null 2>&1; then
    chmod 777 "$tmp" && chmod 666 precious.st 2>/dev/null
    runuser -u nobody -- "$cnnc" train --data-dir "$d" --num-cores 1 --result-image none \
      >stdout 2>stderr
    status=$?
    if [ "$status" -ne 1 ] || ! grep -q "cnnc: error: .*$d" stderr; then
      fail "unreadable data folder: exit status $status: $(cat stderr)"
    fi
    chmod 755 "$tmp"
  else
    echo "skipped the unreadable-folder case: runuser is missing"
  fi
else
  train_case "unreadable data folder" "$d" "$d"
fi
chmod 755 "$d"

# ---------------------------------------------------------------- a checkpoint folder that fails
# A run that cannot write its checkpoint stops with the reason, and the checkpoint it resumed
# from stays whole: no temporary file is left, nothing is taken for a checkpoint.
ck_run() { # ck_run ARGS...: a tiny run on the good set with checkpoints in ck
  "$cnnc" train --data-dir "$tmp/good" --num-cores 1 --batch-size 8 --result-image none \
    --plot none --threads 1 "$@" >stdout 2>stderr
  status=$?
}
ck_intact() { # ck_intact CASE: ck holds exactly the epoch-1 checkpoint, unchanged
  cmp -s ck/checkpoint-epoch-0001.safetensors saved.st || fail "$1: the checkpoint changed"
  [ "$(ls -A ck)" = "checkpoint-epoch-0001.safetensors" ] || fail "$1: ck holds $(ls -A ck)"
}
rm -rf ck
ck_run --num-epochs 1 --checkpoint-dir ck
[ "$status" -eq 0 ] || fail "a run with --checkpoint-dir: exit status $status: $(cat stderr)"
cp ck/checkpoint-epoch-0001.safetensors saved.st

# A full disk, as the file-size limit makes it (writes fail with EFBIG; SIGXFSZ ignored).
(trap "" XFSZ; ulimit -f 100; ck_run --resume ck --num-epochs 2; exit "$status")
status=$?
if [ "$status" -ne 1 ] || ! grep -q "cnnc: error: .*ck/.*" stderr; then
  fail "a full disk: exit status $status: $(cat stderr)"
fi
ck_intact "a full disk"

# A folder this user may not write. Root writes everywhere, so as root the run drops to nobody.
if [ "$(id -u)" -eq 0 ]; then
  if command -v runuser >/dev/null 2>&1; then
    chmod 777 "$tmp"
    chmod 644 ck/checkpoint-epoch-0001.safetensors
    runuser -u nobody -- "$cnnc" train --data-dir "$tmp/good" --num-cores 1 --batch-size 8 \
      --result-image none --plot none --threads 1 --resume ck --num-epochs 2 >stdout 2>stderr
    status=$?
    chmod 755 "$tmp"
  else
    status=skip
  fi
else
  chmod 555 ck
  ck_run --resume ck --num-epochs 2
  chmod 755 ck
fi
if [ "$status" != skip ]; then
  if [ "$status" -ne 1 ] || ! grep -q "cnnc: error: .*ck" stderr; then
    fail "a folder without write permission: exit status $status: $(cat stderr)"
  fi
  ck_intact "a folder without write permission"
fi

# ---------------------------------------------------------------- damaged checkpoints
size=$(wc -c <"$model")
eval_case() { # eval_case NAME TEXT FILE
  check "$1" 1 "$2" eval --checkpoint "$3" --data-dir "$tmp/good" --threads 1
}
head -c $((size - 100)) "$model" >truncated.st
eval_case "truncated checkpoint" "truncated.st" truncated.st
{ printf '\000\000\000\000\000\001\000\000'; tail -c +9 "$model"; } >oversized.st
eval_case "header length of 2^40" "oversized.st" oversized.st
{ head -c 8 "$model"; printf '['; tail -c +10 "$model"; } >not-object.st
eval_case "header that is not a JSON object" "not-object.st" not-object.st
sed 's/"F32"/"F16"/' "$model" >wrong-dtype.st
eval_case "a dtype cnnc does not read" "wrong-dtype.st" wrong-dtype.st
sed 's/conv1\.weight/conv9.weight/' "$model" >wrong-name.st
eval_case "a tensor the model does not have" "wrong-name.st" wrong-name.st
head -c 8 "$model" >header-only.st
eval_case "only the length" "header-only.st" header-only.st
: >empty.st
eval_case "an empty checkpoint" "empty.st" empty.st
mkdir folder.st
eval_case "a folder as checkpoint" "folder.st" folder.st
printf 'root:x:0:0:root:/root:/bin/bash\n' >passwd
eval_case "a text file" "passwd: not a safetensors file" passwd

# patch NAME WORD FILE: a copy of the model with every float of tensor NAME (or only the first,
# with WORD "first") set to the little-endian bytes in FILE.
header_len=$(od -An -tu8 -N8 "$model" | tr -d ' ')
patch() {
  offsets=$(head -c $((header_len + 8)) "$model" | tail -c +9 |
    sed -n "s/.*\"$1\":{[^}]*\"data_offsets\":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/p")
  begin=${offsets% *} end=${offsets#* }
  count=$(((end - begin) / 4))
  [ "$2" = first ] && count=1
  head -c $((header_len + 8 + begin)) "$model"
  i=0
  while [ "$i" -lt "$count" ]; do cat "$3"; i=$((i + 1)); done
  tail -c +$((header_len + 9 + begin + count * 4)) "$model"
}
printf '\346\261\141\177' >huge.bytes    # 3e38: finite, but the outputs overflow
printf '\000\000\200\277' >minus1.bytes  # -1.0
patch fc2.weight all huge.bytes >huge.st
[ "$(wc -c <huge.st)" -eq "$size" ] || fail "huge.st: the patch changed the size"
check "outputs that overflow, eval" 1 "huge.st: the model's outputs are not finite" \
  eval --checkpoint huge.st --data-dir "$tmp/good" --threads 1
check "outputs that overflow, predict" 1 "huge.st: .*not finite" \
  predict --checkpoint huge.st --idx "$tmp/good/t10k-images-idx3-ubyte" --index 0
patch bn1.running_var first minus1.bytes >negative-variance.st
eval_case "a negative running variance" "negative-variance.st: tensor bn1.running_var holds a negative variance" \
  negative-variance.st

finish
