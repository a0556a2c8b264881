#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark P-readahead in the rig, plain and throttled.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--throttle BYTES_PER_SEC]

Boots the rig twice in bench mode with spin_bench=readahead
(tools/spin/bench-readahead.sh in the guest) and 9 GiB sparse drives:
once plain, once with every drive's reads throttled to BYTES_PER_SEC
(default 200000000), a real drive's ratio of drive to CPU-copy speed.
Each run measures sequential 4, 16 and 64 KiB reads into device memory
four ways (O_DIRECT P2P, SPIN with P-readahead, the page-cache path
with the router off, the CPU bounce), and how much of a cached working
set of half the guest's RAM survives a sequential scan of four times
the guest's RAM into device memory (SPIN) and into RAM.

Writes build/bench/readahead-plain.csv and
build/bench/readahead-throttled.csv and prints them side by side.  Not
part of the tests: numbers vary with the host.
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
	args=(--mode bench --timeout 2400 --quiet --drive-size 9G
	      --append spin_bench=readahead)
	[ $kind = throttled ] && args+=(--throttle "$throttle")
	"$top/scripts/rig.sh" "${args[@]}"
	tr -d '\r' <"$top/build/run/bench/console.log" |
		sed -n '/^# bench-readahead: begin/,/^# bench-readahead: end/p' |
		grep -v '^#' >"$out/readahead-$kind.csv"
	[ -s "$out/readahead-$kind.csv" ] ||
		{ echo "bench-readahead: no results from the $kind run" >&2; exit 1; }
done
echo "throttled = each drive's reads limited to $throttle bytes/s"
join -t, -j1 \
	<(awk -F, 'NR > 1 { print $1 "/" $2 "/" $3 " (" $5 ")," $4 }' "$out/readahead-plain.csv" | sort) \
	<(awk -F, 'NR > 1 { print $1 "/" $2 "/" $3 " (" $5 ")," $4 }' "$out/readahead-throttled.csv" | sort) |
	awk -F, 'BEGIN { printf "%-52s %8s %10s\n", "test/mode/bs (unit)", "plain", "throttled" }
		{ printf "%-52s %8s %10s\n", $1, $2, $3 }'
