// SPDX-License-Identifier: GPL-2.0
/*
 * The P2P router's learned cost model (mm/p2p_model.c): per request
 * queue, what a DMA costs; per provider, how fast the CPU copies into and
 * out of its memory.  The router learns both from its own I/O and plans
 * with them unless an override is set.  The files are on a fresh ext4 on
 * each of the first two rig drives.  The router copies, whatever the
 * model, every cached byte of a mapping that had a writeback error (a raw
 * device an earlier test failed writes to) and of a folio with private
 * data (XFS's large folios carry iomap's per-block state): both are
 * P2P_REASON_UNVERIFIED.  ext4 reads whole pages without buffer heads.
 *
 * The decisions are read off the counters, never off times: a read of a
 * fully cached range into device memory is either copied (cache_bytes) or
 * read again by DMA (p2p_bytes, a folded island), whichever the model the
 * read was planned with says is faster.  So a test sets the rates on one
 * side and lets the other decide.
 *
 *  - files:      the per-queue and per-provider files, the learn switch,
 *                and what they show after a reset;
 *  - bad_values: every malformed value gets EINVAL and changes nothing;
 *  - override_wins, learn_off: an override wins over what was learned,
 *                and learn=0 plans with the defaults;
 *  - learns_copy_rates: copies into and out of device memory move the
 *                provider's learned rates from a seed far off;
 *  - unlearned_classes_scale: size classes a drive's DMAs have not taught
 *                scale with the nearest one they have;
 *  - probe_dma, probe_copy: a read whose plan copies every cached byte
 *                reads one range by DMA now and then, and one whose plan
 *                reads them all by DMA copies one, paid for by 1/128 of
 *                the predicted time of the reads (so within 1/128 of the
 *                bytes, the path probed being predicted slower); that
 *                moves a value seeded far off, which the path the plan
 *                takes would never have measured;
 *  - probe_ra, probe_ra_dma: P-readahead's rate, learned per drive, is
 *                probed by runs of sequential reads when the DMA is
 *                predicted faster, and the DMA of such reads when
 *                P-readahead is, within 1/128 of the bytes; either moves
 *                a value seeded far off;
 *  - two_tenants: a tenant that io.max holds to 4 MiB/s on a drive DMAs
 *                at that pace, and the reads of a tenant without a limit
 *                stay DMAs: the limited one teaches nothing;
 *  - throttled_drive: two drives under the switch, this process limited
 *                on one with cgroup v2 io.max in the middle of the run.
 *                The router keeps reading the other's cached ranges by
 *                DMA and at once copies the limited one's, learning
 *                nothing from them.
 *
 * Every read is compared byte for byte with the pattern written.
 */
#define _GNU_SOURCE

#include <sched.h>

#include "../kselftest_harness.h"
#include "spin_util.h"
#include "spin_router.h"

#define REGION		(16 * MiB)	/* written and cached on each drive */
#define MNT		"/mnt/spin_model"
#define RSZ		(1 * MiB)	/* one read */
#define CG		CG_ROOT "/spin_model"
/* DOC "Learning the model": within an eighth after 16 samples. */
#define CONVERGE	16
/* A model no copy can beat, and one every copy beats. */
#define DMA_FREE	"4096:1000 8388608:2000"
#define DMA_SLOW	"4096:1000000000 8388608:2000000000"

struct dec {
	long long p2p, cache;
};

FIXTURE(model) {
	char ns[2][NAME_MAX + 1];
	char path[2][64];		/* the file on each drive */
	bool mounted[2];
	char queue[2][128];		/* /sys/block/<ns>/queue */
	char provider[SYSFS_LEN];
	int fd[2];
	uint64_t seed;
	unsigned char *dev;
	unsigned char *ref;
	struct router_knobs knobs;
	bool knobs_saved;
	bool in_cgroup;
};

static int qfile(FIXTURE_DATA(model) *self, int d, const char *name,
		 char *path, size_t len)
{
	return snprintf(path, len, "%s/%s", self->queue[d], name) >= (int)len;
}

static int qwrite(FIXTURE_DATA(model) *self, int d, const char *name,
		  const char *val)
{
	char path[PATH_MAX];

	qfile(self, d, name, path, sizeof(path));
	return sysfs_write(path, val);
}

static int qread(FIXTURE_DATA(model) *self, int d, const char *name,
		 char *buf, size_t len)
{
	char path[PATH_MAX];

	qfile(self, d, name, path, sizeof(path));
	return sysfs_read(path, buf, len);
}

static int pwrite_knob(FIXTURE_DATA(model) *self, const char *name,
		       const char *val)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/p2pmem/%s", self->provider, name);
	return sysfs_write(path, val);
}

static long long pread_knob(FIXTURE_DATA(model) *self, const char *name)
{
	char path[PATH_MAX];
	long long v;

	snprintf(path, sizeof(path), "%s/p2pmem/%s", self->provider, name);
	return sysfs_read_ll(path, &v) ? -1 : v;
}

