#!/bin/sh
# cli_library_exports.sh — the shared library is a dependency's door, not a window into the
# internals: the symbols libcnnc.so exports are exactly the functions and data that
# include/cnnc.h declares with CN_API (no internal function, no test hook), the header carries
# an extern "C" guard and compiles as C++, and the shipped library holds no test hook.
# Usage: sh tests/cli_library_exports.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
make_tmp

version=$(sed -n 's/^#define CN_VERSION "\(.*\)"$/\1/p' "$root/include/cnnc.h")
lib=$build/libcnnc.so.$version
[ -f "$lib" ] || { echo "FAIL: $lib is missing (build it first)"; exit 1; }

# The names the header declares: the identifier before the first '(' or '[' of each CN_API
# declaration (a declaration may run over several lines; its name is on the first).
grep '^CN_API ' "$root/include/cnnc.h" |
  sed 's/[([].*//; s/.*[ *]//' | sort >"$tmp/declared"
declarations=$(grep -c '^CN_API ' "$root/include/cnnc.h")
[ "$(wc -l <"$tmp/declared")" -eq "$declarations" ] || fail "could not read every CN_API name"
grep -qv '^cn_' "$tmp/declared" && fail "a declared name lacks the cn_ prefix: $(grep -v '^cn_' "$tmp/declared")"
[ "$declarations" -ge 50 ] || fail "only $declarations CN_API declarations in cnnc.h"

# What the library exports: defined dynamic symbols of code and data.
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRBVW]$/ {print $3}' | sort >"$tmp/exported"
extra=$(comm -13 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
missing=$(comm -23 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
[ -z "$extra" ] || fail "libcnnc.so exports what cnnc.h does not declare: $extra"
[ -z "$missing" ] || fail "cnnc.h declares what libcnnc.so does not export: $missing"

# No test hook in what ships: the library never reads a CNNC_TEST_ variable.
if strings "$lib" "$build/libcnnc.a" "$cnnc" | grep -q 'CNNC_TEST_'; then
  fail "the shipped library or command holds a test hook: $(strings "$lib" | grep CNNC_TEST_)"
fi

# The header compiles as C++ and links against the library (extern "C" guard).
if command -v g++ >/dev/null; then
  printf '#include <cnnc.h>\nint main() { return cn_isa_name(CN_ISA_GENERIC)[0] == 0; }\n' \
    >"$tmp/use.cc"
  g++ ${CNNC_TEST_CFLAGS:-} -I"$root/include" "$tmp/use.cc" "$build/libcnnc.a" -lm -lpthread \
    $(pkg-config --libs zlib cairo jansson libjpeg 2>/dev/null) -o "$tmp/use" 2>"$tmp/cxx.err" ||
    fail "a C++ program cannot use cnnc.h: $(head -5 "$tmp/cxx.err")"
fi

finish "$(wc -l <"$tmp/declared") symbols, as the header declares"
