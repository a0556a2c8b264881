// SPDX-License-Identifier: GPL-2.0
/*
 * Appends from device memory (issue #29): writes that extend the file are
 * routed on XFS and ext4, and leave what buffered appends leave, during the
 * write, after it, and after a crash at any flush.
 *
 * "append" checks the shapes an application uses (aligned, unaligned,
 * O_APPEND, RWF_APPEND, O_DSYNC, past the end of the file) and an appender
 * from device memory racing a buffered appender from RAM.  Every case reads
 * the file back cold and compares it with a model, and proves the DMA
 * through the router's counters.
 *
 * "crash" records the device under the filesystem with dm-log-writes while
 * routed and buffered appends run with fsync() of the file or of another
 * one, and replays the log mark by mark onto a device that holds a stale
 * pattern: at every mark the filesystem is recovered, the file must be a
 * prefix of what was written, at least what was synced, with no zero and
 * no stale byte in it, and fsck -n must be clean.  A direct write past the
 * end of the file moves the on-disk size; the router must have written
 * back the buffered data before it first.  O_DSYNC and RWF_DSYNC appends
 * without fsync() are replayed entry by entry and checked after every
 * flush and FUA write, as a power cut there would leave them.  It also
 * fails the device (fail_make_request) in the middle of a routed append.
 */
#define _GNU_SOURCE
#include "spin_util.h"
#include "../kselftest_harness.h"

#include <pthread.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#define MNT		"/mnt/spin-append"
#define DEV_LEN		(8 * MiB)	/* device memory */
#define MODEL_LEN	(64 * MiB)
#define PAGE		4096UL

struct stats {
	long long routed, p2p, cache;
};

static void stats_read(struct stats *s)
{
	s->routed = router_stat("routed_writes");
	s->p2p = router_stat("p2p_write_bytes");
	s->cache = router_stat("cache_write_bytes");
}

static void stats_delta(const struct stats *b, struct stats *d)
{
	struct stats a;

	stats_read(&a);
	d->routed = a.routed - b->routed;
	d->p2p = a.p2p - b->p2p;
	d->cache = a.cache - b->cache;
}

