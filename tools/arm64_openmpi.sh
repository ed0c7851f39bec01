#!/bin/sh
# arm64_openmpi.sh — Debian's Open MPI for arm64, unpacked into DIR/root for `make test-arm64`.
# It cannot be installed beside x86-64's (libpmix2 and openmpi-bin are not Multi-Arch: same), so
# its packages are fetched with `apt-get download` (no root needed) and unpacked with dpkg -x:
# headers and libraries to build an arm64 cnnc with MPI, and the libraries its processes load
# under qemu-user while x86-64's mpirun starts them. It installs nothing and changes nothing
# outside DIR, and does nothing when DIR/root already holds libmpi.
# Usage: sh tools/arm64_openmpi.sh DIR
set -eu
dir=${1:?usage: $0 DIR}
lib=usr/lib/aarch64-linux-gnu
[ -e "$dir/root/$lib/libmpi.so.40" ] && exit 0
# Open MPI and what its libraries load that multiarch's arm64 set (tools/deps.sh arm64) lacks.
packages="libopenmpi3 libopenmpi-dev libpmix2 libmunge2 libhwloc15 libhwloc-plugins
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-2.1-7 libfabric1 libucx0 libibverbs1
  libnl-3-200 libnl-route-3-200 librdmacm1 libpciaccess0 libnuma1 libatomic1 libstdc++6
  libgfortran5 libxml2 libicu72 liblzma5 libudev1 libxnvctrl0 ocl-icd-libopencl1"
rm -rf "$dir/debs" "$dir/root.part"
mkdir -p "$dir/debs"
echo "cnnc: downloading Debian's Open MPI for arm64 into $dir"
for p in $packages; do
  (cd "$dir/debs" && apt-get download -qq "$p:arm64") ||
    { echo "cnnc: apt-get download $p:arm64 failed (is arm64 added: tools/deps.sh arm64?)" >&2; exit 1; }
done
for deb in "$dir"/debs/*.deb; do
  dpkg -x "$deb" "$dir/root.part"
done
rm -rf "$dir/root" "$dir/debs"
mv "$dir/root.part" "$dir/root"
