#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# spin-stat (tools/spin/spin-stat, /usr/bin/spin-stat in the rig) against
# the rig of scripts/rig.sh:
#
#  - the command line: --help, an unknown option, no P2P router;
#  - providers: the 256 MiB ivshmem below the switch reaches every
#    SPINRIG drive and the multipath namespace, and not SPINFAR0 (own
#    root port); the 64 MiB ivshmem (own root port) reaches no SPINRIG
#    drive; an md raid0 over two SPINRIG drives reaches the first
#    provider and not the second;
#  - knobs: every file of /sys/kernel/mm/p2p_router with its value;
#  - counters: every counter of stats/; while fio reads a SPINRIG drive
#    into device memory with plain reads, the rate mode shows a nonzero
#    DMA byte rate;
#  - check: the kernel's verdict on one read into one provider: routed
#    (a drive into the near provider, the bytes DMAed and right), and
#    not routed, each for its reason: the far provider is unreachable,
#    the router is off, vfat never offers a read, a loop device under
#    ext4 takes no P2PDMA pages.
#
# A missing spin-stat or tool is a failure, not a skip.  A case whose
# hardware is absent (a provider, a drive, the multipath namespace, the
# device bound to test_p2pdma) fails in strict mode (SPIN_STRICT=1, which
# scripts/guest-init sets on the rig) and skips elsewhere, with the reason
# ("needs ..."), as SPIN_NEED() does in spin_util.h.  Off the rig, the
# drives are those named in $SPIN_TEST_NVME, and the near provider, if
# none has the rig's size, is one that spin-stat says reaches the first
# of them.  Needs root; the md case writes superblocks to the first two
# drives.
#
# It tests this project's tool, not the kernel, so it is not a patch of
# the series: scripts/selftests.sh installs it into the spin/ directory
# of the installed kselftests and lists it in kselftest-list.txt before
# lifecycle_test.sh, which removes the provider it looks at.  It runs
# from there (it sources ../kselftest/ktap_helpers.sh), not from tests/.

DIR=$(dirname "$(readlink -f "$0")")
# shellcheck source=/dev/null
. "$DIR/../kselftest/ktap_helpers.sh"

ROUTER=/sys/kernel/mm/p2p_router
PCI=/sys/bus/pci/devices
NEAR_SIZE=268435456	# rig.sh: 256 MiB ivshmem below the switch
FAR_SIZE=67108864	# rig.sh: 64 MiB ivshmem on its own root port
MD=md99
TMP=$(mktemp -d /tmp/spin_stat_test.XXXXXX)
fio_pid=""

enabled=""
md_members=""
mounted=""
loopdev=""
rig=""

# Whether md array $1 (md99) exists and is this test's: every member in
# its slaves/ one of the drives in $rig.  An array of any other member
# belongs to the machine, and is never stopped.
md_ours() {
	[ -d "/sys/block/$1/slaves" ] || return 1
	for s in "/sys/block/$1/slaves"/*; do
		[ -e "$s" ] || continue
		# shellcheck disable=SC2086,SC2116 # the words of $rig, on one line
		case " $(echo $rig) " in
		*" ${s##*/} "*) ;;
		*) return 1 ;;
		esac
	done
	return 0
}

cleanup() {
	[ -n "$fio_pid" ] && kill "$fio_pid" 2>/dev/null && wait "$fio_pid"
	md_ours $MD && mdadm --stop /dev/$MD >/dev/null 2>&1
	# shellcheck disable=SC2086
	[ -n "$md_members" ] && mdadm --zero-superblock $md_members >/dev/null 2>&1
	[ -n "$enabled" ] && echo "$enabled" >"$ROUTER/enabled"
	[ -n "$mounted" ] && umount "$mounted"
	[ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
	rm -rf "$TMP"
}
# busybox ash runs the EXIT trap on exit only: a timeout's SIGTERM must
# clean up too (fio holding device memory, md99, the router switch).
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
failed=0

# Diagnostics: a file or a message, each line as a TAP comment.
diag() {
	if [ -f "$1" ]; then
		sed 's/^/# /' "$1"
	else
		printf '%s\n' "$*" | sed 's/^/# /'
	fi
}

# Report case $1 from $ok.
result() {
	if [ "$ok" = 1 ]; then
		ktap_test_pass "$1"
	else
		ktap_test_fail "$1"
		failed=1
	fi
}

strict=0
[ "${SPIN_STRICT:-}" = 1 ] && strict=1

# Add $1 to $need: what the case about to run needs and does not find.
needs() {
	need="${need:+$need; }$1"
}

# Report case $1 as one whose hardware ($need) is absent, if it is: a
# failure in strict mode, else a skip with the reason.  True if so.
# (ktap_test_skip() takes no reason: its counters are kept here.)
missing() {
	[ -n "$need" ] || return 1
	if [ $strict = 1 ]; then
		diag "rig hardware missing: $need"
		ktap_test_fail "$1"
		failed=1
	else
		echo "ok $KTAP_TESTNO $1 # SKIP needs $need"
		KTAP_TESTNO=$((KTAP_TESTNO + 1))
		KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
	fi
	return 0
}

# The published provider whose p2pmem/size is $1.
provider_of_size() {
	for d in "$PCI"/*; do
		[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
		[ "$(cat "$d/p2pmem/size")" = "$1" ] && echo "${d##*/}"
	done
}