/* The learned DMA time of the size class of @bytes on drive @d, or -1. */
static long long learned_ns(FIXTURE_DATA(model) *self, int d,
			    long long bytes)
{
	char buf[256], *tok, *save;

	if (qread(self, d, "p2p_learned_cost_ns", buf, sizeof(buf)))
		return -1;
	for (tok = strtok_r(buf, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		long long b, ns;

		if (sscanf(tok, "%lld:%lld", &b, &ns) == 2 && b == bytes)
			return ns;
	}
	return -1;
}

/* Every knob back to a known state: defaults, no override, learning on. */
static int model_reset(FIXTURE_DATA(model) *self)
{
	int d, ret = 0;

	for (d = 0; d < 2; d++) {
		ret |= qwrite(self, d, "p2p_cost_ns", "auto");
		ret |= qwrite(self, d, "p2p_learned_cost_ns", "reset");
		ret |= qwrite(self, d, "p2p_learned_ra_mbps", "reset");
	}
	ret |= pwrite_knob(self, "copy_mbps", "auto");
	ret |= pwrite_knob(self, "copy_from_mbps", "auto");
	ret |= pwrite_knob(self, "learned_copy_mbps", "reset");
	ret |= pwrite_knob(self, "learned_copy_from_mbps", "reset");
	ret |= sysfs_write(P2P_LEARN, "1");
	return ret;
}

/* The limits go with the cgroup. */
static void cgroup_leave(FIXTURE_DATA(model) *self)
{
	if (!self->in_cgroup)
		return;
	cg_io_leave(CG);
	self->in_cgroup = false;
}

FIXTURE_SETUP(model)
{
	char nvme_dev[SYSFS_LEN];
	int d, wfd;

	self->fd[0] = -1;
	self->fd[1] = -1;
	ASSERT_EQ(0, access(P2P_LEARN, F_OK))
		TH_LOG("no learned model in this kernel (%s)", P2P_LEARN);
	for (d = 0; d < 2; d++) {
		SPIN_NEED(!nvme_rig_ns(d, self->ns[d], sizeof(self->ns[d])),
			  SPIN_RIG_DRIVE_FMT, d, 2);
		snprintf(self->queue[d], sizeof(self->queue[d]),
			 "/sys/block/%s/queue", self->ns[d]);
	}
	ASSERT_EQ(0, nvme_pci_dev(self->ns[0], nvme_dev, sizeof(nvme_dev)));
	SPIN_NEED(!p2pmem_find(nvme_dev, true, self->provider,
			       sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns[0]);
	ASSERT_EQ(0, nvme_pci_dev(self->ns[1], nvme_dev, sizeof(nvme_dev)));
	SPIN_NEED(pci_share_switch(self->provider, nvme_dev),
		  "a provider that %s and %s reach: %s does not reach %s",
		  self->ns[0], self->ns[1], self->ns[1], self->provider);

	self->seed = getpid() ^ 0x6d6f64656cULL;
	for (d = 0; d < 2; d++) {
		char mnt[32];

		snprintf(mnt, sizeof(mnt), MNT "%d", d);
		ASSERT_EQ(0, mkfs_mount("ext4", self->ns[d], mnt));
		self->mounted[d] = true;
		snprintf(self->path[d], sizeof(self->path[d]), "%s/data", mnt);
		wfd = open(self->path[d], O_RDWR | O_CREAT | O_TRUNC, 0644);
		ASSERT_LE(0, wfd);
		ASSERT_EQ(0, write_pattern(wfd, REGION, self->seed + d));
		close(wfd);
	}
	ASSERT_EQ(0, drop_caches());
	for (d = 0; d < 2; d++) {
		char *ram = malloc(REGION);

		self->fd[d] = open(self->path[d], O_RDONLY);
		ASSERT_LE(0, self->fd[d]);
		ASSERT_NE(NULL, ram);
		/* Cached: every read of the tests has a choice to make. */
		ASSERT_EQ(REGION, pread(self->fd[d], ram, REGION, 0));
		free(ram);
		ASSERT_EQ(REGION / getpagesize(),
			  resident_pages(self->fd[d], 0, REGION));
	}
	self->ref = malloc(RSZ);
	ASSERT_NE(NULL, self->ref);
	self->dev = p2pmem_map(self->provider, RSZ);
	ASSERT_NE(NULL, self->dev);

	ASSERT_EQ(0, router_knobs_save(&self->knobs));
	self->knobs_saved = true;
	/* The documented defaults, and no P-readahead to take the reads. */
	ASSERT_EQ(0, router_knobs_default(0));
	ASSERT_EQ(0, model_reset(self));
	TH_LOG("drives %s %s, provider %s, seed %llu", self->ns[0],
	       self->ns[1], self->provider, (unsigned long long)self->seed);
}

FIXTURE_TEARDOWN(model)
{
	int d;

	cgroup_leave(self);
	if (self->knobs_saved) {
		EXPECT_EQ(0, model_reset(self));
		EXPECT_EQ(0, router_knobs_restore(&self->knobs));
	}
	if (self->dev)
		munmap(self->dev, RSZ);
	free(self->ref);
	for (d = 0; d < 2; d++) {
		char mnt[32];

		if (self->fd[d] >= 0)
			close(self->fd[d]);
		snprintf(mnt, sizeof(mnt), MNT "%d", d);
		if (self->mounted[d])
			umount2(mnt, MNT_DETACH);
	}
}

/*
 * Read RSZ bytes at @off of drive @d into device memory and check them:
 * 0 and what the router did in @dec, or -1.
 */
static int routed_read(struct __test_metadata *_metadata,
		       FIXTURE_DATA(model) *self, int d, off_t off,
		       struct dec *dec)
{
	long long p0 = router_stat("p2p_bytes");
	long long c0 = router_stat("cache_bytes");
	long diff;

	if (pread(self->fd[d], self->dev, RSZ, off) != RSZ) {
		TH_LOG("pread %s at %lld: %s", self->ns[d], (long long)off,
		       strerror(errno));
		return -1;
	}
	dec->p2p = router_stat("p2p_bytes") - p0;
	dec->cache = router_stat("cache_bytes") - c0;
	pattern_fill(self->ref, RSZ, off, self->seed + d);
	diff = first_diff(self->dev, self->ref, RSZ);
	if (diff >= 0) {
		TH_LOG("%s at %lld: byte %ld differs", self->ns[d],
		       (long long)off, diff);
		return -1;
	}
	/* All of it one way: one island, copied or folded. */
	if (dec->p2p + dec->cache != RSZ || (dec->p2p && dec->cache)) {
		TH_LOG("%s at %lld: p2p %lld cache %lld", self->ns[d],
		       (long long)off, dec->p2p, dec->cache);
		return -1;
	}
	return 0;
}

/* Whether a routed read of drive @d at @off was done by DMA. */
static int read_by_dma(struct __test_metadata *_metadata,
		       FIXTURE_DATA(model) *self, int d, off_t off)
{
	struct dec dec;

	if (routed_read(_metadata, self, d, off, &dec))
		return -1;
	return dec.p2p == RSZ;
}

TEST_F(model, files)
{
	char buf[256];
	int d;

	for (d = 0; d < 2; d++) {
		ASSERT_EQ(0, qread(self, d, "p2p_learned_cost_ns", buf,
				   sizeof(buf)));
		/* The defaults at the four classes, 8 MiB extrapolated. */
		EXPECT_STREQ("4096:80000 131072:120000 1048576:380000 8388608:2460000",
			     buf);
		ASSERT_EQ(0, qread(self, d, "p2p_cost_ns", buf, sizeof(buf)));
		EXPECT_STREQ("4096:80000 131072:120000 1048576:380000 8388608:2460000",
			     buf);
		/* P-readahead's rate follows the default until learned. */
		ASSERT_EQ(0, qread(self, d, "p2p_learned_ra_mbps", buf,
				   sizeof(buf)));
		EXPECT_STREQ("200", buf);
	}
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_ra_mbps", "0x10"));
	ASSERT_EQ(0, qread(self, 0, "p2p_learned_ra_mbps", buf, sizeof(buf)));
	EXPECT_STREQ("16", buf);
	ASSERT_EQ(0, qread(self, 1, "p2p_learned_ra_mbps", buf, sizeof(buf)));
	EXPECT_STREQ("200", buf);
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_ra_mbps", "reset"));
	ASSERT_EQ(0, qread(self, 0, "p2p_learned_ra_mbps", buf, sizeof(buf)));
	EXPECT_STREQ("200", buf);
	ASSERT_EQ(0, sysfs_write(P2P_LEARN, "0"));
	ASSERT_EQ(0, qread(self, 0, "p2p_cost_ns", buf, sizeof(buf)));
	EXPECT_STREQ(DEFAULT_COST_NS, buf);
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", "4096:5 65536:7"));
	ASSERT_EQ(0, qread(self, 0, "p2p_cost_ns", buf, sizeof(buf)));
	EXPECT_STREQ("4096:5 65536:7", buf);
	/* A seed faster than 100 GB/s is held to that slope. */
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_cost_ns",
			    "4096:3000 8388608:9000"));
	ASSERT_EQ(0, qread(self, 0, "p2p_learned_cost_ns", buf, sizeof(buf)));
	EXPECT_STREQ("4096:3000 131072:4269 1048576:13444 8388608:86844", buf);
	/* What was not learned follows the defaults, as they change. */
	ASSERT_EQ(0, qread(self, 1, "p2p_learned_cost_ns", buf, sizeof(buf)));
	EXPECT_STREQ("4096:80000 131072:120000 1048576:380000 8388608:2460000",
		     buf);
	ASSERT_EQ(0, sysfs_write(P2P_COST_NS, "4096:1000 1048576:50000"));
	ASSERT_EQ(0, qread(self, 1, "p2p_learned_cost_ns", buf, sizeof(buf)));
	EXPECT_STREQ("4096:1000 131072:6956 1048576:50000 8388608:394345", buf);
	ASSERT_EQ(0, sysfs_write(P2P_COST_NS, DEFAULT_COST_NS));
	/* Drive 1 is another queue: untouched. */
	ASSERT_EQ(0, qread(self, 1, "p2p_cost_ns", buf, sizeof(buf)));
	EXPECT_STREQ(DEFAULT_COST_NS, buf);

	EXPECT_EQ(4000, pread_knob(self, "copy_mbps"));
	EXPECT_EQ(200, pread_knob(self, "copy_from_mbps"));
	EXPECT_EQ(4000, pread_knob(self, "learned_copy_mbps"));
	EXPECT_EQ(200, pread_knob(self, "learned_copy_from_mbps"));
	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_mbps", "1234"));
	EXPECT_EQ(4000, pread_knob(self, "copy_mbps"));	/* learn=0 */
	ASSERT_EQ(0, sysfs_write(P2P_LEARN, "1"));
	EXPECT_EQ(1234, pread_knob(self, "copy_mbps"));
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "0x10"));
	EXPECT_EQ(16, pread_knob(self, "copy_mbps"));
	EXPECT_EQ(1234, pread_knob(self, "learned_copy_mbps"));
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "auto"));
	EXPECT_EQ(1234, pread_knob(self, "copy_mbps"));
	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_mbps", "reset"));
	EXPECT_EQ(4000, pread_knob(self, "copy_mbps"));
}

