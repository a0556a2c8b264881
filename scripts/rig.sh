#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the patched kernel in the QEMU P2P rig.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--mode test|demo|bench|shell] [--timeout SECS] [--kvm]
          [--ksft 'run_kselftest.sh args'] [--append 'kernel args']
          [--throttle BYTES_PER_SEC] [--drive-size SIZE] [--cpu MODEL]
          [--run NAME] [--quiet]

Boots build/obj/arch/x86/boot/bzImage with build/initramfs.cpio on a
q35 machine under TCG (--kvm probes /dev/kvm and uses it if a guest
starts there, which on these nested machines it usually does not).
The CPU is QEMU's "max" model; in demo, bench and shell mode without
SMAP, so that QEMU's software TLB slows the guest kernel's copies into
2 MiB-aligned user buffers 10x only now and then instead of every time,
which no real CPU does (Documentation/spin/rig.rst, "Copies under
TCG").  Tests keep SMAP, to catch the kernel touching user memory
outside uaccess.

Topology (the q35 host bridge is not on the P2PDMA whitelist, so P2P
pairs sit under one PCIe switch):

  pcie.0 - ioh3420 root port rp0
             \`- x3130-upstream
                  |- xio3130-downstream - ivshmem-plain (256 MiB)  "near"
                  |- xio3130-downstream - nvme serial SPINRIG0 (1 GiB)
                  |- xio3130-downstream - nvme serial SPINRIG1 (1 GiB)
                  |- xio3130-downstream - nvme serial SPINRIG2 (1 GiB)
                  |- xio3130-downstream - nvme SPINMPATH ctrl 0 \\ one subsystem,
                  |- xio3130-downstream - nvme SPINMPATH ctrl 1 / shared ns (1 GiB)
                  \`- xio3130-downstream - ivshmem-plain (128 MiB) "gpu": bound to
                                           test_p2pdma, registered, not published
  pcie.0 - ioh3420 root port rp1
             \`- ivshmem-plain (64 MiB)  "far": not reachable from the drives
  pcie.0 - ioh3420 root port rp2
             \`- nvme serial SPINFAR0 (1 GiB)  cannot reach "near" memory

Disk images and shared-memory files are new sparse files for every run
(build/run/<mode>/ and /dev/shm), removed afterwards.  The console goes
to build/run/<mode>/console.log and the terminal, the second serial
port (the guest's TAP output) to build/run/<mode>/tap.log, QEMU's pid
to build/run/<mode>/qemu.pid.  A guest
that panics before its /init starts (a TCG hazard, see the comment at
the end) is booted once more; the first console is kept in
build/run/console-early-death.log.

  --mode      what the guest does (scripts/guest-init): default shell
  --timeout   kill QEMU after SECS (exit 124); default 0 = never
  --ksft      arguments for run_kselftest.sh in test mode
  --append    more kernel command line
  --throttle  limit each drive's reads to BYTES_PER_SEC (a QEMU
              throttle group), to give the rig a real SSD's ratio of
              drive to CPU-copy speed
  --drive-size  size of each SPINRIG drive image (truncate(1) syntax,
              default 1G; sparse, so only what the guest writes uses
              host disk)
  --cpu       the TCG CPU model (default: max in test mode,
              max,-smap otherwise; --kvm, when KVM works, uses host)
  --run       keep this boot's logs in build/run/NAME/ instead of
              build/run/<mode>/ (one directory per boot of a suite
              split across boots)
  --quiet     do not copy the console to the terminal

  SPIN_DEBUG=1  boot the debug kernel (build/obj-debug), with 4-level
                paging (no5lvl); logs go to build/run/<mode>-debug/
USAGE
}

top=$(cd "$(dirname "$0")/.." && pwd)
mode=shell timeout=0 kvm=0 ksft="" append="" throttle=0 quiet=0 drive_size=1G cpu="" name=""
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--mode) mode=$2; shift ;;
	--timeout) timeout=$2; shift ;;
	--kvm) kvm=1 ;;
	--quiet) quiet=1 ;;
	--ksft) ksft=$2; shift ;;
	--append) append=$2; shift ;;
	--throttle) throttle=$2; shift ;;
	--drive-size) drive_size=$2; shift ;;
	--cpu) cpu=$2; shift ;;
	--run) name=$2; shift ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
case "$mode" in test|demo|bench|shell) ;; *) echo "rig: bad mode '$mode'" >&2; exit 2 ;; esac
if [ -z "$cpu" ]; then
	cpu=max,-smap
	[ "$mode" = test ] && cpu=max
fi

sfx=$([ "${SPIN_DEBUG:-0}" = 1 ] && echo -debug || true)
kernel=${SPIN_OBJ:-$top/build/obj$sfx}/arch/x86/boot/bzImage
initrd=$top/build/initramfs.cpio
for f in "$kernel" "$initrd"; do
	[ -f "$f" ] || { echo "rig: $f missing (make kernel initramfs)" >&2; exit 1; }
done

case "$name" in */*|.|..) echo "rig: bad run name '$name'" >&2; exit 2 ;; esac
run=$top/build/run/${name:-$mode$sfx}
rm -rf "$run"
mkdir -p "$run"
shm=/dev/shm/spin-rig-$$
cleanup() { rm -f "$shm"-near "$shm"-far "$shm"-gpu "$run"/*.img; }
trap cleanup EXIT
truncate -s 256M "$shm"-near
truncate -s 64M "$shm"-far
truncate -s 128M "$shm"-gpu

accel=(-machine q35,accel=tcg -cpu "$cpu")
if [ $kvm = 1 ]; then
	if [ -w /dev/kvm ] && timeout 20 qemu-system-x86_64 -machine q35,accel=kvm \
		-cpu host -display none -no-reboot -kernel /nonexistent 2>&1 |
		grep -q 'could not load kernel'; then
		accel=(-machine q35,accel=kvm -cpu host)
	else
		echo "rig: KVM does not work here; using TCG" >&2
	fi
fi

drive_opts=""
[ "$throttle" != 0 ] && drive_opts=",throttling.bps-read=$throttle,throttling.iops-read=100000"

args=(
	"${accel[@]}" -smp 2 -m 2G -nodefaults -display none -no-reboot
	-pidfile "$run/qemu.pid"
	-kernel "$kernel" -initrd "$initrd"
	-serial mon:stdio -serial "file:$run/tap.log"
	-object "memory-backend-file,id=near,mem-path=$shm-near,size=256M,share=on"
	-object "memory-backend-file,id=far,mem-path=$shm-far,size=64M,share=on"
	-device ioh3420,id=rp0,bus=pcie.0,chassis=1,slot=1,addr=0x1c
	-device x3130-upstream,id=up0,bus=rp0
	-device xio3130-downstream,id=dp0,bus=up0,chassis=2,slot=0
	-device ivshmem-plain,memdev=near,bus=dp0
	-device ioh3420,id=rp1,bus=pcie.0,chassis=9,slot=2,addr=0x1d
	-device ivshmem-plain,memdev=far,bus=rp1
)

# A drive outside the switch: a mirror leg that cannot reach the device
# memory the others can.  Its serial is not SPINRIG*, so only the tests
# that ask for it by name use it.
truncate -s "$drive_size" "$run/far0.img"
args+=(
	-device ioh3420,id=rp2,bus=pcie.0,chassis=10,slot=3,addr=0x1e
	-drive "file=$run/far0.img,if=none,id=far0,format=raw,cache=unsafe$drive_opts"
	-device nvme,drive=far0,serial=SPINFAR0,bus=rp2
)
for i in 0 1 2; do
	truncate -s "$drive_size" "$run/nvme$i.img"
	args+=(
		-device "xio3130-downstream,id=dp$((i + 1)),bus=up0,chassis=$((i + 3)),slot=$((i + 1))"
		-drive "file=$run/nvme$i.img,if=none,id=d$i,format=raw,cache=unsafe$drive_opts"
		-device "nvme,drive=d$i,serial=SPINRIG$i,bus=dp$((i + 1))"
	)
done

# A multipathed namespace: one subsystem, two controllers behind the
# switch, one shared namespace (native NVMe multipath in the guest).
truncate -s 1G "$run/mpath.img"
args+=(
	-device nvme-subsys,id=mpsub,nqn=spin-rig-mpath
	-device xio3130-downstream,id=dp4,bus=up0,chassis=7,slot=4
	-device nvme,id=mpc0,serial=SPINMPATH,subsys=mpsub,bus=dp4
	-device xio3130-downstream,id=dp5,bus=up0,chassis=8,slot=5
	-device nvme,id=mpc1,serial=SPINMPATH,subsys=mpsub,bus=dp5
	-drive "file=$run/mpath.img,if=none,id=mpd,format=raw,cache=unsafe$drive_opts"
	-device nvme-ns,drive=mpd,bus=mpc0,nsid=1,shared=on
)

# A GPU's memory: the guest's /init binds it to test_p2pdma
# (lib/test_p2pdma.c), which registers it and publishes nothing.  Its
# size (128 MiB) is how the guest tells it from the other two.  Last on the
# switch, so that the devices before it keep their addresses.
args+=(
	-object "memory-backend-file,id=gpu,mem-path=$shm-gpu,size=128M,share=on"
	-device xio3130-downstream,id=dp6,bus=up0,chassis=11,slot=6
	-device ivshmem-plain,memdev=gpu,bus=dp6
)

cmdline="console=ttyS0 panic=-1 oops=panic spin_mode=$mode"
case "$mode" in demo|bench) cmdline+=" quiet" ;; esac
# With 5-level paging, identify_cpu() on the boot CPU clears and re-reads
# the CPU's feature bits, LA57 among them; an interrupt in that window
# makes KASAN judge the LA57 direct map "wild" (a false report at boot,
# which turns lockdep off).  The debug kernel runs with 4-level paging.
[ "${SPIN_DEBUG:-0}" = 1 ] && cmdline+=" no5lvl"
[ -n "$ksft" ] && cmdline+=" spin_ksft=\"$ksft\""
[ -n "$append" ] && cmdline+=" $append"

echo "rig: qemu ${args[*]} -append '$cmdline'" >"$run/qemu-cmdline"
to=()
[ "$timeout" != 0 ] && to=(timeout --foreground -k 10 "$timeout")
if [ "$mode" = shell ]; then
	"${to[@]}" qemu-system-x86_64 "${args[@]}" -append "$cmdline"
	exit
fi
out=/dev/stdout
[ $quiet = 1 ] && out=/dev/null
# A guest that dies before its /init prints anything never ran our code
# paths (seen under TCG: an int3 Oops while boot code patched a static
# key on one vCPU as the other took a timer tick).  Keep its console in
# build/run/console-early-death.log and boot once more; anything later
# counts.
for attempt in 1 2; do
	set +e
	"${to[@]}" qemu-system-x86_64 "${args[@]}" -append "$cmdline" </dev/null 2>&1 |
		tee "$run/console.log" >"$out"
	rc=${PIPESTATUS[0]}
	set -e
	[ $attempt = 2 ] || grep -q 'spin-rig: kernel' "$run/console.log" ||
		! grep -qE 'Kernel panic|Oops' "$run/console.log" && break
	cp "$run/console.log" "$run/../console-early-death.log"
	echo "rig: the guest died before /init started" \
		"(build/run/console-early-death.log); booting once more" >&2
done
exit "$rc"
