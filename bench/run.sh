#!/bin/sh
# run.sh — `make bench`: cnnc's benchmark (build/bench) and the PyTorch reference
# (bench/pytorch_reference.py with Debian's python3-torch) one after the other on the
# same machine, same threads, same job (8 replicas x 128); prints each side's training and
# evaluation throughput, the ratios, and cnnc's GFLOP/s against the measured peak, and writes all
# figures to build/bench.json. The claim is the ratio: absolute times move with the machine.
# Usage: bench/run.sh BUILD_DIR [THREADS] [EPOCHS]
set -eu
build=${1:-build}
threads=${2:-$(nproc)}
epochs=${3:-2}
data=/usr/share/datasets/fashion-mnist
reference=${PYTORCH_REFERENCE:-$(dirname "$0")/pytorch_reference.py}
out="$build/bench.json"

"$build/bench" --threads "$threads" --epochs "$epochs" --data-dir "$data" --json "$build/bench-cnnc.json"

torch_line=""
if [ -f "$reference" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'): $threads threads, 8 replicas x 128, $epochs epochs"
  torch_line=$(/usr/bin/python3 "$reference" --epochs "$epochs" --replicas 8 --threads "$threads" \
                 --data "$data" | tail -n 1)
  echo "  $torch_line"
else
  echo "PyTorch reference skipped: needs $reference and Debian's python3-torch"
fi

/usr/bin/python3 - "$build/bench-cnnc.json" "$out" "$epochs" "$torch_line" <<'PY'
import json, sys, time
cnnc = json.load(open(sys.argv[1])); epochs = int(sys.argv[3]); line = sys.argv[4]
result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cnnc": cnnc}
if line:
    kv = dict(p.split("=", 1) for p in line.split())
    torch = {"train_samples_per_second": float(kv["train_samples_per_second"]),
             "eval_images_per_second": epochs * 10000 / float(kv["eval_s"])}
    result["pytorch"] = torch
    result["train_ratio"] = cnnc["train_samples_per_second"] / torch["train_samples_per_second"]
    result["eval_ratio"] = cnnc["eval_images_per_second"] / torch["eval_images_per_second"]
    print("ratio cnnc / PyTorch: training %.2fx (%.0f vs %.0f samples/s), evaluation %.2fx "
          "(%.0f vs %.0f images/s)" % (result["train_ratio"], cnnc["train_samples_per_second"],
          torch["train_samples_per_second"], result["eval_ratio"],
          cnnc["eval_images_per_second"], torch["eval_images_per_second"]))
json.dump(result, open(sys.argv[2], "w"), indent=1)
print("figures written to", sys.argv[2])
PY