TEST_F(model, bad_values)
{
	static const char *const bad_model[] = {
		"0", "-1", "\n", "4096", "4096:100", "4096:-5 8192:10",
		"131072:10 4096:20", "4096:200 131072:100",
		"4096:100 8192:99999999999999",
		"4096:100 2147483648:200", "abc:def 1:2",
		"4096:1 8192:2 12288:3 16384:4 20480:5 24576:6 28672:7 32768:8 36864:9",
		"4096:1 8192:x", "18446744073709551616:1 2:3",
	};
	static const char *const bad_rate[] = {
		"0", "-1", "1000001", "4294967296", "abc", "12abc", "\n",
		"99999999999999999999999",
	};
	static const char *const rate_files[] = {
		"copy_mbps", "copy_from_mbps", "learned_copy_mbps",
		"learned_copy_from_mbps",
	};
	static const char *const queue_files[] = {
		"p2p_cost_ns", "p2p_learned_cost_ns",
	};
	char before[256], after[256], path[PATH_MAX];
	unsigned int i, f;

	/* Values that differ from the defaults, to see a change. */
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", "4096:11 8192:12"));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_cost_ns", "4096:21 8192:22"));
	for (f = 0; f < ARRAY_SIZE(queue_files); f++) {
		ASSERT_EQ(0, qread(self, 0, queue_files[f], before,
				   sizeof(before)));
		for (i = 0; i <= ARRAY_SIZE(bad_model); i++) {
			/* Each file's keyword is bad in the other. */
			const char *v = i < ARRAY_SIZE(bad_model) ? bad_model[i] :
					f ? "auto" : "reset";

			EXPECT_EQ(-EINVAL, qwrite(self, 0, queue_files[f], v))
				TH_LOG("%s: \"%s\" accepted", queue_files[f], v);
			ASSERT_EQ(0, qread(self, 0, queue_files[f], after,
					   sizeof(after)));
			EXPECT_STREQ(before, after);
		}
	}
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "111"));
	ASSERT_EQ(0, pwrite_knob(self, "copy_from_mbps", "222"));
	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_mbps", "333"));
	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_from_mbps", "444"));
	for (f = 0; f < ARRAY_SIZE(rate_files); f++) {
		snprintf(path, sizeof(path), "%s/p2pmem/%s", self->provider,
			 rate_files[f]);
		ASSERT_EQ(0, sysfs_read(path, before, sizeof(before)));
		for (i = 0; i <= ARRAY_SIZE(bad_rate); i++) {
			const char *v = i < ARRAY_SIZE(bad_rate) ? bad_rate[i] :
					f < 2 ? "reset" : "auto";

			EXPECT_EQ(-EINVAL, sysfs_write(path, v))
				TH_LOG("%s: \"%s\" accepted", rate_files[f], v);
			ASSERT_EQ(0, sysfs_read(path, after, sizeof(after)));
			EXPECT_STREQ(before, after);
		}
	}
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_ra_mbps", "555"));
	for (i = 0; i <= ARRAY_SIZE(bad_rate); i++) {
		const char *v = i < ARRAY_SIZE(bad_rate) ? bad_rate[i] : "auto";

		EXPECT_EQ(-EINVAL, qwrite(self, 0, "p2p_learned_ra_mbps", v))
			TH_LOG("p2p_learned_ra_mbps: \"%s\" accepted", v);
		ASSERT_EQ(0, qread(self, 0, "p2p_learned_ra_mbps", after,
				   sizeof(after)));
		EXPECT_STREQ("555", after);
	}
	ASSERT_EQ(0, sysfs_read(P2P_LEARN, before, sizeof(before)));
	EXPECT_EQ(-EINVAL, sysfs_write(P2P_LEARN, "2"));
	EXPECT_EQ(-EINVAL, sysfs_write(P2P_LEARN, "maybe"));
	ASSERT_EQ(0, sysfs_read(P2P_LEARN, after, sizeof(after)));
	EXPECT_STREQ(before, after);
}

