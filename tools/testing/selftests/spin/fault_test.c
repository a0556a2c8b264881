// SPDX-License-Identifier: GPL-2.0
/*
 * Faults under P2P reads and writes: the result is an error or the right
 * bytes, never wrong bytes, and no device memory is lost.
 *
 * fail_make_request (CONFIG_FAIL_MAKE_REQUEST) fails a share of the bios
 * sent to one rig drive, used raw or as a member of md raid0, and dm-dust
 * fails reads of chosen blocks of a drive.  Meanwhile buffered reads into
 * device memory (the P2P router's DMA and its page-cache fallback) and
 * buffered writes from device memory run against a model of the device.
 * Every byte a read returns is checked against the model; a write that
 * fails, or whose fsync fails, makes its range unknown.  With the faults
 * off the whole device is read back and every known byte checked, and the
 * provider's p2pmem/available must be back where it started.
 *
 * No file system: a failed metadata write would shut it down, which
 * tests the file system, not the router.
 */
#define _GNU_SOURCE
#include "spin_util.h"
#include "../kselftest_harness.h"

#define P2P_ROUTER	"/sys/kernel/mm/p2p_router"
#define FAIL_DIR	"/sys/kernel/debug/fail_make_request"
#define DEV_SIZE	(32 * MiB)
#define MAP_LEN		(2 * MiB)
#define OPS		300
#define MD		"/dev/md0"
#define DUST		"spin-fault-dust"
#define POISON		0xa5

FIXTURE(fault) {
	char ns[2][NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char dev[PATH_MAX];		/* what is read and written */
	char failing[NAME_MAX + 1];	/* the drive with make-it-fail */
	unsigned char *model;
	unsigned char *known;		/* 1: model[i] is what the device holds */
	unsigned char *map;
	unsigned char *ram;
	long long avail0;
	uint64_t rng;
	int fd;
	bool assembled, dust;
};

FIXTURE_VARIANT(fault) {
	int members;	/* > 1: md raid0, the first member fails */
	bool dust;	/* dm-dust over the drive instead of fail_make_request */
};

FIXTURE_VARIANT_ADD(fault, nvme) { .members = 1 };
FIXTURE_VARIANT_ADD(fault, raid0) { .members = 2 };
FIXTURE_VARIANT_ADD(fault, dust) { .members = 1, .dust = true };

static int faults(FIXTURE_DATA(fault) *self, bool on)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/block/%s/make-it-fail",
		 self->failing);
	return sysfs_write(path, on ? "1" : "0");
}

