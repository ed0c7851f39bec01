#!/bin/sh
# run.sh — runs every test program in BUILD/tests and the command-line checks, then prints one
# closing line "tests: N passed, N failed". Exits non-zero when any failed.
set -u
build=${1:-build}
passed=0
failed=0
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  echo "== $t"
  if "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $t"; fi
done
for s in tests/cli_*.sh; do
  [ -f "$s" ] || continue
  echo "== $s"
  if sh "$s" "$build"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $s"; fi
done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
