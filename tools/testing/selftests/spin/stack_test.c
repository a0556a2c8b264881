// SPDX-License-Identifier: GPL-2.0
/*
 * P2PDMA through stacked block devices: md raid0, raid1, raid10, raid5
 * and linear, dm-linear and dm-stripe, XFS on md raid0, the NVMe
 * multipath head, and arrays with a member that cannot take P2PDMA pages.
 *
 * A stack advertises queue/pci_p2pdma only if it passes data through
 * untouched and all members do; O_DIRECT into device memory then
 * returns the right bytes, and otherwise fails with EREMOTEIO before any
 * member sees a P2PDMA page.  Every read is checked against a reference
 * read into RAM.
 *
 * raid1 and raid10 with --failfast members stay healthy when a read into
 * device memory that no member can reach is refused: the router learns
 * that before it submits and copies instead (fallback_unreachable, not
 * one DMA), and O_DIRECT fails with EREMOTEIO.  A dm table reload
 * (linear to zero) and an md level change (raid1 to raid5) under P2P
 * reads in flight give each read an error or the right bytes (each
 * sector the drive's data or, after the swap to dm-zero, zeros), and no
 * crash or warning.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* O_DIRECT; lib.mk passes it too */
#endif
#include <linux/dm-ioctl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/sysmacros.h>
#include <stddef.h>
#include <time.h>

#include "spin_util.h"
#include "../kselftest_harness.h"

#define DATA_SIZE	(16 * MiB + 3 * 4 * KiB + 100)
#define MAP_LEN		(16 * MiB)
#define MD		"/dev/md0"
#define DM_NAME		"spin-stack"
#define DM		"/dev/mapper/" DM_NAME
#define LOOP_FILE	"/tmp/spin-loop.img"
#define MNT		"/mnt/spin-stack"
#define MD_SYS		"/sys/block/md0/md"
/* Members of redundant arrays: 64 MiB each, so that a rebuild is short. */
#define MIRROR_SIZE_KB	"65536"

enum stack_kind { MD_ARRAY, DM_TABLE };

FIXTURE(stack) {
	char dev[64];		/* the stacked device */
	char path[PATH_MAX];	/* what is read: the device or a file on it */
	char nvme[3][NAME_MAX + 1];
	char loop[32];
	uint64_t seed;
	bool mounted;
};

FIXTURE_VARIANT(stack) {
	enum stack_kind kind;
	const char *level;	/* md level, or dm target */
	int members;		/* rig drives used */
	bool loop_member;	/* add a loop device: cannot take P2PDMA pages */
	const char *fs;		/* a file system on top, or NULL */
	bool p2p;		/* expected queue/pci_p2pdma */
	bool p2p_write;		/* O_DIRECT writes from device memory work */
	bool redundant;		/* raid1/10/5: survives a failed member */
};

FIXTURE_VARIANT_ADD(stack, md_raid0) {
	.kind = MD_ARRAY, .level = "0", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, md_raid0_3) {
	.kind = MD_ARRAY, .level = "0", .members = 3, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, md_linear) {
	.kind = MD_ARRAY, .level = "linear", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, md_raid1) {
	.kind = MD_ARRAY, .level = "1", .members = 2, .p2p = true,
	.p2p_write = true, .redundant = true };
FIXTURE_VARIANT_ADD(stack, md_raid10) {
	.kind = MD_ARRAY, .level = "10", .members = 3, .p2p = true,
	.p2p_write = true, .redundant = true };
FIXTURE_VARIANT_ADD(stack, md_raid5) {
	.kind = MD_ARRAY, .level = "5", .members = 3, .p2p = false,
	.redundant = true };
FIXTURE_VARIANT_ADD(stack, md_raid0_loop) {
	.kind = MD_ARRAY, .level = "0", .members = 1, .loop_member = true,
	.p2p = false };
FIXTURE_VARIANT_ADD(stack, dm_linear) {
	.kind = DM_TABLE, .level = "linear", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, dm_stripe) {
	.kind = DM_TABLE, .level = "striped", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, dm_linear_loop) {
	.kind = DM_TABLE, .level = "linear", .members = 1, .loop_member = true,
	.p2p = false };
FIXTURE_VARIANT_ADD(stack, xfs_on_md_raid0) {
	.kind = MD_ARRAY, .level = "0", .members = 2, .fs = "xfs", .p2p = true,
	.p2p_write = true };

static void teardown_stacks(const char *loop)
{
	umount2(MNT, MNT_DETACH);
	md_stop_ours(MD);
	run_cmd("dmsetup remove --noudevsync " DM_NAME " 2>/dev/null");
	if (loop && loop[0])
		loop_detach(loop);
	unlink(LOOP_FILE);
}

FIXTURE_SETUP(stack)
{
	char cmd[1024], members[512] = "";
	int i, n, fd;

	router_learned_reset();	/* each case starts from defaults */
	setenv("DM_DISABLE_UDEV", "1", 1);
	for (i = 0; i < variant->members; i++)
		SPIN_NEED(!nvme_rig_ns(i, self->nvme[i], sizeof(self->nvme[i])),
			  SPIN_RIG_DRIVE_FMT, i, variant->members);
	teardown_stacks(NULL);
	self->seed = getpid();

	if (variant->loop_member) {
		fd = open(LOOP_FILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, ftruncate(fd, 1024 * MiB));
		close(fd);
		ASSERT_EQ(0, loop_attach(LOOP_FILE, self->loop,
					 sizeof(self->loop)));
	}

	for (i = 0; i < variant->members; i++) {
		size_t l = strlen(members);

		xsnprintf(members + l, sizeof(members) - l, " /dev/%s",
			  self->nvme[i]);
	}
	if (variant->loop_member) {
		size_t l = strlen(members);

		xsnprintf(members + l, sizeof(members) - l, " %s", self->loop);
	}
	n = variant->members + variant->loop_member;

	if (variant->kind == MD_ARRAY) {
		/* The same list of members again, the loop device not wiped. */
		ASSERT_EQ(0, md_create(MD, variant->members, self->nvme,
				       variant->loop_member ? self->loop : NULL,
				       members, sizeof(members), "--level=%s%s",
				       variant->level,
				       variant->redundant ?
				       " --size=" MIRROR_SIZE_KB : ""));
		snprintf(self->dev, sizeof(self->dev), "%s", MD);
	} else if (!strcmp(variant->level, "striped")) {
		/* 64 KiB chunks over the members */
		xsnprintf(cmd, sizeof(cmd),
			  "dmsetup create --noudevsync " DM_NAME
			  " --table '0 %lu striped %d 128 /dev/%s 0 /dev/%s 0'",
			  2 * 1024 * MiB / 512 * 1, n, self->nvme[0], self->nvme[1]);
		ASSERT_EQ(0, run_cmd(cmd));
		snprintf(self->dev, sizeof(self->dev), "%s", DM);
	} else {
		/* The first member holds 4 MiB, the second the rest. */
		const char *second = variant->loop_member ? self->loop : NULL;
		char second_dev[NAME_MAX + 8];

		if (!second) {
			snprintf(second_dev, sizeof(second_dev), "/dev/%s",
				 self->nvme[1]);
			second = second_dev;
		}
		xsnprintf(cmd, sizeof(cmd),
			  "printf '0 8192 linear /dev/%s 0\\n"
			  "8192 1048576 linear %s 8192\\n' | dmsetup create --noudevsync " DM_NAME,
			  self->nvme[0], second);
		ASSERT_EQ(0, run_cmd(cmd));
		snprintf(self->dev, sizeof(self->dev), "%s", DM);
	}

	if (variant->fs) {
		ASSERT_EQ(0, mkfs_mount(variant->fs, self->dev + 5, MNT));
		self->mounted = true;
		snprintf(self->path, sizeof(self->path), MNT "/data");
		fd = open(self->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else {
		snprintf(self->path, sizeof(self->path), "%s", self->dev);
		fd = open(self->path, O_RDWR);
	}
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, DATA_SIZE, self->seed));
	close(fd);
	ASSERT_EQ(0, drop_caches());
	TH_LOG("%s over%s", self->path, members);
}

FIXTURE_TEARDOWN(stack)
{
	teardown_stacks(self->loop);
}

/* queue/pci_p2pdma of the top device, or -1 (it is 0 or 1) */
static int queue_p2p(const char *dev)
{
	char path[128];
	struct stat st;
	long long v;

	if (stat(dev, &st) || !S_ISBLK(st.st_mode))
		return -1;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/pci_p2pdma",
		 major(st.st_rdev), minor(st.st_rdev));
	return sysfs_read_ll(path, &v) ? -1 : v;
}

TEST_F_TIMEOUT(stack, feature_flag, 120)
{
	char dev[64];
	int i;

	for (i = 0; i < variant->members; i++) {
		snprintf(dev, sizeof(dev), "/dev/%s", self->nvme[i]);
		ASSERT_EQ(1, queue_p2p(dev));
	}
	if (variant->loop_member)
		ASSERT_EQ(0, queue_p2p(self->loop));
	ASSERT_EQ(variant->p2p, queue_p2p(self->dev));
}

static int ref_check(struct __test_metadata *_metadata, const char *path,
		     uint64_t seed, void *buf, size_t len, off_t off)
{
	int fd = open(path, O_RDONLY);
	void *want = malloc(len);
	ssize_t n;

	EXPECT_LE(0, fd);
	n = pread(fd, buf, len, off);
	close(fd);
	EXPECT_EQ((ssize_t)len, n);
	if (want) {
		pattern_fill(want, len, off, seed);
		EXPECT_EQ(-1, first_diff(buf, want, len));
	}
	free(want);
	return n == (ssize_t)len ? 0 : -1;
}

/*
 * O_DIRECT into device memory behind the members' switch: the right
 * bytes when the stack advertises P2PDMA, EREMOTEIO (and no member I/O
 * with P2PDMA pages) when it does not.
 */
TEST_F_TIMEOUT(stack, odirect_read, 180)
{
	static const struct { size_t len; off_t off; } cases[] = {
		{ 4 * KiB, 0 },
		{ 1 * MiB, 512 * KiB - 4 * KiB },	/* across a chunk */
		{ 4 * MiB, 2 * MiB },			/* across dm-linear's seam */
		{ 8 * MiB, 4 * KiB },
	};
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	unsigned int i;
	int fd;

	SPIN_NEED(!p2pmem_find_for_ns(self->nvme[0], true, provider,
				      sizeof(provider)),
		  "a provider that %s reaches: none published", self->nvme[0]);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(MAP_LEN);
	ASSERT_NE(NULL, ref);
	fd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len = cases[i].len;
		ssize_t n;

		ASSERT_EQ(0, ref_check(_metadata, self->path, self->seed, ref,
				       len, cases[i].off));
		memset(dev, POISON, len);
		n = pread(fd, dev, len, cases[i].off);
		TH_LOG("%zu bytes at %lld: %zd (%s)", len,
		       (long long)cases[i].off, n, n < 0 ? strerror(errno) : "");
		if (variant->p2p) {
			ASSERT_EQ((ssize_t)len, n);
			ASSERT_EQ(-1, first_diff(dev, ref, len));
		} else {
			ASSERT_EQ(-1, n);
			ASSERT_EQ(EREMOTEIO, errno);
		}
	}
	close(fd);
	munmap(dev, MAP_LEN);
	free(ref);
}

/*
 * A provider no member can reach: EREMOTEIO, never wrong data, and an md
 * array stays healthy (a refused DMA mapping is not a media error).
 */
TEST_F_TIMEOUT(stack, unreachable_odirect, 180)
{
	char provider[SYSFS_LEN], path[PATH_MAX];
	unsigned char *dev, *ref;
	size_t len = 1 * MiB;
	long long degraded;
	ssize_t n;
	int fd;

	SPIN_NEED(!p2pmem_find_for_ns(self->nvme[0], false, provider,
				      sizeof(provider)),
		  "a provider that %s cannot reach: none published",
		  self->nvme[0]);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, ref_check(_metadata, self->path, self->seed, ref, len, 0));

	fd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memset(dev, POISON, len);
	n = pread(fd, dev, len, 0);
	if (n < 0) {
		ASSERT_EQ(EREMOTEIO, errno);
	} else {
		ASSERT_EQ((ssize_t)len, n);
		ASSERT_EQ(-1, first_diff(dev, ref, len));
	}
	close(fd);

	if (variant->kind == MD_ARRAY) {
		snprintf(path, sizeof(path), "/sys/block/md0/md/degraded");
		if (!access(path, F_OK)) {
			ASSERT_EQ(0, sysfs_read_ll(path, &degraded));
			ASSERT_EQ(0, degraded);
		}
	}
	munmap(dev, len);
	free(ref);
}

