#!/bin/sh
# cli_hostile_files.sh — cnnc against files and paths that are not what they claim: a named pipe
# (FIFO) wherever a command reads a file is refused at once, never waited on; outputs may not be
# device nodes or pipes where cnnc renames a temporary file over them, while the metrics file may
# be a pipe (with a reader) or a character device; two outputs that are one file under two
# spellings, a link or a hard link, an output under a checkpoint's name in the checkpoint folder
# and something other than a file under such a name are refused before the first step; control
# characters from a checkpoint's metadata or a file name reach the terminal as \xNN; a checkpoint
# renamed to another epoch's name, and a count too large for a flag, get messages that say so.
# Sections marked "fifo" make named pipes and "root" a device node (mknod; skipped where that is
# not allowed); every command that meets a pipe runs under `timeout`, so that a regression fails
# instead of hanging the suite. Needs Debian's Fashion-MNIST; skipped without it.
# Usage: sh tests/cli_hostile_files.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
image=$root/tests/fixtures/predict/t10k-0.png
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1
# The commands below would write over their inputs if a refusal regressed: copies only.
cp "$root/tests/fixtures/pytorch_model.safetensors" model.safetensors
model=$tmp/model.safetensors

# quick STATUS TEXT ARGS...: as expect (TEXT may be empty: no message expected), under
# `timeout 5` (30 under the sanitizers, which run several times slower and share the machine's
# cores with other tests): a command that waits on a pipe fails (status 124) instead of hanging.
quick_limit=5
[ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] && quick_limit=30
quick() {
  quick_status=$1
  quick_text=$2
  shift 2
  timeout "$quick_limit" "$cnnc" "$@" >out 2>err
  status=$?
  if [ "$status" -ne "$quick_status" ]; then
    fail "cnnc $*: exit status $status, expected $quick_status (124: still waiting after" \
      "$quick_limit s):" \
      "$(cat err)"
  elif [ -n "$quick_text" ] && ! grep -q -e "$quick_text" err; then
    fail "cnnc $*: the message does not mention '$quick_text': $(cat err)"
  fi
}

# still_fifo PATH WHAT: PATH is still a named pipe after WHAT.
still_fifo() {
  [ -p "$1" ] || fail "$2: $1 is no longer a named pipe: $(ls -l "$1" 2>&1)"
}

# le64 N: N as 8 bytes, little-endian.
le64() {
  n=$1
  i=0
  while [ "$i" -lt 8 ]; do
    # shellcheck disable=SC2059 # the format is the byte's octal escape
    printf "\\$(printf '%03o' $((n & 255)))"
    n=$((n >> 8))
    i=$((i + 1))
  done
}

# edit_header IN OUT SED: OUT is the safetensors file IN with its JSON header edited by the sed
# script SED (and its length fixed).
edit_header() {
  len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  head -c $((len + 8)) "$1" | tail -c "$len" | sed "$3" >header.json
  { le64 "$(wc -c <header.json)" && cat header.json && tail -c +$((len + 9)) "$1"; } >"$2"
}

small="--train-samples 256 --test-samples 100 --num-cores 1 --batch-size 64 --threads 2"
small="$small --result-image none --plot none"

# One run of one epoch: a checkpoint folder and a metrics file.
# shellcheck disable=SC2086
run train $small --num-epochs 1 --checkpoint-dir ck --metrics-file m.jsonl
[ "$status" -eq 0 ] || fail "the 1-epoch run: exit status $status: $(cat err)"
checkpoint=ck/checkpoint-epoch-0001.safetensors
cp "$checkpoint" first.safetensors
cp m.jsonl metrics.jsonl

