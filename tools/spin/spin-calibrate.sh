#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# spin-calibrate: measure this machine's drive and copy speeds, set the
# P2P router's default cost model from them, and print what the router
# learned beside them.  Runs in the guest (it is
# /usr/bin/spin-calibrate in the rig's initramfs; 'make calibrate' boots
# the rig and runs it).
set -u

usage() {
	cat <<USAGE
Usage: spin-calibrate [--help] [--dry-run] [--secs N] [--reps N]
                      FILE PROVIDER-SYSFS-DIR

FILE is a file (or block device) of at least 64 MiB on the drive to
calibrate for; PROVIDER-SYSFS-DIR the PCI device that publishes the
device memory (/sys/bus/pci/devices/<bdf>).  Measures, with fio:

  - the DMA time of one O_DIRECT read into device memory at queue depth
    1, for request sizes from 4 KiB to 8 MiB (random offsets, N seconds
    each, repeated --reps times): 1 / IOPS;
  - copy_mbps: plain reads of a cached 64 MiB file into device memory
    with the router off (a copy out of the page cache);
  - copy_from_mbps: plain writes from device memory into the page cache
    with the router off (a CPU read-out of device memory), into a
    scratch file next to FILE (skipped for a block device);
  - ra_mbps: P-readahead's own cost, as the rate of 64 KiB sequential
    reads of FILE's first 2 MiB into device memory that all hit the
    P-readahead partition (the router is made to choose P-readahead for
    the measurement; ra_hits must grow by what was read, ra_pages by
    less than one pass).

spin-fit chooses the knees of the piecewise-linear DMA model and the
times at them by least squares; the model, fitted against measured, and
the two copy speeds are printed, and written to
/sys/kernel/mm/p2p_router/{p2p_cost_ns,copy_mbps,copy_from_mbps,ra_mbps}
unless --dry-run is given.  Takes about 13 * secs * reps seconds plus a
few seconds for the copies.  Defaults: --secs 2 --reps 2.

Users need not run it: the router learns the DMA cost of each request
queue and the copy rates of each provider from its own I/O, and plans
with those (/sys/kernel/mm/p2p_router/learn).  The values written here
are the defaults, which the router starts learning from and plans with
only when learn is 0.  spin-calibrate checks what was learned: it
prints the queue's p2p_learned_cost_ns and p2p_learned_ra_mbps and the
provider's learned copy rates after its own.

Prints "# spin-calibrate: DMA time of one read into device memory,
fitted", spin-fit's table ("#" lines: bytes, measured_ns, fitted_ns,
error), then "p2p_cost_ns: BYTES:NS ...", "copy_mbps: N",
"copy_from_mbps: N" (not for a block device), "ra_mbps: N" (if
P-readahead was measured) and, unless --dry-run, "# spin-calibrate:
written to /sys/kernel/mm/p2p_router"; then "learned p2p_cost_ns: ...",
"learned ra_mbps: N", "learned copy_mbps: N" and "learned copy_from_mbps:
N".
USAGE
}

R=/sys/kernel/mm/p2p_router
secs=2 reps=2 dry=0

# The sysfs directory of FILE's disk, whose queue/ the router learns in.
disk() {
	if [ -b "$file" ]; then
		mm=$((0x$(stat -c %t "$file"))):$((0x$(stat -c %T "$file")))
	else
		d=$(stat -c %d "$file")
		mm=$(((d >> 8) & 0xfff)):$(((d & 0xff) | ((d >> 12) & 0xfff00)))
	fi
	q=/sys/dev/block/$mm
	[ -e "$q/queue" ] || q=$q/..	# a partition: its disk's queue
	echo "$q"
}

# What the router learned of FILE's queue and of the provider.
learned() {
	q=$(disk)
	echo "learned p2p_cost_ns: $(cat "$q/queue/p2p_learned_cost_ns" 2>/dev/null)"
	echo "learned ra_mbps: $(cat "$q/queue/p2p_learned_ra_mbps" 2>/dev/null)"
	echo "learned copy_mbps: $(cat "$provider/p2pmem/learned_copy_mbps" 2>/dev/null)"
	echo "learned copy_from_mbps: $(cat "$provider/p2pmem/learned_copy_from_mbps" 2>/dev/null)"
}

while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--dry-run) dry=1 ;;
	--secs) secs=$2; shift ;;
	--reps) reps=$2; shift ;;
	-*) echo "spin-calibrate: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