/* A plain pread into device memory returns the right bytes on any stack. */
TEST_F_TIMEOUT(stack, buffered_read, 180)
{
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	size_t len = 3 * MiB + 17;
	off_t off = 12345;
	ssize_t n;
	int fd;

	SPIN_NEED(!p2pmem_find_for_ns(self->nvme[0], true, provider,
				      sizeof(provider)),
		  "a provider that %s reaches: none published", self->nvme[0]);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, ref_check(_metadata, self->path, self->seed, ref, len, off));
	ASSERT_EQ(0, drop_caches());

	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	memset(dev, POISON, len);
	n = pread(fd, dev, len, off);
	ASSERT_EQ((ssize_t)len, n);
	ASSERT_EQ(-1, first_diff(dev, ref, len));
	close(fd);
	munmap(dev, MAP_LEN);
	free(ref);
}

/*
 * O_DIRECT writes from device memory: the data lands where a buffered
 * read finds it.  Stacks without P2PDMA refuse them with EREMOTEIO, and
 * nothing changes.  (raid1 and raid10 leg by leg: the mirror tests.)
 */
TEST_F_TIMEOUT(stack, odirect_write, 180)
{
	char provider[SYSFS_LEN];
	size_t len = 2 * MiB;
	off_t off = 1 * MiB + 8 * KiB;
	unsigned char *dev, *ref;
	long long degraded;
	ssize_t n;
	int fd;

	SPIN_NEED(!p2pmem_find_for_ns(self->nvme[0], true, provider,
				      sizeof(provider)),
		  "a provider that %s reaches: none published", self->nvme[0]);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);

	pattern_fill(dev, len, off, self->seed + 1);
	fd = open(self->path, O_RDWR | O_DIRECT);
	ASSERT_LE(0, fd);
	n = pwrite(fd, dev, len, off);
	TH_LOG("pwrite: %zd (%s)", n, n < 0 ? strerror(errno) : "");
	if (variant->p2p_write) {
		ASSERT_EQ((ssize_t)len, n);
	} else {
		ASSERT_EQ(-1, n);
		ASSERT_EQ(EREMOTEIO, errno);
	}
	ASSERT_EQ(0, fsync(fd));
	close(fd);
	ASSERT_EQ(0, drop_caches());

	/* What is there now: the new bytes, or the old ones untouched. */
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)len, pread(fd, ref, len, off));
	close(fd);
	if (variant->p2p_write) {
		ASSERT_EQ(-1, first_diff(ref, dev, len));
	} else {
		pattern_fill(dev, len, off, self->seed);
		ASSERT_EQ(-1, first_diff(ref, dev, len));
	}
	if (variant->kind == MD_ARRAY && !access("/sys/block/md0/md/degraded", F_OK)) {
		ASSERT_EQ(0, sysfs_read_ll("/sys/block/md0/md/degraded",
					   &degraded));
		ASSERT_EQ(0, degraded);
	}
	munmap(dev, len);
	free(ref);
}

/* md0's sync_action ("idle", "recover", ...) is @what. */
static bool md_action_is(const char *what)
{
	char buf[64];

	return !sysfs_read(MD_SYS "/sync_action", buf, sizeof(buf)) &&
	       !strcmp(buf, what);
}

/*
 * Wait, 100 ms at a time and at most @tries times, until md0's
 * sync_action is @what (@is) or is no longer @what (!@is), or until
 * *@during, unless @during is NULL, counts 10 writes that raced it.
 */
static void md_wait_action(const char *what, bool is, int tries,
			   const int *during)
{
	int i;

	for (i = 0; i < tries && !(during && *during >= 10) &&
	     md_action_is(what) != is; i++)
		usleep(100000);
}

/*
 * How far md0's recovery has come, in KiB, from /proc/mdstat's
 * "recovery = x% (done/total)": finer than md/sync_completed, which moves
 * in sixteenths of the device.  -1 when no recovery is shown.
 */
static long long md_recovery_pos(void)
{
	char buf[4096], *p, *q, *next;
	long long done;

	if (sysfs_read("/proc/mdstat", buf, sizeof(buf)))
		return -1;
	p = strstr(buf, "md0 :");
	if (!p)
		return -1;
	next = strstr(p + 1, "\nmd");
	q = strstr(p, "recovery =");
	if (!q || (next && q > next))
		return -1;
	q = strchr(q, '(');
	if (!q || sscanf(q + 1, "%lld/", &done) != 1)
		return -1;
	return done;
}

/*
 * Lift the throttle a test put on md's resync or rebuild; a high
 * sync_speed_min keeps md from slowing it down for the test's own I/O.
 */
static void md_unthrottle(struct __test_metadata *_metadata)
{
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_max", "system"));
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "100000"));
}

/* The read counters member_failure() watches, and their deltas. */
struct mf_stats {
	long long routed, p2p, no_queue;
};

static void mf_stats_read(struct mf_stats *s)
{
	s->routed = router_stat("routed_reads");
	s->p2p = router_stat("p2p_bytes");
	s->no_queue = router_stat("fallback_no_p2p_queue");
}

static void mf_stats_since(const struct mf_stats *b, struct mf_stats *d)
{
	struct mf_stats a;

	mf_stats_read(&a);
	d->routed = a.routed - b->routed;
	d->p2p = a.p2p - b->p2p;
	d->no_queue = a.no_queue - b->no_queue;
}

/*
 * The premise of a phase of member_failure(): every pread() since @before
 * was routed and went by DMA (raid1, raid10), or was handed back to the
 * page cache because the array takes no P2PDMA pages (raid5).  Starts the
 * next phase.
 */
static void phase_check(struct __test_metadata *_metadata,
			const FIXTURE_VARIANT(stack) *variant,
			const char *what, int *routed, struct mf_stats *before,
			size_t len)
{
	struct mf_stats d;

	mf_stats_since(before, &d);
	TH_LOG("%s: %d reads routed: routed_reads %lld, p2p_bytes %lld, fallback_no_p2p_queue %lld",
	       what, *routed, d.routed, d.p2p, d.no_queue);
	ASSERT_LT(0, *routed);
	if (variant->p2p) {
		ASSERT_LE(*routed, d.routed);
		ASSERT_LE((long long)*routed * (long long)len, d.p2p);
	} else {
		ASSERT_LE(*routed, d.no_queue);
	}
	*routed = 0;
	mf_stats_read(before);
}

/*
 * A redundant array keeps serving reads into device memory, with the
 * right bytes, while a member fails, while degraded, and while the member
 * is rebuilt: the rebuild is slowed down (md/sync_speed_min and _max) so
 * that it is provably under way, and moving, during the reads; then it is
 * let go, must finish, and the reads go on.  The reads alternate between
 * O_DIRECT and plain pread() that the router takes, each from a range
 * dropped from the page cache first (and shown gone), with no read-ahead
 * around it, so that both reach the array.  raid1
 * and raid10 serve the routed reads by DMA; raid5 takes no P2PDMA pages,
 * and the router serves them through the page cache (fallback_no_p2p_queue)
 * where O_DIRECT would fail, so there it reads with pread() only.
 */
TEST_F_TIMEOUT(stack, member_failure, 450)
{
	char provider[SYSFS_LEN], cmd[1024];
	size_t len = 1 * MiB;
	unsigned char *dev, *ref;
	long long pos0, pos1, first_pos = -1, last_pos = -1, degraded;
	int fd, dfd = -1, i = 0, during = 0, after = 0, routed = 0;
	struct mf_stats before;
	bool rec0, rec1, done;
	double t0;

	if (!variant->redundant)
		SKIP(return, "not a redundant array");
	SPIN_NEED(!p2pmem_find_for_ns(self->nvme[0], true, provider,
				      sizeof(provider)),
		  "a provider that %s reaches: none published", self->nvme[0]);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	/* No read-ahead around the reads, no P-readahead taking them. */
	ASSERT_EQ(0, posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM));
	if (variant->p2p) {
		dfd = open(self->path, O_RDONLY | O_DIRECT);
		ASSERT_LE(0, dfd);
	}

#define READ_CHECK() do {						\
		off_t off = (i * 7 % 15) * MiB;				\
		bool direct = dfd >= 0 && i % 2;			\
									\
		pattern_fill(ref, len, off, self->seed);		\
		memset(dev, POISON, len);				\
		if (!direct) {						\
			ASSERT_EQ(0, posix_fadvise(fd, off, len,	\
						   POSIX_FADV_DONTNEED));	\
			ASSERT_EQ(0, resident_pages(fd, off, len));	\
		}							\
		ASSERT_EQ((ssize_t)len,					\
			  pread(direct ? dfd : fd, dev, len, off))	\
			TH_LOG("read %d at %lld", i, (long long)off);	\
		ASSERT_EQ(-1, first_diff(dev, ref, len))		\
			TH_LOG("read %d at %lld", i, (long long)off);	\
		routed += !direct;					\
		i++;							\
	} while (0)

	mf_stats_read(&before);
	for (; i < 5; )
		READ_CHECK();
	phase_check(_metadata, variant, "healthy", &routed, &before, len);
	xsnprintf(cmd, sizeof(cmd), "mdadm --quiet " MD " --fail /dev/%s",
		  self->nvme[1]);
	ASSERT_EQ(0, run_cmd(cmd));
	for (; i < 20; )
		READ_CHECK();
	ASSERT_EQ(0, sysfs_read_ll(MD_SYS "/degraded", &degraded));
	ASSERT_EQ(1, degraded);
	phase_check(_metadata, variant, "degraded", &routed, &before, len);

	/*
	 * About 1 MB/s: the 64 MiB rebuild would take a minute, which the
	 * reads cut short once 40 of them have seen it move; a read through
	 * raid5's page cache takes over a second on the debug kernel.
	 */
	ASSERT_EQ(0, sysfs_write(MD_SYS "/sync_speed_max", "1000"));
	ASSERT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "1000"));
	xsnprintf(cmd, sizeof(cmd),
		  "mdadm --quiet " MD
		  " --remove /dev/%s && mdadm --zero-superblock /dev/%s && mdadm --quiet " MD
		  " --add /dev/%s",
		  self->nvme[1], self->nvme[1], self->nvme[1]);
	ASSERT_EQ(0, run_cmd(cmd));

	/*
	 * Reads during the rebuild: ones that began and ended with
	 * sync_action "recover", until 40 of them have seen the recovery
	 * move on, or it ends, or 90 s pass.
	 */
	t0 = now_sec();
	while (now_sec() - t0 < 90) {
		rec0 = md_action_is("recover");
		pos0 = md_recovery_pos();
		READ_CHECK();
		rec1 = md_action_is("recover");
		pos1 = md_recovery_pos();
		if (rec0 && rec1 && pos0 >= 0 && pos1 >= 0) {
			during++;
			if (first_pos < 0)
				first_pos = pos0;
			last_pos = pos1;
		}
		if (during >= 40 && last_pos > first_pos)
			break;
		if (during && !rec1)
			break;
	}
	TH_LOG("%d reads during the rebuild, which went from %lld to %lld KiB meanwhile",
	       during, first_pos, last_pos);

	/*
	 * Let it finish, reading now and then: a high sync_speed_min keeps
	 * md from slowing the rebuild down for the reads.
	 */
	md_unthrottle(_metadata);
	ASSERT_LE(10, during)
		TH_LOG("the rebuild was not under way during the reads");
	ASSERT_LT(first_pos, last_pos)
		TH_LOG("the rebuild did not move during the reads");
	phase_check(_metadata, variant, "rebuilding", &routed, &before, len);
	t0 = now_sec();
	do {
		READ_CHECK();
		usleep(50000);
		done = !sysfs_read_ll(MD_SYS "/degraded", &degraded) &&
		       degraded == 0 && md_action_is("idle");
	} while (!done && now_sec() - t0 < 120);
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "system"));
	TH_LOG("rebuild %s %.1f s after it was let go",
	       done ? "finished" : "still running", now_sec() - t0);
	ASSERT_TRUE(done);

	/* And with the rebuilt member back in the read balance. */
	for (after = 0; after < 20; after++)
		READ_CHECK();
	phase_check(_metadata, variant, "rebuilt", &routed, &before, len);
#undef READ_CHECK
	TH_LOG("%d reads in all", i);
	close(fd);
	if (dfd >= 0)
		close(dfd);
	munmap(dev, len);
	free(ref);
}

/*
 * Walk md0's members (md/dev-*): how many have @flag in their state, and
 * how many there are; the sum of their "errors" counters in @errors.
 */
