#!/bin/sh
# run.sh — `make bench`: cnnc's benchmark (build/bench) and the PyTorch reference
# (bench/pytorch_reference.py with Debian's python3-torch) on the same machine, same threads,
# same job (8 replicas x 128), each after one warm-up epoch that is not counted (PyTorch's
# evaluation figure does include its first test pass). These machines change speed from one
# minute to the next, so the two alternate for several rounds and the report gives the median
# of the per-round ratios (and the ratio of each side's best round); every round's figures go to
# build/bench.json with cnnc's per-layer breakdown and GFLOP/s against the measured peak. The
# claim is the ratio.
# Usage: bench/run.sh BUILD_DIR [THREADS] [EPOCHS] [ROUNDS] [PRECISION]   (cnnc's --precision:
# fp32, the default, or bf16; PyTorch always runs fp32)
set -eu
build=${1:-build}
threads=${2:-$(nproc)}
epochs=${3:-1}
rounds=${4:-3}
precision=${5:-fp32}
data=/usr/share/datasets/fashion-mnist
reference=${PYTORCH_REFERENCE:-$(dirname "$0")/pytorch_reference.py}
out="$build/bench.json"
have_torch=0
if [ -f "$reference" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then have_torch=1; fi

round=1
while [ "$round" -le "$rounds" ]; do
  echo "== round $round of $rounds"
  "$build/bench" --threads "$threads" --epochs "$epochs" --data-dir "$data" \
    --precision "$precision" --json "$build/bench-cnnc-$round.json" > "$build/bench-cnnc-$round.txt"
  head -n 3 "$build/bench-cnnc-$round.txt" | tail -n 2
  if [ "$have_torch" -eq 1 ]; then
    # one warm-up epoch more, as build/bench does; only the epochs after it are counted
    /usr/bin/python3 "$reference" --epochs $((epochs + 1)) --replicas 8 --threads "$threads" \
      --data "$data" > "$build/bench-torch-$round.txt"
    echo "  PyTorch: $(tail -n 1 "$build/bench-torch-$round.txt")"
  fi
  round=$((round + 1))
done
echo "== cnnc, last round"
cat "$build/bench-cnnc-$rounds.txt"
[ "$have_torch" -eq 1 ] ||
  echo "PyTorch reference skipped: needs $reference and Debian's python3-torch"

/usr/bin/python3 - "$build" "$rounds" "$epochs" "$have_torch" "$out" <<'PY'
import json, statistics, sys, time
build, rounds, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
have_torch, out = sys.argv[4] == "1", sys.argv[5]
cnnc = [json.load(open(f"{build}/bench-cnnc-{r}.json")) for r in range(1, rounds + 1)]
date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
result = {"date": date, "rounds": rounds, "cnnc": cnnc}
if have_torch:
    torch = []
    for r in range(1, rounds + 1):
        lines = open(f"{build}/bench-torch-{r}.txt").read().splitlines()
        epoch_lines = [l for l in lines if l.startswith("epoch ")][1:]  # the warm-up left out
        timed = [dict(p.split("=", 1) for p in l.split()[2:]) for l in epoch_lines]
        last = dict(p.split("=", 1) for p in lines[-1].split())
        rate = statistics.mean(float(e["samples_per_s"]) for e in timed)
        torch.append({"train_samples_per_second": rate,
                      "eval_images_per_second": (epochs + 1) * 10000 / float(last["eval_s"])})
    result["pytorch"] = torch
    for key, what in (("train_samples_per_second", "training"),
                      ("eval_images_per_second", "evaluation")):
        ratios = [c[key] / t[key] for c, t in zip(cnnc, torch)]
        best = max(c[key] for c in cnnc) / max(t[key] for t in torch)
        result[what + "_ratio_median"] = statistics.median(ratios)
        result[what + "_ratio_of_bests"] = best
        print("%s: cnnc / PyTorch median %.2fx over %d rounds (%s), best against best %.2fx "
              "(%.0f vs %.0f)" % (what, statistics.median(ratios), rounds,
              " ".join("%.2f" % x for x in ratios), best, max(c[key] for c in cnnc),
              max(t[key] for t in torch)))
json.dump(result, open(out, "w"), indent=1)
print("figures written to", out)
PY
