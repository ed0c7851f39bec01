#!/bin/sh
# cli_info.sh — `cnnc info` (CPU model, platform, cores, SIMD path, a measured FMA peak, MPI, where the
# dataset is) and the help of every command: each flag listed with its default, --version in
# the form "cnnc X.Y.Z" matching the man page. Does not judge the peak's value beyond > 0.
# Usage: sh tests/cli_info.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp

# ---------------------------------------------------------------- cnnc info
run info --threads 2
[ "$status" -eq 0 ] || fail "cnnc info: exit status $status: $(cat "$tmp/err")"
# The build's processor family, and the CPU as that family's /proc/cpuinfo names it: x86's
# "model name"; under an emulator (make test-arm64) the file describes the host, and says so.
grep -qE "^Platform:  (x86-64|arm64|portable) build, running on [a-z0-9_]+$" "$tmp/out" ||
  fail "info lacks the platform: $(grep Platform "$tmp/out")"
case $(sed -n 's/^Platform:  \([a-z0-9-]*\) build.*/\1/p' "$tmp/out") in
  x86-64)
    model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    family=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    number=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    [ -z "$family" ] || [ -z "$number" ] || model="$model (family $family, model $number)"
    [ -z "$model" ] || grep -qxF "CPU:       $model" "$tmp/out" ||
      fail "info lacks the CPU model '$model': $(grep CPU: "$tmp/out")"
    simd="generic|avx2|avx512" ;;
  arm64)
    if grep -q "^CPU implementer" /proc/cpuinfo; then
      grep -qE "^CPU:       (Arm|Apple|arm64 implementer)" "$tmp/out" || fail "info lacks the arm64 core"
    else
      grep -qx "CPU:       unknown (/proc/cpuinfo describes no arm64 processor)" "$tmp/out" ||
        fail "info names a CPU that /proc/cpuinfo does not: $(grep CPU: "$tmp/out")"
    fi
    simd="generic|neon" ;;
  *) simd="generic" ;;
esac
grep -q "^Cores:     $(getconf _NPROCESSORS_ONLN) online" "$tmp/out" || fail "info lacks the cores"
grep -qE "^SIMD:      ($simd) \(this CPU runs: generic" "$tmp/out" ||
  fail "info lacks the SIMD path, or names one of another processor: $(grep SIMD "$tmp/out")"
grep -qE "^FMA peak:  [0-9]+\.[0-9] GFLOP/s on 1 thread, [0-9]+\.[0-9] GFLOP/s on 2 threads" \
  "$tmp/out" || fail "info lacks the FMA peak"
grep -qE "^FMA peak:  0\.0 " "$tmp/out" && fail "info measured a zero peak"
grep -qE "^MPI:       (yes, Open MPI|no \(built without MPI)" "$tmp/out" ||
  fail "info lacks whether MPI is built in"
if [ -d "$data" ]; then
  grep -q "^Dataset:   $data (default): idx, 60000 training and 10000 test images of 1x28x28 in 10 classes$" "$tmp/out" ||
    fail "info does not find the default dataset: $(grep Dataset "$tmp/out")"
fi
env CNNC_ISA=generic "$cnnc" info --threads 1 --data-dir "$tmp/none" >"$tmp/out" 2>"$tmp/err"
status=$?
[ "$status" -eq 0 ] || fail "cnnc info with a missing --data-dir: exit status $status"
grep -q "^SIMD:      generic (.*chosen by CNNC_ISA=generic)" "$tmp/out" ||
  fail "info ignores CNNC_ISA: $(grep SIMD "$tmp/out")"
grep -qE "^BF16:      ([a-z0-9]+ \(this CPU runs: [a-z0-9 ]+; the best|none \(this CPU lacks)" "$tmp/out" ||
  fail "info does not say which bf16 kernels run: $(grep BF16 "$tmp/out")"
grep -q "^Dataset:   not usable in $tmp/none (--data-dir): " "$tmp/out" ||
  fail "info does not say the dataset is missing: $(grep Dataset "$tmp/out")"
run info --threads 0
[ "$status" -eq 2 ] && grep -q -e "--threads" "$tmp/err" || fail "info --threads 0: $status"
run info extra
[ "$status" -eq 2 ] || fail "info extra: exit status $status"

# ---------------------------------------------------------------- help: every flag, a default
# flags_of HELP_FILE: the long flags a help text lists.
flags_of() { grep -oE '^  (-[a-z], )?--[a-z-]+' "$1" | sed 's/.*--/--/'; }
for command in train eval plot info summary; do
  run "$command" --help
  [ "$status" -eq 0 ] || fail "cnnc $command --help: exit status $status"
  cp "$tmp/out" "$tmp/help-$command"
  n=$(flags_of "$tmp/help-$command" | wc -l)
  [ "$n" -ge 3 ] || fail "cnnc $command --help lists only $n flags"
  # Each flag's entry, up to the next flag, names its default (--help excepted).
  for flag in $(flags_of "$tmp/help-$command"); do
    [ "$flag" = "--help" ] && continue
    awk -v f="$flag" '
      /^  (-[a-z], )?--[a-z-]+/ { inside = index($0, f " ") || $0 ~ (f "$") }
      inside && /default: |required/ { found = 1 }
      END { exit !found }' "$tmp/help-$command" ||
      fail "cnnc $command --help: $flag has no default"
  done
done
for flag in --quiet --verbose --plot; do
  grep -q -e "$flag" "$tmp/help-train" || fail "cnnc train --help lacks $flag"
done
grep -q -e "--confusion FILE" "$tmp/help-eval" || fail "cnnc eval --help lacks --confusion"
run --help
for command in train eval plot info summary; do
  grep -q "^  $command " "$tmp/out" || fail "cnnc --help does not list the command $command"
done
run --version
version=$(sed -n 's/^#define CN_VERSION "\(.*\)"$/\1/p' "$root/include/cnnc.h")
[ "$(cat "$tmp/out")" = "cnnc $version" ] || fail "cnnc --version says '$(cat "$tmp/out")'"
grep -q "\"cnnc $version\"" "$root/man/cnnc.1" || fail "man/cnnc.1 is not for version $version"
for flag in $(flags_of "$tmp/help-train") $(flags_of "$tmp/help-eval") \
  $(flags_of "$tmp/help-plot") $(flags_of "$tmp/help-info") $(flags_of "$tmp/help-summary"); do
  [ "$flag" = "--help" ] && continue
  grep -q -e "$(echo "$flag" | sed 's/-/\\\\-/g')" "$root/man/cnnc.1" ||
    fail "man/cnnc.1 does not document $flag"
done

finish
