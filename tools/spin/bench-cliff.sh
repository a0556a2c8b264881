#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# bench-cliff: does a cached read into device memory slow down as the
# request grows?  Guest side of the size rows of 'make bench'.
set -u

usage() {
	cat <<USAGE
Usage: bench-cliff [--help] [DIR]

Does a cached read into device memory slow down as the request grows?
Guest side of the size rows of 'make bench' (spin_bench=cliff); runs
on the patched kernel (router on and off) and on an unpatched one.

In DIR (default: a new XFS on the first rig drive, mounted on
/mnt/cliff) a 64 MiB file, written as make demo writes it, is read
with fio (buffered, psync, 128 MiB a run, the file fully cached) in
requests of 64 KiB to 8 MiB, into device memory (the 256 MiB
provider's p2pmem/allocate, as fio maps it, and 4 KiB past the start
of a longer mapping with --iomem_align=4k) and into RAM (malloc, and an
anonymous mmap of exactly the request's size), with the page cache held in
large folios (read in by read-ahead) and in 4 KiB folios (read in with
POSIX_FADV_RANDOM by spin-cache), spin_reps rounds (default 3).
spin-folios reports the folio sizes of each.

Then spin-copy times user-space copies from RAM into device memory (into
RAM on a kernel without a provider, such as the unpatched one), by
instruction (rep movsb and rep movsq 4 KiB at a time, as the kernel's
copy_to_user() does, and the C library's memcpy), with the source at
the same offset from a 2 MiB boundary as the destination (OFFSET 0)
and 64 KiB away from it (OFFSET 65536): under TCG the first aliases in
QEMU's software TLB (Documentation/spin/rig.rst, "Copies under TCG").

Prints CSV lines, no header:
  cliff,cpu,smap=0|1  (whether the CPU the rig gave has SMAP)
  cliff,folios,FOLIOS,<spin-folios output>
  cliff,read,FOLIOS,BS,DEST,ROUTER,ROUND,MB/s
  cliff,copy,METHOD,CHUNK,OFFSET,BS,DEST,MB/s
DEST being p2pmem, p2pmem4k, ram or mmap; ROUTER on, off or none (a
kernel without the router).  Ends with "# bench-cliff: end"; a run
that fails is reported on stderr and makes the exit status 1.

spin_profile=1 instead reads the cached file into device memory for
15 s at 8 MiB, then 15 s at 1 MiB (router off, large folios), each
after a line "# bench-cliff: profile BS begin" for scripts/rig-profile.sh.

Without DIR, destroys the data on the first rig drive.
USAGE
}
case "${1:-}" in
-h|--help) usage; exit 0 ;;
-*) echo "bench-cliff: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "bench-cliff: one DIR at most" >&2; usage >&2; exit 2; }

REPS=${spin_reps:-3}
R=/sys/kernel/mm/p2p_router

provider=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
	[ "$(cat "$d/p2pmem/size")" -ge 268435456 ] && provider=$d && break
done
# The unpatched kernel has no provider (patch 0001 adds it): RAM only.
dests="p2pmem p2pmem4k ram mmap" copydest=$provider copylabel=p2pmem
if [ -z "$provider" ]; then
	echo "bench-cliff: no 256 MiB p2pmem provider: RAM only" >&2
	[ "${spin_profile:-0}" = 1 ] && exit 1
	dests="ram mmap" copydest=ram copylabel=ram
fi

dir=${1:-}
if [ -z "$dir" ]; then
	set -- $(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
	dir=/mnt/cliff
	mkdir -p $dir
	mkfs.xfs -q -f "/dev/$1" && mount "/dev/$1" $dir || exit 1
fi
f=$dir/cliff
dd if=/dev/urandom of="$f" bs=1M count=64 2>/dev/null
sync

fails=0
check() {	# MB/s, what: a run that printed no rate failed
	case $1 in
	''|*[!0-9]*) echo "bench-cliff: $2 failed" >&2; fails=1 ;;
	esac
}

grep -qw smap /proc/cpuinfo && echo "cliff,cpu,smap=1" || echo "cliff,cpu,smap=0"

# cache FOLIOS: the whole file in the page cache, in large folios
# (read-ahead of one 64 MiB read) or in 4 KiB ones (POSIX_FADV_RANDOM).
cache() {
	if [ "$1" = large ]; then
		spin-cache "$f" 0 >/dev/null
		xfs_io -c "pread -q -b 64m 0 64m" "$f"
	else
		spin-cache "$f" 100 contig >/dev/null
	fi
}

# spin_profile=1: 15 s of each of 8 MiB and 1 MiB cached reads into
# device memory, router off, large folios, each after a marker line on
# the console for a host-side profiler of QEMU to wait for.
if [ "${spin_profile:-0}" = 1 ]; then
	[ -w $R/enabled ] && echo 0 >$R/enabled
	cache large
	for bs in 8M 1M; do
		echo "# bench-cliff: profile $bs begin"
		fio --name=c --filename="$f" --rw=read --bs=$bs --direct=0 \
			--ioengine=psync --iomem=mmapshared:$provider/p2pmem/allocate \
			--size=64M --invalidate=0 --time_based --runtime=15 --minimal \
			2>/dev/null | awk -F';' '{ printf "%.0f MB/s\n", $7 * 1024 / 1e6 }'
		echo "# bench-cliff: profile $bs end"
	done
	exit 0
fi

routers=none
[ -w $R/enabled ] && routers="on off"
for folios in large small; do
	cache $folios
	echo "cliff,folios,$folios,$(spin-folios "$f")"
done
for round in $(seq "$REPS"); do
	for folios in large small; do
		cache $folios
		for bs in 64k 1M 2M 4M 8M; do
			for dest in $dests; do
				align=0
				case $dest in
				p2pmem) iomem=mmapshared:$provider/p2pmem/allocate ;;
				p2pmem4k) iomem=mmapshared:$provider/p2pmem/allocate align=4k ;;
				ram) iomem=malloc ;;
				mmap) iomem=mmap ;;
				esac
				for router in $routers; do
					case $router in
					on) echo 1 >$R/enabled ;;
					off) echo 0 >$R/enabled ;;
					esac
					bw=$(fio --name=c --filename="$f" --rw=read --bs=$bs \
						--direct=0 --ioengine=psync --iomem=$iomem \
						--iomem_align=$align --size=64M --loops=2 \
						--invalidate=0 --minimal 2>/dev/null |
						awk -F';' '$5 == 0 { printf "%.0f\n", $7 * 1024 / 1e6 }')
					check "$bw" "fio $folios $bs $dest router=$router"
					echo "cliff,read,$folios,$bs,$dest,$router,$round,$bw"
				done
			done
		done
	done
done
[ -w $R/enabled ] && echo 1 >$R/enabled

for method in movsb:4096 movsq:4096 memcpy:0; do
	for off in 0 65536; do
		for bs in 1M 8M; do
			bw=$(spin-copy -c ${method#*:} -o $off ${method%:*} $copydest $bs 128M)
			check "$bw" "spin-copy ${method%:*} $off $bs"
			echo "cliff,copy,${method%:*},${method#*:},$off,$bs,$copylabel,$bw"
		done
	done
done
echo "# bench-cliff: end"
exit $fails
