// SPDX-License-Identifier: GPL-2.0
/*
 * O_DIRECT reads from NVMe into device memory: the peer-to-peer path
 * that upstream already has, on XFS, on ext4 and on the raw block
 * device, plus what happens with a provider the drive cannot reach.
 * Every read is checked byte for byte against a reference read of the
 * same range into ordinary RAM.
 */
#include "spin_util.h"
#include "../kselftest_harness.h"

#define FILE_SIZE	(16 * MiB + 3 * 4 * KiB + 100)	/* odd on purpose */
#define MAP_LEN		(16 * MiB)
#define MNT		"/mnt/spin-odirect"

FIXTURE(odirect) {
	char ns[NAME_MAX + 1];
	char nvme_dev[SYSFS_LEN];
	char path[PATH_MAX];
	int fd;		/* O_DIRECT */
	int ref_fd;	/* buffered, for the reference reads */
	size_t size;
	uint64_t seed;
	bool mounted;
};

FIXTURE_VARIANT(odirect) {
	const char *fs;	/* NULL: the raw block device */
	int nvme;	/* which rig drive */
};

FIXTURE_VARIANT_ADD(odirect, raw) { .fs = NULL, .nvme = 0 };
FIXTURE_VARIANT_ADD(odirect, xfs) { .fs = "xfs", .nvme = 1 };
FIXTURE_VARIANT_ADD(odirect, ext4) { .fs = "ext4", .nvme = 2 };

FIXTURE_SETUP(odirect)
{
	int wfd;

	router_learned_reset();	/* each case starts from defaults */
	self->fd = -1;
	self->ref_fd = -1;
	SPIN_NEED(!nvme_rig_ns(variant->nvme, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, variant->nvme, variant->nvme + 1);
	ASSERT_EQ(0, nvme_pci_dev(self->ns, self->nvme_dev,
				  sizeof(self->nvme_dev)));
	self->seed = getpid() ^ (uint64_t)variant->nvme << 32;
	self->size = FILE_SIZE;

	if (variant->fs) {
		ASSERT_EQ(0, mkfs_mount(variant->fs, self->ns, MNT));
		self->mounted = true;
		snprintf(self->path, sizeof(self->path), MNT "/data");
		wfd = open(self->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else {
		snprintf(self->path, sizeof(self->path), "/dev/%s", self->ns);
		wfd = open(self->path, O_RDWR);
	}
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, write_pattern(wfd, self->size, self->seed));
	close(wfd);
	ASSERT_EQ(0, drop_caches());

	self->fd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, self->fd);
	self->ref_fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, self->ref_fd);
	TH_LOG("%s on %s (%s)", self->path, self->ns, self->nvme_dev);
}

FIXTURE_TEARDOWN(odirect)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->ref_fd >= 0)
		close(self->ref_fd);
	if (self->mounted)
		umount(MNT);
}

/*
 * The reference: the same range read into ordinary RAM, which must in
 * turn be what was written.  Returns the number of bytes read.
 */
static ssize_t ref_read(struct __test_metadata *_metadata,
			FIXTURE_DATA(odirect) *self, void *buf, size_t len,
			off_t off)
{
	ssize_t n = pread(self->ref_fd, buf, len, off);
	void *want = malloc(len);

	EXPECT_LE(0, n);
	if (want && n > 0) {
		pattern_fill(want, n, off, self->seed);
		EXPECT_EQ(-1, first_diff(buf, want, n));
	}
	free(want);
	return n;
}

static const struct {
	size_t len;
	off_t file_off;
	size_t buf_off;
} cases[] = {
	{ 4 * KiB, 0, 0 },
	{ 64 * KiB, 4 * KiB, 0 },
	{ 128 * KiB, 1 * MiB, 4 * KiB },
	{ 1 * MiB, 12 * KiB, 0 },
	{ 4 * MiB, 2 * MiB, 64 * KiB },
	{ 8 * MiB, 0, 0 },	/* larger than one request: split */
	{ 512, 7 * 512, 512 },	/* one logical block */
};

