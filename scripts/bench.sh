#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The benchmark: SPIN against every baseline, plain and throttled rig,
# and the unpatched kernel for the regression rows.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--throttle BYTES_PER_SEC] [--fast BYTES_PER_SEC]
          [--two LIMITS] [--reps N] [--rigs "KIND..."]
          [--no-base | --base-only]

Boots the rig nine times in bench mode, with spin_bench=spin
(tools/spin/bench-spin.sh) in the first six; each calibrates a cost
model in its own boot (spin-calibrate) for spin_cal, while the router
learns its own, then runs the sweeps, every point --reps times
(default 3):
  1. throttled: every drive's reads limited to BYTES_PER_SEC (default
     200000000) by QEMU's throttle group, a drive slower than the
     guest's CPU copy, as a real SSD is against a real CPU; every
     sweep;
  2. fast: the drives limited to --fast (default 1000000000) by cgroup
     v2 io.max in the guest (spin-iomax), about twice the guest's copy
     speed; every sweep.  QEMU's throttle lets a tenth of a second's
     bytes through at once, which at this rate is most of a run
     ('make bench-limit' shows it);
  two. two drives under the switch, limited apart by io.max (--two,
     default nvme0n1=200000000,nvme1n1=1000000000): spin_sweep=two,
     the learned model per drive against one calibrated model;
  raid0. md raid0 over the three rig drives with XFS
     (spin_sweep=raid0), unthrottled; raid0fast: the same with each
     member held to --fast by io.max: the GPU server's array;
  3. plain: no limit (QEMU's DMA is 4-8x the guest's copy); six
     points of the residency sweep and the regression rows
     (bench-regress, router on and off);
  4. the plain rig again, spin_bench=cliff (tools/spin/bench-cliff.sh):
     cached reads into device memory and RAM by request size, 64 KiB
     to 8 MiB, router on and off, large and 4 KiB folios;
  5. and 6. the unpatched kernel (build/obj-base,
     scripts/kernel-base.sh): spin_bench=regress, the regression rows'
     baseline, and spin_bench=cliff; --no-base skips them, --base-only
     runs only them (and the report, from what an earlier run left in
     build/bench).
--rigs picks the boots, from "throttled fast plain two raid0 raid0fast
cliff" (the default, in that order).
scripts/bench-median.sh reduces each run's CSV to medians with their
spread, and scripts/bench-report.sh makes the tables and the plots.

Writes build/bench/spin-RIG-runs.csv (every run), spin-RIG.csv (the
medians), regress-base.csv, cliff-spin.csv and cliff-base.csv, the
calibrations (calib-RIG.txt) and the consoles (console-RIG.log).
About an hour and a half on 2 cores.  Not part of
the tests: the numbers depend on the host.
USAGE
}
throttle=200000000 fast=1000000000 reps=3 base=1
two=nvme0n1=200000000,nvme1n1=1000000000
rigs="throttled fast plain two raid0 raid0fast cliff"
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--throttle) throttle=$2; shift ;;
	--fast) fast=$2; shift ;;
	--two) two=$2; shift ;;
	--rigs) rigs=$2; shift ;;
	--reps) reps=$2; shift ;;
	--no-base) base=0 ;;
	--base-only) rigs= ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/bench
mkdir -p "$out"

boot() {	# name, then rig.sh arguments
	local name=$1
	shift
	# A boot that runs out of time still leaves its console: keep it.
	"$top/scripts/rig.sh" --mode bench --timeout 3600 --quiet "$@" ||
		echo "bench: the $name boot ended with status $?" >&2
	tr -d '\r' <"$top/build/run/bench/console.log" >"$out/console-$name.log"
}

for kind in $rigs; do
	case $kind in
	throttled) args=(--throttle "$throttle" --append "spin_bench=spin spin_reps=$reps") ;;
	fast) args=(--append "spin_bench=spin spin_reps=$reps spin_iomax=$fast") ;;
	plain) args=(--append "spin_bench=spin spin_reps=$reps spin_pause=0 spin_sweep=short spin_regress=1") ;;
	two) args=(--append "spin_bench=spin spin_reps=$reps spin_sweep=two spin_iomax=$two") ;;
	raid0) args=(--append "spin_bench=spin spin_reps=$reps spin_sweep=raid0") ;;
	raid0fast) args=(--append "spin_bench=spin spin_reps=$reps spin_sweep=raid0 spin_iomax=$fast") ;;
	cliff) continue ;;
	*) echo "bench: unknown rig '$kind'" >&2; exit 2 ;;
	esac
	boot $kind "${args[@]}"
	sed -n '/^# bench-spin: begin/,/^# bench-spin: end/p' "$out/console-$kind.log" |
		grep -v '^#' >"$out/spin-$kind-runs.csv"
	sed -n 's/^# calib //p' "$out/console-$kind.log" >"$out/calib-$kind.txt"
	sed -n 's/^# learned //p' "$out/console-$kind.log" >"$out/learned-$kind.txt"
	grep -q '^# bench-spin: end' "$out/console-$kind.log" ||
		{ echo "bench: the $kind run did not finish (console-$kind.log)" >&2; exit 1; }
	"$top/scripts/bench-median.sh" "$out/spin-$kind-runs.csv" >"$out/spin-$kind.csv"
done

# cliff NAME [rig.sh arguments]: the size rows of one kernel.
cliff() {
	local name=$1
	shift
	boot "cliff-$name" "$@" --append "spin_bench=cliff spin_reps=$reps"
	grep -q '^# bench-cliff: end' "$out/console-cliff-$name.log" ||
		{ echo "bench: the cliff-$name run did not finish (console-cliff-$name.log)" >&2; exit 1; }
	grep '^cliff,' "$out/console-cliff-$name.log" >"$out/cliff-$name.csv"
}
case " $rigs " in *" cliff "*) cliff spin ;; esac

if [ $base = 1 ]; then
	"$top/scripts/kernel-base.sh"
	SPIN_OBJ=$top/build/obj-base boot base --append spin_bench=regress
	grep '^regress,' "$out/console-base.log" >"$out/regress-base.csv" ||
		{ echo "bench: the unpatched run gave no rows (console-base.log)" >&2; exit 1; }
	SPIN_OBJ=$top/build/obj-base cliff base
fi
echo "throttled = each drive's reads limited to $throttle bytes/s (QEMU), fast = $fast (io.max), two = $two"
"$top/scripts/bench-report.sh"
