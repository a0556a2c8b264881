#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of 'make bench' (scripts/bench.sh): SPIN against every
# baseline, side by side, in one boot of the rig.
set -u

usage() {
	cat <<USAGE
Usage: bench-spin [--help]

Guest side of 'make bench' (scripts/guest-init, spin_mode=bench
spin_bench=spin): SPIN against every baseline, side by side, in one
boot of the rig.  Needs a rig drive and a p2pmem provider of at least
256 MiB.

Modes (gdsio's transfer types in brackets):
  p2p        fio, O_DIRECT into device memory, queue depth 1 (GPUD)
  p2p_qd8    the same with io_uring at queue depth 8: the best a user
             of O_DIRECT could do
  bounce     spin-bounce: buffered pread into RAM, memcpy into device
             memory (CPU_GPU)
  pagecache  fio, buffered pread into device memory, router off
  spin       fio, buffered pread into device memory, router on, with
             what it learned of each drive and provider (the default)
  spin_cal   spin planned with the calibrated model instead
             (/sys/kernel/mm/p2p_router/learn 0, spin-calibrate's
             values in the global knobs)
  spin_default  spin planned with the router's built-in defaults
             (learn 0, the documented model)
  p2p_qdN, pagecache_qdN, spin_qdN
             p2p, pagecache and spin through io_uring at queue depth
             N (fio --ioengine=io_uring --iodepth=N)
  fixed_qdN  spin_qdN with the device buffer registered with the ring:
             READ_FIXED (fio --fixedbufs=1)
  kbvec      spin-kread: a GPU driver's in-kernel buffered read, a
             bio_vec of its P2PDMA pages (lib/test_p2pdma.c), router on
  kbvec_off  the same, router off: what such a driver gets today
             without O_DIRECT

Every run starts from an exact page-cache residency set by spin-cache
(contiguous: the first r% of the file; scattered: r% of its 64 KiB
pieces at random), then a pause of spin_pause seconds so that a
throttled drive's burst allowance is full before every run alike:
QEMU's throttle lets a burst of a tenth of a second's bytes through,
and refills it in a tenth of a second.  Every point is run spin_reps
times, all its modes once per round, so that the modes of one round
are side by side.  A point where some mode's runs spread (max - min)
over a quarter of their median is run again, twice at most, in the
same boot; the runs of a try that was run again stay in the output as
comments ("# wide try=N: ..."), and the last try's runs are the point's.

First spin-calibrate fits a model to this rig and the first drive, for
spin_cal; the router learns its own meanwhile.
Then the sweeps, on a 128 MiB file on a new XFS on the first rig drive:
  residency  1 MiB sequential reads, one job: contiguous 0, 50, 80
             and 100%, scattered 10, 30, 40, 50, 60, 70 and 90%; and
             spin_default at scattered 10, 50 and 90%
  size       4 KiB to 8 MiB, sequential, at 0% and 50% scattered
             (32 MiB per run below 256 KiB)
  random     1 MiB random reads, 50% scattered
  jobs       4 jobs, 1 MiB sequential, 50% scattered
  qd         1 MiB sequential reads through io_uring at queue depth
             1, 8 and 32, at 0%, 50% scattered and 100% residency
  fixed      spin_qdN against fixed_qdN, at the qd sweep's depths and
             residencies; kbvec against kbvec_off at 0%, 50%
             scattered and 100%
  two        spin_sweep=two only: the residency sweep's scattered 30,
             50 and 70% points on a file on each of the first two rig
             drives (sweeps drive0 and drive1), each drive limited
             apart (spin_iomax=nvme0n1=...,nvme1n1=...); one calibrated
             model for both, the learned one per drive
  raid0      spin_sweep=raid0 only: md raid0 over the first three rig
             drives (128 KiB chunks) with XFS, a 256 MiB file, 1 MiB
             sequential reads at contiguous 0, 50 and 100% and
             scattered 30, 50 and 70%, synchronous and through
             io_uring at depth 8; the members may be limited
             (spin_iomax), each to its own rate
  app        SPIN's scenario: a log writer appends to four files
             while a scanner reads them into device memory; the
             last quarter of each file was just written (hot)
  regress    ordinary buffered reads into RAM, router on and off
             (bench-regress), with spin_regress=1 only
and the router's and P-readahead's counters for each spin run.

Environment (from the kernel command line):
  spin_reps=N      rounds per point (default 3; at least 5 for the
                   fully cached residency point)
  spin_pause=SECS  pause before every run (default 0.2; 0 for none)
  spin_sweep=all   (default) every sweep;
             residency  the residency sweep only;
             short      only its contiguous 0, 50 and 100% and
                        scattered 30, 50 and 70% points (spin_default
                        at 50%);
             qd         the qd sweep only
             fixed      the fixed sweep only
             two        the two-drive sweep only
             raid0      the raid0 sweep only
  spin_regress=1   add the regress rows at the end (not with
                   spin_sweep=qd or fixed)

Prints CSV between "# bench-spin: begin" and "# bench-spin: end", one
line per run:

  sweep,pattern,residency,bs,rw,jobs,mode,MB/s,extra

extra holds space-separated key=value pairs: rep=<round>, then
resident=<% spin-cache set> and, for spin runs, dma_MiB, copy_MiB,
ra_hit_MiB (spin_qdN: dma_MiB, async), or for app, writer_MiB.  Lines
starting "# calib " carry the calibration; bench-regress's
"regress,..." lines follow the runs.  scripts/bench-median.sh reduces
the runs to medians.  Destroys the data on the first rig drive (and,
with spin_sweep=two, the second).
USAGE
}
for arg; do
	case $arg in
	-h|--help) usage; exit 0 ;;
	*) echo "bench-spin: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
	esac
