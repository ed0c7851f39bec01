#!/bin/sh
# cli_mpi.sh — `cnnc train` as several processes under Open MPI's mpirun on this one machine
# (oversubscribed, as root where need be): 2 and 4 processes save the very bytes, metrics and
# picture that one process saves, and rank 0 alone prints; a run where one rank cannot read its
# data, runs with other flags, diverges, cannot write its metrics on rank 0, or where the
# replicas do not divide among the processes stops on every rank with a non-zero status within
# seconds; a signal to mpirun or to one rank stops every rank after the same step, with a
# checkpoint from which 4 processes end with an unstopped run's weights; a rank killed with
# kill -9 is named by the other after --mpi-timeout and the job ends, and kill -9 of mpirun ends
# the ranks at once with nothing written after it. It does not test the numerics of the step
# (test_dist.c and test_trainer.c do). A cnnc built without MPI must say so under mpirun every
# time, and the rest is skipped; skipped too when mpirun or the dataset is missing.
# Usage: sh tests/cli_mpi.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc

# A cnnc built without MPI, under mpirun, says so every time: mpirun ends the job at the first
# rank that fails, so a silent rank must not fail before rank 0 has spoken (one run in about 30
# ended without a word).
if command -v mpirun >/dev/null 2>&1 && built_without_mpi; then
  mpi_env
  for i in 1 2 3 4 5 6 7 8 9 10; do
    for p in 2 4; do
      said=$(timeout 60 mpirun -np "$p" "$cnnc" train --help 2>&1)
      case $said in
      *"cnnc: error: this cnnc was built without MPI, so it cannot run as $p processes"*) ;;
      *) fail "$p processes of a cnnc without MPI, run $i: no word of it: $said" ;;
      esac
    done
  done
  [ "$failures" -eq 0 ] || finish
  echo "$suite: a cnnc without MPI says so under mpirun, 20 runs out of 20"
fi
require_mpi
require_data

make_tmp
cd "$tmp" || exit 1

# Runs mpirun with the arguments under a time limit; stdout in $tmp/out, stderr in $tmp/err,
# exit status in $status, wall seconds in $seconds.
run_mpi() {
  start=$(date +%s)
  timeout 120 mpirun "$@" >"$tmp/out" 2>"$tmp/err"
  status=$?
  seconds=$(($(date +%s) - start))
}

small="train --num-epochs 2 --train-samples 1024 --test-samples 300 --num-cores 4
  --batch-size 32 --log-steps 4 --metrics-debug"

# ---------------------------------------------------------------- the same run, 1, 2 and 4 ranks
# shellcheck disable=SC2086
"$cnnc" $small --threads 2 --save one.st --metrics-file one.jsonl --result-image one.png \
  >one.out 2>one.err || fail "one process: exit status $?: $(cat one.err)"

for p in 2 4; do
  # shellcheck disable=SC2086
  run_mpi -np "$p" "$cnnc" $small --save "p$p.st" --metrics-file "p$p.jsonl" \
    --result-image "p$p.png"
  if [ "$status" -ne 0 ]; then
    fail "$p processes: exit status $status: $(cat "$tmp/err")"
    continue
  fi
  cmp -s one.st "p$p.st" || fail "$p processes saved other weights than one process"
  cmp -s one.png "p$p.png" || fail "$p processes drew another result picture than one process"
  [ "$(metrics_figures one.jsonl)" = "$(metrics_figures "p$p.jsonl")" ] ||
    fail "$p processes: losses and accuracy $(metrics_figures "p$p.jsonl") differ from" \
      "$(metrics_figures one.jsonl)"
  grep -q "\"communicate_seconds\":[0-9.e-]*[1-9]" "p$p.jsonl" ||
    fail "$p processes: no time in communication in p$p.jsonl"
  grep -q "\"wait_seconds\":" "p$p.jsonl" || fail "$p processes: no wait_seconds in p$p.jsonl"
  grep -q "communicate" "$tmp/out" || fail "$p processes: --metrics-debug does not show communicate"
  printed=$(grep -c "Finished training epoch 1" "$tmp/out")
  [ "$printed" -eq 1 ] || fail "$p processes: not rank 0 alone printed: $printed times"
  grep -q "$p processes (Open MPI" "$tmp/out" ||
    fail "$p processes: no line on how the run is spread"
done

# ---------------------------------------------------------------- every rank stops with an error
# In the runs below mpirun lets each rank end on its own (it would otherwise kill the others as
# soon as one fails), and every rank writes its exit status to $tmp/status: each must fail.
# shellcheck disable=SC2016
record='"$0" "$@"; echo "$OMPI_COMM_WORLD_RANK $?" >>"'"$tmp"'/status"'

