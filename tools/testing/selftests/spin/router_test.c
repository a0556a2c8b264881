// SPDX-License-Identifier: GPL-2.0
/*
 * The P2P router: a plain buffered pread() into device memory copies what
 * the page cache holds and has the drive DMA the rest straight into the
 * device, on XFS, on ext4, on the raw NVMe block device and on md raid0.
 *
 * Every read into device memory goes into memory poisoned with 0xa5 and is
 * checked byte for byte against the pattern the file was written with (or
 * a read of the same range into RAM).  The counters in
 * /sys/kernel/mm/p2p_router/stats/ say how each read was served; the tests
 * assert on their deltas around one read, so they must run alone.
 *
 * The cases from uring_read_qd1 on do the same through io_uring (where a
 * read into device memory completes asynchronously), with preadv2()'s
 * RWF_NOWAIT and RWF_HIPRI, and with read(), readv() and write().
 *
 * The gpu_* cases use device memory the way a GPU driver hands it out,
 * through lib/test_p2pdma.c (the rig's "gpu" ivshmem, registered and not
 * published): the driver reads and writes the file itself with a bio_vec
 * of its pages, as AMD's KFD does for hipFile, and maps its pages into
 * user space from its own mmap().
 */
#include <liburing.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#include "spin_util.h"
#include <signal.h>
#include <time.h>
#include "spin_router.h"
#include "../kselftest_harness.h"
#include "../../../../lib/test_p2pdma_uapi.h"

#define TRACE_EVENT_DIR	TRACEFS "/events/p2p_router/p2p_router_segment"

#define FILE_SIZE	(16 * MiB + 3 * 4 * KiB + 100)	/* odd on purpose */
#define MAP_LEN		(16 * MiB)
#define READ_LEN	(8 * MiB)
#define PAGE		(4 * KiB)
#define MNT		"/mnt/spin-router"
#define MD		"/dev/md0"

/* Every counter in stats/, in one struct, so that tests can take deltas. */
struct router_stats {
	long long routed_reads;
	long long p2p_segments;
	long long p2p_bytes;
	long long cache_segments;
	long long cache_bytes;
	long long folded_islands;
	long long folded_bytes;
	long long holes_via_cache;
	long long unaligned_segments;
	long long dirty_segments;
	long long fallback_disabled;
	long long fallback_no_p2p_queue;
	long long fallback_not_device_memory;
	long long fallback_unreachable;
	long long fallback_eremoteio;
	long long fallback_error;
	long long routed_writes;
	long long p2p_write_bytes;
	long long cache_write_bytes;
	long long async_reads;
	long long async_deferred;
	long long nowait_again;
};

#define STAT_FILE(name) ROUTER_STAT_FILE(struct router_stats, name)

static const struct router_stat_file stat_files[] = {
	STAT_FILE(routed_reads),
	STAT_FILE(p2p_segments),
	STAT_FILE(p2p_bytes),
	STAT_FILE(cache_segments),
	STAT_FILE(cache_bytes),
	STAT_FILE(folded_islands),
	STAT_FILE(folded_bytes),
	STAT_FILE(holes_via_cache),
	STAT_FILE(unaligned_segments),
	STAT_FILE(dirty_segments),
	STAT_FILE(fallback_disabled),
	STAT_FILE(fallback_no_p2p_queue),
	STAT_FILE(fallback_not_device_memory),
	STAT_FILE(fallback_unreachable),
	STAT_FILE(fallback_eremoteio),
	STAT_FILE(fallback_error),
	STAT_FILE(routed_writes),
	STAT_FILE(p2p_write_bytes),
	STAT_FILE(cache_write_bytes),
	STAT_FILE(async_reads),
	STAT_FILE(async_deferred),
	STAT_FILE(nowait_again),
};

static void stats_read(struct router_stats *s)
{
	router_stats_read(stat_files, ARRAY_SIZE(stat_files), s);
}

/* Whether every counter could be read. */
static bool stats_readable(void)
{
	return router_stats_readable(stat_files, ARRAY_SIZE(stat_files));
}

/* What changed since @before. */
static void stats_delta(const struct router_stats *before,
			struct router_stats *delta)
{
	router_stats_delta(stat_files, ARRAY_SIZE(stat_files), before, delta);
}

/* The counters that moved, on one line: what a failing test needs to say. */
static void stats_log(struct __test_metadata *_metadata, const char *what,
		      const struct router_stats *delta)
{
	char line[1024];

	TH_LOG("%s:%s", what, router_stats_moved(stat_files,
						 ARRAY_SIZE(stat_files), delta,
						 line, sizeof(line)));
}

/*
 * The state the expectations assume: on, with the documented cost model,
 * and P-readahead off, so that small reads are routed (readahead_test
 * covers P-readahead).
 */
static int knobs_default(void)
{
	return router_knobs_default(0);
}

/*
 * What an earlier test that crashed before its teardown may have left: the
 * file system mounted, or the array assembled over the drives.
 */
static void router_cleanup(void)
{
	umount2(MNT, MNT_DETACH);
	md_stop_ours(MD);
}

FIXTURE(router) {
	char ns[2][NAME_MAX + 1];	/* the rig drives used */
	char blk[NAME_MAX + 1];		/* the block device read from */
	char nvme_dev[SYSFS_LEN];	/* PCI function of the first drive */
	char provider[SYSFS_LEN];	/* device memory it can reach */
	char path[PATH_MAX];		/* what is read: file or device */
	int fd;				/* buffered: the reads under test */
	int ref_fd;			/* buffered, no read-ahead: into RAM */
	size_t size;
	uint64_t seed;
	long long lbs;			/* logical block size */
	long long dma_align;		/* buffer alignment mask for DMA */
	unsigned char *dev;		/* MAP_LEN of device memory */
	unsigned char *ref;		/* the expected bytes */
	unsigned char *ram;		/* scratch RAM for reads and writes */
	bool mounted;
	bool assembled;
	bool knobs_saved;
	struct router_knobs knobs;
};

FIXTURE_VARIANT(router) {
	const char *fs;	/* NULL: the block device itself */
	int nvme;	/* first rig drive */
	int members;	/* > 1: md raid0 over that many rig drives */
};

FIXTURE_VARIANT_ADD(router, raw) { .fs = NULL, .nvme = 0, .members = 1 };
FIXTURE_VARIANT_ADD(router, xfs) { .fs = "xfs", .nvme = 1, .members = 1 };
FIXTURE_VARIANT_ADD(router, ext4) { .fs = "ext4", .nvme = 2, .members = 1 };
FIXTURE_VARIANT_ADD(router, raid0) { .fs = NULL, .nvme = 0, .members = 2 };

FIXTURE_SETUP(router)
{
	char members[512] = "";
	int i, wfd, ret;

	self->fd = -1;
	self->ref_fd = -1;
	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	ASSERT_TRUE(stats_readable());
	for (i = 0; i < variant->members; i++) {
		size_t l = strlen(members);

		SPIN_NEED(!nvme_rig_ns(variant->nvme + i, self->ns[i],
				       sizeof(self->ns[i])),
			  SPIN_RIG_DRIVE_FMT, variant->nvme + i,
			  variant->nvme + variant->members);
		xsnprintf(members + l, sizeof(members) - l, " /dev/%s",
			  self->ns[i]);
	}
	ASSERT_EQ(0, nvme_pci_dev(self->ns[0], self->nvme_dev,
				  sizeof(self->nvme_dev)));
	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, self->provider,
			       sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns[0]);
	self->seed = getpid() ^ (uint64_t)variant->nvme << 32 ^
		     (uint64_t)variant->members << 40;
	self->size = FILE_SIZE;
	router_cleanup();

	if (variant->members > 1) {
		ret = md_create(MD, variant->members, self->ns, NULL, members,
				sizeof(members), "--level=0");
		if (ret)
			router_cleanup();
		ASSERT_EQ(0, ret)
			TH_LOG("cannot assemble md raid0 over%s", members);
		self->assembled = true;
		snprintf(self->blk, sizeof(self->blk), "md0");
		/* Without it the router is never asked: a lost md flag. */
		ret = queue_limit(self->blk, "pci_p2pdma");
		if (ret != 1)
			router_cleanup();
		ASSERT_EQ(1, ret)
			TH_LOG(MD " does not pass P2PDMA");
	} else {
		snprintf(self->blk, sizeof(self->blk), "%s", self->ns[0]);
	}

	if (variant->fs) {
		ASSERT_EQ(0, mkfs_mount(variant->fs, self->blk, MNT));
		self->mounted = true;
		snprintf(self->path, sizeof(self->path), MNT "/data");
		wfd = open(self->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else {
		snprintf(self->path, sizeof(self->path), "/dev/%s", self->blk);
		wfd = open(self->path, O_RDWR);
	}
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, write_pattern(wfd, self->size, self->seed));
	close(wfd);
	ASSERT_EQ(0, drop_caches());

	self->lbs = queue_limit(self->blk, "logical_block_size");
	self->dma_align = queue_limit(self->blk, "dma_alignment");
	ASSERT_LT(0, self->lbs);
	ASSERT_LE(0, self->dma_align);

	self->fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, self->fd);
	/*
	 * The reads that make ranges resident must make exactly those
	 * ranges resident: with POSIX_FADV_RANDOM a read brings in the pages
	 * it needs and no read-ahead around them.
	 */
	self->ref_fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, self->ref_fd);
	ASSERT_EQ(0, posix_fadvise(self->ref_fd, 0, 0, POSIX_FADV_RANDOM));

	self->ref = malloc(MAP_LEN);
	self->ram = malloc(MAP_LEN);
	ASSERT_NE(NULL, self->ref);
	ASSERT_NE(NULL, self->ram);
	/* Mapping p2pmem is what makes this process's reads candidates. */
	self->dev = p2pmem_map(self->provider, MAP_LEN);
	ASSERT_NE(NULL, self->dev);

	/* Last: a setup that fails later would leave them changed. */
	ASSERT_EQ(0, router_knobs_save(&self->knobs));
	self->knobs_saved = true;
	ASSERT_EQ(0, knobs_default());
	TH_LOG("%s on %s (%s), provider %s, lbs %lld, dma alignment mask %lld",
	       self->path, members + 1, self->nvme_dev, self->provider,
	       self->lbs, self->dma_align);
}

FIXTURE_TEARDOWN(router)
{
	if (self->knobs_saved)
		EXPECT_EQ(0, router_knobs_restore(&self->knobs));
	if (self->dev)
		munmap(self->dev, MAP_LEN);
	free(self->ref);
	free(self->ram);
	if (self->fd >= 0)
		close(self->fd);
	if (self->ref_fd >= 0)
		close(self->ref_fd);
	if (self->mounted)
		umount2(MNT, MNT_DETACH);
	if (self->assembled)
		run_cmd("mdadm --stop " MD " 2>/dev/null");
}

/* Where @buf differs from the pattern at file offset @off, or -1. */
static long pattern_diff(FIXTURE_DATA(router) *self, const void *buf,
			 size_t len, off_t off)
{
	pattern_fill(self->ref, len, off, self->seed);
	return first_diff(buf, self->ref, len);
}

/* The read under test: into @buf, poisoned first. */
static ssize_t poisoned_pread(FIXTURE_DATA(router) *self, unsigned char *buf,
			      size_t len, off_t off)
{
	memset(buf, POISON, len);
	return pread(self->fd, buf, len, off);
}

/* Read a range into RAM, without read-ahead, so that it is cached. */
static int make_resident(FIXTURE_DATA(router) *self, off_t off, size_t len)
{
	if (pread(self->ref_fd, self->ram, len, off) != (ssize_t)len)
		return -1;
	return pattern_diff(self, self->ram, len, off) == -1 ? 0 : -1;
}

/*
 * The promise: a cold read is DMAed straight into device memory and
 * leaves the page cache as empty as it found it.
 */
TEST_F_TIMEOUT(router, cold_read_p2p, 180)
{
	long long len = READ_LEN, pages = READ_LEN / PAGE;
	struct router_stats before, d;
	long resident;

	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len, poisoned_pread(self, self->dev, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "cold 8 MiB", &d);
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, 0));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LE(len / 10 * 9, d.p2p_bytes);

	resident = resident_pages(self->ref_fd, 0, len);
	TH_LOG("%ld of %lld pages cached after the read", resident, pages);
	ASSERT_LE(0, resident);
	EXPECT_GE(pages / 100, resident);
}

/* Everything cached: all of it is copied, and the drive is not asked. */
TEST_F_TIMEOUT(router, warm_read_cache, 180)
{
	long long len = READ_LEN, off = 2 * MiB;
	struct router_stats before, d;

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, make_resident(self, off, len));
	EXPECT_EQ(len / PAGE, resident_pages(self->ref_fd, off, len));

	stats_read(&before);
	ASSERT_EQ(len, poisoned_pread(self, self->dev, len, off));
	stats_delta(&before, &d);
	stats_log(_metadata, "warm 8 MiB", &d);
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, off));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);
	EXPECT_EQ(len, d.cache_bytes);
}

/*
 * A read of [0, READ_LEN) over a page cache that holds some of it: both
 * paths serve part, together exactly all of it, and every byte that was
 * cached is either copied or counted as folded into a DMA.  (An island at
 * the start of the read has a DMA on one side only; folding it only lengthens
 * the DMA, which with the defaults is the slower side, so it is copied: the
 * tests make page 0 resident to have at least that one.)
 */
static void check_partial(struct __test_metadata *_metadata,
			  FIXTURE_DATA(router) *self, const char *what)
{
	long long len = READ_LEN, cached;
	struct router_stats before, d;

	cached = resident_pages(self->ref_fd, 0, len);
	TH_LOG("%s: %lld of %lld pages cached", what, cached, len / PAGE);
	/* The premise: some cached, not all. */
	ASSERT_LT(0, cached);
	ASSERT_GT(len / PAGE, cached);
	cached *= PAGE;

	stats_read(&before);
	ASSERT_EQ(len, poisoned_pread(self, self->dev, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, what, &d);
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, 0));
	EXPECT_LT(0, d.p2p_bytes);
	EXPECT_LT(0, d.cache_bytes);
	EXPECT_EQ(len, d.p2p_bytes + d.cache_bytes);
	EXPECT_LE(cached, d.cache_bytes + d.folded_bytes);
}

