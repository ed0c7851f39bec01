#!/bin/sh
# mpi_scaling.sh — `make bench-mpi`: the seed's job (8 replicas x 128 on the full training set)
# for a few epochs as one threaded process, as one MPI process, and as two MPI processes of one
# thread each, on this machine; for each, the training rate of the last epoch, the share of it
# spent in communication, and whether its weights equal the threaded run's; then the cost of one
# step's exchange by itself (build/mpi_exchange), the figure the scaling model in
# docs/distributed.md starts from. It measures and asserts nothing; the raw output and
# summary.json stay in BUILD/mpi-scaling/.
# Usage: bench/mpi_scaling.sh BUILD_DIR [EPOCHS]
set -eu
build=${1:-build}
epochs=${2:-2}
threads=$(nproc)
out="$build/mpi-scaling"
mkdir -p "$out"
# This machine only: root allowed, more processes than cores allowed, shared memory between
# processes copied through a buffer (containers often forbid cross-process memory access).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
job="train --num-epochs $epochs --num-cores 8 --result-image none"

echo "== 1 process, $threads threads"
# shellcheck disable=SC2086
"$build/cnnc" $job --threads "$threads" --save "$out/threads.st" \
  --metrics-file "$out/threads.jsonl" >"$out/threads.txt"
echo "== mpirun -np 1, $threads threads"
# shellcheck disable=SC2086
mpirun -np 1 --bind-to none "$build/cnnc" $job --threads "$threads" --save "$out/p1.st" \
  --metrics-file "$out/p1.jsonl" >"$out/p1.txt"
echo "== mpirun -np 2, each bound to a core, 1 thread each"
# shellcheck disable=SC2086
mpirun -np 2 "$build/cnnc" $job --threads 1 --save "$out/p2.st" \
  --metrics-file "$out/p2.jsonl" >"$out/p2.txt"
echo "== one step's exchange alone: mpirun -np 2 $build/mpi_exchange 8"
mpirun -np 2 "$build/mpi_exchange" 8 | tee "$out/exchange.txt"

for run in p1 p2; do
  if cmp -s "$out/threads.st" "$out/$run.st"; then echo "$run same" ; else echo "$run DIFFERENT"; fi
done >"$out/weights.txt"

/usr/bin/python3 - "$out" <<'PY'
import json, sys, time
out = sys.argv[1]
summary = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": {}}
same = dict(line.split() for line in open(f"{out}/weights.txt"))
steps = 58  # 60,000 / 8 replicas / 128
print("\nlast epoch of each run (%s/*.jsonl):" % out)
print("%-30s %10s %8s %16s %16s %12s %9s" % ("run", "samples/s", "train s", "wait s",
      "communicate s", "exchange us", "weights"))
for run, name in (("threads", "1 process, threaded"), ("p1", "mpirun -np 1, threaded"),
                  ("p2", "mpirun -np 2, 1 thread each")):
    last = [json.loads(l) for l in open(f"{out}/{run}.jsonl")][-1]
    wait, comm = last["wait_seconds"], last["communicate_seconds"]
    train = last["train_seconds"]
    summary["runs"][run] = dict(last, weights="reference" if run == "threads" else same[run])
    print("%-30s %10.0f %8.3f %8.3f (%4.1f%%) %8.3f (%4.1f%%) %12.1f %9s" % (
        name, last["train_samples_per_second"], train, wait, 100 * wait / train, comm,
        100 * comm / train, 1e6 * comm / steps,
        "reference" if run == "threads" else same[run]))
fields = dict(p.split("=") for p in open(f"{out}/exchange.txt").read().split())
print("exchange alone, 2 ranks: %.1f us per step, median (mean %.1f; %s bytes in, %.2f GB/s); "
      "an all-reduce of the gradient %.1f us; a 4-byte allgather %.1f us" % (
      float(fields["step_allgather_us"]), float(fields["step_allgather_mean_us"]),
      fields["bytes_received_per_rank"], float(fields["allgather_GBps"]),
      float(fields["allreduce_us"]), float(fields["latency_us"])))
summary["exchange"] = fields
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print("figures written to %s/summary.json" % out)
PY