# expect_all_fail P WHAT TEXT [MPIRUN ARGS...]: every one of the P ranks exited non-zero within
# 20 seconds, and stderr says TEXT exactly once.
expect_all_fail() {
  p=$1 what=$2 text=$3
  shift 3
  rm -f "$tmp/status"
  OMPI_MCA_orte_abort_on_non_zero_status=0 run_mpi "$@"
  if [ "$seconds" -gt 20 ] || [ "$status" -eq 124 ]; then
    fail "$what: took $seconds s (exit status $status)"
  fi
  if [ "$(wc -l <"$tmp/status" 2>/dev/null || echo 0)" -ne "$p" ]; then
    fail "$what: not all $p ranks ended: $(cat "$tmp/status" 2>/dev/null)"
  elif grep -q " 0$" "$tmp/status"; then
    fail "$what: some rank exited 0: $(cat "$tmp/status")"
  fi
  [ "$(grep -c -e "$text" "$tmp/err")" -eq 1 ] ||
    fail "$what: stderr does not say '$text' once: $(cat "$tmp/err")"
}

mkdir bad
for f in "$data"/*; do ln -s "$f" bad/; done
rm bad/train-images-idx3-ubyte*
head -c 100000 "$data/train-images-idx3-ubyte.gz" >bad/train-images-idx3-ubyte.gz

# shellcheck disable=SC2086
expect_all_fail 2 "rank 1 has a truncated dataset" "rank 1 of 2 .* failed" \
  -np 1 sh -c "$record" "$cnnc" $small : -np 1 sh -c "$record" "$cnnc" $small --data-dir bad
grep -q "rank 1: bad/train-images-idx3-ubyte.gz: truncated" "$tmp/err" ||
  fail "the rank with the bad dataset does not say what is wrong: $(cat "$tmp/err")"
# shellcheck disable=SC2086
expect_all_fail 4 "rank 2 of 4 has a truncated dataset" "rank 2 of 4 .* failed" \
  -np 2 sh -c "$record" "$cnnc" $small : -np 1 sh -c "$record" "$cnnc" $small --data-dir bad \
  : -np 1 sh -c "$record" "$cnnc" $small
# shellcheck disable=SC2086
expect_all_fail 2 "rank 1 has another seed" "another --seed" \
  -np 1 sh -c "$record" "$cnnc" $small : -np 1 sh -c "$record" "$cnnc" $small --seed 2
grep -q " 1$" "$tmp/status" && fail "different flags: expected exit status 2: $(cat "$tmp/status")"
# shellcheck disable=SC2086
expect_all_fail 3 "4 replicas among 3 processes" "--num-cores/--replicas 4 cannot be shared evenly among 3" \
  -np 3 sh -c "$record" "$cnnc" $small
grep -q " 1$" "$tmp/status" && fail "uneven replicas: expected exit status 2: $(cat "$tmp/status")"
# shellcheck disable=SC2086
expect_all_fail 2 "training diverges" "training diverged" \
  -np 2 sh -c "$record" "$cnnc" $small --learning-rate 1e30
if [ -w /dev/full ]; then # rank 0 alone writes the metrics; the disk fills up after epoch 1
  # shellcheck disable=SC2086
  expect_all_fail 2 "rank 0 cannot write its metrics" "/dev/full: No space left" \
    -np 2 sh -c "$record" "$cnnc" $small --metrics-file /dev/full
fi

# ---------------------------------------------------------------- signals stop every rank
# running PID: the process exists and is not a zombie.
running() {
  case "$(ps -o stat= -p "$1" 2>/dev/null)" in
    "" | Z*) return 1 ;;
    *) return 0 ;;
  esac
}

# The job the signals stop: long enough to be stopped in its first epoch, short enough to run
# to the end once without a stop, in one process, as the reference for the resumed runs.
sig_job="train --num-cores 4 --batch-size 32 --train-samples 16384 --test-samples 300
  --num-epochs 3 --log-steps 1 --result-image none --plot none"
# shellcheck disable=SC2086
"$cnnc" $sig_job --threads 2 --save straight.st >/dev/null 2>&1 || fail "the unstopped run failed"

# stop_with_signal WHOM JOB: starts JOB as 2 processes with a checkpoint folder, waits for its
# first progress line after step 0, sends SIGTERM to mpirun (WHOM=mpirun) or to rank 1's
# process (WHOM=rank), and expects every rank gone within 20 s, a checkpoint of where they
# stopped, and no model saved.
# (mpirun passes SIGTERM on about a second later, after a SIGCONT, and sends SIGKILL a second
# after that: the job must outlast that second.)
stop_with_signal() {
  whom=$1 job=$2
  rm -f "$tmp/out" # the wait below must not read the previous run's lines
  # shellcheck disable=SC2086
  mpirun -np 2 "$cnnc" $job --checkpoint-dir "ck-$whom" --save signal.st \
    >"$tmp/out" 2>"$tmp/err" &
  mpirun_pid=$!
  tries=0
  until grep -Eq "step [1-9][0-9]*/" "$tmp/out" || [ "$tries" -ge 300 ]; do
    sleep 0.1
    tries=$((tries + 1))
  done
  ranks=$(ps -o pid= --ppid "$mpirun_pid" | tr -d ' ' | tr '\n' ' ')
  # shellcheck disable=SC2086
  set -- $ranks
  if [ "$#" -ne 2 ]; then
    fail "signal to $whom: expected 2 ranks under mpirun, found '$ranks'"
  fi
  target=$mpirun_pid
  [ "$whom" = rank ] && target=$2
  kill -TERM "$target"
  waited=0
  while kill -0 "$mpirun_pid" 2>/dev/null && [ "$waited" -lt 200 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$mpirun_pid" 2>/dev/null; then
    fail "signal to $whom: mpirun still runs after 20 s"
    kill -KILL "$mpirun_pid" 2>/dev/null
  fi
  wait "$mpirun_pid"
  code=$?
  [ "$code" -ne 0 ] || fail "signal to $whom: mpirun exited 0"
  [ "$whom" = rank ] && [ "$code" -ne 143 ] &&
    fail "SIGTERM to a rank: mpirun exited $code, expected 143"
  for pid in $ranks; do # a rank may take a moment to finish dying after mpirun is gone
    waited=0
    while running "$pid" && [ "$waited" -lt 50 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    if running "$pid"; then
      fail "signal to $whom: rank process $pid still runs 5 s after mpirun ended"
      kill -KILL "$pid"
    fi
  done
  grep -q "Stopped by SIGTERM at epoch" "$tmp/out" ||
    fail "signal to $whom: rank 0 does not say where it stopped: $(tail -n 3 "$tmp/out")"
  ls "ck-$whom"/checkpoint-epoch-*.safetensors >/dev/null 2>&1 ||
    fail "signal to $whom: no checkpoint in ck-$whom"
  [ -e signal.st ] && fail "signal to $whom: a model was saved by a stopped run"
}
# (A progress line every 20 steps: mpirun stops reading the ranks' output while it passes the
# signal on, and a line every step would fill its pseudo-terminal and block rank 0 before it
# could stop.)
stop_with_signal mpirun "train --num-cores 4 --batch-size 32 --log-steps 20 --result-image none
  --plot none"
stop_with_signal rank "$sig_job"
cp ck-rank/checkpoint-epoch-*.safetensors stopped.safetensors # the one where they stopped

# Resumed as 4 processes; and a run whose rank 0 resumes while rank 1 starts afresh.
run_mpi -np 4 "$cnnc" train --resume ck-rank --num-epochs 3 --save resumed.st \
  --result-image none --plot none
[ "$status" -eq 0 ] || fail "resuming as 4 processes: exit status $status: $(cat "$tmp/err")"
cmp -s straight.st resumed.st ||
  fail "stopped as 2 processes and resumed as 4, the weights differ from an unstopped run's"
# shellcheck disable=SC2086
expect_all_fail 2 "only rank 0 resumes" "starts from another model state" \
  -np 1 sh -c "$record" "$cnnc" $sig_job --resume stopped.safetensors \
  : -np 1 sh -c "$record" "$cnnc" $sig_job

# ---------------------------------------------------------------- a rank or mpirun dies
# rank_pid MPIRUN_PID RANK: the process of RANK among mpirun's children, as its environment says.
rank_pid() {
  for pid in $(ps -o pid= --ppid "$1"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" &&
      echo "$pid"
  done
}

# gone_within PID SECONDS: true when PID has ended (or is a zombie) within SECONDS, polled every
# 50 ms; otherwise kills it and returns 1.
gone_within() {
  polls=0
  while running "$1" && [ "$polls" -lt $(($2 * 20)) ]; do
    sleep 0.05
    polls=$((polls + 1))
  done
  running "$1" || return 0
  kill -KILL "$1"
  return 1
}

# start_long_run DIR [FLAGS]: 2 processes training for minutes (quiet: no output to block on),
# checkpointing into DIR after every epoch; returns once DIR holds a checkpoint, with mpirun's
# process in $mpirun_pid and rank 0's and rank 1's in $rank0 and $rank1.
start_long_run() {
  dir=$1
  shift
  mpirun -np 2 "$cnnc" train -q --num-cores 4 --batch-size 32 --train-samples 4096 \
    --test-samples 300 --num-epochs 1000 --result-image none --plot none --checkpoint-dir "$dir" \
    "$@" >"$tmp/out" 2>"$tmp/err" &
  mpirun_pid=$!
  tries=0
  until ls "$dir"/checkpoint-epoch-*.safetensors >/dev/null 2>&1 || [ "$tries" -ge 600 ]; do
    sleep 0.1
    tries=$((tries + 1))
  done
  rank0=$(rank_pid "$mpirun_pid" 0)
  rank1=$(rank_pid "$mpirun_pid" 1)
  if [ -z "$rank0" ] || [ -z "$rank1" ]; then
    fail "expected ranks 0 and 1 as mpirun's children, found '$rank0' and '$rank1'"
  fi
}

# newest DIR: the name of the newest checkpoint in DIR, or nothing.
newest() {
  last=
  for f in "$1"/checkpoint-epoch-*.safetensors; do [ -e "$f" ] && last=${f##*/}; done
  echo "$last"
}

# resumes DIR: one process continues the newest checkpoint in DIR by one epoch.
resumes() {
  done=$(newest "$1" | sed -n 's/^checkpoint-epoch-0*\([0-9][0-9]*\)\.safetensors$/\1/p')
  timeout 120 "$cnnc" train -q --resume "$1" --num-epochs $((${done:-0} + 1)) --threads 2 \
    >"$tmp/resume.out" 2>&1
}

# Rank 1 killed: with mpirun told to let the other ranks run on, rank 0 waits for it for
# --mpi-timeout seconds, names it and stops; no checkpoint of the unfinished step is written.
OMPI_MCA_orte_abort_on_non_zero_status=0 start_long_run ck-lost --mpi-timeout 3
kill -KILL "$rank1"
start=$(date +%s)
if ! gone_within "$mpirun_pid" 15; then
  fail "rank 1 killed: mpirun still runs 15 s later (rank 0 waits for ever?)"
  kill -KILL "$rank0"
fi
wait "$mpirun_pid"
code=$?
seconds=$(($(date +%s) - start))
[ "$code" -ne 0 ] || fail "rank 1 killed: mpirun exited 0"
if [ "$seconds" -lt 2 ] || [ "$seconds" -gt 20 ]; then
  fail "rank 1 killed: rank 0 stopped after $seconds s, expected the 3 s of --mpi-timeout"
fi
# rank 1 may die before or after its part of the step reached rank 0: either wording names it,
# and its host
lost="rank 1 ($(hostname)) \(sent nothing to\|took nothing from\) rank 0"
grep -q "cnnc: error: $lost for 3 s (--mpi-timeout); it is probably" "$tmp/err" || fail "rank 1 killed: rank 0 does not name it: $(cat "$tmp/err")"
grep -q "the last complete checkpoint in ck-lost stays usable" "$tmp/err" ||
  fail "rank 1 killed: rank 0 does not say where the checkpoints are: $(cat "$tmp/err")"
gone_within "$rank0" 5 || fail "rank 1 killed: rank 0 still runs 5 s after mpirun ended"
for f in ck-lost/*-step-*; do
  [ -e "$f" ] && fail "rank 1 killed: a checkpoint of the unfinished step: $f"
done
resumes ck-lost || fail "rank 1 killed: its checkpoint does not resume: $(cat "$tmp/resume.out")"

# mpirun killed: the ranks (mpirun's own children here) die with it, at once, and write
# nothing more. The kill comes right after a checkpoint, so that the next one is an epoch away.
start_long_run ck-orphan
first=$(newest ck-orphan)
tries=0
until [ "$(newest ck-orphan)" != "$first" ] || [ "$tries" -ge 1000 ]; do
  sleep 0.02
  tries=$((tries + 1))
done
touch killed-at
kill -KILL "$mpirun_pid"
for pid in "$rank0" "$rank1"; do
  gone_within "$pid" 1 || fail "mpirun killed: rank process $pid still ran 1 s later"
done
wait "$mpirun_pid"
sleep 1 # time for a rank that outlived mpirun to write
written=$(find ck-orphan -type f -newer killed-at)
[ -z "$written" ] || fail "mpirun killed: written after the kill: $written"
resumes ck-orphan || fail "mpirun killed: the folder does not resume: $(cat "$tmp/resume.out")"

finish "2 and 4 processes equal one, bit for bit"
