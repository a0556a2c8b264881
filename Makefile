# SPDX-License-Identifier: GPL-2.0
#
# SPIN for modern Linux: the front door.  'make help' lists the targets.
# Every target does its own set-up on first use (packages, kernel source,
# build), so on a fresh Debian 12 machine 'make demo' and 'make test' are
# all there is to type.

SHELL := /bin/bash
S := scripts

.PHONY: help deps tree export config kernel selftests initramfs image \
	demo test test-debug kernel-debug kernel-base bench bench-report calibrate \
	bench-stack bench-readahead bench-limit bench-profile shell \
	checkpatch bisect-check sparse-check rfc doc-check host-kernel \
	host-kernel-check clean distclean

help:
	@echo 'SPIN: P2P DMA from NVMe into device memory on plain pread.'
	@echo
	@echo '  make demo        boot the patched kernel in the QEMU rig and read'
	@echo '                   a file into device memory, saying where bytes came from'
	@echo '  make test        boot the rig and run the kselftest suite'
	@echo '                   (after doc-check)'
	@echo '  make host-kernel an installable kernel for a real machine: the'
	@echo '                   running distribution'"'"'s config + configs/host.config,'
	@echo '                   make bindeb-pkg (Documentation/spin/hardware.rst)'
	@echo
	@echo '  make test-debug  the suite on the debug kernel (configs/debug.config:'
	@echo '                   KASAN, lockdep, DEBUG_VM, KFENCE, atomic-sleep checks),'
	@echo '                   in two boots (about two hours)'
	@echo '  make bench       SPIN against O_DIRECT, a CPU bounce and the page cache'
	@echo '                   in nine boots (throttled, fast, two-drive, md raid0'
	@echo '                   and plain rigs, the unpatched kernel), medians of 3'
	@echo '                   runs with their spread; tables and plots'
	@echo '                   (scripts/bench.sh --help)'
	@echo '  make calibrate   fit the router'"'"'s cost model in the rig and print it'
	@echo '  make bench-stack P2P reads on one drive, md raid0 over 2 and 3 and raid1,'
	@echo '                   and raid1 writes, plain and throttled rig'
	@echo '  make bench-readahead  P-readahead and page-cache pollution, plain and throttled'
	@echo '  make bench-limit      whether QEMU'"'"'s throttle and io.max hold the drives to a limit'
	@echo '  make bench-profile    perf profile of a routed 1 MiB read against O_DIRECT'
	@echo '  make shell       boot the rig to a shell on the console'
	@echo '  make tree        build/linux = Debian linux-source-6.12 + patches/'
	@echo '  make export      patches/ = build/linux commits since spin-base'
	@echo '  make kernel      configure (configs/spin.config) and build bzImage'
	@echo '  make checkpatch  checkpatch.pl --strict on every patch'
	@echo '  make bisect-check  build (and W=1 the touched files) at every patch'
	@echo '  make rfc         the series as an RFC posting in build/rfc/ (format-patch,'
	@echo '                   cover letter, To:/Cc: from get_maintainer.pl); sends nothing'
	@echo '  make host-kernel-check  host-kernel'"'"'s config step on a defconfig'
	@echo '                   (make test runs it)'
	@echo '  make doc-check   the reference docs quote no dates, issue or patch'
	@echo '                   numbers, or counts that go stale'
	@echo '  make sparse-check  sparse + W=1 on the touched files: nothing new'
	@echo '                   against the unpatched kernel'
	@echo '  make clean       remove build products but keep build/linux'
	@echo '  make distclean   remove build/ entirely'
	@echo
	@echo 'Each script in scripts/ explains itself with --help.'

deps:
	@$(S)/deps.sh

tree: deps
	@$(S)/tree.sh

export:
	@$(S)/export.sh

config: tree
	@$(S)/config.sh

kernel: config
	@$(S)/build.sh

selftests: tree
	@$(S)/selftests.sh

initramfs: selftests
	@$(S)/initramfs.sh

image: kernel initramfs

demo: image
	@$(S)/rig.sh --mode demo --timeout 600

test: doc-check host-kernel-check image
	@$(S)/run-tests.sh

doc-check:
	@$(S)/doc-check.sh

host-kernel: tree
	@$(S)/host-kernel.sh $(HOST_KERNEL_ARGS)

# make host-kernel's configuration step, on x86_64_defconfig standing in
# for a distribution's config: the merge and its checks, not the build.
HOSTCHECK := $(CURDIR)/build/obj-hostcheck
host-kernel-check: tree
	@rm -rf $(HOSTCHECK) && mkdir -p $(HOSTCHECK)/base
	@$(MAKE) -s -C build/linux O=$(HOSTCHECK)/base ARCH=x86_64 defconfig
	@$(S)/host-kernel.sh --config-only --config $(HOSTCHECK)/base/.config \
		--obj $(HOSTCHECK)/out

kernel-debug: tree
	@SPIN_DEBUG=1 $(S)/config.sh
	@SPIN_DEBUG=1 $(S)/build.sh

# The debug kernel runs the suite about five times slower than the
# normal one, so it runs in two boots (about 70 and 60 minutes): these
# programs in the first, every other program of kselftest-list.txt in
# the second.  Each program may take 3000 s instead of 1500.
DEBUG_BOOT1 := p2pmem_test odirect_test stack_test readahead_test stress_test \
	race_test hostile_test fault_test remote_test

test-debug: kernel-debug initramfs
	@one=$$(printf -- '-t spin:%s ' $(DEBUG_BOOT1)); \
	two=$$(sed -n 's/^spin://p' build/kselftest/kselftest-list.txt | \
		grep -vxF $(addprefix -e ,$(DEBUG_BOOT1)) | \
		sed 's/^/-t spin:/' | tr '\n' ' '); \
	rc=0; \
	SPIN_DEBUG=1 $(S)/run-tests.sh --timeout 4500 --run test-debug-1 \
		--ksft "-o 3000 $$one" || rc=1; \
	SPIN_DEBUG=1 $(S)/run-tests.sh --timeout 4500 --run test-debug-2 \
		--ksft "-o 3000 $$two" || rc=1; \
	exit $$rc

kernel-base: config
	@$(S)/kernel-base.sh

bench: image
	@$(S)/deps.sh --bench
	@$(S)/bench.sh

bench-report:
	@$(S)/deps.sh --bench
	@$(S)/bench-report.sh

calibrate: image
	@$(S)/rig.sh --mode bench --timeout 900 --append spin_bench=calibrate

bench-stack: image
	@$(S)/bench-stack.sh

bench-readahead: image
	@$(S)/bench-readahead.sh

bench-limit: image
	@$(S)/bench-limit.sh

bench-profile: image
	@$(S)/bench-profile.sh

shell: image
	@$(S)/rig.sh --mode shell

checkpatch: tree
	@$(S)/checkpatch.sh

bisect-check: config
	@$(S)/bisect-check.sh

rfc: tree
	@$(S)/rfc.sh

sparse-check: kernel
	@$(S)/sparse-check.sh

clean:
	rm -rf build/obj build/obj-debug build/obj-base build/obj-hostcheck build/kselftest build/kselftest-obj build/initramfs \
		build/initramfs.cpio build/run

distclean:
	rm -rf build