static int md_members_with(const char *flag, int *members, long long *errors)
{
	struct dirent **names;
	int n, i, with = 0;

	*members = 0;
	if (errors)
		*errors = 0;
	n = scandir(MD_SYS, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		char path[PATH_MAX], state[256], *tok, *save;
		long long e;

		if (!strncmp(names[i]->d_name, "dev-", 4)) {
			(*members)++;
			snprintf(path, sizeof(path), MD_SYS "/%s/state",
				 names[i]->d_name);
			if (!sysfs_read(path, state, sizeof(state)))
				for (tok = strtok_r(state, ",", &save); tok;
				     tok = strtok_r(NULL, ",", &save))
					if (!strcmp(tok, flag))
						with++;
			snprintf(path, sizeof(path), MD_SYS "/%s/errors",
				 names[i]->d_name);
			/* One that cannot be read counts -1: a wrong sum. */
			if (errors)
				*errors += sysfs_read_ll(path, &e) ? -1 : e;
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return with;
}

/*
 * raid1 and raid10 whose two members are marked failfast, and device
 * memory on another root port that neither member can reach.  A read
 * into that memory must not be taken for a failing member: md fails a
 * failfast member on its first error, so a refused DMA mapping that
 * reached it would degrade a healthy array.  The router must find out,
 * before it submits anything, that the stack cannot reach the provider,
 * and copy (fallback_unreachable); O_DIRECT fails with EREMOTEIO.
 */
FIXTURE(failfast) {
	char nvme[2][NAME_MAX + 1];
	char far[SYSFS_LEN];
	char enabled[16];
	unsigned char *dev;
	unsigned char *ref;
	uint64_t seed;
	bool created, knob_saved;
};

FIXTURE_VARIANT(failfast) {
	const char *level;
	const char *layout;
};

FIXTURE_VARIANT_ADD(failfast, raid1) { .level = "1", .layout = "" };
FIXTURE_VARIANT_ADD(failfast, raid10) { .level = "10", .layout = " --layout=n2" };

#define FF_DATA		(16 * MiB)
#define FF_LEN		(1 * MiB)

FIXTURE_SETUP(failfast)
{
	char cmd[2048], pci[SYSFS_LEN];
	int i, fd, members;

	router_learned_reset();	/* each case starts from defaults */
	setenv("DM_DISABLE_UDEV", "1", 1);
	ASSERT_EQ(0, access(P2P_ROUTER "/stats/fallback_unreachable", F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	for (i = 0; i < 2; i++)
		SPIN_NEED(!nvme_rig_ns(i, self->nvme[i], sizeof(self->nvme[i])),
			  SPIN_RIG_DRIVE_FMT, i, 2);
	SPIN_NEED(!p2pmem_find_for_ns(self->nvme[0], false, self->far,
				      sizeof(self->far)),
		  "a provider that %s cannot reach: none published",
		  self->nvme[0]);
	ASSERT_EQ(0, nvme_pci_dev(self->nvme[1], pci, sizeof(pci)));
	SPIN_NEED(!pci_share_switch(self->far, pci),
		  "a provider that %s and %s cannot reach: %s reaches %s",
		  self->nvme[0], self->nvme[1], self->nvme[1], self->far);
	teardown_stacks(NULL);
	self->seed = getpid() ^ 0xfa57ULL << 32;
	TH_LOG("raid%s over %s and %s, provider %s, seed %llu", variant->level,
	       self->nvme[0], self->nvme[1], self->far,
	       (unsigned long long)self->seed);

	xsnprintf(cmd, sizeof(cmd),
		  "mdadm --zero-superblock /dev/%s /dev/%s 2>/dev/null; mdadm --create " MD
		  " --run --quiet --force --assume-clean --level=%s%s --raid-devices=2 --size="
		  MIRROR_SIZE_KB " --failfast /dev/%s /dev/%s",
		  self->nvme[0], self->nvme[1], variant->level, variant->layout,
		  self->nvme[0], self->nvme[1]);
	ASSERT_EQ(0, run_cmd(cmd));
	self->created = true;
	/* The premise: both members failfast, the array passes P2PDMA. */
	ASSERT_EQ(2, md_members_with("failfast", &members, NULL));
	ASSERT_EQ(2, members);
	ASSERT_EQ(1, queue_p2p(MD));

	fd = open(MD, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, FF_DATA, self->seed));
	close(fd);
	self->dev = p2pmem_map(self->far, FF_LEN);
	ASSERT_NE(NULL, self->dev);
	self->ref = malloc(FF_LEN);
	ASSERT_NE(NULL, self->ref);

	ASSERT_EQ(0, sysfs_read(P2P_ROUTER "/enabled", self->enabled,
				sizeof(self->enabled)));
	self->knob_saved = true;
}

FIXTURE_TEARDOWN(failfast)
{
	if (self->knob_saved)
		EXPECT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", self->enabled));
	if (self->dev)
		munmap(self->dev, FF_LEN);
	free(self->ref);
	if (self->created)
		teardown_stacks(NULL);
}

/* Not degraded, no member faulty, no error counted against one. */
static void ff_healthy(struct __test_metadata *_metadata, const char *when,
		       long long errors0)
{
	long long errors, degraded = -1;
	int members, faulty, ret;

	faulty = md_members_with("faulty", &members, &errors);
	ret = sysfs_read_ll(MD_SYS "/degraded", &degraded);
	TH_LOG("%s: degraded %lld, %d of %d members faulty, member errors %lld (were %lld)",
	       when, degraded, faulty, members, errors, errors0);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, degraded);
	ASSERT_EQ(0, faulty);
	ASSERT_EQ(2, members);
	ASSERT_EQ(errors0, errors);
}

TEST_F_TIMEOUT(failfast, unreachable_read, 180)
{
	static const off_t offs[] = { 0, 3 * MiB + 4 * KiB, 9 * MiB };
	long long seg0, bytes0, eremote0, unreach0, errors0;
	long long seg, bytes, eremote, unreach;
	unsigned int i;
	int members, fd;
	ssize_t n;

	ASSERT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", "1"));
	md_members_with("faulty", &members, &errors0);

	/* Buffered, cold: the router must copy, and try no DMA. */
	fd = open(MD, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, drop_caches());
	seg0 = router_stat("p2p_segments");
	bytes0 = router_stat("p2p_bytes");
	eremote0 = router_stat("fallback_eremoteio");
	unreach0 = router_stat("fallback_unreachable");
	for (i = 0; i < ARRAY_SIZE(offs); i++) {
		memset(self->dev, POISON, FF_LEN);
		n = pread(fd, self->dev, FF_LEN, offs[i]);
		ASSERT_EQ((ssize_t)FF_LEN, n)
			TH_LOG("pread at %lld: %s", (long long)offs[i],
			       n < 0 ? strerror(errno) : "short");
		pattern_fill(self->ref, FF_LEN, offs[i], self->seed);
		ASSERT_EQ(-1, first_diff(self->dev, self->ref, FF_LEN))
			TH_LOG("pread at %lld", (long long)offs[i]);
	}
	seg = router_stat("p2p_segments") - seg0;
	bytes = router_stat("p2p_bytes") - bytes0;
	eremote = router_stat("fallback_eremoteio") - eremote0;
	unreach = router_stat("fallback_unreachable") - unreach0;
	close(fd);
	TH_LOG("3 reads of 1 MiB: fallback_unreachable +%lld, p2p_segments +%lld, p2p_bytes +%lld, fallback_eremoteio +%lld",
	       unreach, seg, bytes, eremote);
	/* The reference, read into RAM, agrees with the pattern. */
	fd = open(MD, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)FF_LEN, pread(fd, self->ref, FF_LEN, offs[1]));
	close(fd);
	pattern_fill(self->dev, FF_LEN, offs[1], self->seed);
	ASSERT_EQ(-1, first_diff(self->ref, self->dev, FF_LEN));

	ff_healthy(_metadata, "after buffered reads", errors0);
	ASSERT_LE(1, unreach)
		TH_LOG("the router did not see that the stack cannot reach the memory");
	ASSERT_EQ(0, seg);
	ASSERT_EQ(0, bytes);
	ASSERT_EQ(0, eremote)
		TH_LOG("the router tried DMA into memory the members cannot reach");

	/* O_DIRECT: refused, and the array stays healthy. */
	fd = open(MD, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (i = 0; i < ARRAY_SIZE(offs); i++) {
		int err;

		memset(self->dev, POISON, FF_LEN);
		n = pread(fd, self->dev, FF_LEN, offs[i]);
		err = errno;
		TH_LOG("O_DIRECT at %lld: %zd (%s)", (long long)offs[i], n,
		       n < 0 ? strerror(err) : "");
		ASSERT_EQ(-1, n);
		ASSERT_EQ(EREMOTEIO, err);
	}
	close(fd);
	ff_healthy(_metadata, "after O_DIRECT reads", errors0);
}

/*
 * Reads into device memory racing a swap of what is under them: a dm
 * table reloaded from linear to zero and back, or an md raid1 turned
 * into raid5 (mdadm --grow --level=5), neither of which passes P2PDMA.
 * Readers (buffered, made cold before each read, so that the router
 * DMAs, and one O_DIRECT) run all the time.  A bio holding P2PDMA pages
 * that reaches the new table or personality must be failed, never
 * touched by the CPU, and the router then copies.  Each read returns an
 * error or bytes of which every 512-byte sector is the drive's data or,
 * after a swap to dm-zero, zeros.  A buffered read never fails with
 * EREMOTEIO: the router copies instead.  The console must stay clean.
 */
#define SW_READERS	4	/* the last one O_DIRECT */
#define SW_WINDOW	(1 * MiB)
#define SW_SPAN		(16 * MiB)
#define SW_SECTORS	(64 * MiB / 512)

struct sw_reader {
	pthread_t thread;
	char path[64];
	unsigned char *dev;	/* SW_WINDOW of device memory */
	unsigned char *want;	/* SW_WINDOW of RAM */
	uint64_t seed, rng;
	bool direct;
	int ret;		/* 0, or -errno of the open */
	/* counts */
	long reads, whole, shortr, drive, zero, mixed, errors, remoteio;
	long straddled;		/* in flight while a swap went on */
	/* the first bad read */
	long bad;
	off_t bad_off;
	size_t bad_len;
	ssize_t bad_ret;
	int bad_errno;
	long bad_byte;
};

static int sw_stop;
static int sw_gen;	/* odd while a swap is going on */

static void *sw_reader_main(void *arg)
{
	struct sw_reader *r = arg;
	int fd = open(r->path, O_RDONLY | (r->direct ? O_DIRECT : 0));

	if (fd < 0) {
		r->ret = -errno;
		return NULL;
	}
	while (!__atomic_load_n(&sw_stop, __ATOMIC_SEQ_CST)) {
		size_t len = (1 + xorshift64(&r->rng) % (SW_WINDOW / (16 * KiB))) *
			     16 * KiB;
		off_t off = xorshift64(&r->rng) % ((SW_SPAN - len) / (4 * KiB) + 1) *
			    4 * KiB;
		size_t s, d = 0, z = 0;
		int g0, g1, err;
		ssize_t n;

		if (!r->direct)
			posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED);
		g0 = __atomic_load_n(&sw_gen, __ATOMIC_SEQ_CST);
		memset(r->dev, POISON, len);
		n = pread(fd, r->dev, len, off);
		err = errno;
		g1 = __atomic_load_n(&sw_gen, __ATOMIC_SEQ_CST);
		r->reads++;
		if (g0 != g1 || (g0 & 1))
			r->straddled++;
		if (n < 0) {
			r->errors++;
			if (err == EREMOTEIO)
				r->remoteio++;
			if (!r->direct && err == EREMOTEIO && !r->bad++) {
				r->bad_off = off;
				r->bad_len = len;
				r->bad_ret = n;
				r->bad_errno = err;
				r->bad_byte = -1;
			}
			continue;
		}
		if (n == (ssize_t)len)
			r->whole++;
		else
			r->shortr++;
		pattern_fill(r->want, n, off, r->seed);
		for (s = 0; s < (size_t)n; s += 512) {
			size_t l = (size_t)n - s < 512 ? (size_t)n - s : 512;

			if (!memcmp(r->dev + s, r->want + s, l)) {
				d++;
			} else if (all_zero(r->dev + s, l)) {
				z++;
			} else {
				if (!r->bad++) {
					r->bad_off = off;
					r->bad_len = len;
					r->bad_ret = n;
					r->bad_errno = 0;
					r->bad_byte = s + first_diff(r->dev + s,
								     r->want + s, l);
				}
				break;
			}
		}
		if (s < (size_t)n)
			continue;
		if (d && z)
			r->mixed++;
		else if (z)
			r->zero++;
		else if (d)
			r->drive++;
	}
	close(fd);
	return NULL;
}

FIXTURE(stack_swap) {
	char nvme[2][NAME_MAX + 1];
	char provider[SYSFS_LEN];
	unsigned char *dev;
	struct sw_reader r[SW_READERS];
	int started;
	uint64_t seed;
};

FIXTURE_VARIANT(stack_swap) {
	bool md;	/* md raid1 -> raid5; else dm linear -> zero */
};

FIXTURE_VARIANT_ADD(stack_swap, dm_linear_zero) { .md = false };
FIXTURE_VARIANT_ADD(stack_swap, md_raid1_raid5) { .md = true };

static void sw_readers_stop(FIXTURE_DATA(stack_swap) *self)
{
	int i;

	__atomic_store_n(&sw_stop, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < self->started; i++)
		pthread_join(self->r[i].thread, NULL);
	self->started = 0;
}

static int sw_readers_start(FIXTURE_DATA(stack_swap) *self, const char *path,
			    int round)
{
	int i;

	__atomic_store_n(&sw_stop, 0, __ATOMIC_SEQ_CST);
	for (i = 0; i < SW_READERS; i++) {
		struct sw_reader *r = &self->r[i];

		snprintf(r->path, sizeof(r->path), "%s", path);
		r->dev = self->dev + i * SW_WINDOW;
		r->seed = self->seed;
		r->rng = (self->seed + 1000 * round + i) | 1;
		r->direct = i == SW_READERS - 1;
		if (pthread_create(&r->thread, NULL, sw_reader_main, r))
			return -1;
		self->started++;
	}
	return 0;
}

FIXTURE_SETUP(stack_swap)
{
	char pci[SYSFS_LEN];
	int i;

	router_learned_reset();	/* each case starts from defaults */
	setenv("DM_DISABLE_UDEV", "1", 1);
	ASSERT_EQ(0, access(P2P_ROUTER "/stats/p2p_segments", F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	for (i = 0; i < 2; i++)
		SPIN_NEED(!nvme_rig_ns(i, self->nvme[i], sizeof(self->nvme[i])),
			  SPIN_RIG_DRIVE_FMT, i, 2);
	SPIN_NEED(!p2pmem_find_for_ns(self->nvme[0], true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->nvme[0]);
	ASSERT_EQ(0, nvme_pci_dev(self->nvme[1], pci, sizeof(pci)));
	SPIN_NEED(pci_share_switch(self->provider, pci),
		  "a provider that %s and %s reach: %s does not reach %s",
		  self->nvme[0], self->nvme[1], self->nvme[1], self->provider);
	teardown_stacks(NULL);
	self->seed = getpid() ^ 0x5a9ULL << 32;
	TH_LOG("provider %s, seed %llu (reader i: rng seed + 1000 * round + i)",
	       self->provider, (unsigned long long)self->seed);
	self->dev = p2pmem_map(self->provider, SW_READERS * SW_WINDOW);
	ASSERT_NE(NULL, self->dev);
	for (i = 0; i < SW_READERS; i++) {
		self->r[i].want = malloc(SW_WINDOW);
		ASSERT_NE(NULL, self->r[i].want);
	}
}

FIXTURE_TEARDOWN(stack_swap)
{
	int i;

	sw_readers_stop(self);
	teardown_stacks(NULL);
	if (self->dev)
		munmap(self->dev, SW_READERS * SW_WINDOW);
	for (i = 0; i < SW_READERS; i++)
		free(self->r[i].want);
}

/* Make the stack, with the pattern on it; its device in @path. */
static int sw_make(FIXTURE_DATA(stack_swap) *self, bool md, char *path, size_t len)
{
	char cmd[2048];
	int fd, ret;

	if (md) {
		md_stop_ours(MD);
		xsnprintf(cmd, sizeof(cmd),
			  "mdadm --zero-superblock /dev/%s /dev/%s 2>/dev/null; mdadm --create " MD
			  " --run --quiet --force --assume-clean --level=1 --raid-devices=2 --size="
			  MIRROR_SIZE_KB " /dev/%s /dev/%s",
			  self->nvme[0], self->nvme[1], self->nvme[0],
			  self->nvme[1]);
		snprintf(path, len, "%s", MD);
	} else {
		xsnprintf(cmd, sizeof(cmd),
			  "dmsetup create --noudevsync " DM_NAME
			  " --table '0 %lu linear /dev/%s 0'",
			  SW_SECTORS, self->nvme[0]);
		snprintf(path, len, "%s", DM);
	}
	if (run_cmd(cmd))
		return -EIO;
	fd = open(path, O_RDWR);
	if (fd < 0)
		return -errno;
	ret = write_pattern(fd, SW_SPAN, self->seed);
	close(fd);
	return ret ?: drop_caches();
}

/*
 * Resume /dev/mapper/@name, which swaps in the table loaded beside it:
 * DM_DEV_SUSPEND without DM_SUSPEND_FLAG, straight to the ioctl, so that
 * the window the readers see brackets the swap itself, not a dmsetup
 * process.  0 or -errno.
 */
static int dm_resume(const char *name)
{
	struct dm_ioctl io;
	int fd, ret;

	memset(&io, 0, sizeof(io));
	io.version[0] = DM_VERSION_MAJOR;
	io.data_size = sizeof(io);
	io.data_start = sizeof(io);
	snprintf(io.name, sizeof(io.name), "%s", name);
	fd = open("/dev/mapper/control", O_RDWR);
	if (fd < 0)
		return -errno;
	ret = ioctl(fd, DM_DEV_SUSPEND, &io) ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * Swap what is under the readers; sw_gen is odd meanwhile.  dm: the next
 * table is loaded first, off to the side, and the window is the resume
 * that swaps it in; md: the whole mdadm --grow.
 */
static int sw_swap(FIXTURE_DATA(stack_swap) *self, bool md, int n)
{
	int ret;

	if (md) {
		__atomic_add_fetch(&sw_gen, 1, __ATOMIC_SEQ_CST);
		ret = run_cmd("mdadm --grow " MD " --level=5");
		__atomic_add_fetch(&sw_gen, 1, __ATOMIC_SEQ_CST);
		return ret;
	}
	if (n % 2 == 0)
		ret = run_cmdf("dmsetup reload " DM_NAME " --table '0 %lu zero'",
			       SW_SECTORS);
	else
		ret = run_cmdf("dmsetup reload " DM_NAME " --table '0 %lu linear /dev/%s 0'",
			       SW_SECTORS, self->nvme[0]);
	if (ret)
		return ret;
	__atomic_add_fetch(&sw_gen, 1, __ATOMIC_SEQ_CST);
	ret = dm_resume(DM_NAME);
	__atomic_add_fetch(&sw_gen, 1, __ATOMIC_SEQ_CST);
	return ret;
}

TEST_F_TIMEOUT(stack_swap, reads_across_swaps, 300)
{
	/*
	 * dm: zero, linear, zero, linear, zero, and two more swaps at a time
	 * until a routed read met one; md: one level change a round, and
	 * more rounds until one did.
	 */
	const int rounds = variant->md ? 3 : 1, max_rounds = variant->md ? 6 : 1;
	const int swaps = variant->md ? 1 : 5, max_swaps = variant->md ? 1 : 15;
	long long seg0, seg, bytes0, bytes, eremote0, eremote, flag_after = -1;
	long reads = 0, drive = 0, zero = 0, mixed = 0, errors = 0;
	long remoteio = 0, straddled = 0, shortr = 0, bad = 0;
	char path[64], level[32] = "";
	int round, k, i, swap_ret = 0;

	seg0 = router_stat("p2p_segments");
	bytes0 = router_stat("p2p_bytes");
	eremote0 = router_stat("fallback_eremoteio");
	for (round = 0; round < rounds ||
	     (round < max_rounds && router_stat("fallback_eremoteio") == eremote0);
	     round++) {
		ASSERT_EQ(0, sw_make(self, variant->md, path, sizeof(path)));
		ASSERT_EQ(1, queue_p2p(path));
		ASSERT_EQ(0, sw_readers_start(self, path, round));
		usleep(300000);
		for (k = 0; !swap_ret && (k < swaps ||
					  (k < max_swaps &&
					   router_stat("fallback_eremoteio") == eremote0)); k++) {
			swap_ret = sw_swap(self, variant->md, k);
			usleep(300000);
		}
		/* dm ends on dm-zero: an odd number of swaps. */
		for (; !variant->md && !swap_ret && k % 2 == 0; k++)
			swap_ret = sw_swap(self, variant->md, k);
		sw_readers_stop(self);
		if (variant->md)
			sysfs_read(MD_SYS "/level", level, sizeof(level));
		flag_after = queue_p2p(path);

		for (i = 0; i < SW_READERS; i++) {
			struct sw_reader *r = &self->r[i];

			TH_LOG("round %d, reader %d (%s): %ld reads, %ld drive's data, %ld zeros, %ld both, %ld short, %ld errors (%ld EREMOTEIO), %ld across a swap",
			       round, i, r->direct ? "O_DIRECT" : "buffered",
			       r->reads, r->drive, r->zero, r->mixed,
			       r->shortr, r->errors, r->remoteio,
			       r->straddled);
			if (r->bad)
				TH_LOG("reader %d: read of %zu at %lld returned %zd (%s), byte %ld neither the drive's nor zero",
				       i, r->bad_len, (long long)r->bad_off,
				       r->bad_ret,
				       r->bad_ret < 0 ? strerror(r->bad_errno) : "",
				       r->bad_byte);
			ASSERT_EQ(0, r->ret) TH_LOG("%s: %s", path,
						    strerror(-r->ret));
			reads += r->reads;
			drive += r->drive;
			zero += r->zero;
			mixed += r->mixed;
			shortr += r->shortr;
			errors += r->errors;
			remoteio += r->remoteio;
			straddled += r->straddled;
			bad += r->bad;
			memset(&r->reads, 0,
			       sizeof(*r) - offsetof(struct sw_reader, reads));
		}
		ASSERT_EQ(0, swap_ret) TH_LOG("the swap failed");
		if (variant->md)
			ASSERT_STREQ("raid5", level);
		teardown_stacks(NULL);
	}
	seg = router_stat("p2p_segments") - seg0;
	bytes = router_stat("p2p_bytes") - bytes0;
	eremote = router_stat("fallback_eremoteio") - eremote0;
	TH_LOG("%ld reads: %ld drive's data, %ld zeros, %ld both, %ld short, %ld errors (%ld EREMOTEIO), %ld across a swap, %ld bad",
	       reads, drive, zero, mixed, shortr, errors, remoteio, straddled,
	       bad);
	TH_LOG("router: %d rounds, p2p_segments +%lld, p2p_bytes +%lld, fallback_eremoteio +%lld; "
	       "pci_p2pdma after the swap %lld",
	       round, seg, bytes, eremote, flag_after);
	ASSERT_EQ(0, bad);
	/* The premise: P2P reads ran, some of them while a swap went on. */
	ASSERT_LT(0, seg);
	ASSERT_LT(0, bytes);
	ASSERT_LT(0, drive);
	ASSERT_LT(0, straddled);
	/*
	 * A routed read planned its DMA on the old stack and met the new
	 * one: the block layer refused the P2P bio and the router read the
	 * range again through the page cache.
	 */
	ASSERT_LT(0, eremote);
	if (!variant->md) {
		/* The reload took: reads saw dm-zero's zeros. */
		ASSERT_LT(0, zero + mixed);
		ASSERT_EQ(0, flag_after);
	}
}

/*
 * The cases without a fixture of their own: named global.*, as TEST()s
 * are, with the time each needs (TEST() allows 30 s, too little for a
 * debug kernel).
 */
FIXTURE(global) {
	int unused;
};

FIXTURE_SETUP(global)
{
}

FIXTURE_TEARDOWN(global)
{
}

/*
 * A member that returns media errors (dm-dust over an NVMe drive, itself
 * P2P capable): a mirrored array retries on the other member and returns
 * the right bytes; any other stack returns EIO, never wrong data.
 */
TEST_F_TIMEOUT(global, dust_member_errors, 300)
{
	char ns0[NAME_MAX + 1], ns1[NAME_MAX + 1];
	char provider[SYSFS_LEN], cmd[2048];
	size_t len = 256 * KiB;
	unsigned char *dev, *ref;
	uint64_t seed = getpid();
	long long data_off, bad, errors, degraded;
	ssize_t n;
	int fd, err;

	setenv("DM_DISABLE_UDEV", "1", 1);
	SPIN_NEED(!nvme_rig_ns(0, ns0, sizeof(ns0)), SPIN_RIG_DRIVE_FMT, 0, 2);
	SPIN_NEED(!nvme_rig_ns(1, ns1, sizeof(ns1)), SPIN_RIG_DRIVE_FMT, 1, 2);
	SPIN_NEED(!p2pmem_find_for_ns(ns0, true, provider, sizeof(provider)),
		  "a provider that %s reaches: none published", ns0);
	teardown_stacks(NULL);

	/* dust with 4 KiB blocks over the first drive, mirrored with the second */
	xsnprintf(cmd, sizeof(cmd),
		  "dmsetup create --noudevsync " DM_NAME
		  " --table \"0 $(blockdev --getsz /dev/%s) dust /dev/%s 0 4096\" && mdadm --zero-superblock /dev/%s 2>/dev/null; "
		  "mdadm --create " MD
		  " --run --quiet --force --assume-clean --level=1 --raid-devices=2 " DM
		  " --write-mostly /dev/%s",
		  ns0, ns0, ns1, ns1);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(DM));
	ASSERT_EQ(1, queue_p2p(MD));
	fd = open(MD, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 4 * MiB, seed));
	close(fd);
	ASSERT_EQ(0, drop_caches());

	/*
	 * Four bad 4 KiB blocks at 400 KiB into the array's data, which
	 * starts data_offset sectors into the dust device.
	 */
	ASSERT_EQ(0, sysfs_read_ll("/sys/block/md0/md/dev-dm-0/offset",
				   &data_off));
	ASSERT_LE(0, data_off);
	bad = (data_off * 512 + 400 * KiB) / (4 * KiB);
	xsnprintf(cmd, sizeof(cmd),
		  "for b in %lld %lld %lld %lld; do dmsetup message " DM_NAME
		  " 0 addbadblock $b; done && dmsetup message " DM_NAME " 0 enable",
		  bad, bad + 1, bad + 2, bad + 3);
	ASSERT_EQ(0, run_cmd(cmd));

	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	pattern_fill(ref, len, 384 * KiB, seed);

	/* The healthy member is write-mostly: reads go to dust first. */
	fd = open(MD, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (int i = 0; i < 8; i++) {
		memset(dev, POISON, len);
		n = pread(fd, dev, len, 384 * KiB);
		ASSERT_EQ((ssize_t)len, n);
		ASSERT_EQ(-1, first_diff(dev, ref, len));
	}
	close(fd);
	/* md corrected the bad blocks from the other member */
	ASSERT_EQ(0, sysfs_read_ll("/sys/block/md0/md/dev-dm-0/errors",
				   &errors));
	ASSERT_LT(0, errors);
	ASSERT_EQ(0, sysfs_read_ll("/sys/block/md0/md/degraded", &degraded));
	ASSERT_EQ(0, degraded);

	/* The dust device on its own: EIO for the bad range, never wrong bytes. */
	teardown_stacks(NULL);
	xsnprintf(cmd, sizeof(cmd),
		  "dmsetup create --noudevsync " DM_NAME
		  " --table \"0 $(blockdev --getsz /dev/%s) dust /dev/%s 0 4096\" && for b in 100 101 102 103; "
		  "do dmsetup message " DM_NAME " 0 addbadblock $b; "
		  "done && dmsetup message " DM_NAME " 0 enable",
		  ns0, ns0);
	ASSERT_EQ(0, run_cmd(cmd));
	fd = open(DM, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memset(dev, POISON, len);
	n = pread(fd, dev, len, 384 * KiB);
	err = errno;
	TH_LOG("dust alone: %zd (%s)", n, n < 0 ? strerror(err) : "");
	/* The range holds bad blocks: O_DIRECT fails it whole, with EIO. */
	ASSERT_EQ(-1, n);
	ASSERT_EQ(EIO, err);
	close(fd);
	teardown_stacks(NULL);
	munmap(dev, len);
	free(ref);
}

/*
 * The flag follows the members: growing a linear array by a member that
 * cannot take P2PDMA pages clears it, and so does reloading a dm table
 * onto such a device; reloading back onto NVMe sets it again.
 */
TEST_F_TIMEOUT(global, flag_follows_members, 300)
{
	char ns0[NAME_MAX + 1], ns1[NAME_MAX + 1], loop[32], cmd[2048];
	int fd;

	setenv("DM_DISABLE_UDEV", "1", 1);
	SPIN_NEED(!nvme_rig_ns(0, ns0, sizeof(ns0)), SPIN_RIG_DRIVE_FMT, 0, 2);
	SPIN_NEED(!nvme_rig_ns(1, ns1, sizeof(ns1)), SPIN_RIG_DRIVE_FMT, 1, 2);
	teardown_stacks(NULL);
	fd = open(LOOP_FILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 256 * MiB));
	close(fd);
	ASSERT_EQ(0, loop_attach(LOOP_FILE, loop, sizeof(loop)));

	xsnprintf(cmd, sizeof(cmd),
		  "mdadm --zero-superblock /dev/%s /dev/%s 2>/dev/null; mdadm --create " MD
		  " --run --quiet --force --level=linear --raid-devices=2 /dev/%s /dev/%s",
		  ns0, ns1, ns0, ns1);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(MD));
	xsnprintf(cmd, sizeof(cmd), "mdadm --grow " MD " --add %s", loop);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(0, queue_p2p(MD));
	run_cmd("mdadm --stop " MD);

	xsnprintf(cmd, sizeof(cmd),
		  "dmsetup create --noudevsync " DM_NAME " --table '0 8192 linear /dev/%s 0'",
		  ns0);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(DM));
	xsnprintf(cmd, sizeof(cmd),
		  "dmsetup reload " DM_NAME
		  " --table '0 8192 linear %s 0' && dmsetup resume --noudevsync " DM_NAME,
		  loop);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(0, queue_p2p(DM));
	xsnprintf(cmd, sizeof(cmd),
		  "dmsetup reload " DM_NAME
		  " --table '0 8192 linear /dev/%s 0' && dmsetup resume --noudevsync " DM_NAME,
		  ns1);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(DM));
	/* dm-zero fills with the CPU: never */
	ASSERT_EQ(0, run_cmd("dmsetup reload " DM_NAME
			     " --table '0 8192 zero' && dmsetup resume --noudevsync " DM_NAME));
	ASSERT_EQ(0, queue_p2p(DM));
	teardown_stacks(loop);
}

/* Occurrences of @needle in @hay. */
static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle))) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

