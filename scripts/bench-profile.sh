#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Profile a routed 1 MiB read with nothing cached against O_DIRECT.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--scenario cold|raid0_cached]

Builds an initramfs with the host's perf in it (SPIN_PERF=1
scripts/initramfs.sh), boots the rig once in bench mode with
spin_bench=profile (tools/spin/bench-profile.sh in the guest), and
writes build/bench/profile-SCENARIO.txt (tools/spin/bench-profile.sh
says what each scenario reads; default cold): each run's bandwidth, the
share of the
CPU samples in the router's own functions, and the last round's
profile of each mode.  Then puts back the initramfs without perf.
Not part of the tests: numbers vary with the host, and under TCG a
guest's per-request CPU costs weigh far more than on hardware.
USAGE
}
scenario=cold
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--scenario) scenario=${2:?}; shift ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/bench
mkdir -p "$out"
trap '"$top/scripts/initramfs.sh" >/dev/null' EXIT
SPIN_PERF=1 "$top/scripts/initramfs.sh"
"$top/scripts/rig.sh" --mode bench --timeout 1800 --quiet \
	--append "spin_bench=profile spin_profile=$scenario"
tr -d '\r' <"$top/build/run/bench/console.log" |
	sed -n '/^# bench-profile: begin/,/^# bench-profile: end/p' \
	>"$out/profile-$scenario.txt"
grep -q '^# bench-profile: end' "$out/profile-$scenario.txt" ||
	{ echo "bench-profile: the run did not finish" >&2; exit 1; }
grep -E '^(bw|share),' "$out/profile-$scenario.txt"
