#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The benchmark: SPIN against every baseline, plain and throttled rig,
# and the unpatched kernel for the regression rows.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--throttle BYTES_PER_SEC] [--no-base]

Boots the rig three times in bench mode:
  1. plain, spin_bench=spin (tools/spin/bench-spin.sh): spin-calibrate
     fits the router's cost model to the rig, then every sweep;
  2. the same with every drive's reads throttled to BYTES_PER_SEC
     (default 200000000), a real drive's ratio of drive to CPU-copy
     speed;
  3. the unpatched kernel (build/obj-base, scripts/kernel-base.sh),
     spin_bench=regress (tools/spin/bench-regress.sh), the regression
     rows' baseline; --no-base skips it.
Then scripts/bench-report.sh makes the tables and the plots.

Writes build/bench/spin-plain.csv, spin-throttled.csv,
regress-base.csv, the calibrations (calib-*.txt) and the consoles
(console-*.log).  About 20 minutes on 2 cores.  Not part of the tests:
the numbers depend on the host.
USAGE
}
throttle=200000000 base=1
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--throttle) throttle=$2; shift ;;
	--no-base) base=0 ;;
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
	"$top/scripts/rig.sh" --mode bench --timeout 2400 --quiet "$@"
	tr -d '\r' <"$top/build/run/bench/console.log" >"$out/console-$name.log"
}

for kind in plain throttled; do
	args=(--append spin_bench=spin)
	[ $kind = throttled ] && args+=(--throttle "$throttle")
	boot $kind "${args[@]}"
	sed -n '/^# bench-spin: begin/,/^# bench-spin: end/p' "$out/console-$kind.log" |
		grep -v '^#' >"$out/spin-$kind.csv"
	sed -n 's/^# calib //p' "$out/console-$kind.log" >"$out/calib-$kind.txt"
	[ "$(wc -l <"$out/spin-$kind.csv")" -gt 100 ] ||
		{ echo "bench: the $kind run did not finish (console-$kind.log)" >&2; exit 1; }
done

if [ $base = 1 ]; then
	"$top/scripts/kernel-base.sh"
	SPIN_OBJ=$top/build/obj-base boot base --append spin_bench=regress
	grep '^regress,' "$out/console-base.log" >"$out/regress-base.csv" ||
		{ echo "bench: the unpatched run gave no rows (console-base.log)" >&2; exit 1; }
fi
echo "throttled = each drive's reads limited to $throttle bytes/s"
"$top/scripts/bench-report.sh"