# NVMe namespaces (not multipath path devices) whose serial starts
# with $1, by name.
nvme_by_serial() {
	for b in /sys/block/nvme*; do
		case "${b##*/}" in *c*) continue ;; esac
		s=$(cat "$b/device/serial" 2>/dev/null)
		case "$s" in "$1"*) echo "${b##*/}" ;; esac
	done
}

# The drives the tests may write to, by name, as nvme_rig_ns() finds
# them: those named in $SPIN_TEST_NVME (spaces or commas), else the
# SPINRIG ones.
rig_drives() {
	if [ -n "${SPIN_TEST_NVME+set}" ]; then
		for n in $(echo "$SPIN_TEST_NVME" | tr ',' ' '); do
			case "$n" in nvme*n*) ;; *) continue ;; esac
			[ -e "/sys/block/$n" ] && echo "$n"
		done | sort
	else
		nvme_by_serial SPINRIG
	fi
}

# The rows of provider $2's table in spin-stat output $1.
rows_of() {
	awk -v p="$2" '
		$1 == "provider" { inside = ($2 == p); next }
		inside && /^$/ { inside = 0 }
		inside && $1 != "device" && $1 != "at" { print }' "$1"
}

# The reach column ("yes", "maybe", "no") of device $3 in provider $2's
# table of output $1; empty if the device is not listed.
reach_of() {
	rows_of "$1" "$2" | awk -v d="$3" '$1 == d { print $6 }'
}

# Expect reach $2 ("yes", "maybe") from provider $1 to each device after
# them in spin-stat's output $TMP/prov; clears ok otherwise.
want_reach() {
	wr_p=$1 wr_want=$2
	shift 2
	for wr_n; do
		wr_r=$(reach_of "$TMP/prov" "$wr_p" "$wr_n")
		[ "$wr_r" = "$wr_want" ] ||
			{ ok=0; diag "$wr_p -> $wr_n: '$wr_r', want $wr_want"; }
	done
}

ktap_print_header
ktap_set_plan 16

if ! command -v spin-stat >/dev/null; then
	ktap_exit_fail_msg "spin-stat is not in PATH ($PATH)"
fi

# 1: the command line.
ok=1
spin-stat --help >"$TMP/help" 2>&1 || { ok=0; diag "--help failed"; }
grep -q '^Usage: spin-stat' "$TMP/help" || { ok=0; diag "--help: no usage"; }
spin-stat --bogus >/dev/null 2>&1
rc=$?
[ $rc = 2 ] || { ok=0; diag "an unknown option exited $rc, not 2"; }
SPIN_SYSFS=/nonexistent spin-stat >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc = 0 ] || ! grep -q 'p2p_router' "$TMP/err"; then
	ok=0; diag "without a router: exit $rc"; diag "$TMP/err"
fi
result spin_stat.usage

