# tests/lib/isas.sh — isas CNNC: the instruction sets that the cnnc command CNNC was built with
# and this CPU runs, as its `info` lists them ("generic avx2 avx512"), or nothing when it does
# not say. Sourced by tests/run.sh, tests/soak.sh and tests/cli_seed_reference.sh; it runs
# nothing by itself.
# shellcheck shell=sh
isas() {
  "$1" info --threads 1 2>/dev/null | sed -n 's/^SIMD: .*this CPU runs: \([a-z0-9 ]*\);.*/\1/p'
}
