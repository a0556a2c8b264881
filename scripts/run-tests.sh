#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the rig in test mode, run the kselftests, and judge the run from
# the TAP and the console.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--timeout SECS] [--ksft 'run_kselftest.sh args'] [RIG-ARGS...]

Boots the rig (scripts/rig.sh --mode test), where run_kselftest.sh runs
the spin suite and writes TAP to the second serial port.  Then:
  - prints every test case's result line from the TAP,
  - ends with 'N passed, N failed, N skipped' (XFAIL counts as skipped),
  - exits non-zero if any test failed, a test program failed or timed
    out, the run did not finish (guest hang: SECS, default 2400), the
    guest panicked, or the console shows BUG:, WARNING:, Oops, a KASAN,
    KFENCE, UBSAN or lockdep report, or a hung task.
Logs stay in build/run/test/ (console.log, tap.log).
SPIN_DEBUG=1 runs the debug kernel; logs in build/run/test-debug/.
USAGE
}

top=$(cd "$(dirname "$0")/.." && pwd)
timeout=2400 rig=()
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--timeout) timeout=$2; shift ;;
	*) rig+=("$1") ;;
	esac
	shift
done

run=$top/build/run/test$([ "${SPIN_DEBUG:-0}" = 1 ] && echo -debug || true)
tap=$run/tap.log console=$run/console.log
set +e
"$top/scripts/rig.sh" --mode test --timeout "$timeout" --quiet "${rig[@]}"
rc=$?
set -e
touch "$tap" "$console"
tr -d '\r' <"$tap" >"$tap.clean"

# Nested TAP of the harness ("# ok 3 fixture.variant.test # SKIP ...")
# and the runner's own lines ("not ok 2 selftests: spin: x # TIMEOUT").
awk '
/^# (not )?ok [0-9]+ / {
	line = substr($0, 3)
	if (line ~ /^not ok/) { failed++; print "FAIL  " line; next }
	if (line ~ /# (SKIP|XFAIL)/) { skipped++; print "SKIP  " line; next }
	if (line ~ /# XPASS/) { failed++; print "XPASS " line; next }
	passed++; print "PASS  " line; next
}
/^not ok [0-9]+ selftests: / { progfail++; print "FAIL  " $0 }
END {
	printf "%d passed, %d failed, %d skipped\n", passed, failed + progfail, skipped
	exit (failed + progfail) ? 1 : 0
}' "$tap.clean" >"$run/summary" || true

bad=0
summary=$(tail -n 1 "$run/summary")
sed "\$d" "$run/summary"
if [ "$rc" = 124 ]; then
	echo "run-tests: the guest did not finish within ${timeout}s (hang)"; bad=1
elif ! grep -q '^# spin-rig: done' "$tap.clean"; then
	echo "run-tests: the guest stopped before the tests finished (rc $rc)"; bad=1
fi
if grep -nE 'Kernel panic|BUG:|WARNING:|Oops|KASAN|KFENCE|UBSAN|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|possible irq lock inversion|INFO: task .* blocked for more than' \
	"$console" | grep -v 'spin-rig:' | head -n 20 | sed 's/^/run-tests: console: /' | grep .; then
	echo "run-tests: the kernel reported a problem (see ${run#"$top"/}/console.log)"; bad=1
fi
taint=$(sed -n 's/^# spin-rig: tainted=//p' "$tap.clean")
if [ -n "$taint" ] && [ "$taint" != 0 ]; then
	echo "run-tests: the kernel is tainted ($taint)"; bad=1
fi
case "$summary" in
"0 passed, 0 failed"*) echo "run-tests: no test ran"; bad=1 ;;
*" 0 failed"*) ;;
*) bad=1 ;;
esac
echo "run-tests: logs in ${run#"$top"/}/"
echo "$summary"
exit $bad
