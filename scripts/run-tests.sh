#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the rig in test mode, run the kselftests, and judge the run from
# the TAP and the console.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--timeout SECS] [--ksft 'run_kselftest.sh args']
          [--run NAME] [--judge DIR] [RIG-ARGS...]

Boots the rig (scripts/rig.sh --mode test), where run_kselftest.sh runs
the spin suite and writes TAP to the second serial port.  Then:
  - prints every test case's result line from the TAP, and near the
    end the last lines the first failed cases printed,
  - ends with 'N passed, N failed, N skipped, N xfail',
  - exits non-zero if any test failed, a test program failed, skipped
    or timed out, a program that ran (all of them, unless --ksft names
    some with -t) reported fewer or more cases than tests/case-counts
    says, a test case skipped for a reason that is not in the
    allow-list (tests/skip-allowlist: test name, skip reason and
    why), an XFAIL names no issue ("#NN") in its
    message, a test passed that was marked XFAIL (XPASS), the guest did
    not run the suite in strict mode (SPIN_STRICT=1, which
    scripts/guest-init sets: a test that does not find the rig hardware
    it needs fails instead of skipping), the run did not finish (guest
    hang: SECS, default 2400), the guest panicked, or the console shows
    BUG:, WARNING:, Oops, a KASAN, KFENCE, UBSAN or lockdep report, a hung
    task, or a taint.
  --run NAME   logs in build/run/NAME/ (a suite split across boots
               keeps each boot's logs)
  --judge DIR  boot nothing: judge the tap.log and console.log of an
               earlier run in DIR (after editing the allow-list, say)
A guest that dies of a stale int3 (the first Oops is "Oops: int3" at a
site that no longer holds one and where vmlinux holds none: a TCG
hazard of text patching, see the comment at stale_int3) is booted once
more and the suite run again; its console is kept in
build/run/console-stale-int3-<run directory>.log.
Logs stay in build/run/test/ (console.log, tap.log, summary).
SPIN_DEBUG=1 runs the debug kernel; logs in build/run/test-debug/.
USAGE
}

top=$(cd "$(dirname "$0")/.." && pwd)
allow=tests/skip-allowlist
counts=tests/case-counts
timeout=2400 judge="" name="" rig=()
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--timeout) timeout=$2; shift ;;
	--judge) judge=$2; shift ;;
	--run) name=$2; rig+=(--run "$2"); shift ;;
	*) rig+=("$1") ;;
	esac
	shift
done
for f in "$allow" "$counts"; do
	[ -f "$top/$f" ] || { echo "run-tests: $f missing" >&2; exit 1; }