near=$(provider_of_size $NEAR_SIZE)
far=$(provider_of_size $FAR_SIZE)
rig=$(rig_drives)
farnvme=$(nvme_by_serial SPINFAR0)
mpath=$(nvme_by_serial SPINMPATH)
spin-stat providers >"$TMP/prov" 2>&1
rc=$?
# Off the rig: a provider that reaches the first drive, if one does.
if [ $strict = 0 ] && [ -z "$near" ] && [ -n "$rig" ]; then
	# shellcheck disable=SC2086
	set -- $rig
	for d in "$PCI"/*; do
		[ "$(cat "$d/p2pmem/published" 2>/dev/null)" = 1 ] || continue
		[ "$(reach_of "$TMP/prov" "${d##*/}" "$1")" = yes ] || continue
		near=${d##*/}
		break
	done
fi
diag "near provider '$near', far provider '$far'"
diag "drives '$(echo "$rig" | tr '\n' ' ')', SPINFAR0 '$farnvme', SPINMPATH '$mpath'"
NEAR_WHAT="the near provider (the rig's 256 MiB ivshmem, or one that reaches the first drive)"
FAR_WHAT="the far provider (the rig's 64 MiB ivshmem, on its own root port)"
DRIVES_WHAT="rig NVMe drives (serial SPINRIG..., or named in \$SPIN_TEST_NVME)"

# 2: both providers listed, published.
ok=1 need=""
[ -n "$near" ] || needs "$NEAR_WHAT"
[ -n "$far" ] || needs "$FAR_WHAT"
# The tool's exit status first: that is no hardware's.
if [ $rc != 0 ]; then
	ok=0; diag "spin-stat providers exited $rc"; diag "$TMP/prov"
	result spin_stat.providers_listed
elif ! missing spin_stat.providers_listed; then
	if [ "$(echo "$near" | wc -w)" != 1 ] || [ "$(echo "$far" | wc -w)" != 1 ]; then
		ok=0; diag "want one 256 MiB and one 64 MiB published provider"
	fi
	for p in $near $far; do
		grep -q "^provider $p  published 1 " "$TMP/prov" ||
			{ ok=0; diag "provider $p not listed as published"; }
	done
	result spin_stat.providers_listed
fi

# 3: the near provider reaches every SPINRIG drive and the multipath
# namespace (both paths below the switch), not SPINFAR0.
ok=1 need=""
[ -n "$near" ] || needs "$NEAR_WHAT"
[ "$(echo "$rig" | wc -w)" -ge 3 ] || needs "3 $DRIVES_WHAT: $(echo "$rig" | wc -w) found"
[ -n "$mpath" ] || needs "the multipath namespace (serial SPINMPATH)"
if ! missing spin_stat.near_reaches_rig_drives; then
	# shellcheck disable=SC2086
	want_reach "$near" yes $rig $mpath
	result spin_stat.near_reaches_rig_drives
fi

# 4: ... and not SPINFAR0, which is listed.
ok=1 need=""
[ -n "$near" ] || needs "$NEAR_WHAT"
[ -n "$farnvme" ] || needs "the drive outside the switch (serial SPINFAR0)"
if ! missing spin_stat.near_not_far_drive; then
	[ "$(echo "$farnvme" | wc -w)" = 1 ] || { ok=0; diag "want one SPINFAR0 drive"; }
	# Only the host bridge, not on the P2PDMA whitelist, joins them.
	# shellcheck disable=SC2086
	want_reach "$near" maybe $farnvme
	result spin_stat.near_not_far_drive
fi

# 5: the far provider lists the SPINRIG drives, none reachable.
ok=1 need=""
[ -n "$far" ] || needs "$FAR_WHAT"
[ -n "$rig" ] || needs "$DRIVES_WHAT: none found"
if ! missing spin_stat.far_reaches_no_rig_drive; then
	# shellcheck disable=SC2086
	want_reach "$far" maybe $rig
	result spin_stat.far_reaches_no_rig_drive
fi

# 6: the GPU-shaped test driver's memory (lib/test_p2pdma.c): listed,
# unpublished, as its driver's own, and reaching the SPINRIG drives.
ok=1 need=""
gpu=""
for d in "$PCI"/*; do
	[ "$(readlink "$d/driver" 2>/dev/null | sed 's|.*/||')" = test_p2pdma ] &&
		gpu="$gpu ${d##*/}"
done
# shellcheck disable=SC2086,SC2116 # the words, trimmed
gpu=$(echo $gpu)
[ -n "$gpu" ] || needs "the \"gpu\" memory (a device bound to test_p2pdma)"
if missing spin_stat.private_provider; then
	:
elif [ "$(echo "$gpu" | wc -w)" != 1 ]; then
	ok=0; diag "want one device bound to test_p2pdma, got '$gpu'"
else
	grep -q "^provider $gpu  published 0 .* driver test_p2pdma\$" "$TMP/prov" ||
		{ ok=0; diag "provider $gpu not listed unpublished with its driver"; }
	grep -q "^  private: test_p2pdma's own memory" "$TMP/prov" ||
		{ ok=0; diag "no 'private:' line for $gpu"; }
	# shellcheck disable=SC2086
	want_reach "$gpu" yes $rig
fi
[ -n "$need" ] || result spin_stat.private_provider
[ $failed = 0 ] || diag "$TMP/prov"

# 7: an md raid0 over two SPINRIG drives: a stacked device, whose
# members are found through slaves/.
ok=1 need=""
# shellcheck disable=SC2086
set -- $rig
[ $# -ge 2 ] || needs "2 $DRIVES_WHAT: $# found"
[ -n "$near" ] || needs "$NEAR_WHAT"
[ -n "$far" ] || needs "$FAR_WHAT"
if missing spin_stat.md_stack; then
	:
else
	mdadm --zero-superblock "/dev/$1" "/dev/$2" >/dev/null 2>&1
	md_members="/dev/$1 /dev/$2"
	if mdadm --create /dev/$MD --run --quiet --force --level=0 \
		--raid-devices=2 "/dev/$1" "/dev/$2" >"$TMP/mdadm" 2>&1; then
		spin-stat providers >"$TMP/prov-md" 2>&1
		row=$(rows_of "$TMP/prov-md" "$near" | awk -v d=$MD '$1 == d')
		case "$row" in
		*" md "*raid0*" yes "*"$1 $2") ;;
		*) ok=0; diag "$near -> $MD: '$row', want md raid0 yes ... $1 $2" ;;
		esac
		r=$(reach_of "$TMP/prov-md" "$far" $MD)
		[ "$r" = maybe ] || { ok=0; diag "$far -> $MD: '$r', want maybe"; }
		[ $ok = 1 ] || diag "$TMP/prov-md"
		mdadm --stop /dev/$MD >/dev/null 2>&1
		mdadm --zero-superblock "/dev/$1" "/dev/$2" >/dev/null 2>&1
		md_members=""
	else
		ok=0; diag "mdadm --create failed"; diag "$TMP/mdadm"
	fi
	result spin_stat.md_stack
