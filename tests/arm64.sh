#!/bin/sh
# arm64.sh — `make test-arm64`: an arm64 build of cnnc (BUILD_DIR, made with Debian's
# aarch64-linux-gnu-gcc) tested on any Linux host under qemu-user, which runs arm64 programs
# instruction by instruction with IEEE arithmetic, so their results are those of a real arm64
# CPU (their speed is not: about 70 times slower here). Runs:
#   - every unit test with the NEON kernels, and the kernel tests (test_gemm, test_layers,
#     test_model_steps) with the portable ones too: the parity of both paths against the same
#     references as on x86-64, and weights bit-identical across threads and across processes
#     (test_trainer; test_dist joins ranks with an in-memory communicator);
#   - the command-line checks that matter on another processor: cli_info (what it prints on
#     arm64), cli_seed_reference (the seed's job against the reference sums, where the generic
#     kernels must give x86-64's bits and neon its own line), cli_model_layers (a model with
#     dropout, padding and average pooling saves the same bytes for --threads 1, 2, 3, a
#     resumed run and `mpirun -np 2`: arm64 processes under x86-64's mpirun), cli_basic,
#     cli_bad_input and cli_predict.
# Left out, for time or because emulation cannot do them: test_trainer with the generic kernels
# (three minutes; the same engine as neon's run), the other command-line checks (files, signals,
# PyTorch round trips, datasets: processor-independent code that `make test` covers natively;
# cli_hostile_files gives cnnc 5 s where emulation needs more). Prints each item's seconds and a closing line;
# exits non-zero when any failed.
# Usage: sh tests/arm64.sh BUILD_DIR
set -u
build=$(cd "${1:-build-arm64}" 2>/dev/null && pwd) || { echo "FAIL: no build folder ${1:-}"; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
emulator=${CNNC_EMULATOR:-qemu-aarch64}
command -v "$emulator" >/dev/null || { echo "FAIL: $emulator is missing (Debian's qemu-user)"; exit 1; }
passed=0
failed=0
start=$(date +%s)

run() { # run LABEL LOG COMMAND...: the command's output goes to LOG, shown when it fails
  label=$1
  log=$2
  shift 2
  t0=$(date +%s)
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "== $label: ok ($(($(date +%s) - t0)) s)"
  else
    failed=$((failed + 1))
    tail -n 30 "$log"
    echo "== $label: FAILED ($(($(date +%s) - t0)) s)"
  fi
}

# The command-line checks find cnnc in their BUILD_DIR: there, a script that runs it emulated,
# with the arm64 Open MPI unpacked in BUILD_DIR/openmpi/root (tools/arm64_openmpi.sh) as the
# emulator's first place to look for files, so that the libraries and plugins Open MPI opens
# by their installed paths are found there. mpirun, x86-64's, starts that script as its ranks.
mkdir -p "$build/emulated"
printf '#!/bin/sh\nexec %s -L "%s" "%s/cnnc" "$@"\n' "$emulator" "$build/openmpi/root" "$build" \
  >"$build/emulated/cnnc"
chmod +x "$build/emulated/cnnc"
info=$("$build/emulated/cnnc" info --threads 1 2>&1)
if ! echo "$info" | grep -q "^Platform:  arm64 build, running on aarch64$"; then
  echo "$info"
  echo "FAIL: $build/cnnc is not an arm64 build running emulated"
  exit 1
fi
if ! echo "$info" | grep -q "^MPI: *yes" || ! command -v mpirun >/dev/null; then
  echo "$info"
  echo "FAIL: the arm64 cnnc is built without MPI, or mpirun is missing (openmpi-bin)"
  exit 1
fi

for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  isas=neon
  case $name in test_gemm | test_layers | test_model_steps | test_model_gradients | test_model_random) isas="neon generic" ;; esac
  for isa in $isas; do
    run "$name (CNNC_ISA=$isa)" "$build/$name-$isa.log" env CNNC_ISA=$isa "$emulator" "$t"
  done
done
for s in info seed_reference model_layers basic bad_input predict; do
  run "cli_$s.sh" "$build/cli_$s.log" sh "$root/tests/cli_$s.sh" "$build/emulated"
done
echo "arm64 tests under $emulator: $passed passed, $failed failed, $(($(date +%s) - start)) s"
[ "$failed" -eq 0 ]
