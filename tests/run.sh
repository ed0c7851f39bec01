#!/bin/sh
# run.sh — runs every test program in BUILD/tests and the command-line checks, then prints one
# closing line "tests: N passed, N failed". The programs that exercise the compute kernels run
# once per instruction set (CNNC_ISA) that this build and this CPU run, as `cnnc info` lists
# them, and those of the bf16 products once more per other set of bf16 kernels (CNNC_BF16).
# Exits non-zero when any failed.
set -u
build=${1:-build}
kernel_tests="test_gemm test_layers test_model_steps test_model_gradients test_model_random test_trainer"
passed=0
failed=0
. "$(dirname "$0")/lib/isas.sh"
isas=$(isas "$build/cnnc")
[ -n "$isas" ] || { echo "FAILED: $build/cnnc info does not list the instruction sets"; exit 1; }
# The bf16 products' kernels other than the default one (AVX512_BF16's beside AMX's) get the
# tests of those products too.
bf16_tests="test_gemm test_layers test_model_random"
bf16_others=$("$build/cnnc" info --threads 1 2>/dev/null |
  sed -n 's/^BF16: *\([a-z0-9]*\) (this CPU runs: \([a-z0-9 ]*\);.*/\2 -\1/p' |
  awk '{ d = substr($NF, 2); for (i = 1; i < NF; i++) if ($i != d) printf "%s ", $i }')

run() { # run LABEL COMMAND...
  label=$1
  shift
  echo "== $label"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $label"; fi
}

for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  case " $kernel_tests " in
    *" $name "*)
      for isa in $isas; do run "$t (CNNC_ISA=$isa)" env CNNC_ISA=$isa "$t"; done
      case " $bf16_tests " in
        *" $name "*)
          for k in $bf16_others; do run "$t (CNNC_BF16=$k)" env CNNC_BF16=$k "$t"; done ;;
      esac ;;
    *) run "$t" "$t" ;;
  esac
done
for r in "$build"/fuzz/replay_*; do
  [ -x "$r" ] || continue
  name=${r##*/replay_}
  run "$r (seed and regression corpus)" "$r" "tests/fuzz/corpus/$name" "tests/fuzz/regressions/$name"
done
for s in tests/cli_*.sh; do
  [ -f "$s" ] || continue
  run "$s" sh "$s" "$build"
done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
