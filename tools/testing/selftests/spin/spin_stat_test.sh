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
#    DMA byte rate.
#
# A missing spin-stat, provider, drive or tool is a failure, not a skip.
# Needs root; the md case writes superblocks to the first two SPINRIG
# drives.

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

cleanup() {
	[ -n "$fio_pid" ] && kill "$fio_pid" 2>/dev/null && wait "$fio_pid"
	[ -e /dev/$MD ] && mdadm --stop /dev/$MD >/dev/null 2>&1
	# shellcheck disable=SC2086
	[ -n "$md_members" ] && mdadm --zero-superblock $md_members >/dev/null 2>&1
	[ -n "$enabled" ] && echo "$enabled" >"$ROUTER/enabled"
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

ktap_print_header
ktap_set_plan 11

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
rig=$(nvme_by_serial SPINRIG)
farnvme=$(nvme_by_serial SPINFAR0)
mpath=$(nvme_by_serial SPINMPATH)
diag "near provider '$near', far provider '$far'"
diag "SPINRIG drives '$(echo "$rig" | tr '\n' ' ')', SPINFAR0 '$farnvme', SPINMPATH '$mpath'"
spin-stat providers >"$TMP/prov" 2>&1
rc=$?

# 2: both providers listed, published.
ok=1
[ $rc = 0 ] || { ok=0; diag "spin-stat providers exited $rc"; }
if [ "$(echo "$near" | wc -w)" != 1 ] || [ "$(echo "$far" | wc -w)" != 1 ]; then
	ok=0; diag "want one 256 MiB and one 64 MiB published provider"
fi
for p in $near $far; do
	grep -q "^provider $p  published 1 " "$TMP/prov" ||
		{ ok=0; diag "provider $p not listed as published"; }
done
result spin_stat.providers_listed

# 3: the near provider reaches every SPINRIG drive and the multipath
# namespace (both paths below the switch), not SPINFAR0.
ok=1
[ "$(echo "$rig" | wc -w)" -ge 3 ] || { ok=0; diag "fewer than 3 SPINRIG drives"; }
for n in $rig $mpath; do
	r=$(reach_of "$TMP/prov" "$near" "$n")
	[ "$r" = yes ] || { ok=0; diag "$near -> $n: '$r', want yes"; }
done
[ -n "$mpath" ] || { ok=0; diag "no SPINMPATH namespace"; }
result spin_stat.near_reaches_rig_drives

# 4: ... and not SPINFAR0, which is listed.
ok=1
[ "$(echo "$farnvme" | wc -w)" = 1 ] || { ok=0; diag "want one SPINFAR0 drive"; }
for n in $farnvme; do
	r=$(reach_of "$TMP/prov" "$near" "$n")
	# Only the host bridge, not on the P2PDMA whitelist, joins them.
	[ "$r" = maybe ] || { ok=0; diag "$near -> $n: '$r', want maybe"; }
done
result spin_stat.near_not_far_drive

# 5: the far provider lists the SPINRIG drives, none reachable.
ok=1
for n in $rig; do
	r=$(reach_of "$TMP/prov" "$far" "$n")
	[ "$r" = maybe ] || { ok=0; diag "$far -> $n: '$r', want maybe"; }
done
[ -n "$rig" ] || ok=0
result spin_stat.far_reaches_no_rig_drive

# 6: the GPU-shaped test driver's memory (lib/test_p2pdma.c): listed,
# unpublished, as its driver's own, and reaching the SPINRIG drives.
ok=1
gpu=""
for d in "$PCI"/*; do
	[ "$(readlink "$d/driver" 2>/dev/null | sed 's|.*/||')" = test_p2pdma ] &&
		gpu="$gpu ${d##*/}"
done
gpu=$(echo $gpu)
if [ "$(echo "$gpu" | wc -w)" != 1 ]; then
	ok=0; diag "want one device bound to test_p2pdma, got '$gpu'"
else
	grep -q "^provider $gpu  published 0 .* driver test_p2pdma\$" "$TMP/prov" ||
		{ ok=0; diag "provider $gpu not listed unpublished with its driver"; }
	grep -q "^  private: test_p2pdma's own memory" "$TMP/prov" ||
		{ ok=0; diag "no 'private:' line for $gpu"; }
	for n in $rig; do
		r=$(reach_of "$TMP/prov" "$gpu" "$n")
		[ "$r" = yes ] || { ok=0; diag "$gpu -> $n: '$r', want yes"; }
	done
fi
result spin_stat.private_provider
[ $failed = 0 ] || diag "$TMP/prov"

# 7: an md raid0 over two SPINRIG drives: a stacked device, whose
# members are found through slaves/.
ok=1
# shellcheck disable=SC2086
set -- $rig
if [ $# -ge 2 ]; then
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
else
	ok=0; diag "need two SPINRIG drives"
fi
result spin_stat.md_stack

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

# 9, 10: plain 1 MiB reads of the first SPINRIG drive into the near
# provider's memory (fio), and the rate mode over 2 s while they run.
ok=1
enabled=$(cat "$ROUTER/enabled")
echo 1 >"$ROUTER/enabled"
# shellcheck disable=SC2086
set -- $rig
if [ -n "$near" ] && [ $# -ge 1 ]; then
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
else
	ok=0; diag "no near provider or SPINRIG drive"
fi
result spin_stat.routed_reads_run

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
kill "$fio_pid" 2>/dev/null
wait "$fio_pid" 2>/dev/null
fio_pid=""
echo "$enabled" >"$ROUTER/enabled"
enabled=""
ok=$ok2
result spin_stat.dma_rate

ktap_finished
