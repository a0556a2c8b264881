// SPDX-License-Identifier: GPL-2.0
/*
 * P-readahead: small sequential buffered reads into device memory are
 * served through the page cache with read-ahead, one copy per request,
 * instead of one DMA per request.  The folios that read-ahead brings in
 * for them sit in a bounded "device partition" of the page cache, with
 * its own eviction (oldest first), and are the first to go when memory is
 * reclaimed.  A CPU reader (read() into RAM, an mmap fault) promotes a
 * partition page to an ordinary page-cache page.
 *
 * Tested on XFS and ext4, each with MGLRU and with the classic LRU: the
 * policy (sequential, small, not POSIX_FADV_RANDOM, knob on, router on),
 * the cap and its eviction order, promotion, reclaim taking partition
 * folios before normal ones (a memory cgroup's memory.reclaim),
 * POSIX_FADV_SEQUENTIAL and POSIX_FADV_NOREUSE, concurrent readers,
 * removal by hole punch, truncate, POSIX_FADV_DONTNEED and drop_caches,
 * a THP collapse (MADV_COLLAPSE) of partition pages, the knob's validation
 * and the tracepoint.
 *
 * Every read into device memory goes into memory poisoned with 0xa5 and
 * is checked byte for byte against the pattern the file was written with.
 * The counters in /sys/kernel/mm/p2p_router/stats/ say how the reads were
 * served; the tests assert on their deltas and on the partition gauge,
 * which are global, so they must run alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* fallocate(); lib.mk passes it too */
#endif
#include <pthread.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>

#include "spin_util.h"
#include "spin_router.h"
#include "../kselftest_harness.h"

#define P2P_RA_MBPS	P2P_ROUTER "/ra_mbps"
#define LRU_GEN		"/sys/kernel/mm/lru_gen/enabled"

/* What this test sets besides the router's defaults (spin_router.h): */
#define DEFAULT_RA_MBPS		"4000"	/* P-readahead as fast as a copy */
/* readahead_kb's default in the rig (RAM/1024, at least 4096 KiB). */
#define DEFAULT_RA_KB		4096
/* The drive's read-ahead window the policy is measured against. */
#define BDI_RA_KB		"128"

#define TRACE_EVENT_DIR	TRACEFS "/events/p2p_router/p2p_ra_partition"

#define CG_CHILD	CG_ROOT "/spin-readahead"

#define FILE_SIZE	(32 * MiB)
#define MAP_LEN		(16 * MiB)
#define DEV_WINDOW	(2 * MiB)	/* device memory one reader cycles through */
#define PAGE		(4 * KiB)
#define REQ		(16 * KiB)	/* the usual request */
#define SLACK_KB	512		/* what the partition may overshoot its cap by */
#define MNT		"/mnt/spin-readahead"

/* The counters the tests look at, in one struct, so that they can take deltas. */
struct ra_stats {
	long long routed_reads;
	long long p2p_segments;
	long long p2p_bytes;
	long long cache_bytes;
	long long holes_via_cache;
	long long fallback_disabled;
	long long ra_reads;
	long long ra_pages;
	long long ra_hits;
	long long ra_evicted;
	long long ra_promoted;
	long long ra_removed;
	long long ra_partition_pages;	/* a gauge: its delta is a change */
};

#define STAT_FILE(name) ROUTER_STAT_FILE(struct ra_stats, name)

static const struct router_stat_file stat_files[] = {
	STAT_FILE(routed_reads),
	STAT_FILE(p2p_segments),
	STAT_FILE(p2p_bytes),
	STAT_FILE(cache_bytes),
	STAT_FILE(holes_via_cache),
	STAT_FILE(fallback_disabled),
	STAT_FILE(ra_reads),
	STAT_FILE(ra_pages),
	STAT_FILE(ra_hits),
	STAT_FILE(ra_evicted),
	STAT_FILE(ra_promoted),
	STAT_FILE(ra_removed),
	STAT_FILE(ra_partition_pages),
};

static void stats_read(struct ra_stats *s)
{
	router_stats_read(stat_files, ARRAY_SIZE(stat_files), s);
}

/* Whether every counter could be read. */
static bool stats_readable(void)
{
	return router_stats_readable(stat_files, ARRAY_SIZE(stat_files));
}

/* What changed since @before. */
static void stats_delta(const struct ra_stats *before, struct ra_stats *delta)
{
	router_stats_delta(stat_files, ARRAY_SIZE(stat_files), before, delta);
}

/* The counters that moved, on one line: what a failing test needs to say. */
static void stats_log(struct __test_metadata *_metadata, const char *what,
		      const struct ra_stats *delta)
{
	char line[1024];

	TH_LOG("%s:%s", what, router_stats_moved(stat_files,
						 ARRAY_SIZE(stat_files), delta,
						 line, sizeof(line)));
}

/* Pages in the partition now (-1 if unreadable, as router_stat()). */
static long long partition_pages(void)
{
	return router_stat("ra_partition_pages");
}

/* The most pages the partition may hold with a cap of @kb KiB. */
static long long partition_limit(long long kb)
{
	return (kb + SLACK_KB) * KiB / PAGE;
}

static int set_ra_kb(long long kb)
{
	char val[32];

	snprintf(val, sizeof(val), "%lld", kb);
	return sysfs_write(P2P_RA_KB, val);
}

/* The tunables, as read from sysfs, to put back what a test changed. */
struct ra_knobs {
	struct router_knobs router;
	char ra_mbps[32];
	char bdi_ra_kb[32];
	char lru_gen[32];	/* empty without CONFIG_LRU_GEN */
};

static int knobs_save(struct ra_knobs *k, const char *bdi_ra)
{
	if (router_knobs_save(&k->router) ||
	    sysfs_read(P2P_RA_MBPS, k->ra_mbps, sizeof(k->ra_mbps)) ||
	    sysfs_read(bdi_ra, k->bdi_ra_kb, sizeof(k->bdi_ra_kb)))
		return -1;
	k->lru_gen[0] = '\0';
	if (!access(LRU_GEN, F_OK) &&
	    sysfs_read(LRU_GEN, k->lru_gen, sizeof(k->lru_gen)))
		return -1;
	return 0;
}

/* Everything is put back, even when one write fails. */
static int knobs_restore(const struct ra_knobs *k, const char *bdi_ra)
{
	int ret = 0;

	/* ra_mbps first: router_knobs_restore() puts "enabled" back last. */
	ret |= sysfs_write(P2P_RA_MBPS, k->ra_mbps);
	ret |= router_knobs_restore(&k->router);
	ret |= sysfs_write(bdi_ra, k->bdi_ra_kb);
	if (k->lru_gen[0])
		ret |= sysfs_write(LRU_GEN, k->lru_gen);
	return ret ? -1 : 0;
}

/* Whether MGLRU is on: lru_gen/enabled reads as a mask, 0x0000 when off. */
static bool mglru_on(void)
{
	long long mask;

	return !sysfs_read_ll(LRU_GEN, &mask) && mask > 0;
}

/*
 * The state the expectations assume: the router on with its documented
 * cost model, the default partition, a 128 KiB read-ahead window, and the
 * variant's LRU.
 */
static int knobs_set(bool mglru, const char *bdi_ra)
{
	if (sysfs_write(P2P_RA_MBPS, DEFAULT_RA_MBPS) ||
	    router_knobs_default(DEFAULT_RA_KB) ||
	    sysfs_write(bdi_ra, BDI_RA_KB))
		return -1;
	if (access(LRU_GEN, F_OK))
		return mglru ? -1 : 0;	/* the classic LRU is all there is */
	if (sysfs_write(LRU_GEN, mglru ? "y" : "n"))
		return -1;
	return mglru_on() == mglru ? 0 : -1;
}

/* A leftover of an earlier test that crashed before its teardown. */
static void readahead_cleanup(void)
{
	umount2(MNT, MNT_DETACH);
}

FIXTURE(readahead) {
	char ns[NAME_MAX + 1];		/* the rig drive used */
	char provider[SYSFS_LEN];	/* device memory it can reach */
	char bdi_ra[PATH_MAX];		/* the drive's queue/read_ahead_kb */
	char path[PATH_MAX];		/* the FILE_SIZE file most tests read */
	int fd;				/* buffered: the reads under test */
	int ref_fd;			/* POSIX_FADV_RANDOM: reads into RAM */
	uint64_t seed;
	unsigned char *dev;		/* MAP_LEN of device memory */
	unsigned char *ref;		/* MAP_LEN: the expected bytes */
	unsigned char *ram;		/* MAP_LEN: scratch RAM for reads */
	bool mounted;
	bool knobs_saved;
	struct ra_knobs knobs;
	/* partition_before_normal: what to undo of the cgroup setup */
	bool cg_mounted;
	bool cg_enabled;
	bool cg_made;
	bool cg_moved;
	/* global_pressure: its children, killed in the teardown */
	pid_t kids[2];
};

FIXTURE_VARIANT(readahead) {
	const char *fs;
	int nvme;	/* rig drive */
	bool mglru;	/* MGLRU on, or the classic LRU */
};