FIXTURE_SETUP(fault)
{
	char cmd[1024], members[512] = "", nvme_dev[SYSFS_LEN];
	size_t i;
	int wfd;

	self->fd = -1;
	if (access(P2P_ROUTER, F_OK))
		SKIP(return, "no P2P router in this kernel");
	if (!variant->dust && access(FAIL_DIR, F_OK))
		SKIP(return, "no %s (CONFIG_FAIL_MAKE_REQUEST)", FAIL_DIR);
	run_cmd("mdadm --stop " MD " 2>/dev/null");
	run_cmd("dmsetup remove --noudevsync " DUST " 2>/dev/null");
	for (i = 0; i < (size_t)variant->members; i++) {
		size_t l = strlen(members);

		if (nvme_rig_ns(i, self->ns[i], sizeof(self->ns[i])))
			SKIP(return, "rig NVMe drive %zu not found", i);
		snprintf(members + l, sizeof(members) - l, " /dev/%s",
			 self->ns[i]);
	}
	ASSERT_EQ(0, nvme_pci_dev(self->ns[0], nvme_dev, sizeof(nvme_dev)));
	if (p2pmem_find(nvme_dev, true, self->provider,
			sizeof(self->provider)))
		SKIP(return, "no provider reachable from %s", self->ns[0]);
	snprintf(self->failing, sizeof(self->failing), "%s", self->ns[0]);
	snprintf(self->dev, sizeof(self->dev), "/dev/%s", self->ns[0]);

	if (variant->members > 1) {
		for (i = 0; i < (size_t)variant->members; i++) {
			snprintf(cmd, sizeof(cmd),
				 "mdadm --zero-superblock /dev/%s 2>/dev/null",
				 self->ns[i]);
			run_cmd(cmd);
		}
		snprintf(cmd, sizeof(cmd),
			 "mdadm --create " MD " --run --quiet --force --assume-clean --level=0 --chunk=64 --raid-devices=%d%s",
			 variant->members, members);
		ASSERT_EQ(0, run_cmd(cmd));
		self->assembled = true;
		snprintf(self->dev, sizeof(self->dev), MD);
	}
	if (variant->dust) {
		/* dm-dust counts in 512-byte sectors; blksz 4096. */
		/* No udev in the rig: mknodes makes /dev/mapper/<name>. */
		snprintf(cmd, sizeof(cmd),
			 "dmsetup create --noudevsync " DUST " --table '0 %lu dust /dev/%s 0 4096' && dmsetup mknodes " DUST,
			 DEV_SIZE / 512, self->ns[0]);
		ASSERT_EQ(0, run_cmd(cmd));
		self->dust = true;
		snprintf(self->dev, sizeof(self->dev), "/dev/mapper/" DUST);
	}

	self->avail0 = p2pmem_available(self->provider);
	ASSERT_LT(0, self->avail0);
	self->model = malloc(DEV_SIZE);
	self->known = malloc(DEV_SIZE);
	self->ram = malloc(MAP_LEN);
	ASSERT_NE(NULL, self->model);
	ASSERT_NE(NULL, self->known);
	ASSERT_NE(NULL, self->ram);
	self->rng = getpid() | 1;
	pattern_fill(self->model, DEV_SIZE, 0, self->rng);
	memset(self->known, 1, DEV_SIZE);

	wfd = open(self->dev, O_RDWR);
	ASSERT_LE(0, wfd) TH_LOG("%s: %s", self->dev, strerror(errno));
	ASSERT_EQ(0, write_pattern(wfd, DEV_SIZE, self->rng));
	close(wfd);
	ASSERT_EQ(0, drop_caches());

	self->fd = open(self->dev, O_RDWR);
	ASSERT_LE(0, self->fd);
	self->map = p2pmem_map(self->provider, MAP_LEN);
	ASSERT_NE(NULL, self->map);

	if (!variant->dust) {
		/* 10% of the drive's bios fail, quietly, for ever. */
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/probability", "10"));
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/interval", "1"));
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/times", "-1"));
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/verbose", "0"));
	}
}

FIXTURE_TEARDOWN(fault)
{
	if (!variant->dust && self->failing[0])
		faults(self, false);
	if (self->map)
		munmap(self->map, MAP_LEN);
	if (self->fd >= 0)
		close(self->fd);
	if (self->dust)
		run_cmd("dmsetup remove --noudevsync " DUST " 2>/dev/null");
	if (self->assembled)
		run_cmd("mdadm --stop " MD " 2>/dev/null");
	free(self->model);
	free(self->known);
	free(self->ram);
}

/* Bytes of [off, off + len) that are known and differ from @buf, or -1. */
static long known_diff(FIXTURE_DATA(fault) *self, const unsigned char *buf,
		       size_t off, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (self->known[off + i] && buf[i] != self->model[off + i])
			return i;
	return -1;
}

static void rand_io(FIXTURE_DATA(fault) *self, size_t *off, size_t *len)
{
	*len = 1 + xorshift64(&self->rng) % MAP_LEN;
	if (xorshift64(&self->rng) & 1)
		*len = (*len + 4095) & ~4095UL;
	if (*len > MAP_LEN)
		*len = MAP_LEN;
	*off = xorshift64(&self->rng) % (DEV_SIZE - *len + 1);
	if (xorshift64(&self->rng) & 1)
		*off &= ~4095UL;
}

