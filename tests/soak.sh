#!/bin/sh
# soak.sh — `make soak`: MODELS random models drawn from SEED (tools/gen_fixtures.py --soak,
# into BUILD/soak/), each against PyTorch in float64, its fused passes against the layer-by-layer
# ones and its weights across threads and processes (test_model_random), once per instruction set
# this build and this CPU run. Not part of `make test`: the suite keeps its 32 fixed models.
# Usage: tests/soak.sh BUILD MODELS SEED
set -u
build=$1 models=$2 seed=$3
out=$build/soak/seed-$seed
mkdir -p "$out" || exit 1
/usr/bin/python3 tools/gen_fixtures.py --only random_models --out "$out" \
  --random-models "$models" --random-seed "$seed" --soak || exit 1
. "$(dirname "$0")/lib/isas.sh"
isas=$(isas "$build/cnnc")
[ -n "$isas" ] || { echo "soak: $build/cnnc info does not list the instruction sets" >&2; exit 1; }
failed=0
for isa in $isas; do
  echo "== test_model_random on $out (CNNC_ISA=$isa)"
  CNNC_ISA=$isa CNNC_FIXTURES=$out "$build/tests/test_model_random" || { failed=1; echo "FAILED: CNNC_ISA=$isa"; }
done
[ $failed = 0 ] && echo "soak: seed $seed passed on $isas" || echo "soak: seed $seed FAILED"
exit $failed