FIXTURE_VARIANT_ADD(readahead, xfs_mglru) {
	.fs = "xfs", .nvme = 1, .mglru = true,
};

FIXTURE_VARIANT_ADD(readahead, xfs_classic) {
	.fs = "xfs", .nvme = 1, .mglru = false,
};

FIXTURE_VARIANT_ADD(readahead, ext4_mglru) {
	.fs = "ext4", .nvme = 2, .mglru = true,
};

FIXTURE_VARIANT_ADD(readahead, ext4_classic) {
	.fs = "ext4", .nvme = 2, .mglru = false,
};

FIXTURE_SETUP(readahead)
{
	int wfd, ret;

	self->fd = -1;
	self->ref_fd = -1;
	/* Kernel features the rig's config turns on: missing is a failure. */
	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	ASSERT_EQ(0, access(P2P_RA_KB, F_OK))
		TH_LOG("no P2P read-ahead in this kernel (%s)", P2P_RA_KB);
	ASSERT_TRUE(stats_readable())
		TH_LOG("a P2P read-ahead counter is missing in " P2P_STATS);
	if (variant->mglru) {
		ASSERT_EQ(0, access(LRU_GEN, F_OK))
			TH_LOG("no MGLRU in this kernel (%s)", LRU_GEN);
	}
	SPIN_NEED(!nvme_rig_ns(variant->nvme, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, variant->nvme, variant->nvme + 1);
	SPIN_NEED(!p2pmem_find_for_ns(self->ns, true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns);
	snprintf(self->bdi_ra, sizeof(self->bdi_ra),
		 "/sys/block/%s/queue/read_ahead_kb", self->ns);
	ASSERT_EQ(0, access(self->bdi_ra, F_OK));
	self->seed = getpid() ^ (uint64_t)variant->nvme << 32 ^
		     (uint64_t)variant->mglru << 40;
	readahead_cleanup();

	ASSERT_EQ(0, mkfs_mount(variant->fs, self->ns, MNT));
	self->mounted = true;
	snprintf(self->path, sizeof(self->path), MNT "/data");
	wfd = open(self->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, write_pattern(wfd, FILE_SIZE, self->seed));
	close(wfd);

	self->ref = malloc(MAP_LEN);
	self->ram = malloc(MAP_LEN);
	ASSERT_NE(NULL, self->ref);
	ASSERT_NE(NULL, self->ram);
	/* Mapping p2pmem is what makes this process's reads candidates. */
	self->dev = p2pmem_map(self->provider, MAP_LEN);
	ASSERT_NE(NULL, self->dev);

	/*
	 * Last, and undone right here if it fails: the harness runs the
	 * teardown only after a setup that completed.  The files are opened
	 * after the window is set: a file takes its window when opened.
	 */
	ASSERT_EQ(0, knobs_save(&self->knobs, self->bdi_ra));
	self->knobs_saved = true;
	ret = knobs_set(variant->mglru, self->bdi_ra);
	if (!ret)
		ret = drop_caches();
	if (!ret) {
		self->fd = open(self->path, O_RDONLY);
		self->ref_fd = open(self->path, O_RDONLY);
		/* A read into RAM brings in what it reads and no more. */
		if (self->fd < 0 || self->ref_fd < 0 ||
		    posix_fadvise(self->ref_fd, 0, 0, POSIX_FADV_RANDOM))
			ret = -1;
	}
	if (ret)
		knobs_restore(&self->knobs, self->bdi_ra);
	ASSERT_EQ(0, ret);
	TH_LOG("%s on %s (%s), provider %s, lru_gen %s, seed %llu",
	       self->path, self->ns, variant->fs, self->provider,
	       self->knobs.lru_gen[0] ? (mglru_on() ? "on" : "off") : "absent",
	       (unsigned long long)self->seed);
}

/* @word as a whole word of the blank-separated list @list. */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	const char *p;

	for (p = strstr(list, word); p; p = strstr(p + 1, word))
		if ((p == list || p[-1] == ' ') && (!p[n] || p[n] == ' ' ||
						    p[n] == '\n'))
			return true;
	return false;
}

static int cgroup_add_self(const char *cg)
{
	char path[PATH_MAX], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return sysfs_write(path, pid);
}

/* Undo what partition_before_normal did, in reverse. */
static void cgroup_restore(FIXTURE_DATA(readahead) *self)
{
	if (self->cg_moved && !cgroup_add_self(CG_ROOT))
		self->cg_moved = false;
	if (self->cg_made && !self->cg_moved && !rmdir(CG_CHILD))
		self->cg_made = false;
	if (self->cg_enabled && !self->cg_made)
		sysfs_write(CG_ROOT "/cgroup.subtree_control", "-memory");
	if (self->cg_mounted && !self->cg_made)
		umount2(CG_ROOT, MNT_DETACH);
	self->cg_enabled = false;
	self->cg_mounted = false;
}

FIXTURE_TEARDOWN(readahead)
{
	int i;

	/* Before the unmount: the streamer has a file open there. */
	for (i = 0; i < 2; i++) {
		if (self->kids[i] > 0) {
			kill(self->kids[i], SIGKILL);
			waitpid(self->kids[i], NULL, 0);
		}
	}
	cgroup_restore(self);
	if (self->knobs_saved)
		EXPECT_EQ(0, knobs_restore(&self->knobs, self->bdi_ra));
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
}

/* A second file under test: @size bytes of pattern(@seed), not cached. */
static int make_file(const char *name, size_t size, uint64_t seed,
		     char *path, size_t len)
{
	snprintf(path, len, MNT "/%s", name);
	return write_pattern_file(path, size, seed);
}

/*
 * One sequential reader: [@off, @off + @len) of @fd in requests of @req
 * bytes, one after the other, into device memory.  Request i lands at its
 * file offset modulo DEV_WINDOW in @dev, poisoned first, and is checked
 * against pattern(@seed) before the next.  No harness calls: it also runs
 * in threads.
 */
struct seq_reader {
	int fd;
	unsigned char *dev;	/* DEV_WINDOW of device memory */
	unsigned char *scratch;	/* @req bytes of RAM */
	off_t off;
	size_t len;
	size_t req;
	uint64_t seed;
	bool sample;		/* read the gauge after every request */
	/* out */
	long requests;		/* done and right */
	long long max_part;	/* highest gauge seen, when sampling */
	off_t bad_off;		/* the request that went wrong */
	ssize_t bad_n;		/* what it returned */
	int bad_errno;		/* and errno then */
	long bad_byte;		/* its first wrong byte, or -1 */
};

static int seq_reader_run(struct seq_reader *r)
{
	off_t pos;

	r->requests = 0;
	r->max_part = 0;
	r->bad_byte = -1;
	for (pos = r->off; pos < (off_t)(r->off + r->len); pos += r->req) {
		unsigned char *buf = r->dev + pos % DEV_WINDOW;
		size_t n = r->req;

		if (pos + n > r->off + r->len)
			n = r->off + r->len - pos;
		memset(buf, POISON, n);
		r->bad_n = pread(r->fd, buf, n, pos);
		if (r->bad_n != (ssize_t)n) {
			r->bad_errno = errno;
			r->bad_off = pos;
			return -1;
		}
		pattern_fill(r->scratch, n, pos, r->seed);
		r->bad_byte = first_diff(buf, r->scratch, n);
		if (r->bad_byte >= 0) {
			r->bad_off = pos;
			return -1;
		}
		if (r->sample) {
			long long part = partition_pages();

			if (part > r->max_part)
				r->max_part = part;
		}
		r->requests++;
	}
	return 0;
}

static void seq_reader_log(struct __test_metadata *_metadata,
			   const struct seq_reader *r)
{
	if (r->bad_byte >= 0)
		TH_LOG("request of %zu at %lld: byte %ld wrong (0x%02x)",
		       r->req, (long long)r->bad_off, r->bad_byte,
		       r->dev[r->bad_off % DEV_WINDOW + r->bad_byte]);
	else
		TH_LOG("request of %zu at %lld returned %zd (%s)", r->req,
		       (long long)r->bad_off, r->bad_n,
		       r->bad_n < 0 ? strerror(r->bad_errno) : "short");
}

/*
 * Read sequentially in the test's own thread, into the fixture's device
 * memory; see struct seq_reader.  Returns the number of requests, or -1
 * after logging what went wrong.  @max_part, if not NULL, gets the highest
 * partition gauge seen after a request.
 */
static long seq_read(struct __test_metadata *_metadata,
		     FIXTURE_DATA(readahead) *self, int fd, off_t off,
		     size_t len, size_t req, uint64_t seed, long long *max_part)
{
	struct seq_reader r = {
		.fd = fd, .dev = self->dev, .scratch = self->ref,
		.off = off, .len = len, .req = req, .seed = seed,
		.sample = !!max_part,
	};

	if (seq_reader_run(&r)) {
		seq_reader_log(_metadata, &r);
		return -1;
	}
	if (max_part)
		*max_part = r.max_part;
	return r.requests;
}

/* Read into RAM through the file's ref_fd and check against the pattern. */
static long ram_diff(FIXTURE_DATA(readahead) *self, int fd, off_t off,
		     size_t len, uint64_t seed)
{
	memset(self->ram, POISON, len);
	if (pread(fd, self->ram, len, off) != (ssize_t)len)
		return -2;
	pattern_fill(self->ref, len, off, seed);
	return first_diff(self->ram, self->ref, len);
}

/*
 * The promise: small sequential reads are served from read-ahead, so the
 * drive sees a few large reads instead of one DMA per request.
 */
TEST_F_TIMEOUT(readahead, seq_small_reads, 300)
{
	static const size_t sizes[] = { 4 * KiB, 16 * KiB, 64 * KiB };
	long long len = 8 * MiB;
	struct ra_stats before, d;
	unsigned int i;
	char what[64];
	long reqs;
	int fd;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		fd = open(self->path, O_RDONLY);
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, drop_caches());
		stats_read(&before);
		reqs = seq_read(_metadata, self, fd, 0, len, sizes[i],
				self->seed, NULL);
		stats_delta(&before, &d);
		close(fd);
		snprintf(what, sizeof(what), "8 MiB in %zu KiB reads",
			 sizes[i] / KiB);
		stats_log(_metadata, what, &d);
		ASSERT_EQ(len / (long long)sizes[i], reqs);
		EXPECT_LE(reqs * 9 / 10, d.ra_reads);
		EXPECT_LT(0, d.ra_pages);
		EXPECT_LT(0, d.ra_hits);
		EXPECT_LE(len / PAGE * 9 / 10, d.ra_hits);
		EXPECT_GT(len / 10, d.p2p_bytes);
	}
}

