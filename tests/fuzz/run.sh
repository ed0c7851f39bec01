#!/bin/sh
# run.sh — `make fuzz`: builds each fuzz target with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer (build-fuzz/), then runs each for SECONDS seconds, starting from
# its committed seed corpus (tests/fuzz/corpus/NAME) and regressions (tests/fuzz/regressions/
# NAME). New interesting inputs collect in build-fuzz/corpus/NAME; a crash, leak, timeout or
# out-of-memory is written to build-fuzz/findings/ and fails the run. Copy a finding into
# tests/fuzz/regressions/NAME once it is fixed, so `make test` replays it for good.
# Usage: tests/fuzz/run.sh SECONDS NAME...
set -eu
seconds=$1
shift
out=build-fuzz
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all"
# MPI=0: the command's objects without Open MPI, which the fuzz targets never start.
make --no-print-directory -j"$(nproc)" BUILD=$out CC=clang MPI=0 \
  CFLAGS="-O1 -g -fno-omit-frame-pointer $sanitize -fsanitize=fuzzer-no-link" $out/libcnnc.a \
  $(ls cli/*.c | grep -v '^cli/main\.c$' | sed "s|^\(.*\)\.c\$|$out/\1.o|")
libs="$(pkg-config --libs zlib cairo cairo-ft freetype2 jansson libjpeg) -lpthread -lm"
mkdir -p "$out/findings" "$out/tmp"
export TMPDIR="$out/tmp" # where the targets write each input as a file
failed=""
for name in "$@"; do
  echo "== fuzz_$name for $seconds s"
  # shellcheck disable=SC2086
  clang -std=c11 -O1 -g -fno-omit-frame-pointer $sanitize -fsanitize=fuzzer -Iinclude \
    -Isrc -Icli -Itests/fuzz -D_GNU_SOURCE -o "$out/fuzz_$name" "tests/fuzz/fuzz_$name.c" \
    $([ "$name" = cli ] && ls "$out"/cli/*.o | grep -v /main.o) "$out/libcnnc.a" $libs
  mkdir -p "$out/corpus/$name"
  if ! ASAN_OPTIONS="detect_leaks=1" \
      "$out/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$out/findings/$name-" \
      "$out/corpus/$name" "tests/fuzz/corpus/$name" "tests/fuzz/regressions/$name" \
      > "$out/fuzz_$name.log" 2>&1; then
    tail -n 40 "$out/fuzz_$name.log"
    failed="$failed $name"
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$out/fuzz_$name.log" || true
done
if [ -n "$failed" ]; then
  echo "fuzz: findings in:$failed (inputs in $out/findings/)"
  exit 1
fi
echo "fuzz: no findings"