/* Build two dm-linear devices over @ns, one stacked on another, and md0. */
static int holder_stack(const char *ns)
{
	return run_cmdf("dmsetup create --noudevsync spin-h0 --table '0 65536 linear /dev/%s 0' && "
			"dmsetup create --noudevsync spin-h1 --table '0 65536 linear /dev/%s 65536' && "
			"dmsetup create --noudevsync spin-h2 --table '0 65536 linear /dev/mapper/spin-h0 0' && "
			"dmsetup mknodes && "
			"mdadm --create " MD
			" --run --quiet --force --level=0 --raid-devices=2 /dev/mapper/spin-h1 /dev/mapper/spin-h2",
			ns, ns);
}

/* Take it down again: md drops two members, dm three devices it holds. */
static int holder_unstack(void)
{
	return run_cmd("mdadm --stop " MD
		       " && mdadm --zero-superblock /dev/mapper/spin-h1 /dev/mapper/spin-h2 && "
		       "dmsetup remove --noudevsync spin-h2 && "
		       "dmsetup remove --noudevsync spin-h1 && dmsetup remove --noudevsync spin-h0");
}

/* The function tracer off, with no filter and no stacks: as booted. */
static void trace_off(void)
{
	int fd;

	sysfs_write(TRACEFS "/current_tracer", "nop");
	sysfs_write(TRACEFS "/options/func_stack_trace", "0");
	fd = open(TRACEFS "/set_ftrace_filter", O_WRONLY | O_TRUNC);
	if (fd >= 0)
		close(fd);
	sysfs_write(TRACEFS "/tracing_on", "1");
}

