#!/bin/sh
# cli_validation.sh — `cnnc train --val-samples N` and `--keep-best` from the outside: the
# held-out samples are scored after every epoch (what `cnnc eval` gives on them), take no part
# in training or in the normalisation, the same bytes on 1 and 2 threads; --val-samples 0 is the
# plain run; best.safetensors is the epoch of the highest validation accuracy, survives --keep 1
# and evaluates; a resume keeps choosing as the straight run; 2 processes equal one and refuse
# to differ in --val-samples; refusals. The numbers of training itself are other tests'
# business. Needs Debian's Fashion-MNIST; skipped without it; the mpirun part is skipped when
# mpirun or MPI in this cnnc is missing.
# Usage: sh tests/cli_validation.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

data=/usr/share/datasets/fashion-mnist
# 1024 images used: 768 trained on, the last 256 held out. At this learning rate the seed's
# run has its best validation accuracy at epoch 2 of 4 (checked below).
small="--train-samples 1024 --test-samples 128 --num-cores 2 --batch-size 32 --learning-rate 0.05"
quiet="--result-image none --plot none -q"


# body FILE: the tensors of a safetensors file, without its header.
body() {
  len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +$((9 + len)) "$1"
}

# meta FILE KEY: a __metadata__ value of a safetensors file.
meta() {
  safetensors_header "$1" | /usr/bin/python3 -c 'import json, sys
print(json.load(sys.stdin)["__metadata__"].get(sys.argv[1], ""))' "$2"
}

# column KEY: the KEY values of m.jsonl, one a line.
column() {
  /usr/bin/python3 -c 'import json, sys
for line in open("m.jsonl"): print(json.loads(line).get(sys.argv[1], "absent"))' "$1"
}

run train $small --result-image none --plot curves.png --num-epochs 4 --threads 1 \
  --val-samples 256 --metrics-file m.jsonl --checkpoint-dir straight --keep 1 --keep-best \
  --save v1.st
[ "$status" -eq 0 ] || fail "--val-samples 256 on 1 thread: exit status $status: $(cat err)"
cp out straight.out
grep -q "^  data: 768 training images (768 an epoch), 256 validation, 128 test$" out ||
  fail "the settings do not say the split: $(head -3 out)"
grep -q "^Epoch 1/4  train [0-9.]* [0-9.]*%  val [0-9.]* [0-9.]*%  test [0-9.]* [0-9.]*%  " out ||
  fail "no validation in the epoch line: $(grep '^Epoch 1/' out)"
awk '/^Epoch [0-9]*\// && length > 80 { bad = 1 } END { exit bad }' out ||
  fail "an epoch line over 80 columns: $(grep '^Epoch [0-9]*/' out)"

# ---------------------------------------------------------------- the metrics file
for key in train_accuracy val_loss val_accuracy; do
  [ "$(column "$key" | grep -c '^[0-9.]*$')" -eq 4 ] ||
    fail "the metrics file lacks $key on some line: $(column "$key" | tr '\n' ' ')"
done
[ "$(column val_samples | sort -u)" = 256 ] || fail "val_samples: $(column val_samples)"
# the epoch with the highest validation accuracy, the first of equals
best=$(column val_accuracy | awk '$1 > b || NR == 1 { b = $1; e = NR } END { print e }')
[ "$best" = 2 ] || fail "the best epoch is $best, not 2: pick settings where it is not the last"
bestacc=$(column val_accuracy | sed -n "${best}p")
bestloss=$(column val_loss | sed -n "${best}p")
lastacc=$(column val_accuracy | sed -n 4p)
lastloss=$(column val_loss | sed -n 4p)

# ---------------------------------------------------------------- what eval gives on them
# A data folder holding only the held-out images (samples 768..1023 of the training files),
# as both of its splits.
mkdir valdir
/usr/bin/python3 - "$data" valdir <<'PY' || fail "writing the held-out images"
import gzip, struct, sys
src, out = sys.argv[1], sys.argv[2]
for name, size, head in (("images-idx3-ubyte", 784, 16), ("labels-idx1-ubyte", 1, 8)):
    raw = gzip.open(f"{src}/train-{name}.gz").read()
    body = raw[head + 768 * size:head + 1024 * size]
    header = raw[:4] + struct.pack(">I", 256) + raw[8:head]
    for split in ("train", "t10k"):
        open(f"{out}/{split}-{name}", "wb").write(header + body)