/*
 * The partition never holds much more than its cap, whatever is read: the
 * oldest pages go.  A bad value for the knob changes nothing; a good one
 * empties the partition.
 */
TEST_F_TIMEOUT(readahead, cap_respected, 300)
{
	const long long cap_kb = 1024, len = FILE_SIZE;
	struct ra_stats before, d;
	long long max_part, part;
	long reqs, resident;

	ASSERT_EQ(0, set_ra_kb(cap_kb));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	reqs = seq_read(_metadata, self, self->fd, 0, len, REQ, self->seed,
			&max_part);
	stats_delta(&before, &d);
	stats_log(_metadata, "32 MiB in 16 KiB reads, cap 1 MiB", &d);
	ASSERT_EQ(len / REQ, reqs);
	resident = resident_pages(self->ref_fd, 0, len);
	TH_LOG("at most %lld pages in the partition, %ld of the file cached at the end",
	       max_part, resident);
	EXPECT_LE(reqs * 9 / 10, d.ra_reads);
	EXPECT_GE(partition_limit(cap_kb), max_part);
	ASSERT_LE(0, resident);
	EXPECT_GE(partition_limit(cap_kb), resident);
	EXPECT_LT(0, d.ra_evicted);

	part = partition_pages();
	EXPECT_LT(0, part);
	EXPECT_EQ(-EINVAL, sysfs_write(P2P_RA_KB, "abc"));
	EXPECT_EQ(part, partition_pages());
	ASSERT_EQ(0, set_ra_kb(cap_kb));
	EXPECT_EQ(0, partition_pages());
	EXPECT_EQ(0, resident_pages(self->ref_fd, 0, len));
}

/* Two files read one after the other: the first file's pages go first. */
TEST_F_TIMEOUT(readahead, oldest_first, 300)
{
	const long long cap_kb = 1024, len = 4 * MiB;
	uint64_t seed_b = self->seed ^ 0xb0b0;
	long resident_a, head_b, tail_b;
	struct ra_stats before, d;
	char path_b[PATH_MAX];
	int fd_b;

	ASSERT_EQ(0, make_file("b", len, seed_b, path_b, sizeof(path_b)));
	fd_b = open(path_b, O_RDONLY);
	ASSERT_LE(0, fd_b);
	ASSERT_EQ(0, set_ra_kb(cap_kb));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, self->fd, 0, len, REQ,
				      self->seed, NULL));
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, fd_b, 0, len, REQ,
				      seed_b, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "4 MiB of A, then 4 MiB of B, cap 1 MiB", &d);

	resident_a = resident_pages(self->ref_fd, 0, len);
	head_b = resident_pages(fd_b, 0, 1 * MiB);
	tail_b = resident_pages(fd_b, len - 512 * KiB, 512 * KiB);
	close(fd_b);
	ASSERT_LE(0, resident_a);
	ASSERT_LE(0, head_b);
	ASSERT_LE(0, tail_b);
	TH_LOG("cached: A %ld of %lld pages, B's first MiB %ld, B's last 512 KiB %ld of %lu",
	       resident_a, len / PAGE, head_b, tail_b, 512 * KiB / PAGE);
	EXPECT_LT(0, d.ra_evicted);
	EXPECT_GE(len / PAGE / 100, resident_a);
	EXPECT_EQ(0, head_b);
	EXPECT_LE(512 * KiB / PAGE * 9 / 10, tail_b);
}

/*
 * Reclaim takes partition folios whose data the device has before any
 * normal page-cache page, even one that was read just once before them.
 * The reclaim is a memory cgroup's memory.reclaim, which the test process
 * (and so every page it reads in) is moved into.
 */
TEST_F_TIMEOUT(readahead, partition_before_normal, 300)
{
	const long long len = 4 * MiB, pages = len / PAGE;
	long long part1, part2, res_n1, res_n2, res_p1, res_p2;
	uint64_t seed_n = self->seed ^ 0x4e4e;
	struct ra_stats before, d;
	char path_n[PATH_MAX], buf[256];
	int fd_n, ret, i;

	if (access(CG_ROOT "/cgroup.controllers", F_OK)) {
		ASSERT_EQ(0, mount("cgroup2", CG_ROOT, "cgroup2", 0, NULL))
			TH_LOG("cannot mount cgroup2 at " CG_ROOT ": %s",
			       strerror(errno));
		self->cg_mounted = true;
	}
	ASSERT_EQ(0, sysfs_read(CG_ROOT "/cgroup.controllers", buf,
				sizeof(buf)));
	ASSERT_TRUE(has_word(buf, "memory"))
		TH_LOG("no memory controller in cgroup2 (CONFIG_MEMCG): \"%s\"",
		       buf);
	ASSERT_EQ(0, sysfs_read(CG_ROOT "/cgroup.subtree_control", buf,
				sizeof(buf)));
	if (!has_word(buf, "memory")) {
		ASSERT_EQ(0, sysfs_write(CG_ROOT "/cgroup.subtree_control",
					 "+memory"));
		self->cg_enabled = true;
	}
	ASSERT_TRUE(!mkdir(CG_CHILD, 0755) || errno == EEXIST);
	self->cg_made = true;
	ASSERT_EQ(0, access(CG_CHILD "/memory.reclaim", F_OK))
		TH_LOG("no memory.reclaim in " CG_CHILD);

	ASSERT_EQ(0, make_file("normal", len, seed_n, path_n, sizeof(path_n)));
	fd_n = open(path_n, O_RDONLY);
	ASSERT_LE(0, fd_n);
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, cgroup_add_self(CG_CHILD));
	self->cg_moved = true;
	ASSERT_EQ(0, set_ra_kb(DEFAULT_RA_KB));

	/* N: read into RAM twice, so that it is referenced. */
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(-1, ram_diff(self, fd_n, 0, len, seed_n));
	}
	/* P: read into device memory, into the partition. */
	stats_read(&before);
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, self->fd, 0, len, REQ,
				      self->seed, NULL));
	part1 = partition_pages();
	res_n1 = resident_pages(fd_n, 0, len);
	res_p1 = resident_pages(self->ref_fd, 0, FILE_SIZE);
	TH_LOG("before reclaim: N %lld of %lld pages cached, P %lld, partition %lld",
	       res_n1, pages, res_p1, part1);
	ASSERT_LT(0, part1);
	ASSERT_LT(0, res_p1);
	ASSERT_EQ(pages, res_n1);

	ret = sysfs_write(CG_CHILD "/memory.reclaim", "2M");
	TH_LOG("memory.reclaim 2M: %s", ret ? strerror(-ret) : "done");
	ASSERT_TRUE(!ret || ret == -EAGAIN);
	stats_delta(&before, &d);
	part2 = partition_pages();
	res_n2 = resident_pages(fd_n, 0, len);
	res_p2 = resident_pages(self->ref_fd, 0, FILE_SIZE);
	close(fd_n);
	stats_log(_metadata, "P read, then 2M reclaimed", &d);
	TH_LOG("after reclaim: N %lld of %lld pages cached, P %lld, partition %lld",
	       res_n2, pages, res_p2, part2);
	EXPECT_LE(pages * 95 / 100, res_n2);
	EXPECT_GT(part1, part2);
	EXPECT_GT(res_p1, res_p2);
	EXPECT_LT(0, d.ra_removed);
}

/*
 * A CPU reader makes a partition folio an ordinary page-cache folio: read()
 * into RAM, or a fault on a mapping of the file.  The cap never evicts it
 * afterwards.  Read-ahead's folios may be large (XFS), so a page read by
 * the CPU promotes its whole folio: ra_promoted says how many pages.
 */