done

REPS=${spin_reps:-3}
PAUSE=${spin_pause:-0.2}
SWEEP=${spin_sweep:-all}
R=/sys/kernel/mm/p2p_router
SIZE=$((128 * 1024 * 1024))
DEFAULT_MODEL="4096:80000 131072:120000 1048576:380000"
DEFAULT_COPY=4000
DEFAULT_RA=200

provider=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
	[ "$(cat "$d/p2pmem/size")" -ge 268435456 ] && provider=$d && break
done
[ -n "$provider" ] || { echo "bench-spin: no 256 MiB provider"; exit 1; }
set -- $(grep -l '^SPINRIG' /sys/block/nvme*/device/serial | cut -d/ -f4 | sort)
[ $# -ge 1 ] || { echo "bench-spin: no rig drive"; exit 1; }
p2pmem="mmapshared:$provider/p2pmem/allocate"

dev=/dev/$1
if [ "$SWEEP" = raid0 ]; then
	[ $# -ge 3 ] || { echo "bench-spin: raid0 needs three rig drives"; exit 1; }
	mdadm --create /dev/md0 --run --quiet --force --level=0 \
		--chunk=128 --raid-devices=3 /dev/$1 /dev/$2 /dev/$3 || exit 1
	dev=/dev/md0
	SIZE=$((256 * 1024 * 1024))
	echo "# raid0 $dev over $1 $2 $3: pci_p2pdma=$(cat /sys/block/${dev#/dev/}/queue/pci_p2pdma) read_ahead_kb=$(cat /sys/block/${dev#/dev/}/queue/read_ahead_kb)"
fi
mkdir -p /mnt/data
mkfs.xfs -q -f "$dev" && mount "$dev" /mnt/data || exit 1
F=/mnt/data/file
LOGS=/mnt/data/log0:/mnt/data/log1:/mnt/data/log2:/mnt/data/log3
dd if=/dev/urandom of=$F bs=1M count=$((SIZE >> 20)) 2>/dev/null
F1=
if [ "$SWEEP" = two ]; then
	[ $# -ge 2 ] || { echo "bench-spin: two needs two rig drives"; exit 1; }
	mkdir -p /mnt/data1
	mkfs.xfs -q -f "/dev/$2" && mount "/dev/$2" /mnt/data1 || exit 1
	F1=/mnt/data1/file
	dd if=/dev/urandom of=$F1 bs=1M count=$((SIZE >> 20)) 2>/dev/null
fi
sync

counter() { cat "$R/stats/$1"; }

# fio_bw FILE RW BS DIRECT IOMEM BYTES JOBS [fio args] -> MB/s, page
# cache untouched.  --iomem_align=4k keeps fio's buffer off the 2 MiB
# boundary 6.12 gives a mapping of 2, 4 or 8 MiB, where under TCG a copy
# from a large folio can alias in QEMU's software TLB and run 10x slower
# (Documentation/spin/rig.rst, "Copies under TCG").
fio_bw() {
	f=$1 rw=$2 bs=$3 direct=$4 iomem=$5 bytes=$6 jobs=$7
	shift 7
	fio --name=b --filename="$f" --rw="$rw" --bs="$bs" --direct="$direct" \
		--ioengine=psync --iomem="$iomem" --iomem_align=4k --size=$((bytes / jobs)) \
		--numjobs="$jobs" --offset_increment=$((bytes / jobs)) \
		--group_reporting --invalidate=0 --minimal "$@" 2>/dev/null |
		awk -F';' '{ printf "%.0f\n", $7 * 1024 / 1e6 }'
}

# point_once SWEEP PATTERN RES BS RW JOBS MODES...: every mode once a round,
# one CSV line per run.  Before each run spin-cache makes RES% of the
# file resident (PATTERN contig or scatter); PATTERN log is SPIN's
# scenario (the app sweep): four logs written afresh, the last quarter
# of each just appended, and a writer appending to a fifth meanwhile.
point_once() {
	sweep=$1 pat=$2 res=$3 bs=$4 rw=$5 jobs=$6
	shift 6
	bytes=$SIZE
	[ "$(echo "$bs" | tr -d k)" != "$bs" ] &&
		[ "${bs%k}" -lt 256 ] && bytes=$((32 * 1024 * 1024))
	bsb=$(echo "$bs" | sed 's/k$/*1024/; s/M$/*1048576/')
	bsb=$((bsb))
	modes=$* n=$REPS file=$F
	[ "$pat" = log ] && file=$LOGS
	[ "$sweep" = drive1 ] && file=$F1
	# The fully cached point is judged to 3%: at least five rounds.
	[ "$sweep,$pat,$res" = residency,contig,100 ] && [ "$n" -lt 5 ] && n=5
	for rep in $(seq "$n"); do
	for mode in $modes; do
		if [ "$pat" = log ]; then
			rm -f /mnt/data/log*
			for i in 0 1 2 3; do
				dd if=/dev/urandom of=/mnt/data/log$i bs=1M count=24 2>/dev/null
			done
			sync
			for i in 0 1 2 3; do
				spin-cache /mnt/data/log$i 0 >/dev/null
				cat /tmp/chunk /tmp/chunk /tmp/chunk >>/mnt/data/log$i
			done
			(while :; do cat /tmp/chunk >>/mnt/data/log4; sleep 0.1; done) &
			writer=$!
			sleep 1
			extra="rep=$rep"
		else
			got=$(spin-cache $file "$res" "$pat" | cut -d' ' -f1)
			[ "$PAUSE" = 0 ] || sleep "$PAUSE" || sleep 1
			extra="rep=$rep resident=$got"
		fi
		case $mode in
		p2p)
			bw=$(fio_bw "$file" "$rw" "$bs" 1 "$p2pmem" $bytes "$jobs") ;;
		p2p_qd*)
			bw=$(fio_bw "$file" "$rw" "$bs" 1 "$p2pmem" $bytes "$jobs" \
				--ioengine=io_uring --iodepth=${mode#p2p_qd}) ;;
		pagecache_qd*)
			echo 0 >$R/enabled
			bw=$(fio_bw "$file" "$rw" "$bs" 0 "$p2pmem" $bytes "$jobs" \
				--ioengine=io_uring --iodepth=${mode#pagecache_qd})
			echo 1 >$R/enabled ;;
		spin_qd*)
			d0=$(counter p2p_bytes) a0=$(counter async_reads)
			bw=$(fio_bw "$file" "$rw" "$bs" 0 "$p2pmem" $bytes "$jobs" \
				--ioengine=io_uring --iodepth=${mode#spin_qd})
			extra="$extra dma_MiB=$((($(counter p2p_bytes) - d0) >> 20))"
			extra="$extra async=$(($(counter async_reads) - a0))" ;;
		fixed_qd*)
			d0=$(counter p2p_bytes) a0=$(counter async_reads)
			bw=$(fio_bw "$file" "$rw" "$bs" 0 "$p2pmem" $bytes "$jobs" \
				--ioengine=io_uring --fixedbufs=1 \
				--iodepth=${mode#fixed_qd})
			extra="$extra dma_MiB=$((($(counter p2p_bytes) - d0) >> 20))"
			extra="$extra async=$(($(counter async_reads) - a0))" ;;
		kbvec)
			d0=$(counter p2p_bytes) c0=$(counter cache_bytes)
			bw=$(spin-kread "$file" $bsb $bytes)
			extra="$extra dma_MiB=$((($(counter p2p_bytes) - d0) >> 20))"
			extra="$extra copy_MiB=$((($(counter cache_bytes) - c0) >> 20))" ;;
		kbvec_off)
			echo 0 >$R/enabled
			bw=$(spin-kread "$file" $bsb $bytes)
			echo 1 >$R/enabled ;;
		bounce)
			r=
			[ "$rw" = randread ] && r=-r
			if [ "$pat" = log ]; then
				# the logs one after the other, a quarter each
				bw=$(for i in 0 1 2 3; do
					spin-bounce -k /mnt/data/log$i "$provider" $bsb $((bytes / 4))
				done | awk '{ t += 32 / $1 } END { printf "%.0f\n", 128 / t }')
			else
				bw=$(spin-bounce -k $r -j "$jobs" $F "$provider" $bsb $bytes)
			fi ;;
		pagecache)
			echo 0 >$R/enabled
			bw=$(fio_bw "$file" "$rw" "$bs" 0 "$p2pmem" $bytes "$jobs")
			echo 1 >$R/enabled ;;
		spin|spin_cal|spin_default)
			[ $mode = spin ] || echo 0 >$R/learn
			d0=$(counter p2p_bytes) c0=$(counter cache_bytes) h0=$(counter ra_hits)
			bw=$(fio_bw "$file" "$rw" "$bs" 0 "$p2pmem" $bytes "$jobs")
			extra="$extra dma_MiB=$((($(counter p2p_bytes) - d0) >> 20))"
			extra="$extra copy_MiB=$((($(counter cache_bytes) - c0) >> 20))"
			extra="$extra ra_hit_MiB=$((($(counter ra_hits) - h0) >> 8))"
			echo 1 >$R/learn ;;
		esac
		if [ "$pat" = log ]; then
			kill "$writer"
			wait "$writer" 2>/dev/null
			extra="rep=$rep writer_MiB=$(($(wc -c </mnt/data/log4) >> 20))"
			rm -f /mnt/data/log4
		fi
		echo "$sweep,$pat,$res,$bs,$rw,$jobs,$mode,$bw,$extra"
	done
	done
}

# wide: the modes among point_once's lines on stdin whose runs spread
# over a quarter of their median.
wide() {
	awk -F, '{ v[$7] = v[$7] " " $8 }
	END {
		for (m in v) {
			n = split(v[m], a, " ")
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
					t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
				}
			if (a[n] - a[1] > a[int((n + 1) / 2)] / 4)
				printf "%s ", m
		}
	}'
}