TEST_F_TIMEOUT(router, scattered_residency, 180)
{
	off_t off;

	ASSERT_EQ(0, drop_caches());
	for (off = 0; off < (off_t)READ_LEN; off += 128 * KiB) {
		ASSERT_EQ(0, make_resident(self, off, 64 * KiB));
	}
	check_partial(_metadata, self, "every other 64 KiB cached");
}

TEST_F_TIMEOUT(router, scattered_residency_random, 180)
{
	uint64_t rnd = 0x5eed2025c0ffeeULL;
	size_t pages = READ_LEN / PAGE, i, run = 0;

	TH_LOG("seed 0x%llx, 30%% of the pages", (unsigned long long)rnd);
	ASSERT_EQ(0, drop_caches());
	/* Runs of chosen pages are read at once: fewer syscalls, same pages. */
	for (i = 0; i <= pages; i++) {
		bool pick = i < pages && (!i || xorshift64(&rnd) % 100 < 30);

		if (pick) {
			run++;
		} else if (run) {
			ASSERT_EQ(0, make_resident(self, (i - run) * PAGE,
						   run * PAGE));
			run = 0;
		}
	}
	check_partial(_metadata, self, "30% of the pages cached");
}

/*
 * No alignment demanded of the caller: the bytes outside the logical
 * blocks, and a whole segment whose buffer address at the start of the DMA
 * the device cannot take, go through the page cache; the rest is DMAed.
 * From a cold cache, exactly that aligned middle is DMAed.
 */
TEST_F_TIMEOUT(router, unaligned, 180)
{
	static const struct {
		off_t off;
		size_t len;
		size_t buf_off;
	} cases[] = {
		{ 1, 4097 * 3, 0 },
		{ 4095, 1 * MiB + 1, 0 },
		{ 512 * 7, 777777, 64 },
		{ 0, 3 * MiB, 3 },
		{ 1, 1 * MiB, 1 },	/* buffer and file equally off: DMA */
		{ 5 * 4 * KiB + 512, 2 * MiB + 1000, 0 },
		{ 4 * KiB, 0, 0 },	/* nothing to read */
	};
	struct router_stats before, d;
	unsigned int i;
	size_t j;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		long long off = cases[i].off, len = cases[i].len;
		unsigned char *buf = self->dev + cases[i].buf_off;
		long long d0 = (off + self->lbs - 1) / self->lbs * self->lbs;
		long long d1 = (off + len) / self->lbs * self->lbs;
		long long dma = 0;
		char what[128];

		if (d1 > d0 &&
		    !(((uintptr_t)buf + (d0 - off)) & self->dma_align))
			dma = d1 - d0;
		ASSERT_EQ(0, drop_caches());
		/* Poison around the buffer too: nothing may land there. */
		memset(self->dev, POISON, cases[i].buf_off + len + PAGE);
		stats_read(&before);
		ASSERT_EQ(len, pread(self->fd, buf, len, off));
		stats_delta(&before, &d);
		snprintf(what, sizeof(what), "%lld bytes at %lld into +%zu",
			 len, off, cases[i].buf_off);
		stats_log(_metadata, what, &d);
		ASSERT_EQ(-1, pattern_diff(self, buf, len, off));
		for (j = 0; j < cases[i].buf_off; j++) {
			ASSERT_EQ(POISON, self->dev[j]);
		}
		for (j = 0; j < PAGE; j++) {
			ASSERT_EQ(POISON, buf[len + j]);
		}
		EXPECT_EQ(dma, d.p2p_bytes);
		EXPECT_EQ(len - dma, d.cache_bytes);
		if (len && dma != len)
			EXPECT_LE(1, d.unaligned_segments);
	}
}

/*
 * A read across EOF is short, the bytes up to EOF are right, and nothing
 * is written into the buffer past them: the DMA stops at the last whole
 * block, and the partial block is copied up to EOF only.  A file ends
 * inside a block; a block device ends where the drive (or the array)
 * does, so its read ends with a whole block.
 */
TEST_F_TIMEOUT(router, eof, 180)
{
	long long len = 1 * MiB, off, n, want, i, end = self->size;
	struct router_stats before, d;
	uint64_t bytes;
	int wfd;

	if (variant->fs) {
		ASSERT_NE(0, self->size % self->lbs);	/* the premise */
	} else {
		/* The last MiB of the device, in the file's pattern. */
		ASSERT_EQ(0, ioctl(self->fd, BLKGETSIZE64, &bytes));
		end = bytes;
		ASSERT_LT(self->size, end - MiB);
		pattern_fill(self->ram, MiB, end - MiB, self->seed);
		wfd = open(self->path, O_RDWR);
		ASSERT_LE(0, wfd);
		ASSERT_EQ((ssize_t)MiB, pwrite(wfd, self->ram, MiB, end - MiB));
		ASSERT_EQ(0, close(wfd));
	}
	off = (end & ~(4 * KiB - 1)) - 256 * KiB;
	want = end - off;

	ASSERT_EQ(0, drop_caches());
	memset(self->dev, POISON, len);
	stats_read(&before);
	n = pread(self->fd, self->dev, len, off);
	stats_delta(&before, &d);
	stats_log(_metadata, "across EOF", &d);
	ASSERT_EQ(want, n);
	ASSERT_EQ(-1, pattern_diff(self, self->dev, n, off));
	for (i = n; i < len; i++)
		if (self->dev[i] != POISON)
			break;
	EXPECT_EQ(len, i);
	EXPECT_EQ(end / self->lbs * self->lbs - off, d.p2p_bytes);
	EXPECT_EQ(n, d.p2p_bytes + d.cache_bytes);
}

/*
 * Bytes written but not yet written back are in the page cache only: the
 * read must return them, not what the disk still holds.
 */
TEST_F_TIMEOUT(router, dirty_not_bypassed, 180)
{
	static const struct { off_t off; size_t len; } writes[] = {
		{ 12345, 5000 },
		{ 1 * MiB + 100, 70000 },
		{ 3 * MiB - 1, 2 },
		{ 6 * MiB + 4 * KiB, 4 * KiB },
		{ 8 * MiB - 700, 700 },
	};
	uint64_t seed2 = self->seed + 1;
	long long len = READ_LEN;
	struct router_stats before, d;
	unsigned int i;
	int wfd;

	ASSERT_EQ(0, drop_caches());
	/* Kept open until the read: no close-time flush of any kind. */
	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	pattern_fill(self->ref, len, 0, self->seed);
	for (i = 0; i < ARRAY_SIZE(writes); i++) {
		off_t off = writes[i].off;

		pattern_fill(self->ram, writes[i].len, off, seed2);
		ASSERT_EQ((ssize_t)writes[i].len,
			  pwrite(wfd, self->ram, writes[i].len, off));
		memcpy(self->ref + off, self->ram, writes[i].len);
	}

	stats_read(&before);
	ASSERT_EQ(len, poisoned_pread(self, self->dev, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "8 MiB over dirty ranges", &d);
	close(wfd);
	ASSERT_EQ(-1, first_diff(self->dev, self->ref, len));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LE(1, d.dirty_segments);
}

/*
 * Holes and preallocated (unwritten) extents read as zeros: the direct
 * I/O primitive zero-fills them, never returns stale blocks.
 */
TEST_F_TIMEOUT(router, holes_read_zero, 180)
{
	static const struct { off_t off; size_t len; } writes[] = {
		{ 0, 64 * KiB },
		{ 1 * MiB, 4 * KiB },
		{ 2 * MiB + 12 * KiB, 20 * KiB },
		{ 5 * MiB + 1000, 10000 },
	};
	const off_t punch = 16 * KiB, punch_len = 32 * KiB;
	const off_t prealloc = 3 * MiB, prealloc_len = 1 * MiB;
	const off_t inside = prealloc + 256 * KiB, inside_len = 8 * KiB;
	uint64_t seed2 = self->seed ^ 0x5a5a5a5aULL;
	long long len = READ_LEN;
	struct router_stats before, d;
	char path[PATH_MAX];
	unsigned int i;
	int fd;

	if (!variant->fs)
		SKIP(return, "a block device has no holes");
	snprintf(path, sizeof(path), MNT "/sparse");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, len));
	memset(self->ref, 0, len);
	for (i = 0; i < ARRAY_SIZE(writes); i++) {
		pattern_fill(self->ref + writes[i].off, writes[i].len,
			     writes[i].off, seed2);
		ASSERT_EQ((ssize_t)writes[i].len,
			  pwrite(fd, self->ref + writes[i].off, writes[i].len,
				 writes[i].off));
	}
	ASSERT_EQ(0, fsync(fd));
	ASSERT_EQ(0, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       punch, punch_len));
	memset(self->ref + punch, 0, punch_len);
	ASSERT_EQ(0, fallocate(fd, 0, prealloc, prealloc_len));
	/* Part of the unwritten extent written: a mixed extent map. */
	pattern_fill(self->ref + inside, inside_len, inside, seed2);
	ASSERT_EQ((ssize_t)inside_len,
		  pwrite(fd, self->ref + inside, inside_len, inside));
	ASSERT_EQ(0, fsync(fd));
	close(fd);
	ASSERT_EQ(0, drop_caches());

	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	memset(self->dev, POISON, len);
	stats_read(&before);
	ASSERT_EQ(len, pread(fd, self->dev, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "sparse 8 MiB", &d);
	close(fd);
	ASSERT_EQ(-1, first_diff(self->dev, self->ref, len));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_EQ(len, d.p2p_bytes + d.cache_bytes);
}

/*
 * One preadv() into RAM and device memory: the RAM parts are ordinary
 * copies, the device parts routed, all at the right file offsets.  The
 * device parts start block aligned (the RAM part in front is 100000 bytes
 * long), so that even a stack that wants 512-byte aligned buffers DMAs.
 */
TEST_F_TIMEOUT(router, mixed_iovec, 180)
{
	struct iovec iov[] = {
		{ self->ram, 100000 },
		{ self->dev, 2 * MiB },
		{ self->ram + 1 * MiB, 4 * KiB },
		{ self->dev + 8 * MiB, 1 * MiB + 7 },
	};
	long long off = 1 * MiB - 100000, total = 0, dev_bytes = 0, pos;
	struct router_stats before, d;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(iov); i++) {
		memset(iov[i].iov_base, POISON, iov[i].iov_len);
		total += iov[i].iov_len;
		if (i & 1)
			dev_bytes += iov[i].iov_len;
	}
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(total, preadv(self->fd, iov, ARRAY_SIZE(iov), off));
	stats_delta(&before, &d);
	stats_log(_metadata, "preadv RAM/device/RAM/device", &d);
	for (pos = off, i = 0; i < ARRAY_SIZE(iov); i++) {
		TH_LOG("iov %u: %zu bytes at %lld", i, iov[i].iov_len, pos);
		ASSERT_EQ(-1, pattern_diff(self, iov[i].iov_base,
					   iov[i].iov_len, pos));
		pos += iov[i].iov_len;
	}
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);
	/* Only the device memory parts are the router's to count. */
	EXPECT_EQ(dev_bytes, d.p2p_bytes + d.cache_bytes);
}

/* Switched off, a read into device memory is the plain CPU copy again. */
TEST_F_TIMEOUT(router, disabled, 180)
{
	long long len = READ_LEN;
	struct router_stats before, d;
	ssize_t n;

	ASSERT_EQ(0, sysfs_write(P2P_ENABLED, "0"));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	n = poisoned_pread(self, self->dev, len, 0);
	stats_delta(&before, &d);
	ASSERT_EQ(0, sysfs_write(P2P_ENABLED, "1"));
	stats_log(_metadata, "disabled", &d);
	ASSERT_EQ(len, n);
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, 0));
	EXPECT_LE(1, d.fallback_disabled);
	EXPECT_EQ(0, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);
}

/*
 * Device memory the drive cannot reach: the read is a CPU copy and
 * returns everything, never EREMOTEIO.  The router sees that up front,
 * for an md array by asking every member (disk_p2pdma_page_reachable()),
 * so not one DMA is tried.
 */
TEST_F_TIMEOUT(router, unreachable, 180)
{
	long long len = READ_LEN, off = 4 * KiB;
	char provider[SYSFS_LEN];
	struct router_stats before, d;
	unsigned char *far;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, false, provider,
			       sizeof(provider)),
		  "a provider that %s cannot reach: none published",
		  self->ns[0]);
	TH_LOG("unreachable provider %s", provider);
	far = p2pmem_map(provider, len);
	ASSERT_NE(NULL, far);

	ASSERT_EQ(0, drop_caches());
	memset(far, POISON, len);
	stats_read(&before);
	ASSERT_EQ(len, pread(self->fd, far, len, off));
	stats_delta(&before, &d);
	stats_log(_metadata, "unreachable", &d);
	ASSERT_EQ(-1, pattern_diff(self, far, len, off));
	EXPECT_LE(1, d.fallback_unreachable);
	EXPECT_EQ(0, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);
	EXPECT_EQ(0, d.fallback_eremoteio);
	munmap(far, len);
}

/*
 * Cached islands between holes, with a DMA that costs mostly latency and
 * a slow copy: one long DMA over holes and islands beats copying the
 * islands, so the router folds them in.
 */
TEST_F_TIMEOUT(router, fold_islands, 180)
{
	long long len = READ_LEN;
	struct router_stats before, d;
	off_t off;

	ASSERT_EQ(0, sysfs_write(P2P_COST_NS, "4096:1000000 8388608:1100000"));
	ASSERT_EQ(0, sysfs_write(P2P_COPY_MBPS, "100"));
	ASSERT_EQ(0, drop_caches());
	for (off = 0; off < (off_t)len; off += 256 * KiB) {
		ASSERT_EQ(0, make_resident(self, off, 8 * KiB));
	}

	stats_read(&before);
	ASSERT_EQ(len, poisoned_pread(self, self->dev, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "8 KiB islands every 256 KiB", &d);
	ASSERT_EQ(0, knobs_default());
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, 0));
	EXPECT_LE(1, d.folded_islands);
	EXPECT_LT(0, d.folded_bytes);
	EXPECT_EQ(len, d.p2p_bytes + d.cache_bytes);
}