TEST_F_TIMEOUT(readahead, cpu_read_promotes, 300)
{
	const off_t by_read = 64 * KiB, by_fault = 256 * KiB;
	const long long cap_kb = 1024, first = 512 * KiB;
	struct ra_stats before, d;
	long long part, promoted;
	unsigned char *map;
	long resident;

	ASSERT_EQ(0, set_ra_kb(cap_kb));
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(first / REQ, seq_read(_metadata, self, self->fd, 0, first,
					REQ, self->seed, NULL));
	ASSERT_EQ(1, resident_pages(self->ref_fd, by_read, PAGE));
	ASSERT_EQ(1, resident_pages(self->ref_fd, by_fault, PAGE));

	part = partition_pages();
	stats_read(&before);
	EXPECT_EQ(-1, ram_diff(self, self->ref_fd, by_read, PAGE, self->seed));
	stats_delta(&before, &d);
	stats_log(_metadata, "4 KiB at 64 KiB read into RAM", &d);
	EXPECT_LE(1, d.ra_promoted);
	EXPECT_GE(part - d.ra_promoted, partition_pages());
	promoted = d.ra_promoted;

	/*
	 * A one-page mapping: fault-around then maps no neighbour, so only
	 * that page is touched.
	 */
	part = partition_pages();
	stats_read(&before);
	map = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, self->ref_fd, by_fault);
	ASSERT_NE(MAP_FAILED, map);
	memcpy(self->ram, map, PAGE);
	munmap(map, PAGE);
	stats_delta(&before, &d);
	stats_log(_metadata, "4 KiB at 256 KiB faulted in", &d);
	pattern_fill(self->ref, PAGE, by_fault, self->seed);
	EXPECT_EQ(-1, first_diff(self->ram, self->ref, PAGE));
	EXPECT_LE(1, d.ra_promoted);
	EXPECT_GE(part - d.ra_promoted, partition_pages());
	promoted += d.ra_promoted;

	/* Enough more to evict the rest of the first 512 KiB many times. */
	stats_read(&before);
	ASSERT_EQ(8 * MiB / REQ, seq_read(_metadata, self, self->fd, first,
					  8 * MiB, REQ, self->seed, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "8 MiB more, cap 1 MiB", &d);
	EXPECT_LT(0, d.ra_evicted);
	EXPECT_EQ(1, resident_pages(self->ref_fd, by_read, PAGE));
	EXPECT_EQ(1, resident_pages(self->ref_fd, by_fault, PAGE));
	/*
	 * What stays of the first 512 KiB is the two promoted folios, and at
	 * most what the partition found in use and promoted meanwhile (any
	 * of the 8 MiB, so only an upper bound).
	 */
	resident = resident_pages(self->ref_fd, 0, first);
	TH_LOG("first 512 KiB: %ld pages cached, %lld promoted by the CPU, %lld more since",
	       resident, promoted, d.ra_promoted);
	EXPECT_LE(promoted, resident);
	EXPECT_GE(promoted + d.ra_promoted, resident);
}

/* Random small reads are not read ahead: each is one DMA, as before. */
TEST_F_TIMEOUT(readahead, random_no_readahead, 300)
{
	const long long pages = FILE_SIZE / PAGE, reads = 256;
	uint64_t rnd = 0x5eed2025c0ffeeULL;
	off_t off, prev_end = -1;
	struct ra_stats before, d;
	unsigned char *buf;
	long long i;

	TH_LOG("seed 0x%llx", (unsigned long long)rnd);
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	for (i = 0; i < reads; i++) {
		/*
		 * Never in the first pages, never within two pages of where
		 * the previous read ended: none of them looks sequential.
		 */
		do {
			off = (4 + xorshift64(&rnd) % (pages - 4)) * PAGE;
		} while (prev_end >= 0 && off >= prev_end - 2 * (off_t)PAGE &&
			 off <= prev_end + 2 * (off_t)PAGE);
		buf = self->dev + i % (DEV_WINDOW / PAGE) * PAGE;
		memset(buf, POISON, PAGE);
		ASSERT_EQ(PAGE, pread(self->fd, buf, PAGE, off));
		pattern_fill(self->ref, PAGE, off, self->seed);
		ASSERT_EQ(-1, first_diff(buf, self->ref, PAGE))
			TH_LOG("read %lld at %lld", i, (long long)off);
		prev_end = off + PAGE;
	}
	stats_delta(&before, &d);
	stats_log(_metadata, "256 random 4 KiB reads", &d);
	EXPECT_EQ(0, d.ra_reads);
	EXPECT_EQ(0, d.ra_pages);
	EXPECT_LE(200, d.p2p_segments);
}

/*
 * Requests larger than the file's read-ahead window (128 KiB) are DMAed
 * even when sequential.
 */
TEST_F_TIMEOUT(readahead, large_requests_dma, 300)
{
	const long long len = 4 * MiB, req = 256 * KiB;
	struct ra_stats before, d;

	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len / req, seq_read(_metadata, self, self->fd, 0, len, req,
				      self->seed, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "4 MiB in 256 KiB reads", &d);
	EXPECT_EQ(0, d.ra_reads);
	EXPECT_EQ(0, d.ra_pages);
	EXPECT_LE(len / 10 * 9, d.p2p_bytes);
}

/*
 * posix_fadvise(): RANDOM turns read-ahead off for the file, SEQUENTIAL
 * doubles its window (so 256 KiB requests qualify), NOREUSE drops each
 * folio from the page cache once its data is in device memory.
 */
TEST_F_TIMEOUT(readahead, fadvise, 300)
{
	const long long len = 2 * MiB, big = 256 * KiB;
	struct ra_stats before, d;
	long long reqs;
	long resident;
	int fd;

	/* RANDOM: every request is DMAed. */
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, fd, 0, len, REQ,
				      self->seed, NULL));
	stats_delta(&before, &d);
	close(fd);
	stats_log(_metadata, "RANDOM: 2 MiB in 16 KiB reads", &d);
	EXPECT_EQ(0, d.ra_reads);
	EXPECT_EQ(0, d.ra_pages);
	EXPECT_LE(len / 10 * 9, d.p2p_bytes);

	/* SEQUENTIAL: 16 KiB requests, then 256 KiB ones, all read ahead. */
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	reqs = seq_read(_metadata, self, fd, 0, len, REQ, self->seed, NULL);
	ASSERT_EQ(len / REQ, reqs);
	ASSERT_EQ(len / big, seq_read(_metadata, self, fd, len, len, big,
				      self->seed, NULL));
	reqs += len / big;
	stats_delta(&before, &d);
	close(fd);
	stats_log(_metadata, "SEQUENTIAL: 2 MiB in 16 KiB, 2 MiB in 256 KiB reads",
		  &d);
	EXPECT_LE(reqs * 9 / 10, d.ra_reads);
	EXPECT_LT(0, d.ra_pages);
	EXPECT_GT(2 * len / 10, d.p2p_bytes);

	/* NOREUSE: what was copied is gone from the page cache. */
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, posix_fadvise(fd, 0, 0, POSIX_FADV_NOREUSE));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(2 * len / REQ, seq_read(_metadata, self, fd, 0, 2 * len,
					  REQ, self->seed, NULL));
	stats_delta(&before, &d);
	resident = resident_pages(self->ref_fd, 0, 2 * len);
	close(fd);
	stats_log(_metadata, "NOREUSE: 4 MiB in 16 KiB reads", &d);
	TH_LOG("NOREUSE: %ld of %lld pages read still cached", resident,
	       2 * len / PAGE);
	EXPECT_LE(2 * len / REQ * 9 / 10, d.ra_reads);
	EXPECT_LT(0, d.ra_hits);
	ASSERT_LE(0, resident);
	EXPECT_GT(2 * len / PAGE / 10, resident);
}

#define OWN_READERS	4
#define SHARED_READERS	2
#define READERS		(OWN_READERS + SHARED_READERS)

struct reader_thread {
	pthread_t thread;
	struct seq_reader r;
	int ret;
};

static int readers_running;

