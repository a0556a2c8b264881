#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Profile QEMU from the host while the rig's guest runs marked phases.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--seconds N] [rig.sh arguments...]

Boots the rig with scripts/rig.sh --mode bench and the given arguments
(for example --append 'spin_bench=cliff spin_profile=1'), and each time
the guest's console prints a line "# <anything>: profile NAME begin",
samples the QEMU process with 'perf record -e cpu-clock' for N seconds
(default 8); rig.sh's --timeout ends a guest that hangs.  Guest code runs as QEMU's translated code, which perf
shows as anonymous memory; QEMU's own helpers (softmmu TLB refills,
device emulation) appear by name.  Writes build/profile/NAME.txt, the
split by DSO and the top of 'perf report --sort dso,sym' for each
phase.  Needs perf.
USAGE
}
secs=8
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--seconds) secs=$2; shift 2 ;;
	*) break ;;
	esac
done
command -v perf >/dev/null || { echo "rig-profile: perf not installed" >&2; exit 1; }

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/profile
run=$top/build/run/bench$([ "${SPIN_DEBUG:-0}" = 1 ] && echo -debug || true)
console=$run/console.log
mkdir -p "$out"
rm -f "$console"

"$top/scripts/rig.sh" --mode bench --quiet "$@" &
rig=$!
seen=0
while kill -0 $rig 2>/dev/null; do
	sleep 0.5
	[ -f "$console" ] || continue
	mapfile -t names < <(tr -d '\r' <"$console" |
		sed -n 's/^# [^:]*: profile \(.*\) begin$/\1/p')
	while [ $seen -lt ${#names[@]} ]; do
		name=${names[$seen]}
		seen=$((seen + 1))
		pid=$(cat "$run/qemu.pid")
		if ! perf record -q -e cpu-clock -F 999 -p "$pid" -o "$out/$name.data" \
			-- sleep "$secs" >"$out/$name.log" 2>&1; then
			echo "rig-profile: $name: perf record failed ($out/$name.log)" >&2
			continue
		fi
		{
			perf report -q -i "$out/$name.data" --sort dso --stdio 2>/dev/null
			echo
			perf report -q -i "$out/$name.data" --sort dso,sym --stdio 2>/dev/null |
				head -20
		} >"$out/$name.txt" || true
		echo "rig-profile: $name: $out/$name.txt"
	done
done
wait $rig
