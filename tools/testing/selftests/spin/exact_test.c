// SPDX-License-Identifier: GPL-2.0
/*
 * Exact, not nearly: a routed read or write changes no state that the same
 * buffered call would not (issue #28).
 *
 * A buffered read or write starts no writeback, neither reports nor clears
 * a pending writeback error (AS_EIO, AS_ENOSPC), writes into the folios it
 * finds rather than replacing them, and with the application's RWF_NOWAIT
 * returns what the page cache holds or EAGAIN.  The P2P router serves such
 * calls partly by direct I/O, whose O_DIRECT primitive does all of those
 * things; each case here checks that a routed call does none of them, and
 * proves its premise: the DMA happened (stats), the fault fired
 * (fail_make_request's budget went down), the pin overlapped the write
 * (timestamps).
 *
 * "exact" runs on XFS, ext4 and the raw namespace of rig drive 0.  "xfsclose"
 * is XFS's flush on close() after a truncate down, with a read into RAM
 * first (the premise: the flush happens) and then into device memory.
 */
#define _GNU_SOURCE
#include "spin_util.h"
#include "../kselftest_harness.h"

#include <liburing.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>

#define MNT		"/mnt/spin-exact"
#define FILE_SIZE	(16 * MiB)
#define LEN		(4 * MiB)	/* device memory, and the routed range */
#define OFF		(4 * MiB)	/* where routed calls go in the file */
#define FAIL_DIR	"/sys/kernel/debug/fail_make_request"
#define FAIL_TIMES	1000000
#define STR_(x)		#x
#define STR(x)		STR_(x)
#define DELAY_DM	"spin-exact-delay"
#define DELAY_FILE	"/tmp/spin-exact-delay.img"
#define DELAY_MS	1000
#define PIN_OFF		(OFF + 1 * MiB)	/* the pinned range */
#define PIN_LEN		(64 * KiB)

FIXTURE(exact) {
	char ns[NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char path[PATH_MAX];
	struct fault_attrs fail;	/* fail_make_request, put back */
	char loop[64];
	unsigned char *dev;	/* device memory, LEN */
	unsigned char *ram;	/* LEN */
	unsigned char *want;	/* LEN */
	unsigned char *dio;	/* LEN, aligned for O_DIRECT */
	uint64_t seed;
	int fd;
	bool mounted, failing, delay;
};

FIXTURE_VARIANT(exact) {
	const char *fs;		/* NULL: the raw namespace */
};

FIXTURE_VARIANT_ADD(exact, xfs) { .fs = "xfs" };
FIXTURE_VARIANT_ADD(exact, ext4) { .fs = "ext4" };
FIXTURE_VARIANT_ADD(exact, raw) { .fs = NULL };

/* Wait up to 10 s for no page to be under writeback; 0 once none is. */
static int writeback_idle(void)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if (vmstat("nr_writeback") == 0)
			return 0;
		usleep(10000);
	}
	return -1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int exact_make_it_fail(FIXTURE_DATA(exact) *self, bool on)
{
	int ret = make_it_fail(self->ns, on);

	if (!ret)
		self->failing = on;
	return ret;
}