static void *reader_main(void *arg)
{
	struct reader_thread *t = arg;

	t->ret = seq_reader_run(&t->r);
	__atomic_sub_fetch(&readers_running, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/*
 * Six readers at once: four on files of their own, two on one file through
 * their own file descriptors.  Every read is right, and the partition
 * stays within its cap.
 */
TEST_F_TIMEOUT(readahead, many_readers, 300)
{
	const long long len = 8 * MiB, limit = partition_limit(DEFAULT_RA_KB);
	struct reader_thread t[READERS];
	long long max_part = 0, part, reqs = 0;
	char path[PATH_MAX], name[16];
	struct ra_stats before, d;
	int i, started;

	ASSERT_LE(READERS * DEV_WINDOW, MAP_LEN);
	memset(t, 0, sizeof(t));
	for (i = 0; i < READERS; i++) {
		uint64_t seed = self->seed;

		if (i < OWN_READERS) {
			seed ^= 0x1000 + i;
			snprintf(name, sizeof(name), "r%d", i);
			ASSERT_EQ(0, make_file(name, len, seed, path,
					       sizeof(path)));
		} else {
			snprintf(path, sizeof(path), "%s", self->path);
		}
		t[i].r.fd = open(path, O_RDONLY);
		ASSERT_LE(0, t[i].r.fd);
		t[i].r.dev = self->dev + i * DEV_WINDOW;
		t[i].r.scratch = self->ram + i * REQ;
		t[i].r.off = 0;
		t[i].r.len = len;
		t[i].r.req = REQ;
		t[i].r.seed = seed;
	}
	ASSERT_EQ(0, set_ra_kb(DEFAULT_RA_KB));
	ASSERT_EQ(0, drop_caches());

	stats_read(&before);
	readers_running = READERS;
	for (started = 0; started < READERS; started++)
		if (pthread_create(&t[started].thread, NULL, reader_main,
				   &t[started]))
			break;
	if (started < READERS)
		__atomic_sub_fetch(&readers_running, READERS - started,
				   __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&readers_running, __ATOMIC_SEQ_CST)) {
		part = partition_pages();
		if (part > max_part)
			max_part = part;
		usleep(1000);
	}
	for (i = 0; i < started; i++)
		pthread_join(t[i].thread, NULL);
	stats_delta(&before, &d);
	part = partition_pages();
	stats_log(_metadata, "6 readers, 8 MiB each in 16 KiB reads", &d);
	TH_LOG("partition: at most %lld pages seen, %lld at the end, limit %lld",
	       max_part, part, limit);

	ASSERT_EQ(READERS, started);
	for (i = 0; i < READERS; i++) {
		close(t[i].r.fd);
		if (t[i].ret) {
			TH_LOG("reader %d (%s file)", i,
			       i < OWN_READERS ? "own" : "shared");
			seq_reader_log(_metadata, &t[i].r);
		}
		EXPECT_EQ(0, t[i].ret);
		reqs += t[i].r.requests;
	}
	ASSERT_EQ(READERS * len / REQ, reqs);
	EXPECT_LE(reqs * 9 / 10, d.ra_reads);
	EXPECT_GE(limit, max_part);
	EXPECT_GE(limit, part);
}

/*
 * Hole punch and truncate take partition pages out of the page cache:
 * counted as removed, and the gauge follows.  The punched range reads as
 * zeros.
 */
TEST_F_TIMEOUT(readahead, truncate_drops, 300)
{
	const off_t punch = 512 * KiB, punch_len = 512 * KiB;
	const long long len = 2 * MiB;
	long long part0, part1, in_hole;
	struct ra_stats before, d;
	int wfd;

	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, self->fd, 0, len, REQ,
				      self->seed, NULL));

	part0 = partition_pages();
	in_hole = resident_pages(self->ref_fd, punch, punch_len);
	TH_LOG("partition %lld pages, %lld of them in the hole", part0,
	       in_hole);
	ASSERT_LT(0, in_hole);
	stats_read(&before);
	ASSERT_EQ(0, fallocate(wfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       punch, punch_len));
	stats_delta(&before, &d);
	part1 = partition_pages();
	stats_log(_metadata, "512 KiB punched", &d);
	EXPECT_LE(in_hole, d.ra_removed);
	EXPECT_EQ(part0 - part1, d.ra_removed);
	EXPECT_EQ(0, resident_pages(self->ref_fd, punch, punch_len));

	memset(self->dev, POISON, punch_len);
	memset(self->ref, 0, punch_len);
	ASSERT_EQ(punch_len, pread(self->fd, self->dev, punch_len, punch));
	EXPECT_EQ(-1, first_diff(self->dev, self->ref, punch_len));

	part0 = partition_pages();
	ASSERT_LT(0, part0);
	stats_read(&before);
	ASSERT_EQ(0, ftruncate(wfd, 0));
	stats_delta(&before, &d);
	part1 = partition_pages();
	close(wfd);
	stats_log(_metadata, "truncated to 0", &d);
	EXPECT_LT(0, d.ra_removed);
	EXPECT_EQ(part0 - part1, d.ra_removed);
	EXPECT_EQ(0, part1);
}

/*
 * A large partition folio that is split (here by punching one page out of
 * its middle) leaves the partition whole, as a normal folio, so the
 * partition's page count stays exact: after the file is truncated, it is
 * empty.  ext4 on 6.12 reads ahead into order-0 folios only, so there
 * nothing is split.
 */
TEST_F_TIMEOUT(readahead, split_leaves_whole, 300)
{
	static const off_t offs[] = { 1 * MiB, 768 * KiB, 1280 * KiB,
				      512 * KiB };
	const long long len = 2 * MiB;
	long long part0, part1, split = 0;
	struct ra_stats before, d;
	unsigned int i;
	int wfd;

	wfd = open(self->path, O_RDWR);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, set_ra_kb(DEFAULT_RA_KB));
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, self->fd, 0, len, REQ,
				      self->seed, NULL));

	/* A folio still in a per-CPU LRU batch cannot be split: try a few. */
	for (i = 0; i < ARRAY_SIZE(offs) && !split; i++) {
		off_t off = offs[i] + PAGE;

		part0 = partition_pages();
		stats_read(&before);
		ASSERT_EQ(0, fallocate(wfd, FALLOC_FL_PUNCH_HOLE |
				       FALLOC_FL_KEEP_SIZE, off, PAGE));
		stats_delta(&before, &d);
		part1 = partition_pages();
		stats_log(_metadata, "4 KiB punched", &d);
		EXPECT_EQ(part0 - part1, d.ra_removed + d.ra_promoted);
		EXPECT_EQ(0, resident_pages(self->ref_fd, off, PAGE));
		split += d.ra_promoted;

		memset(self->dev, POISON, PAGE);
		memset(self->ref, 0, PAGE);
		ASSERT_EQ(PAGE, pread(self->fd, self->dev, PAGE, off));
		EXPECT_EQ(-1, first_diff(self->dev, self->ref, PAGE));
	}
	TH_LOG("%lld partition pages left it by a split", split);
	if (!strcmp(variant->fs, "xfs")) {
		EXPECT_LT(0, split);
	} else {
		EXPECT_EQ(0, split);
	}

	stats_read(&before);
	ASSERT_EQ(0, ftruncate(wfd, 0));
	stats_delta(&before, &d);
	close(wfd);
	stats_log(_metadata, "truncated to 0", &d);
	EXPECT_EQ(0, partition_pages());
}

/* POSIX_FADV_DONTNEED and drop_caches take partition pages out too. */
TEST_F_TIMEOUT(readahead, dontneed_drops, 300)
{
	const long long len = 2 * MiB, dontneed = 1 * MiB;
	long long part0, part1, in_range;
	struct ra_stats before, d;

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, self->fd, 0, len, REQ,
				      self->seed, NULL));

	part0 = partition_pages();
	in_range = resident_pages(self->ref_fd, 0, dontneed);
	TH_LOG("partition %lld pages, %lld of them in the first MiB", part0,
	       in_range);
	ASSERT_LT(0, in_range);
	stats_read(&before);
	ASSERT_EQ(0, posix_fadvise(self->ref_fd, 0, dontneed,
				   POSIX_FADV_DONTNEED));
	stats_delta(&before, &d);
	part1 = partition_pages();
	stats_log(_metadata, "DONTNEED on the first MiB", &d);
	EXPECT_LE(in_range, d.ra_removed);
	EXPECT_EQ(part0 - part1, d.ra_removed);
	EXPECT_EQ(0, resident_pages(self->ref_fd, 0, dontneed));

	part0 = part1;
	ASSERT_LT(0, part0);
	stats_read(&before);
	ASSERT_EQ(0, drop_caches());
	stats_delta(&before, &d);
	part1 = partition_pages();
	stats_log(_metadata, "drop_caches", &d);
	EXPECT_EQ(part0 - part1, d.ra_removed);
	EXPECT_EQ(0, part1);
}

/*
 * Off means off: with readahead_kb 0 small sequential reads are DMAed as
 * before, and with the router off they are plain CPU copies, not read
 * ahead into the partition either.
 */
TEST_F_TIMEOUT(readahead, disabled, 300)
{
	const long long len = 4 * MiB;
	struct ra_stats before, d;
	long reqs;
	int fd;

	ASSERT_EQ(0, set_ra_kb(0));
	EXPECT_EQ(0, partition_pages());
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, self->fd, 0, len, REQ,
				      self->seed, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "readahead_kb 0: 4 MiB in 16 KiB reads", &d);
	EXPECT_EQ(0, d.ra_reads);
	EXPECT_EQ(0, d.ra_pages);
	EXPECT_EQ(0, partition_pages());
	EXPECT_LE(len / 10 * 9, d.p2p_bytes);

	ASSERT_EQ(0, set_ra_kb(DEFAULT_RA_KB));
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, sysfs_write(P2P_ENABLED, "0"));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	reqs = seq_read(_metadata, self, fd, 0, len, REQ, self->seed, NULL);
	stats_delta(&before, &d);
	close(fd);
	ASSERT_EQ(0, sysfs_write(P2P_ENABLED, "1"));
	stats_log(_metadata, "router off: 4 MiB in 16 KiB reads", &d);
	ASSERT_EQ(len / REQ, reqs);
	EXPECT_EQ(0, d.ra_reads);
	EXPECT_EQ(0, d.ra_pages);
	EXPECT_EQ(0, d.routed_reads);
	EXPECT_EQ(0, d.p2p_bytes);
	EXPECT_LE(1, d.fallback_disabled);
	EXPECT_EQ(0, partition_pages());
}