TEST_F(model, override_wins)
{
	/* A copy of RSZ at 100 MB/s: about 10 ms. */
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "100"));

	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_cost_ns", DMA_FREE));
	EXPECT_EQ(1, read_by_dma(_metadata, self, 0, 0));
	/* The learned model says DMA; the override says copy. */
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", DMA_SLOW));
	EXPECT_EQ(0, read_by_dma(_metadata, self, 0, RSZ));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", "auto"));
	EXPECT_EQ(1, read_by_dma(_metadata, self, 0, 2 * RSZ));

	/* The provider's override against what it learned. */
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "auto"));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", DEFAULT_COST_NS));
	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_mbps", "1"));
	EXPECT_EQ(1, read_by_dma(_metadata, self, 0, 3 * RSZ));
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "1000000"));
	EXPECT_EQ(0, read_by_dma(_metadata, self, 0, 4 * RSZ));
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "auto"));
	/* That one copy moved the learned 1 MB/s a step: still far slower. */
	EXPECT_EQ(1, read_by_dma(_metadata, self, 0, 5 * RSZ));
}

TEST_F(model, learn_off)
{
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "100"));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_cost_ns", DMA_SLOW));
	EXPECT_EQ(0, read_by_dma(_metadata, self, 0, 0));
	/* The defaults: 1 MiB by DMA in 380 us, against 10 ms. */
	ASSERT_EQ(0, sysfs_write(P2P_LEARN, "0"));
	EXPECT_EQ(1, read_by_dma(_metadata, self, 0, RSZ));
	ASSERT_EQ(0, sysfs_write(P2P_LEARN, "1"));
	EXPECT_EQ(0, read_by_dma(_metadata, self, 0, 2 * RSZ));
}