FIXTURE_SETUP(exact)
{
	int fd;

	router_learned_reset();	/* each case starts from defaults */
	self->fd = -1;
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
	ASSERT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", "1"));
	md_stop_ours("/dev/md0");
	run_cmd("dmsetup remove --noudevsync " DELAY_DM " 2>/dev/null");
	self->seed = getpid() ^ 0xe7ac7ULL << 32;
	TH_LOG("%s on %s, seed %llu", variant->fs ? variant->fs : "raw",
	       self->ns, (unsigned long long)self->seed);

	if (variant->fs) {
		ASSERT_EQ(0, mkfs_mount_opts(variant->fs, self->ns, MNT,
					     " -E lazy_itable_init=0,lazy_journal_init=0"));
		self->mounted = true;
		snprintf(self->path, sizeof(self->path), MNT "/data");
		fd = open(self->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else {
		snprintf(self->path, sizeof(self->path), "/dev/%s", self->ns);
		fd = open(self->path, O_RDWR);
	}
	ASSERT_LE(0, fd) TH_LOG("%s: %s", self->path, strerror(errno));
	ASSERT_EQ(0, write_pattern(fd, FILE_SIZE, self->seed));	/* OLD */
	close(fd);
	ASSERT_EQ(0, drop_caches());

	self->dev = p2pmem_map(self->provider, LEN);
	ASSERT_NE(NULL, self->dev);
	self->ram = malloc(LEN);
	self->want = malloc(LEN);
	ASSERT_NE(NULL, self->ram);
	ASSERT_NE(NULL, self->want);
	ASSERT_EQ(0, posix_memalign((void **)&self->dio, 4096, LEN));
	self->fd = open(self->path, O_RDWR);
	ASSERT_LE(0, self->fd);

	ASSERT_EQ(0, fault_attrs_save(&self->fail, FAIL_DIR));
}

FIXTURE_TEARDOWN(exact)
{
	if (self->failing)
		EXPECT_EQ(0, exact_make_it_fail(self, false));
	fault_attrs_restore(&self->fail);
	if (self->fd >= 0)
		close(self->fd);
	if (self->delay) {
		run_cmd("dmsetup remove --noudevsync " DELAY_DM);
		loop_detach(self->loop);
		unlink(DELAY_FILE);
	}
	if (self->dev)
		munmap(self->dev, LEN);
	free(self->ram);
	free(self->want);
	free(self->dio);
	if (self->mounted)
		umount2(MNT, MNT_DETACH);
}

/*
 * Buffered writes of NEW bytes to [0, 64 KiB), whose writeback then fails
 * without anyone collecting the error: only SYNC_FILE_RANGE_WRITE, which
 * starts writeback and looks at no error, and a wait for it to end that
 * looks at none either.  The file's AS_EIO is then set, for the next
 * O_DIRECT call (or fsync(), sync_blockdev()) to report.
 */
static void fail_writeback(struct __test_metadata *_metadata,
			   FIXTURE_DATA(exact) *self, bool fs)
{
	long long left;
	int sfd;

	pattern_fill(self->ram, 64 * KiB, 0, ~self->seed);
	ASSERT_EQ(64 * KiB, pwrite(self->fd, self->ram, 64 * KiB, 0));
	/* The log or journal first: only data goes out while it fails. */
	if (fs) {
		sfd = open(MNT "/sentinel", O_RDWR | O_CREAT | O_TRUNC, 0644);
		ASSERT_LE(0, sfd);
		ASSERT_EQ(4096, pwrite(sfd, self->ram, 4096, 0));
		ASSERT_EQ(0, fsync(sfd));
		close(sfd);
	}
	ASSERT_EQ(0, fault_attrs_arm(FAIL_DIR, STR(FAIL_TIMES)));
	ASSERT_EQ(0, exact_make_it_fail(self, true));
	ASSERT_EQ(0, sync_file_range(self->fd, 0, 64 * KiB,
				     SYNC_FILE_RANGE_WRITE));
	ASSERT_EQ(0, writeback_idle());
	ASSERT_EQ(0, exact_make_it_fail(self, false));
	ASSERT_EQ(0, sysfs_read_ll(FAIL_DIR "/times", &left));
	TH_LOG("writeback of 64 KiB: %lld bios failed", FAIL_TIMES - left);
	ASSERT_LT(0, FAIL_TIMES - left) TH_LOG("no bio failed");
}

/*
 * The pending error is reported by the next O_DIRECT read, and only by
 * it, as after any buffered read; the read is then whole and right.
 */
static void expect_pending_eio(struct __test_metadata *_metadata,
			       FIXTURE_DATA(exact) *self, uint64_t seed)
{
	int dfd = open(self->path, O_RDONLY | O_DIRECT);
	ssize_t n;
	int err;

	ASSERT_LE(0, dfd);
	n = pread(dfd, self->dio, LEN, OFF);
	err = errno;
	EXPECT_EQ(-1, n) TH_LOG("the writeback error was consumed");
	if (n < 0)
		EXPECT_EQ(EIO, err);
	n = pread(dfd, self->dio, LEN, OFF);
	close(dfd);
	ASSERT_EQ(LEN, n);
	pattern_fill(self->want, LEN, OFF, seed);
	EXPECT_EQ(-1, first_diff(self->dio, self->want, LEN));
	/*
	 * fsync() through a descriptor opened before the failure collects
	 * the error's errseq_t too, so that it does not reach the next
	 * case's fsync() of the same block device.
	 */
	EXPECT_EQ(-1, fsync(self->fd));
}

/*
 * A routed read of a range with no dirty folio, in a file whose
 * writeback failed elsewhere: DMAed, right, and the error still pending.
 */
TEST_F_TIMEOUT(exact, read_keeps_wb_error, 120)
{
	long long p2p0, p2p;

	fail_writeback(_metadata, self, variant->fs);
	p2p0 = router_stat("p2p_bytes");
	memset(self->dev, POISON, LEN);
	ASSERT_EQ(LEN, pread(self->fd, self->dev, LEN, OFF));
	p2p = router_stat("p2p_bytes") - p2p0;
	TH_LOG("routed read: %lld bytes DMAed", p2p);
	EXPECT_LT(0, p2p) TH_LOG("a pending writeback error stopped the DMA");
	pattern_fill(self->want, LEN, OFF, self->seed);
	ASSERT_EQ(-1, first_diff(self->dev, self->want, LEN));
	expect_pending_eio(_metadata, self, self->seed);
}

/* The same for a routed write: the direct part keeps the error too. */
TEST_F_TIMEOUT(exact, write_keeps_wb_error, 120)
{
	long long p2p0, p2p;

	fail_writeback(_metadata, self, variant->fs);
	pattern_fill(self->dev, LEN, OFF, self->seed ^ 0x77);
	p2p0 = router_stat("p2p_write_bytes");
	ASSERT_EQ(LEN, pwrite(self->fd, self->dev, LEN, OFF));
	p2p = router_stat("p2p_write_bytes") - p2p0;
	TH_LOG("routed write: %lld bytes DMAed", p2p);
	EXPECT_LT(0, p2p) TH_LOG("a pending writeback error stopped the DMA");
	expect_pending_eio(_metadata, self, self->seed ^ 0x77);
}

/*
 * A routed read of a cold range starts no writeback of the file's dirty
 * range elsewhere, as a buffered read does not.  Counted on the drive:
 * the dirty 1 MiB would be 2048 sectors written (a journal commit that
 * falls in the window writes a few).  Then fsync() writes them: the
 * count would have seen them.
 */
TEST_F_TIMEOUT(exact, read_writes_nothing_back, 120)
{
	long long s0, s, p2p0, p2p;

	pattern_fill(self->ram, 1 * MiB, 0, ~self->seed);
	ASSERT_EQ(1 * MiB, pwrite(self->fd, self->ram, 1 * MiB, 0));
	ASSERT_EQ(0, writeback_idle());
	s0 = sectors_written(self->ns);
	p2p0 = router_stat("p2p_bytes");
	ASSERT_EQ(LEN, pread(self->fd, self->dev, LEN, OFF));
	ASSERT_EQ(0, writeback_idle());
	s = sectors_written(self->ns) - s0;
	p2p = router_stat("p2p_bytes") - p2p0;
	TH_LOG("routed read: %lld bytes DMAed, %lld sectors written", p2p, s);
	ASSERT_LT(0, p2p);
	EXPECT_GT(2048, s);
	pattern_fill(self->want, LEN, OFF, self->seed);
	ASSERT_EQ(-1, first_diff(self->dev, self->want, LEN));

	s0 = sectors_written(self->ns);
	ASSERT_EQ(0, fsync(self->fd));
	s = sectors_written(self->ns) - s0;
	TH_LOG("fsync(): %lld sectors written", s);
	EXPECT_LE(2048, s);
}

/*
 * A routed write over a range with a dirty folio writes into that folio,
 * as a buffered write does, and writes nothing back; the rest is DMAed.
 * Counted on the drive: what it wrote beyond the DMAed bytes is less than
 * the dirty 64 KiB (a journal commit in the window writes a few sectors),
 * and fsync() then writes at least those 64 KiB.
 */
TEST_F_TIMEOUT(exact, write_into_dirty_folio, 120)
{
	long long s0, s, p2p0, p2p, c0, c;
	uint64_t seed2 = self->seed ^ 0x99;
	int dfd;

	pattern_fill(self->ram, 64 * KiB, PIN_OFF, ~self->seed);
	ASSERT_EQ(64 * KiB, pwrite(self->fd, self->ram, 64 * KiB, PIN_OFF));
	pattern_fill(self->dev, LEN, OFF, seed2);
	ASSERT_EQ(0, writeback_idle());
	s0 = sectors_written(self->ns);
	p2p0 = router_stat("p2p_write_bytes");
	c0 = router_stat("cache_write_bytes");
	ASSERT_EQ(LEN, pwrite(self->fd, self->dev, LEN, OFF));
	ASSERT_EQ(0, writeback_idle());
	s = sectors_written(self->ns) - s0;
	p2p = router_stat("p2p_write_bytes") - p2p0;
	c = router_stat("cache_write_bytes") - c0;
	TH_LOG("routed write: %lld bytes DMAed, %lld copied, %lld sectors written",
	       p2p, c, s);
	ASSERT_LT(0, p2p);
	EXPECT_LE(64 * KiB, c);
	EXPECT_LE(p2p / 512, s);
	EXPECT_GT(64 * KiB / 512, s - p2p / 512);

	pattern_fill(self->want, LEN, OFF, seed2);
	ASSERT_EQ(LEN, pread(self->fd, self->ram, LEN, OFF));
	EXPECT_EQ(-1, first_diff(self->ram, self->want, LEN));
	s0 = sectors_written(self->ns);
	ASSERT_EQ(0, fsync(self->fd));
	s = sectors_written(self->ns) - s0;
	TH_LOG("fsync(): %lld sectors written", s);
	EXPECT_LE(64 * KiB / 512, s);
	dfd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(LEN, pread(dfd, self->dio, LEN, OFF));
	close(dfd);
	EXPECT_EQ(-1, first_diff(self->dio, self->want, LEN));
}

struct pin_read {
	const char *dev;
	void *buf;
	ssize_t n;
	int err;
	double start, done;
	pid_t tid;		/* __atomic */
};

/* An O_DIRECT read that pins @buf for DELAY_MS, as an RDMA region would. */
static void *pin_reader(void *arg)
{
	struct pin_read *p = arg;
	int fd = open(p->dev, O_RDONLY | O_DIRECT);

	p->start = now();
	__atomic_store_n(&p->tid, gettid(), __ATOMIC_RELEASE);
	p->n = fd < 0 ? -1 : pread(fd, p->buf, PIN_LEN, 0);
	p->err = errno;
	p->done = now();
	if (fd >= 0)
		close(fd);
	return NULL;
}

/*
 * A folio pinned for DMA while a routed write covers it.  An O_DIRECT read
 * from a dm-delay device into a MAP_SHARED mapping of the file pins the
 * file's folios of [PIN_OFF, + PIN_LEN) for DELAY_MS; meanwhile they are
 * written back (clean, but pinned) and a routed write of NEW bytes covers
 * that range.  A buffered write writes NEW into
 * the pinned folios, and the read's DMA then lands in them: the file ends
 * with the delay device's bytes there, and NEW around them.  A write that
 * dropped the pinned folios would leave NEW there, the read's bytes lost.
 */
TEST_F_TIMEOUT(exact, write_keeps_pinned_folio, 120)
{
	struct pin_read p = { .dev = "/dev/mapper/" DELAY_DM };
	unsigned char *map, *z = self->ram;
	uint64_t seed2 = self->seed ^ 0x55, zseed = self->seed ^ 0x5a;
	long long c0, c, p2p0, p2p;
	double wrote;
	pthread_t t;
	int fd, dfd, i;
	pid_t tid = 0;

	/* The delay device: 1 MiB of Z bytes on a loop device. */
	fd = open(DELAY_FILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	pattern_fill(z, 1 * MiB, 0, zseed);
	ASSERT_EQ(1 * MiB, pwrite(fd, z, 1 * MiB, 0));
	close(fd);
	ASSERT_EQ(0, loop_attach(DELAY_FILE, self->loop, sizeof(self->loop)));
	self->delay = true;
	ASSERT_EQ(0, run_cmdf("dmsetup create --noudevsync " DELAY_DM
			      " --table '0 2048 delay %s 0 %d' && dmsetup mknodes " DELAY_DM,
			      self->loop, DELAY_MS))
		TH_LOG("no dm-delay (CONFIG_DM_DELAY)");

	map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		   OFF);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, madvise(map, LEN, MADV_WILLNEED));
	p.buf = map + (PIN_OFF - OFF);
	memset(p.buf, 0, PIN_LEN);	/* fault it in, writable */

	pattern_fill(self->dev, LEN, OFF, seed2);
	c0 = router_stat("cache_write_bytes");
	p2p0 = router_stat("p2p_write_bytes");
	ASSERT_EQ(0, pthread_create(&t, NULL, pin_reader, &p));
	/*
	 * The reader sleeps on its read, which dm-delay holds: its pages
	 * were pinned before the read was submitted.
	 */
	for (i = 0; i < DELAY_MS; i++) {
		tid = __atomic_load_n(&p.tid, __ATOMIC_ACQUIRE);
		if (tid && task_state(tid) == 'D')
			break;
		usleep(1000);
	}
	ASSERT_EQ('D', task_state(tid))
		TH_LOG("the O_DIRECT read never waited on the delay device");
	/*
	 * The pin faulted the folios in for writing, which dirtied them:
	 * write them back, so that only the pin, not dirtiness, keeps the
	 * routed write from dropping them.
	 */
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(LEN, pwrite(self->fd, self->dev, LEN, OFF));
	wrote = now();
	pthread_join(t, NULL);
	c = router_stat("cache_write_bytes") - c0;
	p2p = router_stat("p2p_write_bytes") - p2p0;
	TH_LOG("pin from %.3f to %.3f s, write done at %.3f s; "
	       "%lld bytes DMAed, %lld through the page cache",
	       0.0, p.done - p.start, wrote - p.start, p2p, c);
	ASSERT_EQ(PIN_LEN, p.n) TH_LOG("read: %s", strerror(p.err));
	/* The premise: the write ran while the folios were pinned. */
	ASSERT_LT(wrote, p.done) TH_LOG("the write did not overlap the pin");
	ASSERT_LT(0, p2p);
	EXPECT_LE(PIN_LEN, c);

	pattern_fill(self->want, LEN, OFF, seed2);
	memcpy(self->want + (PIN_OFF - OFF), z, PIN_LEN);
	ASSERT_EQ(LEN, pread(self->fd, self->ram, LEN, OFF));
	EXPECT_EQ(-1, first_diff(self->ram, self->want, LEN))
		TH_LOG("byte %ld wrong: the pinned folio was dropped?",
		       first_diff(self->ram, self->want, LEN));
	ASSERT_EQ(0, munmap(map, LEN));
	ASSERT_EQ(0, fsync(self->fd));
	dfd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(LEN, pread(dfd, self->dio, LEN, OFF));
	close(dfd);
	EXPECT_EQ(-1, first_diff(self->dio, self->want, LEN));
}

/*
 * The application's RWF_NOWAIT on a cold range into device memory,
 * through preadv2() and io_uring: EAGAIN, as into RAM, and nothing DMAed.
 */
TEST_F_TIMEOUT(exact, nowait_cold, 120)
{
	struct iovec iov = { .iov_base = self->dev, .iov_len = LEN };
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	long long p2p0, p2p;
	ssize_t n;
	int res, err;

	/*
	 * As into RAM, the read may start read-ahead, which on a fast drive
	 * can be done before it looks again: so it returns EAGAIN or what
	 * the page cache holds by then, never bytes by DMA.
	 */
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, resident_pages(self->fd, OFF, LEN));
	p2p0 = router_stat("p2p_bytes");
	memset(self->dev, POISON, LEN);
	n = preadv2(self->fd, &iov, 1, OFF, RWF_NOWAIT);
	err = errno;
	p2p = router_stat("p2p_bytes") - p2p0;
	TH_LOG("preadv2(RWF_NOWAIT): %zd (%s), %lld bytes DMAed", n,
	       n < 0 ? strerror(err) : "-", p2p);
	EXPECT_EQ(0, p2p);
	if (n < 0)
		EXPECT_EQ(EAGAIN, err);
	pattern_fill(self->want, LEN, OFF, self->seed);
	if (n > 0)
		EXPECT_EQ(-1, first_diff(self->dev, self->want, n));

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, io_uring_queue_init(4, &ring, 0));
	sqe = io_uring_get_sqe(&ring);
	memset(self->dev, POISON, LEN);
	io_uring_prep_read(sqe, self->fd, self->dev, LEN, OFF);
	sqe->rw_flags = RWF_NOWAIT;
	p2p0 = router_stat("p2p_bytes");
	ASSERT_EQ(1, io_uring_submit(&ring));
	ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
	res = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	io_uring_queue_exit(&ring);
	p2p = router_stat("p2p_bytes") - p2p0;
	TH_LOG("io_uring read, RWF_NOWAIT: %d, %lld bytes DMAed", res, p2p);
	EXPECT_EQ(0, p2p);
	if (res < 0)
		EXPECT_EQ(-EAGAIN, res);
	if (res > 0)
		EXPECT_EQ(-1, first_diff(self->dev, self->want, res));
}