TEST_F_TIMEOUT(odirect, p2p_read, 180)
{
	unsigned char *dev, *ref;
	char provider[SYSFS_LEN];
	unsigned int i;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, provider,
			       sizeof(provider)),
		  "a provider that %s reaches: none published", self->ns);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(MAP_LEN);
	ASSERT_NE(NULL, ref);

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len = cases[i].len;
		off_t off = cases[i].file_off;
		unsigned char *buf = dev + cases[i].buf_off;
		ssize_t n, want;

		want = ref_read(_metadata, self, ref, len, off);
		memset(buf, POISON, len);
		n = pread(self->fd, buf, len, off);
		TH_LOG("case %u: %zu bytes at %lld into +%zu: %zd", i, len,
		       (long long)off, cases[i].buf_off, n);
		ASSERT_EQ(want, n);
		ASSERT_EQ(-1, first_diff(buf, ref, n));
	}
	munmap(dev, MAP_LEN);
	free(ref);
}

/*
 * A read across EOF is short, and the bytes up to EOF are right.  A block
 * device's EOF is its size: the last MiB of the drive gets the pattern.
 */
TEST_F_TIMEOUT(odirect, p2p_read_eof, 180)
{
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	off_t off, end = self->size;
	size_t len = 1 * MiB;
	uint64_t bytes;
	ssize_t n;
	int wfd;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, provider,
			       sizeof(provider)),
		  "a provider that %s reaches: none published", self->ns);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);

	if (!variant->fs) {
		ASSERT_EQ(0, ioctl(self->ref_fd, BLKGETSIZE64, &bytes));
		end = bytes;
		ASSERT_LT((off_t)self->size, end - (off_t)MiB);
		pattern_fill(ref, MiB, end - MiB, self->seed);
		wfd = open(self->path, O_RDWR);
		ASSERT_LE(0, wfd);
		ASSERT_EQ((ssize_t)MiB, pwrite(wfd, ref, MiB, end - MiB));
		ASSERT_EQ(0, fsync(wfd));
		ASSERT_EQ(0, close(wfd));
	}
	off = (end & ~(4 * KiB - 1)) - 256 * KiB;
	ASSERT_EQ((ssize_t)(end - off), ref_read(_metadata, self, ref, len, off));
	memset(dev, POISON, len);
	n = pread(self->fd, dev, len, off);
	ASSERT_EQ((ssize_t)(end - off), n);
	ASSERT_EQ(-1, first_diff(dev, ref, n));
	/*
	 * What lies past the returned bytes is unspecified: iomap reads the
	 * block that holds EOF whole and zero-fills the rest of the request
	 * as a hole, then clamps the count to i_size.  Only check that it
	 * is nothing but zeros, never stale or foreign data.
	 */
	for (off = n; off < (off_t)len; off++)
		if (dev[off] != 0 && dev[off] != POISON)
			break;
	ASSERT_EQ((off_t)len, off);
	munmap(dev, len);
	free(ref);
}

/* Buffered pread into device memory: today a CPU copy, and correct. */
TEST_F_TIMEOUT(odirect, buffered_read, 180)
{
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	size_t len = 4 * MiB + 777;
	off_t off = 1234567;
	ssize_t n;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, provider,
			       sizeof(provider)),
		  "a provider that %s reaches: none published", self->ns);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);

	ASSERT_EQ((ssize_t)len, ref_read(_metadata, self, ref, len, off));
	ASSERT_EQ(0, drop_caches());
	memset(dev + 3, POISON, len);
	n = pread(self->ref_fd, dev + 3, len, off);
	ASSERT_EQ((ssize_t)len, n);
	ASSERT_EQ(-1, first_diff(dev + 3, ref, len));
	munmap(dev, MAP_LEN);
	free(ref);
}

/*
 * A provider the drive cannot reach: O_DIRECT fails with EREMOTEIO (the
 * NVMe driver cannot map the pages for the drive) and writes nothing into
 * the buffer.
 */
TEST_F_TIMEOUT(odirect, unreachable_odirect, 180)
{
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	size_t len = 1 * MiB;
	ssize_t n;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, false, provider,
			       sizeof(provider)),
		  "a provider that %s cannot reach: none published", self->ns);
	TH_LOG("unreachable provider %s", provider);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);

	ASSERT_EQ((ssize_t)len, ref_read(_metadata, self, ref, len, 0));
	memset(dev, POISON, len);
	n = pread(self->fd, dev, len, 0);
	ASSERT_EQ(-1, n);
	ASSERT_EQ(EREMOTEIO, errno);
	for (n = 0; n < (ssize_t)len && dev[n] == POISON; n++)
		;
	ASSERT_EQ((ssize_t)len, n) TH_LOG("byte %zd of the buffer written", n);
	munmap(dev, len);
	free(ref);
}