/*
 * Reads into device memory (and some into RAM) with faults on: each one
 * fails with EIO or returns bytes that match.  Then, faults off, every
 * byte reads back right.
 */
static void read_ops(struct __test_metadata *_metadata,
		     FIXTURE_DATA(fault) *self, int nr, bool writes)
{
	int full = 0, shortr = 0, errors = 0, werr = 0, i;
	size_t off, len;
	ssize_t ret;
	long d;

	for (i = 0; i < nr; i++) {
		bool to_dev = xorshift64(&self->rng) % 4;
		unsigned char *buf = to_dev ? self->map : self->ram;

		rand_io(self, &off, &len);
		if (writes && xorshift64(&self->rng) % 2) {
			size_t j;

			for (j = 0; j < len; j++)
				buf[j] = xorshift64(&self->rng);
			ret = pwrite(self->fd, buf, len, off);
			if (ret >= 0)
				memcpy(self->model + off, buf, ret);
			/* On the device only if the fsync says so. */
			if (ret != (ssize_t)len || fsync(self->fd)) {
				memset(self->known + off, 0, len);
				werr++;
			} else {
				memset(self->known + off, 1, len);
			}
			continue;
		}
		if (!(i % 16))
			ASSERT_EQ(0, drop_caches());
		memset(buf, POISON, len);
		ret = pread(self->fd, buf, len, off);
		if (ret < 0) {
			EXPECT_EQ(EIO, errno) TH_LOG("read %zu+%zu: %s", off,
						     len, strerror(errno));
			errors++;
			continue;
		}
		d = known_diff(self, buf, off, ret);
		ASSERT_EQ(-1, d) TH_LOG("%s read %zu+%zu returned %zd with byte %zu wrong",
					to_dev ? "device memory" : "RAM",
					off, len, ret, off + d);
		if (ret == (ssize_t)len)
			full++;
		else
			shortr++;
	}
	TH_LOG("%d reads whole and right, %d short and right, %d EIO, %d failed writes",
	       full, shortr, errors, werr);
}

static void verify_all(struct __test_metadata *_metadata,
		       FIXTURE_DATA(fault) *self)
{
	size_t off;
	long d;

	ASSERT_EQ(0, drop_caches());
	for (off = 0; off < DEV_SIZE; off += MAP_LEN) {
		memset(self->map, POISON, MAP_LEN);
		ASSERT_EQ(MAP_LEN, pread(self->fd, self->map, MAP_LEN, off));
		d = known_diff(self, self->map, off, MAP_LEN);
		ASSERT_EQ(-1, d) TH_LOG("byte %zu wrong after the faults",
					off + d);
	}
}

static long long router_stat(const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), P2P_ROUTER "/stats/%s", name);
	return sysfs_read_ll(path);
}

TEST_F_TIMEOUT(fault, reads_and_writes, 600)
{
	long long err0 = router_stat("fallback_error");

	if (variant->dust) {
		char cmd[256];
		int i;

		/* Every 97th block of the first 16 MiB reads as an error. */
		for (i = 0; i < 4096; i += 97) {
			snprintf(cmd, sizeof(cmd),
				 "dmsetup message " DUST " 0 addbadblock %d >/dev/null", i);
			ASSERT_EQ(0, run_cmd(cmd));
		}
		ASSERT_EQ(0, run_cmd("dmsetup message " DUST " 0 enable"));
		read_ops(_metadata, self, OPS, false);
		ASSERT_EQ(0, run_cmd("dmsetup message " DUST " 0 disable"));
	} else {
		ASSERT_EQ(0, faults(self, true));
		read_ops(_metadata, self, OPS, true);
		ASSERT_EQ(0, faults(self, false));
	}
	TH_LOG("router: %lld DMA segments failed and were retried through the page cache",
	       router_stat("fallback_error") - err0);
	verify_all(_metadata, self);
	munmap(self->map, MAP_LEN);
	self->map = NULL;
	EXPECT_EQ(self->avail0, p2pmem_available(self->provider));
}

TEST_HARNESS_MAIN