/* Trace calls of @funcs (with their stacks if @stacks) during @fn. */
static char *trace_during(const char *funcs, bool stacks, int (*fn)(void),
			  int *ret)
{
	char *trace;

	trace_off();
	if (sysfs_write(TRACEFS "/set_ftrace_filter", funcs) ||
	    sysfs_write(TRACEFS "/options/func_stack_trace", stacks ? "1" : "0") ||
	    trace_clear() || sysfs_write(TRACEFS "/tracing_on", "1") ||
	    sysfs_write(TRACEFS "/current_tracer", "function"))
		return NULL;
	*ret = fn();
	/* Stop, read, then drop the tracer, which empties the buffer. */
	sysfs_write(TRACEFS "/tracing_on", "0");
	trace = trace_slurp();
	trace_off();
	return trace;
}

/*
 * Taking a member out of a stacked device costs what it costs without
 * P2PDMA: bd_unlink_disk_holder() never waits for an RCU grace period,
 * though the P2PDMA reachability walk reads the holder list under RCU.
 * dm-linear devices over a rig drive, one stacked on another, and an md
 * raid0 of two of them are taken down twice under the function tracer:
 * once to see bd_unlink_disk_holder() called for each member (the
 * premise), once to see every synchronize_rcu() or synchronize_srcu()
 * with its call stack, none of which may come from it.  A tail call from
 * it would not be on the stack.  The function graph tracer sees that one
 * too, but it patches every function's entry, after which the rig's TCG
 * guest died of a stale int3 at the next tracepoint toggle, twice in two
 * runs.
 */
TEST_F_TIMEOUT(global, holder_unlink_no_grace_period, 300)
{
	char ns0[NAME_MAX + 1], *trace;
	int unlinks, syncs, ret = -1;

	setenv("DM_DISABLE_UDEV", "1", 1);
	SPIN_NEED(!nvme_rig_ns(0, ns0, sizeof(ns0)), SPIN_RIG_DRIVE_FMT, 0, 1);
	teardown_stacks(NULL);
	if (access(TRACEFS "/trace", F_OK))
		ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0, NULL));

	ASSERT_EQ(0, holder_stack(ns0));
	trace = trace_during("bd_unlink_disk_holder", false, holder_unstack,
			     &ret);
	ASSERT_NE(NULL, trace);
	EXPECT_EQ(0, ret);
	unlinks = count_str(trace, " bd_unlink_disk_holder <-");
	free(trace);

	ASSERT_EQ(0, holder_stack(ns0));
	trace = trace_during("synchronize_rcu synchronize_rcu_expedited synchronize_srcu synchronize_srcu_expedited",
			     true, holder_unstack, &ret);
	ASSERT_NE(NULL, trace);
	EXPECT_EQ(0, ret);
	syncs = count_str(trace, "<stack trace>");
	TH_LOG("%d holder unlinks; "
	       "%d grace periods waited for, %d of them in bd_unlink_disk_holder()",
	       unlinks, syncs, count_str(trace, "=> bd_unlink_disk_holder"));
	EXPECT_LE(5, unlinks);
	/* md waits for one as it kicks a member: the tracer sees it. */
	EXPECT_LE(1, syncs);
	EXPECT_EQ(0, count_str(trace, "=> bd_unlink_disk_holder"));
	free(trace);
	md_stop_ours(MD);
	run_cmd("dmsetup remove --noudevsync spin-h2 2>/dev/null; "
		"dmsetup remove --noudevsync spin-h1 2>/dev/null; dmsetup remove --noudevsync spin-h0 2>/dev/null");
}

