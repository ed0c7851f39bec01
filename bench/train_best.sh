#!/bin/sh
# train_best.sh — `make bench-train-best`: the recipe of `make train-best` (its flags are this
# script's arguments) trained by cnnc and then by PyTorch (bench/pytorch_reference.py: the same
# model file, optimiser, schedule, flips and validation split, fp32) on the same machine and
# threads. BENCH_ROUNDS (default 1) alternates the two that many times, so that a machine whose
# speed drifts within the hour slows both alike; each round's ratio is reported and the median
# is the result. Reports each one's final test accuracy, training samples/s and wall seconds;
# writes BUILD/train-best.json with the CPU. One round of the whole recipe takes about half an
# hour on two cores (two epochs: about two minutes); the numbers are for the docs, not a test.
# Usage: [BENCH_ROUNDS=N] bench/train_best.sh BUILD_DIR RECIPE_FLAGS...
set -eu
build=$1
shift
threads=${BENCH_THREADS:-$(nproc)}
rounds=${BENCH_ROUNDS:-1}
case $rounds in
  '' | *[!0-9]* | 0) echo "BENCH_ROUNDS=$rounds: a whole number of at least 1" >&2; exit 2 ;;
esac
reference=$(dirname "$0")/pytorch_reference.py
now() { date +%s.%N; }

: >"$build/train-best-rounds.txt"
r=1
while [ "$r" -le "$rounds" ]; do
  start=$(now)
  "$build/cnnc" train "$@" --threads "$threads" --metrics-file "$build/train-best.jsonl" \
    --result-image none --plot none -q > "$build/train-best-cnnc.txt"
  end=$(now)
  echo "round $r of $rounds, cnnc: $(tail -n 2 "$build/train-best-cnnc.txt" | head -n 1)"
  /usr/bin/python3 "$reference" "$@" --threads "$threads" > "$build/train-best-torch.txt"
  echo "round $r of $rounds, PyTorch: $(tail -n 1 "$build/train-best-torch.txt")"
  # one line a round: cnnc's start and end, its metrics as one JSON array, PyTorch's last line
  printf '%s\t%s\t%s\t%s\n' "$start" "$end" \
    "$(tr '\n' ',' < "$build/train-best.jsonl" | sed 's/^/[/; s/,$/]/')" \
    "$(tail -n 1 "$build/train-best-torch.txt")" >> "$build/train-best-rounds.txt"
  r=$((r + 1))
done

# The CPU as `cnnc info` names it: "model name" with its family and model numbers.
CNNC_CPU=$("$build/cnnc" info | sed -n 's/^CPU: *//p') \
  /usr/bin/python3 - "$build" "$*" <<'PY'
import json, os, statistics, sys, time
build, recipe = sys.argv[1], sys.argv[2]
rounds = []
for line in open(f"{build}/train-best-rounds.txt"):
    start, end, metrics, torch_line = line.rstrip("\n").split("\t")
    epochs, torch = json.loads(metrics), dict(p.split("=", 1) for p in torch_line.split())
    rate = sum(e["train_samples_per_second"] for e in epochs) / len(epochs)
    r = {"cnnc": {"test_accuracy": epochs[-1]["test_accuracy"],
                  "val_accuracy": epochs[-1].get("val_accuracy"),
                  "train_samples_per_second": rate, "wall_seconds": float(end) - float(start)},
         "pytorch": {"test_accuracy": float(torch["test_accuracy"]),
                     "train_samples_per_second": float(torch["train_samples_per_second"]),
                     "wall_seconds": float(torch["wall_s"])}}
    r["training_ratio"] = rate / r["pytorch"]["train_samples_per_second"]
    rounds.append(r)
cpu = os.environ.get("CNNC_CPU") or "unknown"
last = rounds[-1]
result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
          "recipe": recipe, "cnnc": last["cnnc"], "pytorch": last["pytorch"],
          "training_ratio": statistics.median(r["training_ratio"] for r in rounds),
          "rounds": rounds}
for i, r in enumerate(rounds):
    c, t = r["cnnc"], r["pytorch"]
    print("round %d: cnnc %.2f%% in %.0f s wall, PyTorch %.2f%% in %.0f s; training %.0f vs %.0f "
          "samples/s: %.2fx" % (i + 1, c["test_accuracy"], c["wall_seconds"], t["test_accuracy"],
                                t["wall_seconds"], c["train_samples_per_second"],
                                t["train_samples_per_second"], r["training_ratio"]))
print("training ratio%s: %.2fx (%s)" % (" (median of %d rounds)" % len(rounds)
                                        if len(rounds) > 1 else "", result["training_ratio"], cpu))
json.dump(result, open(f"{build}/train-best.json", "w"), indent=1)
PY
