#!/bin/sh
# train_best.sh — `make bench-train-best`: the recipe of `make train-best` (its flags are this
# script's arguments) trained by cnnc and then by PyTorch (bench/pytorch_reference.py: the same
# model file, optimiser, schedule, flips and validation split, fp32) on the same machine and
# threads, one after the other. Reports each one's final test accuracy, training samples/s and
# wall seconds, and the ratio of the training speeds; writes BUILD/train-best.json with the CPU.
# A whole run of both takes about half an hour on two cores; the numbers are for the docs, not a
# test. It does not alternate rounds as bench/run.sh does: one run of each.
# Usage: bench/train_best.sh BUILD_DIR RECIPE_FLAGS...
set -eu
build=$1
shift
threads=${BENCH_THREADS:-$(nproc)}
reference=$(dirname "$0")/pytorch_reference.py
now() { date +%s.%N; }

start=$(now)
"$build/cnnc" train "$@" --threads "$threads" --metrics-file "$build/train-best.jsonl" \
  --result-image none --plot none -q > "$build/train-best-cnnc.txt"
end=$(now)
echo "cnnc: $(tail -n 2 "$build/train-best-cnnc.txt" | head -n 1)"
/usr/bin/python3 "$reference" "$@" --threads "$threads" > "$build/train-best-torch.txt"
echo "PyTorch: $(tail -n 1 "$build/train-best-torch.txt")"

# The CPU as `cnnc info` names it: "model name" with its family and model numbers.
CNNC_CPU=$("$build/cnnc" info | sed -n 's/^CPU: *//p') \
  /usr/bin/python3 - "$build" "$start" "$end" "$*" <<'PY'
import json, os, sys, time
build, start, end, recipe = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
epochs = [json.loads(l) for l in open(f"{build}/train-best.jsonl")]
torch = dict(p.split("=", 1) for p in open(f"{build}/train-best-torch.txt").read().split("\n")[-2].split())
cnnc_rate = sum(e["train_samples_per_second"] for e in epochs) / len(epochs)
cpu = os.environ.get("CNNC_CPU") or "unknown"
result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
          "recipe": recipe,
          "cnnc": {"test_accuracy": epochs[-1]["test_accuracy"],
                   "val_accuracy": epochs[-1].get("val_accuracy"),
                   "train_samples_per_second": cnnc_rate, "wall_seconds": end - start},
          "pytorch": {"test_accuracy": float(torch["test_accuracy"]),
                      "train_samples_per_second": float(torch["train_samples_per_second"]),
                      "wall_seconds": float(torch["wall_s"])}}
result["training_ratio"] = cnnc_rate / result["pytorch"]["train_samples_per_second"]
print("cnnc %.2f%% in %.0f s wall, PyTorch %.2f%% in %.0f s; training %.0f vs %.0f samples/s: "
      "%.2fx (%s)" % (result["cnnc"]["test_accuracy"], end - start,
                      result["pytorch"]["test_accuracy"], result["pytorch"]["wall_seconds"],
                      cnnc_rate, result["pytorch"]["train_samples_per_second"],
                      result["training_ratio"], cpu))
json.dump(result, open(f"{build}/train-best.json", "w"), indent=1)
PY