/* The native NVMe multipath head of the rig's shared namespace, or -ENOENT. */
static int nvme_mpath_head(char *ns, size_t len)
{
	struct dirent **names;
	int n, i, found = -ENOENT;

	n = scandir("/sys/block", &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		const char *d = names[i]->d_name;
		char path[PATH_MAX], serial[64];

		snprintf(path, sizeof(path), "/sys/block/%s/device/serial", d);
		if (found && !strncmp(d, "nvme", 4) && !strchr(d + 4, 'c') &&
		    !sysfs_read(path, serial, sizeof(serial)) &&
		    !strcmp(serial, "SPINMPATH")) {
			snprintf(ns, len, "%s", d);
			found = 0;
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return found;
}

/*
 * A namespace shared by two controllers, behind the native multipath
 * head: the head advertises P2PDMA because both paths do, and O_DIRECT
 * through it returns the right bytes.
 */
TEST_F_TIMEOUT(global, nvme_multipath, 300)
{
	char head[NAME_MAX + 1], ns0[NAME_MAX + 1];
	char provider[SYSFS_LEN], path[NAME_MAX + 8];
	size_t len = 4 * MiB;
	unsigned char *dev, *ref;
	uint64_t seed = getpid();
	int fd;

	SPIN_NEED(!nvme_mpath_head(head, sizeof(head)),
		  "the multipathed rig namespace (serial SPINMPATH): not found");
	SPIN_NEED(!nvme_rig_ns(0, ns0, sizeof(ns0)), SPIN_RIG_DRIVE_FMT, 0, 1);
	SPIN_NEED(!p2pmem_find_for_ns(ns0, true, provider, sizeof(provider)),
		  "a provider that %s reaches: none published", ns0);
	snprintf(path, sizeof(path), "/dev/%s", head);
	TH_LOG("multipath head %s", path);
	ASSERT_EQ(1, queue_p2p(path));

	fd = open(path, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 2 * len, seed));
	close(fd);
	ASSERT_EQ(0, drop_caches());

	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	pattern_fill(ref, len, 64 * KiB, seed);
	fd = open(path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memset(dev, POISON, len);
	ASSERT_EQ((ssize_t)len, pread(fd, dev, len, 64 * KiB));
	ASSERT_EQ(-1, first_diff(dev, ref, len));
	close(fd);
	munmap(dev, len);
	free(ref);
}

/*
 * Writes from device memory to md raid1 and raid10 (2 and 3 legs).
 *
 * Every leg gets the DMA write: after routed (buffered) and O_DIRECT
 * writes, the array is stopped and assembled read-only from each leg
 * alone (raid1) or without each leg in turn (raid10, where one leg does
 * not hold every chunk), and the first MIR_REGION bytes read back must
 * equal the model of what was written; md's own "check" must find no
 * mismatch.  A leg that cannot reach the memory (SPINFAR0, the rig's
 * drive outside the switch) makes the whole write fail with EREMOTEIO
 * and nothing written, or the router copy instead (counted), with the
 * array healthy.  A leg failed with mdadm --fail while writes go on, and
 * rebuilt while they still go on, and a resync racing the writes, leave
 * no divergence.  Write-behind (--write-mostly with a bitmap) is never
 * used for device memory (a kprobe on bitmap_start_behind_write()
 * proves it is for RAM).
 */
#define MIR_REGION	(16 * MiB)
#define FAR_SERIAL	"SPINFAR"
#define KP_NAME		"spin_behind"

struct mir {
	char nvme[3][NAME_MAX + 1];
	char far[NAME_MAX + 1];
	char legs[3][NAME_MAX + 8];	/* "/dev/..." of each leg, in order */
	int nlegs;
	bool raid10;
	bool dm_legs;		/* each leg a dm-linear over its drive */
	char provider[SYSFS_LEN];
	unsigned char *dev;	/* MAP_LEN of device memory */
	unsigned char *model;	/* what the first MIR_REGION of md0 holds */
	unsigned char *buf;	/* MIR_REGION, aligned for O_DIRECT */
	uint64_t seed;
};

/* The dm-linear legs of a mirror over stacked members. */
#define MIR_DM_LEG	"spin-leg"

static void mir_dm_remove(void)
{
	int i;

	for (i = 0; i < 3; i++)
		run_cmdf("dmsetup remove --noudevsync " MIR_DM_LEG "%d 2>/dev/null",
			 i);
}

/*
 * The drives and the provider of a mirror of @legs legs, into the struct
 * mir *@m, cleared first, and the drive outside the switch (m->far): in
 * strict mode needed (the rig has it, as before), elsewhere only if there
 * is one: "" if not, and the one case that uses it says so.  A macro,
 * for SPIN_NEED(): in a setup or a case's body, before mir_init().
 */
#define MIR_NEED(m, legs) do {						\
	int __i;							\
									\
	memset((m), 0, sizeof(*(m)));					\
	for (__i = 0; __i < (legs); __i++)				\
		SPIN_NEED(!nvme_rig_ns(__i, (m)->nvme[__i],		\
				       sizeof((m)->nvme[__i])),		\
			  SPIN_RIG_DRIVE_FMT, __i, (legs));		\
	if (nvme_serial_ns(FAR_SERIAL, (m)->far, sizeof((m)->far)))	\
		(m)->far[0] = '\0';					\
	if (spin_strict())						\
		SPIN_NEED((m)->far[0], "the drive outside the switch "	\
			  "(serial " FAR_SERIAL "0): not found");	\
	SPIN_NEED(!p2pmem_find_for_ns((m)->nvme[0], true, (m)->provider, \
				      sizeof((m)->provider)),		\
		  "a provider that %s reaches: none published",		\
		  (m)->nvme[0]);					\
} while (0)

/* A mirror of @legs legs over what MIR_NEED() found.  0, or -ENOMEM. */
static int mir_init(struct mir *m, int legs, bool raid10, bool dm_legs)
{
	setenv("DM_DISABLE_UDEV", "1", 1);
	teardown_stacks(NULL);
	mir_dm_remove();
	m->nlegs = legs;
	m->raid10 = raid10;
	m->dm_legs = dm_legs;
	m->seed = getpid() ^ 0x3171ULL << 40;
	m->dev = p2pmem_map(m->provider, MAP_LEN);
	m->model = malloc(MIR_REGION);
	if (!m->dev || !m->model ||
	    posix_memalign((void **)&m->buf, 4096, MIR_REGION))
		return -ENOMEM;
	return 0;
}

static void mir_free(struct mir *m)
{
	teardown_stacks(NULL);
	mir_dm_remove();
	if (m->dev)
		munmap(m->dev, MAP_LEN);
	free(m->model);
	free(m->buf);
}

/*
 * Create md0 over the legs (the last one SPINFAR0 if @far) with @opts,
 * wait for its first resync unless @resync (then the caller races it),
 * and fill MIR_REGION from RAM.  @write_mostly marks the last leg so.
 */
static int mir_create(struct mir *m, bool far, bool resync, const char *opts,
		      bool write_mostly)
{
	char cmd[2048], list[512] = "";
	int i, fd, ret;

	for (i = 0; i < m->nlegs; i++) {
		const char *ns = far && i == m->nlegs - 1 ? m->far : m->nvme[i];
		size_t l = strlen(list);
		long long sectors;

		snprintf(m->legs[i], sizeof(m->legs[i]), "/dev/%s", ns);
		if (m->dm_legs) {
			xsnprintf(cmd, sizeof(cmd), "/sys/block/%s/size", ns);
			if (sysfs_read_ll(cmd, &sectors) ||
			    run_cmdf("dmsetup create --noudevsync " MIR_DM_LEG
				     "%d --table '0 %lld linear /dev/%s 0' && dmsetup mknodes "
				     MIR_DM_LEG "%d", i, sectors, ns, i))
				return -EIO;
			snprintf(m->legs[i], sizeof(m->legs[i]),
				 "/dev/mapper/" MIR_DM_LEG "%d", i);
		}
		xsnprintf(list + l, sizeof(list) - l, "%s %s",
			  write_mostly && i == m->nlegs - 1 ?
			  " --write-mostly" : "", m->legs[i]);
		xsnprintf(cmd, sizeof(cmd),
			  "mdadm --zero-superblock %s 2>/dev/null", m->legs[i]);
		run_cmd(cmd);
	}
	xsnprintf(cmd, sizeof(cmd),
		  "mdadm --create " MD
		  " --run --quiet --force --level=%s --raid-devices=%d --size="
		  MIRROR_SIZE_KB " %s%s",
		  m->raid10 ? "10 --layout=n2" : "1", m->nlegs, opts, list);
	ret = run_cmd(cmd);
	if (ret)
		return ret;
	/*
	 * The legs hold what earlier tests left: let the resync make them
	 * equal, or md's check would count that as mismatches.
	 */
	if (!resync)
		md_wait_action("idle", true, 1200, NULL);
	if (!resync && !md_action_is("idle"))
		return -ETIMEDOUT;
	fd = open(MD, O_RDWR);
	if (fd < 0)
		return -errno;
	ret = write_pattern(fd, MIR_REGION, m->seed);
	close(fd);
	pattern_fill(m->model, MIR_REGION, 0, m->seed);
	return ret;
}

/*
 * Write @len bytes of pattern(@seed) from device memory at @off of md0:
 * O_DIRECT if @direct, else a plain pwrite() for the router (and fsync).
 * The model follows a write that succeeded.  Returns what pwrite() did,
 * with errno.  @dev is where in device memory the source starts.
 */
static ssize_t mir_write(struct mir *m, unsigned char *dev, bool direct,
			 off_t off, size_t len, uint64_t seed)
{
	int fd = open(MD, O_RDWR | (direct ? O_DIRECT : 0)), err;
	ssize_t n;

	if (fd < 0)
		return -1;
	/* The source sits where the router can DMA it: congruent to @off. */
	dev += off % 4096;
	pattern_fill(dev, len, off, seed);
	n = pwrite(fd, dev, len, off);
	err = errno;
	if (n == (ssize_t)len && fsync(fd))
		n = -1;
	close(fd);
	if (n > 0)
		pattern_fill(m->model + off, n, off, seed);
	errno = err;
	return n;
}

/* The first MIR_REGION bytes of md0, read O_DIRECT, equal the model. */
static long mir_diff(struct mir *m)
{
	int fd = open(MD, O_RDONLY | O_DIRECT);
	ssize_t n;

	if (fd < 0)
		return -2;
	n = pread(fd, m->buf, MIR_REGION, 0);
	close(fd);
	if (n != MIR_REGION)
		return -3;
	return first_diff(m->buf, m->model, MIR_REGION);
}

/*
 * Every leg holds the model: stop md0, assemble it read-only from each
 * leg alone (raid1) or from all legs but one (raid10, n2: each chunk is
 * on two legs, so each copy is read in one of the rounds), compare, and
 * assemble it whole again.
 */
static void mir_legs_check(struct __test_metadata *_metadata, struct mir *m)
{
	char cmd[1024], list[512];
	long long degraded;
	int i, j;
	long d;

	ASSERT_EQ(0, run_cmd("mdadm --stop " MD));
	for (i = 0; i < m->nlegs; i++) {
		list[0] = '\0';
		for (j = 0; j < m->nlegs; j++)
			if ((j == i) != m->raid10) {
				size_t l = strlen(list);

				xsnprintf(list + l, sizeof(list) - l, " %s",
					  m->legs[j]);
			}
		xsnprintf(cmd, sizeof(cmd),
			  "mdadm --assemble " MD " --readonly --run --quiet%s",
			  list);
		ASSERT_EQ(0, run_cmd(cmd));
		d = mir_diff(m);
		TH_LOG("md0 from%s alone: %s at %ld", list,
		       d == -1 ? "the model" : "differs", d);
		ASSERT_EQ(-1, d);
		ASSERT_EQ(0, run_cmd("mdadm --stop " MD));
	}
	list[0] = '\0';
	for (j = 0; j < m->nlegs; j++) {
		size_t l = strlen(list);

		xsnprintf(list + l, sizeof(list) - l, " %s", m->legs[j]);
	}
	xsnprintf(cmd, sizeof(cmd), "mdadm --assemble " MD " --run --quiet%s",
		  list);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(0, sysfs_read_ll(MD_SYS "/degraded", &degraded));
	ASSERT_EQ(0, degraded);
}

/* Healthy: not degraded, no member faulty, no error counted. */
static void mir_healthy(struct __test_metadata *_metadata, struct mir *m)
{
	long long errors, degraded = -1;
	int members, faulty, ret;

	faulty = md_members_with("faulty", &members, &errors);
	ret = sysfs_read_ll(MD_SYS "/degraded", &degraded);
	TH_LOG("degraded %lld, %d of %d members faulty, member errors %lld",
	       degraded, faulty, members, errors);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, degraded);
	ASSERT_EQ(0, faulty);
	ASSERT_EQ(m->nlegs, members);
	ASSERT_EQ(0, errors);
}

/* The writes every case makes: routed ones, unaligned, and O_DIRECT. */
static const struct { bool direct; off_t off; size_t len; } mir_writes[] = {
	{ false, 1 * MiB + 123, 3 * MiB + 1000 },
	{ true, 0, 2 * MiB },				/* 4 raid10 chunks */
	{ false, 6 * MiB, 2 * MiB },
	{ true, 9 * MiB + 512 * KiB - 4 * KiB, 1 * MiB + 8 * KiB },
	{ true, 12 * MiB, 4 * MiB },
	{ false, 10 * MiB + 4095, 1 * MiB + 2 },
};

/* Make write @i of mir_writes[] (seed + 1 + @i), log it, keep errno. */
static ssize_t mir_write_nth(struct __test_metadata *_metadata, struct mir *m,
			     unsigned int i)
{
	ssize_t n = mir_write(m, m->dev, mir_writes[i].direct,
			      mir_writes[i].off, mir_writes[i].len,
			      m->seed + 1 + i);
	int err = errno;

	TH_LOG("%s write of %zu at %lld: %zd (%s)",
	       mir_writes[i].direct ? "O_DIRECT" : "routed", mir_writes[i].len,
	       (long long)mir_writes[i].off, n, n < 0 ? strerror(err) : "");
	errno = err;
	return n;
}

FIXTURE(mirror) {
	struct mir m;
};

FIXTURE_VARIANT(mirror) {
	int legs;
	bool raid10;
	bool dm_legs;
};

FIXTURE_VARIANT_ADD(mirror, raid1_2) { .legs = 2 };
FIXTURE_VARIANT_ADD(mirror, raid1_3) { .legs = 3 };
FIXTURE_VARIANT_ADD(mirror, raid10_2) { .legs = 2, .raid10 = true };
FIXTURE_VARIANT_ADD(mirror, raid10_3) { .legs = 3, .raid10 = true };
/*
 * Mirrors over stacked members: each leg a dm-linear over its drive, as
 * LVM builds them.  md asks such a member through its holder links.
 */
FIXTURE_VARIANT_ADD(mirror, raid1_2_dm) { .legs = 2, .dm_legs = true };
FIXTURE_VARIANT_ADD(mirror, raid10_3_dm) {
	.legs = 3, .raid10 = true, .dm_legs = true };

FIXTURE_SETUP(mirror)
{
	router_learned_reset();	/* each case starts from defaults */
	ASSERT_EQ(0, access(P2P_ROUTER "/stats/p2p_write_bytes", F_OK))
		TH_LOG("no P2P router in this kernel");
	MIR_NEED(&self->m, variant->legs);
	ASSERT_EQ(0, mir_init(&self->m, variant->legs, variant->raid10,
			      variant->dm_legs))
		TH_LOG("no memory");
	TH_LOG("raid%s, %d legs%s, provider %s, seed %llu",
	       variant->raid10 ? "10" : "1", variant->legs,
	       variant->dm_legs ? " (dm-linear)" : "", self->m.provider,
	       (unsigned long long)self->m.seed);
}

