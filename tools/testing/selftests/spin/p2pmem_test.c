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
	SPIN_NEED(!p2pmem_find(NULL, true, self->dev, sizeof(self->dev)),
		  "a published P2PDMA provider: none found");
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

/*
 * p2pmem_bar publishes only a prefetchable memory BAR the user names: a
 * register BAR (non-prefetchable memory) is refused, and so is a bind
 * through driver_override with no BAR named.  The rig's AHCI controller
 * (no disks behind it) lends its register BAR for this, and gets its own
 * driver back afterwards.  One with a disk behind it is never taken.
 */
#define P2PMEM_BAR_DRV	"/sys/bus/pci/drivers/p2pmem_bar"
#define P2PMEM_BAR_PARM	"/sys/module/p2pmem_bar/parameters/bar"
#define P2PMEM_BAR_WC	"/sys/module/p2pmem_bar/parameters/wc"
#define IORES_MEM	0x00000200UL	/* IORESOURCE_MEM */
#define IORES_PREFETCH	0x00002000UL	/* IORESOURCE_PREFETCH */

FIXTURE(register_bar) {
	char bdf[NAME_MAX + 1];
	char dev[SYSFS_LEN];
	char orig[64];		/* the driver it had, "" if none */
	int bar;
};

/*
 * Whether a block device sits below the PCI device @dev: a controller
 * with a disk (or a CD) behind it is never lent to a test, so that the
 * tests do not take a disk away from a machine that is not the rig.
 */
static bool disk_below(const char *dev)
{
	char top[PATH_MAX], path[PATH_MAX], blk[PATH_MAX];
	struct dirent *de;
	bool found = false;
	size_t n;
	DIR *d;

	if (!realpath(dev, top))
		return true;
	n = strlen(top);
	d = opendir("/sys/block");
	if (!d)
		return true;
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s", de->d_name);
		found = realpath(path, blk) && !strncmp(blk, top, n) &&
			blk[n] == '/';
	}
	closedir(d);
	return found;
}

/* The first BAR of @dev that is non-prefetchable memory, or -1. */
static int register_bar_of(const char *dev)
{
	char path[PATH_MAX], line[256];
	unsigned long long start, end, flags;
	int i = 0, found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/resource", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (i < 6 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %llx %llx", &start, &end, &flags) == 3 &&
		    end > start && (flags & IORES_MEM) &&
		    !(flags & IORES_PREFETCH)) {
			found = i;
			break;
		}
		i++;
	}
	fclose(f);
	return found;
}

FIXTURE_SETUP(register_bar)
{
	char path[PATH_MAX], link[PATH_MAX];
	struct dirent *de;
	DIR *d;
	ssize_t n;

	self->bar = -1;
	self->orig[0] = '\0';
	ASSERT_EQ(0, access(P2PMEM_BAR_DRV, F_OK));
	ASSERT_EQ(0, access(P2PMEM_BAR_PARM, W_OK));
	d = opendir(PCI_DEVICES);
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		char cls[32];

		if (de->d_name[0] == '.')
			continue;
		snprintf(self->dev, sizeof(self->dev), "%s/%s", PCI_DEVICES,
			 de->d_name);
		snprintf(path, sizeof(path), "%s/class", self->dev);
		/* AHCI: class 0x010601 */
		if (sysfs_read(path, cls, sizeof(cls)) ||
		    strcmp(cls, "0x010601") || disk_below(self->dev))
			continue;
		self->bar = register_bar_of(self->dev);
		if (self->bar >= 0) {
			snprintf(self->bdf, sizeof(self->bdf), "%s",
				 de->d_name);
			break;
		}
	}
	closedir(d);
	SPIN_NEED(self->bar >= 0,
		  "an AHCI controller with a register BAR and no disk: none");

	snprintf(path, sizeof(path), "%s/driver", self->dev);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		snprintf(self->orig, sizeof(self->orig), "%s",
			 strrchr(link, '/') + 1);
		snprintf(path, sizeof(path), "/sys/bus/pci/drivers/%s/unbind",
			 self->orig);
		ASSERT_EQ(0, sysfs_write(path, self->bdf));
	}
	TH_LOG("%s BAR %d (non-prefetchable memory), driver \"%s\"",
	       self->bdf, self->bar, self->orig);
	snprintf(path, sizeof(path), "%s/driver_override", self->dev);
	ASSERT_EQ(0, sysfs_write(path, "p2pmem_bar"));
}

