// SPDX-License-Identifier: GPL-2.0
/*
 * Faults under P2P reads and writes: the result is an error or the right
 * bytes, never wrong bytes, and no device memory is lost.
 *
 * fail_make_request (CONFIG_FAIL_MAKE_REQUEST) fails a share of the bios
 * sent to one rig drive, used raw or as a member of md raid0, before they
 * are issued; the NVMe driver's fault injection fails a share of a drive's
 * requests at completion, once their data moved (for the router's, the DMA
 * into or out of device memory), with a media error; dm-dust fails reads
 * of chosen blocks of a drive.  md raid1 with NVMe faults on one leg must
 * hide them all: md retries a failed read on the other leg.  Meanwhile
 * buffered reads into device memory (the P2P router's DMA and its
 * page-cache fallback) and buffered writes from device memory run against
 * a model of the device.  Every byte a read returns is checked against the
 * model; a write that fails, or whose fsync fails, makes its range
 * unknown.  With the faults off the whole device is read back and every
 * known byte checked, and the provider's p2pmem/available must be back
 * where it started.
 *
 * No file system: a failed metadata write would shut it down, which
 * tests the file system, not the router.  Each case proves its premise:
 * the injected faults fired (the "times" budget of fail_make_request or
 * of the NVMe injection was consumed, or dm-dust's bad blocks gave EIO or
 * short reads), the router did DMA (stats/p2p_segments and p2p_bytes went
 * up), and a fault hit a routed DMA, which the router redid through the
 * page cache (stats/fallback_error went up) or, on md raid1, no read
 * failed.
 *
 * The "wberr" fixture is the exception, on XFS, ext4 and the raw
 * namespace: a buffered write whose writeback fails leaves the new bytes
 * clean in the page cache and the old ones on the disk.  A read into
 * device memory must then return what a read into RAM returns, the new
 * bytes, even with a cost model under which the router would rather DMA
 * cached folios than copy them.  Faults are injected only around the
 * data writeback (sync_file_range(), which forces no log or journal
 * write), after the journal has been forced, so that the file system
 * survives; the case checks that it does.  A positive control first shows
 * that, on XFS, the same model folds the same cached pages when their
 * writeback went well.
 */
#define _GNU_SOURCE
#include "spin_util.h"
#include "../kselftest_harness.h"

#define FAIL_DIR	"/sys/kernel/debug/fail_make_request"
#define DEV_SIZE	(32 * MiB)
#define MAP_LEN		(2 * MiB)
#define OPS		300
#define MD		"/dev/md0"
#define DUST		"spin-fault-dust"
/* fail_make_request's budget: what is left of it shows what fired. */
#define FAIL_TIMES	1000000
#define STR_(x)		#x
#define STR(x)		STR_(x)

