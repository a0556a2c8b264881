#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make bench-stack' (scripts/bench-stack.sh): P2P through
# md raid0 and raid1 against the CPU bounce.
set -u

usage() {
	cat <<USAGE
Usage: bench-stack [--help]

Guest side of 'make bench-stack' (scripts/guest-init, spin_mode=bench,
the default spin_bench=stack): P2P read throughput through md raid0 over
1, 2 and 3 NVMe drives (the rig's SPINRIG drives) and md raid1 over 2,
plain pread into device memory against the CPU-bounce baseline, and on
raid1 writes from device memory.  Needs a published p2pmem provider of
at least 256 MiB.  Modes:

  p2p           fio, O_DIRECT reads at 1 MiB and 8 MiB, buffers in
                device memory (--iomem=mmapshared:PROVIDER/p2pmem/allocate)
  pread         fio, buffered pread into device memory, cold cache
  bounce        spin-bounce: buffered pread into RAM, then memcpy into
                device memory, cold cache
  p2p-write     raid1 only: fio, O_DIRECT writes, source in device
                memory (every leg DMAs it)
  routed-write  raid1 only: fio, buffered pwrite from device memory and
                fsync at the end: the P2P router
  copy-write    raid1 only: the same with the router off: the page
                cache copies

Environment:
  SPIN_BENCH_SIZE  fio's --size per run (default 512M); the bounce rows
                   always move 512 MiB

Prints CSV between "# bench-stack: begin" and "# bench-stack: end":

  stack,members,mode,block_size,MB_per_s

stack being nvme, md-raid0 or md-raid1, members the number of drives.
Destroys the data on the rig drives.
USAGE
}
for arg; do
	case $arg in
	-h|--help) usage; exit 0 ;;
	*) echo "bench-stack: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
	esac
done

SIZE=${SPIN_BENCH_SIZE:-512M}
BYTES=$((512 * 1024 * 1024))
R=/sys/kernel/mm/p2p_router

provider=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
	[ "$(cat "$d/p2pmem/size")" -ge 268435456 ] && provider=$d && break
done
[ -n "$provider" ] || { echo "bench-stack: no 256 MiB provider"; exit 1; }
drives=$(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
[ -n "$drives" ] || { echo "bench-stack: no rig drive"; exit 1; }
p2pmem="mmapshared:$provider/p2pmem/allocate"

fio_bw() {	# dev rw bs direct iomem [fio option] -> MB/s
	fio --name=b --filename="$1" --rw="$2" --bs="$3" --direct="$4" \
		--ioengine=psync --iomem="$5" --size="$SIZE" --invalidate=1 \
		${6:-} --minimal 2>/dev/null |
		awk -F';' '{ printf "%.0f\n", ($7 + $48) * 1024 / 1e6 }'
}

# stack STACK MEMBERS [mdadm options]: every mode on the first MEMBERS
# drives, plain (nvme) or through md (md-raidN), one CSV line per mode
stack() {
	label=$1 n=$2
	shift 2
	members=$(echo "$drives" | head -n "$n" | sed 's|^|/dev/|' | tr '\n' ' ')
	modes="p2p:1M p2p:8M pread:1M bounce:1M"
	case $label in
	nvme)
		dev=${members%% *} ;;
	md-raid*)
		dev=/dev/md0
		# shellcheck disable=SC2086
		mdadm --create "$dev" --run --quiet --force --level="${label#md-raid}" \
			--raid-devices="$n" "$@" $members 2>/dev/null ||
			{ echo "bench-stack: mdadm failed"; exit 1; } ;;
	esac
	[ "$label" = md-raid1 ] &&
		modes="$modes p2p-write:1M routed-write:1M copy-write:1M"
	fio_bw "$dev" write 1M 1 malloc >/dev/null	# real data, not holes
	for m in $modes; do
		mode=${m%:*} bs=${m#*:}
		case $mode in
		p2p) bw=$(fio_bw "$dev" read "$bs" 1 "$p2pmem") ;;
		pread) bw=$(fio_bw "$dev" read "$bs" 0 "$p2pmem") ;;
		bounce) bw=$(spin-bounce "$dev" "$provider" 1048576 $BYTES) ;;
		p2p-write) bw=$(fio_bw "$dev" write "$bs" 1 "$p2pmem") ;;
		routed-write)
			bw=$(fio_bw "$dev" write "$bs" 0 "$p2pmem" --end_fsync=1) ;;
		copy-write)
			echo 0 >$R/enabled
			bw=$(fio_bw "$dev" write "$bs" 0 "$p2pmem" --end_fsync=1)
			echo 1 >$R/enabled ;;
		esac
		echo "$label,$n,$mode,$bs,$bw"
	done
	[ "$label" = nvme ] && return
	mdadm --stop "$dev" >/dev/null 2>&1
	# shellcheck disable=SC2086
	mdadm --zero-superblock $members
}

echo "# bench-stack: begin"
echo "stack,members,mode,block_size,MB_per_s"
stack nvme 1
stack md-raid0 2
stack md-raid0 3
stack md-raid1 2 --assume-clean --bitmap=none
echo "# bench-stack: end"
