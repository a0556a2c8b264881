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
and, on the second rig drive, the holder churn that stacking drivers
cost everybody (bd_link_disk_holder() and its unlink):
  dm_linear_200  200 dm-linear devices created, then removed: devices
                 per second
  md8_asm_stop   an 8-member md raid0 over dm-linear slices assembled
                 and stopped 10 times: cycles per second
Five rounds; on a kernel with the router, each round runs the router
on, then off.  spin_rows=reads or spin_rows=holders on the kernel
command line (an environment variable of init) runs only those rows.

Prints one CSV line per run, no header:

  regress,TEST,KERNEL,ROUND,VALUE

VALUE being MB/s for the reads and operations per second for the
holder rows.

KERNEL being spin_on, spin_off or base (no router).  Destroys the
data on the second rig drive, and without DIR on the first.
USAGE
}
case "${1:-}" in
-h|--help) usage; exit 0 ;;
-*) echo "bench-regress: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "bench-regress: one DIR at most" >&2; usage >&2; exit 2; }

R=/sys/kernel/mm/p2p_router
SIZE=128M
case ${spin_rows:-all} in
all|reads|holders) ;;
*) echo "bench-regress: spin_rows must be all, reads or holders" >&2; exit 2 ;;
esac

dir=${1:-}
# shellcheck disable=SC2046
set -- $(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
churn=/dev/${2:-}
if [ -z "$dir" ]; then
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

# Busybox's date has no %N: the uptime's hundredths of a second, in ns.
now_ns() { awk '{ printf "%.0f\n", $1 * 1e9 }' /proc/uptime; }

# rate N T0 T1: N operations between T0 and T1 (ns), per second
rate() { awk -v n="$1" -v t="$(($3 - $2))" 'BEGIN { printf "%.2f\n", n * 1e9 / t }'; }

# dm_linear_200: create 200 dm-linear devices over $churn, remove them
dm_linear_200() {
	t0=$(now_ns) i=0
	while [ $i -lt 200 ]; do
		dmsetup create --noudevsync "spinrg$i" \
			--table "0 2048 linear $churn $((i * 2048))" || return
		i=$((i + 1))
	done
	i=0
	while [ $i -lt 200 ]; do
		dmsetup remove --noudevsync "spinrg$i" || return
		i=$((i + 1))
	done
	echo "regress,dm_linear_200,$k,$round,$(rate 200 "$t0" "$(now_ns)")"
}

# md8_asm_stop: assemble and stop an 8-member raid0 over dm-linear
# slices of $churn, 10 times
md8_asm_stop() {
	members="" i=0
	while [ $i -lt 8 ]; do
		dmsetup create --noudevsync "spinmd$i" \
			--table "0 131072 linear $churn $((409600 + i * 131072))" &&
			dmsetup mknodes "spinmd$i" || return
		members="$members /dev/mapper/spinmd$i"
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	mdadm --create /dev/md9 --run --quiet --force --level=0 \
		--raid-devices=8 $members 2>/dev/null && mdadm --stop /dev/md9 >/dev/null 2>&1
	t0=$(now_ns) i=0
	while [ $i -lt 10 ]; do
		# shellcheck disable=SC2086
		mdadm --assemble /dev/md9 --run --quiet $members || break
		mdadm --stop /dev/md9 >/dev/null 2>&1 || break
		i=$((i + 1))
	done
	[ $i = 10 ] && echo "regress,md8_asm_stop,$k,$round,$(rate 10 "$t0" "$(now_ns)")"
	# shellcheck disable=SC2086
	mdadm --zero-superblock $members 2>/dev/null
	i=0
	while [ $i -lt 8 ]; do
		dmsetup remove --noudevsync "spinmd$i"
		i=$((i + 1))
	done
}

kernels=base
[ -w $R/enabled ] && kernels="spin_on spin_off"
for round in 1 2 3 4 5; do
	for k in $kernels; do
		case $k in
		spin_on) echo 1 >$R/enabled ;;
		spin_off) echo 0 >$R/enabled ;;
		esac
		if [ "${spin_rows:-all}" != holders ]; then
			cat "$f" >/dev/null
			regress seq1m_warm --rw=read --bs=1M --invalidate=0 --loops=4
			regress rand4k_warm --rw=randread --bs=4k --invalidate=0 \
				--runtime=3 --time_based
			regress seq1m_cold --rw=read --bs=1M --invalidate=1
			regress rand4k_cold --rw=randread --bs=4k --invalidate=1 \
				--runtime=3 --time_based
		fi
		if [ "${spin_rows:-all}" != reads ] && [ -b "$churn" ]; then
			dm_linear_200
			md8_asm_stop
		fi
	done
done
[ -w $R/enabled ] && echo 1 >$R/enabled
exit 0
