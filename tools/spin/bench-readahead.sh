#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make bench-readahead' (scripts/guest-init,
# spin_mode=bench spin_bench=readahead): P-readahead for small
# sequential reads into device memory, and the page-cache pollution it
# is meant to avoid.
#
# Sequential reads of a file on XFS (first rig drive), cold cache, at
# 4, 16 and 64 KiB per request, up to SPIN_BENCH_SECS seconds each:
#   p2p        fio, O_DIRECT into device memory (GDS's GPUD)
#   spin       fio, buffered into device memory, router and P-readahead on
#   pagecache  fio, buffered into device memory, router off
#   bounce     spin-bounce: buffered pread into RAM, memcpy into device
#              memory (GDS's CPU_GPU)
#
# Pollution: a working set of half the guest's RAM is read twice (so it
# is cached and referenced), then the whole third rig drive, four times
# the guest's RAM, is read sequentially in 16 KiB requests, into device
# memory with P-readahead (spin) or into RAM (ram); afterwards
# spin-resident says how much of the working set is still cached.
#
# Prints CSV (test,mode,block_size,value,unit) between
# "# bench-readahead: begin" and "# bench-readahead: end".
set -u
SECS=${SPIN_BENCH_SECS:-10}
R=/sys/kernel/mm/p2p_router

provider=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
	[ "$(cat "$d/p2pmem/size")" -ge 268435456 ] && provider=$d && break
done
[ -n "$provider" ] || { echo "bench-readahead: no 256 MiB provider"; exit 1; }
set -- $(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
[ $# -ge 3 ] || { echo "bench-readahead: need three rig drives"; exit 1; }
data=$1 ws=$2 scan=$3
p2pmem="mmapshared:$provider/p2pmem/allocate"

fio_bw() {	# file bs direct iomem size [secs] -> MB/s
	fio --name=b --filename="$1" --rw=read --bs="$2" --direct="$3" \
		--ioengine=psync --iomem="$4" --size="$5" --runtime="${6:-$SECS}" \
		--invalidate=1 --minimal 2>/dev/null |
		awk -F';' '{ printf "%.0f\n", $7 * 1024 / 1e6 }'
}

stat() { cat "$R/stats/$1"; }

mkdir -p /mnt/data /mnt/ws
mkfs.xfs -q -f "/dev/$data" && mount "/dev/$data" /mnt/data || exit 1
mkfs.xfs -q -f "/dev/$ws" && mount "/dev/$ws" /mnt/ws || exit 1
dd if=/dev/urandom of=/mnt/data/seq bs=1M count=256 2>/dev/null
sync

echo "# bench-readahead: begin"
echo "test,mode,block_size,value,unit"
for bs in 4k 16k 64k; do
	echo "seq,p2p,$bs,$(fio_bw /mnt/data/seq $bs 1 "$p2pmem" 256M),MB/s"
	echo 1 >$R/enabled
	h0=$(stat ra_hits) d0=$(stat p2p_bytes)
	echo "seq,spin,$bs,$(fio_bw /mnt/data/seq $bs 0 "$p2pmem" 256M),MB/s"
	echo "seq,spin_ra_hit_MiB,$bs,$((($(stat ra_hits) - h0) / 256)),MiB"
	echo "seq,spin_p2p_MiB,$bs,$((($(stat p2p_bytes) - d0) / 1048576)),MiB"
	echo 0 >$R/enabled
	echo "seq,pagecache,$bs,$(fio_bw /mnt/data/seq $bs 0 "$p2pmem" 256M),MB/s"
	echo 1 >$R/enabled
	bytes=$(($(echo $bs | tr -d k) * 1024))
	echo "seq,bounce,$bs,$(spin-bounce /mnt/data/seq "$provider" $bytes 268435456),MB/s"
done

# The working set: half of RAM, read twice.
ram_kb=$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)
ws_mb=$((ram_kb / 2048))
scan_mb=$((ram_kb * 4 / 1024))
dd if=/dev/zero of=/mnt/ws/ws bs=1M count=$ws_mb 2>/dev/null
sync
for mode in spin ram; do
	echo 3 >/proc/sys/vm/drop_caches
	cat /mnt/ws/ws >/dev/null
	cat /mnt/ws/ws >/dev/null
	before=$(spin-resident /mnt/ws/ws | cut -d' ' -f1)
	iomem=$p2pmem
	[ $mode = ram ] && iomem=malloc
	bw=$(fio_bw "/dev/$scan" 16k 0 "$iomem" "${scan_mb}M" 600)
	after=$(spin-resident /mnt/ws/ws | cut -d' ' -f1)
	echo "pollution,$mode,16k,$before,ws_resident_before_%"
	echo "pollution,$mode,16k,$after,ws_resident_after_%"
	echo "pollution,$mode,16k,$bw,scan_MB/s"
done
echo "pollution,setup,-,$ws_mb,ws_MiB"
echo "pollution,setup,-,$scan_mb,scan_MiB"
echo "# bench-readahead: end"