# point ARGS...: point_once ARGS, tried again while wide() finds a mode,
# three tries at most; only the last try's lines are CSV.
point() {
	for try in 1 2 3; do
		out=$(point_once "$@")
		w=$(printf '%s\n' "$out" | wide)
		if [ -z "$w" ] || [ $try = 3 ]; then
			printf '%s\n' "$out"
			return
		fi
		printf '%s\n' "$out" | sed "s/^/# wide try=$try: /"
		echo "# bench-spin: $1,$2,$3,$4,$5,$6 again: spread over 25% in $w"
	done
}

echo "# bench-spin: begin"
spin-calibrate $F "$provider" | sed 's/^/# calib /'
cal_model=$(cat $R/p2p_cost_ns) cal_copy=$(cat $R/copy_mbps) cal_ra=$(cat $R/ra_mbps)
echo "sweep,pattern,residency,bs,rw,jobs,mode,MB/s,extra"

# qd_sweep: O_DIRECT, the page cache and SPIN through io_uring.
qd_sweep() {
	for qd in 1 8 32; do
		point qd contig 0 1M read 1 p2p_qd$qd pagecache_qd$qd spin_qd$qd
		point qd scatter 50 1M read 1 p2p_qd$qd pagecache_qd$qd spin_qd$qd
		point qd contig 100 1M read 1 p2p_qd$qd pagecache_qd$qd spin_qd$qd
	done
}
# fixed_sweep: io_uring READ_FIXED from a registered device buffer
# against READ, and a GPU driver's in-kernel bio_vec read
# (spin-kread, lib/test_p2pdma.c) with the router on and off.
fixed_sweep() {
	for qd in 1 8 32; do
		point fixed contig 0 1M read 1 spin_qd$qd fixed_qd$qd
		point fixed scatter 50 1M read 1 spin_qd$qd fixed_qd$qd
		point fixed contig 100 1M read 1 spin_qd$qd fixed_qd$qd
	done
	point kbvec contig 0 1M read 1 kbvec kbvec_off
	point kbvec scatter 50 1M read 1 kbvec kbvec_off
	point kbvec contig 100 1M read 1 kbvec kbvec_off
}
if [ "$SWEEP" = qd ]; then
	qd_sweep
	echo "# bench-spin: end"
	exit 0
