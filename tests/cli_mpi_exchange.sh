#!/bin/sh
# cli_mpi_exchange.sh — the exchange_bytes figure of `cnnc train` under mpirun (oversubscribed on
# this one machine): 0 for one process; with 2 and 4 processes of 2 replicas each, every epoch's
# figure in the metrics file and in --metrics-debug is the formula of docs/distributed.md,
# 8 (P - 1) ((L + 1) ceil((n + m) / P) + 2 L) for the seed's n = 21,900 parameters and m = 60
# BatchNorm running statistics, so that 4 processes move less than twice what 2 move (gathering
# whole records, as before, moved three times as much); and those runs save the weights one
# process saves with the same replicas. The failure handling under mpirun is cli_mpi.sh's business.
# Skipped when mpirun, the dataset, or MPI in this cnnc is missing.
# Usage: sh tests/cli_mpi_exchange.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
require_mpi
require_data
make_tmp
cd "$tmp" || exit 1

params=21900 stats=60 local=2 # models/fashion_mnist.model: bn1 and bn2, 30 channels
job="train --num-epochs 2 --train-samples 1024 --test-samples 64 --batch-size 16
  --result-image none --plot none --metrics-debug"

# expected P: the bytes one of P processes of $local replicas sends and receives a step.
expected() {
  slice=$(((params + stats + $1 - 1) / $1))
  echo $((8 * ($1 - 1) * ((local + 1) * slice + 2 * local)))
}

# figures FILE: each epoch's exchange_bytes in a metrics file, one a line.
figures() {
  sed -n 's/.*"exchange_bytes":\([0-9]*\).*/\1/p' "$1"
}

# check_run NAME WANT: the metrics file NAME.jsonl and the output NAME.out show WANT bytes for
# each of the 2 epochs.
check_run() {
  [ "$(figures "$1.jsonl" | tr '\n' ' ')" = "$2 $2 " ] ||
    fail "$1: exchange_bytes $(figures "$1.jsonl" | tr '\n' ' ')in $1.jsonl, expected $2 twice"
  [ "$(grep -c "; exchange $2 bytes a step$" "$1.out")" -eq 2 ] ||
    fail "$1: --metrics-debug does not say 'exchange $2 bytes a step' twice: $(cat "$1.out")"
}

for p in 2 4; do
  replicas=$((p * local))
  # shellcheck disable=SC2086
  "$cnnc" $job --num-cores "$replicas" --threads 2 --save "one$p.st" \
    --metrics-file "one$p.jsonl" >"one$p.out" 2>&1 || fail "one process: $(cat "one$p.out")"
  check_run "one$p" 0
  # shellcheck disable=SC2086
  timeout 120 mpirun -np "$p" "$cnnc" $job --num-cores "$replicas" --save "p$p.st" \
    --metrics-file "p$p.jsonl" >"p$p.out" 2>&1 || fail "$p processes: $(cat "p$p.out")"
  check_run "p$p" "$(expected "$p")"
  cmp -s "one$p.st" "p$p.st" || fail "$p processes saved other weights than one process"
done

two=$(figures p2.jsonl | head -n 1)
four=$(figures p4.jsonl | head -n 1)
if [ -z "$two" ] || [ -z "$four" ] || [ "$four" -ge $((2 * two)) ]; then
  fail "4 processes move $four bytes a step, 2 move $two: the volume grows with the processes"
fi

finish "exchange_bytes $two at 2 processes, $four at 4, as the formula says"