FIXTURE_TEARDOWN(register_bar)
{
	char path[PATH_MAX];

	sysfs_write(P2PMEM_BAR_PARM, "-1");
	if (self->bar < 0)
		return;
	snprintf(path, sizeof(path), "%s/driver_override", self->dev);
	sysfs_write(path, "\n");
	if (self->orig[0]) {
		snprintf(path, sizeof(path), "/sys/bus/pci/drivers/%s/bind",
			 self->orig);
		EXPECT_EQ(0, sysfs_write(path, self->bdf));
		snprintf(path, sizeof(path), "%s/driver", self->dev);
		EXPECT_EQ(0, access(path, F_OK))
			TH_LOG("%s did not get %s back", self->bdf, self->orig);
	}
}

static void register_bar_bind(struct __test_metadata *_metadata,
			      FIXTURE_DATA(register_bar) *self, int bar,
			      int err)
{
	char path[PATH_MAX], val[16];

	snprintf(val, sizeof(val), "%d", bar);
	ASSERT_EQ(0, sysfs_write(P2PMEM_BAR_PARM, val));
	EXPECT_EQ(-err, sysfs_write(P2PMEM_BAR_DRV "/bind", self->bdf));
	snprintf(path, sizeof(path), "%s/driver", self->dev);
	EXPECT_NE(0, access(path, F_OK)) TH_LOG("%s got bound", self->bdf);
	snprintf(path, sizeof(path), "%s/p2pmem", self->dev);
	EXPECT_NE(0, access(path, F_OK))
		TH_LOG("BAR %d of %s was published", bar, self->bdf);
}

TEST_F(register_bar, refused)
{
	register_bar_bind(_metadata, self, self->bar, ENODEV);
}

TEST_F(register_bar, unnamed_refused)
{
	register_bar_bind(_metadata, self, -1, EINVAL);
}

#define PAT_LIST	"/sys/kernel/debug/x86/pat_memtype_list"

/* The published BAR of @dev: the prefetchable one of its pool's size. */
static int published_bar(const char *dev, unsigned long long *start,
			 unsigned long long *end)
{
	unsigned long long rs, re, rf;
	char path[PATH_MAX], line[256];
	int bars = 0, i;
	long long size;
	FILE *f;

	snprintf(path, sizeof(path), "%s/p2pmem/size", dev);
	if (sysfs_read_ll(path, &size))
		return -1;
	snprintf(path, sizeof(path), "%s/resource", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	for (i = 0; i < 6 && fgets(line, sizeof(line), f); i++) {
		if (sscanf(line, "%llx %llx %llx", &rs, &re, &rf) != 3 ||
		    !(rf & IORES_MEM) || !(rf & IORES_PREFETCH) || !re ||
		    re - rs + 1 != (unsigned long long)size)
			continue;
		*start = rs;
		*end = re;
		bars++;
	}
	fclose(f);
	return bars == 1 ? 0 : -1;
}

/*
 * How x86 PAT's list of memory types holds [@start, @end]: 1 if one entry
 * of @want covers it and none of another type overlaps it, else 0.
 */
static int pat_holds(struct __test_metadata *_metadata,
		     unsigned long long start, unsigned long long end,
		     const char *want)
{
	char line[256], type[64];
	unsigned long long s, e;
	int right = 0, other = 0;
	FILE *f;

	f = fopen(PAT_LIST, "r");
	if (!f) {
		TH_LOG("%s: %s", PAT_LIST, strerror(errno));
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "PAT: [mem 0x%llx-0x%llx] %63s", &s, &e,
			   type) != 3 || e <= start || s > end)
			continue;
		TH_LOG("%s", strtok(line, "\n"));
		if (!strcmp(type, want) && s <= start && e > end)
			right++;
		else
			other++;
	}
	fclose(f);
	return right && !other;
}

