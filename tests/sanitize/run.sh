#!/bin/sh
# run.sh — `make test-sanitize`: the whole test suite built with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/), then the threaded tests built with ThreadSanitizer
# (build-tsan/). Any report fails the run: the sanitizers exit with status 86, which no test
# expects. Usage: tests/sanitize/run.sh (from the project root; make builds what it needs).
set -eu
export ASAN_OPTIONS="exitcode=86:detect_leaks=1:abort_on_error=0:strict_string_checks=1"
export UBSAN_OPTIONS="exitcode=86:halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="exitcode=86"
export TSAN_OPTIONS="exitcode=86:halt_on_error=1:second_deadlock_stack=1"
common="-O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all"
jobs=$(nproc)

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: every test"
export CNNC_TEST_CFLAGS="-fsanitize=address,undefined" # programs built against the library
make --no-print-directory -j"$jobs" BUILD=build-asan \
  CFLAGS="$common -fsanitize=address,undefined" check

echo "== ThreadSanitizer: the threaded tests"
make --no-print-directory -j"$jobs" BUILD=build-tsan CFLAGS="$common -fsanitize=thread" \
  build-tsan/tests/test_trainer build-tsan/tests/test_model_steps build-tsan/tests/test_dist \
  build-tsan/tests/test_model_random build-tsan/tests/test_folder
for t in test_trainer test_model_steps test_dist test_model_random test_folder; do
  echo "== build-tsan/tests/$t"
  build-tsan/tests/$t
done
echo "sanitizers: clean"
