#!/bin/sh
# cli_checkpoint.sh — checkpoints and resume of `cnnc train`, from the outside: a run stopped
# after one epoch and resumed ends bit-identical to a straight run (model and checkpoint files);
# SIGINT and SIGTERM stop after a step with a loadable checkpoint and exit 130 / 143, and the
# resume from a mid-epoch stop is exact; a second signal kills at once; a process killed in the
# middle of a checkpoint write (the CNNC_TEST_STALL_WRITE test hook) leaves the previous
# checkpoint whole and a temporary that resume ignores; a diverging run writes nothing; differing
# settings, wrong files and used folders are refused; --save-every, --keep and the metrics file.
# Needs Debian's Fashion-MNIST; skipped without it.
# Usage: sh tests/cli_checkpoint.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
require_cnnc
require_data
make_tmp
cd "$tmp" || exit 1

# A script's background job starts with SIGINT ignored (POSIX), and cnnc leaves an ignored
# SIGINT ignored: the runs below that get one start with it at its default action.
interruptible="env --default-signal=INT"

# tensors FILE: the tensor bytes of a safetensors file (what follows its header), in hex; the
# header holds the run's settings too, which may differ between runs of the same math.
tensors() {
  len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +$((len + 9)) "$1" | od -An -tx1 | tr -d ' \n'
}

# The fields of one epoch's metrics line that do not depend on timing.
numbers() {
  sed -n "/\"epoch\":$2,/p" "$1" |
    grep -o '"\(epoch\|train_loss\|train_accuracy\|test_loss\|test_accuracy\)":[^,]*'
}

listing() {
  (cd "$1" && ls -A | tr '\n' ' ')
}

small="--train-samples 4096 --test-samples 512 --num-cores 2 --batch-size 64"
quiet="--threads 2 --result-image none --log-steps 1000"

# ---------------------------------------------------------------- stop after 1 epoch, resume to 2
# shellcheck disable=SC2086
run train $small $quiet --num-epochs 2 --checkpoint-dir straight --save s2.safetensors \
  --metrics-file s.jsonl
[ "$status" -eq 0 ] || fail "straight 2-epoch run: exit status $status: $(cat err)"
[ "$(listing straight)" = "checkpoint-epoch-0001.safetensors checkpoint-epoch-0002.safetensors " ] ||
  fail "straight/ holds: $(listing straight)"

# shellcheck disable=SC2086
run train $small $quiet --num-epochs 1 --checkpoint-dir part --metrics-file p.jsonl
[ "$status" -eq 0 ] || fail "1-epoch run: exit status $status: $(cat err)"
# shellcheck disable=SC2086
run train --resume part --num-epochs 2 $quiet --test-samples 512 --save r2.safetensors \
  --metrics-file p.jsonl
[ "$status" -eq 0 ] || fail "resumed run: exit status $status: $(cat err)"
grep -q "Resuming from part/checkpoint-epoch-0001.safetensors: epoch 1 complete" out ||
  fail "the resumed run does not say where it resumes: $(head -n 2 out)"
grep -q "^Epoch 1" out && fail "the resumed run trained epoch 1 again"
cmp -s s2.safetensors r2.safetensors || fail "stopped after 1 epoch and resumed to 2: the model" \
  "differs from the straight 2-epoch run"
[ "$(tensors straight/checkpoint-epoch-0002.safetensors)" = \
  "$(tensors part/checkpoint-epoch-0002.safetensors)" ] ||
  fail "the resumed run's epoch-2 checkpoint differs from the straight run's"
[ "$(grep -c . p.jsonl)" -eq 2 ] || fail "p.jsonl should have 2 lines: $(cat p.jsonl)"
for e in 1 2; do
  [ -n "$(numbers p.jsonl $e)" ] && [ "$(numbers p.jsonl $e)" = "$(numbers s.jsonl $e)" ] ||
    fail "metrics of epoch $e: resumed '$(numbers p.jsonl $e)', straight '$(numbers s.jsonl $e)'"
done
run eval --checkpoint part/checkpoint-epoch-0002.safetensors --test-samples 512 --threads 2
[ "$status" -eq 0 ] || fail "eval of a training checkpoint: exit status $status: $(cat err)"