fi
if [ "$SWEEP" = fixed ]; then
	fixed_sweep
	echo "# bench-spin: end"
	exit 0
fi
# two: the same points on a file on each of two drives of other speeds.
if [ "$SWEEP" = two ]; then
	for res in 30 50 70; do
		point drive0 scatter $res 1M read 1 p2p pagecache spin spin_cal
		point drive1 scatter $res 1M read 1 p2p pagecache spin spin_cal
	done
	for ns in $1 $2; do
		echo "# learned $ns $(cat /sys/block/$ns/queue/p2p_learned_cost_ns)"
	done
	echo "# bench-spin: end"
	exit 0
fi

# raid0: the residency points an md raid0 of fast drives meets, at
# depth 1 and 8, against O_DIRECT and the page cache at the same depth.
if [ "$SWEEP" = raid0 ]; then
	for res in 0 50 100; do
		point raid0 contig $res 1M read 1 p2p pagecache spin spin_cal
	done
	for res in 30 50 70; do
		point raid0 scatter $res 1M read 1 p2p pagecache spin spin_cal
	done
	for res in 0 50 100; do
		point raid0_qd8 contig $res 1M read 1 p2p_qd8 pagecache_qd8 spin_qd8
	done
	point raid0_qd8 scatter 50 1M read 1 p2p_qd8 pagecache_qd8 spin_qd8
	echo "# learned ${dev#/dev/} $(cat /sys/block/${dev#/dev/}/queue/p2p_learned_cost_ns)"
	echo "# bench-spin: end"
	exit 0