/* The number after @key in @line, or -1. */
/*
 * P-readahead is for requests that DMA serves slower than a copy.  With a
 * cost model in which DMA is nearly free, small sequential reads are DMAed
 * and nothing is read ahead.
 */
TEST_F_TIMEOUT(readahead, cheap_dma_not_read_ahead, 300)
{
	const long long len = 4 * MiB;
	struct ra_stats before, d;

	ASSERT_EQ(0, sysfs_write(P2P_COST_NS, "4096:10 1048576:2000"));
	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len / REQ, seq_read(_metadata, self, self->fd, 0, len, REQ,
				      self->seed, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "DMA nearly free: 4 MiB in 16 KiB reads", &d);
	EXPECT_EQ(0, d.ra_reads);
	EXPECT_EQ(0, d.ra_pages);
	EXPECT_EQ(len, d.p2p_bytes);
}

/*
 * P-readahead must beat the router's own DMA of the request, counting the
 * drive's bandwidth and read-ahead's own cost, not only the copy.  The
 * model is the throttled rig's (a drive that streams 200 MB/s, about
 * 170 us per small read) with read-ahead's cost measured there: a 4 KiB
 * read is far cheaper through the partition, a 64 KiB one is not, although
 * its DMA costs more than copying it at copy_mbps.
 */
TEST_F_TIMEOUT(readahead, criterion_counts_drive, 300)
{
	const long long len = 4 * MiB;
	struct ra_stats before, d;

	ASSERT_EQ(0, sysfs_write(P2P_COST_NS,
				 "4096:170000 65536:310000 8388608:40000000"));
	ASSERT_EQ(0, sysfs_write(P2P_COPY_MBPS, "477"));
	ASSERT_EQ(0, sysfs_write(P2P_RA_MBPS, "300"));

	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(len / (64 * KiB),
		  seq_read(_metadata, self, self->fd, 0, len, 64 * KiB,
			   self->seed, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "slow drive: 4 MiB in 64 KiB reads", &d);
	EXPECT_EQ(0, d.ra_reads);
	EXPECT_EQ(0, d.ra_pages);
	EXPECT_EQ(len, d.p2p_bytes);

	ASSERT_EQ(0, drop_caches());
	stats_read(&before);
	ASSERT_EQ(MiB / (4 * KiB),
		  seq_read(_metadata, self, self->fd, 0, MiB, 4 * KiB,
			   self->seed, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "slow drive: 1 MiB in 4 KiB reads", &d);
	EXPECT_EQ(MiB / (4 * KiB), d.ra_reads);
	EXPECT_LE(MiB / PAGE, d.ra_pages);
	EXPECT_EQ(0, d.p2p_bytes);
}

/*
 * A short hole that the router sends through the page cache is read into
 * the partition exactly.  Read-ahead's window would reach into the holes
 * next to it, which are being DMAed at the same time: the drive would read
 * them twice.  Here 16 KiB dirty islands (never folded into a DMA) sit
 * every 64 KiB, a DMA costs mostly latency and a copy little, so the
 * planner moves holes to the page cache until both sides balance; each of
 * those adds its own 12 pages to the partition, and not one more.  With 31
 * holes it moves the first 15, and read-ahead's 128 KiB windows, which
 * start at every other hole, would reach into the 16th.
 */
TEST_F_TIMEOUT(readahead, hole_read_exactly, 300)
{
	const size_t step = 64 * KiB, isl = 16 * KiB, len = 31 * step + isl;
	struct ra_stats before, d;
	off_t off;
	int wfd;

	ASSERT_EQ(0, sysfs_write(P2P_COST_NS, "4096:1000000 8388608:1100000"));
	ASSERT_EQ(0, drop_caches());
	wfd = open(self->path, O_WRONLY);
	ASSERT_LE(0, wfd);
	for (off = 0; off < (off_t)len; off += step) {
		pattern_fill(self->ram, isl, off, self->seed);
		ASSERT_EQ((ssize_t)isl, pwrite(wfd, self->ram, isl, off));
	}
	close(wfd);

	memset(self->dev, POISON, len);
	stats_read(&before);
	ASSERT_EQ((ssize_t)len, pread(self->fd, self->dev, len, 0));
	stats_delta(&before, &d);
	stats_log(_metadata, "31 holes, dirty 16 KiB every 64 KiB", &d);
	pattern_fill(self->ref, len, 0, self->seed);
	ASSERT_EQ(-1, first_diff(self->dev, self->ref, len));
	/* The premise: some holes were DMAed, some read through the cache. */
	ASSERT_LE(1, d.holes_via_cache);
	ASSERT_LT(0, d.p2p_bytes);
	EXPECT_EQ(d.holes_via_cache * (step - isl) / PAGE, d.ra_pages);
	EXPECT_EQ(len, d.p2p_bytes + d.cache_bytes);
}

static long long trace_field(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtoll(p + strlen(key), NULL, 0) : -1;
}

/*
 * The tracepoint shows the partition at work for this file: pages added,
 * evicted and promoted, and the partition size after each, which stays
 * within the cap.
 */
TEST_F_TIMEOUT(readahead, tracepoint, 300)
{
	static const char *const actions[] = { " add ", " evict ", " promote " };
	const long long cap_kb = 1024, len = 2 * MiB;
	long long nr, max_nr = -1, seen[ARRAY_SIZE(actions)] = { 0 };
	char key[128], *trace, *line, *save;
	const char *example[ARRAY_SIZE(actions)] = { NULL };
	unsigned int a;
	struct stat st;
	long rd;

	if (access(TRACEFS "/trace", F_OK)) {
		ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0, NULL))
			TH_LOG("no tracefs at " TRACEFS ": %s", strerror(errno));
	}
	ASSERT_EQ(0, access(TRACEFS "/events", F_OK))
		TH_LOG("no event tracing in this kernel");
	ASSERT_EQ(0, access(TRACE_EVENT_DIR "/enable", F_OK));

	ASSERT_EQ(0, stat(self->path, &st));
	snprintf(key, sizeof(key), "dev %u:%u ino 0x%lx ",
		 major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);

	ASSERT_EQ(0, set_ra_kb(cap_kb));
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, trace_clear());
	ASSERT_EQ(0, sysfs_write(TRACEFS "/tracing_on", "1"));
	ASSERT_EQ(0, sysfs_write(TRACE_EVENT_DIR "/enable", "1"));
	rd = seq_read(_metadata, self, self->fd, 0, len, REQ, self->seed,
		      NULL);
	/* The last page read is in the partition: read it into RAM. */
	if (rd == len / REQ)
		EXPECT_EQ(-1, ram_diff(self, self->ref_fd, len - PAGE, PAGE,
				       self->seed));
	EXPECT_EQ(0, sysfs_write(TRACE_EVENT_DIR "/enable", "0"));
	trace = trace_slurp();
	EXPECT_EQ(0, trace_clear());
	ASSERT_NE(NULL, trace);
	ASSERT_EQ(len / REQ, rd);

	for (line = strtok_r(trace, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strstr(line, "p2p_ra_partition:") || !strstr(line, key))
			continue;
		for (a = 0; a < ARRAY_SIZE(actions); a++) {
			if (!strstr(line, actions[a]))
				continue;
			if (!seen[a]++)
				example[a] = line;
		}
		nr = trace_field(line, " nr ");
		if (nr > max_nr)
			max_nr = nr;
	}
	for (a = 0; a < ARRAY_SIZE(actions); a++) {
		if (example[a])
			TH_LOG("%lld \"%s\" events, e.g. %s", seen[a],
			       actions[a], example[a]);
		else
			TH_LOG("no \"%s...%s\" line in the trace", key,
			       actions[a]);
		EXPECT_LT(0, seen[a]);
	}
	TH_LOG("largest nr %lld, limit %lld", max_nr,
	       partition_limit(cap_kb));
	EXPECT_LT(0, max_nr);
	EXPECT_GE(partition_limit(cap_kb), max_nr);
	free(trace);
}

#define ADD_EVENT_DIR	TRACEFS "/events/filemap/mm_filemap_add_to_page_cache"

/*
 * Read @len bytes of the fixture's file sequentially in REQ requests into
 * device memory from a cold cache, with mm_filemap_add_to_page_cache on:
 * the largest folio order the page cache added for the file, and in
 * *@folios and *@pages how many folios and pages it added.  A negative
 * number if the read or the tracing failed.
 */
