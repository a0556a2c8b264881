#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make calibrate': spin-calibrate on the first rig drive.
set -u

usage() {
	cat <<USAGE
Usage: bench-calibrate [--help]

Guest side of 'make calibrate' (scripts/guest-init, spin_mode=bench
spin_bench=calibrate): a 128 MiB file on a new XFS on the first rig
drive, then spin-calibrate (its defaults) on it against the p2pmem
provider of at least 256 MiB, which measures the drive and copy speeds,
fits the router's cost model and sets it.

Prints spin-calibrate's output (spin-calibrate --help) between
"# bench-calibrate: begin" and "# bench-calibrate: end".  Destroys the
data on the first rig drive.
USAGE
}
for arg; do
	case $arg in
	-h|--help) usage; exit 0 ;;
	*) echo "bench-calibrate: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
	esac
done

provider=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
	[ "$(cat "$d/p2pmem/size")" -ge 268435456 ] && provider=$d && break
done
[ -n "$provider" ] || { echo "bench-calibrate: no 256 MiB provider"; exit 1; }
set -- $(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
mkdir -p /mnt/cal
mkfs.xfs -q -f "/dev/$1" && mount "/dev/$1" /mnt/cal || exit 1
dd if=/dev/urandom of=/mnt/cal/file bs=1M count=128 2>/dev/null
sync
echo "# bench-calibrate: begin"
spin-calibrate /mnt/cal/file "$provider"
echo "# bench-calibrate: end"