done
# The programs this run must report on: those --ksft names with -t
# (a boot of the suite split across boots), else all of them.  Per-program
# arguments (KSELFTEST_<PROG>_ARGS in --append) pick cases: no count then.
# run_kselftest.sh's -s and -p send the results elsewhere than the TAP,
# -l and -d run nothing: no count then either.  --judge takes both from
# the kernel command line the run was booted with.
want="" count=1
args=("${rig[@]}")
if [ -n "$judge" ] && [ -r "$judge/qemu-cmdline" ]; then
	args+=(--ksft "$(sed -n 's/.*spin_ksft="\([^"]*\)".*/\1/p' "$judge/qemu-cmdline")")
	grep -q 'KSELFTEST_[A-Z0-9_]*_ARGS=' "$judge/qemu-cmdline" && count=0
fi
for ((i = 0; i < ${#args[@]}; i++)); do
	case "${args[i]}" in
	--ksft)
		for a in ${args[i + 1]:-}; do
			case "$a" in
			spin:*) want+=" ${a#spin:}" ;;
			-s|--summary|-p|--per-test-log|-l|--list|-d|--dry-run) count=0 ;;
			esac
		done ;;
	*KSELFTEST_*_ARGS=*) count=0 ;;
	esac
done

# The first Oops in console $1: from its "Oops" line to the end of its
# trace, other CPUs' lines included (so not before its Code: line: an
# end marker before that is another CPU's).
first_oops() {
	awk '{ sub(/\r$/, "") }
	     !n && /Oops/ { n = 1 }
	     n { print }
	     n && /Code: / { c = 1 }
	     c && /---\[ end trace|Kernel panic/ { exit }' "$1"
}

# The byte that vmlinux holds just before the RIP of RIP line $1
# ("RIP: 0010:SYM+OFF/SIZE"), as two hex digits; nothing if SYM is not
# one function of vmlinux holding OFF (a module's RIP ends in "[mod]").
image_byte() {
	local rip=${1#*RIP: 0010:} sym off size addr a z n=0
	local vmlinux=${SPIN_OBJ:-$top/build/obj$([ "${SPIN_DEBUG:-0}" = 1 ] && echo -debug || true)}/vmlinux

	case "$rip" in *"]"*) return 0 ;; esac
	rip=${rip%% *} sym=${rip%%+*} off=${rip#*+}
	size=${off#*/} off=${off%/*}
	[ -r "$vmlinux" ] && [[ $off == 0x* && $size == 0x* ]] || return 0
	# kallsyms sizes a symbol up to the next one, padding included;
	# nm sizes it by its code, or not at all.
	while read -r a z; do
		[ $((16#$z)) -le $((size)) ] || continue
		[ $((16#$z)) = 0 ] || [ $((off - 1)) -lt $((16#$z)) ] || continue
		addr=$a n=$((n + 1))
	done < <(nm -S "$vmlinux" |
		awk -v s="$sym" '$NF == s && $(NF - 1) ~ /^[tT]$/ { print $1, NF == 4 ? $2 : 0 }')
	[ "$n" = 1 ] || return 0
	a=$(printf '%x' $((16#$addr + off - 1)))
	objdump -s --start-address=0x"$a" --stop-address=0x"$(printf '%x' $((16#$a + 1)))" \
		"$vmlinux" | awk -v a="$a" '$1 == a { print substr($2, 1, 2) }'
}

# Did the guest die of a stale int3: the first Oops an "Oops: int3"
# whose trap site no longer holds one (in its Code: line, the byte
# before the RIP is not cc) and that vmlinux does not hold as an int3
# either?  Text patching (static keys, tracepoints, ftrace) puts an
# int3 on a site, then the new instruction; under TCG a vCPU can still
# execute the int3 after the patch is done, which no real CPU does.  A
# site still in the middle of a patch would have been emulated by
# poke_int3_handler(), so a stale int3 always shows the finished
# instruction.  Only then is the suite run once more, from a fresh
# boot.  Prints why, either way.
stale_int3() {
	local oops rip code byte prev verdict rc

	oops=$(first_oops "$1")
	case "$(head -n 1 <<<"$oops")" in *"Oops: int3"*) ;; *) return 1 ;; esac
	rip=$(grep -m1 'RIP: 0010:' <<<"$oops" || true)
	code=$(grep -m1 'Code:' <<<"$oops" || true)
	prev=$(echo "$code" | sed -n 's/.* \([0-9a-f][0-9a-f]\) <[0-9a-f][0-9a-f]>.*/\1/p')
	byte=$([ -z "$rip" ] || image_byte "$rip")
	rip=${rip#*RIP: 0010:}
	if [ -n "$prev" ] && [ "$prev" != cc ] && [ "$byte" != cc ]; then
		verdict=stale rc=0
	else
		verdict="not stale" rc=1
	fi
	echo "run-tests: first Oops is an int3 at ${rip:-an unknown RIP}; the Code: line" \
		"holds ${prev:-nothing} before the RIP, vmlinux ${byte:-cannot say}: $verdict" >&2
	return $rc
}

if [ -n "$judge" ]; then
	run=$(cd "$judge" && pwd) rc=0
else
	run=$top/build/run/${name:-test$([ "${SPIN_DEBUG:-0}" = 1 ] && echo -debug || true)}
	kept=${run%/*}/console-stale-int3-${run##*/}.log
	rm -f "$kept"
	for attempt in 1 2; do
		set +e
		"$top/scripts/rig.sh" --mode test --timeout "$timeout" --quiet "${rig[@]}"
		rc=$?
		set -e
		[ $attempt = 1 ] && stale_int3 "$run/console.log" || break
		# Not in $run, which the next boot empties.
		cp "$run/console.log" "$kept"
		echo "run-tests: the guest died of a stale int3 (a TCG hazard, kept in" \
			"${kept#"$top"/}); running the suite once more" >&2
	done
fi
tap=$run/tap.log console=$run/console.log
touch "$tap" "$console"
tr -d '\r' <"$tap" >"$tap.clean"

# Nested TAP of the harness ("# ok 3 fixture.variant.test # SKIP reason")
# and the runner's own lines ("not ok 2 selftests: spin: x # TIMEOUT",
# "ok 2 selftests: spin: x # SKIP").  The allow-list is read first.
awk -v allow="$top/$allow" -v name="$allow" -v counts="$top/$counts" \
    -v cname="$counts" -v want="$want" -v count="$count" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
# A "*" in the pattern stands for one whole dot-separated part.
function name_matches(pat, test,   p, t, i, n) {
	n = split(pat, p, ".")
	if (n != split(test, t, "."))
		return 0
	for (i = 1; i <= n; i++)
		if (p[i] != "*" && p[i] != t[i])
			return 0
	return 1
}
function allowed(test, reason,   i) {
	for (i = 1; i <= nallow; i++)
		if (reason == areason[i] && name_matches(aname[i], test))
			return 1
	return 0
}
function bad(line, why) {
	failed++
	print "FAIL  " line
	print "        ^ " why
	nbad++
	badline[nbad] = line "  (" why ")"
}
FILENAME == counts {
	if ($0 ~ /^[ \t]*(#|$)/)
		next
	if (NF != 2 || $2 !~ /^[0-9]+$/) {
		bad(cname ":" FNR ": " $0, "entries are PROGRAM CASES")
		next
	}
	ncount++
	cprog[ncount] = $1
	ccases[$1] = $2
	next
}
FILENAME == allow {
	if ($0 ~ /^[ \t]*(#|$)/)
		next
	if (split($0, f, "|") != 3 || trim(f[1]) == "" || trim(f[2]) == "" ||
	    trim(f[3]) == "") {
		bad(name ":" FNR ": " $0, "allow-list entries are TEST | SKIP REASON | WHY")
		next
	}
	nallow++
	aname[nallow] = trim(f[1])
	areason[nallow] = trim(f[2])
	next
}
# What a failed case printed (its TH_LOG and assertion lines) is kept,
# and shown at the end, where a log cut to its last lines still has it.
function why_failed(test,   i, from) {
	if (++nwhy > 3)
		return
	from = ndiag > 12 ? ndiag - 11 : 1
	why[nwhy] = "run-tests: " test " printed:"
	for (i = from; i <= ndiag; i++)
		why[nwhy] = why[nwhy] "\nrun-tests:   " diag[i]
}
/^# selftests: spin: / { prog = $4; ran[prog] = 1; ndiag = 0; next }
/^# # +RUN / { ndiag = 0; next }
/^# # / { diag[++ndiag] = substr($0, 5); next }
/^# (not )?ok [0-9]+ / {
	cases[prog]++
	line = substr($0, 3)
	if (line ~ /^not ok/) {
		failed++; print "FAIL  " line
		why_failed(prog ": " line)
		ndiag = 0
		next
	}
	ndiag = 0
	rest = line
	sub(/^ok [0-9]+ /, "", rest)
	i = index(rest, " # ")
	test = i ? substr(rest, 1, i - 1) : rest
	directive = i ? trim(substr(rest, i + 3)) : ""
	kind = directive
	sub(/[ \t].*/, "", kind)
	reason = trim(substr(directive, length(kind) + 1))
	if (kind == "SKIP") {
		if (allowed(test, reason)) { skipped++; print "SKIP  " line }
		else bad(line, "SKIP not in " name)
	} else if (kind == "XFAIL") {
		if (reason ~ /#[0-9]+/) { xfail++; print "XFAIL " line }
		else bad(line, "XFAIL that names no issue (#NN)")
	} else if (kind == "XPASS") {
		failed++; print "XPASS " line
	} else {
		passed++; print "PASS  " line
	}
	next
}
/^not ok [0-9]+ selftests: / { progfail++; print "FAIL  " $0 }
/^ok [0-9]+ selftests: .* # SKIP/ { bad($0, "a whole test program skipped") }
END {
	if (count) {
		n = split(want, w, " ")
		if (!n)
			for (i = 1; i <= ncount; i++)
				w[++n] = cprog[i]
		for (i = 1; i <= n; i++) {
			p = w[i]
			if (!(p in ccases))
				bad(p, "no case count in " cname)
			else if (cases[p] + 0 != ccases[p])
				bad(p, sprintf("reported %d cases, %s says %d", cases[p], cname, ccases[p]))
		}
		for (p in ran)
			if (!(p in ccases))
				bad(p, "no case count in " cname)
	}
	for (i = 1; i <= nwhy && i <= 3; i++)
		print why[i]
	if (nwhy > 3)
		printf "run-tests: (and %d more failed cases)\n", nwhy - 4
	if (nbad) {
		printf "run-tests: %d result(s) failed the run by rule:\n", nbad
		for (i = 1; i <= nbad; i++)
			print "run-tests:   " badline[i]
	}
	printf "%d passed, %d failed, %d skipped, %d xfail\n", passed,
	       failed + progfail, skipped, xfail
	exit (failed + progfail) ? 1 : 0
}' "$top/$counts" "$top/$allow" "$tap.clean" >"$run/summary" || true

bad=0
summary=$(tail -n 1 "$run/summary")
sed "\$d" "$run/summary"
if [ "$rc" = 124 ]; then
	echo "run-tests: the guest did not finish within ${timeout}s (hang)"; bad=1
elif ! grep -q '^# spin-rig: done' "$tap.clean"; then
	echo "run-tests: the guest stopped before the tests finished (rc $rc)"; bad=1
fi
# Off the rig a missing drive or provider skips its case; on the rig it
# must fail it.  A guest whose /init did not say so ran the suite lax.
if ! grep -q '^# spin-rig: SPIN_STRICT=1$' "$tap.clean"; then
	echo "run-tests: the suite did not run in strict mode (no" \
		"'# spin-rig: SPIN_STRICT=1' in the TAP; scripts/guest-init sets it)"
	bad=1
fi
# Collected first: with pipefail, "grep | head" fails when head stops
# reading early, and so would hide a console with many reports.
hits=$(grep -nE 'Kernel panic|BUG:|WARNING:|Oops|KASAN|KFENCE|UBSAN|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|possible irq lock inversion|INFO: task .* blocked for more than' \
	"$console" | grep -v 'spin-rig:' || true)
if [ -n "$hits" ]; then
	head -n 20 <<<"$hits" | sed 's/^/run-tests: console: /'
	echo "run-tests: the kernel reported a problem (see ${run#"$top"/}/console.log)"; bad=1
	first_oops "$console" | grep -m3 -E 'Oops|RIP: |Code: ' | sed 's/^/run-tests: first Oops: /' || true
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