[ $# -eq 2 ] || { usage >&2; exit 2; }
file=$1 provider=$2
iomem="mmapshared:$provider/p2pmem/allocate"
[ -r "$file" ] && [ -w "$provider/p2pmem/allocate" ] && [ -w "$R/enabled" ] ||
	{ echo "spin-calibrate: need FILE, a p2pmem provider and $R" >&2; exit 1; }

# fio's terse output: field 7 is read KiB/s, 8 read IOPS, 48 write KiB/s.
fio_field() {	# field, then fio arguments
	f=$1
	shift
	fio --name=cal --ioengine=psync --minimal "$@" 2>/dev/null |
		awk -F';' -v f="$f" '{ print $f }'
}
mbps() {	# KiB/s -> MB/s
	awk -v k="$1" 'BEGIN { printf "%.0f", k * 1024 / 1e6 }'
}

samples=/tmp/spin-calibrate.$$
: >"$samples"
for rep in $(seq "$reps"); do
	for kb in 4 8 16 32 64 128 256 512 1024 2048 4096 8192; do
		iops=$(fio_field 8 --filename="$file" --rw=randread --bs=${kb}k \
			--direct=1 --iomem="$iomem" --size=64M --runtime="$secs" \
			--time_based)
		awk -v b=$((kb * 1024)) -v i="$iops" \
			'BEGIN { if (i > 0) printf "%d %.0f\n", b, 1e9 / i }' >>"$samples"
	done
done

# Copies, with the router off so that nothing is DMAed.
was=$(cat $R/enabled)
echo 0 >$R/enabled
cat "$file" >/dev/null 2>&1 || true
copy=$(fio_field 7 --filename="$file" --rw=read --bs=1M --direct=0 \
	--iomem="$iomem" --size=64M --invalidate=0 --loops=3)
copy_from=
if [ -f "$file" ]; then
	scratch=$(dirname "$file")/.spin-calibrate.$$
	copy_from=$(fio_field 48 --filename="$scratch" --rw=write --bs=1M \
		--direct=0 --iomem="$iomem" --size=64M --end_fsync=0)
	rm -f "$scratch"
fi

# P-readahead: a model under which every small sequential read takes the
# partition (a DMA costs a second, the drive's share nothing), a first
# pass that fills the partition, then passes that only hit it.
# learn 0: the queue plans with these, not what it learned; what these
# hits teach the queue (it learns at learn 0 too) is put back after.
old_model=$(cat $R/p2p_cost_ns) old_ra=$(cat $R/ra_mbps) old_learn=$(cat $R/learn)
qra=$(disk)/queue/p2p_learned_ra_mbps
old_qra=$(cat "$qra" 2>/dev/null || true)
echo 1 >$R/enabled
echo 0 >$R/learn
echo "4096:1000000000 1073741824:1000000000" >$R/p2p_cost_ns
echo 1000000 >$R/ra_mbps
fio_field 7 --filename="$file" --rw=read --bs=64k --direct=0 \
	--iomem="$iomem" --size=2M --invalidate=1 >/dev/null
hits=$(cat $R/stats/ra_hits) pages=$(cat $R/stats/ra_pages)
ra=$(fio_field 7 --filename="$file" --rw=read --bs=64k --direct=0 \
	--iomem="$iomem" --size=2M --invalidate=0 --loops=64)
hits=$(($(cat $R/stats/ra_hits) - hits))
pages=$(($(cat $R/stats/ra_pages) - pages))
echo "$old_model" >$R/p2p_cost_ns
echo "$old_ra" >$R/ra_mbps
echo "$old_learn" >$R/learn
# The default shown is taken as nothing learned: it follows ra_mbps again.
[ "$old_qra" = "$old_ra" ] && old_qra=reset
[ -z "$old_qra" ] || echo "$old_qra" >"$qra"
echo "$was" >$R/enabled
# 64 passes over 512 pages, all from the partition: a pass that read
# from the drive would measure the drive.
[ "$hits" -ge $((64 * 512)) ] && [ "$pages" -lt 512 ] || {
	echo "spin-calibrate: P-readahead not measured ($hits pages hit, $pages read)" >&2
	ra=
}

model=$(spin-fit <"$samples" | tee "$samples.fit" | head -n 1)
[ -n "$model" ] || { echo "spin-calibrate: no fit" >&2; exit 1; }
copy=$(mbps "$copy")
[ -n "$ra" ] && ra=$(mbps "$ra")
[ -n "$copy_from" ] && copy_from=$(mbps "$copy_from")

echo "# spin-calibrate: DMA time of one read into device memory, fitted"
tail -n +2 "$samples.fit"
echo "p2p_cost_ns: $model"
echo "copy_mbps: $copy"
[ -n "$copy_from" ] && echo "copy_from_mbps: $copy_from"
[ -n "$ra" ] && echo "ra_mbps: $ra"
rm -f "$samples" "$samples.fit"

[ $dry = 1 ] && { learned; exit 0; }
echo "$model" >$R/p2p_cost_ns &&
	{ [ "$copy" -gt 0 ] && echo "$copy" >$R/copy_mbps; } &&
	{ [ -z "$copy_from" ] || [ "$copy_from" -le 0 ] ||
	  echo "$copy_from" >$R/copy_from_mbps; } &&
	{ [ -z "$ra" ] || [ "$ra" -le 0 ] || echo "$ra" >$R/ra_mbps; } ||
	{ echo "spin-calibrate: could not write the model" >&2; exit 1; }
echo "# spin-calibrate: written to $R"
learned