FIXTURE(xfsclose) {
	char ns[NAME_MAX + 1];
	char provider[SYSFS_LEN];
	unsigned char *buf;	/* what the read goes into */
	unsigned char *ram;	/* what the write comes from */
	bool mounted;
};

FIXTURE_VARIANT(xfsclose) {
	bool device;	/* the read goes into device memory */
};

FIXTURE_VARIANT_ADD(xfsclose, ram) { .device = false };
FIXTURE_VARIANT_ADD(xfsclose, device) { .device = true };

FIXTURE_SETUP(xfsclose)
{
	router_learned_reset();	/* each case starts from defaults */
	SPIN_NEED(!nvme_rig_ns(0, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, 0, 1);
	SPIN_NEED(!p2pmem_find_for_ns(self->ns, true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns);
	ASSERT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", "1"));
	md_stop_ours("/dev/md0");
	ASSERT_EQ(0, mkfs_mount("xfs", self->ns, MNT));
	self->mounted = true;
	ASSERT_EQ(0, write_pattern_file(MNT "/data", 64 * MiB, getpid()));
	if (variant->device)
		self->buf = p2pmem_map(self->provider, 1 * MiB);
	else
		self->buf = malloc(1 * MiB);
	ASSERT_NE(NULL, self->buf);
	self->ram = malloc(1 * MiB);
	ASSERT_NE(NULL, self->ram);
}

FIXTURE_TEARDOWN(xfsclose)
{
	if (self->buf && variant->device)
		munmap(self->buf, 1 * MiB);
	else
		free(self->buf);
	free(self->ram);
	if (self->mounted)
		umount2(MNT, MNT_DETACH);
}

/*
 * XFS flushes delayed allocations on close() after a truncate down
 * (XFS_ITRUNCATED), which ->writepages() clears.  Truncate 64 MiB to 32,
 * write 1 MiB past the new end, read 1 MiB at 8 MiB, close(): the 1 MiB
 * reaches the disk at close(), whether the read went into RAM or was
 * routed into device memory.
 */
TEST_F_TIMEOUT(xfsclose, flush_after_truncate, 120)
{
	long long p2p0, p2p, s0, s;
	int fd;

	ASSERT_EQ(0, drop_caches());
	fd = open(MNT "/data", O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 32 * MiB));
	/* From RAM: a delayed allocation, for close() to flush. */
	memset(self->ram, 0x3c, 1 * MiB);
	ASSERT_EQ(1 * MiB, pwrite(fd, self->ram, 1 * MiB, 33 * MiB));
	p2p0 = router_stat("p2p_bytes");
	ASSERT_EQ(1 * MiB, pread(fd, self->buf, 1 * MiB, 8 * MiB));
	p2p = router_stat("p2p_bytes") - p2p0;
	ASSERT_EQ(0, writeback_idle());
	s0 = sectors_written(self->ns);
	ASSERT_EQ(0, close(fd));
	ASSERT_EQ(0, writeback_idle());
	usleep(100000);
	s = sectors_written(self->ns) - s0;
	TH_LOG("read into %s: %lld bytes DMAed; %lld sectors written at close()",
	       variant->device ? "device memory" : "RAM", p2p, s);
	if (variant->device) {
		ASSERT_LT(0, p2p);
	} else {
		ASSERT_EQ(0, p2p);
	}
	EXPECT_LE(2048, s) TH_LOG("close() flushed nothing");
}

/*
 * io_uring's own reissue.  A read into device memory left in flight whose
 * DMA then fails must be redone where it may wait.  That happens in io-wq,
 * queued through the ring's own task work: on a DEFER_TASKRUN ring an
 * epoll_wait() of the task is not interrupted (no TWA_SIGNAL task work),
 * and on an SQPOLL ring the SQ thread copies nothing (the redo runs in an
 * io-wq worker, "iou-wrk-*", as the tracepoint shows).  The fault: the
 * NVMe driver's own fault injection fails the first request of the
 * namespace at completion, after the DMA was in flight
 * (/sys/kernel/debug/<path disk>/fault_inject); fail_make_request would
 * fail it at submission, where the submitter sees it.
 */
FIXTURE(requeue) {
	char ns[NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char path[PATH_MAX];
	char fault[PATH_MAX];	/* the namespace's fault_inject directory */
	struct fault_attrs fail;	/* its knobs, put back */
	unsigned char *dev;
	unsigned char *want;
	uint64_t seed;
	int fd;
	bool tracing;
};

FIXTURE_VARIANT(requeue) {
	unsigned int flags;	/* io_uring_setup() flags */
};

FIXTURE_VARIANT_ADD(requeue, defer_taskrun) {
	.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
};

FIXTURE_VARIANT_ADD(requeue, sqpoll) { .flags = IORING_SETUP_SQPOLL };

#define SEGMENT_EVENT	TRACEFS "/events/p2p_router/p2p_router_segment/enable"

FIXTURE_SETUP(requeue)
{
	router_learned_reset();	/* each case starts from defaults */
	self->fd = -1;
	debugfs_mount();
	SPIN_NEED(!nvme_rig_ns(0, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, 0, 1);
	SPIN_NEED(!p2pmem_find_for_ns(self->ns, true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns);
	ASSERT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", "1"));
	/* The drive is there: its fault_inject is the kernel's feature. */
	ASSERT_EQ(0, nvme_fault_dir(self->ns, self->fault,
				    sizeof(self->fault)))
		TH_LOG("no NVMe fault injection for %s (CONFIG_FAULT_INJECTION_DEBUG_FS)",
		       self->ns);
	md_stop_ours("/dev/md0");
	self->seed = getpid() ^ 0x7e9ULL << 32;
	snprintf(self->path, sizeof(self->path), "/dev/%s", self->ns);
	ASSERT_EQ(0, write_pattern_file(self->path, FILE_SIZE, self->seed));
	self->dev = p2pmem_map(self->provider, LEN);
	ASSERT_NE(NULL, self->dev);
	self->want = malloc(LEN);
	ASSERT_NE(NULL, self->want);
	self->fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, self->fd);
	/* Not armed by an earlier case that timed out: save it disarmed. */
	ASSERT_EQ(0, fault_attr_set(self->fault, "probability", "0"));
	ASSERT_EQ(0, fault_attrs_save(&self->fail, self->fault));
	if (access(TRACEFS "/trace", F_OK))
		ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0, NULL));
	ASSERT_EQ(0, sysfs_write(TRACEFS "/tracing_on", "1"));
	ASSERT_EQ(0, sysfs_write(SEGMENT_EVENT, "1"));
	self->tracing = true;
}

FIXTURE_TEARDOWN(requeue)
{
	fault_attrs_restore(&self->fail);
	if (self->tracing)
		sysfs_write(SEGMENT_EVENT, "0");
	if (self->fd >= 0)
		close(self->fd);
	if (self->dev)
		munmap(self->dev, LEN);
	free(self->want);
}

TEST_F_TIMEOUT(requeue, failed_dma_redone_in_iowq, 120)
{
	struct io_uring_params p = { .flags = variant->flags,
				     .sq_thread_idle = 2000 };
	struct epoll_event ev = { .events = EPOLLIN };
	long long def0, def, left;
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	char path[PATH_MAX + 64], *trace, *line;
	bool wrk = false, elsewhere = false, again = false;
	int ep, efd, n, err, res;

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, trace_clear());
	ASSERT_EQ(0, io_uring_queue_init_params(8, &ring, &p));
	efd = eventfd(0, 0);
	ep = epoll_create1(0);
	ASSERT_LE(0, efd);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev));

	/* The next request of the namespace fails, and only that one. */
	ASSERT_EQ(0, fault_attrs_arm(self->fault, "1"));

	def0 = router_stat("async_deferred");
	memset(self->dev, POISON, LEN);
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, self->fd, self->dev, LEN, OFF);
	ASSERT_EQ(1, io_uring_submit(&ring));

	/* The task sleeps; nothing of the read's may interrupt it. */
	n = epoll_wait(ep, &ev, 1, 500);
	err = errno;
	TH_LOG("epoll_wait() while the read is redone: %d (%s)", n,
	       n < 0 ? strerror(err) : "timed out");
	EXPECT_EQ(0, n);

	ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
	res = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	io_uring_queue_exit(&ring);
	close(ep);
	close(efd);
	snprintf(path, sizeof(path), "%s/times", self->fault);
	ASSERT_EQ(0, sysfs_read_ll(path, &left));
	def = router_stat("async_deferred") - def0;
	TH_LOG("read: %d; %lld requests failed; %lld reads completed EAGAIN and reissued",
	       res, 1 - left, def);
	/* The premise: the injected fault hit the read's DMA in flight. */
	ASSERT_EQ(0, left);
	ASSERT_LE(1, def);
	ASSERT_EQ(LEN, res);
	pattern_fill(self->want, LEN, OFF, self->seed);
	ASSERT_EQ(-1, first_diff(self->dev, self->want, LEN));

	trace = trace_slurp();
	ASSERT_NE(NULL, trace);
	for (line = strtok(trace, "\n"); line; line = strtok(NULL, "\n")) {
		bool in_wrk = strstr(line, "iou-wrk-");

		if (!strstr(line, "p2p_router_segment:"))
			continue;
		TH_LOG("%s", line);
		wrk |= in_wrk;
		elsewhere |= !in_wrk && strstr(line, "path cache");
		again |= !in_wrk && strstr(line, "path p2p");
	}
	free(trace);
	/*
	 * The redo runs in io-wq, or, when io_uring reissues the -EAGAIN
	 * completion itself, as a new try that may not wait, which the
	 * router serves asynchronously again: by DMA, never by a copy.
	 */
	TH_LOG("redone %s", wrk ? "in io-wq" :
	       again ? "by a second asynchronous try" : "nowhere");
	EXPECT_TRUE(wrk || again) TH_LOG("the read was not redone");
	EXPECT_FALSE(elsewhere) TH_LOG("a copy ran outside io-wq");
}

TEST_HARNESS_MAIN
