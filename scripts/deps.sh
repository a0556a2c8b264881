#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install the Debian packages the build, the rig and the tests need,
# but only those that are missing.  Safe to run again and again.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--check] [--bench]

Installs, with apt-get, every Debian package that building the kernel,
the initramfs, running the QEMU rig and the kselftests needs.  Packages
already installed are left alone, so a second run does nothing.

  --check   only list missing packages; exit 1 if any are missing
  --bench   also what 'make bench' needs on the host (gnuplot)
  --sparse  also sparse, for 'make sparse-check'
USAGE
}

PKGS=(
	# the base kernel and what it takes to build it
	linux-source-6.12 build-essential bc bison flex libelf-dev libssl-dev
	cpio xz-utils kmod rsync git ccache
	# checkpatch.pl and its spdxcheck.py
	perl python3 python3-ply python3-git
	# the rig
	qemu-system-x86
	# guest user space: busybox plus the real tools the tests drive
	busybox-static mdadm dmsetup lvm2 xfsprogs e2fsprogs dosfstools fio
	# fincore, for bench-readahead's working set
	util-linux-extra
	# router_test's and race_test's io_uring cases (liburing.so.2 goes
	# into the initramfs with the test programs)
	liburing-dev
)

check=0
for arg in "$@"; do
	case "$arg" in
	-h|--help) usage; exit 0 ;;
	--check) check=1 ;;
	--bench) PKGS+=(gnuplot-nox) ;;
	--sparse) PKGS+=(sparse) ;;
	*) usage >&2; exit 2 ;;
	esac
done

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done

[ ${#missing[@]} -eq 0 ] && exit 0
if [ $check = 1 ]; then
	echo "missing packages: ${missing[*]}"
	exit 1
fi

echo "deps: installing ${missing[*]}"
sudo=
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
