#!/bin/sh
# cli_install.sh — the install round trip in a temporary prefix: `make install PREFIX=...` puts
# exactly the command, static and shared library (with its soname link), header, pkg-config file
# and man page there; the example is built against that copy with `pkg-config --cflags --libs
# cnnc` and started each way docs/library.md ("cannot open shared object file") describes:
# without an rpath it fails to start, with LD_LIBRARY_PATH, with an rpath and linked statically
# it runs; make runs ldconfig only for /usr/lib or /usr/local/lib, as root, without DESTDIR;
# `make uninstall` leaves no file behind; DESTDIR stages the same tree under another root. It
# never touches the system's folders (ldconfig is replaced by a stand-in that only records).
# Usage: sh tests/cli_install.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
make_tmp
cd "$tmp" || exit 1

# make in the source folder, as a fresh top-level make (not part of the caller's job server).
run_make() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" BUILD="$build" "$@" \
    >"$tmp/make.log" 2>&1
}

version=$(sed -n 's/^#define CN_VERSION "\(.*\)"$/\1/p' "$root/include/cnnc.h")
major=${version%%.*}
prefix=$tmp/prefix
expected="./bin/cnnc
./include/cnnc.h
./lib/libcnnc.a
./lib/libcnnc.so
./lib/libcnnc.so.$major
./lib/libcnnc.so.$version
./lib/pkgconfig/cnnc.pc
./share/man/man1/cnnc.1"

files_under() { (cd "$1" 2>/dev/null && find . ! -type d | sort); }

# ---------------------------------------------------------------- install
run_make install PREFIX="$prefix" || fail "make install failed: $(cat "$tmp/make.log")"
[ "$(files_under "$prefix")" = "$expected" ] ||
  fail "make install put these files: $(files_under "$prefix" | tr '\n' ' ')"
[ "$(readlink "$prefix/lib/libcnnc.so")" = "libcnnc.so.$major" ] ||
  fail "libcnnc.so does not point at libcnnc.so.$major"
[ "$(readlink "$prefix/lib/libcnnc.so.$major")" = "libcnnc.so.$version" ] ||
  fail "libcnnc.so.$major does not point at libcnnc.so.$version"
readelf -d "$prefix/lib/libcnnc.so.$version" | grep -q "SONAME.*\[libcnnc.so.$major\]" ||
  fail "the shared library's soname is not libcnnc.so.$major"
[ "$("$prefix/bin/cnnc" --version)" = "cnnc $version" ] || fail "the installed cnnc --version"
cmp -s "$root/include/cnnc.h" "$prefix/include/cnnc.h" || fail "the installed header differs"

# The man page: formats without a warning, and man finds it under the prefix.
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$prefix/share/man/man1/cnnc.1" 2>&1)
  [ -z "$warnings" ] || fail "groff warns about cnnc.1: $warnings"
fi
if command -v man >/dev/null; then
  found=$(MANPATH="$prefix/share/man" man -w cnnc 2>/dev/null)
  [ "$found" = "$prefix/share/man/man1/cnnc.1" ] || fail "man -w cnnc finds '$found'"
  MANWIDTH=80 man -l "$prefix/share/man/man1/cnnc.1" 2>"$tmp/man.err" | grep -q "cnnc train" ||
    fail "man -l cnnc.1 does not show 'cnnc train'"
  [ -s "$tmp/man.err" ] && fail "man -l cnnc.1 complains: $(cat "$tmp/man.err")"
fi

# run_example EX [ENV...]: runs ./EX (with the environment assignments given) on the dataset, or
# on a missing folder without it; fails unless it reports its accuracy (or names the folder).
run_example() {
  ex=$1
  shift
  if [ -d "$data" ]; then
    env "$@" "./$ex" "$data" >"$tmp/$ex.out" 2>&1 ||
      fail "$ex $*: exit status $?: $(cat "$tmp/$ex.out")"
    grep -qE "^test loss [0-9.]+, accuracy [0-9.]+% on 1000 images" "$tmp/$ex.out" ||
      fail "$ex $*: does not report its accuracy: $(cat "$tmp/$ex.out")"
  else
    env "$@" "./$ex" "$tmp/no-data" >"$tmp/$ex.out" 2>&1
    [ $? -eq 1 ] && grep -q "no-data" "$tmp/$ex.out" || fail "$ex $*: $(cat "$tmp/$ex.out")"
  fi
}

# ---------------------------------------------------------------- the example, via pkg-config
PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH
[ "$(pkg-config --modversion cnnc)" = "$version" ] || fail "pkg-config --modversion cnnc"
cp "$root/examples/train_mnist.c" "$tmp/example.c"
# CNNC_TEST_CFLAGS: what the library was built with that the example must share (the sanitizer
# run sets it); empty otherwise.
strict="-std=c11 -Wall -Wextra -Wpedantic -Werror -O2 ${CNNC_TEST_CFLAGS:-}"
# shellcheck disable=SC2046,SC2086
cc $strict $(pkg-config --cflags cnnc) example.c -o ex-shared $(pkg-config --libs cnnc) \
  -Wl,-rpath,"$prefix/lib" 2>"$tmp/cc.err" || fail "shared build failed: $(cat "$tmp/cc.err")"
# shellcheck disable=SC2046,SC2086
cc $strict $(pkg-config --cflags cnnc) example.c -o ex-norpath $(pkg-config --libs cnnc) \
  2>"$tmp/cc.err" || fail "shared build without rpath failed: $(cat "$tmp/cc.err")"
