#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make bench-stack' (scripts/guest-init, spin_mode=bench):
# P2P read throughput through md raid0 over 1, 2 and 3 NVMe drives and
# md raid1 over 2, plain pread into device memory against the CPU-bounce
# baseline, and on raid1 writes from device memory.
#
#   p2p      fio, O_DIRECT, buffers in device memory
#            (--iomem=mmapshared:<provider>/p2pmem/allocate)
#   pread    fio, buffered pread into device memory, cold cache
#   bounce   spin-bounce: buffered pread into RAM, then memcpy into
#            device memory, cold cache
#   p2p-write     fio, O_DIRECT writes, source in device memory (raid1:
#                 every leg DMAs it)
#   routed-write  fio, buffered pwrite from device memory and fsync at
#                 the end: the P2P router
#   copy-write    the same with the router off: the page cache copies
#
# Prints CSV (stack,members,mode,block_size,MB_per_s) between
# "# bench-stack: begin" and "# bench-stack: end".
set -u
SIZE=${SPIN_BENCH_SIZE:-512M}
BYTES=$((512 * 1024 * 1024))

provider=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
	[ "$(cat "$d/p2pmem/size")" -ge 268435456 ] && provider=$d && break
done
[ -n "$provider" ] || { echo "bench-stack: no 256 MiB provider"; exit 1; }
drives=$(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
set -- $drives

fio_bw() {	# dev rw bs direct iomem [fio options] -> MB/s
	fio --name=b --filename="$1" --rw="$2" --bs="$3" --direct="$4" \
		--ioengine=psync --iomem="$5" --size="$SIZE" --invalidate=1 \
		${6:-} --minimal 2>/dev/null |
		awk -F';' '{ printf "%.0f\n", ($7 + $48) * 1024 / 1e6 }'
}

run() {	# label members dev
	dev=$3
	fio_bw "$dev" write 1M 1 malloc >/dev/null	# real data, not holes
	for bs in 1M 8M; do
		echo "$1,$2,p2p,$bs,$(fio_bw "$dev" read "$bs" 1 "mmapshared:$provider/p2pmem/allocate")"
	done
	echo "$1,$2,pread,1M,$(fio_bw "$dev" read 1M 0 "mmapshared:$provider/p2pmem/allocate")"
	echo "$1,$2,bounce,1M,$(spin-bounce "$dev" "$provider" 1048576 $BYTES)"
}

echo "# bench-stack: begin"
echo "stack,members,mode,block_size,MB_per_s"
run nvme 1 "/dev/$1"
for n in 2 3; do
	members=$(echo "$drives" | head -n $n | sed 's|^|/dev/|' | tr '\n' ' ')
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --quiet --force --level=0 \
		--raid-devices=$n $members 2>/dev/null || { echo "bench-stack: mdadm failed"; exit 1; }
	run md-raid0 "$n" /dev/md0
	mdadm --stop /dev/md0 >/dev/null 2>&1
	# shellcheck disable=SC2086
	mdadm --zero-superblock $members
done
members=$(echo "$drives" | head -n 2 | sed 's|^|/dev/|' | tr '\n' ' ')
# shellcheck disable=SC2086
mdadm --create /dev/md0 --run --quiet --force --level=1 --raid-devices=2 \
	--assume-clean --bitmap=none $members 2>/dev/null ||
	{ echo "bench-stack: mdadm failed"; exit 1; }
run md-raid1 2 /dev/md0
p2pmem="mmapshared:$provider/p2pmem/allocate"
echo "md-raid1,2,p2p-write,1M,$(fio_bw /dev/md0 write 1M 1 "$p2pmem")"
echo "md-raid1,2,routed-write,1M,$(fio_bw /dev/md0 write 1M 0 "$p2pmem" --end_fsync=1)"
echo 0 >/sys/kernel/mm/p2p_router/enabled
echo "md-raid1,2,copy-write,1M,$(fio_bw /dev/md0 write 1M 0 "$p2pmem" --end_fsync=1)"
echo 1 >/sys/kernel/mm/p2p_router/enabled
mdadm --stop /dev/md0 >/dev/null 2>&1
# shellcheck disable=SC2086
mdadm --zero-superblock $members
echo "# bench-stack: end"