/*
 * The tracepoint says how each segment was served: a cold read has at
 * least one segment that went "path p2p", for this file.
 */
TEST_F_TIMEOUT(router, tracepoint, 180)
{
	long long len = 1 * MiB;
	char key[128], *trace, *line, *save;
	const char *found = NULL;
	struct stat st;
	ssize_t n;

	if (access(TRACEFS "/trace", F_OK)) {
		ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0, NULL))
			TH_LOG("no tracefs at " TRACEFS);
	}
	ASSERT_EQ(0, access(TRACEFS "/events", F_OK))
		TH_LOG("no event tracing in this kernel");
	ASSERT_EQ(0, access(TRACE_EVENT_DIR "/enable", F_OK));

	/* The event names the inode: the file's, or the block device's. */
	ASSERT_EQ(0, stat(self->path, &st));
	if (S_ISBLK(st.st_mode))
		snprintf(key, sizeof(key), "dev %u:%u ino ",
			 major(st.st_rdev), minor(st.st_rdev));
	else
		snprintf(key, sizeof(key), "dev %u:%u ino 0x%lx ",
			 major(st.st_dev), minor(st.st_dev),
			 (unsigned long)st.st_ino);

	ASSERT_EQ(0, trace_clear());
	ASSERT_EQ(0, sysfs_write(TRACEFS "/tracing_on", "1"));
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, sysfs_write(TRACE_EVENT_DIR "/enable", "1"));
	n = poisoned_pread(self, self->dev, len, 0);
	EXPECT_EQ(0, sysfs_write(TRACE_EVENT_DIR "/enable", "0"));
	trace = trace_slurp();
	EXPECT_EQ(0, trace_clear());
	ASSERT_NE(NULL, trace);
	ASSERT_EQ(len, n);
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, 0));

	for (line = strtok_r(trace, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "p2p_router_segment:") &&
		    strstr(line, key) && strstr(line, " path p2p "))
			found = line;
	if (found)
		TH_LOG("%s", found);
	else
		TH_LOG("no \"%s... path p2p\" line in the trace", key);
	EXPECT_NE(NULL, found);
	free(trace);
}

/*
 * The cost model's knobs take only what makes sense, and a bad write
 * changes nothing.  (An empty value is written as "\n", what "echo >"
 * writes: sysfs never passes a zero-length write to the store method.)
 */
TEST(knobs_validate)
{
	static const char *const bad_cost[] = {
		"\n",
		" ",					/* only blanks */
		"4096:1",				/* one point */
		"8192:5 4096:9",			/* sizes shrink */
		"4096:9 8192:5",			/* time shrinks */
		"4096:1 4096:2",			/* sizes not increasing */
		"abc",
		"4096 8192:1",				/* no colon */
		"0:1 4096:2",				/* no bytes */
		"4096:1 2147483648:2",			/* over 1 GiB */
		"4096:1 8192:2 12288:3 16384:4 20480:5 24576:6 28672:7 32768:8 36864:9",
	};
	static const char *const bad_mbps[] = { "0", "1000001", "-1", "abc" };
	const char *good = "4096:1000 65536:9000";
	const char *eight = "4096:1 8192:2 12288:3 16384:4 20480:5 24576:6 28672:7 32768:8";
	static const struct {
		const char *path;
		const char *good;
	} mbps_knobs[] = {
		{ P2P_COPY_MBPS, "1234" },
		{ P2P_COPY_FROM, "321" },
	};
	char saved_cost[256], saved_mbps[32];
	char cur[256];
	unsigned int i, k;

	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	ASSERT_EQ(0, sysfs_read(P2P_COST_NS, saved_cost, sizeof(saved_cost)));
	ASSERT_EQ(0, sysfs_read(P2P_COPY_MBPS, saved_mbps, sizeof(saved_mbps)));
	TH_LOG("p2p_cost_ns \"%s\", copy_mbps %s", saved_cost, saved_mbps);

	ASSERT_EQ(0, sysfs_write(P2P_COST_NS, eight));
	ASSERT_EQ(0, sysfs_read(P2P_COST_NS, cur, sizeof(cur)));
	EXPECT_STREQ(eight, cur);
	ASSERT_EQ(0, sysfs_write(P2P_COST_NS, good));
	ASSERT_EQ(0, sysfs_read(P2P_COST_NS, cur, sizeof(cur)));
	EXPECT_STREQ(good, cur);
	for (i = 0; i < ARRAY_SIZE(bad_cost); i++) {
		EXPECT_EQ(-EINVAL, sysfs_write(P2P_COST_NS, bad_cost[i]))
			TH_LOG("p2p_cost_ns \"%s\" accepted", bad_cost[i]);
		ASSERT_EQ(0, sysfs_read(P2P_COST_NS, cur, sizeof(cur)));
		EXPECT_STREQ(good, cur);
	}

	/* Both bandwidth knobs take the same values. */
	for (k = 0; k < ARRAY_SIZE(mbps_knobs); k++) {
		const char *path = mbps_knobs[k].path, *val = mbps_knobs[k].good;
		char saved[32];

		ASSERT_EQ(0, sysfs_read(path, saved, sizeof(saved)));
		ASSERT_EQ(0, sysfs_write(path, val));
		ASSERT_EQ(0, sysfs_read(path, cur, sizeof(cur)));
		EXPECT_STREQ(val, cur);
		for (i = 0; i < ARRAY_SIZE(bad_mbps); i++) {
			EXPECT_EQ(-EINVAL, sysfs_write(path, bad_mbps[i]))
				TH_LOG("%s \"%s\" accepted", path, bad_mbps[i]);
			ASSERT_EQ(0, sysfs_read(path, cur, sizeof(cur)));
			EXPECT_STREQ(val, cur);
		}
		EXPECT_EQ(0, sysfs_write(path, saved));
	}

	EXPECT_EQ(0, sysfs_write(P2P_COST_NS, saved_cost));
	ASSERT_EQ(0, sysfs_read(P2P_COST_NS, cur, sizeof(cur)));
	EXPECT_STREQ(saved_cost, cur);
}

/* The bytes of [@off, @off + @len) read back into RAM, against @seed. */
static long readback_diff(FIXTURE_DATA(router) *self, off_t off, size_t len,
			  uint64_t seed)
{
	memset(self->ram, POISON, len);
	if (pread(self->ref_fd, self->ram, len, off) != (ssize_t)len)
		return -2;
	pattern_fill(self->ref, len, off, seed);
	return first_diff(self->ram, self->ref, len);
}

/*
 * A buffered write from device memory: the page-aligned middle goes out by
 * direct I/O (the drive reads the device memory itself), the unaligned head
 * and tail through the page cache.  Part of the range is cached before:
 * the write must not leave it stale.  Read back through the page cache,
 * then cold from the drive, and check that the neighbours kept their bytes.
 */
TEST_F_TIMEOUT(router, p2p_write, 180)
{
	off_t off = 3 * PAGE + 100;
	size_t len = 4 * MiB + 777;
	off_t d0 = (off + PAGE - 1) / PAGE * PAGE;
	off_t d1 = (off + len) / PAGE * PAGE;
	uint64_t seed = self->seed ^ 0x5157;
	struct router_stats before, d;
	unsigned char *src;
	int wfd;

	wfd = open(self->path, O_WRONLY);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, make_resident(self, off, MiB));
	/*
	 * The source sits at the same offset in its page as the file range:
	 * the direct part then starts page aligned in memory too, which any
	 * device's DMA alignment (512 for md) accepts.
	 */
	src = self->dev + (off & (PAGE - 1));
	pattern_fill(src, len, off, seed);
	stats_read(&before);
	ASSERT_EQ((ssize_t)len, pwrite(wfd, src, len, off));
	stats_delta(&before, &d);
	stats_log(_metadata, "write 4 MiB + 777 at 12388", &d);
	ASSERT_EQ(0, close(wfd));

	EXPECT_EQ(-1, readback_diff(self, off, len, seed));
	EXPECT_EQ(-1, readback_diff(self, 0, off, self->seed));
	EXPECT_EQ(-1, readback_diff(self, off + len, MiB, self->seed));
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, readback_diff(self, off, len, seed));
	EXPECT_EQ(-1, readback_diff(self, off + len, MiB, self->seed));

	EXPECT_EQ(1, d.routed_writes);
	EXPECT_EQ(d1 - d0, d.p2p_write_bytes);
	EXPECT_EQ((long long)len - (d1 - d0), d.cache_write_bytes);
}

/*
 * pwritev() of device memory, RAM and device memory again: the aligned
 * middle of each device memory segment goes out by DMA, everything else
 * through the page cache, in order, as one routed write.  Part of the
 * range is cached before.  Read back warm, then cold, with the neighbours.
 */
TEST_F_TIMEOUT(router, p2p_writev_segments, 180)
{
	const size_t len[3] = { MiB + 777, 64 * KiB + 3, 2 * MiB + 5 };
	uint64_t seed = self->seed ^ 0xa11ce;
	off_t off = 5 * PAGE + 300, pos = off;
	struct router_stats before, d;
	long long dma = 0, total = 0;
	struct iovec iov[3];
	int i, wfd;

	wfd = open(self->path, O_WRONLY);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, make_resident(self, off, MiB));
	for (i = 0; i < 3; i++) {
		off_t d0 = (pos + PAGE - 1) / PAGE * PAGE;
		off_t d1 = (pos + len[i]) / PAGE * PAGE;

		/* Device memory at the file offset's offset in its page. */
		if (i == 1) {
			iov[i].iov_base = self->ram + 8 * MiB + 1;
		} else {
			iov[i].iov_base = self->dev + i * 2 * MiB +
					  (pos & (PAGE - 1));
			dma += d1 > d0 ? d1 - d0 : 0;
		}
		iov[i].iov_len = len[i];
		pattern_fill(iov[i].iov_base, len[i], pos, seed);
		pos += len[i];
		total += len[i];
	}
	stats_read(&before);
	ASSERT_EQ(total, pwritev(wfd, iov, 3, off));
	stats_delta(&before, &d);
	stats_log(_metadata, "pwritev of 1 MiB + 777, 64 KiB + 3, 2 MiB + 5",
		  &d);
	ASSERT_EQ(0, close(wfd));

	EXPECT_EQ(-1, readback_diff(self, off, total, seed));
	EXPECT_EQ(-1, readback_diff(self, 0, off, self->seed));
	EXPECT_EQ(-1, readback_diff(self, off + total, MiB, self->seed));
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, readback_diff(self, off, total, seed));
	EXPECT_EQ(-1, readback_diff(self, off + total, MiB, self->seed));

	EXPECT_EQ(1, d.routed_writes);
	EXPECT_EQ(dma, d.p2p_write_bytes);
	EXPECT_EQ(total - dma, d.cache_write_bytes);
}

/*
 * O_APPEND | O_DSYNC from device memory: the write lands at the end of
 * the file whatever the offset says, the size grows by exactly its length,
 * and the bytes and the size are on the drive when write() returns: a
 * power cut right after it (power_cut_remount(), nothing synced) keeps
 * them.
 */
TEST_F_TIMEOUT(router, p2p_write_append_dsync, 180)
{
	size_t len = 2 * MiB + 5;
	struct router_stats before, d;
	unsigned char *src;
	struct stat st;
	int wfd;

	if (!variant->fs)
		SKIP(return, "a block device cannot be appended to");
	wfd = open(self->path, O_WRONLY | O_APPEND | O_DSYNC);
	ASSERT_LE(0, wfd);
	src = self->dev + (self->size & (PAGE - 1));
	pattern_fill(src, len, self->size, self->seed);
	stats_read(&before);
	ASSERT_EQ((ssize_t)len, pwrite(wfd, src, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "append 2 MiB + 5", &d);
	ASSERT_EQ(0, fstat(wfd, &st));
	ASSERT_EQ(0, close(wfd));
	EXPECT_EQ((off_t)(self->size + len), st.st_size);

	ASSERT_EQ(0, close(self->fd));
	ASSERT_EQ(0, close(self->ref_fd));
	self->fd = -1;
	self->ref_fd = -1;
	ASSERT_EQ(0, power_cut_remount(variant->fs, self->blk, MNT));
	self->ref_fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, self->ref_fd);
	ASSERT_EQ(0, fstat(self->ref_fd, &st));
	EXPECT_EQ((off_t)(self->size + len), st.st_size);
	EXPECT_EQ(-1, readback_diff(self, self->size - MiB, MiB + len,
				    self->seed));
	/* The aligned middle goes to the drive by DMA (on ext4 too). */
	EXPECT_LT(0, d.p2p_write_bytes);
}

/*
 * Device memory the way a GPU driver hands it out (lib/test_p2pdma.c).
 */
#define GPU_DEV		"/dev/test_p2pdma"
#define GPU_DRV		TEST_P2PDMA_DRV	/* spin_util.h */
#define GPU_LEN		(16 * MiB)

/* The driver's device memory: an open file with GPU_LEN of it, mapped. */
struct gpu {
	int fd;
	unsigned char *map;
};

/*
 * The driver's device memory is there: the driver (CONFIG_TEST_P2PDMA, a
 * kernel feature: asserted, after a modprobe), and a device (the rig's
 * 128 MiB "gpu" ivshmem, which scripts/guest-init binds) bound to it,
 * which then makes GPU_DEV (rig hardware: SPIN_NEED()).  In a case's
 * body, before it opens GPU_DEV.
 */
#define GPU_NEED() do {							\
	ASSERT_EQ(0, test_p2pdma_driver())				\
		TH_LOG("no %s (CONFIG_TEST_P2PDMA)", GPU_DRV);		\
	SPIN_NEED(!access(GPU_DEV, F_OK),				\
		  "the \"gpu\" memory (a device bound to test_p2pdma): no %s", \
		  GPU_DEV);						\
} while (0)

