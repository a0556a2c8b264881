/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the SPIN selftests: reading and writing sysfs,
 * finding P2PDMA providers and the rig's NVMe drives, mapping device
 * memory, running commands, making md arrays and file systems, reading
 * the P2P router's counters, and checking bytes against a reference read
 * into ordinary RAM.  (spin_router.h adds what router_test and
 * readahead_test share: the router's knobs and tables of its counters.)
 *
 * The tests write to whole NVMe drives.  They only touch drives whose
 * serial number starts with SPIN_RIG_SERIAL (the QEMU rig sets it), or
 * the drives named in $SPIN_TEST_NVME, so they never destroy a disk of
 * a machine they were not meant for.  A case whose hardware is absent
 * fails on the rig and skips elsewhere (SPIN_NEED()).
 */
#ifndef SPIN_UTIL_H
#define SPIN_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <linux/loop.h>

#include "../kselftest.h"

#define SPIN_RIG_SERIAL	"SPINRIG"
#define PCI_DEVICES	"/sys/bus/pci/devices"
#define KiB		1024UL
#define MiB		(1024UL * KiB)
/* What a buffer holds before a read, so that a read that wrote nothing fails. */
#define POISON		0xa5
#define SYSFS_LEN	512	/* a device directory in sysfs */
#define P2P_ROUTER	"/sys/kernel/mm/p2p_router"
#define P2P_STATS	P2P_ROUTER "/stats/"
#define P2P_LEARN	P2P_ROUTER "/learn"

static inline int sysfs_read(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return 0;
}

/*
 * The number in sysfs file @path (decimal, or 0x... hex) into *@val.
 * Returns 0, or -errno: the read's, -EINVAL when the file holds anything
 * but one number, -ERANGE when it does not fit.  *@val is only written
 * on success.
 */
static inline int sysfs_read_ll(const char *path, long long *val)
{
	char buf[64], *end;
	long long v;
	int ret;

	ret = sysfs_read(path, buf, sizeof(buf));
	if (ret)
		return ret;
	errno = 0;
	v = strtoll(buf, &end, 0);
	if (end == buf || *end)
		return -EINVAL;
	if (errno)
		return -errno;
	*val = v;
	return 0;
}

static inline int sysfs_write(const char *path, const char *val)
{
	ssize_t n;
	int fd;

	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

/*
 * What the router learned, forgotten: every request queue's learned DMA
 * times and every provider's learned copy rates go back to the defaults
 * they start from at boot ("reset"; learning itself stays as it is).
 * Files that do not exist are skipped.  0, or -1 if a reset failed.
 */
static inline int router_learned_reset(void)
{
	static const char *const globs[] = {
		"/sys/block/*/queue/p2p_learned_cost_ns",
		"/sys/bus/pci/devices/*/p2pmem/learned_copy_mbps",
		"/sys/bus/pci/devices/*/p2pmem/learned_copy_from_mbps",
	};
	unsigned int i;
	size_t j;
	int ret = 0;
	glob_t g;

	for (i = 0; i < ARRAY_SIZE(globs); i++) {
		if (glob(globs[i], 0, NULL, &g))
			continue;
		for (j = 0; j < g.gl_pathc; j++)
			if (sysfs_write(g.gl_pathv[j], "reset"))
				ret = -1;
		globfree(&g);
	}
	return ret;
}

/*
 * Each program starts from what the router knows at boot: learning on
 * (as it ships), nothing learned yet by the programs before it, so that
 * what a program sees does not depend on which ran first (or in which
 * boot of a split run).  The fixtures whose cases assert that the router
 * DMAed call router_learned_reset() in their setup too, so that each case
 * starts so: within a case the router learns from every I/O, as it does
 * in use, and may change its decisions mid-case.
 */
static void __attribute__((constructor)) spin_forget_learned(void)
{
	router_learned_reset();
}

/*
 * Two PCI functions can do P2P DMA without help from the host bridge
 * when they sit below a common PCI bridge (a switch): their sysfs paths
 * then share a component after the host bridge ("pci0000:00").  This is
 * the case pci_p2pdma_distance() accepts without a whitelist; on a
 * whitelisted host bridge it is conservative.
 */
static inline bool pci_share_switch(const char *dev_a, const char *dev_b)
{
	char a[PATH_MAX], b[PATH_MAX];
	char *sa, *sb, *ta, *tb;
	int common = 0;

	if (!realpath(dev_a, a) || !realpath(dev_b, b))
		return false;
	/* /sys/devices/pci0000:00/<root port>/<switch up>/... */
	ta = strtok_r(a, "/", &sa);
	tb = strtok_r(b, "/", &sb);
	while (ta && tb && !strcmp(ta, tb)) {
		common++;
		ta = strtok_r(NULL, "/", &sa);
		tb = strtok_r(NULL, "/", &sb);
	}
	/*
	 * "sys", "devices", "pci0000:00", and the root port: below that, a
	 * common component is a switch port both devices hang off.
	 */
	return common >= 5;
}

/* The PCI device of an NVMe namespace, e.g. "nvme0n1". */
static inline int nvme_pci_dev(const char *ns, char *out, size_t len)
{
	snprintf(out, len, "/sys/block/%s/device/device", ns);
	return access(out, F_OK) ? -ENOENT : 0;
}

static inline bool nvme_is_rig(const char *ns)
{
	char path[PATH_MAX], serial[128], *env;

	env = getenv("SPIN_TEST_NVME");
	if (env) {
		char list[1024], *tok, *save;

		snprintf(list, sizeof(list), "%s", env);
		for (tok = strtok_r(list, " ,", &save); tok;
		     tok = strtok_r(NULL, " ,", &save))
			if (!strcmp(tok, ns))
				return true;
		return false;
	}
	snprintf(path, sizeof(path), "/sys/block/%s/device/serial", ns);
	if (sysfs_read(path, serial, sizeof(serial)))
		return false;
	return !strncmp(serial, SPIN_RIG_SERIAL, strlen(SPIN_RIG_SERIAL));
}

/* The first NVMe namespace whose serial starts with @prefix. */
static inline int nvme_serial_ns(const char *prefix, char *ns, size_t len)
{
	struct dirent **names;
	int n, i, found = -ENOENT;

	n = scandir("/sys/block", &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		char path[PATH_MAX], serial[128];

		snprintf(path, sizeof(path), "/sys/block/%s/device/serial",
			 names[i]->d_name);
		if (found && !strncmp(names[i]->d_name, "nvme", 4) &&
		    !sysfs_read(path, serial, sizeof(serial)) &&
		    !strncmp(serial, prefix, strlen(prefix))) {
			snprintf(ns, len, "%s", names[i]->d_name);
			found = 0;
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return found;
}

/*
 * The idx'th (from 0, by name) rig NVMe namespace.  Returns 0 and the
 * name in @ns, or -ENOENT.
 */
static inline int nvme_rig_ns(int idx, char *ns, size_t len)
{
	struct dirent **names;
	int n, i, found = -ENOENT, seen = 0;

	n = scandir("/sys/block", &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		const char *d = names[i]->d_name;

		if (found && !strncmp(d, "nvme", 4) && strchr(d + 4, 'n') &&
		    nvme_is_rig(d) && seen++ == idx) {
			snprintf(ns, len, "%s", d);
			found = 0;
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return found;
}

/*
 * A published P2PDMA provider that can (@reachable) or cannot reach the
 * PCI device @client.  Returns 0 and the provider's sysfs directory.
 */
static inline int p2pmem_find(const char *client, bool reachable,
			      char *out, size_t len)
{
	struct dirent **names;
	int n, i, found = -ENOENT;
	char path[PATH_MAX];
	long long published;

	n = scandir(PCI_DEVICES, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), PCI_DEVICES "/%s/p2pmem/published",
			 names[i]->d_name);
		if (found && !sysfs_read_ll(path, &published) &&
		    published == 1) {
			snprintf(path, sizeof(path), PCI_DEVICES "/%s",
				 names[i]->d_name);
			if (!client || pci_share_switch(path, client) == reachable) {
				snprintf(out, len, PCI_DEVICES "/%s",
					 names[i]->d_name);
				found = 0;
			}
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return found;
}

/*
 * A published provider that can (@reachable) or cannot reach the NVMe
 * namespace @ns (e.g. "nvme0n1").  Returns 0 and the provider's sysfs
 * directory, or -ENOENT.
 */
static inline int p2pmem_find_for_ns(const char *ns, bool reachable,
				     char *out, size_t len)
{
	char dev[SYSFS_LEN];

	if (nvme_pci_dev(ns, dev, sizeof(dev)))
		return -ENOENT;
	return p2pmem_find(dev, reachable, out, len);
}

/* Map @len bytes of a provider's device memory; NULL with errno set. */
static inline void *p2pmem_map(const char *provider, size_t len)
{
	char path[PATH_MAX];
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/p2pmem/allocate", provider);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/*
 * Map @len bytes of a provider's device memory at @addr, over whatever is
 * mapped there (MAP_FIXED); NULL with errno set.
 */
static inline void *p2pmem_map_at(const char *provider, void *addr,
				  size_t len)
{
	char path[PATH_MAX];
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/p2pmem/allocate", provider);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return NULL;
	p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/*
 * p2pmem/available of a provider, in bytes, or -1 when it cannot be read
 * (a size is never negative, so callers compare it as it is).
 */
static inline long long p2pmem_available(const char *provider)
{
	char path[PATH_MAX];
	long long avail;

	snprintf(path, sizeof(path), "%s/p2pmem/available", provider);
	return sysfs_read_ll(path, &avail) ? -1 : avail;
}

/*
 * A counter of the P2P router (a file in P2P_STATS), or -1 when it cannot
 * be read: the counters are never negative, so callers take deltas and
 * compare without checking each read.
 */
static inline long long router_stat(const char *name)
{
	char path[PATH_MAX];
	long long v;

	snprintf(path, sizeof(path), P2P_STATS "%s", name);
	return sysfs_read_ll(path, &v) ? -1 : v;
}

/*
 * /sys/block/@blk/queue/@attr ("pci_p2pdma", "logical_block_size", ...),
 * or -1 when it cannot be read: none of these limits is negative.
 */
static inline long long queue_limit(const char *blk, const char *attr)
{
	char path[PATH_MAX];
	long long v;

	snprintf(path, sizeof(path), "/sys/block/%s/queue/%s", blk, attr);
	return sysfs_read_ll(path, &v) ? -1 : v;
}

/* Deterministic file contents: a function of the seed and the offset. */
static inline void pattern_fill(void *buf, size_t len, uint64_t off,
				uint64_t seed)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		uint64_t x = (off + i) / 8 * 0x9e3779b97f4a7c15ULL ^ seed;

		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ULL;
		x ^= x >> 32;
		p[i] = x >> (8 * ((off + i) % 8));
	}
}

static inline int drop_caches(void)
{
	sync();
	return sysfs_write("/proc/sys/vm/drop_caches", "3");
}

/* Write @size bytes of pattern(@seed) to @fd from offset 0, and fsync. */
static inline int write_pattern(int fd, size_t size, uint64_t seed)
{
	size_t chunk = 1 * MiB, off;
	char *buf = malloc(chunk);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (off = 0; off < size && !ret; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;

		pattern_fill(buf, n, off, seed);
		if (pwrite(fd, buf, n, off) != (ssize_t)n)
			ret = -EIO;
	}
	free(buf);
	if (!ret && fsync(fd))
		ret = -errno;
	return ret;
}

/*
 * vsnprintf() into a buffer of the right size: never cut short.  free()
 * it; NULL, after a message on stderr, when there is no memory.
 */
static inline char *__printf(1, 0)
str_vprintf(const char *fmt, va_list ap)
{
	va_list aq;
	char *buf;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	buf = n < 0 ? NULL : malloc(n + 1);
	if (!buf) {
		fprintf(stderr, "# cannot format \"%s\"\n", fmt);
		return NULL;
	}
	vsnprintf(buf, n + 1, fmt, ap);
	return buf;
}

/* str_vprintf() of the arguments. */
static inline char *__printf(1, 2)
str_printf(const char *fmt, ...)
{
	va_list ap;
	char *buf;

	va_start(ap, fmt);
	buf = str_vprintf(fmt, ap);
	va_end(ap);
	return buf;
}

/*
 * snprintf() for a string that must not be cut short (a command, or part
 * of one): one that does not fit in @len bytes is a bug in the test, so
 * it is reported on stderr and the test aborts rather than go on with
 * half of it.  Returns the length.
 */
static inline int __printf(3, 4)
xsnprintf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "# \"%s\": %d bytes do not fit in %zu\n",
			fmt, n, len);
		abort();
	}
	return n;
}

/*
 * Run a command; 0 if it exited 0.  Output goes to stderr so that it
 * shows up as TAP diagnostics and does not break the TAP stream.  The
 * command may be of any length; -1 when it cannot be run at all.
 */
static inline int __printf(1, 2)
run_cmdf(const char *fmt, ...)
{
	char *cmd, *buf;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	cmd = str_vprintf(fmt, ap);
	va_end(ap);
	buf = cmd ? str_printf("%s >&2", cmd) : NULL;
	free(cmd);
	if (!buf)
		return -1;
	ret = system(buf);
	free(buf);
	return WIFEXITED(ret) ? WEXITSTATUS(ret) : -1;
}

/* run_cmdf() of a command given whole. */
static inline int run_cmd(const char *cmd)
{
	return run_cmdf("%s", cmd);
}

/*
 * Remove every device-mapper device a test made, whatever an earlier
 * case left: their names start with "spin" (spin-stack, spin-leg0, LVM's
 * spinvg-lv, ...).  Those stacked on others go first, pass by pass, until
 * none is left or a pass removes none.  A device of another name is
 * never touched, as "dmsetup remove_all" would: it may be a disk of the
 * machine the tests run on.
 */
static inline void dm_remove_spin(void)
{
	run_cmd("while n=$(dmsetup ls 2>/dev/null | awk '$1 ~ /^spin/ { print $1 }'); "
		"[ -n \"$n\" ]; do p=0; "
		"for d in $n; do dmsetup remove --noudevsync \"$d\" 2>/dev/null && p=1; "
		"done; [ $p = 1 ] || break; done");
}

/*
 * Whether @name (an entry of /sys/block/<md>/slaves/) is one of the
 * suite's own devices: a drive the tests may write to (nvme_is_rig(), or
 * the rig's SPINFAR0 and SPINMPATH, which the cases that need them find
 * by serial), a loop device, or a device-mapper device whose name starts
 * with "spin".
 */
static inline bool md_member_ours(const char *name)
{
	char path[PATH_MAX], dm[128];

	if (!strncmp(name, "nvme", 4)) {
		char serial[128];

		if (nvme_is_rig(name))
			return true;
		/* The rig's drive outside the switch and its multipath one. */
		snprintf(path, sizeof(path), "/sys/block/%s/device/serial",
			 name);
		return !sysfs_read(path, serial, sizeof(serial)) &&
		       (!strncmp(serial, "SPINFAR0", 8) ||
			!strncmp(serial, "SPINMPATH", 9));
	}
	if (!strncmp(name, "loop", 4)) {
		snprintf(path, sizeof(path), "/sys/block/%s/loop", name);
		return !access(path, F_OK);
	}
	if (!strncmp(name, "dm-", 3)) {
		snprintf(path, sizeof(path), "/sys/block/%s/dm/name", name);
		return !sysfs_read(path, dm, sizeof(dm)) &&
		       !strncmp(dm, "spin", 4);
	}
	return false;
}

/*
 * Stop the md array @md ("/dev/md0") that an earlier case may have left,
 * if it is the suite's own: if it exists and every member in
 * /sys/block/<mdX>/slaves/ is one (md_member_ours()).  An array with any
 * other member belongs to the machine the tests run on (md0 is the usual
 * name of one) and is never stopped: the case that wants the name then
 * fails to create its array there.  0 when there is no such array or it
 * was stopped, -EPERM when it is not the suite's, -EIO when mdadm failed.
 */
static inline int md_stop_ours(const char *md)
{
	const char *name = strrchr(md, '/') ? strrchr(md, '/') + 1 : md;
	char path[PATH_MAX];
	struct dirent *de;
	bool ours = true;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/block/%s/slaves", name);
	d = opendir(path);
	if (!d)
		return 0;
	while (ours && (de = readdir(d)))
		if (de->d_name[0] != '.' && !md_member_ours(de->d_name)) {
			fprintf(stderr,
				"# %s not stopped: its member %s is not a device of the tests\n",
				md, de->d_name);
			ours = false;
		}
	closedir(d);
	if (!ours)
		return -EPERM;
	return run_cmdf("mdadm --stop %s 2>/dev/null", md) ? -EIO : 0;
}

/*
 * Mount the pseudo file system @type at @dir, unless one is mounted there
 * already (statfs() says f_type @magic): the rig's /init mounts debugfs,
 * another machine may mount neither debugfs nor configfs.  0 or -errno.
 */
static inline int mount_once(const char *type, const char *dir, long magic)
{
	struct statfs sf;

	if (!statfs(dir, &sf) && (long)sf.f_type == magic)
		return 0;
	return mount(type, dir, type, 0, NULL) ? -errno : 0;
}

#define DEBUGFS		"/sys/kernel/debug"
#define DEBUGFS_MAGIC_NR	0x64626720	/* linux/magic.h DEBUGFS_MAGIC */
#define CONFIGFS	"/sys/kernel/config"
#define CONFIGFS_MAGIC_NR	0x62656570	/* fs/configfs CONFIGFS_MAGIC */

/*
 * debugfs, mounted at DEBUGFS if it is not: before a look-up of a kernel
 * feature's files there (fail_make_request, an NVMe drive's
 * fault_inject, x86 PAT's list), which is then asserted.
 */
static inline int debugfs_mount(void)
{
	return mount_once("debugfs", DEBUGFS, DEBUGFS_MAGIC_NR);
}

/*
 * The driver of lib/test_p2pdma.c (CONFIG_TEST_P2PDMA), which a case
 * asserts; loaded first if it is a module (it binds only through
 * driver_override, so loading it takes no device).  0 or -ENOENT.  That
 * a device (the rig's "gpu" ivshmem) is bound to it is rig hardware:
 * SPIN_NEED().
 */
#define TEST_P2PDMA_DRV	"/sys/bus/pci/drivers/test_p2pdma"

static inline int test_p2pdma_driver(void)
{
	if (access(TEST_P2PDMA_DRV, F_OK))
		run_cmd("modprobe test_p2pdma 2>/dev/null");
	return access(TEST_P2PDMA_DRV, F_OK) ? -ENOENT : 0;
}

/*
 * Create md array @md (e.g. "/dev/md0") over the @n namespaces in @ns[]
 * ("nvme0n1", ...), after wiping their old superblocks, and over @extra
 * too (a device path, not wiped) unless it is NULL.  @opts (a format, and
 * its arguments) are mdadm's options before --raid-devices, the level
 * first: "--level=%d".  @members gets " /dev/nvme0n1 /dev/nvme1n1" (and
 * " @extra") for messages.  Returns run_cmd()'s status.
 */
static inline int __printf(7, 8)
md_create(const char *md, int n, char ns[][NAME_MAX + 1], const char *extra,
	  char *members, size_t len, const char *opts, ...)
{
	size_t l = 0;
	char *o;
	va_list ap;
	int i, ret;

	members[0] = '\0';
	for (i = 0; i < n; i++) {
		l += xsnprintf(members + l, len - l, " /dev/%s", ns[i]);
		run_cmdf("mdadm --zero-superblock /dev/%s 2>/dev/null", ns[i]);
	}
	if (extra)
		xsnprintf(members + l, len - l, " %s", extra);
	va_start(ap, opts);
	o = str_vprintf(opts, ap);
	va_end(ap);
	if (!o)
		return -1;
	ret = run_cmdf("mdadm --create %s --run --quiet --force --assume-clean %s --raid-devices=%d%s",
		       md, o, n + !!extra, members);
	free(o);
	return ret;
}

/*
 * Make a fresh @fs ("xfs" or "ext4") on /dev/@ns and mount it at @mnt;
 * @ext4_opts are more mkfs.ext4 options (" -E ...", or "").
 */
static inline int mkfs_mount_opts(const char *fs, const char *ns,
				  const char *mnt, const char *ext4_opts)
{
	char dev[NAME_MAX + sizeof("/dev/")];
	int ret;

	umount2(mnt, MNT_DETACH);
	mkdir(mnt, 0755);
	if (!strcmp(fs, "xfs"))
		ret = run_cmdf("mkfs.xfs -q -f /dev/%s", ns);
	else
		ret = run_cmdf("mkfs.ext4 -q -F%s /dev/%s", ext4_opts, ns);
	if (ret)
		return -EIO;
	xsnprintf(dev, sizeof(dev), "/dev/%s", ns);
	return mount(dev, mnt, fs, 0, NULL) ? -errno : 0;
}

/*
 * The number after "@key@sep" at the start of a line of @file (a
 * /proc file of one value a line), or -1.
 */
static inline long long proc_field(const char *file, const char *key,
				   char sep)
{
	char line[128];
	long long v = -1;
	size_t n = strlen(key);
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == sep) {
			v = atoll(line + n + 1);
			break;
		}
	fclose(f);
	return v;
}

/* A counter of /proc/vmstat, or -1. */
static inline long long vmstat(const char *name)
{
	return proc_field("/proc/vmstat", name, ' ');
}

/*
 * Drive limits by cgroup v2 io.max: cg_io_enter() moves this process into
 * the cgroup @cg (mounting cgroup2 and enabling io as needed),
 * cg_io_max() limits that cgroup's reads of /dev/@ns to @rbps bytes/s
 * ("max": no limit), cg_io_leave() moves the process back to the root
 * and removes @cg, whose limits go with it.  0 or -errno.
 */
#define CG_ROOT		"/sys/fs/cgroup"

static inline int cg_io_enter(const char *cg)
{
	char path[PATH_MAX], line[32];

	if (access(CG_ROOT "/cgroup.subtree_control", F_OK)) {
		mkdir(CG_ROOT, 0755);
		if (mount("cgroup2", CG_ROOT, "cgroup2", 0, NULL))
			return -errno;
	}
	if (sysfs_write(CG_ROOT "/cgroup.subtree_control", "+io"))
		return -EIO;
	if (mkdir(cg, 0755) && errno != EEXIST)
		return -errno;
	snprintf(line, sizeof(line), "%d", getpid());
	xsnprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	return sysfs_write(path, line);
}

static inline int cg_io_max(const char *cg, const char *ns, const char *rbps)
{
	char path[PATH_MAX], line[96];
	struct stat st;

	xsnprintf(path, sizeof(path), "/dev/%s", ns);
	if (stat(path, &st))
		return -errno;
	snprintf(line, sizeof(line), "%u:%u rbps=%s", major(st.st_rdev),
		 minor(st.st_rdev), rbps);
	xsnprintf(path, sizeof(path), "%s/io.max", cg);
	return sysfs_write(path, line);
}

static inline int cg_io_leave(const char *cg)
{
	char line[32];
	int i;

	snprintf(line, sizeof(line), "%d", getpid());
	if (sysfs_write(CG_ROOT "/cgroup.procs", line))
		return -EIO;
	/* A thread just joined may not have left the cgroup yet. */
	for (i = 0; rmdir(cg); i++) {
		if (errno != EBUSY || i == 20)
			return -errno;
		usleep(50 * 1000);
	}
	return 0;
}

/*
 * Unmount @mnt for good, once every file of the test is closed (from a
 * FIXTURE_TEARDOWN_PARENT, after the test's process has exited).  A lazy
 * unmount would hide an open file or a mount reference that the kernel
 * still holds: the file system would stay alive with its device claimed,
 * and a later test would fail to make an array or a file system there.
 * What the exit leaves to workers (io_uring's ring teardown, a delayed
 * fput()) goes within seconds, so EBUSY is retried for up to @secs.
 * 0, or -errno of the last try; the mount is then detached lazily.
 */
static inline int umount_settled(const char *mnt, int secs)
{
	int i, ret;

	for (i = 0;; i++) {
		if (!umount2(mnt, 0))
			return 0;
		ret = -errno;
		if (ret != -EBUSY || i == secs * 10)
			break;
		usleep(100 * 1000);
	}
	umount2(mnt, MNT_DETACH);
	return ret;
}

/* Make a fresh @fs ("xfs" or "ext4") on /dev/@ns and mount it at @mnt. */
static inline int mkfs_mount(const char *fs, const char *ns, const char *mnt)
{
	return mkfs_mount_opts(fs, ns, mnt, "");
}

/* Sectors written to /dev/@blk so far (/sys/block/@blk/stat), or -1. */
static inline long long sectors_written(const char *blk)
{
	char path[PATH_MAX], buf[512];
	unsigned long long f[7];

	snprintf(path, sizeof(path), "/sys/block/%s/stat", blk);
	if (sysfs_read(path, buf, sizeof(buf)) ||
	    sscanf(buf, "%llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1],
		   &f[2], &f[3], &f[4], &f[5], &f[6]) != 7)
		return -1;
	return f[6];
}

/*
 * md's "check" of the array whose md directory is @md_sys
 * ("/sys/block/md0/md"), run to the end (5 minutes at most): its
 * mismatch_cnt, the sectors in which the legs differ, or -1.
 */
static inline long long md_check(const char *md_sys)
{
	char path[PATH_MAX], action[32] = "";
	long long cnt;
	int i;

	snprintf(path, sizeof(path), "%s/sync_action", md_sys);
	if (sysfs_write(path, "check"))
		return -1;
	/* "check" from the write on (MD_RECOVERY_NEEDED), until done. */
	for (i = 0; i < 3000; i++) {
		if (!sysfs_read(path, action, sizeof(action)) &&
		    !strncmp(action, "idle", 4))
			break;
		usleep(100000);
	}
	if (strncmp(action, "idle", 4))
		return -1;
	/* Not a check that md declined to start: it ran, and ended. */
	snprintf(path, sizeof(path), "%s/last_sync_action", md_sys);
	if (sysfs_read(path, action, sizeof(action)) ||
	    strncmp(action, "check", 5))
		return -1;
	snprintf(path, sizeof(path), "%s/mismatch_cnt", md_sys);
	return sysfs_read_ll(path, &cnt) ? -1 : cnt;
}

/*
 * The state letter of task @tid, a process or a thread ('D': asleep
 * uninterruptibly, as a task waiting for its I/O is), or '?'.
 */
static inline char task_state(pid_t tid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", tid);
	if (sysfs_read(path, buf, sizeof(buf)))
		return '?';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* XFS_IOC_GOINGDOWN and EXT4_IOC_SHUTDOWN: one number, one flag. */
#define SPIN_IOC_SHUTDOWN		_IOR('X', 125, uint32_t)
#define SPIN_SHUTDOWN_NOLOGFLUSH	0x2

/*
 * A power cut of the file system @fs ("xfs" or "ext4") mounted at @mnt
 * from /dev/@ns, then a mount again: it is shut down without flushing its
 * log (dirty pages and the log not yet written are lost, as a power cut
 * loses them; nothing is synced first), unmounted, and mounted again,
 * which replays what the log holds on the drive.  What a file reads
 * afterwards is what fsync(), O_DSYNC or RWF_DSYNC wrote out and logged,
 * read from the drive into a page cache that starts empty.  Not a cut of
 * the drive: bios already submitted still complete, and the rig's drives
 * have no volatile cache to lose, so a missing FUA or flush goes unseen
 * here (the dm-log-writes replays of append_test's crash cases see
 * those).  Every descriptor on the file system must be closed first.
 * 0 or -errno.
 */
static inline int power_cut_remount(const char *fs, const char *ns,
				    const char *mnt)
{
	char dev[NAME_MAX + sizeof("/dev/")];
	uint32_t flags = SPIN_SHUTDOWN_NOLOGFLUSH;
	int fd, ret;

	fd = open(mnt, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	ret = ioctl(fd, SPIN_IOC_SHUTDOWN, &flags) ? -errno : 0;
	close(fd);
	if (ret)
		return ret;
	if (umount(mnt))
		return -errno;
	xsnprintf(dev, sizeof(dev), "/dev/%s", ns);
	return mount(dev, mnt, fs, 0, NULL) ? -errno : 0;
}

/*
 * A file of @size bytes of pattern(@seed) at @path, created or truncated
 * (mode 0644), and fsynced.  0 or -errno.
 */
static inline int write_pattern_file(const char *path, size_t size,
				     uint64_t seed)
{
	int fd, ret;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	ret = write_pattern(fd, size, seed);
	close(fd);
	return ret;
}

/*
 * Pages of [@off, @off + @len) of the file behind @fd in the page cache.
 * mincore() on a mapping that is never touched: it neither faults pages
 * in nor marks them accessed.  -1 on error.
 */
static inline long resident_pages(int fd, off_t off, size_t len)
{
	const off_t page = sysconf(_SC_PAGESIZE);
	off_t start = off & ~(page - 1);
	size_t maplen = off + len - start;
	size_t pages = (maplen + page - 1) / page, i;
	unsigned char *vec = malloc(pages);
	long resident = -1;
	void *map;

	map = mmap(NULL, maplen, PROT_READ, MAP_SHARED, fd, start);
	if (vec && map != MAP_FAILED && !mincore(map, maplen, vec))
		for (resident = 0, i = 0; i < pages; i++)
			resident += vec[i] & 1;
	if (map != MAP_FAILED)
		munmap(map, maplen);
	free(vec);
	return resident;
}

/*
 * Of the pages of [@off, @off + @len) of the file that are in the page
 * cache, how many are in large folios (compound pages), and with
 * @private, in large folios with private data (PG_private): each page is
 * mapped, read once so that it is, and looked up in /proc/self/pagemap
 * and /proc/kpageflags.  Needs CAP_SYS_ADMIN.  -1 on error.
 */
#define KPF_COMPOUND_HEAD_BIT	15
#define KPF_COMPOUND_TAIL_BIT	16
#define KPF_PRIVATE_BIT		35
static inline long large_folio_pages(int fd, off_t off, size_t len,
				     bool private)
{
	const off_t page = sysconf(_SC_PAGESIZE);
	off_t start = off & ~(page - 1);
	size_t maplen = off + len - start;
	size_t pages = (maplen + page - 1) / page, i;
	unsigned char *vec = malloc(pages);
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY);
	uint64_t ent, flags, large_mask;
	long large = -1;
	volatile unsigned char c;
	unsigned char *map;

	large_mask = 1ULL << KPF_COMPOUND_HEAD_BIT |
		     1ULL << KPF_COMPOUND_TAIL_BIT;
	map = mmap(NULL, maplen, PROT_READ, MAP_SHARED, fd, start);
	/* MADV_RANDOM: the faults below read nothing ahead. */
	if (!vec || pm < 0 || kf < 0 || map == MAP_FAILED ||
	    madvise(map, maplen, MADV_RANDOM) || mincore(map, maplen, vec))
		goto out;
	for (large = 0, i = 0; i < pages; i++) {
		if (!(vec[i] & 1))
			continue;	/* not cached: do not read it in */
		c = map[i * page];
		(void)c;
		if (pread(pm, &ent, sizeof(ent),
			  ((uintptr_t)map / page + i) * sizeof(ent)) !=
		    sizeof(ent) || !(ent >> 63) || !(ent & ((1ULL << 55) - 1)) ||
		    pread(kf, &flags, sizeof(flags),
			  (ent & ((1ULL << 55) - 1)) * sizeof(flags)) !=
		    sizeof(flags)) {
			large = -1;
			break;
		}
		large += (flags & large_mask) &&
			 (!private || flags & 1ULL << KPF_PRIVATE_BIT);
	}
out:
	if (map != MAP_FAILED)
		munmap(map, maplen);
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	free(vec);
	return large;
}

/* Seconds on CLOCK_MONOTONIC. */
static inline double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A fixed xorshift, not rand(): the same sequence on every libc. */
static inline uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define TRACEFS		"/sys/kernel/tracing"

/* Add (or remove) a kprobe event: a line appended to kprobe_events. */
static inline int kprobe_event(const char *line)
{
	int fd = open(TRACEFS "/kprobe_events", O_WRONLY | O_APPEND);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, line, strlen(line));
	close(fd);
	return n == (ssize_t)strlen(line) ? 0 : -EIO;
}

/*
 * A kprobe event @name on the entry of @symbol, enabled; or, with @symbol
 * NULL, @name disabled and removed.  0 or -errno.
 */
static inline int kprobe_set(const char *name, const char *symbol)
{
	char path[PATH_MAX], line[256];

	if (access(TRACEFS "/kprobe_events", F_OK) &&
	    mount("tracefs", TRACEFS, "tracefs", 0, NULL))
		return -errno;
	snprintf(path, sizeof(path), TRACEFS "/events/kprobes/%s/enable",
		 name);
	if (!symbol) {
		sysfs_write(path, "0");
		snprintf(line, sizeof(line), "-:%s\n", name);
		return kprobe_event(line);
	}
	snprintf(line, sizeof(line), "p:%s %s\n", name, symbol);
	if (kprobe_event(line))
		return -EIO;
	return sysfs_write(path, "1");
}

/* The hits of kprobe event @name (kprobe_profile), or -1. */
static inline long long kprobe_hits(const char *name)
{
	char buf[8192], *p;
	long long hits;

	if (sysfs_read(TRACEFS "/kprobe_profile", buf, sizeof(buf)))
		return -1;
	p = strstr(buf, name);
	if (!p || sscanf(p + strlen(name), "%lld", &hits) != 1)
		return -1;
	return hits;
}

static inline int trace_clear(void)
{
	int fd = open(TRACEFS "/trace", O_WRONLY | O_TRUNC);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* The whole trace buffer as text, NUL-terminated; free() it. */
static inline char *trace_slurp(void)
{
	size_t cap = 1 * MiB, len = 0;
	char *buf = malloc(cap), *bigger;
	ssize_t n;
	int fd;

	fd = open(TRACEFS "/trace", O_RDONLY);
	if (fd < 0 || !buf)
		goto fail;
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len - 1 == 0) {
			bigger = realloc(buf, cap * 2);
			if (!bigger)
				goto fail;
			buf = bigger;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* Whether the @len bytes at @p are all zero. */
static inline bool all_zero(const unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* Index of the first differing byte, or -1 when equal. */
static inline long first_diff(const void *a, const void *b, size_t len)
{
	const unsigned char *x = a, *y = b;
	size_t i;

	if (!memcmp(a, b, len))
		return -1;
	for (i = 0; i < len; i++)
		if (x[i] != y[i])
			return i;
	return -1;
}

/*
 * A known gap: the case reports XFAIL while @gap holds, and XPASS once it
 * no longer does (then drop the XFAIL_IF).  The message names the issue
 * the gap waits on: scripts/run-tests.sh fails the run on an XFAIL that
 * names none ("#NN"), and on any XPASS.  A failure before it stays a
 * failure.  (The 6.12 harness has XFAIL_ADD(), which marks a whole
 * variant's case, but no way to give the reason.)  Call it last.  Expands
 * in a TEST_F() body, after kselftest_harness.h.
 */
#define XFAIL_IF(gap, fmt, ...) do {					\
	if (_metadata->exit_code == KSFT_PASS) {			\
		snprintf(_metadata->results->reason,			\
			 sizeof(_metadata->results->reason),		\
			 fmt, ##__VA_ARGS__);				\
		_metadata->exit_code = (gap) ? KSFT_XFAIL : KSFT_XPASS;	\
	}								\
} while (0)

/*
 * Strict mode: SPIN_STRICT=1 in the environment.  scripts/guest-init
 * sets it for everything the QEMU rig runs, where every drive and
 * provider the suite looks for exists.
 */
static inline bool spin_strict(void)
{
	const char *s = getenv("SPIN_STRICT");

	return s && !strcmp(s, "1");
}

/*
 * SPIN_NEED(cond, fmt, ...): a case needs a piece of the rig, and @cond
 * says whether this machine has it.  Every look-up of rig hardware goes
 * through it: a rig NVMe drive (nvme_rig_ns()), the drive outside the
 * switch (serial SPINFAR0), the multipath namespace (SPINMPATH), a
 * provider a drive can or cannot reach (p2pmem_find()), a device bound
 * to test_p2pdma (the "gpu" memory).  Never a kernel feature: a missing
 * CONFIG option (fail_make_request, fault injection in debugfs, nvmet,
 * the NVMe fabrics host, the test_p2pdma driver, x86 PAT's list) fails
 * its ASSERT_*() everywhere, after a modprobe and a mount of debugfs or
 * configfs have had their chance.
 * When @cond is false, @fmt (printf-style) says what is absent, and
 *  - in strict mode (spin_strict(): the rig) the case fails, as a failed
 *    ASSERT_*() does: the rig always has it, so its absence is a broken
 *    rig or kernel.  "rig hardware missing: " and @fmt are logged and put
 *    on the case's result line;
 *  - otherwise (another machine: one NVMe drive named in $SPIN_TEST_NVME
 *    and one provider, say) the case skips: SKIP(return, ...) with the
 *    reason "needs " and @fmt.  A case that has already failed (an
 *    EXPECT_*()) stays failed, and returns there too.
 * Either way the case still reports its one result line (case-counts).
 * It uses the harness's _metadata and returns from the function it is
 * in, as SKIP(return, ...) does: use it in FIXTURE_SETUP() (a skip there
 * skips the case, and its teardown does not run), in a TEST_F() or TEST()
 * body (the teardown runs), or in a macro expanded there; never in a
 * helper function, whose caller would go on.  Expands after
 * kselftest_harness.h.
 */
#define SPIN_NEED(cond, fmt, ...) do {					\
	const char *__need;						\
	char *__what;							\
									\
	if (cond)							\
		break;							\
	__what = str_printf(fmt, ##__VA_ARGS__);			\
	__need = __what ? __what : fmt;					\
	if (spin_strict()) {						\
		snprintf(_metadata->results->reason,			\
			 sizeof(_metadata->results->reason),		\
			 "rig hardware missing: %s", __need);		\
		__TH_LOG("%s", _metadata->results->reason);		\
		free(__what);						\
		_metadata->exit_code = KSFT_FAIL;			\
		__bail(1, _metadata);	/* as ASSERT_*() does */	\
	} else if (_metadata->exit_code == KSFT_FAIL) {			\
		__TH_LOG("needs %s", __need);				\
		free(__what);						\
		return;							\
	} else {							\
		SKIP(free(__what); return, "needs %s", __need);	\
	}								\
} while (0)

/*
 * SPIN_NEED()'s words for a rig drive that was not found; its arguments
 * are the drive's index (from 0, nvme_rig_ns()) and how many drives the
 * case needs.
 */
#define SPIN_RIG_DRIVE_FMT						\
	"rig NVMe drive %d of %d (serial " SPIN_RIG_SERIAL "*, "	\
	"or named in $SPIN_TEST_NVME): not found"

/* Attach @file to a free loop device; its path goes to @dev. */
static inline int loop_attach(const char *file, char *dev, size_t len)
{
	int ctl, fd, lfd, n, ret = -1;

	ctl = open("/dev/loop-control", O_RDWR);
	if (ctl < 0)
		return -1;
	n = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	if (n < 0)
		return -1;
	snprintf(dev, len, "/dev/loop%d", n);
	fd = open(file, O_RDWR);
	lfd = open(dev, O_RDWR);
	if (fd >= 0 && lfd >= 0)
		ret = ioctl(lfd, LOOP_SET_FD, fd);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	return ret;
}

static inline void loop_detach(const char *dev)
{
	int fd = open(dev, O_RDWR);

	if (fd >= 0) {
		ioctl(fd, LOOP_CLR_FD, 0);
		close(fd);
	}
}

/*
 * A fault_attr directory in debugfs (fail_make_request, an NVMe disk's
 * fault_inject): its knobs are saved before a test arms it and put back
 * after.  Arming makes it fail every request, quietly, @times times.
 */
#define FAULT_ATTR_NR	5

struct fault_attrs {
	char dir[PATH_MAX];
	char saved[FAULT_ATTR_NR][64];
	bool ok;		/* saved: restore them */
};

static inline const char *fault_attr_name(unsigned int i)
{
	static const char *const names[FAULT_ATTR_NR] = {
		"probability", "interval", "times", "space", "verbose",
	};

	return names[i];
}

static inline int fault_attr_set(const char *dir, const char *attr,
				 const char *val)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", dir, attr);
	return sysfs_write(path, val);
}

/* Save the knobs of @dir in @fa; 0 or -1. */
static inline int fault_attrs_save(struct fault_attrs *fa, const char *dir)
{
	char path[PATH_MAX + 64];
	unsigned int i;

	snprintf(fa->dir, sizeof(fa->dir), "%s", dir);
	for (i = 0; i < FAULT_ATTR_NR; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, fault_attr_name(i));
		if (sysfs_read(path, fa->saved[i], sizeof(fa->saved[i])))
			return -1;
	}
	fa->ok = true;
	return 0;
}

static inline void fault_attrs_restore(struct fault_attrs *fa)
{
	unsigned int i;

	for (i = 0; fa->ok && i < FAULT_ATTR_NR; i++)
		fault_attr_set(fa->dir, fault_attr_name(i), fa->saved[i]);
}

/* Fail every request from now on, quietly, @times (a number) times. */
static inline int fault_attrs_arm(const char *dir, const char *times)
{
	return fault_attr_set(dir, "verbose", "0") ||
	       fault_attr_set(dir, "space", "0") ||
	       fault_attr_set(dir, "interval", "1") ||
	       fault_attr_set(dir, "probability", "100") ||
	       fault_attr_set(dir, "times", times) ? -1 : 0;
}

/*
 * The NVMe driver's fault injection for /dev/@ns into @dir: it fails
 * requests at completion, after their DMA was in flight, where
 * fail_make_request fails bios before they are issued.  Under a
 * multipath head (nvme0n1 over nvme0c0n1) the requests are the path
 * disk's.  0 or -ENOENT (no CONFIG_FAULT_INJECTION_DEBUG_FS).
 */
static inline int nvme_fault_dir(const char *ns, char *dir, size_t len)
{
	unsigned int i, sub, nsid;

	if (sscanf(ns, "nvme%un%u", &sub, &nsid) != 2)
		return -ENOENT;
	for (i = 0; i < 16; i++) {
		xsnprintf(dir, len, "/sys/kernel/debug/nvme%uc%un%u/fault_inject",
			  sub, i, nsid);
		if (!access(dir, F_OK))
			return 0;
	}
	xsnprintf(dir, len, "/sys/kernel/debug/%s/fault_inject", ns);
	if (!access(dir, F_OK))
		return 0;
	dir[0] = '\0';
	return -ENOENT;
}

/* fail_make_request for the disk /dev/@blk, on or off. */
static inline int make_it_fail(const char *blk, bool on)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/block/%s/make-it-fail", blk);
	return sysfs_write(path, on ? "1" : "0");
}

#endif /* SPIN_UTIL_H */