/* A buffered pread into an unreachable provider returns the right bytes. */
TEST_F_TIMEOUT(odirect, unreachable_buffered, 180)
{
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	size_t len = 2 * MiB + 5;
	ssize_t n;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, false, provider,
			       sizeof(provider)),
		  "a provider that %s cannot reach: none published", self->ns);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);

	ASSERT_EQ((ssize_t)len, ref_read(_metadata, self, ref, len, 4096));
	ASSERT_EQ(0, drop_caches());
	memset(dev, POISON, len);
	n = pread(self->ref_fd, dev, len, 4096);
	ASSERT_EQ((ssize_t)len, n);
	ASSERT_EQ(-1, first_diff(dev, ref, len));
	munmap(dev, MAP_LEN);
	free(ref);
}

/*
 * A cold plain pread into device memory that the drive can reach is
 * served by P2P DMA, so it leaves the page cache empty: the P-router
 * (mm/p2p_router.c) serves it, and router_test covers it in depth.
 */
TEST_F_TIMEOUT(odirect, pread_bypasses_page_cache, 180)
{
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref, *vec;
	size_t len = 8 * MiB, pages = len / 4096, i, resident = 0;
	void *map;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, provider,
			       sizeof(provider)),
		  "a provider that %s reaches: none published", self->ns);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	vec = malloc(pages);
	ASSERT_NE(NULL, ref);
	ASSERT_NE(NULL, vec);
	pattern_fill(ref, len, 0, self->seed);
	ASSERT_EQ(0, drop_caches());

	memset(dev, POISON, len);
	ASSERT_EQ((ssize_t)len, pread(self->ref_fd, dev, len, 0));
	ASSERT_EQ(-1, first_diff(dev, ref, len));

	map = mmap(NULL, len, PROT_READ, MAP_SHARED, self->ref_fd, 0);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, mincore(map, len, vec));
	for (i = 0; i < pages; i++)
		resident += vec[i] & 1;
	TH_LOG("%zu of %zu pages cached after the read", resident, pages);
	EXPECT_GE(pages / 100, resident);
	munmap(map, len);
	munmap(dev, len);
	free(ref);
	free(vec);
}

/*
 * What the CPU copied into device memory is what a drive reads from it at
 * once: a routed read of cached data (a copy, through write-combined
 * memory on a prefetchable BAR) and, right after it returns, an O_DIRECT
 * write from that memory to the drive (the drive reads the BAR by DMA).
 * Read back cold into RAM, the written range holds the file's bytes.
 */
TEST_F_TIMEOUT(odirect, copied_then_written, 180)
{
	size_t len = 4 * MiB, shift = 3;
	off_t off = 5 * MiB + 8192, to;
	char provider[SYSFS_LEN], path[PATH_MAX];
	unsigned char *dev, *ref, *back;
	long long copied;
	int wfd;

	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, provider,
			       sizeof(provider)),
		  "a provider that %s reaches: none published", self->ns);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(len + shift);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, posix_memalign((void **)&back, 4096, len));

	/* The whole range cached, and checked, so that the router copies. */
	ASSERT_EQ((ssize_t)(len + shift),
		  ref_read(_metadata, self, ref, len + shift, off - shift));
	if (variant->fs) {
		snprintf(path, sizeof(path), MNT "/written");
		wfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		to = 0;
	} else {
		snprintf(path, sizeof(path), "%s", self->path);
		wfd = open(path, O_RDWR | O_DIRECT);
		to = 64 * MiB;	/* past the pattern */
	}
	ASSERT_LE(0, wfd);

	/*
	 * 3 bytes into the memory, which no drive can DMA to: the router
	 * copies every byte, whatever it has learned.
	 */
	copied = router_stat("cache_bytes");
	memset(dev, POISON, len + shift);
	ASSERT_EQ((ssize_t)len, pread(self->ref_fd, dev + shift, len, off));
	ASSERT_EQ((ssize_t)len - 4096,
		  pwrite(wfd, dev + 4096, len - 4096, to));
	copied = router_stat("cache_bytes") - copied;
	TH_LOG("routed read: cache_bytes %lld", copied);
	/* The premise: the CPU copied all of it. */
	EXPECT_EQ((long long)len, copied);

	memset(back, 0, len);
	ASSERT_EQ((ssize_t)len - 4096, pread(wfd, back, len - 4096, to));
	EXPECT_EQ(-1, first_diff(back, ref + 4096, len - 4096));
	close(wfd);
	munmap(dev, MAP_LEN);
	free(ref);
	free(back);
}

TEST_HARNESS_MAIN
