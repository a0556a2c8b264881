#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make bench-profile' (scripts/bench-profile.sh): where
# the CPU goes in a routed 1 MiB read with nothing cached, against the
# same read with O_DIRECT.
set -u

usage() {
	cat <<USAGE
Usage: bench-profile [--help]

Guest side of 'make bench-profile' (scripts/guest-init, spin_mode=bench
spin_bench=profile).  Needs perf in the initramfs (SPIN_PERF=1
scripts/initramfs.sh), a rig drive and a p2pmem provider of at least
256 MiB.

On a 256 MiB file on a new XFS, fio reads it sequentially in 1 MiB
requests into device memory, one job, two ways, one after the other,
SPIN_PROFILE_ROUNDS times (default 3):
  odirect  O_DIRECT (the router is not involved)
  spin     buffered, routed
spin_profile picks the scenario (default cold):
  cold          the first rig drive, nothing cached (the cache dropped
                before each run), psync (queue depth 1)
  raid0_cached  md raid0 over the first three rig drives (128 KiB
                chunks), the whole file cached, io_uring at queue
                depth 8
Each run is sampled by perf (cpu-clock, every CPU, kernel call
graphs).  Prints between "# bench-profile: begin" and "end":
  - "bw,MODE,ROUND,MB/s,dma_MiB=N,copy_MiB=N" per run: the router's
    DMA and copies (p2p_bytes, cache_bytes) during it;
  - for each mode, the last round's profile: the symbols with at least
    0.5% of the samples (perf report --no-children --sort sym);
  - "share,MODE,ROUND,PCT,BUSY_PCT" per run: the samples in the
    router's own functions (p2p_*, filemap_p2p_*, iomap_p2p_*), in
    percent of all samples and of those not in the idle loop.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

ROUNDS=${SPIN_PROFILE_ROUNDS:-3}
R=/sys/kernel/mm/p2p_router/stats
SCENARIO=${spin_profile:-cold}
SIZE=$((256 * 1024 * 1024))
case $SCENARIO in cold|raid0_cached) ;;
*) echo "bench-profile: unknown scenario '$SCENARIO'"; exit 1 ;;
esac

command -v perf >/dev/null ||
	{ echo "bench-profile: no perf; SPIN_PERF=1 scripts/initramfs.sh"; exit 1; }
provider=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
	[ "$(cat "$d/p2pmem/size")" -ge 268435456 ] && provider=$d && break
done
[ -n "$provider" ] || { echo "bench-profile: no 256 MiB provider"; exit 1; }
set -- $(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
[ $# -ge 1 ] || { echo "bench-profile: no rig drive"; exit 1; }
dev=/dev/$1
if [ "$SCENARIO" = raid0_cached ]; then
	[ $# -ge 3 ] || { echo "bench-profile: raid0 needs three rig drives"; exit 1; }
	mdadm --create /dev/md0 --run --quiet --force --level=0 \
		--chunk=128 --raid-devices=3 /dev/$1 /dev/$2 /dev/$3 || exit 1
	dev=/dev/md0
fi

echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
mkdir -p /mnt/data
mkfs.xfs -q -f "$dev" && mount "$dev" /mnt/data || exit 1
F=/mnt/data/file
dd if=/dev/urandom of=$F bs=1M count=$((SIZE >> 20)) 2>/dev/null
sync

# run MODE ROUND: one sampled fio run; its perf data in /tmp/perf.MODE.
run() {
	direct=0 engine="--ioengine=psync"
	[ "$1" = odirect ] && direct=1
	if [ "$SCENARIO" = cold ]; then
		echo 3 >/proc/sys/vm/drop_caches
	else
		cat $F >/dev/null
		engine="--ioengine=io_uring --iodepth=8"
	fi
	d0=$(cat $R/p2p_bytes) c0=$(cat $R/cache_bytes)
	bw=$(perf record -q -e cpu-clock -F 2000 -a -g -o "/tmp/perf.$1" -- \
		fio --name=p --filename=$F --rw=read --bs=1M --direct=$direct \
		$engine --size=$SIZE --invalidate=0 --iomem_align=4k \
		--iomem="mmapshared:$provider/p2pmem/allocate" --minimal \
		2>/dev/null | awk -F';' '{ printf "%.0f\n", $7 * 1024 / 1e6 }')
	echo "bw,$1,$2,$bw,dma_MiB=$((($(cat $R/p2p_bytes) - d0) >> 20)),copy_MiB=$((($(cat $R/cache_bytes) - c0) >> 20))"
	share=$(perf report -q -i "/tmp/perf.$1" --no-children --sort sym \
		--stdio -g none 2>/dev/null |
		awk '$NF ~ /^(p2p_|filemap_p2p_|iomap_p2p_)/ { s += $1 }
		     $NF ~ /(halt|idle)/ { idle += $1 }
		     END { printf "%.1f,%.1f\n", s,
			   idle < 100 ? s * 100 / (100 - idle) : 0 }')
	echo "share,$1,$2,$share"
}

echo "# bench-profile: begin"
echo "# $SCENARIO: $dev, provider $provider, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
	run odirect "$r"
	run spin "$r"
done
for m in odirect spin; do
	echo "# profile $m, round $ROUNDS:"
	perf report -q -i "/tmp/perf.$m" --no-children --sort sym --stdio \
		-g none --percent-limit 0.5 2>/dev/null | sed 's/^/# /'
done
echo "# bench-profile: end"