TEST_F_TIMEOUT(model, learns_copy_rates, 120)
{
	long long before, after, p0, w0;
	int i, wfd;

	/* Copies into device memory: every read is copied. */
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", DMA_SLOW));
	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_mbps", "1000000"));
	for (i = 0; i < CONVERGE; i++) {
		ASSERT_EQ(0, read_by_dma(_metadata, self, 0,
					 (off_t)(i % (REGION / RSZ)) * RSZ));
	}
	after = pread_knob(self, "learned_copy_mbps");
	TH_LOG("learned_copy_mbps 1000000 -> %lld in %d copies", after, i);
	EXPECT_GT(1000000 / 8, after);

	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_mbps", "1"));
	for (i = 0; i < CONVERGE; i++) {
		ASSERT_EQ(0, read_by_dma(_metadata, self, 0,
					 (off_t)(i % (REGION / RSZ)) * RSZ));
	}
	after = pread_knob(self, "learned_copy_mbps");
	TH_LOG("learned_copy_mbps 1 -> %lld in %d copies", after, i);
	EXPECT_LT(8, after);

	/*
	 * Copies out of device memory: a routed write over dirty folios
	 * updates them in place, through the page cache, as a buffered write
	 * would.  The override keeps the router taking the writes.
	 */
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", "auto"));
	ASSERT_EQ(0, pwrite_knob(self, "copy_from_mbps", "1"));
	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_from_mbps", "1000000"));
	before = pread_knob(self, "learned_copy_from_mbps");
	wfd = open(self->path[0], O_RDWR);
	ASSERT_LE(0, wfd);
	p0 = router_stat("cache_write_bytes");
	w0 = router_stat("routed_writes");
	for (i = 0; i < CONVERGE; i++) {
		off_t off = (off_t)(i % (REGION / RSZ)) * RSZ;

		pattern_fill(self->ref, RSZ, off, self->seed);
		/* Dirty in the page cache: the next write must update it. */
		ASSERT_EQ(RSZ, pwrite(wfd, self->ref, RSZ, off));
		memcpy(self->dev, self->ref, RSZ);
		ASSERT_EQ(RSZ, pwrite(wfd, self->dev, RSZ, off));
	}
	ASSERT_EQ(0, fsync(wfd));
	close(wfd);
	EXPECT_EQ(CONVERGE, router_stat("routed_writes") - w0);
	EXPECT_EQ((long long)CONVERGE * RSZ,
		  router_stat("cache_write_bytes") - p0);
	after = pread_knob(self, "learned_copy_from_mbps");
	TH_LOG("learned_copy_from_mbps %lld -> %lld in %d writes", before,
	       after, i);
	EXPECT_GT(before / 8, after);
}

/*
 * Read the cached region of drive 0 into device memory, 1 MiB at a time,
 * from one CPU, whose probe credit is all the reads earn ("Probing" in
 * mm/p2p_model.c): until @moved() says the probe taught the model, or 4 GiB.
 * Returns the bytes read, or -1; the probes' bytes in *@probed.
 */
static long long probe_reads(struct __test_metadata *_metadata,
			     FIXTURE_DATA(model) *self, const char *stat,
			     bool (*moved)(FIXTURE_DATA(model) *self),
			     long long *probed)
{
	long long p0 = router_stat(stat), n = 0;
	struct dec dec;
	cpu_set_t cpu;

	CPU_ZERO(&cpu);
	CPU_SET(0, &cpu);
	if (sched_setaffinity(0, sizeof(cpu), &cpu))
		return -1;
	while (n < 4096LL * RSZ && !moved(self)) {
		if (routed_read(_metadata, self, 0, n % REGION, &dec))
			return -1;
		n += RSZ;
	}
	*probed = router_stat(stat) - p0;
	return n;
}

/*
 * What probe_reads() did: @n bytes read, @probed of them by probes, which
 * moved the counter @path (from @path0) of the path they took.  There
 * were probes (the premise), they took that path, and they were paid for:
 * the path probed being predicted the slower, within 1/128 of the bytes.
 */
static void probe_judge(struct __test_metadata *_metadata, long long n,
			long long probed, const char *path, long long path0)
{
	long long moved = router_stat(path) - path0;

	TH_LOG("%lld MiB read, %lld MiB of it probed (%s +%lld MiB)", n / MiB,
	       probed / MiB, path, moved / MiB);
	ASSERT_LT(0, n);
	ASSERT_LT(0, probed);
	EXPECT_LE(probed, moved);
	EXPECT_GE((n + RSZ) / 128, probed);
}

/*
 * The seed below: a DMA of 1 MiB twice a copy at 100 MB/s, ten times
 * what the rig's drives take.
 */
#define SLOW_1M		20000000LL

static bool dma_moved(FIXTURE_DATA(model) *self)
{
	return learned_ns(self, 0, RSZ) < SLOW_1M * 7 / 8;
}

/*
 * The plan copies every cached read: the drive was learned twice as slow
 * as a copy.  Each read earns 1/128 of its predicted copy, and a probe
 * spends its predicted DMA: about one read in 256 is read by DMA instead,
 * whole.  Once a batch of probes is in, the 1 MiB class has moved towards
 * what the drive really takes.
 */
TEST_F_TIMEOUT(model, probe_dma, 180)
{
	long long n, probed, p0;

	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "100"));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_cost_ns",
			    "4096:2000000 1048576:20000000 8388608:160000000"));
	ASSERT_EQ(SLOW_1M, learned_ns(self, 0, RSZ));
	p0 = router_stat("p2p_bytes");
	ASSERT_EQ(0, read_by_dma(_metadata, self, 0, 0));
	n = probe_reads(_metadata, self, "probe_dma_bytes", dma_moved,
			&probed);
	TH_LOG("1 MiB learned %lld -> %lld ns", SLOW_1M,
	       learned_ns(self, 0, RSZ));
	probe_judge(_metadata, n, probed, "p2p_bytes", p0);
	EXPECT_TRUE(dma_moved(self));
}

static bool copy_moved(FIXTURE_DATA(model) *self)
{
	return pread_knob(self, "learned_copy_mbps") > 100;
}

/*
 * The plan reads every cached range by DMA: copies were learned at
 * 100 MB/s, 10 ms for 1 MiB.  Each read earns 1/128 of its predicted DMA,
 * and a probe spends its predicted copy; the first moves the learned rate.
 */
TEST_F_TIMEOUT(model, probe_copy, 180)
{
	long long n, probed, c0;

	ASSERT_EQ(0, pwrite_knob(self, "learned_copy_mbps", "100"));
	c0 = router_stat("cache_bytes");
	ASSERT_EQ(1, read_by_dma(_metadata, self, 0, 0));
	n = probe_reads(_metadata, self, "probe_copy_bytes", copy_moved,
			&probed);
	TH_LOG("learned_copy_mbps 100 -> %lld",
	       pread_knob(self, "learned_copy_mbps"));
	probe_judge(_metadata, n, probed, "cache_bytes", c0);
	EXPECT_TRUE(copy_moved(self));
}