static long long added_orders(struct __test_metadata *_metadata,
			      FIXTURE_DATA(readahead) *self, size_t len,
			      long long *folios, long long *pages)
{
	char key[128], *trace, *line, *save;
	long long order, max_order = -1;
	struct stat st;
	long rd;

	*folios = *pages = 0;
	if (stat(self->path, &st))
		return -2;
	snprintf(key, sizeof(key), "dev %u:%u ino %lx ", major(st.st_dev),
		 minor(st.st_dev), (unsigned long)st.st_ino);
	if (drop_caches() || trace_clear() ||
	    sysfs_write(TRACEFS "/tracing_on", "1") ||
	    sysfs_write(ADD_EVENT_DIR "/enable", "1"))
		return -2;
	rd = seq_read(_metadata, self, self->fd, 0, len, REQ, self->seed,
		      NULL);
	sysfs_write(ADD_EVENT_DIR "/enable", "0");
	trace = trace_slurp();
	trace_clear();
	if (!trace || rd != (long)(len / REQ)) {
		free(trace);
		return -2;
	}
	for (line = strtok_r(trace, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strstr(line, "mm_filemap_add_to_page_cache:") ||
		    !strstr(line, key))
			continue;
		order = trace_field(line, " order=");
		if (order < 0)
			continue;
		(*folios)++;
		*pages += 1LL << order;
		if (order > max_order)
			max_order = order;
	}
	free(trace);
	return max_order;
}

/* The largest order the partition takes at @cap_kb: 1/32 of it. */
static long long cap_order(long long cap_kb)
{
	long long pages = cap_kb * KiB / PAGE / 32, order = 0;

	while (pages >>= 1)
		order++;
	return order;
}

/*
 * P-readahead reads ahead into folios of the orders the page cache uses
 * for the same reads with the router off: large ones where the file
 * system supports them (XFS), growing with the window, and order 0 where
 * it does not (ext4 on 6.12); but none larger than 1/32 of the partition.
 * The partition accounts them in pages.
 */
TEST_F_TIMEOUT(readahead, folio_orders, 300)
{
	static const long long caps_kb[] = { DEFAULT_RA_KB, 1024 };
	const long long len = 4 * MiB;
	long long ra_max, pc_max, ra_folios, ra_pages, pc_folios, pc_pages;
	long long want;
	struct ra_stats before, d;
	unsigned int i;

	if (access(TRACEFS "/trace", F_OK)) {
		ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0, NULL))
			TH_LOG("no tracefs at " TRACEFS ": %s", strerror(errno));
	}
	ASSERT_EQ(0, access(ADD_EVENT_DIR "/enable", F_OK));

	ASSERT_EQ(0, sysfs_write(P2P_ENABLED, "0"));
	pc_max = added_orders(_metadata, self, len, &pc_folios, &pc_pages);
	ASSERT_EQ(0, sysfs_write(P2P_ENABLED, "1"));
	ASSERT_LE(0, pc_max);
	TH_LOG("page cache: %lld folios, %lld pages, largest order %lld",
	       pc_folios, pc_pages, pc_max);
	if (!strcmp(variant->fs, "xfs")) {
		/* The premise: 1 MiB's order cap is below the page cache's. */
		ASSERT_LT(cap_order(1024), pc_max);
	} else {
		EXPECT_EQ(0, pc_max);
	}

	for (i = 0; i < ARRAY_SIZE(caps_kb); i++) {
		ASSERT_EQ(0, set_ra_kb(caps_kb[i]));
		stats_read(&before);
		ra_max = added_orders(_metadata, self, len, &ra_folios,
				      &ra_pages);
		stats_delta(&before, &d);
		stats_log(_metadata, "4 MiB in 16 KiB reads, P-readahead", &d);
		ASSERT_LE(0, ra_max);
		want = pc_max < cap_order(caps_kb[i]) ? pc_max :
			cap_order(caps_kb[i]);
		TH_LOG("partition of %lld KiB: %lld folios, %lld pages, largest order %lld, expected %lld",
		       caps_kb[i], ra_folios, ra_pages, ra_max, want);
		EXPECT_LE(len / REQ * 9 / 10, d.ra_reads);
		/* Every page read-ahead added went into the partition. */
		EXPECT_EQ(ra_pages, d.ra_pages);
		EXPECT_EQ(want, ra_max);
	}
	ASSERT_EQ(0, set_ra_kb(DEFAULT_RA_KB));
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE	25
#endif
#define THP_DIR		"/sys/kernel/mm/transparent_hugepage"
#define HPAGE		(2 * MiB)

/*
 * MADV_COLLAPSE (CONFIG_READ_ONLY_THP_FOR_FS) replaces the small folios of
 * a read-only file mapping by one huge folio.  Partition folios among them
 * must leave the partition as they leave the page cache: after the file is
 * dropped from the cache and its file system unmounted, the partition
 * holds nothing.  Freeing a folio still marked PG_p2p_ra would also be a
 * "BUG: Bad page state" on the console, which fails the run.
 */
TEST_F_TIMEOUT(readahead, thp_collapse, 300)
{
	const long long len = 4 * MiB;
	long long part0, part1, part2, above, in_range;
	unsigned char *resv, *map;
	struct ra_stats before, d;
	int fd, ret = -1, err = 0, tries;
	uintptr_t aligned;

	ASSERT_EQ(0, access(THP_DIR "/enabled", F_OK))
		TH_LOG("no transparent huge pages in this kernel (%s)",
		       THP_DIR);
	ASSERT_EQ(0, set_ra_kb(DEFAULT_RA_KB));
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, partition_pages());

	/* 4 MiB in 4 KiB reads into device memory: the partition fills. */
	stats_read(&before);
	ASSERT_EQ(len / PAGE, seq_read(_metadata, self, self->fd, 0, len, PAGE,
				       self->seed, NULL));
	stats_delta(&before, &d);
	stats_log(_metadata, "4 MiB in 4 KiB reads", &d);
	part0 = partition_pages();
	/*
	 * The premise: partition pages in the first 2 MiB.  At most @above
	 * of the partition's pages lie beyond it (all that is cached there).
	 */
	above = resident_pages(self->ref_fd, HPAGE, FILE_SIZE - HPAGE);
	ASSERT_LE(0, above);
	in_range = part0 - above;
	TH_LOG("partition %lld pages, at least %lld of them in the first 2 MiB",
	       part0, in_range);
	ASSERT_LT(0, d.ra_pages);
	ASSERT_LT(0, in_range);

	/*
	 * A read-only mapping of the file, 2 MiB-aligned, not touched
	 * before the collapse: a fault would promote what it maps.
	 */
	resv = mmap(NULL, 2 * HPAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	ASSERT_NE(MAP_FAILED, resv);
	aligned = ((uintptr_t)resv + HPAGE - 1) & ~(uintptr_t)(HPAGE - 1);
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	map = mmap((void *)aligned, HPAGE, PROT_READ, MAP_SHARED | MAP_FIXED,
		   fd, 0);
	close(fd);
	ASSERT_EQ((void *)aligned, map);
	for (tries = 0; tries < 5; tries++) {
		ret = madvise(map, HPAGE, MADV_COLLAPSE);
		err = errno;
		if (!ret || err != EAGAIN)
			break;
		usleep(100000);
	}
	part1 = partition_pages();
	TH_LOG("MADV_COLLAPSE of the first 2 MiB: %s after %d tries; partition %lld pages",
	       ret ? strerror(err) : "collapsed", tries + 1, part1);
	ASSERT_EQ(0, ret);

	/* The huge folio holds the file's bytes. */
	memcpy(self->ram, map, HPAGE);
	pattern_fill(self->ref, HPAGE, 0, self->seed);
	EXPECT_EQ(-1, first_diff(self->ram, self->ref, HPAGE));
	munmap(resv, 2 * HPAGE);
	/* And so does a read of it into device memory. */
	memset(self->dev, POISON, HPAGE);
	ASSERT_EQ(HPAGE, pread(self->fd, self->dev, HPAGE, 0));
	EXPECT_EQ(-1, first_diff(self->dev, self->ref, HPAGE));

	/* Drop the file: caches, then the file system. */
	close(self->fd);
	close(self->ref_fd);
	self->fd = -1;
	self->ref_fd = -1;
	stats_read(&before);
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, umount2(MNT, 0)) TH_LOG("umount: %s", strerror(errno));
	self->mounted = false;
	stats_delta(&before, &d);
	part2 = partition_pages();
	stats_log(_metadata, "caches dropped, unmounted", &d);
	TH_LOG("partition %lld pages after the collapse, %lld after the unmount",
	       part1, part2);
	ASSERT_EQ(0, part2)
		TH_LOG("the partition lost track of %lld pages", part2);
}

/* A field of /proc/meminfo in KiB, or -1. */
static long long meminfo_kb(const char *key)
{
	return proc_field("/proc/meminfo", key, ':');
}

/* Pages reclaim scanned so far, by kswapd and directly. */
static long long reclaim_scanned(void)
{
	return vmstat("pgscan_kswapd") + vmstat("pgscan_direct");
}

#define STREAM_SIZE	(128 * MiB)	/* the other tenant's file */
#define HOG_SLACK	(64 * MiB)	/* what the hog leaves available */
#define PRESSURE_PASSES	3