static long long write_combining(const char *dev)
{
	char path[PATH_MAX];
	long long val;

	snprintf(path, sizeof(path), "%s/p2pmem/write_combining", dev);
	return sysfs_read_ll(path, &val) ? -1 : val;
}

/*
 * p2pmem_bar publishes ivshmem's BAR and asks for its memory to be mapped
 * write-combining: p2pmem/write_combining says 1, and x86 PAT's list of
 * memory types holds the whole BAR as write-combining and no part of it as
 * another type.
 */
TEST_F(provider, write_combining)
{
	unsigned long long start, end;

	debugfs_mount();
	ASSERT_EQ(0, access(PAT_LIST, R_OK))
		TH_LOG("no %s (CONFIG_X86_PAT, debugfs)", PAT_LIST);
	EXPECT_EQ(1, write_combining(self->dev));
	ASSERT_EQ(0, published_bar(self->dev, &start, &end));
	TH_LOG("BAR %#llx-%#llx", start, end);
	EXPECT_TRUE(pat_holds(_metadata, start, end, "write-combining"));
}

/*
 * A BAR named with bar= (a bind through driver_override) may hold
 * registers: it is mapped uncached unless wc=1 says otherwise.  An ivshmem
 * device other than the rig's main provider is bound so, both ways, and
 * given back to p2pmem_bar as it was.
 */
/*
 * Whether PCI device @bdf is an ivshmem (1af4:1110): only one is rebound,
 * never a device that was bound to p2pmem_bar through driver_override.
 */
static bool is_ivshmem(const char *bdf)
{
	char path[PATH_MAX], vendor[16], device[16];

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/vendor", bdf);
	if (sysfs_read(path, vendor, sizeof(vendor)))
		return false;
	snprintf(path, sizeof(path), PCI_DEVICES "/%s/device", bdf);
	if (sysfs_read(path, device, sizeof(device)))
		return false;
	return !strcmp(vendor, "0x1af4") && !strcmp(device, "0x1110");
}

FIXTURE(named_bar) {
	char bdf[NAME_MAX + 1];
	char dev[SYSFS_LEN];
};

FIXTURE_SETUP(named_bar)
{
	char main_dev[SYSFS_LEN];
	struct dirent *de;
	DIR *d;

	self->bdf[0] = '\0';
	SPIN_NEED(!p2pmem_find(NULL, true, main_dev, sizeof(main_dev)),
		  "a published P2PDMA provider: none found");
	d = opendir(P2PMEM_BAR_DRV);
	ASSERT_NE(NULL, d);
	while ((de = readdir(d)))
		if (strchr(de->d_name, ':') && !strstr(main_dev, de->d_name) &&
		    is_ivshmem(de->d_name)) {
			snprintf(self->bdf, sizeof(self->bdf), "%s",
				 de->d_name);
			break;
		}
	closedir(d);
	SPIN_NEED(self->bdf[0], "a second ivshmem bound to p2pmem_bar: none");
	snprintf(self->dev, sizeof(self->dev), "%s/%s", PCI_DEVICES,
		 self->bdf);
	TH_LOG("%s", self->bdf);
}

FIXTURE_TEARDOWN(named_bar)
{
	char path[PATH_MAX];

	if (!self->bdf[0])
		return;
	sysfs_write(P2PMEM_BAR_WC, "0");
	sysfs_write(P2PMEM_BAR_PARM, "-1");
	snprintf(path, sizeof(path), "%s/driver_override", self->dev);
	sysfs_write(path, "\n");
	snprintf(path, sizeof(path), "%s/driver", self->dev);
	if (access(path, F_OK))
		EXPECT_EQ(0, sysfs_write(P2PMEM_BAR_DRV "/bind", self->bdf));
	EXPECT_EQ(1, write_combining(self->dev));
}