/* One small sequential read, in the read-ahead window of 128 KiB. */
#define SRSZ		(64 * KiB)
/*
 * A DMA of SRSZ predicted to take 10 ms, streaming at about 80 GB/s: ten
 * times what the rig's drives take, as the P-readahead rates seeded below
 * are a tenth of what they reach.
 */
#define DMA_10MS	"4096:10000000 131072:10000000 8388608:10100000"
/* And half that: a read left to the router every 640 or so, not 1280. */
#define DMA_5MS		"4096:5000000 131072:5000000 8388608:5100000"

static long long learned_ra(FIXTURE_DATA(model) *self, int d)
{
	char path[PATH_MAX];
	long long v;

	qfile(self, d, "p2p_learned_ra_mbps", path, sizeof(path));
	return sysfs_read_ll(path, &v) ? -1 : v;
}

/*
 * Read drive 0's file sequentially into device memory, SRSZ at a time,
 * from CPU 0, its cache dropped at the start of each pass so that every
 * read has the drive to read from: until @moved() says a probe taught the
 * model, or 3 GiB.  Every read is checked.  Returns the bytes read, or -1;
 * the bytes P-readahead served in *@ra.
 */
static long long seq_reads(struct __test_metadata *_metadata,
			   FIXTURE_DATA(model) *self,
			   bool (*moved)(FIXTURE_DATA(model) *self),
			   long long *ra)
{
	long long r0 = router_stat("ra_reads"), n = 0;
	cpu_set_t cpu;
	long diff;

	CPU_ZERO(&cpu);
	CPU_SET(0, &cpu);
	if (sched_setaffinity(0, sizeof(cpu), &cpu))
		return -1;
	while (n < 3072LL * MiB && !moved(self)) {
		off_t off = n % REGION;

		if (!off && posix_fadvise(self->fd[0], 0, 0,
					  POSIX_FADV_DONTNEED))
			return -1;
		if (pread(self->fd[0], self->dev, SRSZ, off) != SRSZ)
			return -1;
		pattern_fill(self->ref, SRSZ, off, self->seed);
		diff = first_diff(self->dev, self->ref, SRSZ);
		if (diff >= 0) {
			TH_LOG("at %lld: byte %ld differs", (long long)off,
			       diff);
			return -1;
		}
		n += SRSZ;
	}
	*ra = (router_stat("ra_reads") - r0) * SRSZ;
	return n;
}

static bool ra_moved(FIXTURE_DATA(model) *self)
{
	return learned_ra(self, 0) * 8 > 6 * 9;
}

/*
 * P-readahead is seeded far slower than it is (6 MB/s: 10.9 ms for a
 * 64 KiB read, against a DMA held to 10 ms by an override), so every
 * sequential read is DMAed and P-readahead would never be measured again.
 * Each read earns 1/128 of its predicted DMA; a probe is a run of 1 MiB
 * (four read-ahead windows would be 512 KiB) that waits for, and spends,
 * its predicted time: the reads it takes are within 1/128 of the bytes,
 * and once they are in the learned rate moves, after which P-readahead
 * serves the stream.
 */
TEST_F_TIMEOUT(model, probe_ra, 300)
{
	long long n, ra, probed, p0 = router_stat("probe_ra_bytes");
	long long d0 = router_stat("p2p_bytes");
	long diff;

	ASSERT_EQ(0, sysfs_write(P2P_RA_KB, "4096"));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_cost_ns", DMA_10MS));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_ra_mbps", "6"));
	n = seq_reads(_metadata, self, ra_moved, &ra);
	probed = router_stat("probe_ra_bytes") - p0;
	TH_LOG("%lld MiB read, %lld KiB by P-readahead, %lld KiB probed; learned %lld MB/s",
	       n / MiB, ra / KiB, probed / KiB, learned_ra(self, 0));
	ASSERT_LT(0, n);
	EXPECT_TRUE(ra_moved(self));
	ASSERT_LT(0, probed);
	/*
	 * The rate moves once a run is in, at its last read, and any move
	 * makes P-readahead win: until then every other read was DMAed.
	 */
	EXPECT_EQ(probed, ra);
	EXPECT_EQ(n - ra, router_stat("p2p_bytes") - d0);
	EXPECT_GE(n / 128, probed);

	/* The rate learned, the stream is P-readahead's, probes or not. */
	n = 16 * MiB;
	p0 = router_stat("ra_reads");
	ASSERT_EQ(0, posix_fadvise(self->fd[0], 0, 0, POSIX_FADV_DONTNEED));
	for (off_t off = 0; off < n; off += SRSZ) {
		ASSERT_EQ(SRSZ, pread(self->fd[0], self->dev, SRSZ, off));
		pattern_fill(self->ref, SRSZ, off, self->seed);
		diff = first_diff(self->dev, self->ref, SRSZ);
		ASSERT_GT(0, diff) TH_LOG("at %lld: byte %ld differs",
					  (long long)off, diff);
	}
	ra = (router_stat("ra_reads") - p0) * SRSZ;
	TH_LOG("then %lld of %lld KiB by P-readahead, learned %lld MB/s",
	       ra / KiB, n / KiB, learned_ra(self, 0));
	EXPECT_LE(n * 9 / 10, ra);
}

static bool ra_dma_moved(FIXTURE_DATA(model) *self)
{
	return learned_ns(self, 0, 131072) < 5000000 * 7 / 8;
}

/*
 * The other way: DMAs of 64 KiB seeded at 5 ms, P-readahead at 20 MB/s
 * (3.3 ms), so the stream is P-readahead's and the class of 64 KiB would
 * never be measured.  Each P-readahead read earns 1/128 of its predicted
 * time; once that covers a read's predicted DMA, the read is left to the
 * router (probe_ra_dma_bytes), which reads it by DMA, cached or not.  A
 * batch of those moves the 128 KiB class, and with it the 4 KiB class,
 * seeded as slow, which would otherwise hold it up.
 */