FIXTURE(fault) {
	char ns[2][NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char dev[PATH_MAX];		/* what is read and written */
	char failing[NAME_MAX + 1];	/* the drive with make-it-fail */
	char inject[PATH_MAX];		/* or with fault_inject */
	struct fault_attrs inj;		/* its knobs, put back */
	char inj_status[32];		/* and its status, */
	char inj_dnr[8];		/* and whether it sets DNR */
	unsigned char *model;
	unsigned char *known;		/* 1: model[i] is what the device holds */
	unsigned char *map;
	unsigned char *ram;
	long long avail0;
	uint64_t rng;
	int fd;
	bool assembled, dust;
	bool all_dev;		/* every read into device memory */
};

FIXTURE_VARIANT(fault) {
	int members;	/* > 1: md, the first member fails */
	int level;	/* its RAID level */
	bool dust;	/* dm-dust over the drive instead of fail_make_request */
	bool completion;	/* the NVMe driver's fault injection instead */
};

FIXTURE_VARIANT_ADD(fault, nvme) { .members = 1 };
FIXTURE_VARIANT_ADD(fault, raid0) { .members = 2 };
FIXTURE_VARIANT_ADD(fault, dust) { .members = 1, .dust = true };
FIXTURE_VARIANT_ADD(fault, nvme_completion) {
	.members = 1, .completion = true };
/* One leg of md raid1 fails at completion: md hides every fault. */
FIXTURE_VARIANT_ADD(fault, raid1_completion) {
	.members = 2, .level = 1, .completion = true };

/*
 * The status injected: Unrecovered Read Error (BLK_STS_MEDIUM), on reads,
 * writes and flushes alike, with Do Not Retry, so that every fault reaches
 * the block layer.
 */
#define INJECT_STATUS		"0x281"

static int faults(FIXTURE_DATA(fault) *self, bool on)
{
	char path[PATH_MAX];

	if (self->inject[0])
		return fault_attr_set(self->inject, "probability",
				      on ? "10" : "0");
	snprintf(path, sizeof(path), "/sys/block/%s/make-it-fail",
		 self->failing);
	return sysfs_write(path, on ? "1" : "0");
}

FIXTURE_SETUP(fault)
{
	char cmd[1024], members[512], nvme_dev[SYSFS_LEN];
	size_t i;
	int wfd;

	router_learned_reset();	/* each case starts from defaults */
	self->fd = -1;
	/* Kernel features the rig's config turns on: missing is a failure. */
	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	debugfs_mount();
	if (!variant->dust && !variant->completion) {
		ASSERT_EQ(0, access(FAIL_DIR, F_OK))
			TH_LOG("no %s (CONFIG_FAIL_MAKE_REQUEST)", FAIL_DIR);
	}
	for (i = 0; i < (size_t)variant->members; i++) {
		char dir[PATH_MAX];

		SPIN_NEED(!nvme_rig_ns(i, self->ns[i], sizeof(self->ns[i])),
			  SPIN_RIG_DRIVE_FMT, (int)i, variant->members);
		/* Faults an earlier case that timed out may have left on. */
		make_it_fail(self->ns[i], false);
		if (!nvme_fault_dir(self->ns[i], dir, sizeof(dir)))
			fault_attr_set(dir, "probability", "0");
	}
	ASSERT_EQ(0, nvme_pci_dev(self->ns[0], nvme_dev, sizeof(nvme_dev)));
	SPIN_NEED(!p2pmem_find(nvme_dev, true, self->provider,
			       sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns[0]);
	/* The drive is there: its fault_inject is the kernel's feature. */
	if (variant->completion) {
		ASSERT_EQ(0, nvme_fault_dir(self->ns[0], self->inject,
					    sizeof(self->inject)))
			TH_LOG("no NVMe fault injection for %s (CONFIG_FAULT_INJECTION_DEBUG_FS)",
			       self->ns[0]);
	}
	md_stop_ours(MD);
	run_cmd("dmsetup remove --noudevsync " DUST " 2>/dev/null");
	snprintf(self->failing, sizeof(self->failing), "%s", self->ns[0]);
	snprintf(self->dev, sizeof(self->dev), "/dev/%s", self->ns[0]);

	if (variant->members > 1) {
		ASSERT_EQ(0, md_create(MD, variant->members, self->ns, NULL,
				       members, sizeof(members), "--level=%d%s",
				       variant->level,
				       variant->level ? "" : " --chunk=64"));
		self->assembled = true;
		snprintf(self->dev, sizeof(self->dev), MD);
	}
	if (variant->dust) {
		/* dm-dust counts in 512-byte sectors; blksz 4096. */
		/* No udev in the rig: mknodes makes /dev/mapper/<name>. */
		xsnprintf(cmd, sizeof(cmd),
			  "dmsetup create --noudevsync " DUST
			  " --table '0 %lu dust /dev/%s 0 4096' && dmsetup mknodes " DUST,
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
	TH_LOG("%s, seed %llu", self->dev, (unsigned long long)self->rng);
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

	if (variant->completion) {
		char path[PATH_MAX + 16], dnr[PATH_MAX + 16];

		/* self->inject: found above */
		ASSERT_EQ(0, fault_attrs_save(&self->inj, self->inject));
		snprintf(path, sizeof(path), "%s/status", self->inject);
		snprintf(dnr, sizeof(dnr), "%s/dont_retry", self->inject);
		ASSERT_EQ(0, sysfs_read(path, self->inj_status,
					sizeof(self->inj_status)));
		ASSERT_EQ(0, sysfs_read(dnr, self->inj_dnr,
					sizeof(self->inj_dnr)));
		/* As below, but off until faults() sets the probability. */
		ASSERT_EQ(0, fault_attr_set(self->inject, "probability", "0"));
		ASSERT_EQ(0, fault_attr_set(self->inject, "interval", "1"));
		ASSERT_EQ(0, fault_attr_set(self->inject, "space", "0"));
		ASSERT_EQ(0, fault_attr_set(self->inject, "verbose", "0"));
		ASSERT_EQ(0, fault_attr_set(self->inject, "times",
					    STR(FAIL_TIMES)));
		ASSERT_EQ(0, sysfs_write(path, INJECT_STATUS));
		ASSERT_EQ(0, sysfs_write(dnr, "Y"));
	} else if (!variant->dust) {
		/*
		 * 10% of the drive's bios fail, quietly, FAIL_TIMES times at
		 * most: far more than the case sends, and what is left says
		 * how many did.
		 */
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/probability", "10"));
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/interval", "1"));
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/space", "0"));
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/verbose", "0"));
		ASSERT_EQ(0, sysfs_write(FAIL_DIR "/times", STR(FAIL_TIMES)));
	}
}

FIXTURE_TEARDOWN(fault)
{
	char path[PATH_MAX + 16];

	if (!variant->dust && self->failing[0])
		faults(self, false);
	if (self->inj.ok) {
		fault_attrs_restore(&self->inj);
		snprintf(path, sizeof(path), "%s/status", self->inject);
		sysfs_write(path, self->inj_status);
		if (self->inj_dnr[0]) {
			snprintf(path, sizeof(path), "%s/dont_retry",
				 self->inject);
			sysfs_write(path, self->inj_dnr);
		}
	}
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

struct op_counts {
	int full;	/* reads whole and right */
	int shortr;	/* short and right */
	int errors;	/* EIO */
	int werr;	/* writes or their fsync failed */
};

/*
 * Reads into device memory (and some into RAM) with faults on: each one
 * fails with EIO or returns bytes that match.  Then, faults off, every
 * byte reads back right.
 */
static void read_ops(struct __test_metadata *_metadata,
		     FIXTURE_DATA(fault) *self, int nr, bool writes,
		     struct op_counts *c)
{
	int full = 0, shortr = 0, errors = 0, werr = 0, i;
	size_t off, len;
	ssize_t ret;
	long d;

	for (i = 0; i < nr; i++) {
		bool to_dev = xorshift64(&self->rng) % 4 || self->all_dev;
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
	c->full = full;
	c->shortr = shortr;
	c->errors = errors;
	c->werr = werr;
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

TEST_F_TIMEOUT(fault, reads_and_writes, 600)
{
	long long err0 = router_stat("fallback_error");
	long long seg0, bytes0, seg, bytes, left, fired = 0, redone;
	struct op_counts c;

	seg0 = router_stat("p2p_segments");
	bytes0 = router_stat("p2p_bytes");
	ASSERT_LE(0, seg0);
	ASSERT_LE(0, bytes0);
	if (variant->dust) {
		char cmd[256];
		int i;

		/* Every 97th block of the first 16 MiB reads as an error. */
		for (i = 0; i < 4096; i += 97) {
			xsnprintf(cmd, sizeof(cmd),
				  "dmsetup message " DUST " 0 addbadblock %d >/dev/null", i);
			ASSERT_EQ(0, run_cmd(cmd));
		}
		ASSERT_EQ(0, run_cmd("dmsetup message " DUST " 0 enable"));
		read_ops(_metadata, self, OPS, false, &c);
		ASSERT_EQ(0, run_cmd("dmsetup message " DUST " 0 disable"));
	} else {
		char path[PATH_MAX + 16];

		snprintf(path, sizeof(path), "%s/times",
			 self->inject[0] ? self->inject : FAIL_DIR);
		/*
		 * On raid1, reads only, all into device memory: md rewrites a
		 * leg after a failed read, and a failed write of its
		 * superblock fails the leg, after which nothing is injected.
		 */
		if (variant->level == 1) {
			ASSERT_EQ(0, sysfs_write("/sys/block/md0/md/max_read_errors",
						 "1000000"));
			self->all_dev = true;
		}
		ASSERT_EQ(0, faults(self, true));
		read_ops(_metadata, self, OPS, variant->level != 1, &c);
		ASSERT_EQ(0, faults(self, false));
		ASSERT_EQ(0, sysfs_read_ll(path, &left));
		fired = FAIL_TIMES - left;
	}
	seg = router_stat("p2p_segments") - seg0;
	bytes = router_stat("p2p_bytes") - bytes0;
	redone = router_stat("fallback_error") - err0;
	TH_LOG("router: %lld DMA segments (%lld bytes) completed, %lld failed and were retried through the page cache",
	       seg, bytes, redone);

	/* The premise: faults fired, and the router was in the way of them. */
	if (variant->dust) {
		TH_LOG("dm-dust: %d reads failed with EIO, %d were short",
		       c.errors, c.shortr);
		ASSERT_LT(0, c.errors + c.shortr)
			TH_LOG("no read met a bad block: the faults never fired");
	} else {
		TH_LOG("%s failed %lld %s of %s",
		       self->inject[0] ? "NVMe fault injection" :
		       "fail_make_request", fired,
		       self->inject[0] ? "requests at completion" : "bios",
		       self->failing);
		ASSERT_LT(0, fired) TH_LOG("the faults never fired");
		ASSERT_GT(FAIL_TIMES, fired);
	}
	ASSERT_LT(0, seg) TH_LOG("the router made no DMA");
	ASSERT_LT(0, bytes);
	if (variant->level == 1) {
		char path[PATH_MAX], state[64] = "";
		long long corrected = -1, degraded = -1;

		snprintf(path, sizeof(path),
			 "/sys/block/md0/md/dev-%s/errors", self->ns[0]);
		sysfs_read_ll(path, &corrected);
		snprintf(path, sizeof(path),
			 "/sys/block/md0/md/dev-%s/state", self->ns[0]);
		sysfs_read(path, state, sizeof(state));
		sysfs_read_ll("/sys/block/md0/md/degraded", &degraded);
		TH_LOG("md: %s %s, %lld sectors read again after an error; degraded %lld",
		       self->ns[0], state, corrected, degraded);
		/* The premise: md met read errors of the leg, and fixed them. */
		ASSERT_LT(0, corrected) TH_LOG("no read of the leg failed");
		/* The other leg holds every byte: no read may fail. */
		EXPECT_EQ(0, c.errors);
		EXPECT_EQ(0, c.shortr);
	} else {
		/* ... and a fault hit one of its DMAs, which it redid. */
		ASSERT_LT(0, redone) TH_LOG("no fault hit a routed DMA");
	}

	verify_all(_metadata, self);
	munmap(self->map, MAP_LEN);
	self->map = NULL;
	EXPECT_EQ(self->avail0, p2pmem_available(self->provider));
}

/*
 * A writeback error, then reads.  The file (or the raw namespace) holds
 * OLD bytes on the disk.  NEW bytes are written into some of its pages
 * with 4 KiB buffered writes (order-0 folios; in the xfs_large variant,
 * 64 KiB ones, which make large folios with iomap's per-block state as
 * private data), and their writeback fails:
 * fail_make_request fails every bio of the drive around a
 * sync_file_range(), which must report EIO.  The page cache now holds NEW
 * bytes, clean and up to date, where the disk has OLD ones, and a read
 * into RAM returns NEW.  A read into device memory must return the same,
 * with a cost model (DMA nearly free, copies at 1 MB/s) under which the
 * router would fold every clean cached folio into a DMA: a clean folio
 * may be read from the disk instead only when the disk provably holds its
 * bytes, which it does not after a writeback error on the mapping, nor
 * while the folio has buffer heads (ext4, block devices).
 */
#define WB_MNT		"/mnt/spin-fault"
#define WB_FILE_SIZE	(4 * MiB)
#define WB_LEN		(2 * MiB)	/* the range under test */
#define WB_PAGE		(4 * KiB)
#define WB_LARGE_PAGES	16		/* xfs_large: 64 KiB writes */
#define WB_COST_NS	"4096:1 1048576:2"	/* DMA nearly free */
#define WB_COPY_MBPS	"1"			/* copies very slow */

static const char *const wb_knobs[] = {
	"enabled", "p2p_cost_ns", "copy_mbps", "readahead_kb", "learn",
};

FIXTURE(wberr) {
	char ns[NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char path[PATH_MAX];
	struct fault_attrs fail;	/* fail_make_request, put back */
	char knob_saved[ARRAY_SIZE(wb_knobs)][256];
	unsigned char *map;	/* device memory, WB_LEN */
	unsigned char *ram;	/* WB_LEN */
	unsigned char *want;	/* what the page cache holds: NEW or OLD */
	unsigned char *disk;	/* WB_LEN, aligned for O_DIRECT */
	uint64_t seed;
	size_t unit;		/* pages per write of NEW bytes */
	bool mounted, knobs_saved, failing;
};

FIXTURE_VARIANT(wberr) {
	const char *fs;		/* NULL: the raw namespace */
	bool large;		/* NEW bytes in 64 KiB writes: large folios */
};

FIXTURE_VARIANT_ADD(wberr, xfs) { .fs = "xfs" };
FIXTURE_VARIANT_ADD(wberr, xfs_large) { .fs = "xfs", .large = true };
FIXTURE_VARIANT_ADD(wberr, ext4) { .fs = "ext4" };
FIXTURE_VARIANT_ADD(wberr, raw) { .fs = NULL };

/*
 * Pages of the range that get NEW bytes: single pages and one run of 16,
 * or, in 64 KiB writes, one such write in four.
 */
static bool wb_is_new(FIXTURE_DATA(wberr) *self, size_t page)
{
	if (self->unit > 1)
		return page / self->unit % 4 == 1;
	return page % 4 == 1 || (page >= 384 && page < 400);
}

/* Write NEW bytes into the pages wb_is_new() names; returns the pages. */
static size_t wb_write_new(struct __test_metadata *_metadata,
			   FIXTURE_DATA(wberr) *self, int fd, off_t base)
{
	const size_t len = self->unit * WB_PAGE;
	size_t page, nnew = 0;

	for (page = 0; page < WB_LEN / WB_PAGE; page += self->unit) {
		if (!wb_is_new(self, page))
			continue;
		pattern_fill(self->ram, len, base + page * WB_PAGE,
			     ~self->seed);
		EXPECT_EQ((ssize_t)len, pwrite(fd, self->ram, len,
					       base + page * WB_PAGE));
		memcpy(self->want + page * WB_PAGE, self->ram, len);
		nnew += self->unit;
	}
	return nnew;
}

/*
 * mkfs and mount, ext4 without lazy init: its background zeroing of inode
 * tables would otherwise meet the injected faults.
 */
static int wb_mkfs_mount(const char *fs, const char *ns)
{
	return mkfs_mount_opts(fs, ns, WB_MNT,
			       " -E lazy_itable_init=0,lazy_journal_init=0");
}

static int wb_knob_write(const char *knob, const char *val)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), P2P_ROUTER "/%s", knob);
	return sysfs_write(path, val);
}

static int wb_make_it_fail(FIXTURE_DATA(wberr) *self, bool on)
{
	int ret = make_it_fail(self->ns, on);

	if (!ret)
		self->failing = on;
	return ret;
}

FIXTURE_SETUP(wberr)
{
	char path[PATH_MAX];
	unsigned int i;
	int fd;

	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	debugfs_mount();
	ASSERT_EQ(0, access(FAIL_DIR, F_OK))
		TH_LOG("no %s (CONFIG_FAIL_MAKE_REQUEST)", FAIL_DIR);
	SPIN_NEED(!nvme_rig_ns(0, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, 0, 1);
	SPIN_NEED(!p2pmem_find_for_ns(self->ns, true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns);
	snprintf(path, sizeof(path), "/sys/block/%s/make-it-fail", self->ns);
	ASSERT_EQ(0, access(path, F_OK));
	md_stop_ours(MD);
	run_cmd("dmsetup remove --noudevsync " DUST " 2>/dev/null");
	self->seed = getpid() ^ 0x77beULL << 32;
	self->unit = variant->large ? WB_LARGE_PAGES : 1;
	TH_LOG("%s on %s, seed %llu", variant->fs ? variant->fs : "raw",
	       self->ns, (unsigned long long)self->seed);

	if (variant->fs) {
		ASSERT_EQ(0, wb_mkfs_mount(variant->fs, self->ns));
		self->mounted = true;
		snprintf(self->path, sizeof(self->path), WB_MNT "/data");
		fd = open(self->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else {
		snprintf(self->path, sizeof(self->path), "/dev/%s", self->ns);
		fd = open(self->path, O_RDWR);
	}
	ASSERT_LE(0, fd) TH_LOG("%s: %s", self->path, strerror(errno));
	ASSERT_EQ(0, write_pattern(fd, WB_FILE_SIZE, self->seed));	/* OLD */
	close(fd);

	self->map = p2pmem_map(self->provider, WB_LEN);
	ASSERT_NE(NULL, self->map);
	self->ram = malloc(WB_LEN);
	self->want = malloc(WB_LEN);
	ASSERT_NE(NULL, self->ram);
	ASSERT_NE(NULL, self->want);
	ASSERT_EQ(0, posix_memalign((void **)&self->disk, 4096, WB_LEN));

	/* Last: what the teardown puts back. */
	ASSERT_EQ(0, fault_attrs_save(&self->fail, FAIL_DIR));
	for (i = 0; i < ARRAY_SIZE(wb_knobs); i++) {
		snprintf(path, sizeof(path), P2P_ROUTER "/%s", wb_knobs[i]);
		ASSERT_EQ(0, sysfs_read(path, self->knob_saved[i],
					sizeof(self->knob_saved[i])))
			TH_LOG("cannot read %s", path);
	}
	self->knobs_saved = true;
}

FIXTURE_TEARDOWN(wberr)
{
	unsigned int i;

	if (self->failing)
		EXPECT_EQ(0, wb_make_it_fail(self, false));
	fault_attrs_restore(&self->fail);
	for (i = 0; self->knobs_saved && i < ARRAY_SIZE(wb_knobs); i++) {
		const char *knob = wb_knobs[i];

		EXPECT_EQ(0, wb_knob_write(knob, self->knob_saved[i]))
			TH_LOG("could not restore %s", knob);
	}
	if (self->map)
		munmap(self->map, WB_LEN);
	free(self->ram);
	free(self->want);
	free(self->disk);
	if (self->mounted)
		umount2(WB_MNT, MNT_DETACH);
}

/* Log where @got differs from @want, and whether it holds OLD there. */
static void wb_log_diff(struct __test_metadata *_metadata,
			FIXTURE_DATA(wberr) *self, const char *what,
			const unsigned char *got)
{
	long d = first_diff(got, self->want, WB_LEN);
	unsigned char old[WB_PAGE];
	size_t page, bad = 0;

	if (d < 0)
		return;
	for (page = 0; page < WB_LEN / WB_PAGE; page++)
		if (memcmp(got + page * WB_PAGE, self->want + page * WB_PAGE,
			   WB_PAGE))
			bad++;
	page = d / WB_PAGE;
	pattern_fill(old, WB_PAGE, page * WB_PAGE, self->seed);
	TH_LOG("%s: byte %ld wrong (page %zu, %s page), %zu pages wrong; the page holds %s",
	       what, d, page, wb_is_new(self, page) ? "a NEW" : "an OLD", bad,
	       !memcmp(got + page * WB_PAGE, old, WB_PAGE) ?
	       "the OLD bytes from the disk" : "something else");
}

/* The router's knobs for a model that folds whatever it may. */
static void wb_fold_model(struct __test_metadata *_metadata)
{
	/* Copies cost 1 MB/s, DMA almost nothing. */
	ASSERT_EQ(0, wb_knob_write("enabled", "1"));
	ASSERT_EQ(0, wb_knob_write("readahead_kb", "0"));
	ASSERT_EQ(0, wb_knob_write("p2p_cost_ns", WB_COST_NS));
	ASSERT_EQ(0, wb_knob_write("copy_mbps", WB_COPY_MBPS));
	/* This model, not what the drive and the provider learned. */
	ASSERT_EQ(0, wb_knob_write("learn", "0"));
}

/*
 * The positive control: the same shape of cached pages in the file's
 * second half, their NEW bytes written back without an error, read into
 * device memory under the folding model.  XFS folds such clean islands
 * into the DMA around them, order-0 folios and large ones with iomap's
 * per-block state alike; ext4 and the block device never do, as their
 * folios carry buffer heads.  Returns the islands folded.
 */
static long long wb_fold_control(struct __test_metadata *_metadata,
				 FIXTURE_DATA(wberr) *self, int fd)
{
	const off_t base = WB_LEN;
	long long fold0, folded, large;
	size_t nnew;

	/* Only the NEW pages cached, as below: the rest is DMAed. */
	ASSERT_EQ(0, drop_caches());
	pattern_fill(self->want, WB_LEN, base, self->seed);
	nnew = wb_write_new(_metadata, self, fd, base);
	ASSERT_EQ(0, fsync(fd));
	/*
	 * The premise: order-0 folios, or (xfs_large) every one large and,
	 * once written back, with iomap's per-block state as private data.
	 */
	large = large_folio_pages(fd, base, WB_LEN, true);
	TH_LOG("control: %zu NEW pages, %lld of them in large folios with private data",
	       nnew, large);
	ASSERT_EQ(self->unit > 1 ? (long long)nnew : 0, large);
	wb_fold_model(_metadata);
	fold0 = router_stat("folded_islands");
	memset(self->map, POISON, WB_LEN);
	ASSERT_EQ(WB_LEN, pread(fd, self->map, WB_LEN, base));
	folded = router_stat("folded_islands") - fold0;
	TH_LOG("control, written back: %lld islands folded", folded);
	ASSERT_EQ(-1, first_diff(self->map, self->want, WB_LEN));
	return folded;
}

TEST_F_TIMEOUT(wberr, read_after_failed_writeback, 180)
{
	const size_t pages = WB_LEN / WB_PAGE;
	long long routed0, routed, seg0, fold0, seg, fired, left, folded;
	int fd, dfd, sfd = -1, ret, err;
	long resident;
	size_t nnew;
	unsigned char *buf;
	ssize_t n;

	fd = open(self->path, O_RDWR);
	ASSERT_LE(0, fd);
	/*
	 * On XFS the model folds when the writeback went well, so that its
	 * folding nothing below is the error's doing; elsewhere buffer heads
	 * keep it from folding at all.
	 */
	folded = wb_fold_control(_metadata, self, fd);
	if (variant->fs && !strcmp(variant->fs, "xfs")) {
		ASSERT_LT(0, folded);
	} else {
		ASSERT_EQ(0, folded);
	}
	ASSERT_EQ(0, drop_caches());

	/* NEW bytes in buffered writes, aligned to their size. */
	pattern_fill(self->want, WB_LEN, 0, self->seed);
	buf = self->ram;
	nnew = wb_write_new(_metadata, self, fd, 0);
	ASSERT_EQ(self->unit > 1 ? (long)nnew : 0,
		  large_folio_pages(fd, 0, WB_LEN, false));

	/*
	 * Force the journal (the log) now, so that nothing but the data
	 * goes to the drive while it fails: fsync of another file commits
	 * the running transaction, with this file's timestamp update.
	 */
	if (variant->fs) {
		sfd = open(WB_MNT "/sentinel", O_RDWR | O_CREAT | O_TRUNC,
			   0644);
		ASSERT_LE(0, sfd);
		ASSERT_EQ(WB_PAGE, pwrite(sfd, buf, WB_PAGE, 0));
		ASSERT_EQ(0, fsync(sfd));
	}

	/* Every bio to the drive fails, for the data writeback only. */
	ASSERT_EQ(0, fault_attrs_arm(FAIL_DIR, STR(FAIL_TIMES)));
	ASSERT_EQ(0, wb_make_it_fail(self, true));
	ret = sync_file_range(fd, 0, WB_LEN, SYNC_FILE_RANGE_WAIT_BEFORE |
			      SYNC_FILE_RANGE_WRITE |
			      SYNC_FILE_RANGE_WAIT_AFTER);
	err = errno;
	ASSERT_EQ(0, wb_make_it_fail(self, false));
	/* Unreadable: -1, which the ASSERT_LE(0, left) below fails on. */
	if (sysfs_read_ll(FAIL_DIR "/times", &left))
		left = -1;
	fired = FAIL_TIMES - left;
	TH_LOG("%zu NEW pages; sync_file_range: %d (%s); %lld bios failed",
	       nnew, ret, ret ? strerror(err) : "ok", fired);

	/* The premise: the writeback failed, and the disk still has OLD. */
	ASSERT_EQ(-1, ret);
	ASSERT_EQ(EIO, err);
	ASSERT_LE(0, left);
	ASSERT_LT(0, fired);
	resident = resident_pages(fd, 0, WB_LEN);
	ASSERT_EQ((long)nnew, resident)
		TH_LOG("the NEW pages are not (all) in the page cache");
	dfd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, dfd);
	n = pread(dfd, self->disk, WB_LEN, 0);
	close(dfd);
	ASSERT_EQ(WB_LEN, n);
	pattern_fill(self->ram, WB_LEN, 0, self->seed);
	ASSERT_EQ(-1, first_diff(self->disk, self->ram, WB_LEN))
		TH_LOG("the disk does not hold the OLD bytes");
	ASSERT_EQ(nnew, resident_pages(fd, 0, WB_LEN));
	/* xfs_large: iomap's state on every NEW folio, as in the control. */
	ASSERT_EQ(self->unit > 1 ? (long)nnew : 0,
		  large_folio_pages(fd, 0, WB_LEN, true));

	/* The file system took no harm: a write and fsync still work. */
	if (variant->fs) {
		ASSERT_EQ(WB_PAGE, pwrite(sfd, self->ram, WB_PAGE, WB_PAGE));
		ASSERT_EQ(0, fsync(sfd))
			TH_LOG("%s: the file system did not survive the injected faults",
			       variant->fs);
		close(sfd);
	}

	wb_fold_model(_metadata);

	/* Into device memory, the OLD pages still out of the page cache. */
	routed0 = router_stat("routed_reads");
	seg0 = router_stat("p2p_segments");
	fold0 = router_stat("folded_islands");
	memset(self->map, POISON, WB_LEN);
	n = pread(fd, self->map, WB_LEN, 0);
	seg = router_stat("p2p_segments") - seg0;
	routed = router_stat("routed_reads") - routed0;
	folded = router_stat("folded_islands") - fold0;
	TH_LOG("into device memory, a quarter cached: %zd; "
	       "%lld routed, %lld DMA segments, %lld islands folded",
	       n, routed, seg, folded);
	ASSERT_EQ(WB_LEN, n);
	/* After the error the disk may not hold what is cached: no folding. */
	EXPECT_EQ(0, folded);
	/* The premise: the router served it, and DMAed the uncached part. */
	ASSERT_EQ(1, routed);
	ASSERT_LT(0, seg);
	wb_log_diff(_metadata, self, "device memory, a quarter cached",
		    self->map);
	ASSERT_EQ(-1, first_diff(self->map, self->want, WB_LEN));

	/* Into RAM: the page cache's bytes, NEW and OLD. */
	memset(self->ram, POISON, WB_LEN);
	ASSERT_EQ(WB_LEN, pread(fd, self->ram, WB_LEN, 0));
	wb_log_diff(_metadata, self, "RAM", self->ram);
	ASSERT_EQ(-1, first_diff(self->ram, self->want, WB_LEN));

	/* Into device memory again, now all of it cached. */
	ASSERT_EQ(pages, resident_pages(fd, 0, WB_LEN));
	fold0 = router_stat("folded_islands");
	memset(self->map, POISON, WB_LEN);
	n = pread(fd, self->map, WB_LEN, 0);
	folded = router_stat("folded_islands") - fold0;
	TH_LOG("into device memory, all cached: %zd; %lld islands folded",
	       n, folded);
	ASSERT_EQ(WB_LEN, n);
	EXPECT_EQ(0, folded);
	wb_log_diff(_metadata, self, "device memory, all cached", self->map);
	ASSERT_EQ(-1, first_diff(self->map, self->want, WB_LEN));
	close(fd);
}

TEST_HARNESS_MAIN
