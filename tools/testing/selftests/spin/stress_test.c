// SPDX-License-Identifier: GPL-2.0
/*
 * Randomized differential stress for the P2P router and P-readahead.
 *
 * Several threads share one file and issue random pread()s into device
 * memory and into RAM, preadv2()s that mix the two, pwrite()s from
 * either, hole punches, fadvise()s and fsync()s, while the first thread
 * now and then truncates the file and grows it back, or drops the page
 * caches.  Every byte read is compared with a reference model of the
 * file kept in RAM; at the end the whole file is read back cold, into RAM
 * and into device memory, and compared once more.  The router's counters
 * must show that it DMAed both ways (p2p_bytes, p2p_write_bytes), or the
 * run tested only the copies.
 *
 * Each thread owns a region of the file (the boundaries fall in the
 * middle of pages on purpose, so neighbours share pages) and holds a
 * read lock for its operations; truncation and cache drops take the
 * write lock.  So the model is exact while the threads still race on the
 * page cache, the router's windows and the read-ahead partition.
 *
 * Bounded by $SPIN_STRESS_SECS (default 15) per variant.  The seed is
 * printed; $SPIN_STRESS_SEED=<seed> replays every thread's sequence of
 * operations (not their interleaving).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
#include <sys/uio.h>

#include "spin_util.h"
#include "../kselftest_harness.h"

#define FILE_SIZE	(16 * MiB)
#define THREADS		3
#define SLICE		(4 * MiB)	/* each thread's device memory */
#define DEV_MAP		(THREADS * SLICE > FILE_SIZE ? THREADS * SLICE : FILE_SIZE)
#define MAX_IO		(1 * MiB + 3)
#define MNT		"/mnt/spin-stress"
#define MD		"/dev/md0"

struct stress;

struct worker {
	struct stress *s;
	pthread_t tid;
	int id;
	int fd;			/* its own open file: its own read-ahead */
	uint64_t rng;
	size_t lo, hi;		/* its region of the file */
	unsigned char *dev;	/* SLICE of device memory */
	unsigned char *ram;	/* SLICE of RAM */
	long ops;
	long long bytes_checked;
	char err[512];		/* the first failure */
};

struct stress {
	const char *path;
	unsigned char *model;	/* what the file holds */
	pthread_rwlock_t lock;
	volatile int stop;
	struct worker w[THREADS];
};

static uint64_t rnd(struct worker *w, uint64_t n)
{
	return n ? xorshift64(&w->rng) % n : 0;
}

/* A length for an I/O: mostly small and odd, sometimes large and aligned. */
static size_t io_len(struct worker *w, size_t room)
{
	size_t len;

	switch (rnd(w, 4)) {
	case 0:
		len = 1 + rnd(w, 4096);
		break;
	case 1:
		len = (1 + rnd(w, 64)) * 4096;
		break;
	case 2:
		len = 1 + rnd(w, 256 * KiB);
		break;
	default:
		len = 1 + rnd(w, MAX_IO);
		break;
	}
	return len < room ? len : room;
}

static size_t io_off(struct worker *w, size_t len)
{
	size_t off = w->lo + rnd(w, w->hi - w->lo - len + 1);

	/* Half the time, page-aligned when that still fits the region. */
	if (rnd(w, 2) && (off & ~4095UL) >= w->lo)
		off &= ~4095UL;
	return off;
}

static void fail(struct worker *w, const char *what, size_t off, size_t len,
		 long ret, const unsigned char *got)
{
	long d = -1;

	if (w->err[0])
		return;
	if (got && ret > 0)
		d = first_diff(got, w->s->model + off, ret);
	if (d >= 0)
		snprintf(w->err, sizeof(w->err),
			 "thread %d op %ld: %s at %zu len %zu: byte %zu is 0x%02x, want 0x%02x",
			 w->id, w->ops, what, off, len, off + d, got[d],
			 w->s->model[off + d]);
	else
		snprintf(w->err, sizeof(w->err),
			 "thread %d op %ld: %s at %zu len %zu returned %ld (%s)",
			 w->id, w->ops, what, off, len, ret,
			 ret < 0 ? strerror(errno) : "short");
	w->s->stop = 1;
}

static void check(struct worker *w, const char *what, size_t off, size_t len,
		  ssize_t ret, const unsigned char *got)
{
	if (ret != (ssize_t)len || memcmp(got, w->s->model + off, len))
		fail(w, what, off, len, ret, got);
	else
		w->bytes_checked += len;
}