/*
 * Open the driver, allocate the buffer with ioctl @req (@arg) and map it at
 * offset @at.
 */
static void gpu_open_how(struct __test_metadata *_metadata, struct gpu *gpu,
			 unsigned long req, void *arg, off_t at)
{
	gpu->map = NULL;
	gpu->fd = open(GPU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, gpu->fd)
		TH_LOG("%s: %s (the rig's gpu ivshmem bound to test_p2pdma)",
		       GPU_DEV, strerror(errno));
	ASSERT_EQ(0, ioctl(gpu->fd, req, arg))
		TH_LOG("allocating the buffer: %s", strerror(errno));
	gpu->map = mmap(NULL, GPU_LEN, PROT_READ | PROT_WRITE, MAP_SHARED,
			gpu->fd, at);
	ASSERT_NE(MAP_FAILED, gpu->map);
}

static void gpu_open(struct __test_metadata *_metadata, struct gpu *gpu)
{
	uint64_t size = GPU_LEN;

	gpu_open_how(_metadata, gpu, TEST_P2PDMA_ALLOC, &size, 0);
}

/*
 * The same, handed out as @mode says (TEST_P2PDMA_UVM, _AIS): an AIS
 * buffer, which holds no page references, is mapped VM_PFNMAP.
 */
static void gpu_open_mode(struct __test_metadata *_metadata, struct gpu *gpu,
			  unsigned int mode)
{
	struct test_p2pdma_alloc alloc = { .size = GPU_LEN, .mode = mode };

	gpu_open_how(_metadata, gpu, TEST_P2PDMA_ALLOC_MODE, &alloc,
		     mode == TEST_P2PDMA_AIS ? TEST_P2PDMA_PFNMAP_OFFSET : 0);
}

/* The counters of the driver's own memory. */
static void gpu_stats(struct __test_metadata *_metadata,
		      struct test_p2pdma_stats *st)
{
	int fd = open(GPU_DEV, O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioctl(fd, TEST_P2PDMA_STATS, st));
	close(fd);
}

static void gpu_close(struct gpu *gpu)
{
	if (gpu->map && gpu->map != MAP_FAILED)
		munmap(gpu->map, GPU_LEN);
	close(gpu->fd);
}

/*
 * The driver reads (or, with TEST_P2PDMA_WRITE, writes) @len bytes at file
 * offset @pos of @fd into (from) its buffer at @off, with a bio_vec of its
 * pages.  Returns what vfs_iocb_iter_read() or _write() returned.
 */
static long gpu_rw(struct gpu *gpu, int fd, unsigned int flags, off_t pos,
		   size_t len, size_t off)
{
	struct test_p2pdma_rw rw = {
		.fd = fd, .flags = flags, .pos = pos, .len = len,
		.offset = off,
	};
	long ret;

	if (!(flags & TEST_P2PDMA_WRITE))
		memset(gpu->map + off, POISON, len);
	ret = ioctl(gpu->fd, TEST_P2PDMA_RW, &rw);
	return ret < 0 ? -errno : ret;
}

/*
 * io_uring.  A read into device memory is first tried inline, without
 * blocking: the router starts the DMA and completes the request through
 * ki_complete (async_reads), has a worker finish a part that would block
 * (async_deferred), or answers -EAGAIN so that io-wq retries it where the
 * router may block (nowait_again).  Whichever, the CQE carries the whole
 * length and the bytes are right.
 */
#define URING_ENTRIES	64
#define URING_WAIT_S	30		/* no CQE for this long: a hang */
#define URING_IO_LEN	(256 * KiB)
#define URING_MAX_IO	32
#define CANCEL_TAG	(~0ULL)

/*
 * One request: IORING_OP_READ, IORING_OP_WRITE, IORING_OP_READ_FIXED or
 * IORING_OP_WRITE_FIXED (registered buffer 0) of iov[0], or
 * IORING_OP_READV of iov[0..nr).
 */
struct uring_io {
	int op;
	int nr;
	struct iovec iov[2];
	off_t off;
	size_t len;		/* of all the iovecs */
	int res;		/* the CQE's */
};

static void uring_io_set(struct uring_io *io, int op, void *buf, size_t len,
			 off_t off)
{
	memset(io, 0, sizeof(*io));
	io->op = op;
	io->nr = 1;
	io->iov[0].iov_base = buf;
	io->iov[0].iov_len = len;
	io->off = off;
	io->len = len;
}

/* One more iovec, after the others: makes @io an IORING_OP_READV. */
static void uring_io_add(struct uring_io *io, void *buf, size_t len)
{
	io->op = IORING_OP_READV;
	io->iov[io->nr].iov_base = buf;
	io->iov[io->nr].iov_len = len;
	io->nr++;
	io->len += len;
}

static void uring_init(struct __test_metadata *_metadata,
		       struct io_uring *ring)
{
	int ret = io_uring_queue_init(URING_ENTRIES, ring, 0);

	ASSERT_EQ(0, ret)
		TH_LOG("io_uring_queue_init: %s", strerror(-ret));
}

/*
 * A ring for @op: for IORING_OP_READ_FIXED and IORING_OP_WRITE_FIXED, with
 * @len bytes at @buf registered as buffer 0, device memory or not.
 */
static void uring_init_op(struct __test_metadata *_metadata,
			  struct io_uring *ring, int op, void *buf, size_t len)
{
	struct iovec reg = { buf, len };
	int ret;

	uring_init(_metadata, ring);
	if (op != IORING_OP_READ_FIXED && op != IORING_OP_WRITE_FIXED)
		return;
	ret = io_uring_register_buffers(ring, &reg, 1);
	if (ret)
		io_uring_queue_exit(ring);
	ASSERT_EQ(0, ret)
		TH_LOG("registering %zu bytes at %p: %s", len, buf,
		       strerror(-ret));
}

/* Put @io on an SQE tagged @tag; a read's destination is poisoned first. */
static int uring_queue(struct io_uring *ring, int fd, struct uring_io *io,
		       __u64 tag)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	void *buf = io->iov[0].iov_base;
	unsigned int len = io->iov[0].iov_len;
	int i;

	if (!sqe)
		return -EBUSY;
	if (io->op != IORING_OP_WRITE && io->op != IORING_OP_WRITE_FIXED)
		for (i = 0; i < io->nr; i++)
			memset(io->iov[i].iov_base, POISON, io->iov[i].iov_len);
	io->res = INT_MIN;
	switch (io->op) {
	case IORING_OP_READ:
		io_uring_prep_read(sqe, fd, buf, len, io->off);
		break;
	case IORING_OP_READV:
		io_uring_prep_readv(sqe, fd, io->iov, io->nr, io->off);
		break;
	case IORING_OP_READ_FIXED:
		io_uring_prep_read_fixed(sqe, fd, buf, len, io->off, 0);
		break;
	case IORING_OP_WRITE:
		io_uring_prep_write(sqe, fd, buf, len, io->off);
		break;
	case IORING_OP_WRITE_FIXED:
		io_uring_prep_write_fixed(sqe, fd, buf, len, io->off, 0);
		break;
	default:
		io_uring_prep_nop(sqe);
		return -EINVAL;
	}
	io_uring_sqe_set_data64(sqe, tag);
	return 0;
}

/*
 * Reap @n CQEs, each within URING_WAIT_S of the one before, into @ios by
 * tag; the cancel's result goes to *@cancel_res.  Returns how many came.
 */
static unsigned int uring_reap(struct io_uring *ring, struct uring_io *ios,
			       unsigned int nios, unsigned int n,
			       int *cancel_res)
{
	struct __kernel_timespec ts = { .tv_sec = URING_WAIT_S };
	struct io_uring_cqe *cqe;
	unsigned int got;

	for (got = 0; got < n; got++) {
		__u64 tag;

		if (io_uring_wait_cqe_timeout(ring, &cqe, &ts))
			break;
		tag = io_uring_cqe_get_data64(cqe);
		if (tag < nios)
			ios[tag].res = cqe->res;
		else if (tag == CANCEL_TAG && cancel_res)
			*cancel_res = cqe->res;
		io_uring_cqe_seen(ring, cqe);
	}
	return got;
}

/* Submit @ios[0..@n) with one io_uring_submit() and reap every CQE. */
static void uring_run(struct __test_metadata *_metadata,
		      struct io_uring *ring, int fd, struct uring_io *ios,
		      unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, uring_queue(ring, fd, &ios[i], i));
	}
	ASSERT_EQ((int)n, io_uring_submit(ring));
	ASSERT_EQ(n, uring_reap(ring, ios, n, n, NULL))
		TH_LOG("CQEs still missing after %d s", URING_WAIT_S);
}

/* Where the first @n bytes that @io read differ from the pattern, or -1. */
static long uring_diff(FIXTURE_DATA(router) *self, const struct uring_io *io,
		       size_t n)
{
	size_t done = 0, len;
	long diff;
	int i;

	for (i = 0; i < io->nr && done < n; i++, done += len) {
		len = io->iov[i].iov_len;
		if (len > n - done)
			len = n - done;
		diff = pattern_diff(self, io->iov[i].iov_base, len,
				    io->off + done);
		if (diff >= 0)
			return done + diff;
	}
	return -1;
}

/* Every read in @ios returned its whole length, and the file's bytes. */
static void uring_check_reads(struct __test_metadata *_metadata,
			      FIXTURE_DATA(router) *self,
			      const struct uring_io *ios, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		ASSERT_EQ((long)ios[i].len, ios[i].res)
			TH_LOG("request %u: %zu bytes at %lld", i, ios[i].len,
			       (long long)ios[i].off);
		ASSERT_EQ(-1, uring_diff(self, &ios[i], ios[i].len))
			TH_LOG("request %u: %zu bytes at %lld", i, ios[i].len,
			       (long long)ios[i].off);
	}
}

/* Run @n reads on @ring, log the counters' deltas @d, check the bytes. */
static void uring_reads(struct __test_metadata *_metadata,
			FIXTURE_DATA(router) *self, struct io_uring *ring,
			struct uring_io *ios, unsigned int n, const char *what,
			struct router_stats *d)
{
	struct router_stats before;

	stats_read(&before);
	uring_run(_metadata, ring, self->fd, ios, n);
	stats_delta(&before, d);
	stats_log(_metadata, what, d);
	uring_check_reads(_metadata, self, ios, n);
}

/*
 * @qd reads of 256 KiB at distinct 4 KiB-aligned offsets in [0, READ_LEN),
 * every other 64 KiB of which is cached, each into its own device memory,
 * submitted at once.  Each covers a whole uncached 64 KiB for the drive to
 * DMA, so each is completed asynchronously, or explicitly sent to io-wq:
 * none blocks the submitter.
 */
static void uring_reads_qd(struct __test_metadata *_metadata,
			   FIXTURE_DATA(router) *self, unsigned int qd, int op)
{
	const size_t slots = (READ_LEN - URING_IO_LEN) / PAGE + 1;
	uint64_t seed = 0x5eed0000ULL + qd, rnd = seed;
	struct uring_io ios[URING_MAX_IO];
	struct router_stats d;
	struct io_uring ring;
	unsigned int i, j;
	char what[64];
	off_t off;

	ASSERT_GE(URING_MAX_IO, (int)qd);
	TH_LOG("qd %u, offsets from xorshift64 seed 0x%llx", qd,
	       (unsigned long long)seed);
	for (i = 0; i < qd; i++) {
		do {
			off = xorshift64(&rnd) % slots * PAGE;
			for (j = 0; j < i && ios[j].off != off; j++)
				;
		} while (j < i);
		uring_io_set(&ios[i], op, self->dev + i * URING_IO_LEN,
			     URING_IO_LEN, off);
	}
	ASSERT_EQ(0, drop_caches());
	for (off = 0; off < (off_t)READ_LEN; off += 128 * KiB) {
		ASSERT_EQ(0, make_resident(self, off, 64 * KiB));
	}
	ASSERT_EQ((long)(READ_LEN / PAGE / 2),
		  resident_pages(self->ref_fd, 0, READ_LEN));

	uring_init_op(_metadata, &ring, op, self->dev, MAP_LEN);
	snprintf(what, sizeof(what), "io_uring, %u %s of 256 KiB", qd,
		 op == IORING_OP_READ_FIXED ? "READ_FIXEDs" : "reads");
	uring_reads(_metadata, self, &ring, ios, qd, what, &d);
	io_uring_queue_exit(&ring);
	EXPECT_LE(qd, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);
	EXPECT_LE(qd / 2 ? qd / 2 : 1, d.async_reads);
	EXPECT_LE(qd, d.async_reads + d.async_deferred + d.nowait_again);
}

TEST_F_TIMEOUT(router, uring_read_qd1, 180)
{
	uring_reads_qd(_metadata, self, 1, IORING_OP_READ);
}

TEST_F_TIMEOUT(router, uring_read_qd8, 180)
{
	uring_reads_qd(_metadata, self, 8, IORING_OP_READ);
}

TEST_F_TIMEOUT(router, uring_read_qd32, 180)
{
	uring_reads_qd(_metadata, self, 32, IORING_OP_READ);
}

TEST_F_TIMEOUT(router, uring_read_fixed_qd1, 180)
{
	uring_reads_qd(_metadata, self, 1, IORING_OP_READ_FIXED);
}

TEST_F_TIMEOUT(router, uring_read_fixed_qd8, 180)
{
	uring_reads_qd(_metadata, self, 8, IORING_OP_READ_FIXED);
}

TEST_F_TIMEOUT(router, uring_read_fixed_qd32, 180)
{
	uring_reads_qd(_metadata, self, 32, IORING_OP_READ_FIXED);
}

/*
 * Eight 1 MiB io_uring reads (@op) over [0, READ_LEN) with none, every
 * other 64 KiB and all of it cached: the drive DMAs what is not cached and
 * only that, and the copies and the DMAs add up to the reads.
 */
