#!/bin/sh
# cli_memory.sh — peak memory where the flags or a file's header ask for far more than the work
# needs. Each case runs under /usr/bin/time -v and must end with the right exit status within
# the limit written beside it, with the reason for that limit: batch buffers and threads follow
# the samples that run, not --batch-size and --threads, and a file's header is checked (against
# the file's size, and against the other file of its split) before its body is read or
# decompressed. It prints each case's peak and wall time; it asserts memory, not speed, which
# moves with the machine. Files are built here (sparse or tiny); the eval and train cases need
# Debian's Fashion-MNIST. Usage: sh tests/cli_memory.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
model=$root/tests/fixtures/pytorch_model.safetensors
picture=$root/tests/fixtures/predict/t10k-8.jpg
require_cnnc
make_tmp
cd "$tmp" || exit 1
[ -x /usr/bin/time ] || { echo "FAIL: /usr/bin/time is missing (Debian package time)"; exit 1; }

# measure LIMIT_MIB STATUS NAME ARGS...: runs cnnc ARGS, which must exit with STATUS and peak at
# most LIMIT_MIB MiB resident (/usr/bin/time -v's maximum resident set size).
measure() {
  limit=$1 want=$2 name=$3
  shift 3
  /usr/bin/time -v -o time.txt "$cnnc" "$@" >out 2>err
  status=$?
  kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' time.txt)
  wall=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' time.txt)
  echo "$name: peak ${kb:-?} KiB (limit $limit MiB), wall $wall"
  if [ "$status" -ne "$want" ]; then
    fail "$name: exit status $status, expected $want: $(cat err)"
  elif [ -z "$kb" ] || [ "$kb" -gt $((limit * 1024)) ]; then
    fail "$name: peak memory ${kb:-?} KiB, over the limit of $limit MiB"
  fi
}
# expect_err TEXT NAME: the last case's stderr has TEXT (a grep pattern).
expect_err() {
  grep -q -e "$1" err || fail "$2: stderr lacks '$1': $(cat err)"
}

# ---------------------------------------------------------------- flags larger than the work
if have_data "the eval and train cases"; then
  # 10 images with --batch-size 65536: one batch of 10. The program and the 10,000 test images
  # (7.5 MiB) take about 15 MiB; buffers planned for the flag's batch took 5 GB.
  measure 64 0 "eval of 10 images, --batch-size 65536" eval --checkpoint "$model" \
    --test-samples 10 --batch-size 65536
  grep -q "cnnc: note:" err && fail "eval of 10 images: a note without --threads: $(cat err)"
  grep -q "^Accuracy=" out || fail "eval of 10 images: no accuracy: $(cat out)"

  # 100 images with --threads 1024: one batch, so one thread and one batch's buffers, about
  # 20 MiB in all; a thread and a workspace per asked thread took 5.8 GB.
  measure 64 0 "eval of 100 images, --threads 1024" eval --checkpoint "$model" \
    --test-samples 100 --threads 1024
  expect_err "^cnnc: note: --threads 1024: 1 thread can have work (100 test images in 1 batch" \
    "eval --threads 1024"
  [ "$(grep -c 'cnnc: note:' err)" -eq 1 ] || fail "eval --threads 1024: not one note: $(cat err)"

  # A 4,096-image epoch with --threads 1000: a step can use at most as many threads as the
  # chunks one replica's batch of 128 is cut into (64 here, under 6 MiB of buffers each), plus
  # the 47 MiB training set: about 430 MiB; a thread and buffers per asked thread took 5.75 GB.
  measure 600 0 "train on 4096 images, --threads 1000" train --train-samples 4096 \
    --test-samples 100 --num-epochs 1 --threads 1000 --result-image none --plot none
  expect_err "^cnnc: note: --threads 1000: [0-9]* threads can have work" "train --threads 1000"
  [ "$(grep -c 'cnnc: note:' err)" -eq 1 ] || fail "train --threads 1000: not one note: $(cat err)"
fi

# ---------------------------------------------------------------- headers larger than the file
# A sparse 3 GiB file (no disk used) whose header length says 2^40: refused from its first 8
# bytes; the program alone takes about 6 MiB.
truncate -s 3G length.st
printf '\000\000\000\000\000\001\000\000' | dd of=length.st conv=notrunc 2>/dev/null
measure 64 1 "3 GiB file, header length 2^40" predict --checkpoint length.st "$picture"
expect_err "length.st: not a safetensors file: .* 1099511627776, over the limit" "length 2^40"

# A good header (one 4-byte tensor) followed by 3 GiB of nothing: refused from the header and
# the file's size, before the rest is read (reading it took 3 GB).
header='{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}  '
[ "${#header}" -eq 56 ] || fail "the test header is ${#header} bytes, not 56"
{ printf '\070\000\000\000\000\000\000\000'; printf '%s' "$header"; } >trailing.st
truncate -s 3G trailing.st
measure 64 1 "3 GiB file, a 4-byte tensor" predict --checkpoint trailing.st "$picture"
expect_err "trailing.st: 3221225404 trailing bytes after the last tensor's data" "3 GiB trailing"

# A valid .gz of 213,920 blank images (168 MB once inflated, 168 kB compressed: 160 gzip
# members of 1,337 images each) beside a label file of 16: refused from the two headers, so
# nothing is inflated or allocated for the images; inflating them first took 168 MB.
mkdir fake
{ printf '\000\000\010\003\000\003\103\240'; printf '\000\000\000\034\000\000\000\034'; } |
  gzip -c >fake/train-images-idx3-ubyte.gz # 213920 (0x343A0) x 28 x 28
head -c 1048208 /dev/zero | gzip -9 -c >member.gz # 1,337 images of 784 bytes
cat member.gz member.gz member.gz member.gz member.gz member.gz member.gz member.gz >eight.gz
i=0
while [ $i -lt 20 ]; do cat eight.gz >>fake/train-images-idx3-ubyte.gz; i=$((i + 1)); done
{ printf '\000\000\010\001\000\000\000\020'; head -c 16 /dev/zero; } >fake/train-labels-idx1-ubyte
measure 64 1 ".gz of 213,920 images beside 16 labels" train --data-dir fake --num-epochs 1 \
  --result-image none --plot none
expect_err "train-images-idx3-ubyte.gz has 213920 images but .* has 16 labels" "lying .gz"

finish