fi

# 8: every knob with its value (newlines as spaces).
ok=1
spin-stat knobs >"$TMP/knobs" 2>&1 || { ok=0; diag "spin-stat knobs failed"; }
nknobs=0
for f in "$ROUTER"/*; do
	[ -f "$f" ] || continue
	nknobs=$((nknobs + 1))
	v=$(tr '\n' ' ' <"$f" | sed 's/ *$//')
	awk -v n="${f##*/}" -v v="$v" '
		$1 == n { sub(/^ *[^ ]+ +/, ""); sub(/ *(# .*)?$/, "")
			  if ($0 == v) ok = 1 }
		END { exit !ok }' "$TMP/knobs" ||
		{ ok=0; diag "knob ${f##*/} = '$v' not shown"; }
done
[ $nknobs -ge 6 ] || { ok=0; diag "only $nknobs knob files in $ROUTER"; }
[ $ok = 1 ] || diag "$TMP/knobs"
result spin_stat.knobs

# 9: every counter, with a number.
ok=1
spin-stat counters >"$TMP/ctr" 2>&1 || { ok=0; diag "spin-stat counters failed"; }
nctr=0
for f in "$ROUTER"/stats/*; do
	nctr=$((nctr + 1))
	awk -v n="${f##*/}" '$1 == n && $2 ~ /^[0-9]+$/ { ok = 1 } END { exit !ok }' \
		"$TMP/ctr" || { ok=0; diag "counter ${f##*/} not shown"; }
done
[ $nctr -ge 19 ] || { ok=0; diag "only $nctr counters"; }
[ $ok = 1 ] || diag "$TMP/ctr"
result spin_stat.counters

# 10, 11: plain 1 MiB reads of the first SPINRIG drive into the near
# provider's memory (fio), and the rate mode over 2 s while they run.
ok=1 need=""
# shellcheck disable=SC2086
set -- $rig
[ $# -ge 1 ] || needs "$DRIVES_WHAT: none found"
[ -n "$near" ] || needs "$NEAR_WHAT"
rate_need=$need
if missing spin_stat.routed_reads_run; then
	ok=0
else
	enabled=$(cat "$ROUTER/enabled")
	echo 1 >"$ROUTER/enabled"
	fio --name=spin_stat --filename="/dev/$1" --rw=read --bs=1M \
		--ioengine=psync --direct=0 --size=64M --invalidate=1 \
		--iomem="mmapshared:$PCI/$near/p2pmem/allocate" \
		--time_based --runtime=60 >"$TMP/fio" 2>&1 &
	fio_pid=$!
	# Wait (up to 30 s) until its reads are routed and DMA completes.
	b0=$(cat "$ROUTER/stats/p2p_bytes")
	i=0
	while [ $i -lt 60 ] && [ "$(cat "$ROUTER/stats/p2p_bytes")" = "$b0" ]; do
		sleep 0.5
		i=$((i + 1))
	done
	[ $i -lt 60 ] || { ok=0; diag "p2p_bytes did not move in 30 s"; diag "$TMP/fio"; }
	result spin_stat.routed_reads_run
fi

ok2=0
if [ $ok = 1 ]; then
	spin-stat -i 2 -c 2 counters >"$TMP/rate" 2>&1
	rc=$?
	awk '
		/interval 1 of 1: / { hdr = 1 }
		$1 == "p2p_bytes" && $3 == "MB/s" && $2 + 0 > 0 { dma = 1 }
		$1 == "routed_reads" && $3 == "/s" && $2 + 0 > 0 { reads = 1 }
		END { exit !(hdr && dma && reads) }' "$TMP/rate" && [ $rc = 0 ] && ok2=1
	[ $ok2 = 1 ] || { diag "spin-stat -i 2 -c 2 exited $rc"; diag "$TMP/rate"; }
	diag "$(grep -E '^ *(p2p_bytes|cache_bytes|routed_reads) ' "$TMP/rate" | tr -s ' ')"
fi
if [ -n "$fio_pid" ]; then
	kill "$fio_pid" 2>/dev/null
	wait "$fio_pid" 2>/dev/null
fi
fio_pid=""
[ -n "$enabled" ] && echo "$enabled" >"$ROUTER/enabled"
enabled=""
ok=$ok2 need=$rate_need
missing spin_stat.dma_rate || result spin_stat.dma_rate

# 12-16: spin-stat check, the kernel's verdict on one read of a file
# into one provider's memory (tracepoint p2p_router:p2p_router_verdict).
# The first drive gets 1 MiB of random bytes, not cached; vfat goes on
# the third.
# shellcheck disable=SC2086
set -- $rig
drive=${1:-} vdrive=${3:-}
enabled=$(cat "$ROUTER/enabled")
echo 1 >"$ROUTER/enabled"
dd if=/dev/urandom of="$TMP/rand" bs=1M count=1 2>/dev/null
if [ -n "$drive" ]; then
	dd if="$TMP/rand" of="/dev/$drive" bs=1M count=1 conv=fsync 2>/dev/null
	blockdev --flushbufs "/dev/$drive"
fi
mkdir -p "$TMP/mnt"

# Run "spin-stat check $1 $2" with the page cache dropped, into
# $TMP/chk; $rc is its exit status.
check() {
	echo 3 >/proc/sys/vm/drop_caches
	SPIN_CHECK_TRACE=$TMP/trace spin-stat check "$1" "$2" >"$TMP/chk" 2>&1
	rc=$?
}

# Expect exit status $1 and a line matching $2 in $TMP/chk.
expect() {
	[ $rc = "$1" ] || { ok=0; diag "check exited $rc, want $1"; }
	grep -q "$2" "$TMP/chk" ||
		{ ok=0; diag "no line '$2'; the trace:"; diag "$TMP/trace"; }
}

# 12: routed, most of it DMAed by the drive; the bytes match.
ok=1 need=""
[ -n "$drive" ] || needs "$DRIVES_WHAT: none found"
[ -n "$near" ] || needs "$NEAR_WHAT"
if ! missing spin_stat.check_routed; then
	check "/dev/$drive" "$near"
	expect 0 "^  kernel: routed, [1-9][0-9]* bytes by DMA"
	expect 0 "^  probe: read 1048576 of 1048576 bytes, match"
	expect 0 "^  $drive .* yes "
	[ $ok = 1 ] || diag "$TMP/chk"
	# It leaves no tracefs instance behind.
	set -- /sys/kernel/tracing/instances/spin-check-*
	[ ! -e "$1" ] || { ok=0; diag "left behind: $*"; }
	# An empty file cannot be checked: exit 1, not a verdict.
	: >"$TMP/empty"
	check "$TMP/empty" "$near"
	[ $rc = 1 ] || { ok=0; diag "an empty file: exit $rc, want 1"; diag "$TMP/chk"; }
	result spin_stat.check_routed
fi

# 13: into the provider on its own root port: the kernel says the
# drive cannot reach it; the read is buffered and still right.
ok=1 need=""
[ -n "$drive" ] || needs "$DRIVES_WHAT: none found"
[ -n "$far" ] || needs "$FAR_WHAT"
if ! missing spin_stat.check_unreachable; then
	check "/dev/$drive" "$far"
	expect 3 "^  kernel: not routed: $drive cannot reach $far"
	expect 3 "^  probe: read 1048576 of 1048576 bytes, match"
	[ $ok = 1 ] || diag "$TMP/chk"
	result spin_stat.check_unreachable
fi

# 14: the router switched off.
ok=1 need=""
[ -n "$drive" ] || needs "$DRIVES_WHAT: none found"
[ -n "$near" ] || needs "$NEAR_WHAT"
if ! missing spin_stat.check_disabled; then
	echo 0 >"$ROUTER/enabled"
	check "/dev/$drive" "$near"
	echo 1 >"$ROUTER/enabled"
	expect 3 "^  kernel: not routed: the router is off"
	[ $ok = 1 ] || diag "$TMP/chk"
	result spin_stat.check_disabled
fi

# 15: a filesystem that never offers its reads to the router (vfat), on
# a drive that reaches the provider.
ok=1 need=""
[ -n "$vdrive" ] || needs "$DRIVES_WHAT: a third one"
[ -n "$near" ] || needs "$NEAR_WHAT"
if ! missing spin_stat.check_not_offered; then
	if mkfs.vfat "/dev/$vdrive" >"$TMP/mkfs" 2>&1 &&
	   mount -t vfat "/dev/$vdrive" "$TMP/mnt"; then
		mounted=$TMP/mnt
		cp "$TMP/rand" "$TMP/mnt/f" && sync
		check "$TMP/mnt/f" "$near"
		expect 3 "^  kernel: not routed: the router was not offered the read"
		expect 3 "^  probe: read 1048576 of 1048576 bytes, match"
		umount "$TMP/mnt" && mounted=""
	else
		ok=0; diag "mkfs.vfat or mount failed"; diag "$TMP/mkfs"
	fi
	dd if=/dev/zero of="/dev/$vdrive" bs=1M count=1 conv=fsync 2>/dev/null
	[ $ok = 1 ] || diag "$TMP/chk"
	result spin_stat.check_not_offered
fi

# 16: ext4, which offers its reads, on a loop device, which takes no
# P2PDMA pages.
ok=1 need=""
[ -n "$near" ] || needs "$NEAR_WHAT"
if ! missing spin_stat.check_no_p2p_queue; then
	truncate -s 64M "$TMP/img"
	if loopdev=$(losetup -f) && losetup "$loopdev" "$TMP/img" &&
	   mkfs.ext4 -q -F "$loopdev" >"$TMP/mkfs" 2>&1 &&
	   mount -t ext4 "$loopdev" "$TMP/mnt"; then
		mounted=$TMP/mnt
		cp "$TMP/rand" "$TMP/mnt/f" && sync
		check "$TMP/mnt/f" "$near"
		expect 3 "^  kernel: not routed: ${loopdev#/dev/} takes no P2PDMA pages"
		umount "$TMP/mnt" && mounted=""
		losetup -d "$loopdev" && loopdev=""
	else
		ok=0; diag "loop device, mkfs.ext4 or mount failed"; diag "$TMP/mkfs"
	fi
	[ $ok = 1 ] || diag "$TMP/chk"
	result spin_stat.check_no_p2p_queue
fi
echo "$enabled" >"$ROUTER/enabled"
enabled=""

ktap_finished