static void uring_residency(struct __test_metadata *_metadata,
			    FIXTURE_DATA(router) *self, int op)
{
	static const unsigned int pct[] = { 0, 50, 100 };
	const unsigned int n = READ_LEN / MiB;
	const long long len = READ_LEN;
	struct uring_io ios[READ_LEN / MiB];
	struct router_stats d;
	struct io_uring ring;
	unsigned int i, k;
	char what[64];
	off_t off;

	uring_init_op(_metadata, &ring, op, self->dev, MAP_LEN);
	for (k = 0; k < ARRAY_SIZE(pct); k++) {
		ASSERT_EQ(0, drop_caches());
		if (pct[k] == 100)
			ASSERT_EQ(0, make_resident(self, 0, len));
		for (off = 0; pct[k] == 50 && off < len; off += 128 * KiB) {
			ASSERT_EQ(0, make_resident(self, off, 64 * KiB));
		}
		for (i = 0; i < n; i++)
			uring_io_set(&ios[i], op, self->dev + i * MiB, MiB,
				     i * MiB);
		snprintf(what, sizeof(what), "io_uring %s, %u%% cached",
			 op == IORING_OP_READ ? "READ" : "READ_FIXED", pct[k]);
		uring_reads(_metadata, self, &ring, ios, n, what, &d);
		EXPECT_LE(n, d.routed_reads);
		EXPECT_EQ(len, d.p2p_bytes + d.cache_bytes);
		if (pct[k] == 100) {
			EXPECT_EQ(0, d.p2p_bytes);
			continue;
		}
		if (pct[k] == 0) {
			EXPECT_LE(len / 10 * 9, d.p2p_bytes);
		} else {
			EXPECT_LT(0, d.cache_bytes);
		}
		EXPECT_LT(0, d.p2p_bytes);
		EXPECT_LE(1, d.async_reads);
	}
	io_uring_queue_exit(&ring);
}

TEST_F_TIMEOUT(router, uring_read_residency, 180)
{
	uring_residency(_metadata, self, IORING_OP_READ);
}

/*
 * IORING_OP_READV: one iovec in device memory is routed like a READ, and
 * asynchronously; device memory and RAM in one request are routed too
 * (perhaps from io-wq: nowait_again), the RAM part copied.
 */
TEST_F_TIMEOUT(router, uring_readv, 180)
{
	struct router_stats d;
	struct io_uring ring;
	struct uring_io io;

	uring_init(_metadata, &ring);
	ASSERT_EQ(0, drop_caches());
	uring_io_set(&io, IORING_OP_READV, self->dev, 2 * MiB, 1 * MiB);
	uring_reads(_metadata, self, &ring, &io, 1,
		    "READV, 2 MiB of device memory", &d);
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);
	EXPECT_LE(1, d.async_reads);

	ASSERT_EQ(0, drop_caches());
	uring_io_set(&io, IORING_OP_READV, self->dev + 4 * MiB, 1 * MiB,
		     6 * MiB);
	uring_io_add(&io, self->ram, 256 * KiB + 100);
	uring_reads(_metadata, self, &ring, &io, 1,
		    "READV, 1 MiB of device memory and 256 KiB + 100 of RAM",
		    &d);
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);
	/* Only the device memory part is the router's to count. */
	EXPECT_EQ((long long)MiB, d.p2p_bytes + d.cache_bytes);
	io_uring_queue_exit(&ring);
}

/*
 * @n io_uring writes (@op) of 8 MiB / @n each from device memory, to every
 * other such range of [0, 16 MiB), the first 4 MiB cached before: all are
 * routed (from io-wq where the file system must block), the page cache is
 * not left stale, and the ranges between them keep their bytes, read back
 * warm and cold.
 */
static void uring_writes(struct __test_metadata *_metadata,
			 FIXTURE_DATA(router) *self, unsigned int n, int op)
{
	const long long len = READ_LEN / n;
	uint64_t seed = self->seed ^ 0x75e1 ^ n;
	struct router_stats before, d;
	struct uring_io ios[URING_MAX_IO];
	struct io_uring ring;
	unsigned int i, cold;
	char what[64];
	int wfd;

	ASSERT_GE(URING_MAX_IO, (int)n);
	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, make_resident(self, 0, 4 * MiB));
	for (i = 0; i < n; i++) {
		unsigned char *src = self->dev + i * len;

		pattern_fill(src, len, 2 * i * len, seed);
		uring_io_set(&ios[i], op, src, len, 2 * i * len);
	}
	uring_init_op(_metadata, &ring, op, self->dev, MAP_LEN);
	stats_read(&before);
	uring_run(_metadata, &ring, wfd, ios, n);
	stats_delta(&before, &d);
	io_uring_queue_exit(&ring);
	snprintf(what, sizeof(what), "io_uring, %u %s of %lld KiB", n,
		 op == IORING_OP_WRITE ? "WRITEs" : "WRITE_FIXEDs", len / KiB);
	stats_log(_metadata, what, &d);
	ASSERT_EQ(0, close(wfd));
	for (i = 0; i < n; i++) {
		ASSERT_EQ(len, ios[i].res)
			TH_LOG("the write to %lld KiB", 2 * i * len / KiB);
	}

	for (cold = 0; cold < 2; cold++) {
		if (cold)
			ASSERT_EQ(0, drop_caches());
		for (i = 0; i < n; i++) {
			EXPECT_EQ(-1, readback_diff(self, 2 * i * len, len,
						    seed))
				TH_LOG("written at %lld KiB, %s",
				       2 * i * len / KiB, cold ? "cold" : "warm");
			EXPECT_EQ(-1, readback_diff(self, (2 * i + 1) * len,
						    len, self->seed))
				TH_LOG("untouched at %lld KiB, %s",
				       (2 * i + 1) * len / KiB,
				       cold ? "cold" : "warm");
		}
	}
	EXPECT_LE((long long)n, d.routed_writes);
	EXPECT_LT(0, d.p2p_write_bytes);
	EXPECT_EQ((long long)n * len, d.p2p_write_bytes + d.cache_write_bytes);
}

TEST_F_TIMEOUT(router, uring_write_qd8, 180)
{
	uring_writes(_metadata, self, 8, IORING_OP_WRITE);
}

TEST_F_TIMEOUT(router, uring_write_fixed_qd1, 180)
{
	uring_writes(_metadata, self, 1, IORING_OP_WRITE_FIXED);
}

TEST_F_TIMEOUT(router, uring_write_fixed_qd8, 180)
{
	uring_writes(_metadata, self, 8, IORING_OP_WRITE_FIXED);
}

TEST_F_TIMEOUT(router, uring_write_fixed_qd32, 180)
{
	uring_writes(_metadata, self, 32, IORING_OP_WRITE_FIXED);
}

/*
 * @n reads of 256 KiB over [0, @n * 256 KiB): the even ones into device
 * memory alone, the odd ones READVs of 192 KiB of device memory and
 * 64 KiB of RAM, which may wait in io-wq.
 */
static void uring_mixed_reads(FIXTURE_DATA(router) *self,
			      struct uring_io *ios, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		size_t at = i * URING_IO_LEN;

		if (!(i & 1)) {
			uring_io_set(&ios[i], IORING_OP_READ, self->dev + at,
				     URING_IO_LEN, at);
			continue;
		}
		uring_io_set(&ios[i], IORING_OP_READV, self->dev + at,
			     URING_IO_LEN - 64 * KiB, at);
		uring_io_add(&ios[i], self->ram + at, 64 * KiB);
	}
}

/*
 * 32 reads, then IORING_OP_ASYNC_CANCEL with IORING_ASYNC_CANCEL_ANY:
 * each read ends with its whole length and the file's bytes (a DMA in
 * flight is not cancelled), or short with the right bytes, or cancelled;
 * never with another error.  No CQE goes missing, and the ring still
 * reads correctly after.
 */
TEST_F_TIMEOUT(router, uring_cancel, 180)
{
	unsigned int n = URING_MAX_IO, i, whole = 0, part = 0, cancelled = 0;
	struct uring_io ios[URING_MAX_IO];
	struct router_stats before, d;
	int cancel_res = INT_MIN;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	char what[128];

	uring_mixed_reads(self, ios, n);
	uring_init(_metadata, &ring);
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, uring_queue(&ring, self->fd, &ios[i], i));
	}
	ASSERT_EQ((int)n, io_uring_submit(&ring));
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	io_uring_sqe_set_data64(sqe, CANCEL_TAG);
	ASSERT_EQ(1, io_uring_submit(&ring));
	ASSERT_EQ(n + 1, uring_reap(&ring, ios, n, n + 1, &cancel_res))
		TH_LOG("CQEs still missing after %d s", URING_WAIT_S);
	stats_delta(&before, &d);

	for (i = 0; i < n; i++) {
		int res = ios[i].res;

		if (res == -ECANCELED || res == -EINTR) {
			cancelled++;
			continue;
		}
		ASSERT_LT(0, res)
			TH_LOG("read %u: %s", i, strerror(-res));
		ASSERT_GE((int)ios[i].len, res);
		if (res == (int)ios[i].len)
			whole++;
		else
			part++;
		ASSERT_EQ(-1, uring_diff(self, &ios[i], res))
			TH_LOG("read %u: %d bytes at %lld", i, res,
			       (long long)ios[i].off);
	}
	snprintf(what, sizeof(what),
		 "cancel returned %d; %u reads whole, %u short, %u cancelled",
		 cancel_res, whole, part, cancelled);
	stats_log(_metadata, what, &d);
	EXPECT_TRUE(cancel_res >= 0 || cancel_res == -ENOENT ||
		    cancel_res == -EALREADY);
	EXPECT_LE(1U, whole);
	EXPECT_LT(0, d.p2p_bytes);

	uring_io_set(&ios[0], IORING_OP_READ, self->dev + 12 * MiB, MiB,
		     9 * MiB);
	uring_run(_metadata, &ring, self->fd, ios, 1);
	io_uring_queue_exit(&ring);
	uring_check_reads(_metadata, self, ios, 1);
}

/*
 * The ring closed with 32 reads into device memory in flight: the kernel
 * finishes or cancels them itself, and a pread() into other device memory,
 * over the same file range, right after is routed and right.
 */
TEST_F_TIMEOUT(router, uring_ring_closed, 180)
{
	long long len = 2 * MiB, off = 3 * MiB;
	unsigned char *buf = self->dev + 12 * MiB;
	struct uring_io ios[URING_MAX_IO];
	struct router_stats before, d;
	struct io_uring ring;
	unsigned int i;

	uring_mixed_reads(self, ios, URING_MAX_IO);
	uring_init(_metadata, &ring);
	ASSERT_EQ(0, drop_caches());
	for (i = 0; i < URING_MAX_IO; i++) {
		ASSERT_EQ(0, uring_queue(&ring, self->fd, &ios[i], i));
	}
	ASSERT_EQ(URING_MAX_IO, io_uring_submit(&ring));
	io_uring_queue_exit(&ring);

	stats_read(&before);
	ASSERT_EQ(len, poisoned_pread(self, buf, len, off));
	stats_delta(&before, &d);
	stats_log(_metadata, "pread after the ring was closed", &d);
	ASSERT_EQ(-1, pattern_diff(self, buf, len, off));
	EXPECT_LE(1, d.routed_reads);
}

/*
 * IORING_OP_READ_FIXED into device memory registered with the ring: the
 * registered buffer reaches the router as a bio_vec of P2PDMA pages, and
 * is split between copy and DMA as a READ is, at 0, 50 and 100% cached.
 */
TEST_F_TIMEOUT(router, uring_read_fixed, 180)
{
	uring_residency(_metadata, self, IORING_OP_READ_FIXED);
}

/*
 * One registered buffer over two mappings side by side: device memory the
 * drive reaches, then device memory of a provider it cannot reach.  A
 * fixed I/O on it is served as a pread() or pwrite() of its range: the
 * read's one segment starts in reachable memory, is routed, and is copied
 * once the DMA into the other provider is refused (fallback_eremoteio);
 * the write, whose every page is looked at, is split where the provider
 * changes, the reachable part DMAed and the rest copied.  Every byte
 * right, for READ_FIXED and WRITE_FIXED.
 */
TEST_F_TIMEOUT(router, uring_fixed_two_providers, 180)
{
	const size_t half = 2 * MiB;
	const uint64_t seed = self->seed ^ 0xf1d;
	struct router_stats d, before;
	char provider[SYSFS_LEN];
	struct io_uring ring;
	struct uring_io io;
	unsigned char *buf;
	int wfd;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, false, provider,
			       sizeof(provider)),
		  "a provider that %s cannot reach: none published",
		  self->ns[0]);
	buf = mmap(NULL, 2 * half, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	ASSERT_NE(MAP_FAILED, buf);
	ASSERT_EQ(buf, p2pmem_map_at(self->provider, buf, half));
	ASSERT_EQ(buf + half, p2pmem_map_at(provider, buf + half, half));
	uring_init_op(_metadata, &ring, IORING_OP_READ_FIXED, buf, 2 * half);

	ASSERT_EQ(0, drop_caches());
	uring_io_set(&io, IORING_OP_READ_FIXED, buf + 4 * KiB,
		     2 * half - 8 * KiB, 3 * MiB);
	uring_reads(_metadata, self, &ring, &io, 1,
		    "READ_FIXED, near then far device memory", &d);
	EXPECT_LE(1, d.routed_reads);
	EXPECT_EQ((long long)(2 * half) - 8 * KiB, d.p2p_bytes + d.cache_bytes);
	EXPECT_LE(1, d.fallback_eremoteio + d.fallback_unreachable);

	/* The same buffer written elsewhere: the file's new bytes. */
	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	pattern_fill(buf, 2 * half, 8 * MiB, seed);
	uring_io_set(&io, IORING_OP_WRITE_FIXED, buf, 2 * half, 8 * MiB);
	stats_read(&before);
	uring_run(_metadata, &ring, wfd, &io, 1);
	stats_delta(&before, &d);
	stats_log(_metadata, "WRITE_FIXED, near then far device memory", &d);
	ASSERT_EQ(0, close(wfd));
	ASSERT_EQ((int)(2 * half), io.res);
	EXPECT_EQ((long long)half, d.p2p_write_bytes);
	EXPECT_EQ((long long)half, d.cache_write_bytes);
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, readback_diff(self, 8 * MiB, 2 * half, seed));
	io_uring_queue_exit(&ring);
	munmap(buf, 2 * half);
}

