// SPDX-License-Identifier: GPL-2.0
/*
 * The P2PDMA provider (p2pmem_bar) and the rules of mapping its memory
 * from user space through /sys/bus/pci/devices/<bdf>/p2pmem/allocate.
 */
#include "spin_util.h"
#include "../kselftest_harness.h"

#define MAP_LEN	(4 * MiB)

FIXTURE(provider) {
	char dev[SYSFS_LEN];
	char alloc[PATH_MAX];
};

FIXTURE_SETUP(provider)
{
	/* The rig always publishes one: none is a failure, not a skip. */
	ASSERT_EQ(0, p2pmem_find(NULL, true, self->dev, sizeof(self->dev)))
		TH_LOG("no published P2PDMA provider");
	snprintf(self->alloc, sizeof(self->alloc), "%s/p2pmem/allocate",
		 self->dev);
	TH_LOG("provider %s", self->dev);
}

FIXTURE_TEARDOWN(provider)
{
}

/* The driver publishes the memory with a sane size and pool state. */
TEST_F(provider, published)
{
	char path[PATH_MAX], link[PATH_MAX];
	long long size, avail;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/p2pmem/size", self->dev);
	ASSERT_EQ(0, sysfs_read_ll(path, &size));
	avail = p2pmem_available(self->dev);
	TH_LOG("size %lld available %lld", size, avail);
	ASSERT_GT(size, 0);
	ASSERT_GT(avail, 0);
	ASSERT_LE(avail, size);

	snprintf(path, sizeof(path), "%s/driver", self->dev);
	n = readlink(path, link, sizeof(link) - 1);
	ASSERT_GT(n, 0);
	link[n] = '\0';
	ASSERT_NE(NULL, strstr(link, "p2pmem_bar"));
}

TEST_F(provider, mmap_private_refused)
{
	int fd = open(self->alloc, O_RDWR);
	void *p;

	ASSERT_LE(0, fd);
	p = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	if (p != MAP_FAILED)
		munmap(p, MAP_LEN);
	close(fd);
}

TEST_F(provider, mmap_offset_refused)
{
	int fd = open(self->alloc, O_RDWR);
	void *p;

	ASSERT_LE(0, fd);
	p = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 getpagesize());
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	if (p != MAP_FAILED)
		munmap(p, MAP_LEN);
	close(fd);
}

/*
 * A mapping takes its size from the pool and gives it back on munmap;
 * the CPU can write and read it back, byte for byte.
 */
TEST_F(provider, mmap_rw_and_pool_accounting)
{
	long long before, during, after;
	unsigned char *p, *ref;

	ref = malloc(MAP_LEN);
	ASSERT_NE(NULL, ref);
	before = p2pmem_available(self->dev);
	p = p2pmem_map(self->dev, MAP_LEN);
	ASSERT_NE(NULL, p);
	during = p2pmem_available(self->dev);
	EXPECT_EQ(before - (long long)MAP_LEN, during);

	pattern_fill(ref, MAP_LEN, 0, 42);
	memcpy(p, ref, MAP_LEN);
	EXPECT_EQ(-1, first_diff(p, ref, MAP_LEN));

	ASSERT_EQ(0, munmap(p, MAP_LEN));
	after = p2pmem_available(self->dev);
	EXPECT_EQ(before, after);
	free(ref);
}

/*
 * Each mapping gets its own memory: two mappings never alias, not even
 * in part.  Each is filled with its own pattern, the second after the
 * first, and both are then compared whole, so that any page the two
 * share, at any offset, shows up.
 */
TEST_F(provider, mappings_do_not_alias)
{
	unsigned char *a, *b, *ref_a, *ref_b;

	ref_a = malloc(MAP_LEN);
	ref_b = malloc(MAP_LEN);
	ASSERT_NE(NULL, ref_a);
	ASSERT_NE(NULL, ref_b);
	pattern_fill(ref_a, MAP_LEN, 0, 0x11);
	pattern_fill(ref_b, MAP_LEN, 0, 0x22);
	a = p2pmem_map(self->dev, MAP_LEN);
	ASSERT_NE(NULL, a);
	b = p2pmem_map(self->dev, MAP_LEN);
	ASSERT_NE(NULL, b);
	memcpy(a, ref_a, MAP_LEN);
	memcpy(b, ref_b, MAP_LEN);
	EXPECT_EQ(-1, first_diff(a, ref_a, MAP_LEN))
		TH_LOG("the first mapping changed at byte %ld",
		       first_diff(a, ref_a, MAP_LEN));
	EXPECT_EQ(-1, first_diff(b, ref_b, MAP_LEN))
		TH_LOG("the second mapping differs at byte %ld",
		       first_diff(b, ref_b, MAP_LEN));
	munmap(a, MAP_LEN);
	munmap(b, MAP_LEN);
	free(ref_a);
	free(ref_b);
}

TEST_HARNESS_MAIN