static void op_read(struct worker *w, bool to_dev)
{
	size_t len = io_len(w, w->hi - w->lo), off = io_off(w, len);
	unsigned char *buf = to_dev ? w->dev : w->ram;

	buf += rnd(w, SLICE - len + 1) & ~(to_dev && rnd(w, 2) ? 4095UL : 0);
	memset(buf, POISON, len);
	check(w, to_dev ? "pread into device memory" : "pread into RAM",
	      off, len, pread(w->fd, buf, len, off), buf);
}

/* Small sequential reads: what P-readahead serves. */
static void op_stream(struct worker *w)
{
	size_t bs = 4096 << rnd(w, 5), n = 8 + rnd(w, 24), i;
	size_t off = w->lo + rnd(w, w->hi - w->lo);

	off &= ~4095UL;
	if (off < w->lo)
		off += 4096;
	for (i = 0; i < n && off + bs <= w->hi && !w->s->stop; i++, off += bs) {
		memset(w->dev, POISON, bs);
		check(w, "sequential pread into device memory", off, bs,
		      pread(w->fd, w->dev, bs, off), w->dev);
	}
}

/* One read into device memory, RAM and device memory again. */
static void op_readv(struct worker *w)
{
	size_t len = io_len(w, w->hi - w->lo), off = io_off(w, len), a, b;
	struct iovec iov[3];
	ssize_t ret;

	a = rnd(w, len + 1);
	b = a + rnd(w, len - a + 1);
	iov[0] = (struct iovec){ w->dev, a };
	iov[1] = (struct iovec){ w->ram, b - a };
	iov[2] = (struct iovec){ w->dev + SLICE / 2, len - b };
	memset(w->dev, POISON, a);
	memset(w->ram, POISON, b - a);
	memset(w->dev + SLICE / 2, POISON, len - b);
	ret = preadv2(w->fd, iov, 3, off, 0);
	if (ret != (ssize_t)len ||
	    memcmp(w->dev, w->s->model + off, a) ||
	    memcmp(w->ram, w->s->model + off + a, b - a) ||
	    memcmp(w->dev + SLICE / 2, w->s->model + off + b, len - b))
		fail(w, "preadv2 device/RAM/device", off, len, ret, NULL);
	else
		w->bytes_checked += len;
}

static void op_write(struct worker *w, bool from_dev)
{
	size_t len = io_len(w, w->hi - w->lo), off = io_off(w, len), i;
	unsigned char *buf = from_dev ? w->dev : w->ram;
	uint64_t x = xorshift64(&w->rng);
	ssize_t ret;

	for (i = 0; i < len; i++) {
		if (!(i % 8))
			x = xorshift64(&w->rng);
		buf[i] = x >> (8 * (i % 8));
	}
	ret = pwrite(w->fd, buf, len, off);
	if (ret != (ssize_t)len) {
		fail(w, from_dev ? "pwrite from device memory" :
			 "pwrite from RAM", off, len, ret, NULL);
		return;
	}
	memcpy(w->s->model + off, buf, len);
}

static void op_punch(struct worker *w)
{
	size_t len = io_len(w, w->hi - w->lo), off = io_off(w, len);

	if (fallocate(w->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      off, len)) {
		fail(w, "punch hole", off, len, -1, NULL);
		return;
	}
	memset(w->s->model + off, 0, len);
}

static void op_fadvise(struct worker *w)
{
	static const int advice[] = {
		POSIX_FADV_NORMAL, POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM,
		POSIX_FADV_NOREUSE, POSIX_FADV_WILLNEED, POSIX_FADV_DONTNEED,
	};
	size_t len = io_len(w, w->hi - w->lo), off = io_off(w, len);
	int a = advice[rnd(w, ARRAY_SIZE(advice))];

	/* Advice on the whole file affects the whole open file. */
	if (posix_fadvise(w->fd, rnd(w, 4) ? off : 0, rnd(w, 4) ? len : 0, a))
		fail(w, "posix_fadvise", off, len, -1, NULL);
}