PY
# eval_matches FILE ACC LOSS: eval of FILE on the held-out images says ACC and LOSS.
eval_matches() {
  run eval --checkpoint "$1" --data-dir valdir
  [ "$status" -eq 0 ] || { fail "eval $1: exit status $status: $(cat err)"; return; }
  want=$(printf 'Test loss=%.4f Accuracy=%.2f%%' "$3" "$2")
  got=$(grep -E '^(Test loss|Accuracy)=' out | tr '\n' ' ' | sed 's/ $//')
  [ "$got" = "$want" ] || fail "eval $1 on the held-out images: '$got', the run said '$want'"
}
eval_matches v1.st "$lastacc" "$lastloss"

# ---------------------------------------------------------------- the best checkpoint
[ -f straight/best.safetensors ] || fail "no straight/best.safetensors"
[ "$(ls straight)" = "best.safetensors
checkpoint-epoch-0004.safetensors" ] || fail "--keep 1 left: $(ls straight)"
[ "$(meta straight/best.safetensors run.best_epoch)" = "$best" ] ||
  fail "best.safetensors records best_epoch $(meta straight/best.safetensors run.best_epoch)"
[ "$(meta straight/best.safetensors run.val_accuracy)" = \
  "$(meta straight/checkpoint-epoch-0004.safetensors run.best_val_accuracy)" ] ||
  fail "best.safetensors' val_accuracy is not the best the last checkpoint records"
meta straight/best.safetensors run.val_accuracy |
  awk -v want="$bestacc" '{ exit !($1 - want < 1e-6 && want - $1 < 1e-6) }' ||
  fail "best.safetensors' val_accuracy $(meta straight/best.safetensors run.val_accuracy), \
the metrics file's $bestacc"
eval_matches straight/best.safetensors "$bestacc" "$bestloss"

# ---------------------------------------------------------------- threads, and N = 0
run train $small --result-image none --plot none --num-epochs 4 --threads 2 \
  --val-samples 256 --checkpoint-dir two --keep-best --save v2.st
[ "$status" -eq 0 ] || fail "--val-samples 256 on 2 threads: exit status $status: $(cat err)"
cmp -s v1.st v2.st || fail "--val-samples 256: 1 and 2 threads give different models"
body straight/best.safetensors >best1
body two/best.safetensors >best2
cmp -s best1 best2 && [ "$(meta two/best.safetensors run.best_epoch)" = "$best" ] ||
  fail "--val-samples 256: 1 and 2 threads give different best checkpoints"
[ "$(grep -c '^Best validation accuracy so far' out)" -eq 2 ] ||
  fail "not one line for each new best (epochs 1 and 2): $(grep '^Best' out)"
grep -q "^Best validation accuracy so far ([0-9.]*%, epoch 2): saved two/best.safetensors$" out ||
  fail "no line for epoch 2's best: $(grep '^Best' out)"
run train $small $quiet --num-epochs 4 --threads 2 --save plain.st
[ "$status" -eq 0 ] || fail "the run without validation: exit status $status: $(cat err)"
cmp -s v1.st plain.st && fail "--val-samples 256 gives the same model as training on all 1024"
run train $small $quiet --num-epochs 4 --threads 2 --val-samples 0 --save zero.st
cmp -s zero.st plain.st || fail "--val-samples 0 gives another model than no validation"

# ---------------------------------------------------------------- normalisation
sed 's/ mean=0.1307 std=0.3081//' "$root/models/lenet5.model" >nomean.model
run train --model nomean.model $small --result-image none --plot none --num-epochs 1 \
  --val-samples 256 --save nomean.st
[ "$status" -eq 0 ] || fail "nomean.model: exit status $status: $(cat err)"
grep -q "^Normalisation computed from the 768 training images: " out ||
  fail "the normalisation is not the training part's: $(grep Normalisation out)"

# ---------------------------------------------------------------- resume
# The folder as the straight run left it after its best epoch; the resumed run must know that
# epoch 2 is the best, so that the worse epochs 3 and 4 leave best.safetensors as it is.
run train $small $quiet --num-epochs 4 --threads 2 --val-samples 256 --checkpoint-dir all \
  --keep 4 --keep-best
[ "$status" -eq 0 ] || fail "the run keeping every checkpoint: exit status $status: $(cat err)"
grep -q "^Best" out && fail "-q printed a line on the best epoch: $(grep '^Best' out)"
mkdir part
cp all/checkpoint-epoch-0002.safetensors all/best.safetensors part/
echo partial >part/best.safetensors.tmp.12345.0 # as a write killed half-way leaves it
run train --resume part --threads 1 -q
[ "$status" -eq 0 ] || fail "the resume: exit status $status: $(cat err)"
[ -e part/best.safetensors.tmp.12345.0 ] && fail "the resume left a killed write's temporary"
cmp -s part/best.safetensors all/best.safetensors ||
  fail "resumed after the best epoch: best.safetensors is not the straight run's (epoch \
$(meta part/best.safetensors run.best_epoch))"
cmp -s part/checkpoint-epoch-0004.safetensors all/checkpoint-epoch-0004.safetensors ||
  fail "resumed: the last checkpoint differs from the straight run's"
# resumed from epoch 1: the run goes on to keep epoch 2 as the straight run did
mkdir one
cp all/checkpoint-epoch-0001.safetensors one/
run train --resume one -q
[ "$status" -eq 0 ] || fail "the resume from epoch 1: exit status $status: $(cat err)"
cmp -s one/best.safetensors all/best.safetensors ||
  fail "resumed after epoch 1: best.safetensors is not the straight run's"

# ---------------------------------------------------------------- eval, plot
run eval --checkpoint straight/best.safetensors --test-samples 128
[ "$status" -eq 0 ] || fail "eval --checkpoint DIR/best.safetensors: $(cat err)"
# purple FILE: how many pixels of FILE are the validation accuracy's purple (below the legend).
purple() {
  /usr/bin/python3 -c 'import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
w = im.size[0]
print(sum(1 for p in list(im.getdata())[90 * w:]
          if all(abs(a - b) < 40 for a, b in zip(p, (148, 103, 189)))))' "$1"
}
[ "$(purple curves.png)" -gt 100 ] || fail "the training curves show no validation accuracy"
run plot m.jsonl --output replot.png
[ "$status" -eq 0 ] || fail "cnnc plot of the metrics file: $(cat err)"
[ "$(purple replot.png)" -gt 100 ] || fail "cnnc plot shows no validation accuracy"

# ---------------------------------------------------------------- processes
detail="mpirun part skipped (no mpirun or no MPI in this cnnc)"
if have_mpi; then
  mpi_env
  # shellcheck disable=SC2086
  timeout 120 mpirun -np 2 "$cnnc" train $small $quiet --num-epochs 4 --val-samples 256 \
    --checkpoint-dir mp --keep-best --save p2.st >p2.out 2>p2.err ||
    fail "mpirun -np 2: exit status $?: $(cat p2.err)"
  body mp/best.safetensors >bestp
  cmp -s v1.st p2.st && cmp -s best1 bestp ||
    fail "2 processes saved another model or best checkpoint than one process"
  # shellcheck disable=SC2086
  timeout 120 mpirun -np 1 "$cnnc" train $small $quiet --val-samples 256 : \
    -np 1 "$cnnc" train $small $quiet --val-samples 128 >pd.out 2>pd.err &&
    fail "processes with different --val-samples trained"
  grep -q "rank 1 runs with another --val-samples than rank 0" pd.err ||
    fail "processes with different --val-samples: $(head -3 pd.err)"
  detail="2 processes equal one, bit for bit"
fi

# ---------------------------------------------------------------- refusals
expect 2 "--val-samples 1000 leaves 24 of the 1024 training images used for training, but" \
  train $small --val-samples 1000
expect 2 "--val-samples 1024 leaves 0 of the 1024" train $small --val-samples 1024
expect 2 "--val-samples" train $small --val-samples -1
expect 2 "--val-samples" train $small --val-samples x
expect 2 "--keep-best needs --checkpoint-dir" train $small --val-samples 256 --keep-best
expect 2 "--keep-best needs --val-samples" train $small --checkpoint-dir kb --keep-best
expect 2 "--val-samples 128 differs from the checkpoint's 256" \
  train --resume part --num-epochs 5 --val-samples 128
expect 2 "--val-samples 0 differs from the checkpoint's 256" \
  train --resume part --num-epochs 5 --val-samples 0
# a checkpoint written before --val-samples existed trained on every image used
mkdir old
/usr/bin/python3 - all/checkpoint-epoch-0004.safetensors old/checkpoint-epoch-0004.safetensors \
  <<'PY' || fail "writing a checkpoint without run.val_samples"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
del head["__metadata__"]["run.val_samples"]
text = json.dumps(head, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
expect 2 "--val-samples 256 differs from the checkpoint's 0" \
  train --resume old --num-epochs 5 --val-samples 256
mkdir new
expect 2 "with --keep-best, best.safetensors in the --checkpoint-dir folder" \
  train $small --val-samples 256 --checkpoint-dir new --keep-best --save new/best.safetensors
finish "$detail"
