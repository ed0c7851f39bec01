#!/bin/sh
# run.sh — `make bench`: cnnc's benchmark (build/bench) and the PyTorch reference
# (bench/pytorch_reference.py with Debian's python3-torch) on the same machine, same threads,
# same job (8 replicas x 128), each after one warm-up epoch that is not counted (PyTorch's
# evaluation figure does include its first test pass); cnnc's training is timed over SEED_EPOCHS
# (10) times as many epochs as PyTorch's, so that the two timed windows last about as long (4 to
# 8 s: one epoch of cnnc is under a second) and see the same minutes of the machine. These
# machines change speed from one minute to the next, so the two alternate for several rounds
# and the report gives the median of the per-round ratios (and the ratio of each side's best
# round); every round's figures go to build/bench.json with cnnc's per-layer breakdown and
# GFLOP/s against the measured peak. The claim is the ratio. Then the same for
# models/cifar10.model (3 x 32 x 32 inputs, 32-64 channels of 3 x 3 convolutions with padding)
# on generated samples (CIFAR_SAMPLES of them, one warm-up epoch, then CIFAR_EPOCHS (8) timed
# for cnnc and CIFAR_TORCH_EPOCHS (2) for PyTorch, so that the two timed windows are about as
# long, 14 to 20 s, and see the same minutes of the machine: one epoch of PyTorch's alone had
# spread by a quarter within a run), training only: the speed on shapes that are not the seed's.
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
cifar=$(dirname "$0")/../models/cifar10.model
cifar_samples=${CIFAR_SAMPLES:-8192}
cifar_epochs=${CIFAR_EPOCHS:-8}
cifar_torch_epochs=${CIFAR_TORCH_EPOCHS:-2}
seed_epochs=$((epochs * ${SEED_EPOCHS:-10}))
have_torch=0
if [ -f "$reference" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then have_torch=1; fi

round=1
while [ "$round" -le "$rounds" ]; do
  echo "== round $round of $rounds"
  "$build/bench" --threads "$threads" --epochs "$seed_epochs" --data-dir "$data" \
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
round=1
while [ "$round" -le "$rounds" ]; do
  echo "== cifar10.model, round $round of $rounds"
  "$build/bench" --threads "$threads" --epochs "$cifar_epochs" --model "$cifar" \
    --random-data "$cifar_samples" \
    --precision "$precision" --json "$build/bench-cifar-cnnc-$round.json" \
    > "$build/bench-cifar-cnnc-$round.txt"
  sed -n 2p "$build/bench-cifar-cnnc-$round.txt"
  if [ "$have_torch" -eq 1 ]; then
    /usr/bin/python3 "$reference" --model "$cifar" --random-data 3,32,32 \
      --epochs $((cifar_torch_epochs + 1)) --train-samples "$cifar_samples" --test-samples 1024 \
      --replicas 8 --threads "$threads" \
      > "$build/bench-cifar-torch-$round.txt"
    echo "  PyTorch: $(tail -n 1 "$build/bench-cifar-torch-$round.txt")"
  fi
  round=$((round + 1))
done
echo "== cnnc, last round"
cat "$build/bench-cnnc-$rounds.txt"
cat "$build/bench-cifar-cnnc-$rounds.txt"
[ "$have_torch" -eq 1 ] ||
  echo "PyTorch reference skipped: needs $reference and Debian's python3-torch"

# The CPU as `cnnc info` names it: "model name" with its family and model numbers.
CNNC_CPU=$("$build/cnnc" info | sed -n 's/^CPU: *//p') \
  /usr/bin/python3 - "$build" "$rounds" "$epochs" "$have_torch" "$out" <<'PY'
import json, os, statistics, sys, time
build, rounds, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
have_torch, out = sys.argv[4] == "1", sys.argv[5]
cnnc = [json.load(open(f"{build}/bench-cnnc-{r}.json")) for r in range(1, rounds + 1)]
cifar = [json.load(open(f"{build}/bench-cifar-cnnc-{r}.json")) for r in range(1, rounds + 1)]
date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
cpu = os.environ.get("CNNC_CPU") or "unknown"
result = {"date": date, "cpu": cpu, "rounds": rounds, "cnnc": cnnc, "cifar10_cnnc": cifar}
# The settings that hold either side to other kernels than its best (docs/speed.md, "Both sides
# held to 256-bit vectors"), recorded where they were set.
held = {k: os.environ[k] for k in ("CNNC_ISA", "CNNC_BF16", "ONEDNN_MAX_CPU_ISA",
                                   "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY") if k in os.environ}
if held:
    result["environment"] = held
    print("kernels held by:", " ".join("%s=%s" % kv for kv in sorted(held.items())))


def epoch_rate(path):
    """PyTorch's training samples/s over its epochs after the warm-up one."""
    lines = open(path).read().splitlines()
    timed = [dict(p.split("=", 1) for p in l.split()[2:])
             for l in [l for l in lines if l.startswith("epoch ")][1:]]
    return statistics.mean(float(e["samples_per_s"]) for e in timed)
if have_torch:
    torch = []
    for r in range(1, rounds + 1):
        path = f"{build}/bench-torch-{r}.txt"
        last = dict(p.split("=", 1) for p in open(path).read().splitlines()[-1].split())
        torch.append({"train_samples_per_second": epoch_rate(path),
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
    cifar_torch = [epoch_rate(f"{build}/bench-cifar-torch-{r}.txt") for r in range(1, rounds + 1)]
    result["cifar10_pytorch_train_samples_per_second"] = cifar_torch
    ratios = [c["train_samples_per_second"] / t for c, t in zip(cifar, cifar_torch)]
    result["cifar10_training_ratio_median"] = statistics.median(ratios)
    print("cifar10.model training: cnnc / PyTorch median %.2fx over %d rounds (%s; cnnc %s, "
          "PyTorch %s samples/s)" % (statistics.median(ratios), rounds,
          " ".join("%.2f" % x for x in ratios),
          " ".join("%.0f" % c["train_samples_per_second"] for c in cifar),
          " ".join("%.0f" % t for t in cifar_torch)))
print("CPU:", cpu)
json.dump(result, open(out, "w"), indent=1)
print("figures written to", out)
PY