# Static: the archive by name, the dependencies from Libs.private and Requires.private.
# shellcheck disable=SC2046,SC2086
cc $strict $(pkg-config --cflags cnnc) example.c -o ex-static \
  $(pkg-config --static --libs cnnc | sed 's/-lcnnc\b/-l:libcnnc.a/') 2>"$tmp/cc.err" ||
  fail "static build failed: $(cat "$tmp/cc.err")"
readelf -d ex-shared | grep -q "NEEDED.*\[libcnnc.so.$major\]" || fail "ex-shared lacks libcnnc"
ldd ex-shared | grep -q "libcnnc.so.$major => $prefix/lib/libcnnc.so.$major" ||
  fail "ex-shared does not load the installed library: $(ldd ex-shared | grep cnnc)"
readelf -d ex-static | grep -q "libcnnc" && fail "ex-static still needs the shared library"
run_example ex-shared
run_example ex-static
# Without an rpath, under a prefix the run-time linker does not know: the program fails to
# start, with the message docs/library.md quotes, unless LD_LIBRARY_PATH names the folder.
# Checked only where the system has no libcnnc.so of that soname of its own (say, one installed
# in /usr/local/lib): ldd must find none for this program.
elsewhere=$(env -u LD_LIBRARY_PATH ldd ex-norpath |
  sed -n "s|.*libcnnc.so.$major => \(/[^ ]*\).*|\1|p")
if [ -n "$elsewhere" ]; then
  echo "$suite: skipped the starts without the prefix's library: the system has $elsewhere"
else
  env -u LD_LIBRARY_PATH ./ex-norpath "$tmp/no-data" >"$tmp/norpath.out" 2>&1
  st=$?
  [ $st -eq 127 ] || fail "ex-norpath without LD_LIBRARY_PATH: exit status $st, expected 127"
  grep -q "libcnnc.so.$major: cannot open shared object file" "$tmp/norpath.out" ||
    fail "ex-norpath does not say it cannot find the library: $(cat "$tmp/norpath.out")"
fi
run_example ex-norpath LD_LIBRARY_PATH="$prefix/lib"

# ---------------------------------------------------------------- uninstall
run_make uninstall PREFIX="$prefix" || fail "make uninstall failed: $(cat "$tmp/make.log")"
left=$(files_under "$prefix")
[ -z "$left" ] || fail "make uninstall left: $(echo "$left" | tr '\n' ' ')"
if [ -z "$elsewhere" ]; then
  env -u LD_LIBRARY_PATH ./ex-shared "$tmp/no-data" >/dev/null 2>&1
  [ $? -eq 127 ] || fail "ex-shared still starts without the installed library"
fi
./ex-static "$tmp/no-data" >/dev/null 2>&1
[ $? -eq 1 ] || fail "ex-static needs the uninstalled library"

# ---------------------------------------------------------------- ldconfig
# make install refreshes the run-time linker's cache for /usr/lib and /usr/local/lib only, as
# root and without DESTDIR (docs/library.md). The Makefile's own rule is evaluated for each case,
# installing nothing, with a stand-in ldconfig first on PATH that only records that it ran.
mkdir -p "$tmp/fakebin"
printf '#!/bin/sh\necho "$*" >>"%s"\n' "$tmp/ldconfig.calls" >"$tmp/fakebin/ldconfig"
chmod +x "$tmp/fakebin/ldconfig"
# ldconfig_runs MAKE_ARGS...: true when make's ldconfig rule, with these settings, calls ldconfig.
ldconfig_runs() {
  rm -f "$tmp/ldconfig.calls"
  # shellcheck disable=SC2016 # $(LDCONFIG) is make's, not the shell's
  (PATH="$tmp/fakebin:$PATH" && export PATH &&
    run_make --eval 'ldconfig-rule: ; @$(LDCONFIG)' ldconfig-rule "$@") ||
    fail "make's ldconfig rule failed with $*: $(cat "$tmp/make.log")"
  [ -f "$tmp/ldconfig.calls" ]
}
if [ "$(id -u)" -eq 0 ]; then
  ldconfig_runs PREFIX=/usr/local || fail "make install PREFIX=/usr/local would not run ldconfig"
  ldconfig_runs PREFIX=/usr || fail "make install PREFIX=/usr would not run ldconfig"
  ldconfig_runs PREFIX="$prefix" && fail "make install PREFIX=$prefix would run ldconfig"
  ldconfig_runs PREFIX=/usr/local DESTDIR="$tmp/stage" &&
    fail "make install DESTDIR=... PREFIX=/usr/local would run ldconfig"
else
  echo "$suite: skipped the ldconfig rule: it runs only as root"
fi

# ---------------------------------------------------------------- DESTDIR staging
stage=$tmp/stage
staged_prefix=/opt/cnnc-staging-test-$$
run_make install DESTDIR="$stage" PREFIX="$staged_prefix" ||
  fail "make install DESTDIR failed: $(cat "$tmp/make.log")"
[ "$(files_under "$stage$staged_prefix")" = "$expected" ] || fail "DESTDIR staged the wrong files"
grep -qx "prefix=$staged_prefix" "$stage$staged_prefix/lib/pkgconfig/cnnc.pc" ||
  fail "the staged cnnc.pc does not name the final prefix $staged_prefix"
[ -e "$staged_prefix" ] && fail "DESTDIR install wrote to $staged_prefix itself"
run_make uninstall DESTDIR="$stage" PREFIX="$staged_prefix" || fail "make uninstall DESTDIR"
[ -z "$(files_under "$stage")" ] || fail "make uninstall DESTDIR left files"

finish
