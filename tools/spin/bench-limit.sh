#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make bench-limit' (scripts/bench-limit.sh): does the
# rig's drive limit hold?
set -u

usage() {
	cat <<USAGE
Usage: bench-limit [--help]

Guest side of 'make bench-limit' (scripts/guest-init, spin_mode=bench
spin_bench=limit): O_DIRECT sequential 1 MiB reads of the first rig
drive into RAM through libaio at queue depth 8, for 1 s and for 10 s,
three times each, under whatever limits the drive (QEMU's throttle
group, or cgroup v2 io.max when booted with spin_iomax=...).  fio logs
the rate over every 100 ms of each run.  Each run starts after a second
of the same reads (fio's ramp_time), so that fio's start-up in TCG is
not measured, and the drive's burst allowance, if any, is spent.  Not
io_uring: on 6.12 its
O_DIRECT reads are REQ_NOWAIT, and blk-throttle fails a split one with
EAGAIN, which fio reports as an error.

Prints CSV between "# bench-limit: begin" and "# bench-limit: end":

  secs,rep,MB/s,max_100ms_MB/s

MB/s is the run's mean; max_100ms_MB/s its fastest 100 ms.  Then five
runs each as a benchmark run is made, after 0.2 s idle and with no
ramp, of 128 MiB (secs "run128M") and of 512 MiB ("run512M").
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

ns=$(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort | head -n 1)
[ -n "$ns" ] || { echo "bench-limit: no rig drive"; exit 1; }
echo "# bench-limit: begin"
echo "secs,rep,MB/s,max_100ms_MB/s"
for secs in 1 10; do
	for rep in 1 2 3; do
		rm -f /tmp/lim_bw.*.log
		bw=$(fio --name=l --filename="/dev/$ns" --rw=read --bs=1M \
			--direct=1 --ioengine=libaio --iodepth=8 --time_based --ramp_time=1 \
			--runtime="$secs" --write_bw_log=/tmp/lim --log_avg_msec=100 \
			--minimal 2>/dev/null |
			awk -F';' '{ printf "%.0f\n", $7 * 1024 / 1e6 }')
		max=$(cat /tmp/lim_bw.*.log 2>/dev/null |
			awk -F, '$2 > m { m = $2 } END { printf "%.0f\n", m * 1024 / 1e6 }')
		echo "$secs,$rep,$bw,$max"
	done
done
# What a benchmark run sees: 128 MiB after 0.2 s idle (bench-spin's
# spin_pause), no ramp.
for size in 128M 512M; do
	for rep in 1 2 3 4 5; do
		sleep 0.2
		bw=$(fio --name=l --filename="/dev/$ns" --rw=read --bs=1M \
			--direct=1 --ioengine=libaio --iodepth=8 --size=$size \
			--minimal 2>/dev/null |
			awk -F';' '{ printf "%.0f\n", $7 * 1024 / 1e6 }')
		echo "run$size,$rep,$bw,-"
	done
done
echo "# bench-limit: end"