TEST_F(named_bar, write_combining_opt_in)
{
	unsigned long long start, end;
	char path[PATH_MAX];
	int round;

	debugfs_mount();
	ASSERT_EQ(0, access(PAT_LIST, R_OK))
		TH_LOG("no %s (CONFIG_X86_PAT, debugfs)", PAT_LIST);
	ASSERT_EQ(1, write_combining(self->dev));
	ASSERT_EQ(0, sysfs_write(P2PMEM_BAR_DRV "/unbind", self->bdf));
	snprintf(path, sizeof(path), "%s/driver_override", self->dev);
	ASSERT_EQ(0, sysfs_write(path, "p2pmem_bar"));
	ASSERT_EQ(0, sysfs_write(P2PMEM_BAR_PARM, "2"));
	for (round = 0; round < 2; round++) {
		ASSERT_EQ(0, sysfs_write(P2PMEM_BAR_WC, round ? "1" : "0"));
		ASSERT_EQ(0, sysfs_write(P2PMEM_BAR_DRV "/bind", self->bdf));
		ASSERT_EQ(0, published_bar(self->dev, &start, &end));
		EXPECT_EQ(round, write_combining(self->dev));
		EXPECT_TRUE(pat_holds(_metadata, start, end,
				      round ? "write-combining" :
				      "uncached-minus"));
		ASSERT_EQ(0, sysfs_write(P2PMEM_BAR_DRV "/unbind", self->bdf));
	}
}

#define WC_MNT	"/mnt/spin-p2pmem"
#define WC_LEN	(8 * MiB)

/*
 * A read into write-combined device memory served from the page cache (the
 * kernel's copy, which must leave the CPU's write-combining buffers before
 * the read returns), followed at once by an O_DIRECT write from that memory,
 * which the drive DMAs out of the BAR: what reaches the disk is what was
 * read, byte for byte.
 */
TEST(copy_then_dma_from_device_memory)
{
	char ns[NAME_MAX + 1], nvme_dev[SYSFS_LEN], provider[SYSFS_LEN];
	unsigned char *dev, *ram, *ref;
	long long copied;
	int fd, out;

	SPIN_NEED(!nvme_rig_ns(0, ns, sizeof(ns)), SPIN_RIG_DRIVE_FMT, 0, 1);
	ASSERT_EQ(0, nvme_pci_dev(ns, nvme_dev, sizeof(nvme_dev)));
	SPIN_NEED(!p2pmem_find(nvme_dev, true, provider, sizeof(provider)),
		  "a provider that %s reaches: none published", ns);
	ASSERT_EQ(0, mkfs_mount("xfs", ns, WC_MNT));
	ref = malloc(WC_LEN);
	ASSERT_NE(NULL, ref);
	pattern_fill(ref, WC_LEN, 0, 0x5eed);
	/* Written buffered and left in the page cache. */
	fd = open(WC_MNT "/src", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(WC_LEN, pwrite(fd, ref, WC_LEN, 0));
	out = open(WC_MNT "/dst", O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
	ASSERT_LE(0, out);
	ASSERT_EQ(0, ftruncate(out, WC_LEN));
	ram = aligned_alloc(4096, WC_LEN);
	ASSERT_NE(NULL, ram);
	dev = p2pmem_map(provider, WC_LEN);
	ASSERT_NE(NULL, dev);
	memset(dev, POISON, WC_LEN);

	copied = router_stat("cache_bytes");
	ASSERT_EQ(WC_LEN, pread(fd, dev, WC_LEN, 0));
	ASSERT_EQ(WC_LEN, pwrite(out, dev, WC_LEN, 0));
	/* The premise: the kernel copied the bytes into device memory. */
	EXPECT_LE(WC_LEN, router_stat("cache_bytes") - copied);

	memset(ram, POISON, WC_LEN);
	ASSERT_EQ(WC_LEN, pread(out, ram, WC_LEN, 0));
	EXPECT_EQ(-1, first_diff(ram, ref, WC_LEN));

	munmap(dev, WC_LEN);
	free(ram);
	free(ref);
	close(out);
	close(fd);
	umount2(WC_MNT, MNT_DETACH);
}

TEST_HARNESS_MAIN