/*
 * A buffer that is part RAM and part device memory cannot be registered:
 * RAM must be pinned FOLL_LONGTERM, which GUP refuses for device memory.
 * Registration fails with EFAULT, in either order, and pins nothing: the
 * provider gets all its memory back once the mapping is gone, and the ring
 * still registers device memory alone.
 */
TEST_F_TIMEOUT(router, uring_fixed_ram_and_device, 180)
{
	const size_t half = 2 * MiB;
	long long avail = p2pmem_available(self->provider);
	struct iovec reg;
	struct io_uring ring;
	unsigned char *buf;
	int ram_first, ret;

	ASSERT_LT(0, avail);
	uring_init(_metadata, &ring);
	for (ram_first = 0; ram_first < 2; ram_first++) {
		buf = mmap(NULL, 2 * half, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		ASSERT_NE(MAP_FAILED, buf);
		ASSERT_NE(NULL, p2pmem_map_at(self->provider,
					      buf + ram_first * half, half));
		reg.iov_base = buf;
		reg.iov_len = 2 * half;
		ret = io_uring_register_buffers(&ring, &reg, 1);
		EXPECT_EQ(-EFAULT, ret)
			TH_LOG("%s first: %s", ram_first ? "RAM" : "device",
			       strerror(-ret));
		if (!ret)
			io_uring_unregister_buffers(&ring);
		munmap(buf, 2 * half);
		EXPECT_EQ(avail, p2pmem_available(self->provider));
	}
	reg.iov_base = self->dev;
	reg.iov_len = half;
	EXPECT_EQ(0, io_uring_register_buffers(&ring, &reg, 1));
	io_uring_queue_exit(&ring);
}

/*
 * Registered device memory where it cannot go, each a clean error and
 * never wrong bytes or a crash:
 *  - a zero-copy send (a network driver maps pages with dma_map_page()):
 *    EOPNOTSUPP;
 *  - an O_DIRECT READ_FIXED from a loop device, whose queue has no
 *    BLK_FEAT_PCI_P2PDMA: EREMOTEIO, as for user memory;
 *  - the driver's in-kernel O_DIRECT bio_vec read from it: EREMOTEIO too;
 * while a buffered READ_FIXED from the loop device is copied, right.
 */
/* A connected TCP pair over loopback, which it brings up: 0 or -1. */
static int tcp_pair(int sv[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct ifreq ifr = { .ifr_name = "lo" };
	socklen_t alen = sizeof(a);
	int l, ret = -1;

	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		return -1;
	if (!ioctl(l, SIOCGIFFLAGS, &ifr) && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(l, SIOCSIFFLAGS, &ifr);
	}
	sv[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (sv[0] >= 0 && !bind(l, (struct sockaddr *)&a, sizeof(a)) &&
	    !listen(l, 1) &&
	    !getsockname(l, (struct sockaddr *)&a, &alen) &&
	    !connect(sv[0], (struct sockaddr *)&a, sizeof(a))) {
		sv[1] = accept(l, NULL, NULL);
		ret = sv[1] < 0 ? -1 : 0;
	}
	close(l);
	return ret;
}

TEST_F_TIMEOUT(router, uring_fixed_bad_targets, 180)
{
	const char *file = "/tmp/spin-router-loop";
	const size_t len = 256 * KiB;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	struct uring_io io;
	char loop[64];
	struct gpu gpu;
	int sv[2], lfd, dfd;

	GPU_NEED();	/* before the loop device it would leave behind */
	ASSERT_EQ(0, write_pattern_file(file, 4 * MiB, self->seed));
	ASSERT_EQ(0, loop_attach(file, loop, sizeof(loop)));
	uring_init_op(_metadata, &ring, IORING_OP_READ_FIXED, self->dev,
		      2 * MiB);

	/* TCP over loopback: AF_UNIX refuses zero-copy sends itself. */
	ASSERT_EQ(0, tcp_pair(sv));
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_send_zc_fixed(sqe, sv[0], self->dev, len, 0, 0, 0);
	ASSERT_EQ(1, io_uring_submit(&ring));
	ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
	EXPECT_EQ(-EOPNOTSUPP, cqe->res);
	/* A failed zero-copy send still posts its notification: reap it. */
	if (cqe->flags & IORING_CQE_F_MORE) {
		io_uring_cqe_seen(&ring, cqe);
		ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
		EXPECT_TRUE(cqe->flags & IORING_CQE_F_NOTIF);
	}
	io_uring_cqe_seen(&ring, cqe);
	close(sv[0]);
	close(sv[1]);

	dfd = open(loop, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, dfd);
	uring_io_set(&io, IORING_OP_READ_FIXED, self->dev, len, 0);
	uring_run(_metadata, &ring, dfd, &io, 1);
	EXPECT_EQ(-EREMOTEIO, io.res);

	lfd = open(loop, O_RDONLY);
	ASSERT_LE(0, lfd);
	uring_io_set(&io, IORING_OP_READ_FIXED, self->dev + 4 * KiB, len,
		     MiB);
	uring_run(_metadata, &ring, lfd, &io, 1);
	EXPECT_EQ((int)len, io.res);
	EXPECT_EQ(-1, pattern_diff(self, self->dev + 4 * KiB, len, MiB));
	io_uring_queue_exit(&ring);

	gpu_open(_metadata, &gpu);
	EXPECT_EQ(-EREMOTEIO, gpu_rw(&gpu, dfd, 0, 0, len, 0));
	EXPECT_EQ((long)len, gpu_rw(&gpu, lfd, 0, MiB, len, 0));
	EXPECT_EQ(-1, pattern_diff(self, gpu.map, len, MiB));
	gpu_close(&gpu);
	close(dfd);
	close(lfd);
	loop_detach(loop);
	unlink(file);
}

/* READ_FIXED into registered RAM: not the router's, a plain copy. */
TEST_F_TIMEOUT(router, uring_read_fixed_ram, 180)
{
	struct iovec reg = { self->ram, 4 * MiB };
	struct router_stats d;
	struct io_uring ring;
	struct uring_io io;

	uring_init(_metadata, &ring);
	ASSERT_EQ(0, io_uring_register_buffers(&ring, &reg, 1));
	ASSERT_EQ(0, drop_caches());
	uring_io_set(&io, IORING_OP_READ_FIXED, self->ram + 100, 2 * MiB,
		     MiB + 100);
	uring_reads(_metadata, self, &ring, &io, 1, "READ_FIXED into RAM", &d);
	EXPECT_EQ(0, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);

	/* A fixed read that runs past the registered buffer: EFAULT. */
	uring_io_set(&io, IORING_OP_READ_FIXED, self->ram + 3 * MiB, 2 * MiB,
		     0);
	uring_run(_metadata, &ring, self->fd, &io, 1);
	EXPECT_EQ(-EFAULT, io.res);
	io_uring_queue_exit(&ring);
}

/*
 * io_uring reads into device memory from a file on a file system the
 * router does not serve (the guest's root, a RAM file system): the page
 * cache serves them, the router is not asked, the bytes are right.
 */
TEST_F_TIMEOUT(router, uring_unserved_fs, 180)
{
	const char *path = "/tmp/spin-router-unserved";
	struct router_stats before, d;
	struct uring_io ios[4];
	struct io_uring ring;
	unsigned int i;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 4 * MiB, self->seed));
	uring_init(_metadata, &ring);
	for (i = 0; i < ARRAY_SIZE(ios); i++)
		uring_io_set(&ios[i], IORING_OP_READ, self->dev + i * MiB,
			     MiB - 100, i * MiB + 100);
	stats_read(&before);
	uring_run(_metadata, &ring, fd, ios, ARRAY_SIZE(ios));
	stats_delta(&before, &d);
	stats_log(_metadata, "io_uring, 4 reads from a RAM file system", &d);
	io_uring_queue_exit(&ring);
	close(fd);
	unlink(path);
	uring_check_reads(_metadata, self, ios, ARRAY_SIZE(ios));
	EXPECT_EQ(0, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);
	EXPECT_EQ(0, d.async_reads);
}

/*
 * io_uring into device memory the drive cannot reach: declined up front
 * as for pread(), copied, right bytes, no DMA tried.
 */
TEST_F_TIMEOUT(router, uring_unreachable, 180)
{
	long long len = 1 * MiB, off = 4 * KiB;
	struct router_stats d;
	char provider[SYSFS_LEN];
	struct io_uring ring;
	unsigned char *far;
	struct uring_io io;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, false, provider,
			       sizeof(provider)),
		  "a provider that %s cannot reach: none published",
		  self->ns[0]);
	TH_LOG("unreachable provider %s", provider);
	far = p2pmem_map(provider, len);
	ASSERT_NE(NULL, far);

	uring_init(_metadata, &ring);
	ASSERT_EQ(0, drop_caches());
	uring_io_set(&io, IORING_OP_READ, far, len, off);
	uring_reads(_metadata, self, &ring, &io, 1, "io_uring, unreachable",
		    &d);
	io_uring_queue_exit(&ring);
	EXPECT_LE(1, d.fallback_unreachable);
	EXPECT_EQ(0, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);
	munmap(far, len);
}

/*
 * preadv2() with @flags of [@off, @off + @len) into poisoned device memory,
 * with the counters' deltas in @d, logged; errno as preadv2() left it.
 */
static ssize_t pread_flags(struct __test_metadata *_metadata,
			   FIXTURE_DATA(router) *self, size_t len, off_t off,
			   int flags, const char *what, struct router_stats *d)
{
	struct iovec iov = { self->dev, len };
	struct router_stats before;
	ssize_t n;
	int err;

	memset(self->dev, POISON, len);
	stats_read(&before);
	errno = 0;
	n = preadv2(self->fd, &iov, 1, off, flags);
	err = errno;
	stats_delta(&before, d);
	TH_LOG("%s: %zd (%s)", what, n, strerror(err));
	stats_log(_metadata, what, d);
	errno = err;
	return n;
}

/*
 * preadv2(RWF_NOWAIT) into device memory is a buffered read that may not
 * wait, as into RAM: the router leaves it to the page cache, so nothing is
 * DMAed and nothing routed, and it returns EAGAIN or what the page cache
 * held, with the file's bytes, and writes nothing past that.  What the
 * page cache holds by then is not fixed: the read starts read-ahead, which
 * on a fast drive may finish before the read looks (seen on md raid0), so
 * the count is only bounded by the request, and the same call into RAM is
 * not a reference.  Over a cached range it returns all of it.
 */
TEST_F_TIMEOUT(router, nowait_cold, 180)
{
	static const size_t cached_cases[] = { 0, 256 * KiB, 1 * MiB };
	const size_t len = 1 * MiB;
	struct router_stats d;
	unsigned int i;

	ASSERT_EQ(0, drop_caches());
	for (i = 0; i < ARRAY_SIZE(cached_cases); i++) {
		size_t cached = cached_cases[i], j;
		off_t off = i * 4 * MiB;
		char what[160];
		ssize_t n;
		int err;

		if (cached)
			ASSERT_EQ(0, make_resident(self, off, cached));
		ASSERT_EQ((long)(cached / PAGE),
			  resident_pages(self->ref_fd, off, len));

		snprintf(what, sizeof(what), "RWF_NOWAIT, %zu bytes cached",
			 cached);
		n = pread_flags(_metadata, self, len, off, RWF_NOWAIT, what,
				&d);
		err = errno;
		if (n < 0)
			EXPECT_EQ(EAGAIN, err);
		ASSERT_GE((ssize_t)len, n);
		if (cached == len)
			EXPECT_EQ((ssize_t)len, n);
		if (n > 0)
			ASSERT_EQ(-1, pattern_diff(self, self->dev, n, off));
		for (j = n > 0 ? n : 0; j < len && self->dev[j] == POISON; j++)
			;
		EXPECT_EQ(len, j)
			TH_LOG("byte %zu, past what the read returned, written",
			       j);
		EXPECT_EQ(0, d.routed_reads);
		EXPECT_EQ(0, d.p2p_bytes);
	}
}

/* RWF_NOWAIT over a cached range: all of it, copied, no DMA. */
TEST_F_TIMEOUT(router, nowait_warm, 180)
{
	long long len = 4 * MiB, off = 2 * MiB;
	struct router_stats d;
	ssize_t n;

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, make_resident(self, off, len));
	n = pread_flags(_metadata, self, len, off, RWF_NOWAIT,
			"RWF_NOWAIT, 4 MiB cached", &d);
	ASSERT_EQ(len, n)
		TH_LOG("%s", n < 0 ? strerror(errno) : "short");
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, off));
	EXPECT_EQ(0, d.p2p_bytes);
}

/* RWF_HIPRI means nothing to a buffered read: it is routed as usual. */
TEST_F_TIMEOUT(router, hipri, 180)
{
	long long len = 4 * MiB, off = 1 * MiB;
	struct router_stats d;
	ssize_t n;

	ASSERT_EQ(0, drop_caches());
	n = pread_flags(_metadata, self, len, off, RWF_HIPRI,
			"RWF_HIPRI, cold 4 MiB", &d);
	ASSERT_EQ(len, n)
		TH_LOG("%s", n < 0 ? strerror(errno) : "short");
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, off));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);
}

/*
 * read(), readv() and write() take the file position and move it by what
 * they did, as without the router: the router is handed the position and
 * gives back the length.
 */