fi

ALL="p2p p2p_qd8 bounce pagecache spin spin_cal"
contig="0 50 80 100" scatter="10 30 40 50 60 70 90"
[ "$SWEEP" = short ] && contig="0 50 100" scatter="30 50 70"
for res in $contig; do
	point residency contig $res 1M read 1 $ALL
done
for res in $scatter; do
	point residency scatter $res 1M read 1 $ALL
done
echo "$DEFAULT_MODEL" >$R/p2p_cost_ns
echo $DEFAULT_COPY >$R/copy_mbps
echo $DEFAULT_RA >$R/ra_mbps
dres="10 50 90"
[ "$SWEEP" = short ] && dres=50
for res in $dres; do
	point residency scatter $res 1M read 1 spin_default
done
echo "$cal_model" >$R/p2p_cost_ns
echo "$cal_copy" >$R/copy_mbps
echo "$cal_ra" >$R/ra_mbps
if [ "$SWEEP" != all ]; then
	[ "${spin_regress:-0}" = 1 ] && bench-regress /mnt/data | grep '^regress,'
	echo "# bench-spin: end"
	exit 0
fi

for bs in 4k 16k 64k 256k 1M 8M; do
	point size scatter 0 $bs read 1 $ALL
done
for bs in 16k 1M 8M; do
	point size scatter 50 $bs read 1 $ALL
done
point random scatter 50 1M randread 1 $ALL
point jobs scatter 50 1M read 4 $ALL
qd_sweep
fixed_sweep

# SPIN's scenario: four logs scanned into device memory while a writer
# appends 8 MiB chunks to a fifth.
dd if=/dev/urandom of=/tmp/chunk bs=1M count=8 2>/dev/null
point app log 25 1M read 1 p2p bounce pagecache spin

[ "${spin_regress:-0}" = 1 ] && bench-regress /mnt/data | grep '^regress,'
echo "# bench-spin: end"
