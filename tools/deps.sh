#!/bin/sh
# deps.sh — installs the Debian packages that cnnc needs for a target (train or test) when run
# as root; otherwise prints the exact apt-get line and stops. It changes nothing when all are
# present. arm64 is the cross build and its emulator: Debian's arm64 libraries through multiarch
# (dpkg --add-architecture arm64). Usage: tools/deps.sh train|test|bench|fuzz|arm64
set -eu
common="gcc make pkg-config zlib1g-dev libcairo2-dev libfreetype-dev libjansson-dev
  libjpeg62-turbo-dev fonts-dejavu-core libopenmpi-dev openmpi-bin"
testing="libcmocka-dev time gzip util-linux bsdutils groff-base python3-torch python3-numpy
  python3-pil iproute2"
case "${1:-train}" in
  train) want="$common dataset-fashion-mnist" ;;
  test)  want="$common dataset-fashion-mnist $testing" ;;
  bench) want="$common dataset-fashion-mnist python3-torch libopenblas-dev" ;;
  fuzz)  want="$common clang libclang-rt-14-dev" ;;
  arm64) want="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user make dataset-fashion-mnist
    fonts-dejavu-core zlib1g-dev:arm64 libcairo2-dev:arm64 libfreetype-dev:arm64
    libjansson-dev:arm64 libjpeg62-turbo-dev:arm64 libcmocka-dev:arm64 pkgconf:arm64" ;;
  *) echo "usage: $0 train|test|bench|fuzz|arm64" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "cnnc: missing Debian packages:$missing" >&2
  case "$missing" in
    *:arm64*) echo "cnnc: first: sudo dpkg --add-architecture arm64 && sudo apt-get update" >&2 ;;
  esac
  echo "cnnc: install them with: sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "cnnc: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
case "$missing" in
  *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64 ;;
esac
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
