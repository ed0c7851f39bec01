#!/bin/sh
# cli_seed_reference.sh — the seed's job computes what it computed when the reference was made:
# a short run (2 epochs of 8 steps, 8 replicas of 32 images, momentum, BatchNorm, every layer
# of the seed's network) with each instruction set this CPU runs, in fp32, and the SHA-256 of
# the saved model's tensor bytes against tests/fixtures/seed_reference.txt. The fp32 kernels use
# only IEEE additions, multiplications and FMAs (and glibc's expf and logf), whose results do not
# depend on who made the CPU; bf16 is left out, since VDPBF16PS's rounding inside a pair is
# not something to tie a reference to across makers. Any
# change to the numbers the seed's job computes fails here; a change meant to move them (a new
# summation order, say) rewrites the file in the same commit, with
#   sh tests/cli_seed_reference.sh BUILD_DIR --write
# and says why (lines of instruction sets this machine lacks are kept). The generic kernels
# compute the same bits on x86-64 and arm64 (`make test-arm64` checks the same line under
# emulation); neon has a line of its own, written under qemu-user, whose arithmetic is IEEE's.
# Bit-identity across threads and processes is cli_basic.sh's and cli_mpi.sh's
# business; this checks identity across builds. Needs Debian's Fashion-MNIST; skipped without it.
# Usage: sh tests/cli_seed_reference.sh BUILD_DIR [--write]
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
export LC_ALL=C
require_cnnc
require_data
make_tmp
reference=$root/tests/fixtures/seed_reference.txt
write=0
[ "${2:-}" = "--write" ] && write=1

# tensor_sum FILE: SHA-256 of a safetensors file's tensor bytes (what follows its header; the
# header's metadata may grow without the numbers changing).
tensor_sum() {
  len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +$((len + 9)) "$1" | sha256sum | cut -d' ' -f1
}

. "$root/tests/lib/isas.sh"
runs=$(isas "$cnnc")
[ -n "$runs" ] || fail "cnnc info does not say which instruction sets this CPU runs"
[ "$write" -eq 1 ] && : >"$reference.new"
for isa in $runs; do
  CNNC_ISA=$isa "$cnnc" train --train-samples 2048 --test-samples 200 --num-epochs 2 \
    --batch-size 32 --threads 2 --result-image none --plot none --save "$tmp/$isa.st" -q \
    >"$tmp/out" 2>"$tmp/err"
  status=$?
  if [ "$status" -ne 0 ]; then
    fail "$isa: exit status $status: $(cat "$tmp/err")"
    continue
  fi
  sum=$(tensor_sum "$tmp/$isa.st")
  if [ "$write" -eq 1 ]; then
    echo "$isa fp32 $sum" >>"$reference.new"
    continue
  fi
  want=$(sed -n "s/^$isa fp32 \([0-9a-f]*\)$/\1/p" "$reference")
  [ -n "$want" ] || { fail "$reference has no line for $isa fp32"; continue; }
  [ "$sum" = "$want" ] || fail "$isa: the seed's job computed other weights than the reference's"
  checked="${checked:-} $isa"
done
if [ "$write" -eq 1 ]; then
  while read -r isa rest; do # keep the lines of the sets this machine does not run
    case " $runs " in *" $isa "*) ;; *) echo "$isa $rest" >>"$reference.new" ;; esac
  done <"$reference"
  mv "$reference.new" "$reference" && echo "$suite: wrote $reference" && cat "$reference"
  exit 0
fi
[ -n "${checked:-}" ] || fail "nothing was compared"
finish "${checked# }"