FIXTURE_TEARDOWN(mirror)
{
	mir_free(&self->m);
}

/* Routed and O_DIRECT writes from device memory reach every leg. */
TEST_F_TIMEOUT(mirror, every_leg, 300)
{
	struct mir *m = &self->m;
	long long dma0, eremote0;
	struct iovec iov;
	unsigned int i;
	ssize_t n;
	int fd;

	ASSERT_EQ(0, mir_create(m, false, false, "--bitmap=none", false));
	ASSERT_EQ(1, queue_p2p(MD));
	dma0 = router_stat("p2p_write_bytes");
	eremote0 = router_stat("fallback_eremoteio");

	for (i = 0; i < ARRAY_SIZE(mir_writes); i++) {
		n = mir_write_nth(_metadata, m, i);
		ASSERT_EQ((ssize_t)mir_writes[i].len, n);
	}
	/* The routed ones were DMAed, none refused. */
	TH_LOG("p2p_write_bytes +%lld, fallback_eremoteio +%lld",
	       router_stat("p2p_write_bytes") - dma0,
	       router_stat("fallback_eremoteio") - eremote0);
	ASSERT_LE(4 * MiB, router_stat("p2p_write_bytes") - dma0);
	ASSERT_EQ(eremote0, router_stat("fallback_eremoteio"));

	/*
	 * RWF_NOWAIT (REQ_NOWAIT bios): NVMe members are asked without
	 * sleeping, so the write goes through, or gets EAGAIN where md
	 * would wait (a barrier), never EREMOTEIO.
	 */
	fd = open(MD, O_RDWR | O_DIRECT);
	ASSERT_LE(0, fd);
	pattern_fill(m->dev, 1 * MiB, 3 * MiB, m->seed + 40);
	iov.iov_base = m->dev;
	iov.iov_len = 1 * MiB;
	n = pwritev2(fd, &iov, 1, 3 * MiB, RWF_NOWAIT);
	TH_LOG("RWF_NOWAIT O_DIRECT write: %zd (%s)", n,
	       n < 0 ? strerror(errno) : "");
	if (n < 0) {
		ASSERT_EQ(EAGAIN, errno);
	} else {
		ASSERT_EQ(1 * MiB, n);
		pattern_fill(m->model + 3 * MiB, 1 * MiB, 3 * MiB,
			     m->seed + 40);
	}
	close(fd);

	ASSERT_EQ(-1, mir_diff(m));
	mir_healthy(_metadata, m);
	ASSERT_EQ(0, md_check(MD_SYS));
	mir_legs_check(_metadata, m);
}

/*
 * The last leg is SPINFAR0, which cannot reach the memory the others
 * can: O_DIRECT writes fail with EREMOTEIO and change nothing on any
 * leg (a 2 MiB one spans raid10 chunks whose legs all can reach it),
 * and the router copies the routed ones (fallback_unreachable), with
 * the array healthy and its legs equal.
 */
TEST_F_TIMEOUT(mirror, unreachable_leg, 300)
{
	struct mir *m = &self->m;
	long long dma0, unreach0;
	char pci[SYSFS_LEN];
	unsigned int i;
	ssize_t n;

	SPIN_NEED(m->far[0], "the drive outside the switch (serial "
		  FAR_SERIAL "0): not found");
	ASSERT_EQ(0, mir_create(m, true, false, "--bitmap=none", false));
	/* The premise: the array passes P2PDMA, one leg cannot reach it. */
	ASSERT_EQ(1, queue_p2p(MD));
	ASSERT_EQ(0, nvme_pci_dev(m->far, pci, sizeof(pci)));
	ASSERT_FALSE(pci_share_switch(m->provider, pci));
	dma0 = router_stat("p2p_write_bytes");
	unreach0 = router_stat("fallback_unreachable");

	for (i = 0; i < ARRAY_SIZE(mir_writes); i++) {
		n = mir_write_nth(_metadata, m, i);
		if (mir_writes[i].direct) {
			ASSERT_EQ(-1, n);
			ASSERT_EQ(EREMOTEIO, errno);
		} else {
			ASSERT_EQ((ssize_t)mir_writes[i].len, n);
		}
	}
	TH_LOG("p2p_write_bytes +%lld, fallback_unreachable +%lld",
	       router_stat("p2p_write_bytes") - dma0,
	       router_stat("fallback_unreachable") - unreach0);
	ASSERT_EQ(dma0, router_stat("p2p_write_bytes"));
	ASSERT_LT(unreach0, router_stat("fallback_unreachable"));

	ASSERT_EQ(-1, mir_diff(m));
	mir_healthy(_metadata, m);
	ASSERT_EQ(0, md_check(MD_SYS));
	mir_legs_check(_metadata, m);
}

struct mir_writer {
	struct mir *m;
	pthread_t thread;
	int stop;
	int done;		/* writes that succeeded */
	int failed;		/* writes that did not */
	int during;		/* writes that began and ended in @action */
	const char *action;	/* a sync_action to count writes in */
	bool routed_only;	/* no O_DIRECT writes */
};

/*
 * Alternating routed and O_DIRECT writes of 1 MiB (routed ones off by
 * 4095 bytes; only routed ones if @routed_only) over the region, each with
 * a new seed, until stopped.  One writer, so the model is its own.
 */
static void *mir_writer_main(void *arg)
{
	struct mir_writer *w = arg;
	struct mir *m = w->m;
	int k = 0;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		bool direct = !w->routed_only && k % 2;
		off_t off = (k * 7 % 14) * MiB + (direct ? 0 : 4095);
		bool in0 = w->action && md_action_is(w->action), in1;
		ssize_t n;

		n = mir_write(m, m->dev, direct, off, 1 * MiB,
			      m->seed + 100 + k);
		in1 = w->action && md_action_is(w->action);
		if (n == 1 * MiB)
			__atomic_add_fetch(&w->done, 1, __ATOMIC_RELEASE);
		else
			w->failed++;
		if (in0 && in1)
			w->during++;
		k++;
	}
	return NULL;
}

static void mir_wait_writes(struct mir_writer *w, int n)
{
	int i;

	for (i = 0; i < 6000 &&
	     __atomic_load_n(&w->done, __ATOMIC_ACQUIRE) < n; i++)
		usleep(10000);
}

static void mir_writer_stop(struct mir_writer *w)
{
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
	pthread_join(w->thread, NULL);
}

/*
 * A leg failed (mdadm --fail) while writes go on, then removed, wiped,
 * added back and rebuilt (slowly, so that the rebuild is under way during
 * the writes): every write succeeds, and at the end md's check finds no
 * mismatch and every leg holds the model.
 */
TEST_F_TIMEOUT(mirror, fail_mid_write, 600)
{
	struct mir *m = &self->m;
	struct mir_writer w = { .m = m };
	long long degraded = -1;
	char cmd[1024];
	int done, i;

	ASSERT_EQ(0, mir_create(m, false, false, "--bitmap=none", false));
	ASSERT_EQ(0, pthread_create(&w.thread, NULL, mir_writer_main, &w));
	mir_wait_writes(&w, 6);
	xsnprintf(cmd, sizeof(cmd), "mdadm --quiet " MD " --fail %s",
		  m->legs[1]);
	EXPECT_EQ(0, run_cmd(cmd));
	done = __atomic_load_n(&w.done, __ATOMIC_ACQUIRE);
	mir_wait_writes(&w, done + 10);
	EXPECT_EQ(0, sysfs_read_ll(MD_SYS "/degraded", &degraded));
	EXPECT_EQ(1, degraded);

	/* About 5 MB/s: the 64 MiB rebuild takes some 13 s. */
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_max", "5000"));
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "5000"));
	w.action = "recover";
	xsnprintf(cmd, sizeof(cmd),
		  "mdadm --quiet " MD
		  " --remove %s && mdadm --zero-superblock %s && mdadm --quiet " MD " --add %s",
		  m->legs[1], m->legs[1], m->legs[1]);
	EXPECT_EQ(0, run_cmd(cmd));
	md_wait_action("idle", true, 600, &w.during);
	md_unthrottle(_metadata);
	for (i = 0; i < 1200 && !(md_action_is("idle") &&
				  !sysfs_read_ll(MD_SYS "/degraded", &degraded) &&
				  !degraded); i++)
		usleep(100000);
	mir_writer_stop(&w);
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "system"));
	TH_LOG("%d writes, %d failed, %d during the rebuild", w.done,
	       w.failed, w.during);
	ASSERT_EQ(0, w.failed);
	ASSERT_LE(5, w.during)
		TH_LOG("the rebuild was not under way during the writes");
	ASSERT_TRUE(md_action_is("idle"));

	ASSERT_EQ(-1, mir_diff(m));
	ASSERT_EQ(0, sysfs_read_ll(MD_SYS "/degraded", &degraded));
	ASSERT_EQ(0, degraded);
	ASSERT_EQ(0, md_check(MD_SYS));
	mir_legs_check(_metadata, m);
}

/*
 * The array is created without --assume-clean, so md resyncs it, slowly;
 * writes from device memory race the resync: every write succeeds, and
 * at the end md's check finds no mismatch and every leg holds the model.
 */
TEST_F_TIMEOUT(mirror, resync_during_writes, 600)
{
	struct mir *m = &self->m;
	struct mir_writer w = { .m = m, .action = "resync" };
	char limit[32];
	int i;

	/*
	 * Slow from the start: the resync begins as the array is made, and
	 * at 1000 KiB/s takes 65 s, longer than making the array and
	 * writing its pattern take on a debug kernel (at 5000 it was over
	 * before the first look); md_unthrottle() ends it once writes raced
	 * it.
	 */
	ASSERT_EQ(0, sysfs_read("/proc/sys/dev/raid/speed_limit_max", limit,
				sizeof(limit)));
	ASSERT_EQ(0, sysfs_write("/proc/sys/dev/raid/speed_limit_max", "1000"));
	i = mir_create(m, false, true, "--bitmap=none", false);
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_max", "1000"));
	EXPECT_EQ(0, sysfs_write("/proc/sys/dev/raid/speed_limit_max", limit));
	ASSERT_EQ(0, i);
	md_wait_action("resync", true, 600, NULL);
	ASSERT_TRUE(md_action_is("resync"));

	ASSERT_EQ(0, pthread_create(&w.thread, NULL, mir_writer_main, &w));
	md_wait_action("resync", false, 600, &w.during);
	md_unthrottle(_metadata);
	md_wait_action("idle", true, 1200, NULL);
	mir_writer_stop(&w);
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "system"));
	TH_LOG("%d writes, %d failed, %d during the resync", w.done,
	       w.failed, w.during);
	ASSERT_EQ(0, w.failed);
	ASSERT_LE(5, w.during)
		TH_LOG("the resync was not under way during the writes");
	ASSERT_TRUE(md_action_is("idle"));

	ASSERT_EQ(-1, mir_diff(m));
	mir_healthy(_metadata, m);
	ASSERT_EQ(0, md_check(MD_SYS));
	mir_legs_check(_metadata, m);
}

/*
 * A replacement that cannot take P2PDMA pages (a loop device: mdadm
 * --replace, slowed down so that it is still under way): raid1 does not
 * stack a replacement into the array's limits, so the array may still
 * say pci_p2pdma 1, but the replacement is written too.  An O_DIRECT
 * write from device memory must get EREMOTEIO and change nothing (not
 * reach the loop driver, which would copy it with the CPU); a routed
 * one is copied (counted: raid10 does stack the replacement, so there
 * the array loses the flag); the array stays healthy.
 */
