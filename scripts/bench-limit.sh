#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Check that a limit on the rig's drives holds: QEMU's throttle group
# against cgroup v2 io.max.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--limit BYTES_PER_SEC]

Boots the rig twice in bench mode with spin_bench=limit
(tools/spin/bench-limit.sh in the guest): once with the drives' reads
limited to BYTES_PER_SEC (default 1000000000) by QEMU's throttle group
(scripts/rig.sh --throttle), once by cgroup v2 io.max in the guest
(spin_iomax, tools/spin/spin-iomax).  Each measures O_DIRECT reads for
1 s and 10 s after a second's ramp, three runs each, and 128 MiB and
512 MiB runs after 0.2 s idle, as a benchmark run is made, five each.  A limiter is
valid for the benchmark when every median is within 5% of the limit.

Writes build/bench/limit-{qemu,iomax}.csv and prints, per limiter and
run length, the median, min and max MB/s, the median over the limit,
and the fastest 100 ms window.  Not part of the tests.
USAGE
}
limit=1000000000
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--limit) limit=$2; shift ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/bench
mkdir -p "$out"
for kind in qemu iomax; do
	args=(--mode bench --timeout 900 --quiet)
	if [ $kind = qemu ]; then
		args+=(--throttle "$limit" --append spin_bench=limit)
	else
		args+=(--append "spin_bench=limit spin_iomax=$limit")
	fi
	"$top/scripts/rig.sh" "${args[@]}"
	tr -d '\r' <"$top/build/run/bench/console.log" |
		sed -n '/^# bench-limit: begin/,/^# bench-limit: end/p' |
		grep -v '^#' >"$out/limit-$kind.csv"
	[ "$(wc -l <"$out/limit-$kind.csv")" -gt 1 ] ||
		{ echo "bench-limit: no results from the $kind run" >&2; exit 1; }
done
printf "%-7s %5s %16s %9s %14s %s\n" limiter secs "MB/s med (min-max)" \
	med/limit max_100ms valid
for kind in qemu iomax; do
	for secs in 1 10 run128M run512M; do
		awk -F, -v s="$secs" -v k="$kind" -v lim="$limit" '
		NR > 1 && $1 == s { v[n++] = $3; if ($4 > mx) mx = $4 }
		END {
			for (i = 1; i < n; i++) for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
				x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
			m = v[int((n - 1) / 2)]; r = m * 1e6 / lim
			printf "%-7s %5s %6d (%d-%d) %9.3f %14d %s\n", k, s, m, v[0],
				v[n - 1], r, mx, (r >= 0.95 && r <= 1.05) ? "yes" : "no"
		}' "$out/limit-$kind.csv"
	done
done
