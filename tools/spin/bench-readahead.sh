#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make bench-readahead' (scripts/bench-readahead.sh):
# P-readahead for small sequential reads into device memory, and the
# page-cache pollution it is meant to avoid.
set -u

usage() {
	cat <<USAGE
Usage: bench-readahead [--help]

Guest side of 'make bench-readahead' (scripts/guest-init,
spin_mode=bench spin_bench=readahead): P-readahead for small sequential
reads into device memory, and the page-cache pollution it is meant to
avoid.  Needs three rig drives and a p2pmem provider of at least
256 MiB.

Sequential reads of a 256 MiB file on XFS (first rig drive), cold
cache, at 4, 16 and 64 KiB per request, up to SPIN_BENCH_SECS seconds
each:
  p2p        fio, O_DIRECT into device memory (GDS's GPUD)
  spin       fio, buffered into device memory, router and P-readahead
             on; also the MiB that hit P-readahead's partition
             (spin_ra_hit_MiB) and that were DMAed (spin_p2p_MiB)
  pagecache  fio, buffered into device memory, router off
  bounce     spin-bounce: buffered pread into RAM, memcpy into device
             memory (GDS's CPU_GPU)

Pollution: a working set of half the guest's RAM (XFS on the second rig
drive) is read twice (so it is cached and referenced), then the whole
third rig drive, four times the guest's RAM, is read sequentially in
16 KiB requests, into device memory with P-readahead (spin) or into RAM
(ram); fincore says how much of the working set is cached before and
after (percent of its pages, one decimal).

Environment:
  SPIN_BENCH_SECS  fio's --runtime for each sequential run (default 10;
                   the pollution scans have 600)

Prints CSV between "# bench-readahead: begin" and
"# bench-readahead: end":

  test,mode,block_size,value,unit

test seq or pollution; the pollution,setup rows give the sizes of the
working set (ws_MiB) and of the scan (scan_MiB).  Destroys the data on
the rig drives.
USAGE
}
for arg; do
	case $arg in
	-h|--help) usage; exit 0 ;;
	*) echo "bench-readahead: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
	esac
done

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

# resident FILE -> the percentage of FILE's pages in the page cache, one
# decimal (fincore's PAGES resident of the file's SIZE rounded up to
# pages, RES / PAGES being the page size)
resident() {
	fincore --bytes --noheadings --output PAGES,RES,SIZE "$1" |
		awk '{ if ($1 > 0) { p = $2 / $1; n = int(($3 + p - 1) / p)
			printf "%.1f\n", 100 * $1 / n } else print "0.0" }'
}

# seq_run MODE BS: one sequential read of the 256 MiB file in BS
# requests; its CSV lines
seq_run() {
	case $1 in
	p2p)
		echo "seq,p2p,$2,$(fio_bw /mnt/data/seq "$2" 1 "$p2pmem" 256M),MB/s" ;;
	spin)
		echo 1 >$R/enabled
		h0=$(stat ra_hits) d0=$(stat p2p_bytes)
		echo "seq,spin,$2,$(fio_bw /mnt/data/seq "$2" 0 "$p2pmem" 256M),MB/s"
		echo "seq,spin_ra_hit_MiB,$2,$((($(stat ra_hits) - h0) / 256)),MiB"
		echo "seq,spin_p2p_MiB,$2,$((($(stat p2p_bytes) - d0) / 1048576)),MiB" ;;
	pagecache)
		echo 0 >$R/enabled
		echo "seq,pagecache,$2,$(fio_bw /mnt/data/seq "$2" 0 "$p2pmem" 256M),MB/s"
		echo 1 >$R/enabled ;;
	bounce)
		bytes=$(($(echo "$2" | tr -d k) * 1024))
		echo "seq,bounce,$2,$(spin-bounce /mnt/data/seq "$provider" $bytes 268435456),MB/s" ;;
	esac
}

mkdir -p /mnt/data /mnt/ws
mkfs.xfs -q -f "/dev/$data" && mount "/dev/$data" /mnt/data || exit 1
mkfs.xfs -q -f "/dev/$ws" && mount "/dev/$ws" /mnt/ws || exit 1
dd if=/dev/urandom of=/mnt/data/seq bs=1M count=256 2>/dev/null
sync

echo "# bench-readahead: begin"
echo "test,mode,block_size,value,unit"
for bs in 4k 16k 64k; do
	for mode in p2p spin pagecache bounce; do
		seq_run $mode $bs
	done
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
	before=$(resident /mnt/ws/ws)
	iomem=$p2pmem
	[ $mode = ram ] && iomem=malloc
	bw=$(fio_bw "/dev/$scan" 16k 0 "$iomem" "${scan_mb}M" 600)
	after=$(resident /mnt/ws/ws)
	echo "pollution,$mode,16k,$before,ws_resident_before_%"
	echo "pollution,$mode,16k,$after,ws_resident_after_%"
	echo "pollution,$mode,16k,$bw,scan_MB/s"
done
echo "pollution,setup,-,$ws_mb,ws_MiB"
echo "pollution,setup,-,$scan_mb,scan_MiB"
echo "# bench-readahead: end"
