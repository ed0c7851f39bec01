#!/bin/sh
# hosts_mpi.sh — `cnnc train` across hosts, on one machine: up to 4 network namespaces, each a
# "host" with its own address on 10.77.0.0/24 and its own host name, joined by veth links to a
# bridge in a fifth namespace (the switch), and one mpirun in host 1 that starts the other
# hosts' ranks through tests/lib/hosts_agent.sh as it would through ssh, over TCP alone. Checks:
# 4 hosts save the very model, figures and picture that one process saves; every process of
# one host killed mid-epoch stops the others within --mpi-timeout with a message naming that
# host, leaving the last complete checkpoint; and that run, resumed on the other number of
# hosts (4 -> 2, 2 -> 4), ends with the weights of the run never stopped. Every namespace (and
# with them the links and the bridge) goes on exit, interrupted or not; nothing is made outside
# them. It does not test the numerics (test_dist.c) or one machine's runs (cli_mpi.sh). Skipped
# when not root, when ip, unshare or mpirun is missing, when namespaces cannot be made, when
# cnnc was built without MPI, or without the dataset.
# Usage: sh tests/hosts_mpi.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc

skip() {
  echo "$suite: skipped every check: $*"
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
for tool in ip:iproute2 unshare:util-linux mpirun:openmpi-bin; do
  command -v "${tool%%:*}" >/dev/null 2>&1 ||
    skip "${tool%%:*} is missing (Debian package ${tool#*:})"
done
"$cnnc" info 2>/dev/null | grep -q "^MPI: *yes" ||
  skip "this cnnc was built without MPI (make MPI=0)"
require_data

make_tmp
cd "$tmp" || exit 1

subnet=10.77.0.0/24
agent=$root/tests/lib/hosts_agent.sh
# The namespaces: ${CNNC_HOSTS_NS}s, the switch, and ${CNNC_HOSTS_NS}h1..h4, the hosts.
export CNNC_HOSTS_NS="cnh$$"
made=""

# kill_all: kills every process in the namespaces made (twice: a daemon may be starting one).
kill_all() {
  for pass in 1 2; do
    for ns in $made; do
      pids=$(ip netns pids "$ns" 2>/dev/null)
      # shellcheck disable=SC2086
      [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    done
    [ "$pass" = 1 ] && sleep 0.2
  done
}

# Kills every process in the namespaces made, then removes them (their links and the bridge go
# with them), then the temporary folder.
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  kill_all
  for ns in $made; do ip netns delete "$ns" 2>/dev/null; done
  chmod -R u+rwx "$tmp" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# add_namespace NAME: makes it, loopback up; skips the script when namespaces cannot be made.
add_namespace() {
  ip netns add "$1" 2>"$tmp/ip.err" ||
    skip "cannot make a network namespace here: $(head -n 1 "$tmp/ip.err")"
  made="$made $1"
  ip -n "$1" link set lo up 2>"$tmp/ip.err" ||
    skip "cannot set up a network namespace here: $(head -n 1 "$tmp/ip.err")"
}

# The switch, then hosts 1..4 (10.77.0.K, eth0 in the host, pK on the switch's bridge).
sw=${CNNC_HOSTS_NS}s
add_namespace "$sw"
{ ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up; } 2>"$tmp/ip.err" ||
  skip "cannot make a bridge in a network namespace: $(head -n 1 "$tmp/ip.err")"
for k in 1 2 3 4; do
  add_namespace "${CNNC_HOSTS_NS}h$k"
  { ip -n "$sw" link add "p$k" type veth peer name eth0 netns "${CNNC_HOSTS_NS}h$k" &&
    ip -n "$sw" link set "p$k" master br0 up &&
    ip -n "${CNNC_HOSTS_NS}h$k" addr add "10.77.0.$k/24" dev eth0 &&
    ip -n "${CNNC_HOSTS_NS}h$k" link set eth0 up; } 2>"$tmp/ip.err" ||
    skip "cannot link network namespaces with veth: $(head -n 1 "$tmp/ip.err")"
  for h in $(seq "$k" 4); do echo "10.77.0.$k slots=1" >>"hosts$h"; done
done

# Open MPI's session folders in $tmp, not shared with another run of this script.
export TMPDIR="$tmp" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# launch HOSTS ARGS...: starts mpirun in host 1, in the background, with one rank on each of
# hosts 1..HOSTS; its pid in $job, stdout in $tmp/out, stderr in $tmp/err. The launch agent, the
# addresses and the interfaces keep all traffic on the namespaces' subnet.
launch() {
  n=$1
  shift
  rm -f "$tmp/out" "$tmp/err"
  ip netns exec "${CNNC_HOSTS_NS}h1" unshare --uts sh -c 'hostname host1 && exec "$@"' sh \
    mpirun --hostfile "$tmp/hosts$n" -np "$n" --bind-to none \
      --mca plm rsh --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl tcp,self --mca btl_tcp_if_include "$subnet" \
      --mca oob_tcp_if_include "$subnet" "$@" >"$tmp/out" 2>"$tmp/err" &
  job=$!
}

# finish_within SECONDS: waits for the job at most SECONDS (else kills it and every process on
# the hosts, records a failure and returns 1); its exit status in $status, its wall seconds in
# $seconds.
finish_within() {
  start=$(date +%s)
  polls=0
  while kill -0 "$job" 2>/dev/null && [ "$polls" -lt $(($1 * 10)) ]; do
    sleep 0.1
    polls=$((polls + 1))
  done
  if kill -0 "$job" 2>/dev/null; then
    kill_all
    wait "$job"
    status=124
    fail "mpirun still ran after $1 s: $(tail -n 5 "$tmp/err")"
    return 1
  fi
  wait "$job"
  status=$?
  seconds=$(($(date +%s) - start))
}

# ---------------------------------------------------------------- every rank on a host of its own
launch 4 hostname
finish_within 60
names=$(sort "$tmp/out" | tr '\n' ' ')
{ [ "$status" -eq 0 ] && [ "$names" = "host1 host2 host3 host4 " ]; } ||
  fail "4 ranks over the 4 hosts: exit status $status, host names '$names': $(cat "$tmp/err")"

# ---------------------------------------------------------------- 4 hosts equal one process
job_flags="train --num-cores 4 --batch-size 32 --train-samples 16384 --test-samples 512
  --num-epochs 3 --log-steps 4 --plot none"
# shellcheck disable=SC2086
"$cnnc" $job_flags --threads 2 --save one.st --metrics-file one.jsonl --result-image one.png \
  >one.out 2>one.err || fail "one process: exit status $?: $(cat one.err)"

# shellcheck disable=SC2086
launch 4 "$cnnc" $job_flags --threads 1 --save p4.st --metrics-file p4.jsonl \
  --result-image p4.png
if finish_within 180; then
  [ "$status" -eq 0 ] || fail "4 hosts: exit status $status: $(cat "$tmp/err")"
  grep -q "4 processes (Open MPI [^)]*) on 4 hosts" "$tmp/out" ||
    fail "4 hosts: cnnc does not say it runs on 4 hosts: $(head -n 3 "$tmp/out")"
  cmp -s one.st p4.st || fail "4 hosts saved other weights than one process"
  cmp -s one.png p4.png || fail "4 hosts drew another result picture than one process"
  [ "$(metrics_figures one.jsonl)" = "$(metrics_figures p4.jsonl)" ] ||
    fail "4 hosts: losses and accuracy $(metrics_figures p4.jsonl) differ from one" \
      "process's $(metrics_figures one.jsonl)"
fi

# ---------------------------------------------------------------- a host lost, resumed elsewhere
# newest DIR: the name of the newest file in DIR (by time), or nothing.
newest() {
  # shellcheck disable=SC2012 # names made by cnnc, without odd characters
  ls -t "$1" 2>/dev/null | head -n 1
}

# ranks_ended HOSTS: true when no cnnc process runs in hosts 1..HOSTS.
# shellcheck disable=SC2317 # called by poll_until
ranks_ended() {
  for k in $(seq "$1"); do
    for pid in $(ip netns pids "${CNNC_HOSTS_NS}h$k"); do
      [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = cnnc ] && return 1
    done
  done
  return 0
}

# poll_until SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds (0) or SECONDS
# pass (1); the seconds since $start in $seconds.
poll_until() {
  limit=$(($1 * 10))
  shift
  polls=0
  until "$@"; do
    polls=$((polls + 1))
    [ "$polls" -ge "$limit" ] && { seconds=$(($(date +%s) - start)); return 1; }
    sleep 0.1
  done
  seconds=$(($(date +%s) - start))
}

# lose_host FROM: host FROM goes as a machine that loses its power goes: its link first, so that
# none of its processes says goodbye to the others, then every process of it (kill -9). Its
# peers hear nothing more: only the --mpi-timeout of their exchange ends their wait.
lose_host() {
  ip -n "$sw" link set "p$1" down
  # shellcheck disable=SC2046
  kill -KILL $(ip netns pids "${CNNC_HOSTS_NS}h$1")
  start=$(date +%s)
}

# lose_host_and_resume FROM TO: trains on FROM hosts with a checkpoint every epoch and loses
# host FROM (rank FROM-1) in epoch 2; expects a message naming that host within --mpi-timeout
# and a little, every rank on the other hosts ended, the checkpoint of epoch 1 the newest and
# loading; then the host's link comes back, mpirun ends, and the run resumed on TO hosts ends
# with the weights of the run never stopped.
lose_host_and_resume() {
  from=$1 to=$2 ck=ck$1 timeout=3
  what="host $from of $from lost"
  # shellcheck disable=SC2086
  launch "$from" "$cnnc" $job_flags --threads 1 --checkpoint-dir "$ck" --mpi-timeout $timeout \
    --save never.st --result-image none
  if ! wait_for "$tmp/out" "Epoch 2 step [1-9]"; then
    fail "$what: epoch 2 never started: $(tail -n 3 "$tmp/out") $(tail -n 3 "$tmp/err")"
    return
  fi
  before=$(newest "$ck")
  lose_host "$from"
  lost="rank $((from - 1)) (host$from) \(sent nothing to\|took nothing from\) rank [0-9]*"
  named="cnnc: error: $lost for $timeout s (--mpi-timeout); it is probably gone"
  poll_until $((timeout + 5)) grep -q "$named" "$tmp/err" ||
    fail "$what: no process named the lost host within $seconds s: $(grep cnnc: "$tmp/err")"
  [ "$seconds" -ge $((timeout - 1)) ] ||
    fail "$what: the others stopped after $seconds s, before the $timeout s of --mpi-timeout"
  timing="$timing, lost host $from of $from named after $seconds s"
  # (a rank whose MPI_Abort waits for the lost host ends by its own alarm 10 s later)
  poll_until $((timeout + 15)) ranks_ended $((from - 1)) ||
    fail "$what: ranks on the other hosts still ran $seconds s later"
  timing="$timing and the others' ranks gone after $seconds s"
  grep -q "the last complete checkpoint in $ck stays usable" "$tmp/err" ||
    fail "$what: no word of the checkpoint: $(grep cnnc: "$tmp/err")"
  # mpirun waits for the lost host's daemon until it hears that daemon is gone
  ip -n "$sw" link set "p$from" up
  finish_within 60 && [ "$status" -eq 0 ] && fail "$what: mpirun exited 0"
  after=$(newest "$ck")
  case $after in
    checkpoint-epoch-000[12].safetensors) ;;
    *) fail "$what: the newest file in $ck is '$after', not a complete checkpoint" ;;
  esac
  [ "$after" = "$before" ] || fail "$what: $ck/$after written after the kill (was $before)"
  "$cnnc" eval --checkpoint "$ck" --test-samples 100 >eval.out 2>&1 ||
    fail "$what: the checkpoint in $ck does not load: $(cat eval.out)"

  launch "$to" "$cnnc" train --resume "$ck" --threads 1 --save "resumed$to.st" \
    --result-image none --plot none
  finish_within 180 || return
  [ "$status" -eq 0 ] || fail "$what, resumed on $to hosts: exit status $status: $(cat "$tmp/err")"
  cmp -s one.st "resumed$to.st" ||
    fail "$what, resumed on $to hosts: other weights than the run never stopped"
}
timing=""
lose_host_and_resume 4 2
lose_host_and_resume 2 4

finish "4 hosts equal one process, bit for bit$timing; resumed on 2 and 4 hosts, bit for bit"