/* Truncate the file and grow it back (write lock held). */
static void op_truncate(struct worker *w)
{
	size_t size = rnd(w, FILE_SIZE);

	if (ftruncate(w->fd, size) || ftruncate(w->fd, FILE_SIZE)) {
		fail(w, "truncate and grow", size, FILE_SIZE - size, -1, NULL);
		return;
	}
	memset(w->s->model + size, 0, FILE_SIZE - size);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct stress *s = w->s;

	while (!s->stop) {
		unsigned int op = rnd(w, 100);

		if (w->id == 0 && op < 2) {
			pthread_rwlock_wrlock(&s->lock);
			if (op == 0)
				op_truncate(w);
			else if (drop_caches())
				fail(w, "drop_caches", 0, 0, -1, NULL);
			pthread_rwlock_unlock(&s->lock);
			w->ops++;
			continue;
		}
		pthread_rwlock_rdlock(&s->lock);
		if (op < 30)
			op_read(w, true);
		else if (op < 40)
			op_stream(w);
		else if (op < 50)
			op_readv(w);
		else if (op < 60)
			op_read(w, false);
		else if (op < 75)
			op_write(w, true);
		else if (op < 85)
			op_write(w, false);
		else if (op < 90)
			op_punch(w);
		else if (op < 96)
			op_fadvise(w);
		else if (fsync(w->fd))
			fail(w, "fsync", 0, 0, -1, NULL);
		pthread_rwlock_unlock(&s->lock);
		w->ops++;
	}
	return NULL;
}

FIXTURE(stress) {
	char ns[2][NAME_MAX + 1];
	char blk[NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char nvme_dev[SYSFS_LEN];
	bool mounted;
	bool assembled;
};

FIXTURE_VARIANT(stress) {
	const char *fs;
	int nvme;	/* first rig drive */
	int members;	/* > 1: md over that many rig drives */
	int level;	/* md RAID level */
};

FIXTURE_VARIANT_ADD(stress, xfs) { .fs = "xfs", .nvme = 0, .members = 1 };
FIXTURE_VARIANT_ADD(stress, ext4) { .fs = "ext4", .nvme = 1, .members = 1 };
FIXTURE_VARIANT_ADD(stress, raid0_xfs) {
	.fs = "xfs", .nvme = 0, .members = 2, .level = 0
};

FIXTURE_VARIANT_ADD(stress, raid1_ext4) {
	.fs = "ext4", .nvme = 1, .members = 2, .level = 1
};

FIXTURE_SETUP(stress)
{
	char members[512];
	int i;

	router_learned_reset();	/* each case starts from defaults */
	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel");
	for (i = 0; i < variant->members; i++)
		SPIN_NEED(!nvme_rig_ns(variant->nvme + i, self->ns[i],
				       sizeof(self->ns[i])),
			  SPIN_RIG_DRIVE_FMT, variant->nvme + i,
			  variant->nvme + variant->members);
	ASSERT_EQ(0, nvme_pci_dev(self->ns[0], self->nvme_dev,
				  sizeof(self->nvme_dev)));
	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, self->provider,
			       sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns[0]);
	/* What an earlier test that failed may have left on the drives. */
	umount2(MNT, MNT_DETACH);
	md_stop_ours(MD);
	dm_remove_spin();
	snprintf(self->blk, sizeof(self->blk), "%s", self->ns[0]);
	if (variant->members > 1) {
		ASSERT_EQ(0, md_create(MD, variant->members, self->ns, NULL,
				       members, sizeof(members), "--level=%d",
				       variant->level));
		self->assembled = true;
		snprintf(self->blk, sizeof(self->blk), "md0");
	}
	ASSERT_EQ(0, mkfs_mount(variant->fs, self->blk, MNT));
	self->mounted = true;
}

/* In the parent: the file system must unmount once the test has exited. */
FIXTURE_TEARDOWN_PARENT(stress)
{
	if (self->mounted) {
		int ret = umount_settled(MNT, 30);

		EXPECT_EQ(0, ret)
			TH_LOG("%s on %s: umount after the test exited: %s",
			       variant->fs, self->blk, strerror(-ret));
	}
	if (self->assembled)
		run_cmd("mdadm --stop " MD " 2>/dev/null");
}