# ---------------------------------------------------------------- refusals
before=$(listing part)
expect 2 "--num-cores/--replicas 4 differs from the checkpoint's 2" train --resume part --num-epochs 3 --num-cores 4
expect 2 "--batch-size 32 differs from the checkpoint's 64" train --resume part --num-epochs 3 --batch-size 32
expect 2 "--learning-rate 0.02 differs from the checkpoint's 0.01" train --resume part --num-epochs 3 --learning-rate 0.02
expect 2 "--momentum 0.9 differs" train --resume part --num-epochs 3 --momentum 0.9
expect 2 "--seed 2 differs from the checkpoint's 1" train --resume part --num-epochs 3 --seed 2
if grep -q avx512_bf16 /proc/cpuinfo; then
  expect 2 "--precision bf16 differs from the checkpoint's fp32" \
    train --resume part --num-epochs 3 --precision bf16
else
  expect 2 "--precision bf16: this CPU cannot run it" train --resume part --num-epochs 3 --precision bf16
fi
expect 2 "--train-samples 2048 uses 2048 training images, the checkpoint's run used 4096" \
  train --resume part --num-epochs 3 --train-samples 2048
expect 2 "--num-epochs 2: .* has already trained 2 epochs" train --resume part --num-epochs 2
mkdir otherdata
for f in "$data"/t10k-*; do ln -s "$f" otherdata/; ln -s "$f" "otherdata/train${f##*/t10k}"; done
expect 1 "the first 4096 training images differ from those the checkpoint" \
  train --resume part --num-epochs 3 --data-dir otherdata
[ "$(listing part)" = "$before" ] || fail "refused resumes changed part/: $(listing part)"
expect 1 "cannot open" train --resume "$tmp/absent.safetensors"
mkdir empty
expect 1 "empty: no checkpoint in this folder" train --resume empty
expect 1 "not a training checkpoint" train --resume s2.safetensors --num-epochs 3
expect 1 "already holds checkpoints" train $small --checkpoint-dir straight
expect 1 "newer than the checkpoint resumed" train --resume straight/checkpoint-epoch-0001.safetensors \
  --checkpoint-dir straight --num-epochs 3
expect 2 "--save-every needs --checkpoint-dir" train $small --save-every 2
expect 2 "--keep" train $small --keep 0
expect 2 "--save-every" train $small --save-every 0 --checkpoint-dir x
expect 2 "--resume: empty name" train --resume ""
[ -e x ] && fail "a refused run created the folder x"

# ---------------------------------------------------------------- --save-every, --keep, metrics
# shellcheck disable=SC2086
run train $small $quiet --num-epochs 5 --save-every 2 --keep 2 --checkpoint-dir every \
  --metrics-file e.jsonl
[ "$status" -eq 0 ] || fail "--save-every 2 --keep 2: exit status $status: $(cat err)"
[ "$(listing every)" = "checkpoint-epoch-0004.safetensors checkpoint-epoch-0005.safetensors " ] ||
  fail "--save-every 2 --keep 2 over 5 epochs left: $(listing every)"
# Losing the newest checkpoint: the resume redoes epoch 5 and its metrics line replaces the old.
cp e.jsonl e-straight.jsonl
rm every/checkpoint-epoch-0005.safetensors
# shellcheck disable=SC2086
run train --resume every $quiet --test-samples 512 --num-epochs 5 --metrics-file e.jsonl
[ "$status" -eq 0 ] || fail "resume with a metrics file: exit status $status: $(cat err)"
grep -q "Dropped 1 line of epochs after the checkpoint from e.jsonl" out ||
  fail "the resume does not say it dropped epoch 5's metrics line: $(cat out)"
[ "$(grep -o '"epoch":[0-9]*' e.jsonl | tr '\n' ' ')" = '"epoch":1 "epoch":2 "epoch":3 "epoch":4 "epoch":5 ' ] ||
  fail "e.jsonl after the resume: $(grep -o '"epoch":[0-9]*' e.jsonl | tr '\n' ' ')"
[ "$(numbers e.jsonl 5)" = "$(numbers e-straight.jsonl 5)" ] || fail "epoch 5's metrics changed"
echo "not metrics" >bad.jsonl
expect 1 "line 1 is not a cnnc metrics line" train --resume every --num-epochs 6 --metrics-file bad.jsonl

# ---------------------------------------------------------------- a diverging run saves nothing
# shellcheck disable=SC2086
expect 1 "training diverged" train $small $quiet --learning-rate 1e30 --checkpoint-dir diverged
[ -z "$(listing diverged)" ] || fail "a run that diverged left: $(listing diverged)"
# A checkpoint whose fc2 weights are huge (finite, so it loads) diverges on its first step.
mkdir huge
cp straight/checkpoint-epoch-0001.safetensors huge/
file=huge/checkpoint-epoch-0001.safetensors
header=$(od -An -tu8 -N8 "$file" | tr -d ' ')
begin=$(head -c $((8 + header)) "$file" | tail -c "$header" |
  grep -o '"fc2.weight":{[^}]*}' | sed 's/.*"data_offsets":\[\([0-9]*\),.*/\1/')