/*
 * A child that dies with the test: the hog holds @len bytes of anonymous
 * memory (no swap in the rig: they stay), the streamer reads @path into
 * RAM over and over, 1 MiB at a time.  Neither keeps the test's device
 * memory (whose mapping would make the streamer's reads candidates for
 * the router).  Returns the pid once the hog holds its memory or the
 * streamer has read the file once (so that reclaim is running), or -1 if
 * the child died first.
 */
static pid_t pressure_child(FIXTURE_DATA(readahead) *self, bool hog,
			    size_t len, const char *path)
{
	pid_t pid, parent = getpid();
	unsigned char *p;
	int pipefd[2], fd, pass;
	size_t off;
	char c;

	if (pipe(pipefd))
		return -1;
	pid = fork();
	if (pid) {
		close(pipefd[1]);
		if (pid > 0 && read(pipefd[0], &c, 1) != 1) {
			waitpid(pid, NULL, 0);
			pid = -1;
		}
		close(pipefd[0]);
		return pid;
	}
	close(pipefd[0]);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	munmap(self->dev, MAP_LEN);
	/* The victim, if the OOM killer must choose. */
	sysfs_write("/proc/self/oom_score_adj", "1000");
	if (hog) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			_exit(1);
		for (off = 0; off < len; off += PAGE)
			p[off] = 1;
		if (write(pipefd[1], "h", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	p = malloc(MiB);
	fd = open(path, O_RDONLY);
	if (!p || fd < 0)
		_exit(1);
	for (pass = 0;; pass++) {
		for (off = 0; off < STREAM_SIZE; off += MiB)
			if (pread(fd, p, MiB, off) < 0)
				_exit(1);
		if (!pass && write(pipefd[1], "s", 1) != 1)
			_exit(1);
	}
}

/* drop_caches(), then the partition's gauge, retried while it is not 0. */
static long long partition_after_drop(void)
{
	long long part = -1;
	int i;

	for (i = 0; i < 5; i++) {
		if (drop_caches())
			return -1;
		part = partition_pages();
		if (!part)
			break;
		usleep(200 * 1000);
	}
	return part;
}

/*
 * Global memory pressure, no memory cgroup: a process holds all but
 * HOG_SLACK of the available memory and another streams a 128 MiB file
 * into RAM, so that kswapd and direct reclaim run while P-readahead serves
 * small sequential reads into device memory (large folios on XFS).  Every
 * byte stays right and nine requests in ten are read ahead, the partition
 * stays within its cap, reclaim takes partition folios (more leave it by
 * removal than migration moved pages), no process is killed for memory,
 * and the partition's accounts balance: once the page cache is dropped,
 * every page added was evicted, promoted or removed, and the gauge reads
 * 0.
 */
TEST_F_TIMEOUT(readahead, global_pressure, 600)
{
	const long long len = FILE_SIZE;
	long long avail, scan0, scan, oom0, mig0, mig, max_part = 0, part = 0;
	struct ra_stats before, d;
	char stream[PATH_MAX];
	long reqs = 0, rd;
	int i, fd;

	snprintf(stream, sizeof(stream), MNT "/stream");
	ASSERT_EQ(0, write_pattern_file(stream, STREAM_SIZE, self->seed ^ 1));
	ASSERT_EQ(0, partition_after_drop());
	avail = meminfo_kb("MemAvailable") * KiB;
	ASSERT_LT((long long)HOG_SLACK, avail);
	oom0 = vmstat("oom_kill");

	self->kids[0] = pressure_child(self, true, avail - HOG_SLACK, NULL);
	ASSERT_LT(0, self->kids[0]) TH_LOG("the hog died before it held its memory");
	self->kids[1] = pressure_child(self, false, 0, stream);
	ASSERT_LT(0, self->kids[1]) TH_LOG("the streamer did not start");
	TH_LOG("hog holds %lld MiB of %lld MiB available; MemAvailable now %lld MiB",
	       (avail - HOG_SLACK) / (long long)MiB, avail / (long long)MiB,
	       meminfo_kb("MemAvailable") / 1024);

	stats_read(&before);
	scan0 = reclaim_scanned();
	mig0 = vmstat("pgmigrate_success");
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	for (i = 0; i < PRESSURE_PASSES; i++) {
		rd = seq_read(_metadata, self, fd, 0, len, REQ, self->seed,
			      &part);
		ASSERT_EQ(len / REQ, rd) TH_LOG("pass %d", i);
		reqs += rd;
		if (part > max_part)
			max_part = part;
	}
	close(fd);
	scan = reclaim_scanned() - scan0;
	mig = vmstat("pgmigrate_success") - mig0;
	/* Both still there: the pressure lasted. */
	for (i = 0; i < 2; i++)
		EXPECT_EQ(0, waitpid(self->kids[i], NULL, WNOHANG));
	for (i = 0; i < 2; i++) {
		kill(self->kids[i], SIGKILL);
		waitpid(self->kids[i], NULL, 0);
		self->kids[i] = 0;
	}
	unlink(stream);
	part = partition_after_drop();
	stats_delta(&before, &d);
	stats_log(_metadata, "3 x 32 MiB in 16 KiB reads under pressure, then drop_caches", &d);
	TH_LOG("%lld pages scanned by reclaim, %lld migrated, %lld OOM kills, at most %lld pages in the partition, %lld after drop_caches",
	       scan, mig, vmstat("oom_kill") - oom0, max_part, part);

	/* The premise: reclaim ran, a lot, while the reads did. */
	ASSERT_LE((long long)(STREAM_SIZE / PAGE / 4), scan)
		TH_LOG("too little reclaim during the reads");
	EXPECT_EQ(0, vmstat("oom_kill") - oom0);
	EXPECT_LE(reqs * 9 / 10, d.ra_reads);
	EXPECT_LE(reqs * (long long)(REQ / PAGE) * 9 / 10, d.ra_hits);
	EXPECT_GE(partition_limit(DEFAULT_RA_KB), max_part);
	EXPECT_LT(mig, d.ra_removed) TH_LOG("reclaim took no partition folio");
	EXPECT_EQ(0, part);
	EXPECT_EQ(d.ra_pages, d.ra_evicted + d.ra_promoted + d.ra_removed);
}

/* RAM in KiB as the kernel counts it (totalram_pages). */
static long long ram_kb(void)
{
	struct sysinfo si;

	if (sysinfo(&si))
		return -1;
	return (long long)si.totalram * si.mem_unit / KiB;
}

/*
 * readahead_kb takes 0 (off) up to a quarter of RAM; a bad write changes
 * nothing.  (An empty value is written as "\n", what "echo >" writes:
 * sysfs never passes a zero-length write to the store method.)  Its
 * default is RAM/1024 within [4096, 65536] KiB.
 */
TEST(knobs_validate)
{
	long long ram = ram_kb(), def, cur, kb = -1;
	char saved[32], big[32], huge[32], fine[32];
	const char *bad[] = { "abc", "-1", "\n", "12abc", big, huge };
	struct {
		const char *val;
		long long kb;
	} good[] = {
		{ "0", 0 }, { "1024", 1024 }, { fine, ram / 8 }, { "4096\n", 4096 },
		{ "1027", 1024 },	/* rounded down to whole pages */
	};
	unsigned int i;

	ASSERT_EQ(0, access(P2P_RA_KB, F_OK))
		TH_LOG("no P2P read-ahead in this kernel (%s)", P2P_RA_KB);
	ASSERT_LT(0, ram);
	ASSERT_EQ(0, sysfs_read(P2P_RA_KB, saved, sizeof(saved)));
	def = ram / 1024;
	def = def < 4096 ? 4096 : def > 65536 ? 65536 : def;
	TH_LOG("readahead_kb %s, RAM %lld KiB: default %lld", saved, ram, def);
	/* Within 2%: the kernel may count RAM a little differently. */
	cur = strtoll(saved, NULL, 0);
	EXPECT_LE(def - def / 50, cur);
	EXPECT_GE(def + def / 50, cur);

	snprintf(big, sizeof(big), "%lld", ram / 4 + 4096);
	snprintf(huge, sizeof(huge), "%lld", ram * 2);
	snprintf(fine, sizeof(fine), "%lld", ram / 8);

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		EXPECT_EQ(0, sysfs_write(P2P_RA_KB, good[i].val))
			TH_LOG("readahead_kb \"%s\" refused", good[i].val);
		EXPECT_EQ(0, sysfs_read_ll(P2P_RA_KB, &kb));
		EXPECT_EQ(good[i].kb / (PAGE / KiB) * (PAGE / KiB), kb);
	}
	EXPECT_EQ(0, sysfs_write(P2P_RA_KB, "2048"));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(-EINVAL, sysfs_write(P2P_RA_KB, bad[i]))
			TH_LOG("readahead_kb \"%s\" accepted", bad[i]);
		EXPECT_EQ(0, sysfs_read_ll(P2P_RA_KB, &kb));
		EXPECT_EQ(2048, kb);
	}
	EXPECT_EQ(0, sysfs_write(P2P_RA_KB, saved));
	EXPECT_EQ(0, sysfs_read_ll(P2P_RA_KB, &kb));
	EXPECT_EQ(cur, kb);
}

TEST_HARNESS_MAIN
