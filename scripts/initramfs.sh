#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the guest's initramfs: busybox, the real tools the tests drive,
# the installed kselftests and the demo, with the shared libraries they
# need copied from the host.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Writes build/initramfs.cpio from:
  - busybox-static (the shell and the small utilities);
  - mdadm, dmsetup, LVM's lvm (with scripts/guest/lvm.conf), mkfs.xfs,
    xfs_io, xfs_repair, mkfs.ext4, e2fsck, mkfs.vfat, fio, util-linux's
    fincore and coreutils' timeout (run_kselftest.sh wants
    /usr/bin/timeout), each with the shared libraries ldd lists for it;
    with SPIN_PERF=1 also the host's perf (for scripts/bench-profile.sh);
  - build/kselftest (scripts/selftests.sh) as /kselftest;
  - the tools/spin/spin-*.c tools, compiled here, spin-calibrate,
    spin-stat, spin-iomax, and the benchmarks' guest sides
    tools/spin/bench-*.sh as bench-*;
  - scripts/guest-init as /init.
Nothing else from the host goes in.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
root=$top/build/initramfs
out=$top/build/initramfs.cpio
tools=(mdadm dmsetup lvm mkfs.xfs xfs_io xfs_repair mkfs.ext4 e2fsck mkfs.vfat fio
	timeout fincore)
# perf only when asked for (scripts/bench-profile.sh): with its libraries
# it is a quarter of the image.
[ "${SPIN_PERF:-0}" = 1 ] && tools+=(perf)

[ -x "$top/build/kselftest/run_kselftest.sh" ] ||
	{ echo "initramfs: build/kselftest missing; run scripts/selftests.sh" >&2; exit 1; }

rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,mnt,run,etc,root,usr/bin,usr/sbin}
install -m 0755 /bin/busybox "$root/bin/busybox"
install -m 0755 "$top/scripts/guest-init" "$root/init"
cp /etc/mke2fs.conf "$root/etc/"
install -D -m 0644 "$top/scripts/guest/lvm.conf" "$root/etc/lvm/lvm.conf"

# The shared libraries (and the dynamic loader) a binary needs.
copy_libs() {
	local lib
	for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
		[ -e "$root$lib" ] || cp -L --parents "$lib" "$root"
	done
}
for t in "${tools[@]}"; do
	bin=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$t")
	cp -L --parents "$bin" "$root"
	copy_libs "$bin"
done

for c in "$top"/tools/spin/spin-*.c; do
	t=$(basename "$c" .c)
	# -I: spin-kread includes lib/test_p2pdma_uapi.h
	gcc -O2 -Wall -Werror -pthread -I"$top/build/linux" \
		-o "$root/usr/bin/$t" "$c" -lm
done
install -m 0755 "$top/tools/spin/spin-calibrate.sh" "$root/usr/bin/spin-calibrate"
install -m 0755 "$top/tools/spin/spin-stat" "$root/usr/bin/spin-stat"
install -m 0755 "$top/tools/spin/spin-iomax" "$root/usr/bin/spin-iomax"
for b in "$top"/tools/spin/bench-*.sh; do
	install -m 0755 "$b" "$root/usr/bin/$(basename "$b" .sh)"
done
cp -a "$top/build/kselftest" "$root/kselftest"
for f in "$root"/usr/bin/spin-* "$root"/kselftest/spin/*_test; do
	copy_libs "$f"
done

(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --quiet -R 0:0) >"$out"
echo "initramfs: build/initramfs.cpio ($(du -h "$out" | cut -f1))"
