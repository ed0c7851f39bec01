#!/bin/sh
# seed_run.sh — the seed's whole job, cnnc and then PyTorch (bench/pytorch_reference.py,
# Debian's python3-torch) on the same machine in one run: 50 epochs, 8 replicas x 128, and a
# test pass after every epoch. Prints each side's training time, wall time and final accuracy.
# Usage: bench/seed_run.sh [EPOCHS] [THREADS] [PRECISION]   (defaults: 50, online CPUs, fp32;
# PRECISION is cnnc's --precision, PyTorch runs fp32; PYTORCH_REFERENCE=none skips PyTorch)
# It measures; it asserts nothing. Needs `make` done and, for the PyTorch side, python3-torch.
set -eu
cd "$(dirname "$0")/.."
epochs=${1:-50}
threads=${2:-$(nproc)}
precision=${3:-fp32}
data=/usr/share/datasets/fashion-mnist
reference=${PYTORCH_REFERENCE:-bench/pytorch_reference.py}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== cnnc: $epochs epochs, 8 x 128, $threads threads, $precision ($(date -u '+%Y-%m-%d %H:%M UTC'))"
start=$(date +%s.%N)
build/cnnc train --num-epochs "$epochs" --threads "$threads" --data-dir "$data" --precision "$precision" \
  --result-image "$out/test_result.png" --plot "$out/curves.png" --metrics-file "$out/m.jsonl" \
  > "$out/cnnc.log"
end=$(date +%s.%N)
tail -n 4 "$out/cnnc.log"
cnnc_wall=$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')
cnnc_train=$(awk -F'"train_seconds":' '{split($2, a, ","); s += a[1]} END {printf "%.1f", s}' "$out/m.jsonl")
cnnc_acc=$(tail -n 1 "$out/m.jsonl" | sed 's/.*"test_accuracy":\([0-9.]*\).*/\1/')

if [ -f "$reference" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "== PyTorch reference: $epochs epochs, 8 x 128, $threads threads"
  /usr/bin/python3 "$reference" --epochs "$epochs" --replicas 8 --threads "$threads" \
    --data "$data" > "$out/torch.log"
  tail -n 1 "$out/torch.log"
  last=$(tail -n 1 "$out/torch.log")
  torch_train=$(echo "$last" | sed 's/.*train_s=\([0-9.]*\).*/\1/')
  torch_wall=$(echo "$last" | sed 's/.*wall_s=\([0-9.]*\).*/\1/')
  torch_acc=$(echo "$last" | sed 's/.*test_accuracy=\([0-9.]*\).*/\1/')
else
  echo "== PyTorch reference skipped (needs $reference and Debian's python3-torch)"
  torch_train=- torch_wall=- torch_acc=-
fi

echo "== summary ($epochs epochs, $threads threads)"
printf '%-8s %12s %10s %14s\n' "" "training s" "wall s" "final accuracy"
printf '%-8s %12s %10.1f %13s%%\n' cnnc "$cnnc_train" "$cnnc_wall" "$cnnc_acc"
printf '%-8s %12s %10s %13s%%\n' PyTorch "$torch_train" "$torch_wall" "$torch_acc"