TEST_F_TIMEOUT(router, file_position, 180)
{
	long long pos = 1 * MiB + 4 * KiB, len = 2 * MiB;
	long long wpos = 10 * MiB, wlen = 1 * MiB;
	uint64_t seed = self->seed ^ 0x905;
	struct iovec iov[] = {
		{ self->dev + 4 * MiB, 1 * MiB },
		{ self->ram, 100000 },
	};
	struct router_stats before, d;
	unsigned char *src = self->dev + 8 * MiB;
	int wfd;

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(pos, lseek(self->fd, pos, SEEK_SET));
	memset(self->dev, POISON, len);
	stats_read(&before);
	ASSERT_EQ(len, read(self->fd, self->dev, len));
	stats_delta(&before, &d);
	stats_log(_metadata, "read() of 2 MiB", &d);
	ASSERT_EQ(pos + len, lseek(self->fd, 0, SEEK_CUR));
	ASSERT_EQ(-1, pattern_diff(self, self->dev, len, pos));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);

	/* From where read() left off: device memory, then RAM. */
	pos += len;
	len = iov[0].iov_len + iov[1].iov_len;
	memset(iov[0].iov_base, POISON, iov[0].iov_len);
	memset(iov[1].iov_base, POISON, iov[1].iov_len);
	stats_read(&before);
	ASSERT_EQ(len, readv(self->fd, iov, ARRAY_SIZE(iov)));
	stats_delta(&before, &d);
	stats_log(_metadata, "readv() of device memory and RAM", &d);
	ASSERT_EQ(pos + len, lseek(self->fd, 0, SEEK_CUR));
	ASSERT_EQ(-1, pattern_diff(self, iov[0].iov_base, iov[0].iov_len, pos));
	ASSERT_EQ(-1, pattern_diff(self, iov[1].iov_base, iov[1].iov_len,
				   pos + iov[0].iov_len));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);

	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	pattern_fill(src, wlen, wpos, seed);
	ASSERT_EQ(wpos, lseek(wfd, wpos, SEEK_SET));
	stats_read(&before);
	ASSERT_EQ(wlen, write(wfd, src, wlen));
	stats_delta(&before, &d);
	stats_log(_metadata, "write() of 1 MiB", &d);
	ASSERT_EQ(wpos + wlen, lseek(wfd, 0, SEEK_CUR));
	ASSERT_EQ(0, close(wfd));
	EXPECT_LE(1, d.routed_writes);
	EXPECT_LT(0, d.p2p_write_bytes);
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, readback_diff(self, wpos, wlen, seed));
	EXPECT_EQ(-1, readback_diff(self, wpos - MiB, MiB, self->seed));
	EXPECT_EQ(-1, readback_diff(self, wpos + wlen, MiB, self->seed));
}

/*
 * io_uring reads at file position -1 read on from where the last one
 * ended and move the file position, as read() does, also when the read
 * into device memory completes asynchronously (cold and large: the DMA is
 * still in flight when the submitter returns; with io_uring's completion
 * not moving the position, the raw, ext4 and raid0 variants failed).
 */
TEST_F_TIMEOUT(router, uring_read_cur_pos, 180)
{
	off_t pos = 3 * MiB + 5 * PAGE;
	struct router_stats before, d;
	size_t len = 4 * MiB;
	struct io_uring ring;
	struct uring_io io[2];
	int i;

	uring_init(_metadata, &ring);
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(pos, lseek(self->fd, pos, SEEK_SET));
	stats_read(&before);
	/* One at a time: two reads at -1 in flight together may overlap. */
	for (i = 0; i < 2; i++) {
		uring_io_set(&io[i], IORING_OP_READ, self->dev + i * len, len,
			     -1);
		uring_run(_metadata, &ring, self->fd, &io[i], 1);
		ASSERT_EQ((long)len, io[i].res);
		EXPECT_EQ(pos + (i + 1) * (off_t)len,
			  lseek(self->fd, 0, SEEK_CUR));
		io[i].off = pos + i * len;
		EXPECT_EQ(-1, uring_diff(self, &io[i], len));
	}
	stats_delta(&before, &d);
	stats_log(_metadata, "two 4 MiB reads at position -1", &d);
	EXPECT_LE(2, d.async_reads);
	io_uring_queue_exit(&ring);
}

/*
 * The in-kernel bio_vec read, as AMD's hipFile path issues it without
 * O_DIRECT, of READ_LEN with none, every other 64 KiB and all of it
 * cached: the drive DMAs what is not cached and only that, the copies and
 * the DMAs add up to the read, and every byte is right.
 */
static void gpu_bvec_read_on(struct __test_metadata *_metadata,
			     FIXTURE_DATA(router) *self, struct gpu *gpu)
{
	static const unsigned int pct[] = { 0, 50, 100 };
	const long long len = READ_LEN;
	struct router_stats before, d;
	char what[64];
	unsigned int k;
	off_t off;

	for (k = 0; k < ARRAY_SIZE(pct); k++) {
		ASSERT_EQ(0, drop_caches());
		if (pct[k] == 100)
			ASSERT_EQ(0, make_resident(self, 0, len));
		for (off = 0; pct[k] == 50 && off < len; off += 128 * KiB) {
			ASSERT_EQ(0, make_resident(self, off, 64 * KiB));
		}
		stats_read(&before);
		ASSERT_EQ(len, gpu_rw(gpu, self->fd, 0, 0, len, 0));
		stats_delta(&before, &d);
		snprintf(what, sizeof(what), "bio_vec read, %u%% cached",
			 pct[k]);
		stats_log(_metadata, what, &d);
		ASSERT_EQ(-1, pattern_diff(self, gpu->map, len, 0));
		EXPECT_LE(1, d.routed_reads);
		EXPECT_EQ(len, d.p2p_bytes + d.cache_bytes);
		if (pct[k] == 0)
			EXPECT_LE(len / 10 * 9, d.p2p_bytes);
		if (pct[k] == 50) {
			EXPECT_LT(0, d.p2p_bytes);
			EXPECT_LT(0, d.cache_bytes);
		}
		if (pct[k] == 100)
			EXPECT_EQ(0, d.p2p_bytes);
	}
}

TEST_F_TIMEOUT(router, gpu_bvec_read, 180)
{
	struct gpu gpu;

	GPU_NEED();
	gpu_open(_metadata, &gpu);
	gpu_bvec_read_on(_metadata, self, &gpu);
	gpu_close(&gpu);
}

/*
 * The in-kernel bio_vec write: the aligned middle goes out by DMA, the
 * file reads back the new bytes warm and cold, its neighbours keep theirs.
 */
static void gpu_bvec_write_on(struct __test_metadata *_metadata,
			      FIXTURE_DATA(router) *self, struct gpu *gpu)
{
	const uint64_t seed = self->seed ^ 0x69a;
	const long long len = 4 * MiB, pos = 2 * MiB + 512;
	struct router_stats before, d;
	int wfd, cold;

	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, make_resident(self, 0, 3 * MiB));
	pattern_fill(gpu->map + 512, len, pos, seed);
	stats_read(&before);
	ASSERT_EQ(len, gpu_rw(gpu, wfd, TEST_P2PDMA_WRITE, pos, len, 512));
	stats_delta(&before, &d);
	stats_log(_metadata, "bio_vec write", &d);
	ASSERT_EQ(0, close(wfd));
	EXPECT_LE(1, d.routed_writes);
	EXPECT_LT(0, d.p2p_write_bytes);
	EXPECT_EQ(len, d.p2p_write_bytes + d.cache_write_bytes);
	for (cold = 0; cold < 2; cold++) {
		if (cold)
			ASSERT_EQ(0, drop_caches());
		EXPECT_EQ(-1, readback_diff(self, pos, len, seed))
			TH_LOG("%s", cold ? "cold" : "warm");
		EXPECT_EQ(-1, readback_diff(self, 0, pos, self->seed));
		EXPECT_EQ(-1, readback_diff(self, pos + len, MiB, self->seed));
	}
}

TEST_F_TIMEOUT(router, gpu_bvec_write, 180)
{
	struct gpu gpu;

	GPU_NEED();
	gpu_open(_metadata, &gpu);
	gpu_bvec_write_on(_metadata, self, &gpu);
	gpu_close(&gpu);
}

/*
 * A bio_vec whose segments are neither block sized nor block aligned
 * (1000 and 3096 bytes a page, at an odd offset into the buffer and the
 * file): nothing of it can be DMAed as it is, and every byte must still
 * be right, read and written.
 */
static void gpu_bvec_unaligned_on(struct __test_metadata *_metadata,
				  FIXTURE_DATA(router) *self, struct gpu *gpu)
{
	const uint64_t seed = self->seed ^ 0x5b1;
	const long long len = 2 * MiB + 333, pos = 5 * MiB + 7;
	struct router_stats before, d;
	int wfd;

	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len, gpu_rw(gpu, self->fd, TEST_P2PDMA_SPLIT, pos, len,
			      100));
	stats_delta(&before, &d);
	stats_log(_metadata, "split bio_vec read", &d);
	ASSERT_EQ(-1, pattern_diff(self, gpu->map + 100, len, pos));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_EQ(len, d.p2p_bytes + d.cache_bytes);

	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	pattern_fill(gpu->map + 100, len, pos, seed);
	ASSERT_EQ(len, gpu_rw(gpu, wfd, TEST_P2PDMA_WRITE | TEST_P2PDMA_SPLIT,
			      pos, len, 100));
	ASSERT_EQ(0, close(wfd));
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, readback_diff(self, pos, len, seed));
	EXPECT_EQ(-1, readback_diff(self, pos - 4 * KiB, 4 * KiB, self->seed));
}

TEST_F_TIMEOUT(router, gpu_bvec_unaligned, 180)
{
	struct gpu gpu;

	GPU_NEED();
	gpu_open(_metadata, &gpu);
	gpu_bvec_unaligned_on(_metadata, self, &gpu);
	gpu_close(&gpu);
}

/*
 * An in-kernel caller's asynchronous reads: a kiocb with a ->ki_complete of
 * the driver's, as a GPU driver's request path has.  Without IOCB_NOWAIT
 * the router serves it as a synchronous read, by DMA, and returns the
 * length, never calling ->ki_complete.  With IOCB_NOWAIT it gets what a
 * buffered read that may not wait gets into RAM: when nothing is cached,
 * -EAGAIN or what the read-ahead it starts has brought in by the time it
 * looks; the cached bytes when some are (at least the cached first half),
 * all of them when all are.  Nothing is
 * left in flight for it and nothing of io_uring's requeue is used
 * (async_reads, async_deferred and nowait_again stay 0), and ->ki_complete
 * is never called twice (the driver answers EPROTO).
 */
static void gpu_bvec_async_on(struct __test_metadata *_metadata,
			      FIXTURE_DATA(router) *self, struct gpu *gpu)
{
	const long long len = 4 * MiB, pos = 4 * MiB;
	struct router_stats before, d;
	struct iovec iov;
	long ret;
	int step;

	for (step = 0; step < 4; step++) {
		const unsigned int nowait = step ? TEST_P2PDMA_NOWAIT : 0;
		static const char * const what[] = {
			"cold", "cold, IOCB_NOWAIT", "half cached, IOCB_NOWAIT",
			"cached, IOCB_NOWAIT",
		};

		ASSERT_EQ(0, drop_caches());
		if (step == 2)
			ASSERT_EQ(0, make_resident(self, pos, len / 2));
		if (step == 3)
			ASSERT_EQ(0, make_resident(self, pos, len));
		stats_read(&before);
		ret = gpu_rw(gpu, self->fd, TEST_P2PDMA_ASYNC | nowait, pos,
			     len, 0);
		stats_delta(&before, &d);
		stats_log(_metadata, what[step], &d);
		EXPECT_EQ(0, d.async_reads + d.async_deferred + d.nowait_again);
		switch (step) {
		case 0:
			EXPECT_EQ(len, ret);
			EXPECT_LE(1, d.routed_reads);
			EXPECT_LT(0, d.p2p_bytes);
			break;
		case 1: {
			ssize_t n;

			/*
			 * What the read-ahead it starts has brought in by the
			 * time it looks, as for a read into RAM: usually
			 * nothing (EAGAIN), in the rig sometimes all of it.
			 */
			EXPECT_TRUE(ret == -EAGAIN || (ret > 0 && ret <= len))
				TH_LOG("%ld", ret);
			/* The same read into RAM, side by side. */
			ASSERT_EQ(0, drop_caches());
			iov.iov_base = self->ram;
			iov.iov_len = len;
			n = preadv2(self->fd, &iov, 1, pos, RWF_NOWAIT);
			TH_LOG("into device memory %ld, into RAM %zd (%s)",
			       ret, n, n < 0 ? strerror(errno) : "bytes");
			EXPECT_TRUE(n == len || (n < 0 && errno == EAGAIN) ||
				    (n > 0 && n < len));
			break;
		}
		case 2:
			EXPECT_LE(len / 2, ret);
			EXPECT_GE(len, ret);
			break;
		case 3:
			EXPECT_EQ(len, ret);
			break;
		}
		if (ret > 0) {
			EXPECT_EQ(-1, pattern_diff(self, gpu->map, ret, pos))
				TH_LOG("%s: wrong bytes", what[step]);
		}
	}
}

TEST_F_TIMEOUT(router, gpu_bvec_async, 180)
{
	struct gpu gpu;

	GPU_NEED();
	gpu_open(_metadata, &gpu);
	gpu_bvec_async_on(_metadata, self, &gpu);
	gpu_close(&gpu);
}

/*
 * A bio_vec of device memory, then RAM: the device half is routed, the RAM
 * half copied through the page cache, read and written, every byte right.
 */
static void gpu_bvec_ram_tail_on(struct __test_metadata *_metadata,
				 FIXTURE_DATA(router) *self, struct gpu *gpu)
{
	const uint64_t seed = self->seed ^ 0x7a1;
	const long long len = 4 * MiB, pos = 4 * MiB;
	struct router_stats before, d;
	int wfd;

	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len, gpu_rw(gpu, self->fd, TEST_P2PDMA_RAM_TAIL, pos, len,
			      0));
	stats_delta(&before, &d);
	stats_log(_metadata, "bio_vec read, device memory then RAM", &d);
	ASSERT_EQ(-1, pattern_diff(self, gpu->map, len, pos));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);
	/* Only the device memory half is the router's to count. */
	EXPECT_EQ(len / 2, d.p2p_bytes + d.cache_bytes);

	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	pattern_fill(gpu->map, len, pos, seed);
	stats_read(&before);
	ASSERT_EQ(len, gpu_rw(gpu, wfd,
			      TEST_P2PDMA_WRITE | TEST_P2PDMA_RAM_TAIL, pos,
			      len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "bio_vec write, device memory then RAM", &d);
	ASSERT_EQ(0, close(wfd));
	EXPECT_EQ(len / 2, d.p2p_write_bytes);
	EXPECT_EQ(len / 2, d.cache_write_bytes);
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, readback_diff(self, pos, len, seed));
}