TEST_F_TIMEOUT(mirror, replacement_without_p2p, 300)
{
	struct mir *m = &self->m;
	char cmd[1024], loop[32] = "";
	long long fallbacks0, fallbacks, degraded = -1;
	ssize_t n;
	int fd;

	ASSERT_EQ(0, mir_create(m, false, false, "--bitmap=none", false));
	fd = open(LOOP_FILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 128 * MiB));
	close(fd);
	ASSERT_EQ(0, loop_attach(LOOP_FILE, loop, sizeof(loop)));
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_max", "1000"));
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "1000"));
	xsnprintf(cmd, sizeof(cmd),
		  "mdadm --quiet " MD " --add %s && mdadm --quiet " MD " --replace %s --with %s",
		  loop, m->legs[0], loop);
	EXPECT_EQ(0, run_cmd(cmd));
	md_wait_action("recover", true, 600, NULL);
	TH_LOG("replacing %s with %s: sync_action %s, pci_p2pdma %d",
	       m->legs[0], loop, md_action_is("recover") ? "recover" : "?",
	       queue_p2p(MD));
	/* The premise on raid1: the array still says it takes them. */
	if (!variant->raid10) {
		EXPECT_EQ(1, queue_p2p(MD));
	}
	fallbacks0 = router_stat("fallback_eremoteio") +
		     router_stat("fallback_unreachable") +
		     router_stat("fallback_no_p2p_queue");

	n = mir_write(m, m->dev, true, 2 * MiB, 1 * MiB, m->seed + 7);
	TH_LOG("O_DIRECT write: %zd (%s)", n, n < 0 ? strerror(errno) : "");
	EXPECT_EQ(-1, n);
	EXPECT_EQ(EREMOTEIO, errno);
	EXPECT_TRUE(md_action_is("recover"))
		TH_LOG("the replacement was not under way during the write");
	n = mir_write(m, m->dev, false, 5 * MiB, 1 * MiB, m->seed + 8);
	EXPECT_EQ(1 * MiB, n);
	fallbacks = router_stat("fallback_eremoteio") +
		    router_stat("fallback_unreachable") +
		    router_stat("fallback_no_p2p_queue");
	TH_LOG("routed write: copied, fallback counters +%lld",
	       fallbacks - fallbacks0);
	EXPECT_LT(fallbacks0, fallbacks);

	/* Let the replacement finish; then the data is the model. */
	md_unthrottle(_metadata);
	md_wait_action("idle", true, 1200, NULL);
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "system"));
	EXPECT_EQ(-1, mir_diff(m));
	EXPECT_EQ(0, sysfs_read_ll(MD_SYS "/degraded", &degraded));
	EXPECT_EQ(0, degraded);
	EXPECT_EQ(0, md_check(MD_SYS));
	teardown_stacks(loop);
}

/* Members of md0 whose bad_blocks list is not empty. */
static int md_members_with_bad_blocks(void)
{
	struct dirent **names;
	int n, i, with = 0;

	n = scandir(MD_SYS, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		char path[PATH_MAX], list[256];

		if (!strncmp(names[i]->d_name, "dev-", 4)) {
			snprintf(path, sizeof(path), MD_SYS "/%s/bad_blocks",
				 names[i]->d_name);
			if (sysfs_read(path, list, sizeof(list)) || list[0])
				with++;
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return with;
}

/*
 * raid1 and raid10 over two dm-linear legs, as LVM builds them.  While
 * routed writes from device memory run, one leg's table is reloaded, again
 * and again, onto dm-delay, which does not pass P2PDMA pages, and back.
 * Writes that wait out a reload's suspend reach the new table and are
 * refused there (BLK_STS_TARGET), after md asked the leg: md must write
 * that leg's copy again through RAM (the premise: the function tracer sees
 * raid1_p2pdma_write_ram() called), never take it for a media error.  Every
 * write succeeds; the array is not degraded, no leg has a write error, a
 * wish for replacement or a bad block; md's check finds no mismatch, and
 * every leg holds the model.
 */
TEST_F_TIMEOUT(global, mirror_reload_leg_during_writes, 900)
{
	int kind;

	for (kind = 0; kind < 2; kind++) {
		struct mir m;
		struct mir_writer w = { .m = &m, .routed_only = true };
		long long sectors, degraded = -1, errors;
		int round, rewrites = 0, members;
		char *trace, cmd[1024];

		MIR_NEED(&m, 2);
		if (access(TRACEFS "/trace", F_OK))
			ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0,
					   NULL));
		ASSERT_EQ(0, mir_init(&m, 2, kind, true));
		ASSERT_EQ(0, mir_create(&m, false, false, "--bitmap=internal",
					false));
		xsnprintf(cmd, sizeof(cmd), "/sys/block/%s/size", m.nvme[1]);
		ASSERT_EQ(0, sysfs_read_ll(cmd, &sectors));

		trace_off();
		ASSERT_EQ(0, sysfs_write(TRACEFS "/set_ftrace_filter",
					 "raid1_p2pdma_write_ram"));
		ASSERT_EQ(0, trace_clear());
		ASSERT_EQ(0, sysfs_write(TRACEFS "/tracing_on", "1"));
		ASSERT_EQ(0, sysfs_write(TRACEFS "/current_tracer",
					 "function"));
		ASSERT_EQ(0, pthread_create(&w.thread, NULL, mir_writer_main,
					    &w));
		mir_wait_writes(&w, 2);
		/* Race on until some writes met a reload, 60 rounds at most. */
		for (round = 0; round < 60 && rewrites < 3; round++) {
			const char *table = round % 2 ? "linear" : "delay";

			xsnprintf(cmd, sizeof(cmd),
				  "dmsetup suspend --noudevsync " MIR_DM_LEG
				  "1 && sleep 0.1 && dmsetup reload " MIR_DM_LEG
				  "1 --table '0 %lld %s /dev/%s 0%s' && dmsetup resume --noudevsync "
				  MIR_DM_LEG "1",
				  sectors, table, m.nvme[1],
				  round % 2 ? "" : " 0");
			EXPECT_EQ(0, run_cmd(cmd));
			/* dm-delay does not pass P2PDMA pages; linear does. */
			EXPECT_EQ(round % 2,
				  queue_p2p("/dev/mapper/" MIR_DM_LEG "1"));
			usleep(100000);
			if (round % 10 == 9) {
				trace = trace_slurp();
				ASSERT_NE(NULL, trace);
				rewrites = count_str(trace,
						     " raid1_p2pdma_write_ram <-");
				free(trace);
			}
		}
		/* The leg ends as it began: linear. */
		if (round % 2)
			EXPECT_EQ(0, run_cmdf("dmsetup reload " MIR_DM_LEG
					      "1 --table '0 %lld linear /dev/%s 0' && dmsetup resume --noudevsync "
					      MIR_DM_LEG "1", sectors, m.nvme[1]));
		mir_writer_stop(&w);
		/* Stop, read, then drop the tracer, which empties the buffer. */
		ASSERT_EQ(0, sysfs_write(TRACEFS "/tracing_on", "0"));
		trace = trace_slurp();
		trace_off();
		ASSERT_NE(NULL, trace);
		rewrites = count_str(trace, " raid1_p2pdma_write_ram <-");
		free(trace);
		TH_LOG("raid%s: %d reloads, %d writes, %d failed, %d copies written again from RAM",
		       kind ? "10" : "1", round, w.done, w.failed, rewrites);
		EXPECT_LE(1, rewrites)
			TH_LOG("no write met a reload");
		EXPECT_EQ(0, w.failed);

		EXPECT_EQ(0, sysfs_read_ll(MD_SYS "/degraded", &degraded));
		EXPECT_EQ(0, degraded);
		EXPECT_EQ(0, md_members_with("faulty", &members, &errors));
		EXPECT_EQ(2, members);
		EXPECT_EQ(0, errors);
		EXPECT_EQ(0, md_members_with("write_error", &members, NULL));
		EXPECT_EQ(0, md_members_with("want_replacement", &members,
					     NULL));
		EXPECT_EQ(0, md_members_with_bad_blocks());
		EXPECT_EQ(-1, mir_diff(&m));
		EXPECT_EQ(0, md_check(MD_SYS));
		mir_legs_check(_metadata, &m);
		mir_free(&m);
	}
}

/*
 * A raid10 (near 2) reshaped from 2 legs to 3 (mdadm --grow
 * --raid-devices=3), slowly, while writes from device memory go on:
 * every write succeeds, at least 5 race the reshape, and at the end md's
 * check finds no mismatch and each leg left out in turn still leaves the
 * model.
 */
TEST_F_TIMEOUT(global, raid10_reshape_during_writes, 900)
{
	struct mir m;
	struct mir_writer w = { .m = &m, .action = "reshape" };
	long long raid_disks = -1, degraded = -1;
	char cmd[1024];
	int ret;

	MIR_NEED(&m, 3);
	ASSERT_EQ(0, mir_init(&m, 3, true, false))
		TH_LOG("no memory");
	m.nlegs = 2;
	ASSERT_EQ(0, mir_create(&m, false, false, "--bitmap=none", false));
	ASSERT_EQ(0, pthread_create(&w.thread, NULL, mir_writer_main, &w));
	mir_wait_writes(&w, 3);

	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_max", "3000"));
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "3000"));
	xsnprintf(cmd, sizeof(cmd),
		  "mdadm --zero-superblock /dev/%s 2>/dev/null; mdadm --quiet " MD
		  " --add /dev/%s && mdadm --grow " MD " --raid-devices=3",
		  m.nvme[2], m.nvme[2]);
	EXPECT_EQ(0, run_cmd(cmd));
	md_wait_action("idle", true, 600, &w.during);
	md_unthrottle(_metadata);
	md_wait_action("idle", true, 1800, NULL);
	mir_writer_stop(&w);
	EXPECT_EQ(0, sysfs_write(MD_SYS "/sync_speed_min", "system"));
	ret = sysfs_read_ll(MD_SYS "/raid_disks", &raid_disks);
	TH_LOG("%d writes, %d failed, %d during the reshape; raid_disks %lld",
	       w.done, w.failed, w.during, raid_disks);
	EXPECT_EQ(0, w.failed);
	EXPECT_LE(5, w.during)
		TH_LOG("the reshape was not under way during the writes");
	EXPECT_TRUE(md_action_is("idle"));
	EXPECT_EQ(0, ret);
	EXPECT_EQ(3, raid_disks);

	if (!_metadata->exit_code) {
		m.nlegs = 3;
		snprintf(m.legs[2], sizeof(m.legs[2]), "/dev/%s", m.nvme[2]);
		EXPECT_EQ(-1, mir_diff(&m));
		EXPECT_EQ(0, sysfs_read_ll(MD_SYS "/degraded", &degraded));
		EXPECT_EQ(0, degraded);
		EXPECT_EQ(0, md_check(MD_SYS));
		mir_legs_check(_metadata, &m);
	}
	mir_free(&m);
}

/* Hits of the kprobe on bitmap_start_behind_write(), or -1. */
static long long behind_hits(void)
{
	return kprobe_hits(KP_NAME);
}

static int behind_probe(bool on)
{
	return kprobe_set(KP_NAME, on ? "bitmap_start_behind_write" : NULL);
}

/*
 * raid1 with a bitmap and its last leg --write-mostly, --write-behind:
 * a write from RAM is written behind (the premise: the kprobe fires),
 * writes from device memory never are, and still reach every leg.
 */
TEST_F_TIMEOUT(mirror, write_mostly, 300)
{
	struct mir *m = &self->m;
	long long hits0, hits1;
	unsigned int i;
	ssize_t n;
	int fd;

	ASSERT_EQ(0, mir_create(m, false, false, variant->raid10 ?
				"--bitmap=internal" :
				"--bitmap=internal --write-behind=256",
				!variant->raid10));
	if (access(TRACEFS "/kprobe_events", F_OK)) {
		ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0, NULL))
			TH_LOG("no tracefs at " TRACEFS);
	}
	behind_probe(false);
	ASSERT_EQ(0, behind_probe(true));
	hits0 = behind_hits();
	ASSERT_LE(0, hits0) TH_LOG("no kprobe on bitmap_start_behind_write");

	/* From RAM: written behind on raid1 (raid10 has no write-behind). */
	fd = open(MD, O_RDWR | O_DIRECT);
	ASSERT_LE(0, fd);
	pattern_fill(m->buf, 1 * MiB, 14 * MiB, m->seed + 50);
	ASSERT_EQ(1 * MiB, pwrite(fd, m->buf, 1 * MiB, 14 * MiB));
	close(fd);
	memcpy(m->model + 14 * MiB, m->buf, 1 * MiB);
	hits1 = behind_hits();
	TH_LOG("writes behind for 1 MiB from RAM: %lld", hits1 - hits0);
	if (variant->raid10) {
		ASSERT_EQ(hits0, hits1);
	} else {
		ASSERT_LT(hits0, hits1);
	}

	/*
	 * From device memory: the O_DIRECT writes and the routed ones that
	 * are aligned, which are DMAed whole.  (The unaligned head and tail
	 * of the others go through the page cache, in RAM, and its writeback
	 * may well be written behind.)
	 */
	for (i = 0; i < ARRAY_SIZE(mir_writes); i++) {
		if (!mir_writes[i].direct &&
		    (mir_writes[i].off | mir_writes[i].len) % 4096)
			continue;
		n = mir_write_nth(_metadata, m, i);
		ASSERT_EQ((ssize_t)mir_writes[i].len, n);
	}
	TH_LOG("writes behind for device memory: %lld",
	       behind_hits() - hits1);
	ASSERT_EQ(hits1, behind_hits());
	behind_probe(false);
	for (i = 0; i < ARRAY_SIZE(mir_writes); i++) {
		if (mir_writes[i].direct ||
		    !((mir_writes[i].off | mir_writes[i].len) % 4096))
			continue;
		n = mir_write_nth(_metadata, m, i);
		ASSERT_EQ((ssize_t)mir_writes[i].len, n);
	}

	ASSERT_EQ(-1, mir_diff(m));
	mir_healthy(_metadata, m);
	ASSERT_EQ(0, md_check(MD_SYS));
	mir_legs_check(_metadata, m);
}

TEST_HARNESS_MAIN