TEST_F_TIMEOUT(model, probe_ra_dma, 600)
{
	long long n, ra, d0 = router_stat("p2p_bytes");
	long long c0 = router_stat("cache_bytes");
	long long h0 = router_stat("probe_ra_dma_bytes");

	ASSERT_EQ(0, sysfs_write(P2P_RA_KB, "4096"));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_cost_ns", DMA_5MS));
	ASSERT_EQ(0, qwrite(self, 0, "p2p_learned_ra_mbps", "20"));
	n = seq_reads(_metadata, self, ra_dma_moved, &ra);
	d0 = router_stat("p2p_bytes") - d0;
	c0 = router_stat("cache_bytes") - c0;
	h0 = router_stat("probe_ra_dma_bytes") - h0;
	TH_LOG("%lld MiB read, %lld KiB by P-readahead, %lld KiB left to the router: %lld KiB by DMA, %lld KiB copied; 4 KiB and 128 KiB classes %lld %lld ns, P-readahead %lld MB/s",
	       n / MiB, ra / KiB, h0 / KiB, d0 / KiB, c0 / KiB,
	       learned_ns(self, 0, 4096), learned_ns(self, 0, 131072),
	       learned_ra(self, 0));
	ASSERT_LT(0, n);
	EXPECT_TRUE(ra_dma_moved(self));
	ASSERT_LT(0, d0);
	/*
	 * Every read not P-readahead's was left to the router, which DMAs
	 * it (on ext4), but for the cached part of a read with a hole,
	 * which it copies.
	 */
	EXPECT_EQ(h0, d0 + c0);
	EXPECT_EQ(n, ra + d0 + c0);
	/*
	 * A read is left to the router for its predicted DMA, earned at
	 * 1/128 of P-readahead's predicted time, which is less; the router
	 * earns 1/128 of its own plan too.
	 */
	EXPECT_GE(n / 128 + n / 128 / 128 + SRSZ, h0);
}

/* Into a new cgroup with the io controller, for io.max. */
/*
 * A size class that has learned nothing takes the default scaled as the
 * nearest class that has learned differs from the default: 1 MiB DMAs
 * teach the 1 MiB class, and the 4 KiB, 128 KiB and 8 MiB classes move
 * with it.
 */
TEST_F_TIMEOUT(model, unlearned_classes_scale, 120)
{
	static const long long sizes[4] = { 4096, 131072, 1048576, 8388608 };
	long long def[4], got[4], want;
	int i;

	/*
	 * A default ten times the built-in one, far slower than the rig's
	 * drives, so that the 1 MiB class must learn; copies slower still,
	 * so that every read is a DMA.
	 */
	ASSERT_EQ(0, sysfs_write(P2P_COST_NS,
				 "4096:800000 131072:1200000 1048576:3800000"));
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "100"));
	for (i = 0; i < 4; i++) {
		def[i] = learned_ns(self, 0, sizes[i]);
		ASSERT_LT(0, def[i]);
	}
	for (i = 0; i < CONVERGE; i++) {
		ASSERT_EQ(1, read_by_dma(_metadata, self, 0, (off_t)i * RSZ)) {
			TH_LOG("read %d copied", i);
		}
	}
	for (i = 0; i < 4; i++)
		got[i] = learned_ns(self, 0, sizes[i]);
	TH_LOG("default %lld %lld %lld %lld, learned %lld %lld %lld %lld ns",
	       def[0], def[1], def[2], def[3], got[0], got[1], got[2],
	       got[3]);
	/* The premise: the 1 MiB class learned a faster drive. */
	ASSERT_GT(def[2] * 7 / 8, got[2]);
	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		want = def[i] * got[2] / def[2];
		EXPECT_GE(want / 100 + 1, llabs(got[i] - want)) {
			TH_LOG("%lld bytes: %lld ns, scaled default %lld",
			       sizes[i], got[i], want);
		}
	}
}

static int cgroup_enter(FIXTURE_DATA(model) *self)
{
	int ret = cg_io_enter(CG);

	self->in_cgroup = true;
	return ret;
}

static int throttle(FIXTURE_DATA(model) *self, int d, const char *rbps)
{
	return cg_io_max(CG, self->ns[d], rbps);
}

/*
 * Two drives, the same provider, the same cached bytes: the decision
 * follows what each drive is for the reader.  Copies run at 200 MB/s by
 * override, so 1 MiB costs 5 ms to copy; QEMU's DMA takes well under
 * that, until io.max holds this process to 4 MiB/s on drive 0 (250 ms for
 * 1 MiB).  From the next read on, its reads of drive 0 are planned with
 * the limit ("DOC: Limited readers") and copied, without a DMA to learn
 * it from, and they teach drive 0's model nothing; drive 1's stay DMAs.
 */
TEST_F_TIMEOUT(model, throttled_drive, 180)
{
	int i, d, dma, first_copy = -1;
	long long before[2];

	ASSERT_EQ(0, cgroup_enter(self))
		TH_LOG("cannot use cgroup v2 io.max");
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "200"));

	for (i = 0; i < CONVERGE; i++) {
		for (d = 0; d < 2; d++) {
			ASSERT_EQ(1, read_by_dma(_metadata, self, d,
						 (off_t)(i % (REGION / RSZ)) * RSZ)) {
				TH_LOG("warm-up read %d of %s copied", i,
				       self->ns[d]);
			}
		}
	}
	for (d = 0; d < 2; d++) {
		before[d] = learned_ns(self, d, RSZ);
		TH_LOG("%s learned 1 MiB: %lld ns", self->ns[d], before[d]);
		EXPECT_GT(5000000, before[d]);
	}

	ASSERT_EQ(0, throttle(self, 0, "4194304"));
	for (i = 0; i < CONVERGE; i++) {
		off_t off = (off_t)(i % (REGION / RSZ)) * RSZ;

		dma = read_by_dma(_metadata, self, 0, off);
		ASSERT_LE(0, dma);
		if (!dma && first_copy < 0)
			first_copy = i;
		EXPECT_EQ(0, dma)
			TH_LOG("read %d of the limited drive by DMA", i);
		EXPECT_EQ(1, read_by_dma(_metadata, self, 1, off))
			TH_LOG("read %d of the other drive copied", i);
	}
	TH_LOG("limited drive: first copy at read %d; "
	       "learned 1 MiB %lld -> %lld ns; other drive %lld -> %lld ns",
	       first_copy, before[0], learned_ns(self, 0, RSZ), before[1],
	       learned_ns(self, 1, RSZ));
	EXPECT_EQ(0, first_copy);
	/* Nothing learned from the limited reads: the drive is as it was. */
	EXPECT_EQ(before[0], learned_ns(self, 0, RSZ));
	EXPECT_GT(5000000, learned_ns(self, 1, RSZ));
}

