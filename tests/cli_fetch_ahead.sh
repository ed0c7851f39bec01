#!/bin/sh
# cli_fetch_ahead.sh — the fetches ahead that BatchNorm's passes ask for are in the compiled
# code. A compiler may take a function that does nothing but prefetch for one without effects
# and drop the calls to it: GCC 12 did so with batchnorm.c's fetch_plane, so that its sweeps
# and the planes it makes a sample at a time never fetched ahead. Checks, with objdump, that
# prefetch instructions stand in at least three of batchnorm.o's functions (its sweeps,
# make_output and make_input_gradient, or whatever the compiler inlined them into).
# x86-64 objects only (prefetcht0 and its kin); elsewhere it says so and passes.
# Usage: sh tests/cli_fetch_ahead.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"

object=$build/src/layers/batchnorm.o
[ -f "$object" ] || { fail "$object is missing (build it first)"; finish; }
command -v objdump >/dev/null || { fail "objdump is missing (Debian's binutils)"; finish; }
if ! objdump -f "$object" | grep -q 'x86-64'; then
  finish "$object is not x86-64 code: not checked"
fi
functions=$(objdump -d --no-show-raw-insn "$object" |
  awk '/^[0-9a-f]+ <.*>:$/ { f = $2 } /\tprefetch/ { print f }' | sort -u | tr -d '<>:' |
  tr '\n' ' ')
count=$(echo "$functions" | wc -w)
[ "$count" -ge 3 ] ||
  fail "prefetch instructions in $count of batchnorm.o's functions, expected 3 or more: $functions"
finish "prefetches in $count functions of batchnorm.o: $functions"