# ---------------------------------------------------------------- fifo: inputs never block
# A data folder whose test labels are a named pipe, raw and .gz.
mkdir raw gz
for f in "$data"/*; do ln -s "$f" raw/ && ln -s "$f" gz/; done
rm raw/t10k-labels-idx1-ubyte.gz gz/t10k-labels-idx1-ubyte.gz
mkfifo raw/t10k-labels-idx1-ubyte gz/t10k-labels-idx1-ubyte.gz pipe.safetensors pipe.png \
  pipe.jsonl
refused="not a regular file (a named pipe)"
quick 1 "raw/t10k-labels-idx1-ubyte: $refused" eval --checkpoint "$model" --data-dir raw
quick 1 "gz/t10k-labels-idx1-ubyte.gz: $refused" eval --checkpoint "$model" --data-dir gz
# shellcheck disable=SC2086
quick 1 "gz/t10k-labels-idx1-ubyte.gz: $refused" train $small --data-dir gz
quick 1 "pipe.safetensors: $refused" eval --checkpoint pipe.safetensors
quick 1 "pipe.safetensors: $refused" predict --checkpoint pipe.safetensors "$image"
quick 1 "pipe.png: $refused" predict --checkpoint "$model" pipe.png
quick 1 "pipe.safetensors: $refused" predict --checkpoint "$model" --idx pipe.safetensors \
  --index 0
quick 1 "pipe.safetensors: $refused" train --resume pipe.safetensors
quick 1 "pipe.jsonl: $refused" plot pipe.jsonl -o curves.png
timeout 5 "$cnnc" info --data-dir raw --threads 1 >out 2>err
status=$?
# info reports an unusable dataset on its line and still succeeds (docs/commands.md)
[ "$status" -eq 0 ] && grep -q "^Dataset: .*raw/t10k-labels-idx1-ubyte: $refused" out ||
  fail "info --data-dir raw: exit status $status (124: still waiting), output: $(cat out err)"

# A checkpoint folder whose newest checkpoint is a named pipe.
mkdir piped
cp first.safetensors piped/checkpoint-epoch-0001.safetensors
mkfifo piped/checkpoint-epoch-0002.safetensors
quick 1 "piped/checkpoint-epoch-0002.safetensors: named like a checkpoint but is a named pipe" \
  train --resume piped --num-epochs 3
quick 1 "piped/checkpoint-epoch-0002.safetensors: named like a checkpoint but is a named pipe" \
  eval --checkpoint piped
still_fifo piped/checkpoint-epoch-0002.safetensors "resuming its folder"

# A run whose recorded metrics file became a named pipe: nobody reads it, refused at once; with
# a reader, it gets the resumed epoch's line.
rm m.jsonl
mkfifo m.jsonl
quick 1 "m.jsonl: a named pipe that no process is reading" train --resume ck --num-epochs 2
timeout 20 cat m.jsonl >resumed.jsonl &
reader=$!
quick 0 "" train --resume ck --num-epochs 2
wait "$reader"
grep -q '^{"epoch":2,' resumed.jsonl ||
  fail "resume into a metrics pipe with a reader: the reader got: $(cat resumed.jsonl)"
rm -f ck/checkpoint-epoch-0002.safetensors m.jsonl

# ---------------------------------------------------------------- fifo: outputs
# The metrics file may be a named pipe: with a reader it gets every line, without one the run is
# refused at once, before training.
timeout 20 cat pipe.jsonl >lines.jsonl &
reader=$!
# shellcheck disable=SC2086
quick 0 "" train $small --num-epochs 2 --metrics-file pipe.jsonl
wait "$reader"
[ "$(grep -c '^{"epoch":' lines.jsonl)" -eq 2 ] ||
  fail "--metrics-file to a pipe with a reader: the reader got: $(cat lines.jsonl)"
# shellcheck disable=SC2086
quick 1 "--metrics-file: pipe.jsonl: a named pipe that no process is reading" train $small \
  --metrics-file pipe.jsonl
grep -q "^Epoch" out && fail "--metrics-file to a pipe without a reader: it trained first"
# A character device is a metrics file too; /dev/stdout sent to a file writes its lines between
# the output's, through the same descriptor, rather than over them.
# shellcheck disable=SC2086
quick 0 "" train $small --metrics-file /dev/null
# shellcheck disable=SC2086
timeout 60 "$cnnc" train $small --num-epochs 2 --metrics-file /dev/stdout >log.txt 2>err
[ "$(grep -c '^{"epoch":[12],.*}$' log.txt)" -eq 2 ] && grep -q '^cnnc .*: 2 epochs' log.txt &&
  grep -q '^Total Training time = ' log.txt ||
  fail "--metrics-file /dev/stdout into a file: the lines are mixed up: $(cat log.txt err)"
# Outputs written through a temporary file and a rename may not be pipes: the rename would
# replace the pipe.
# shellcheck disable=SC2086
quick 1 "--save: pipe.safetensors is a named pipe, not a regular file" train $small \
  --save pipe.safetensors
still_fifo pipe.safetensors "train --save"
# shellcheck disable=SC2086
quick 1 "--result-image: pipe.png is a named pipe" train $small --result-image pipe.png
# shellcheck disable=SC2086
quick 1 "--plot: pipe.png is a named pipe" train $small --plot pipe.png
quick 1 "--output: pipe.png is a named pipe" plot metrics.jsonl -o pipe.png
quick 1 "--confusion: pipe.png is a named pipe" eval --checkpoint "$model" --confusion pipe.png
still_fifo pipe.png "pictures written to it"

# ---------------------------------------------------------------- root: device nodes as outputs
# A copy of /dev/null's node (character device 1,3) in the test folder, so that a regression
# replaces this copy, never the system's.
if mknod null c 1 3 2>/dev/null; then
  # shellcheck disable=SC2086
  quick 1 "--save: null is a character device, not a regular file" train $small --save null
  [ -c null ] || fail "--save null: the device node was replaced: $(ls -l null)"
  # shellcheck disable=SC2086
  quick 1 "--result-image: null is a character device" train $small --result-image null
  [ -c null ] || fail "--result-image null: the device node was replaced: $(ls -l null)"
else
  echo "$suite: skipped the device nodes: mknod is not allowed here"
fi

# ---------------------------------------------------------------- one file, one role
# shellcheck disable=SC2086
quick 2 "--save same.x and --metrics-file ./same.x are the same file" train $small \
  --save same.x --metrics-file ./same.x
[ -e same.x ] && fail "two spellings of one output: something was written"
mkdir sub
# shellcheck disable=SC2086
quick 2 "--result-image sub/../same.png and --plot same.png are the same file" train $small \
  --result-image sub/../same.png --plot same.png
: >target.jsonl
ln -s target.jsonl link.safetensors
# shellcheck disable=SC2086
quick 2 "--save link.safetensors and --metrics-file target.jsonl are the same file" \
  train $small --save link.safetensors --metrics-file target.jsonl
ln target.jsonl hard.png
# shellcheck disable=SC2086
quick 2 "--metrics-file target.jsonl and --plot hard.png are the same file" train $small \
  --metrics-file target.jsonl --plot hard.png
ln -s missing.safetensors dangling.safetensors
# shellcheck disable=SC2086
quick 1 "--save: dangling.safetensors is a symbolic link to a missing file" train $small \
  --save dangling.safetensors
# Outputs against the checkpoint folder: under a checkpoint's name, a hard link to a
# checkpoint, the folder itself; refused before the first step.
mkdir own
# shellcheck disable=SC2086
quick 2 "--save own/checkpoint-epoch-0001.safetensors: in the --checkpoint-dir folder own" \
  train $small --checkpoint-dir own --save own/checkpoint-epoch-0001.safetensors
grep -q "^Epoch" out && fail "--save under a checkpoint's name: it trained first"
# shellcheck disable=SC2086
quick 2 "--metrics-file ./own/../own/checkpoint-epoch-0002.safetensors: in the" train $small \
  --checkpoint-dir own/ --metrics-file ./own/../own/checkpoint-epoch-0002.safetensors
quick 2 "--save ck/checkpoint-epoch-0002.safetensors: in the --checkpoint-dir folder ck" \
  train --resume ck --num-epochs 2 --save ck/checkpoint-epoch-0002.safetensors
ln "$checkpoint" alias.jsonl
# shellcheck disable=SC2086
quick 2 "--metrics-file alias.jsonl is the same file as ck/checkpoint-epoch-0001" \
  train $small --checkpoint-dir ck --metrics-file alias.jsonl
quick 2 "--save ck/checkpoint-epoch-0001.safetensors is the checkpoint being resumed" \
  train --resume ck/checkpoint-epoch-0001.safetensors --num-epochs 2 \
  --save ck/checkpoint-epoch-0001.safetensors
# shellcheck disable=SC2086
quick 2 "--plot new is the --checkpoint-dir folder new" train $small --checkpoint-dir new \
  --plot new
# A folder named like a checkpoint in the checkpoint folder: refused before the first step.
mkdir -p dirs/checkpoint-epoch-0002.safetensors
# shellcheck disable=SC2086
quick 1 "dirs/checkpoint-epoch-0002.safetensors: named like a checkpoint but is a folder" \
  train $small --num-epochs 3 --checkpoint-dir dirs
grep -q "^Epoch" out && fail "a folder under a checkpoint's name: it trained first"
[ -e dirs/checkpoint-epoch-0001.safetensors ] &&
  fail "a folder under a checkpoint's name: a checkpoint was saved first"
cp "$model" scored.safetensors
quick 2 "--confusion: 'scored.safetensors' is the checkpoint itself" eval --checkpoint \
  scored.safetensors --confusion scored.safetensors

# ---------------------------------------------------------------- control characters
# A checkpoint whose "isa" holds ESC and a newline: the warning that quotes it stays one line.
esc=$(printf '\033')
edit_header first.safetensors evil.safetensors 's/"isa":"[a-z0-9]*"/"isa":"\\u001b[31mX\\nforged"/'
run train --resume evil.safetensors --num-epochs 2
[ "$status" -eq 0 ] || fail "resume of evil.safetensors: exit status $status: $(cat err)"
grep -q 'warning: evil.safetensors was written with the \\x1b\[31mX\\x0aforged kernels' err ||
  fail "the warning does not escape the recorded isa: $(cat err)"
grep -q "$esc" err && fail "an escape character reached stderr: $(od -c err | head -n 5)"
[ "$(wc -l <err)" -eq 1 ] || fail "the warning is not one line: $(cat err)"
# A recorded output path with control characters, printed on stdout.
edit_header first.safetensors path.safetensors \
  's/"run.save":"[^"]*"/"run.save":"m\\u001b[2J\\r.safetensors"/'
run train --resume path.safetensors --num-epochs 2
grep -q '^Saved model to m\\x1b\[2J\\x0d.safetensors$' out ||
  fail "the saved model's recorded name is not escaped: $(od -c out | tail -n 5)"
grep -q "$esc" out && fail "an escape character reached stdout: $(od -c out | head -n 5)"
# An image whose name holds ESC: the prediction line shows it escaped.
cp "$image" "x${esc}[31m.png"
run predict --checkpoint "$model" "x${esc}[31m.png"
grep -q '^x\\x1b\[31m.png: ' out || fail "predict does not escape the file's name: $(cat out)"
run predict --checkpoint "$model" "$(printf 'no\033]0;such\007.png')"
grep -q 'no\\x1b\]0;such\\x07.png: cannot open' err ||
  fail "an error message does not escape the file's name: $(cat err)"
run predict --checkpoint "$model" "$(printf 'c1\302\233[2J.png')" # U+009B, CSI in UTF-8
grep -q 'c1\\xc2\\x9b\[2J.png: cannot open' err ||
  fail "an error message does not escape a C1 control: $(od -c err | head -n 3)"

# ---------------------------------------------------------------- messages that say what is wrong
# A checkpoint copied to a later epoch's name, in a folder and on its own.
mkdir renamed
cp first.safetensors renamed/checkpoint-epoch-0003.safetensors
said="renamed/checkpoint-epoch-0003.safetensors: the name says epoch 3, the contents say epoch 1"
quick 1 "$said" train --resume renamed --num-epochs 5
quick 1 "$said" train --resume renamed/checkpoint-epoch-0003.safetensors --num-epochs 5
# A number too large for a flag.
quick 2 "--index: '99999999999' is too large (at most 2147483647)" predict --checkpoint "$model" \
  --idx "$data/t10k-images-idx3-ubyte.gz" --index 99999999999
quick 2 "--log-steps: '99999999999999999999' is too large (at most 2147483647)" train \
  --log-steps 99999999999999999999
quick 2 "--test-samples: '-99999999999' is out of range (at least 0)" eval --checkpoint \
  "$model" --test-samples -99999999999
quick 2 "--batch-size: '99999999999' is out of range (1..65536)" eval --checkpoint "$model" \
  --batch-size 99999999999

finish
