#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# bench-regress: do ordinary buffered reads into RAM get slower?  Guest
# side of the regression rows of 'make bench'.
set -u

usage() {
	cat <<USAGE
Usage: bench-regress [--help] [DIR]

Do ordinary buffered reads into RAM get slower?  Guest side of the
regression rows of 'make bench'; runs on the patched kernel (router on
and off, from bench-spin with spin_regress=1) and on an unpatched one
built from the same base and config (spin_bench=regress).

In DIR (default: a new XFS on the first rig drive, mounted on
/mnt/regress) a 128 MiB file is read into RAM with fio (buffered,
psync, --iomem=malloc) four ways:
  seq1m_warm   1 MiB sequential, file cached, 4 passes
  rand4k_warm  4 KiB random over the cached file, 3 seconds
  seq1m_cold   1 MiB sequential, cache dropped first
  rand4k_cold  4 KiB random, cache dropped first, 3 seconds
Five rounds; on a kernel with the router, each round runs the router
on, then off.

Prints one CSV line per run, no header:

  regress,TEST,KERNEL,ROUND,MB/s

KERNEL being spin_on, spin_off or base (no router).  Without DIR,
destroys the data on the first rig drive.
USAGE
}
case "${1:-}" in
-h|--help) usage; exit 0 ;;
-*) echo "bench-regress: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "bench-regress: one DIR at most" >&2; usage >&2; exit 2; }

R=/sys/kernel/mm/p2p_router
SIZE=128M

dir=${1:-}
if [ -z "$dir" ]; then
	set -- $(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
	dir=/mnt/regress
	mkdir -p $dir
	mkfs.xfs -q -f "/dev/$1" && mount "/dev/$1" $dir || exit 1
fi
f=$dir/regress
dd if=/dev/urandom of="$f" bs=1M count=128 2>/dev/null
sync

fio_bw() {	# fio arguments -> MB/s
	fio --name=r --filename="$f" --ioengine=psync --iomem=malloc \
		--direct=0 --size=$SIZE --minimal "$@" 2>/dev/null |
		awk -F';' '{ printf "%.0f\n", $7 * 1024 / 1e6 }'
}

# regress TEST fio-arguments: one run, one CSV line, for kernel $k in
# round $round
regress() {
	t=$1
	shift
	echo "regress,$t,$k,$round,$(fio_bw "$@")"
}

kernels=base
[ -w $R/enabled ] && kernels="spin_on spin_off"
for round in 1 2 3 4 5; do
	for k in $kernels; do
		case $k in
		spin_on) echo 1 >$R/enabled ;;
		spin_off) echo 0 >$R/enabled ;;
		esac
		cat "$f" >/dev/null
		regress seq1m_warm --rw=read --bs=1M --invalidate=0 --loops=4
		regress rand4k_warm --rw=randread --bs=4k --invalidate=0 \
			--runtime=3 --time_based
		regress seq1m_cold --rw=read --bs=1M --invalidate=1
		regress rand4k_cold --rw=randread --bs=4k --invalidate=1 \
			--runtime=3 --time_based
	done
done
[ -w $R/enabled ] && echo 1 >$R/enabled
exit 0