head -c 2000 /dev/zero | tr '\0' '\177' |
  dd of="$file" bs=1 seek=$((8 + header + begin)) conv=notrunc 2>/dev/null
sum_before=$(cksum huge/*)
# shellcheck disable=SC2086
expect 1 "training diverged" train --resume huge $quiet --num-epochs 2
[ "$(cksum huge/*)" = "$sum_before" ] || fail "a diverged resume changed huge/: $(listing huge)"

# ---------------------------------------------------------------- killed while writing
mkdir killed
cp straight/checkpoint-epoch-0001.safetensors killed/
# shellcheck disable=SC2086
CNNC_TEST_STALL_WRITE=killed/ "$build/tests/cnnc-test-hooks" train --resume killed --num-epochs 2 $quiet >k.out 2>k.err &
pid=$!
if wait_for k.err "stalled writing killed/checkpoint-epoch-0002.safetensors.tmp."; then
  expect 1 "another cnnc train is using this folder" train --resume killed --num-epochs 3
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  cmp -s straight/checkpoint-epoch-0001.safetensors killed/checkpoint-epoch-0001.safetensors ||
    fail "the checkpoint before the killed write changed"
  ls killed | grep -q '^checkpoint-epoch-0002.safetensors.tmp\.' ||
    fail "the killed write left no temporary file: $(listing killed)"
  [ -e killed/checkpoint-epoch-0002.safetensors ] && fail "a killed write left a checkpoint"
  run predict --checkpoint killed/checkpoint-epoch-0001.safetensors \
    --idx "$data/t10k-images-idx3-ubyte.gz" --index 0
  [ "$status" -eq 0 ] || fail "the checkpoint before the killed write does not load: $(cat err)"
  # shellcheck disable=SC2086
  run train --resume killed --num-epochs 2 $quiet --save k2.safetensors
  [ "$status" -eq 0 ] || fail "resume after the killed write: exit status $status: $(cat err)"
  grep -q "Resuming from killed/checkpoint-epoch-0001.safetensors" out ||
    fail "resume after the killed write did not start from epoch 1: $(head -n 1 out)"
  cmp -s k2.safetensors s2.safetensors || fail "resume after the killed write: a different model"
  [ "$(listing killed)" = "checkpoint-epoch-0001.safetensors checkpoint-epoch-0002.safetensors " ] ||
    fail "after the resume killed/ holds: $(listing killed)"
else
  kill -KILL "$pid" 2>/dev/null
  fail "CNNC_TEST_STALL_WRITE=killed/ did not stall the write: $(cat k.err)"
fi

# ---------------------------------------------------------------- killed while writing the outputs
# A run killed while it writes its model has not written its last checkpoint yet: the resume
# trains the last epoch again and writes the model (a folder that says "complete" without the
# model would lose it).
mkdir last
cp straight/checkpoint-epoch-0001.safetensors last/
# shellcheck disable=SC2086
CNNC_TEST_STALL_WRITE=last.st "$build/tests/cnnc-test-hooks" train --resume last --num-epochs 2 \
  $quiet --save last.st >l.out 2>l.err &
pid=$!
if wait_for l.err "stalled writing last.st.tmp."; then
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  [ -e last/checkpoint-epoch-0002.safetensors ] &&
    fail "killed while writing --save, the run already has its last checkpoint: $(listing last)"
  run train --resume last --save last.st # the folder's checkpoint is the straight run's
  [ "$status" -eq 0 ] || fail "resume after a kill in the model's write: $status: $(cat err)"
  cmp -s last.st s2.safetensors || fail "resume after a kill in the model's write: another model"
else
  kill -KILL "$pid" 2>/dev/null
  fail "CNNC_TEST_STALL_WRITE=last.st did not stall the model's write: $(cat l.err)"
fi

# ---------------------------------------------------------------- a second signal kills at once
mkdir twice
cp straight/checkpoint-epoch-0001.safetensors twice/
# shellcheck disable=SC2086
CNNC_TEST_STALL_WRITE=twice/ $interruptible "$build/tests/cnnc-test-hooks" train --resume twice \
  --num-epochs 2 $quiet >t.out 2>t.err &
pid=$!
if wait_for t.err "stalled writing"; then
  kill -INT "$pid"
  sleep 0.5
  kill -0 "$pid" 2>/dev/null || fail "the first SIGINT ended a process that was writing"
  kill -INT "$pid"
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    fail "a second SIGINT did not end the process"
    kill -KILL "$pid"
  fi
  wait "$pid"
  cmp -s straight/checkpoint-epoch-0001.safetensors twice/checkpoint-epoch-0001.safetensors ||
    fail "the second signal damaged the previous checkpoint"
else
  kill -KILL "$pid" 2>/dev/null
  fail "CNNC_TEST_STALL_WRITE=twice/ did not stall the write: $(cat t.err)"
fi

# ---------------------------------------------------------------- SIGINT and SIGTERM
# stop_run SIGNAL DIR [FLAGS]: trains in the background (40 epochs unless FLAGS say otherwise),
# signals it once it prints $stop_at (step 3 of epoch 2 unless set); sets $status.
stop_at="Epoch 2 step 3/"
stop_run() {
  sig=$1
  dir=$2
  shift 2
  rm -f sig.out # what wait_for reads must be this run's
  # shellcheck disable=SC2086
  $interruptible "$cnnc" train $small --threads 2 --result-image none --log-steps 1 \
    --num-epochs 40 --checkpoint-dir "$dir" "$@" >sig.out 2>sig.err &
  pid=$!
  if wait_for sig.out "$stop_at"; then
    kill "-$sig" "$pid"
  else
    kill -KILL "$pid"
  fi
  wait "$pid"
  status=$?
}

stop_run INT sigint
[ "$status" -eq 130 ] || fail "SIGINT: exit status $status, expected 130: $(tail -n 3 sig.err)"
stopped=$(sed -n 's/^Stopped by SIGINT at epoch \([0-9]*\), \([0-9]*\) of 32 steps done$/\1 \2/p' sig.out)
[ -n "$stopped" ] || fail "SIGINT: no 'Stopped by SIGINT' line: $(tail -n 3 sig.out)"
newest=$(ls sigint | tail -n 1)
grep -q "Saved checkpoint sigint/$newest" sig.out || fail "SIGINT: $newest was not the last save"
run eval --checkpoint "sigint/$newest" --test-samples 512 --threads 2
[ "$status" -eq 0 ] || fail "SIGINT: its checkpoint $newest does not load: $(cat err)"
epoch=${stopped% *}
if [ -n "$epoch" ]; then
  target=$((epoch + 1))
  # shellcheck disable=SC2086
  run train --resume sigint $quiet --num-epochs "$target" --save sigint.safetensors
  [ "$status" -eq 0 ] || fail "resume after SIGINT: exit status $status: $(cat err)"
  # shellcheck disable=SC2086
  run train $small $quiet --num-epochs "$target" --save target.safetensors
  cmp -s sigint.safetensors target.safetensors ||
    fail "stopped by SIGINT at epoch $stopped and resumed to $target epochs: the model differs" \
      "from a straight run"
fi

stop_run TERM sigterm
[ "$status" -eq 143 ] || fail "SIGTERM: exit status $status, expected 143: $(tail -n 3 sig.err)"
grep -q "^Stopped by SIGTERM at epoch" sig.out || fail "SIGTERM: $(tail -n 3 sig.out)"
newest=$(ls sigterm | tail -n 1)
run eval --checkpoint "sigterm/$newest" --test-samples 512 --threads 2
[ "$status" -eq 0 ] || fail "SIGTERM: its checkpoint $newest does not load: $(cat err)"

# ---------------------------------------------------------------- a resumed run is the run started
# Every setting that shapes the run is in its checkpoints: a run of 3 epochs on 300 test images,
# stopped early (signalled in its first epoch: the signal must come before the run's end, a
# tenth of a second away on a fast machine) and resumed with the command it printed, ends where
# a straight run ends.
rm -f training_curves.png
stop_at="Epoch 1 step 3/"
stop_run INT planned --num-epochs 3 --test-samples 300 --log-steps 1 --save planned.st \
  --metrics-file planned.jsonl --plot planned.png
[ "$status" -eq 130 ] || fail "planned run: exit status $status: $(tail -n 3 sig.err)"
resume=$(sed -n 's/^Resume with: //p' sig.out)
[ "$resume" = "$cnnc train --resume planned" ] ||
  fail "the stopped run does not print the command that resumes it: '$(tail -n 2 sig.out)'"
sh -c "$resume" >resumed.out 2>resumed.err || fail "'$resume' failed: $(cat resumed.err)"
grep -q "^Epoch 3/3 " resumed.out || fail "the resumed run did not end at epoch 3: $(tail -n 3 resumed.out)"
grep -q "^Epoch 4" resumed.out && fail "the resumed run went past its 3 epochs"
[ "$(grep -c . planned.jsonl)" -eq 3 ] || fail "planned.jsonl has $(grep -c . planned.jsonl) lines"
grep -q '"test_samples":300' planned.jsonl && ! grep -q '"test_samples":[^3]' planned.jsonl ||
  fail "the resumed run did not keep --test-samples 300: $(cat planned.jsonl)"
# shellcheck disable=SC2086
run train $small --threads 2 --result-image none --plot straight3.png --num-epochs 3 \
  --test-samples 300 --save straight3.st --metrics-file straight3.jsonl
cmp -s planned.st straight3.st || fail "the resumed run saved another model than a straight one"
[ -e training_curves.png ] && fail "the resumed run drew curves at the default name, not its own"
# Its metrics and curves are the whole run's too: the epoch stopped in counts all its samples,
# and the curves begin at epoch 1, not at the resume.
untimed() { sed -E 's/,"[a-z_]*(seconds|per_second)":[-0-9.e+]*//g' "$1"; }
[ "$(untimed planned.jsonl)" = "$(untimed straight3.jsonl)" ] ||
  fail "the resumed run's metrics differ from a straight run's:" \
    "$(diff planned.jsonl straight3.jsonl | head -n 4)"
cmp -s planned.png straight3.png || fail "the resumed run's curves differ from a straight run's"

# More epochs on the resume line extend the run, in one line; as many as done are refused.
expect 2 "the run is complete (3 of 3 epochs)" train --resume planned
expect 2 "has already trained 3 epochs" train --resume planned --num-epochs 3
run train --resume planned --num-epochs 4 --test-samples 100 --metrics-file extended.jsonl
[ "$status" -eq 0 ] || fail "extending to 4 epochs: exit status $status: $(cat err)"
grep -q "^Extending the run from 3 to 4 epochs" out || fail "no word of the extension: $(head -n 3 out)"
grep -q "^Epoch 4/4 " out || fail "the extended run did not train epoch 4: $(tail -n 3 out)"
grep -q '"epoch":4,.*"test_samples":100' extended.jsonl ||
  fail "flags given on the resume line did not win: $(cat extended.jsonl)"
# A damaged recorded setting is refused, naming it.
sed 's/"run.keep":"3"/"run.keep":"x"/' planned/checkpoint-epoch-0004.safetensors >damaged.st
expect 1 '"run.keep" is "x", not an integer' train --resume damaged.st --num-epochs 9

# --quiet: errors and the final result only, not the checkpoints and the resume.
run train --resume planned --num-epochs 5 -q
[ "$status" -eq 0 ] || fail "quiet resume: exit status $status: $(cat err)"
grep -q "Saved checkpoint\|Resuming from\|Extending" out && fail "--quiet printed: $(cat out)"
grep -q "^Epoch 5/5 " out || fail "--quiet lacks the final summary: $(cat out)"

# eval takes a checkpoint folder as --resume does: its newest checkpoint.
run eval --checkpoint planned --test-samples 300 --threads 2
[ "$status" -eq 0 ] || fail "eval of a checkpoint folder: exit status $status: $(cat err)"
grep -q "^Checkpoint planned/checkpoint-epoch-0005.safetensors: 300 test images" out ||
  fail "eval of a checkpoint folder did not take its newest: $(head -n 1 out)"
run predict --checkpoint planned --idx "$data/t10k-images-idx3-ubyte.gz" --index 0
[ "$status" -eq 0 ] && grep -q "t10k-images-idx3-ubyte.gz\[0\]: " out ||
  fail "predict with a checkpoint folder: exit status $status: $(cat err)"

# A stop without --checkpoint-dir says that nothing was kept, and how to keep it.
# shellcheck disable=SC2086
$interruptible "$cnnc" train $small --threads 2 --result-image none --log-steps 1 \
  --num-epochs 40 --save lost.st >lost.out 2>&1 &
pid=$!
wait_for lost.out "Epoch 2 step 3/" && kill -INT "$pid"
wait "$pid"
[ "$?" -eq 130 ] || fail "SIGINT without --checkpoint-dir: $(tail -n 2 lost.out)"
grep -q "^Nothing was saved (no --checkpoint-dir; --save writes the model only at the end)" \
  lost.out || fail "SIGINT without --checkpoint-dir: $(tail -n 2 lost.out)"
grep -q "^Give a run --checkpoint-dir DIR to make it resumable" lost.out ||
  fail "no hint: $(tail -n 1 lost.out)"
[ -e lost.st ] && fail "a stopped run wrote --save"

finish "SIGINT stopped at epoch ${epoch:-?} after ${stopped#* } steps"
