#!/bin/bash
# soak.sh — trains, kills, resumes, over and over, and checks that nothing was lost: each cycle
# starts a short run with a checkpoint folder, interrupts it at a random moment with a random
# signal (SIGKILL, SIGINT, SIGTERM, a second SIGINT at once, or a closed output pipe), resumes
# the run (sometimes interrupting the resume too, sometimes with another --threads), and
# compares the final model, metrics and pictures with those of one uninterrupted run, byte for
# byte (the metrics without their timings). Not part of `make test`: it runs until told to stop.
#
#   tools/soak.sh [-n CYCLES] [-b BUILD] [-s SEED] [-d WORKDIR] [-k]
#
# Prints one line per cycle and a closing count of the kinds of interruption; exits 1 at the
# first cycle that lost or changed anything, leaving its folder under WORKDIR for a look.
# -k keeps every cycle's folder. It does not use mpirun (tests/cli_mpi.sh covers processes).
set -u

cycles=20 build=build seed=$$ work= keep=0
while getopts n:b:s:d:k opt; do
  case $opt in
    n) cycles=$OPTARG ;;
    b) build=$OPTARG ;;
    s) seed=$OPTARG ;;
    d) work=$OPTARG ;;
    k) keep=1 ;;
    *) sed -n 's/^#   //p' "$0" >&2; exit 2 ;;
  esac
done
cnnc=$(realpath "$build/cnnc") || exit 2
[ -x "$cnnc" ] || { echo "soak: $cnnc is not built (make)" >&2; exit 2; }
[ -n "$work" ] || work=$(mktemp -d /tmp/cnnc-soak.XXXXXX)
mkdir -p "$work" || exit 2
RANDOM=$seed

# A short run: 2 x 32-sample replicas, 32 steps an epoch, 3 epochs, about 0.2 s of training.
flags=(--train-samples 2048 --test-samples 256 --num-epochs 3 --batch-size 32 --num-cores 2
       --checkpoint-dir ck --keep 2 --save model.safetensors --metrics-file metrics.jsonl
       --result-image result.png --plot curves.png --log-steps 4)

# The metrics without what a clock measured.
untimed() { sed -E 's/,"[a-z_]*(seconds|per_second)":[-0-9.e+]*//g' "$1"; }

outputs_equal() { # outputs_equal DIR: DIR's outputs against the reference's
  local f
  for f in model.safetensors result.png curves.png; do
    cmp -s "$work/reference/$f" "$1/$f" || { echo "$f differs or is missing"; return 1; }
  done
  untimed "$work/reference/metrics.jsonl" >"$1/expected.untimed"
  untimed "$1/metrics.jsonl" >"$1/got.untimed" 2>/dev/null
  cmp -s "$1/expected.untimed" "$1/got.untimed" || { echo "metrics.jsonl differs"; return 1; }
}

# Runs "$@" in the background, sends a random interruption after a random delay (up to the
# length of an uninterrupted run), waits, and sets $kind to what it sent. A background job of a
# script starts with SIGINT ignored, which cnnc keeps; env gives it back its default.
interrupt() {
  local delay=$((RANDOM % reference_ms)) pick=$((RANDOM % 10)) pid
  local pause
  pause=$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))
  if [ "$pick" -eq 9 ]; then # the reader of the output goes away
    kind=PIPE
    env --default-signal=INT "$@" 2>>log | { sleep "$pause"; exit 0; } >/dev/null
    tally "${PIPESTATUS[0]}"
    return
  fi
  env --default-signal=INT "$@" >>log 2>&1 &
  pid=$!
  sleep "$pause"
  case $pick in
    0|1|2|3) kind=KILL; kill -KILL "$pid" 2>/dev/null ;;
    4|5) kind=INT; kill -INT "$pid" 2>/dev/null ;;
    6|7) kind=TERM; kill -TERM "$pid" 2>/dev/null ;;
    8) kind=INT+INT; kill -INT "$pid" 2>/dev/null; kill -INT "$pid" 2>/dev/null ;;
  esac
  wait "$pid" 2>/dev/null
  tally $?
}

# Counts how the interrupted processes ended: 0 (done before the interruption), 130, 137, ...
declare -A ended
tally() { ended[$1]=$((${ended[$1]:-0} + 1)); }

# The resume, or a fresh start when no checkpoint was written before the interruption.
next_run() {
  local threads=$((RANDOM % 2 + 1))
  if ls ck/checkpoint-epoch-*.safetensors >/dev/null 2>&1; then
    echo "$cnnc train --resume ck --threads $threads"
  else
    echo "$cnnc train ${flags[*]} --threads $threads"
  fi
}

mkdir -p "$work/reference" && cd "$work/reference" || exit 2
start=$(date +%s%N)
"$cnnc" train "${flags[@]}" >log 2>&1 || { echo "soak: the reference run failed:"; cat log; exit 1; }
reference_ms=$((($(date +%s%N) - start) / 1000000 + 50))
echo "soak: reference run ${reference_ms} ms in $work/reference; $cycles cycles, seed $seed"

declare -A count
for ((c = 1; c <= cycles; c++)); do
  dir="$work/cycle-$c"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 2
  kinds=
  read -ra run <<<"$cnnc train ${flags[*]} --threads $((RANDOM % 2 + 1))"
  interrupt "${run[@]}"
  kinds=$kind
  count[$kind]=$((${count[$kind]:-0} + 1))
  while [ $((RANDOM % 4)) -eq 0 ]; do # a quarter of the resumes are interrupted too
    read -ra run <<<"$(next_run)"
    interrupt "${run[@]}"
    kinds="$kinds,$kind"
    count[$kind]=$((${count[$kind]:-0} + 1))
  done
  read -ra run <<<"$(next_run)"
  if ! "${run[@]}" >>log 2>&1; then
    if ! grep -q "the run is complete" log || [ ! -f model.safetensors ]; then
      echo "cycle $c ($kinds): the last run failed; see $dir/log"
      exit 1
    fi
  fi
  if ! why=$(outputs_equal "$dir"); then
    echo "cycle $c ($kinds): $why; see $dir"
    exit 1
  fi
  leftovers=$(find ck -name '*.tmp.*' | head -3) # a resume clears those a kill left
  [ -z "$leftovers" ] || { echo "cycle $c ($kinds): temporaries left in ck: $leftovers"; exit 1; }
  echo "cycle $c ($kinds): same as the uninterrupted run"
  [ "$keep" -eq 1 ] || { cd "$work" && rm -rf "$dir"; }
done
summary=
for k in "${!count[@]}"; do summary="$summary $k=${count[$k]}"; done
ends=
for k in "${!ended[@]}"; do ends="$ends $k:${ended[$k]}"; done
echo "soak: $cycles cycles, nothing lost; interruptions:$summary; exit statuses:$ends"