/*
 * What the limited tenant of two_tenants saw, shared with its parent; the
 * two take turns (@turn: 1 the tenant's), so that the router's global
 * counters tell what each read did.
 */
struct tenant {
	int reads, slow, fast, bad, err;
	int stop, turn;
};

/* Wait for @t's turn to be @who (or a stop); false on a stop. */
static bool tenant_wait(struct tenant *t, int who)
{
	while (__atomic_load_n(&t->turn, __ATOMIC_ACQUIRE) != who) {
		if (__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE))
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * The limited tenant: in the cgroup, held to 4 MiB/s on drive 0, read
 * ranges of it that it first drops from the page cache, so that the router
 * must DMA them, into device memory of its own, 1 MiB at a time, until
 * told to stop; a read of over 100 ms was a DMA at the limit's pace.
 */
static void tenant_main(FIXTURE_DATA(model) *self, struct tenant *t)
{
	unsigned char *dev = p2pmem_map(self->provider, RSZ);
	unsigned char *ref = malloc(RSZ);
	int i;

	if (!dev || !ref || cg_io_enter(CG) || throttle(self, 0, "4194304")) {
		t->err = 1;
		_exit(1);
	}
	for (i = 0; i < 400 && tenant_wait(t, 1); i++) {
		off_t off = REGION / 2 + (off_t)(i % 8) * RSZ;
		double t0, dt;

		posix_fadvise(self->fd[0], off, RSZ, POSIX_FADV_DONTNEED);
		memset(dev, POISON, RSZ);
		t0 = now_sec();
		if (pread(self->fd[0], dev, RSZ, off) != RSZ) {
			t->err = 2;
			break;
		}
		dt = now_sec() - t0;
		pattern_fill(ref, RSZ, off, self->seed);
		t->bad += first_diff(dev, ref, RSZ) >= 0;
		t->slow += dt > 0.1;
		t->fast += dt < 0.05;
		__atomic_store_n(&t->reads, i + 1, __ATOMIC_RELEASE);
		__atomic_store_n(&t->turn, 0, __ATOMIC_RELEASE);
	}
	_exit(0);
}

/*
 * Two tenants of one drive.  A child in a cgroup that io.max holds to
 * 4 MiB/s on drive 0 reads uncached ranges into device memory, by DMA at
 * the limit's pace, 16 of them, more than would move a model it taught;
 * between them this process, with no limit, reads cached ones.  Its reads
 * stay DMAs and the drive's model stays the drive's: the limited tenant
 * does not teach the others its limit.
 */
TEST_F_TIMEOUT(model, two_tenants, 180)
{
	int i, copied = 0, reads = 0, status;
	long long before;
	struct tenant *t;
	double t0;
	pid_t pid;

	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, t);
	memset(t, 0, sizeof(*t));
	ASSERT_EQ(0, pwrite_knob(self, "copy_mbps", "200"));
	for (i = 0; i < CONVERGE; i++)
		ASSERT_EQ(1, read_by_dma(_metadata, self, 0, (off_t)(i % 8) * RSZ));
	before = learned_ns(self, 0, RSZ);
	ASSERT_GT(5000000, before);

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		tenant_main(self, t);
	/* Until the tenant has made CONVERGE slow DMAs; at most 120 s. */
	t0 = now_sec();
	while (now_sec() - t0 < 120 && !t->err) {
		int dma;

		/* The tenant's read, then ours. */
		__atomic_store_n(&t->turn, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&t->turn, __ATOMIC_ACQUIRE) &&
		       waitpid(pid, &status, WNOHANG) == 0)
			usleep(1000);
		if (__atomic_load_n(&t->turn, __ATOMIC_ACQUIRE))
			break;	/* it is gone */
		dma = read_by_dma(_metadata, self, 0, (off_t)(reads % 8) * RSZ);
		if (dma < 0)
			break;
		copied += !dma;
		reads++;
		if (t->slow >= CONVERGE)
			break;
	}
	__atomic_store_n(&t->stop, 1, __ATOMIC_RELEASE);
	waitpid(pid, &status, 0);
	EXPECT_EQ(0, throttle(self, 0, "max"));
	TH_LOG("limited tenant: %d reads, %d slow (DMA at 4 MiB/s), %d fast, %d bad, error %d; "
	       "this one: %d reads, %d copied; drive's 1 MiB class %lld -> %lld ns",
	       t->reads, t->slow, t->fast, t->bad, t->err, reads, copied, before,
	       learned_ns(self, 0, RSZ));
	ASSERT_EQ(0, t->err);
	EXPECT_EQ(0, t->bad);
	/* The premise: enough slow DMAs to move a model they taught. */
	ASSERT_LE(CONVERGE, t->slow);
	EXPECT_EQ(0, copied);
	EXPECT_GT(5000000, learned_ns(self, 0, RSZ));
	munmap(t, sizeof(*t));
}

TEST_HARNESS_MAIN