TEST_F_TIMEOUT(router, gpu_bvec_ram_tail, 180)
{
	struct gpu gpu;

	GPU_NEED();
	gpu_open(_metadata, &gpu);
	gpu_bvec_ram_tail_on(_metadata, self, &gpu);
	gpu_close(&gpu);
}

/*
 * The driver's bio_vec read of a file opened O_DIRECT is O_DIRECT
 * (IOCB_DIRECT): not the router's, and the bytes are right.
 */
static void gpu_bvec_odirect_on(struct __test_metadata *_metadata,
				FIXTURE_DATA(router) *self, struct gpu *gpu)
{
	const long long len = 2 * MiB;
	struct router_stats before, d;
	int dfd;

	dfd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, dfd);
	stats_read(&before);
	ASSERT_EQ(len, gpu_rw(gpu, dfd, 0, MiB, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "bio_vec read, O_DIRECT", &d);
	close(dfd);
	ASSERT_EQ(-1, pattern_diff(self, gpu->map, len, MiB));
	EXPECT_EQ(0, d.routed_reads);
}

TEST_F_TIMEOUT(router, gpu_bvec_odirect, 180)
{
	struct gpu gpu;

	GPU_NEED();
	gpu_open(_metadata, &gpu);
	gpu_bvec_odirect_on(_metadata, self, &gpu);
	gpu_close(&gpu);
}

/* pread() and pwrite() into and from the driver's own mapping. */
static void gpu_mmap_rw_on(struct __test_metadata *_metadata,
			   FIXTURE_DATA(router) *self, struct gpu *gpu)
{
	const uint64_t seed = self->seed ^ 0x3a9;
	const long long len = 4 * MiB, pos = 8 * MiB;
	struct router_stats before, d;
	int wfd;

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(len, poisoned_pread(self, gpu->map, len, MiB));
	ASSERT_EQ(-1, pattern_diff(self, gpu->map, len, MiB));

	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len, poisoned_pread(self, gpu->map + len, len, MiB));
	stats_delta(&before, &d);
	stats_log(_metadata, "pread into the driver's mapping", &d);
	ASSERT_EQ(-1, pattern_diff(self, gpu->map + len, len, MiB));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);

	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	pattern_fill(gpu->map, len, pos, seed);
	stats_read(&before);
	ASSERT_EQ(len, pwrite(wfd, gpu->map, len, pos));
	stats_delta(&before, &d);
	stats_log(_metadata, "pwrite from the driver's mapping", &d);
	ASSERT_EQ(0, close(wfd));
	EXPECT_LT(0, d.p2p_write_bytes);
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, readback_diff(self, pos, len, seed));
}

TEST_F_TIMEOUT(router, gpu_mmap_rw, 180)
{
	struct gpu gpu;

	GPU_NEED();
	gpu_open(_metadata, &gpu);
	gpu_mmap_rw_on(_metadata, self, &gpu);
	gpu_close(&gpu);
}

/* The file as the fixture made it, after a case wrote other bytes. */
static void refill(struct __test_metadata *_metadata,
		   FIXTURE_DATA(router) *self)
{
	int wfd = open(self->path, O_RDWR);

	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, write_pattern(wfd, self->size, self->seed));
	ASSERT_EQ(0, fsync(wfd));
	ASSERT_EQ(0, close(wfd));
}

/*
 * Device memory as NVIDIA's UVM hands it out (TEST_P2PDMA_UVM): pages
 * chosen by PFN, not in the order of their addresses, from memory the
 * driver keeps out of the pool and frees to itself through its own
 * page_free, mapped with vm_insert_page().  pread() and pwrite() through
 * the mapping, io_uring reads into it and registered-buffer reads and
 * writes, and the driver's own bio_vec reads and writes: routed, and every
 * byte right.  No reference is left behind or put twice: when the buffer
 * goes, each page is freed to the driver once.
 */
TEST_F_TIMEOUT(router, gpu_uvm, 900)
{
	struct test_p2pdma_stats st0, st;
	unsigned char *dev = self->dev;
	struct gpu gpu;

	ASSERT_EQ(MAP_LEN, GPU_LEN);
	GPU_NEED();
	gpu_stats(_metadata, &st0);
	gpu_open_mode(_metadata, &gpu, TEST_P2PDMA_UVM);
	gpu_mmap_rw_on(_metadata, self, &gpu);
	refill(_metadata, self);
	gpu_bvec_read_on(_metadata, self, &gpu);
	gpu_bvec_write_on(_metadata, self, &gpu);
	refill(_metadata, self);
	self->dev = gpu.map;
	uring_reads_qd(_metadata, self, 8, IORING_OP_READ);
	uring_reads_qd(_metadata, self, 8, IORING_OP_READ_FIXED);
	uring_writes(_metadata, self, 8, IORING_OP_WRITE_FIXED);
	self->dev = dev;
	gpu_close(&gpu);
	gpu_stats(_metadata, &st);
	TH_LOG("the driver's pages: %llu freed, %llu stray frees, %llu in use",
	       (unsigned long long)(st.page_frees - st0.page_frees),
	       (unsigned long long)(st.stray - st0.stray),
	       (unsigned long long)st.used);
	EXPECT_EQ(GPU_LEN / PAGE, st.page_frees - st0.page_frees);
	EXPECT_EQ(0, st.stray - st0.stray);
	EXPECT_EQ(0, st.used);
}

/*
 * Device memory as AMD's KFD hands it to the VFS for AIS (TEST_P2PDMA_AIS):
 * a bio_vec of pages made from the driver's addresses, which hold no
 * reference at all; the driver's own object (the file) keeps the memory.
 * Every bio_vec path, read and written, aligned or not, synchronous and
 * asynchronous, with RAM after it, O_DIRECT: every byte right, and no
 * reference got and put on a page (a put would free it to the driver: a
 * stray free).  The CPU's copies into the pages go through
 * pci_p2pdma_memcpy() (a kprobe counts them).
 */
#define KP_COPY		"spin_p2pdma_copy"

TEST_F_TIMEOUT(router, gpu_ais, 900)
{
	struct test_p2pdma_stats st0, st;
	long long copies;
	struct gpu gpu;

	GPU_NEED();
	gpu_stats(_metadata, &st0);
	gpu_open_mode(_metadata, &gpu, TEST_P2PDMA_AIS);
	/* Every CPU copy into device memory goes through the one helper. */
	kprobe_set(KP_COPY, NULL);
	ASSERT_EQ(0, kprobe_set(KP_COPY, "pci_p2pdma_memcpy"));
	copies = kprobe_hits(KP_COPY);
	ASSERT_LE(0, copies);
	gpu_bvec_read_on(_metadata, self, &gpu);
	copies = kprobe_hits(KP_COPY) - copies;
	kprobe_set(KP_COPY, NULL);
	TH_LOG("pci_p2pdma_memcpy() called %lld times", copies);
	/* At least a call a page for the read that was all cached. */
	EXPECT_LE(READ_LEN / PAGE, copies);
	gpu_bvec_write_on(_metadata, self, &gpu);
	refill(_metadata, self);
	gpu_bvec_unaligned_on(_metadata, self, &gpu);
	refill(_metadata, self);
	gpu_bvec_async_on(_metadata, self, &gpu);
	gpu_bvec_ram_tail_on(_metadata, self, &gpu);
	refill(_metadata, self);
	gpu_bvec_odirect_on(_metadata, self, &gpu);
	gpu_stats(_metadata, &st);
	TH_LOG("the driver's pages: %llu stray frees, %llu in use",
	       (unsigned long long)(st.stray - st0.stray),
	       (unsigned long long)st.used);
	EXPECT_EQ(0, st.stray - st0.stray);
	EXPECT_EQ(GPU_LEN / PAGE, st.used);
	gpu_close(&gpu);
	gpu_stats(_metadata, &st);
	EXPECT_EQ(0, st.used);
	EXPECT_EQ(st0.page_frees, st.page_frees);
}

/*
 * Unbinding the driver takes its own memory back while files still hold a
 * UVM and an AIS buffer and this process maps them, with no I/O in flight:
 * at once (within 2 s), every page given back (TEST_P2PDMA_STATS on a file
 * still open).  The mapping then faults with SIGBUS instead of reaching
 * memory the driver no longer has, the files' I/O gets ENODEV, and the
 * device binds again.
 */
TEST_F_TIMEOUT(router, gpu_unbind_own_memory, 300)
{
	struct test_p2pdma_stats st;
	struct test_p2pdma_rw rw = { .fd = self->fd, .len = PAGE };
	struct gpu uvm, ais;
	char bdf[NAME_MAX + 1] = "", path[PATH_MAX];
	struct timespec t0, t1;
	struct dirent *de;
	double secs;
	int status;
	pid_t pid;
	DIR *dir;

	test_p2pdma_driver();
	dir = opendir(GPU_DRV);
	ASSERT_NE(NULL, dir) TH_LOG("no %s (CONFIG_TEST_P2PDMA)", GPU_DRV);
	while ((de = readdir(dir)))
		if (strchr(de->d_name, ':'))
			snprintf(bdf, sizeof(bdf), "%s", de->d_name);
	closedir(dir);
	SPIN_NEED(bdf[0], "the \"gpu\" memory (a device bound to test_p2pdma): none in %s",
		  GPU_DRV);

	gpu_open_mode(_metadata, &uvm, TEST_P2PDMA_UVM);
	gpu_open_mode(_metadata, &ais, TEST_P2PDMA_AIS);
	memset(uvm.map, 0x5a, GPU_LEN);		/* every page mapped */
	memset(ais.map, POISON, GPU_LEN);
	ASSERT_EQ(PAGE, ioctl(ais.fd, TEST_P2PDMA_RW, &rw));

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, sysfs_write(GPU_DRV "/unbind", bdf));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	ASSERT_EQ(0, ioctl(uvm.fd, TEST_P2PDMA_STATS, &st));
	TH_LOG("unbind took %.3f s; the driver's pages in use after: %llu",
	       secs, (unsigned long long)st.used);
	EXPECT_GT(2.0, secs);
	EXPECT_EQ(0, st.used);

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		((volatile unsigned char *)uvm.map)[0] = 1;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS)
		TH_LOG("a store into the mapping after unbinding: status %#x",
		       status);
	EXPECT_EQ(-1, ioctl(ais.fd, TEST_P2PDMA_RW, &rw));
	EXPECT_EQ(ENODEV, errno);

	gpu_close(&uvm);
	gpu_close(&ais);
	ASSERT_EQ(0, sysfs_write("/sys/bus/pci/drivers_probe", bdf));
	xsnprintf(path, sizeof(path), GPU_DRV "/%s", bdf);
	ASSERT_EQ(0, access(path, F_OK)) TH_LOG("%s did not bind again", bdf);
	ASSERT_EQ(0, access(GPU_DEV, F_OK));
}

/*
 * A process that has never mapped p2pmem/allocate maps the driver's pages:
 * vm_insert_page() marks its mm, and a pread() into the mapping is routed.
 * The same memory mapped VM_PFNMAP (remap_pfn_range(), no pages to pin) is
 * never routed: the read is copied, and right.  Runs in a child forked
 * before anything mapped device memory, on the raw first rig drive.
 */
TEST(gpu_mmap_marks_mm)
{
	const size_t len = 2 * MiB, size = 8 * MiB;
	const uint64_t seed = 0x9e11;
	struct router_stats before, d;
	struct router_knobs knobs;
	unsigned char *pfn, *ref;
	char ns[NAME_MAX + 1], path[PATH_MAX];
	struct gpu gpu;
	int fd;

	GPU_NEED();
	SPIN_NEED(!nvme_rig_ns(0, ns, sizeof(ns)), SPIN_RIG_DRIVE_FMT, 0, 1);
	snprintf(path, sizeof(path), "/dev/%s", ns);
	fd = open(path, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, size, seed));
	ASSERT_EQ(0, router_knobs_save(&knobs));
	ASSERT_EQ(0, router_knobs_default(0));
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	pattern_fill(ref, len, MiB, seed);

	gpu_open(_metadata, &gpu);
	ASSERT_EQ(0, drop_caches());
	memset(gpu.map, POISON, len);
	stats_read(&before);
	ASSERT_EQ((ssize_t)len, pread(fd, gpu.map, len, MiB));
	stats_delta(&before, &d);
	stats_log(_metadata, "pread into vm_insert_page() pages", &d);
	ASSERT_EQ(-1, first_diff(gpu.map, ref, len));
	EXPECT_LE(1, d.routed_reads);
	EXPECT_LT(0, d.p2p_bytes);

	pfn = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, gpu.fd,
		   TEST_P2PDMA_PFNMAP_OFFSET + len);
	ASSERT_NE(MAP_FAILED, pfn);
	ASSERT_EQ(0, drop_caches());
	memset(pfn, POISON, len);
	stats_read(&before);
	ASSERT_EQ((ssize_t)len, pread(fd, pfn, len, MiB));
	stats_delta(&before, &d);
	stats_log(_metadata, "pread into a VM_PFNMAP mapping", &d);
	ASSERT_EQ(-1, first_diff(pfn, ref, len));
	/* The driver's own mapping of the same pages sees the same bytes. */
	ASSERT_EQ(-1, first_diff(gpu.map + len, ref, len));
	EXPECT_EQ(0, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);
	EXPECT_LE(1, d.fallback_not_device_memory);
	munmap(pfn, len);
	gpu_close(&gpu);
	free(ref);
	close(fd);
	EXPECT_EQ(0, router_knobs_restore(&knobs));
}

TEST_HARNESS_MAIN
