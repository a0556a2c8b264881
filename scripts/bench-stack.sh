#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark P2P through md raid0 and raid1 in the rig, plain and throttled.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--throttle BYTES_PER_SEC]

Boots the rig twice in bench mode (tools/spin/bench-stack.sh in the
guest): once plain, once with every drive's reads throttled to
BYTES_PER_SEC (default 200000000), which gives the rig a real drive's
ratio of drive speed to CPU-copy speed.  Each run measures O_DIRECT P2P
reads (fio, 1 MiB and 8 MiB) on one NVMe drive, on md raid0 over 2 and
3 and on md raid1 over 2, and, at 1 MiB, plain buffered pread into
device memory against the CPU-bounce baseline (pread into RAM, then
memcpy).  On raid1 it also writes 1 MiB blocks from device memory:
O_DIRECT (P2P to both legs), buffered through the P2P router, and
buffered with the router off (the page cache copies).  The throttle
limits reads only.

Writes build/bench/stack-plain.csv and build/bench/stack-throttled.csv
and prints them side by side.  Not part of the tests: numbers vary
with the host.
USAGE
}
throttle=200000000
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--throttle) throttle=$2; shift ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/bench
mkdir -p "$out"
for kind in plain throttled; do
	args=(--mode bench --timeout 1800 --quiet)
	[ $kind = throttled ] && args+=(--throttle "$throttle")
	"$top/scripts/rig.sh" "${args[@]}"
	tr -d '\r' <"$top/build/run/bench/console.log" |
		sed -n '/^# bench-stack: begin/,/^# bench-stack: end/p' |
		grep -v '^#' >"$out/stack-$kind.csv"
	[ -s "$out/stack-$kind.csv" ] ||
		{ echo "bench-stack: no results from the $kind run" >&2; exit 1; }
done
echo "MB/s; throttled = each drive's reads limited to $throttle bytes/s"
join -t, -j1 \
	<(awk -F, 'NR > 1 { print $1 "/" $2 "/" $3 "/" $4 "," $5 }' "$out/stack-plain.csv" | sort) \
	<(awk -F, 'NR > 1 { print $1 "/" $2 "/" $3 "/" $4 "," $5 }' "$out/stack-throttled.csv" | sort) |
	awk -F, 'BEGIN { printf "%-28s %8s %10s\n", "stack/members/mode/bs", "plain", "throttled" }
		{ printf "%-28s %8s %10s\n", $1, $2, $3 }'
