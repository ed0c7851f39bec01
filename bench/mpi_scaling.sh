#!/bin/sh
# mpi_scaling.sh — `make bench-mpi`: the seed's network with a fixed number of replicas per
# process (2 of 128 images) as 1, 2, 4 and 8 MPI processes of one thread each on this machine
# (oversubscribed past its cores), one epoch of the training set each; for each, the
# exchange_bytes of its metrics file, the exchange's time per step (communicate_seconds over
# the steps), the wait for the slowest process, the training rate, and whether its weights equal
# one threaded process's with the same replicas; then one step's exchange by itself at each
# process count (build/mpi_exchange), the figures the scaling model in docs/distributed.md
# starts from. It measures and asserts nothing; the raw output and summary.json stay in
# BUILD/mpi-scaling/.
# Usage: bench/mpi_scaling.sh BUILD_DIR [REPLICAS_PER_PROCESS] [TRAIN_SAMPLES]
set -eu
build=${1:-build}
local=${2:-2}
samples=${3:-60000}
out="$build/mpi-scaling"
mkdir -p "$out"
# This machine only: root allowed, more processes than cores allowed, shared memory between
# processes copied through a buffer (containers often forbid cross-process memory access).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
job="train --num-epochs 1 --batch-size 128 --train-samples $samples --test-samples 1000
  --result-image none --plot none --metrics-debug"

for p in 1 2 4 8; do
  replicas=$((p * local))
  echo "== $replicas replicas: one process of $(nproc) threads, then mpirun -np $p, 1 thread each"
  # shellcheck disable=SC2086
  "$build/cnnc" $job --num-cores "$replicas" --threads "$(nproc)" --save "$out/one$p.st" \
    --metrics-file "$out/one$p.jsonl" >"$out/one$p.txt"
  # shellcheck disable=SC2086
  mpirun -np "$p" --bind-to none "$build/cnnc" $job --num-cores "$replicas" --threads 1 \
    --save "$out/p$p.st" --metrics-file "$out/p$p.jsonl" >"$out/p$p.txt"
  if cmp -s "$out/one$p.st" "$out/p$p.st"; then echo "p$p same"; else echo "p$p DIFFERENT"; fi \
    >>"$out/weights.txt.new"
  echo "== one step's exchange alone: mpirun -np $p $build/mpi_exchange $local"
  mpirun -np "$p" --bind-to none "$build/mpi_exchange" "$local" | tee "$out/exchange$p.txt"
done
mv "$out/weights.txt.new" "$out/weights.txt"

/usr/bin/python3 - "$out" "$local" <<'PY'
import json, subprocess, sys, time
out, local = sys.argv[1], int(sys.argv[2])
cpu = [l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True,
       text=True).stdout.splitlines() if l.startswith("Model name")]
summary = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "cpu": cpu[0] if cpu else "",
           "replicas_per_process": local, "runs": {}}
same = dict(line.split() for line in open(f"{out}/weights.txt"))
one = json.loads(open(f"{out}/one1.jsonl").readline())
steps1 = one["train_samples"] // (local * 128)
print("\n%d replicas of 128 per process, one epoch (%s/*.jsonl); CPU: %s" % (local, out,
      summary["cpu"]))
print("compute per step of one process (%d replicas, %s threads): %.1f ms" % (
      local, "all", 1e3 * one["train_seconds"] / steps1))
print("%9s %15s %12s %10s %10s %10s %9s %12s %12s" % ("processes", "exchange_bytes",
      "exchange us", "wait us", "samples/s", "weights", "alone us", "alone bytes",
      "records us"))
for p in (1, 2, 4, 8):
    last = json.loads(open(f"{out}/p{p}.jsonl").readline())
    steps = last["train_samples"] // (p * local * 128)
    alone = dict(f.split("=") for f in open(f"{out}/exchange{p}.txt").read().split())
    row = {"exchange_bytes": last["exchange_bytes"], "steps": steps,
           "exchange_us_per_step": 1e6 * last["communicate_seconds"] / steps,
           "wait_us_per_step": 1e6 * last["wait_seconds"] / steps,
           "train_samples_per_second": last["train_samples_per_second"],
           "weights": same[f"p{p}"], "alone": alone}
    summary["runs"][p] = row
    print("%9d %15d %12.1f %10.1f %10.0f %10s %9s %12s %12s" % (
        p, row["exchange_bytes"], row["exchange_us_per_step"], row["wait_us_per_step"],
        row["train_samples_per_second"], row["weights"], alone["exchange_us"],
        alone["exchange_bytes"], alone["whole_records_us"]))
print("(alone: build/mpi_exchange, the median of 200 exchanges; records: an allgather of "
      "every replica's whole record instead)")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print("figures written to %s/summary.json" % out)
PY