TEST_F_TIMEOUT(stress, random_ops, 600)
{
	const char *env_secs = getenv("SPIN_STRESS_SECS");
	const char *env_seed = getenv("SPIN_STRESS_SEED");
	int secs = env_secs ? atoi(env_secs) : 15;
	long long avail0, routed0, ra0, total_ops = 0, checked = 0;
	long long p2p_read0, p2p_write0, p2p_read, p2p_write;
	unsigned char *dev, *ram;
	struct stress s = { .path = MNT "/stress" };
	pthread_rwlockattr_t attr;
	uint64_t seed;
	long d;
	int fd, i;

	seed = env_seed ? strtoull(env_seed, NULL, 0) :
			  (uint64_t)time(NULL) << 16 ^ getpid();
	TH_LOG("seed %llu (SPIN_STRESS_SEED=%llu replays it), %d s, %d threads, on %s",
	       (unsigned long long)seed, (unsigned long long)seed, secs,
	       THREADS, self->blk);

	avail0 = p2pmem_available(self->provider);
	ASSERT_LT(0, avail0);
	s.model = malloc(FILE_SIZE);
	ram = malloc(FILE_SIZE);
	ASSERT_NE(NULL, s.model);
	ASSERT_NE(NULL, ram);
	fd = open(s.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, FILE_SIZE, seed));
	pattern_fill(s.model, FILE_SIZE, 0, seed);
	ASSERT_EQ(0, drop_caches());
	dev = p2pmem_map(self->provider, DEV_MAP);
	ASSERT_NE(NULL, dev);
	/* Writer first: glibc's default would starve the truncations. */
	ASSERT_EQ(0, pthread_rwlockattr_init(&attr));
	ASSERT_EQ(0, pthread_rwlockattr_setkind_np(&attr,
						   PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP));
	ASSERT_EQ(0, pthread_rwlock_init(&s.lock, &attr));
	routed0 = router_stat("routed_reads");
	ra0 = router_stat("ra_reads");
	p2p_read0 = router_stat("p2p_bytes");
	p2p_write0 = router_stat("p2p_write_bytes");
	ASSERT_LE(0, p2p_read0);
	ASSERT_LE(0, p2p_write0);

	for (i = 0; i < THREADS; i++) {
		struct worker *w = &s.w[i];

		w->s = &s;
		w->id = i;
		w->rng = seed ^ (0x9e3779b97f4a7c15ULL * (i + 1));
		/* Boundaries in the middle of pages: neighbours share them. */
		w->lo = i ? (size_t)FILE_SIZE / THREADS * i + 777 : 0;
		w->hi = i == THREADS - 1 ? FILE_SIZE :
			(size_t)FILE_SIZE / THREADS * (i + 1) + 777;
		w->dev = dev + i * SLICE;
		w->ram = malloc(SLICE);
		w->fd = open(s.path, O_RDWR);
		ASSERT_NE(NULL, w->ram);
		ASSERT_LE(0, w->fd);
	}
	for (i = 0; i < THREADS; i++) {
		ASSERT_EQ(0, pthread_create(&s.w[i].tid, NULL, worker_main,
					    &s.w[i]));
	}
	for (i = 0; i < secs * 10 && !s.stop; i++)
		usleep(100 * 1000);
	s.stop = 1;
	for (i = 0; i < THREADS; i++) {
		struct worker *w = &s.w[i];

		pthread_join(w->tid, NULL);
		TH_LOG("thread %d: %ld operations, %lld bytes read and checked",
		       i, w->ops, w->bytes_checked);
		total_ops += w->ops;
		checked += w->bytes_checked;
		close(w->fd);
		free(w->ram);
	}
	for (i = 0; i < THREADS; i++) {
		EXPECT_EQ(0, s.w[i].err[0]) TH_LOG("%s (seed %llu)", s.w[i].err,
						   (unsigned long long)seed);
	}
	p2p_read = router_stat("p2p_bytes") - p2p_read0;
	p2p_write = router_stat("p2p_write_bytes") - p2p_write0;
	TH_LOG("%lld operations, %lld bytes checked, %lld routed reads, %lld read-ahead reads, %lld bytes DMAed into device memory, %lld out of it",
	       total_ops, checked, router_stat("routed_reads") - routed0,
	       router_stat("ra_reads") - ra0, p2p_read, p2p_write);
	/*
	 * The router must have been asked, and must have DMAed both ways,
	 * or this tested only the copies.
	 */
	EXPECT_LT(routed0, router_stat("routed_reads"));
	EXPECT_LT(0, p2p_read);
	EXPECT_LT(0, p2p_write);

	/* The whole file, cold, into RAM and into device memory. */
	ASSERT_EQ(0, fsync(fd));
	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(FILE_SIZE, pread(fd, ram, FILE_SIZE, 0));
	d = first_diff(ram, s.model, FILE_SIZE);
	EXPECT_EQ(-1, d) TH_LOG("cold read into RAM differs at %ld", d);
	ASSERT_EQ(0, drop_caches());
	memset(dev, POISON, FILE_SIZE);
	ASSERT_EQ(FILE_SIZE, pread(fd, dev, FILE_SIZE, 0));
	d = first_diff(dev, s.model, FILE_SIZE);
	EXPECT_EQ(-1, d) TH_LOG("cold read into device memory differs at %ld",
				d);

	close(fd);
	munmap(dev, DEV_MAP);
	free(ram);
	free(s.model);
	/* Every page of device memory came back. */
	EXPECT_EQ(avail0, p2pmem_available(self->provider));
}

TEST_HARNESS_MAIN