/* The first of @len bytes of the file at @off that differ from @want, or -1. */
static long file_diff(const char *path, off_t off, const unsigned char *want,
		      size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	long ret = -2;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (buf && fd >= 0) {
		n = pread(fd, buf, len, off);
		ret = n == (ssize_t)len ? first_diff(buf, want, len) : -3;
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

FIXTURE(append) {
	char ns[NAME_MAX + 1];
	char provider[SYSFS_LEN];
	unsigned char *dev;	/* device memory, DEV_LEN */
	unsigned char *model;	/* what the file must hold, MODEL_LEN */
	off_t size;		/* of the file, in the model */
	uint64_t seed;
	bool mounted;
};

FIXTURE_VARIANT(append) {
	const char *fs;
};

FIXTURE_VARIANT_ADD(append, xfs) { .fs = "xfs" };
FIXTURE_VARIANT_ADD(append, ext4) { .fs = "ext4" };

#define PATH	MNT "/log"

FIXTURE_SETUP(append)
{
	int fd;

	router_learned_reset();	/* each case starts from defaults */
	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	SPIN_NEED(!nvme_rig_ns(0, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, 0, 1);
	SPIN_NEED(!p2pmem_find_for_ns(self->ns, true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns);
	ASSERT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", "1"));
	md_stop_ours("/dev/md0");
	self->seed = getpid() ^ 0xa99e7dULL << 32;
	TH_LOG("%s on %s, seed %llu", variant->fs, self->ns,
	       (unsigned long long)self->seed);
	ASSERT_EQ(0, mkfs_mount_opts(variant->fs, self->ns, MNT,
				     " -E lazy_itable_init=0,lazy_journal_init=0"));
	self->mounted = true;

	self->dev = p2pmem_map(self->provider, DEV_LEN);
	ASSERT_NE(NULL, self->dev);
	self->model = malloc(MODEL_LEN);
	ASSERT_NE(NULL, self->model);
	/* 1 MiB + 777 of old data, on the disk. */
	self->size = MiB + 777;
	pattern_fill(self->model, self->size, 0, self->seed);
	fd = open(PATH, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(self->size, pwrite(fd, self->model, self->size, 0));
	ASSERT_EQ(0, fsync(fd));
	close(fd);
}

FIXTURE_TEARDOWN(append)
{
	if (self->dev)
		munmap(self->dev, DEV_LEN);
	free(self->model);
	if (self->mounted)
		umount2(MNT, MNT_DETACH);
}

/*
 * The file against the model, cold (after drop_caches()), and the size;
 * then read into device memory by the router and compared again.
 */
static void check_file(struct __test_metadata *_metadata,
		       FIXTURE_DATA(append) *self)
{
	size_t len = self->size < (off_t)DEV_LEN ? self->size : DEV_LEN;
	off_t off = self->size - len;
	struct stat st;
	int fd;

	ASSERT_EQ(0, stat(PATH, &st));
	EXPECT_EQ(self->size, st.st_size);
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(-1, file_diff(PATH, 0, self->model, self->size));

	fd = open(PATH, O_RDONLY);
	ASSERT_LE(0, fd);
	memset(self->dev, POISON, len);
	ASSERT_EQ((ssize_t)len, pread(fd, self->dev, len, off));
	close(fd);
	EXPECT_EQ(-1, first_diff(self->dev, self->model + off, len));
}

/*
 * Append @len bytes, at @off into device memory, with @how ("pwrite" at
 * the model's size, "o_append" through an O_APPEND descriptor at offset 0,
 * "rwf_append" with RWF_APPEND at offset 0, "dsync" through an O_APPEND |
 * O_DSYNC descriptor, "rwf_dsync" with RWF_APPEND | RWF_DSYNC at offset 0),
 * and account for it in the model.  @pos is where
 * the write goes, for "pwrite" (the size, or past it).
 */
static void append(struct __test_metadata *_metadata,
		   FIXTURE_DATA(append) *self, const char *how, off_t pos,
		   size_t off, size_t len, struct stats *d)
{
	int flags = O_WRONLY;
	struct stats before;
	struct iovec iov;
	ssize_t n;
	int fd;

	ASSERT_LE(off + len, DEV_LEN);
	ASSERT_LE(pos + len, MODEL_LEN);
	if (!strcmp(how, "o_append"))
		flags |= O_APPEND;
	else if (!strcmp(how, "dsync"))
		flags |= O_APPEND | O_DSYNC;
	pattern_fill(self->dev + off, len, pos, self->seed ^ 0x5eed);
	fd = open(PATH, flags);
	ASSERT_LE(0, fd);
	iov.iov_base = self->dev + off;
	iov.iov_len = len;
	stats_read(&before);
	if (!strcmp(how, "rwf_append"))
		n = pwritev2(fd, &iov, 1, 0, RWF_APPEND);
	else if (!strcmp(how, "rwf_dsync"))
		n = pwritev2(fd, &iov, 1, 0, RWF_APPEND | RWF_DSYNC);
	else if (!strcmp(how, "pwrite"))
		n = pwrite(fd, iov.iov_base, len, pos);
	else
		n = pwrite(fd, iov.iov_base, len, 0);
	stats_delta(&before, d);
	ASSERT_EQ((ssize_t)len, n) TH_LOG("%s: %s", how, strerror(errno));
	ASSERT_EQ(0, close(fd));
	TH_LOG("%s of %zu at %lld: routed %lld, p2p %lld, cache %lld", how,
	       len, (long long)pos, d->routed, d->p2p, d->cache);

	if (pos > self->size)
		memset(self->model + self->size, 0, pos - self->size);
	memcpy(self->model + pos, self->dev + off, len);
	self->size = pos + len;
}

/* Bytes of [@pos, @pos + @len) a routed write sends by DMA. */
static long long dma_part(off_t pos, size_t len)
{
	off_t d0 = (pos + PAGE - 1) & ~(off_t)(PAGE - 1);
	off_t d1 = (pos + len) & ~(off_t)(PAGE - 1);

	return d1 > d0 ? d1 - d0 : 0;
}

/* 4 MiB to a page-aligned end of file, from page-aligned device memory. */
TEST_F_TIMEOUT(append, aligned, 120)
{
	struct stats d;
	int fd;

	/* Make the size page-aligned first, by a buffered write from RAM. */
	fd = open(PATH, O_WRONLY);
	ASSERT_LE(0, fd);
	pattern_fill(self->model + self->size, 2 * MiB - self->size,
		     self->size, self->seed);
	ASSERT_EQ(2 * MiB - self->size,
		  pwrite(fd, self->model + self->size, 2 * MiB - self->size,
			 self->size));
	close(fd);
	self->size = 2 * MiB;

	append(_metadata, self, "pwrite", self->size, 0, 4 * MiB, &d);
	EXPECT_EQ(1, d.routed);
	EXPECT_EQ(4 * MiB, d.p2p);
	EXPECT_EQ(0, d.cache);
	check_file(_metadata, self);
}

/* Unaligned in the file and in device memory: head and tail copied. */
TEST_F_TIMEOUT(append, unaligned, 120)
{
	size_t off = (self->size & (PAGE - 1)) + 3 * PAGE;
	off_t pos = self->size;
	struct stats d;

	append(_metadata, self, "pwrite", pos, off, 3 * MiB + 5, &d);
	EXPECT_EQ(1, d.routed);
	EXPECT_EQ(dma_part(pos, 3 * MiB + 5), d.p2p);
	EXPECT_EQ(3 * MiB + 5 - d.p2p, d.cache);
	check_file(_metadata, self);
}

/*
 * An append made @how, with an offset that says otherwise: it lands at the
 * end, its aligned middle DMAed.
 */
static void append_at_end(struct __test_metadata *_metadata,
			  FIXTURE_DATA(append) *self, const char *how)
{
	off_t pos = self->size;
	struct stats d;

	append(_metadata, self, how, pos, pos & (PAGE - 1), 2 * MiB + 1000,
	       &d);
	EXPECT_EQ(dma_part(pos, 2 * MiB + 1000), d.p2p);
	EXPECT_LT(0, d.p2p);
	check_file(_metadata, self);
}

/* O_APPEND: the offset is ignored, the write lands at the end. */
TEST_F_TIMEOUT(append, o_append, 120)
{
	append_at_end(_metadata, self, "o_append");
}

/* RWF_APPEND on a descriptor without O_APPEND. */
TEST_F_TIMEOUT(append, rwf_append, 120)
{
	append_at_end(_metadata, self, "rwf_append");
}

/*
 * O_APPEND | O_DSYNC twice, then RWF_APPEND | RWF_DSYNC: each write is on
 * the drive when it returns, head, DMAed middle and tail, and so is the
 * size.  Nothing else syncs: a power cut right after them
 * (power_cut_remount()) must keep every byte, and must lose a buffered
 * append from RAM made just before it (the premise: the cut loses what
 * was not made durable).
 */
TEST_F_TIMEOUT(append, dsync, 120)
{
	static const char *const hows[] = { "dsync", "dsync", "rwf_dsync" };
	char late[4096 + 333];	/* into a block nothing allocated */
	struct stat st;
	off_t pos;
	struct stats d;
	int i, fd;

	for (i = 0; i < 3; i++) {
		pos = self->size;
		append(_metadata, self, hows[i], pos, pos & (PAGE - 1),
		       MiB + 333 * (i + 1), &d);
		EXPECT_EQ(dma_part(pos, MiB + 333 * (i + 1)), d.p2p);
		EXPECT_LT(0, d.p2p);
	}
	fd = open(PATH, O_WRONLY | O_APPEND);
	ASSERT_LE(0, fd);
	memset(late, 0x77, sizeof(late));
	ASSERT_EQ((ssize_t)sizeof(late), write(fd, late, sizeof(late)));
	ASSERT_EQ(0, fstat(fd, &st));
	ASSERT_EQ(0, close(fd));
	ASSERT_EQ(self->size + (off_t)sizeof(late), st.st_size);

	ASSERT_EQ(0, power_cut_remount(variant->fs, self->ns, MNT));
	ASSERT_EQ(0, stat(PATH, &st));
	ASSERT_EQ(self->size, st.st_size)
		TH_LOG("after the power cut: %lld bytes, the O_DSYNC/RWF_DSYNC appends end at %lld",
		       (long long)st.st_size, (long long)self->size);
	check_file(_metadata, self);
}

/* A write that starts 1 MiB + 123 past the end: the gap reads as zeros. */
TEST_F_TIMEOUT(append, past_eof, 120)
{
	off_t pos = self->size + MiB + 123;
	struct stats d;

	append(_metadata, self, "pwrite", pos, pos & (PAGE - 1),
	       2 * MiB, &d);
	EXPECT_EQ(dma_part(pos, 2 * MiB), d.p2p);
	EXPECT_LT(0, d.p2p);
	check_file(_metadata, self);
}

/*
 * A record: a header, then its payload, a pattern of (writer, seq).  Each
 * writer appends its records with O_APPEND, so in the file they must
 * follow each other whole, in each writer's order, whatever the other did.
 */
#define REC_MAGIC	0x5350494e41505044ULL	/* "SPINAPPD" */
#define REC_NR		16

struct rec {
	uint64_t magic, writer, seq, len;	/* len: of the whole record */
};

struct appender {
	FIXTURE_DATA(append) *self;
	unsigned char *buf;	/* device memory or RAM */
	size_t max;
	int writer, err;
	uint64_t rnd;
};

/*
 * Any length, but a multiple of 4: the file's end then keeps its alignment
 * modulo 4, which the device-memory writer's buffer matches, so that each
 * of its records with a whole block in it meets the DMA alignment the rig's
 * NVMe wants (4 bytes) and can be routed, and the premise below does not
 * depend on the draw.  Neither blocks nor pages are aligned.
 */
static size_t rec_len(uint64_t *rnd, size_t max)
{
	return (sizeof(struct rec) +
		xorshift64(rnd) % (max - sizeof(struct rec))) & ~(size_t)3;
}

static void rec_fill(unsigned char *p, int writer, uint64_t seq, size_t len,
		     uint64_t seed)
{
	struct rec h = { REC_MAGIC, writer, seq, len };

	memcpy(p, &h, sizeof(h));
	pattern_fill(p + sizeof(h), len - sizeof(h), 0,
		     seed ^ (uint64_t)writer << 48 ^ seq);
}

static void *appender(void *arg)
{
	struct appender *a = arg;
	uint64_t seq;
	int fd = open(PATH, O_WRONLY | O_APPEND);

	if (fd < 0) {
		a->err = errno;
		return NULL;
	}
	for (seq = 0; seq < REC_NR && !a->err; seq++) {
		size_t len = rec_len(&a->rnd, a->max);

		rec_fill(a->buf, a->writer, seq, len, a->self->seed);
		if (write(fd, a->buf, len) != (ssize_t)len)
			a->err = errno ? errno : EIO;
	}
	close(fd);
	return NULL;
}

/*
 * An appender from device memory (records up to 2 MiB, routed) races a
 * buffered appender from RAM (up to 256 KiB) on the same file.  Read back
 * cold, the file is the old data then every record of both, each whole and
 * once, in each writer's order, with nothing else.
 */
TEST_F_TIMEOUT(append, racing_appender, 300)
{
	/* Congruent with the file's end modulo 4, as the records keep it. */
	struct appender a[2] = {
		{ self, self->dev + PAGE - 100 + self->size % 4, 2 * MiB, 0 },
		{ self, NULL, 256 * KiB, 1 },
	};
	uint64_t next[2] = { 0, 0 };
	int switches = 0, last = -1, i;
	unsigned char *file, *want;
	pthread_t t[2];
	struct stats before, d;
	struct stat st;
	off_t off;
	int fd;

	a[1].buf = malloc(a[1].max);
	want = malloc(a[0].max);
	ASSERT_NE(NULL, a[1].buf);
	ASSERT_NE(NULL, want);
	a[0].rnd = self->seed | 1;
	a[1].rnd = ~self->seed | 1;
	stats_read(&before);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, pthread_create(&t[i], NULL, appender, &a[i]));
	}
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	stats_delta(&before, &d);
	TH_LOG("routed %lld, p2p %lld, cache %lld", d.routed, d.p2p, d.cache);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, a[i].err)
			TH_LOG("writer %d: %s", i, strerror(a[i].err));
	}
	/* The premise: the device-memory records went by DMA. */
	EXPECT_LT(0, d.p2p);

	ASSERT_EQ(0, drop_caches());
	ASSERT_EQ(0, stat(PATH, &st));
	file = malloc(st.st_size);
	ASSERT_NE(NULL, file);
	fd = open(PATH, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(st.st_size, pread(fd, file, st.st_size, 0));
	close(fd);
	EXPECT_EQ(-1, first_diff(file, self->model, self->size));

	for (off = self->size; off < st.st_size;) {
		struct rec h;

		ASSERT_GE(st.st_size - off, (off_t)sizeof(h))
			TH_LOG("a cut record at %lld", (long long)off);
		memcpy(&h, file + off, sizeof(h));
		ASSERT_EQ(REC_MAGIC, h.magic)
			TH_LOG("no record at %lld", (long long)off);
		ASSERT_GT(2, h.writer);
		ASSERT_EQ(next[h.writer], h.seq)
			TH_LOG("writer %llu: record %llu at %lld, want %llu",
			       (unsigned long long)h.writer,
			       (unsigned long long)h.seq, (long long)off,
			       (unsigned long long)next[h.writer]);
		ASSERT_GE(st.st_size - off, (off_t)h.len);
		rec_fill(want, h.writer, h.seq, h.len, self->seed);
		ASSERT_EQ(-1, first_diff(file + off, want, h.len))
			TH_LOG("writer %llu record %llu at %lld",
			       (unsigned long long)h.writer,
			       (unsigned long long)h.seq, (long long)off);
		next[h.writer]++;
		switches += last >= 0 && last != (int)h.writer;
		last = h.writer;
		off += h.len;
	}
	EXPECT_EQ(REC_NR, next[0]);
	EXPECT_EQ(REC_NR, next[1]);
	/* The premise: the writers did interleave. */
	TH_LOG("%d switches between writers", switches);
	EXPECT_LT(1, switches);
	free(file);
	free(want);
	free(a[1].buf);
}

/*
 * Crash consistency.  The filesystem sits on dm-log-writes over a
 * 384 MiB dm-linear of drive 0 (both pass P2PDMA), logging to drive 1.
 * The log is replayed onto a 384 MiB dm-linear of drive 2 filled with a
 * stale pattern, and each state is checked through a transient
 * dm-snapshot, so that the filesystem's recovery does not change what the
 * next replay builds on.
 */
#define CR_LEN		(384 * MiB)	/* mkfs.xfs wants 300 MB */
#define CR_SECTORS	(CR_LEN / 512)
#define CR_DATA		"spin-crash-data"
#define CR_LOG		"spin-crash-log"
#define CR_REPLAY	"spin-crash-replay"
#define CR_SNAP		"spin-crash-snap"
#define CR_COW		"/tmp/spin-crash-cow.img"
#define CR_MNT		"/mnt/spin-crash"
#define CR_CHECK	"/mnt/spin-crash-check"
#define CR_STALE	0x57414c45ULL	/* the seed of the stale pattern */
#define CR_STEPS	12
#define STR_(x)		#x
#define STR(x)		STR_(x)

#define LOG_FLUSH_FLAG		(1 << 0)
#define LOG_FUA_FLAG		(1 << 1)
#define LOG_DISCARD_FLAG	(1 << 2)
#define LOG_MARK_FLAG		(1 << 3)
#define WRITE_LOG_MAGIC		0x6a736677736872ULL

/* dm-log-writes' format: Documentation/admin-guide/device-mapper/log-writes.rst */
struct log_write_super {
	uint64_t magic, version, nr_entries;
	uint32_t sectorsize;
} __attribute__((packed));

struct log_write_entry {
	uint64_t sector, nr_sectors, flags, data_len;
};

struct replay {
	int log, dst;		/* descriptors of the log and the target */
	uint64_t entries, next;	/* in the log, and the next to replay */
	uint32_t bs;		/* the log's sector size */
	off_t at;		/* where entry @next starts in the log */
	unsigned char *buf;	/* 1 MiB */
};

static int replay_open(struct replay *r, const char *log, const char *dst)
{
	struct log_write_super s;

	memset(r, 0, sizeof(*r));
	r->log = open(log, O_RDONLY);
	r->dst = open(dst, O_WRONLY);
	r->buf = malloc(MiB);
	if (r->log < 0 || r->dst < 0 || !r->buf ||
	    pread(r->log, &s, sizeof(s), 0) != sizeof(s) ||
	    s.magic != WRITE_LOG_MAGIC || !s.sectorsize ||
	    s.sectorsize > MiB)
		return -1;
	r->entries = s.nr_entries;
	r->bs = s.sectorsize;
	r->at = s.sectorsize;
	return 0;
}

static void replay_close(struct replay *r)
{
	if (r->log >= 0)
		close(r->log);
	if (r->dst >= 0)
		close(r->dst);
	free(r->buf);
}

/*
 * Replay the next entry of the log onto the target: 1 with its flags in
 * @flags (and a mark's name in @name, of @len bytes), 0 if the log has no
 * entry left, -1 if it cannot be read or the target written.
 */
static int replay_next(struct replay *r, uint64_t *flags, char *name,
		       size_t len)
{
	struct log_write_entry e;
	off_t src, dst;
	size_t left;

	if (r->next >= r->entries)
		return 0;
	if (pread(r->log, r->buf, r->bs, r->at) != r->bs)
		return -1;
	memcpy(&e, r->buf, sizeof(e));
	r->next++;
	r->at += r->bs;
	*flags = e.flags;
	if (e.flags & LOG_MARK_FLAG) {
		size_t n = e.data_len < len - 1 ? e.data_len : len - 1;

		memcpy(name, r->buf + sizeof(e), n);
		name[n] = '\0';
		return 1;
	}
	src = r->at;
	dst = e.sector * r->bs;
	left = e.nr_sectors * r->bs;
	if (e.flags & LOG_DISCARD_FLAG) {
		/* The drives read a discarded range as zeros. */
		memset(r->buf, 0, MiB);
		while (left) {
			size_t n = left < MiB ? left : MiB;

			if (pwrite(r->dst, r->buf, n, dst) != (ssize_t)n)
				return -1;
			dst += n;
			left -= n;
		}
		return 1;
	}
	r->at += left;
	while (left) {
		size_t n = left < MiB ? left : MiB;

		if (pread(r->log, r->buf, n, src) != (ssize_t)n ||
		    pwrite(r->dst, r->buf, n, dst) != (ssize_t)n)
			return -1;
		src += n;
		dst += n;
		left -= n;
	}
	return 1;
}

/*
 * Replay entries until the mark @mark (NULL: to the end).  0 once the mark
 * has been replayed, -1 if the log ends first or cannot be read.
 */
static int replay_to(struct replay *r, const char *mark)
{
	char name[256];
	uint64_t flags;
	int ret;

	while ((ret = replay_next(r, &flags, name, sizeof(name))) > 0)
		if ((flags & LOG_MARK_FLAG) && mark && !strcmp(name, mark))
			return fsync(r->dst);
	return ret || mark ? -1 : fsync(r->dst);
}

/* Create /dev/mapper/@name with the table @fmt; 0 on success. */
static int __printf(2, 3)
dm_create(const char *name, const char *fmt, ...)
{
	va_list ap;
	char *table;
	int ret;

	va_start(ap, fmt);
	table = str_vprintf(fmt, ap);
	va_end(ap);
	if (!table)
		return -1;
	ret = run_cmdf("dmsetup create --noudevsync %s --table '%s' && dmsetup mknodes %s",
		       name, table, name);
	free(table);
	return ret;
}

FIXTURE(crash) {
	char ns[3][NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char cow[64];
	unsigned char *dev;
	unsigned char *model;
	uint64_t seed;
	bool mounted, dm;
};

FIXTURE_VARIANT(crash) {
	const char *fs;
};

FIXTURE_VARIANT_ADD(crash, xfs) { .fs = "xfs" };
FIXTURE_VARIANT_ADD(crash, ext4) { .fs = "ext4" };

#define CR_PATH		CR_MNT "/log"
#define CR_OTHER	CR_MNT "/other"

static void crash_dm_remove(void)
{
	umount2(CR_CHECK, MNT_DETACH);
	umount2(CR_MNT, 0);
	run_cmd("dmsetup remove --noudevsync " CR_SNAP " 2>/dev/null");
	run_cmd("dmsetup remove --noudevsync " CR_LOG " 2>/dev/null");
	run_cmd("dmsetup remove --noudevsync " CR_DATA " 2>/dev/null");
	run_cmd("dmsetup remove --noudevsync " CR_REPLAY " 2>/dev/null");
}

FIXTURE_SETUP(crash)
{
	int i;

	router_learned_reset();	/* each case starts from defaults */
	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	for (i = 0; i < 3; i++)
		SPIN_NEED(!nvme_rig_ns(i, self->ns[i], sizeof(self->ns[i])),
			  SPIN_RIG_DRIVE_FMT, i, 3);
	SPIN_NEED(!p2pmem_find_for_ns(self->ns[0], true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns[0]);
	ASSERT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", "1"));
	md_stop_ours("/dev/md0");
	crash_dm_remove();
	self->seed = getpid() ^ 0xc7a54ULL << 32;
	TH_LOG("%s, seed %llu", variant->fs, (unsigned long long)self->seed);

	self->dm = true;
	ASSERT_EQ(0, dm_create(CR_DATA, "0 %lu linear /dev/%s 0",
			       CR_SECTORS, self->ns[0]));
	ASSERT_EQ(0, dm_create(CR_REPLAY, "0 %lu linear /dev/%s 0",
			       CR_SECTORS, self->ns[2]));
	self->dev = p2pmem_map(self->provider, DEV_LEN);
	ASSERT_NE(NULL, self->dev);
	self->model = malloc(MODEL_LEN);
	ASSERT_NE(NULL, self->model);
}

FIXTURE_TEARDOWN(crash)
{
	if (self->dm)
		crash_dm_remove();
	if (self->cow[0]) {
		loop_detach(self->cow);
		unlink(CR_COW);
	}
	if (self->dev)
		munmap(self->dev, DEV_LEN);
	free(self->model);
}

/* Fill /dev/mapper/@name with the stale pattern (1 MiB, repeated). */
static int fill_stale(const char *name)
{
	unsigned char *buf = malloc(MiB);
	char path[PATH_MAX];
	int fd, ret = 0;
	off_t off;

	xsnprintf(path, sizeof(path), "/dev/mapper/%s", name);
	fd = open(path, O_WRONLY);
	if (fd < 0 || !buf) {
		free(buf);
		return -1;
	}
	pattern_fill(buf, MiB, 0, CR_STALE);
	for (off = 0; off < (off_t)CR_LEN && !ret; off += MiB)
		if (pwrite(fd, buf, MiB, off) != (ssize_t)MiB)
			ret = -1;
	if (!ret && fsync(fd))
		ret = -1;
	close(fd);
	free(buf);
	return ret;
}

/* A fresh @fs on @dev, which gets no discard (the log would zero it). */
static int mkfs_nodiscard(const char *fs, const char *dev)
{
	if (!strcmp(fs, "xfs"))
		return run_cmdf("mkfs.xfs -q -f -K %s", dev);
	return run_cmdf("mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 %s",
			dev);
}

/* Zero the first MiB of /dev/@ns: no old log there. */
static int zero_head(const char *ns)
{
	char path[PATH_MAX];
	void *buf = calloc(1, MiB);
	int fd, ret = -1;

	xsnprintf(path, sizeof(path), "/dev/%s", ns);
	fd = open(path, O_WRONLY);
	if (fd >= 0 && buf && pwrite(fd, buf, MiB, 0) == (ssize_t)MiB &&
	    !fsync(fd))
		ret = 0;
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

/* /sys/block/<dm>/queue/pci_p2pdma of /dev/mapper/@name, or -1. */
static long long dm_p2pdma(const char *name)
{
	char path[PATH_MAX];
	long long v;
	struct stat st;

	xsnprintf(path, sizeof(path), "/dev/mapper/%s", name);
	if (stat(path, &st))
		return -1;
	xsnprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/pci_p2pdma",
		  major(st.st_rdev), minor(st.st_rdev));
	return sysfs_read_ll(path, &v) ? -1 : v;
}

/* A 64 MiB file for the snapshots' exceptions, on a loop device. */
static int cow_attach(char *dev, size_t len)
{
	int fd = open(CR_COW, O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		return -1;
	if (ftruncate(fd, 64 * MiB)) {
		close(fd);
		return -1;
	}
	close(fd);
	return loop_attach(CR_COW, dev, len);
}

/*
 * The first byte of the file at @path, of @size bytes, that differs from
 * @want, or -1: from @zeros on, a 512-byte block may instead be all
 * zeros.  -2 or -3 if it cannot be read.
 */
static long file_diff_zeros(const char *path, const unsigned char *want,
			    off_t size, off_t zeros)
{
	unsigned char *buf = malloc(size ? size : 1);
	long ret = -2;
	off_t b;
	int fd;

	fd = open(path, O_RDONLY);
	if (buf && fd >= 0) {
		ret = pread(fd, buf, size, 0) == size ? -1 : -3;
		for (b = 0; ret == -1 && b < size; b += 512) {
			size_t l = size - b < 512 ? size - b : 512;
			long d = first_diff(buf + b, want + b, l);

			if (d != -1 && (b < zeros || !all_zero(buf + b, l)))
				ret = b + d;
		}
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

/*
 * The file as the filesystem on /dev/mapper/@dm recovers it, against the
 * model: at least @synced bytes, at most @written, all of them as
 * written, except that 512-byte blocks from @zeros on may read as zeros.
 * Then fsck -n of the recovered filesystem.  0 if all holds.
 */
static int check_recovered(struct __test_metadata *_metadata,
			   FIXTURE_DATA(crash) *self, const char *fs,
			   const char *dm, const char *mark, off_t synced,
			   off_t written, off_t zeros)
{
	char dev[PATH_MAX];
	struct stat st;
	long diff;
	int ret = 0;

	xsnprintf(dev, sizeof(dev), "/dev/mapper/%s", dm);
	mkdir(CR_CHECK, 0755);
	if (mount(dev, CR_CHECK, fs, 0, NULL)) {
		TH_LOG("%s: mount: %s", mark, strerror(errno));
		return -1;
	}
	if (stat(CR_CHECK "/log", &st)) {
		TH_LOG("%s: no file: %s", mark, strerror(errno));
		ret = -1;
	} else if (st.st_size < synced || st.st_size > written) {
		TH_LOG("%s: size %lld, synced %lld, written %lld", mark,
		       (long long)st.st_size, (long long)synced,
		       (long long)written);
		ret = -1;
	} else {
		diff = file_diff_zeros(CR_CHECK "/log", self->model,
				       st.st_size, zeros);
		if (diff != -1) {
			TH_LOG("%s: size %lld (synced %lld, written %lld), differs at %ld",
			       mark, (long long)st.st_size, (long long)synced,
			       (long long)written, diff);
			ret = -1;
		}
	}
	if (umount2(CR_CHECK, 0))
		ret = -1;
	if (run_cmdf("%s %s >/tmp/spin-crash-fsck.log 2>&1",
		     strcmp(fs, "xfs") ? "e2fsck -n -f" : "xfs_repair -n", dev)) {
		TH_LOG("%s: fsck -n found errors:", mark);
		run_cmd("tail -n 20 /tmp/spin-crash-fsck.log");
		ret = -1;
	}
	return ret;
}

/* A transient snapshot of the replay target, for one check. */
static int check_mark(struct __test_metadata *_metadata,
		      FIXTURE_DATA(crash) *self, const char *fs,
		      const char *mark, off_t synced, off_t written,
		      off_t zeros)
{
	int ret;

	if (dm_create(CR_SNAP, "0 %lu snapshot /dev/mapper/" CR_REPLAY " %s N 8",
		      CR_SECTORS, self->cow))
		return -1;
	ret = check_recovered(_metadata, self, fs, CR_SNAP, mark, synced,
			      written, zeros);
	run_cmd("dmsetup remove --noudevsync " CR_SNAP);
	return ret;
}

static int log_mark(const char *mark)
{
	return run_cmdf("dmsetup message " CR_LOG " 0 mark %s", mark);
}

/*
 * A fresh @fs on dm-log-writes over CR_DATA, logging to drive 1, mounted
 * on CR_MNT, and the replay target filled with the stale pattern.
 */
static void log_start(struct __test_metadata *_metadata,
		      FIXTURE_DATA(crash) *self, const char *fs)
{
	ASSERT_EQ(0, fill_stale(CR_REPLAY));
	ASSERT_EQ(0, zero_head(self->ns[1]));
	ASSERT_EQ(0, dm_create(CR_LOG, "0 %lu log-writes /dev/mapper/" CR_DATA
			      " /dev/%s", CR_SECTORS, self->ns[1]));
	ASSERT_EQ(1, dm_p2pdma(CR_LOG))
		TH_LOG("dm-log-writes does not pass P2PDMA");
	mkdir(CR_MNT, 0755);
	ASSERT_EQ(0, mkfs_nodiscard(fs, "/dev/mapper/" CR_LOG));
	ASSERT_EQ(0, mount("/dev/mapper/" CR_LOG, CR_MNT, fs, 0, NULL));
}

/*
 * Unmount, stop logging, and open the log in @r for a replay, which has
 * gone up to the mark "start".  Every descriptor on CR_MNT is closed.
 */
static void log_stop(struct __test_metadata *_metadata,
		     FIXTURE_DATA(crash) *self, struct replay *r)
{
	char logdev[PATH_MAX];

	ASSERT_EQ(0, umount2(CR_MNT, 0));
	ASSERT_EQ(0, run_cmd("dmsetup remove --noudevsync " CR_LOG));
	ASSERT_EQ(0, cow_attach(self->cow, sizeof(self->cow)));
	xsnprintf(logdev, sizeof(logdev), "/dev/%s", self->ns[1]);
	ASSERT_EQ(0, replay_open(r, logdev, "/dev/mapper/" CR_REPLAY));
	TH_LOG("log: %llu entries of %u-byte sectors",
	       (unsigned long long)r->entries, r->bs);
	ASSERT_EQ(0, replay_to(r, "start"));
}

/*
 * CR_STEPS appends, each from device memory (routed, unaligned in most
 * steps) or from RAM (buffered), each followed by fsync() of the file
 * (the mark's size must be exactly what was written) or of another file,
 * which commits the journal with whatever size the appends recorded (the
 * file must then be a prefix of what was written, at least the last
 * synced size, with no zeros in it).  Every mark is replayed and checked.
 */
TEST_F_TIMEOUT(crash, log_writes_replay, 900)
{
	off_t written = 0, synced[CR_STEPS + 1], wrote[CR_STEPS + 1];
	struct stats before, d;
	uint64_t rnd = self->seed | 1;
	char mark[32];
	struct replay r;
	int fd, ofd, i;

	log_start(_metadata, self, variant->fs);
	fd = open(CR_PATH, O_WRONLY | O_CREAT | O_APPEND, 0644);
	ASSERT_LE(0, fd);
	ofd = open(CR_OTHER, O_WRONLY | O_CREAT, 0644);
	ASSERT_LE(0, ofd);
	ASSERT_EQ(0, fsync(fd));
	ASSERT_EQ(0, fsync(ofd));
	sync();
	ASSERT_EQ(0, log_mark("start"));
	synced[0] = 0;
	wrote[0] = 0;

	stats_read(&before);
	for (i = 1; i <= CR_STEPS; i++) {
		bool ram = i % 4 == 3;
		size_t len = (ram ? 5000 : MiB) + xorshift64(&rnd) % MiB;
		unsigned char *src;

		if (i % 3 == 1)		/* aligned in the file */
			len = (len + PAGE - 1) & ~(PAGE - 1);
		ASSERT_LE(written + len, MODEL_LEN);
		pattern_fill(self->model + written, len, written, self->seed);
		src = ram ? self->model + written :
			    self->dev + (written & (PAGE - 1));
		if (!ram)
			memcpy(src, self->model + written, len);
		ASSERT_EQ((ssize_t)len, write(fd, src, len));
		written += len;
		wrote[i] = written;
		if (i % 2) {
			ASSERT_EQ(0, fsync(fd));
			synced[i] = written;
			snprintf(mark, sizeof(mark), "sync%d", i);
		} else {
			ASSERT_EQ(1, pwrite(ofd, "x", 1, i));
			ASSERT_EQ(0, fsync(ofd));
			synced[i] = synced[i - 1];
			snprintf(mark, sizeof(mark), "other%d", i);
		}
		ASSERT_EQ(0, log_mark(mark));
	}
	stats_delta(&before, &d);
	TH_LOG("%lld bytes appended: routed %lld, p2p %lld, cache %lld",
	       (long long)written, d.routed, d.p2p, d.cache);
	/* The premise: most of it went by DMA, through dm-log-writes. */
	EXPECT_LT(written / 2, d.p2p);
	close(fd);
	close(ofd);
	log_stop(_metadata, self, &r);
	EXPECT_EQ(0, check_mark(_metadata, self, variant->fs, "start", 0, 0,
				0));
	for (i = 1; i <= CR_STEPS; i++) {
		snprintf(mark, sizeof(mark), i % 2 ? "sync%d" : "other%d", i);
		ASSERT_EQ(0, replay_to(&r, mark)) TH_LOG("no mark %s", mark);
		EXPECT_EQ(0, check_mark(_metadata, self, variant->fs, mark,
					synced[i], wrote[i], wrote[i]));
	}
	/* And the clean unmount at the end: everything. */
	ASSERT_EQ(0, replay_to(&r, NULL));
	EXPECT_EQ(0, check_mark(_metadata, self, variant->fs, "end", written,
				written, written));
	replay_close(&r);
}

/*
 * O_DSYNC and RWF_DSYNC appends with no fsync(), as a power cut leaves
 * them.  dm-log-writes puts a completed write into its log only when a
 * flush or a FUA write makes it durable, so replaying the log entry by
 * entry and recovering the file system after every flush and every FUA
 * write gives, at each, a state the drive could be left in.  In each the
 * file holds at least what the appends that had returned wrote (their
 * marks come before), at most what the append under way adds, and no
 * stale byte; at each mark, exactly what was written.
 */
#define DS_STEPS	6

TEST_F_TIMEOUT(crash, dsync_every_flush, 1200)
{
	off_t written = 0, wrote[DS_STEPS + 1];
	uint64_t rnd = self->seed | 1, flags;
	int fd, afd, i, marks = 0, points = 0, total = 0, ret;
	off_t low = 0, high = 0;
	struct stats before, d;
	char mark[32], name[256];
	struct replay r;

	log_start(_metadata, self, variant->fs);
	fd = open(CR_PATH, O_WRONLY | O_CREAT | O_APPEND | O_DSYNC, 0644);
	ASSERT_LE(0, fd);
	afd = open(CR_PATH, O_WRONLY | O_APPEND);
	ASSERT_LE(0, afd);
	ASSERT_EQ(0, fsync(fd));
	sync();
	ASSERT_EQ(0, log_mark("start"));
	wrote[0] = 0;

	stats_read(&before);
	for (i = 1; i <= DS_STEPS; i++) {
		size_t len = MiB / 2 + xorshift64(&rnd) % MiB;
		struct iovec iov;

		if (i % 3 == 1)		/* aligned in the file */
			len = (len + PAGE - 1) & ~(PAGE - 1);
		ASSERT_LE(written + len, MODEL_LEN);
		pattern_fill(self->model + written, len, written, self->seed);
		iov.iov_base = self->dev + (written & (PAGE - 1));
		iov.iov_len = len;
		memcpy(iov.iov_base, self->model + written, len);
		if (i % 2) {
			ASSERT_EQ((ssize_t)len, write(fd, iov.iov_base, len));
		} else {
			ASSERT_EQ((ssize_t)len,
				  pwritev2(afd, &iov, 1, -1, RWF_DSYNC));
		}
		written += len;
		wrote[i] = written;
		snprintf(mark, sizeof(mark), "dsync%d", i);
		ASSERT_EQ(0, log_mark(mark));
	}
	stats_delta(&before, &d);
	TH_LOG("%lld bytes appended: routed %lld, p2p %lld, cache %lld",
	       (long long)written, d.routed, d.p2p, d.cache);
	/* The premise: most of it went by DMA, through dm-log-writes. */
	EXPECT_LT(written / 2, d.p2p);
	close(fd);
	close(afd);
	log_stop(_metadata, self, &r);

	/*
	 * Between two marks: what the first one's append wrote, up to the
	 * next's.  ext4 (dioread_nolock, the default) may commit a size
	 * over unwritten extents before their data is written, so past what
	 * the returned appends wrote, a block there may read as zeros.
	 */
	high = wrote[1];
	while ((ret = replay_next(&r, &flags, name, sizeof(name))) > 0) {
		if (flags & LOG_MARK_FLAG) {
			/* dm-log-writes marks where it stopped logging. */
			if (!strcmp(name, "dm-log-writes-end"))
				continue;
			ASSERT_EQ(1, sscanf(name, "dsync%d", &i))
				TH_LOG("mark %s", name);
			ASSERT_EQ(++marks, i);
			/* The premise: the append was made durable. */
			ASSERT_LE(1, points) TH_LOG("no flush or FUA before %s",
						    name);
			total += points;
			points = 0;
			low = wrote[i];
			high = wrote[i];
			ASSERT_EQ(0, fsync(r.dst));
			EXPECT_EQ(0, check_mark(_metadata, self, variant->fs,
						name, low, high, high));
			if (i < DS_STEPS)
				high = wrote[i + 1];
			continue;
		}
		if (!(flags & (LOG_FLUSH_FLAG | LOG_FUA_FLAG)))
			continue;
		points++;
		snprintf(mark, sizeof(mark), "%s %llu after dsync%d",
			 flags & LOG_FLUSH_FLAG ? "flush" : "fua",
			 (unsigned long long)r.next - 1, marks);
		ASSERT_EQ(0, fsync(r.dst));
		EXPECT_EQ(0, check_mark(_metadata, self, variant->fs, mark,
					low, high,
					strcmp(variant->fs, "ext4") ? high : low));
	}
	ASSERT_EQ(0, ret);
	replay_close(&r);
	TH_LOG("%d marks, %d flush or FUA points checked", marks,
	       total + points);
	/* The premise: every append reached its mark. */
	ASSERT_EQ(DS_STEPS, marks);
}

#define FAIL_DIR	"/sys/kernel/debug/fail_make_request"
#define FAIL_TIMES	1000000

struct fail_all {
	volatile bool stop;
	bool fired;
};

/*
 * fail_make_request passes a request smaller than the "space" left even
 * after it failed a bigger one; a drive that dies fails everything.  So
 * once the first request has failed, take the space away.
 */
static void *fail_all(void *arg)
{
	struct fail_all *f = arg;
	long long left;

	while (!f->stop) {
		if (!sysfs_read_ll(FAIL_DIR "/times", &left) &&
		    left < FAIL_TIMES) {
			fault_attr_set(FAIL_DIR, "space", "0");
			f->fired = true;
			break;
		}
		usleep(100);
	}
	return NULL;
}

/*
 * A routed append of 6 MiB from device memory, and the drive dies 2 MiB
 * into it: fail_make_request's "space" lets the first 2 MiB of requests
 * after arming pass, and fail_all() then fails every request.  A buffered
 * append would take the bytes into the page cache and fail at fsync(): the
 * routed one does the same, as the direct part that fails goes through
 * the page cache.  After a remount on a working drive, as after a power
 * cycle, the file is a prefix of what was written, at least what was
 * synced, with no zero and no stale byte, and fsck -n is clean.
 */
TEST_F_TIMEOUT(crash, fail_mid_append, 300)
{
	size_t len = 6 * MiB + 12345;
	off_t synced = 2 * MiB + 77;
	struct fail_all f = { 0 };
	struct fault_attrs fa;
	struct stats before, d;
	long long left = 0;
	pthread_t t;
	char space[32];
	ssize_t n;
	int fd, ret;

	debugfs_mount();
	ASSERT_EQ(0, access(FAIL_DIR, F_OK))
		TH_LOG("no %s (CONFIG_FAIL_MAKE_REQUEST)", FAIL_DIR);
	ASSERT_EQ(0, fill_stale(CR_DATA));
	mkdir(CR_MNT, 0755);
	ASSERT_EQ(0, mkfs_nodiscard(variant->fs, "/dev/mapper/" CR_DATA));
	ASSERT_EQ(0, mount("/dev/mapper/" CR_DATA, CR_MNT, variant->fs, 0,
			   NULL));
	pattern_fill(self->model, synced + len, 0, self->seed);
	fd = open(CR_PATH, O_WRONLY | O_CREAT | O_APPEND, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(synced, write(fd, self->model, synced));
	ASSERT_EQ(0, fsync(fd));
	sync();
	memcpy(self->dev + (synced & (PAGE - 1)), self->model + synced, len);

	ASSERT_EQ(0, fault_attrs_save(&fa, FAIL_DIR));
	snprintf(space, sizeof(space), "%lu", 2 * MiB);
	ASSERT_EQ(0, fault_attrs_arm(FAIL_DIR, STR(FAIL_TIMES)));
	ASSERT_EQ(0, fault_attr_set(FAIL_DIR, "space", space));
	ASSERT_EQ(0, pthread_create(&t, NULL, fail_all, &f));
	ASSERT_EQ(0, make_it_fail(self->ns[0], true));
	stats_read(&before);
	n = write(fd, self->dev + (synced & (PAGE - 1)), len);
	stats_delta(&before, &d);
	ret = fsync(fd);
	f.stop = true;
	pthread_join(t, NULL);
	TH_LOG("write: %zd (%s), fsync: %d (%s); p2p %lld, cache %lld", n,
	       n < 0 ? strerror(errno) : "", ret, ret ? strerror(errno) : "",
	       d.p2p, d.cache);
	close(fd);
	umount2(CR_MNT, 0);
	EXPECT_EQ(0, make_it_fail(self->ns[0], false));
	EXPECT_EQ(0, sysfs_read_ll(FAIL_DIR "/times", &left));
	fault_attrs_restore(&fa);
	TH_LOG("%lld requests failed", FAIL_TIMES - left);
	/* The premise: DMA before the failure, and the failure seen. */
	EXPECT_LE(MiB, d.p2p);
	EXPECT_TRUE(f.fired);
	EXPECT_LT(0, FAIL_TIMES - left);
	EXPECT_TRUE(n < (ssize_t)len || ret) TH_LOG("no error reported");
	umount2(CR_MNT, MNT_DETACH);

	/* The drive works again, as after a power cycle. */
	EXPECT_EQ(0, check_recovered(_metadata, self, variant->fs, CR_DATA,
				     "after the failure", synced,
				     synced + (n > 0 ? n : 0),
				     synced + (n > 0 ? n : 0)));
}

TEST_HARNESS_MAIN
