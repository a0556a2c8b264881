// SPDX-License-Identifier: GPL-2.0
/*
 * spin-demo: read a file into device memory and say where the bytes
 * came from.
 *
 * Usage: spin-demo FILE [PROVIDER-BDF]
 *
 * Maps device memory through /sys/bus/pci/devices/<bdf>/p2pmem/allocate
 * (a provider behind the same PCIe switch as the file's drive, unless
 * one is named), then reads FILE into it four ways: O_DIRECT (the drive
 * DMAs straight into device memory), a plain pread with a cold page
 * cache, again with a warm one, and cold again with the P2P router
 * switched off.  For each it prints the throughput, the bytes the drive
 * delivered (the block device's stat), the page-cache residency of the
 * file afterwards (mincore), the P2P router counters that moved
 * (/sys/kernel/mm/p2p_router/stats), and whether the bytes match a
 * reference read into ordinary RAM.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define CHUNK	(8UL << 20)
#define MAX_CTR	64

static char blkdir[PATH_MAX];

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sectors read by the file's block device so far. */
static unsigned long long dev_read_bytes(void)
{
	unsigned long long ios, merges, sectors = 0;
	char path[PATH_MAX + 8];
	FILE *f;

	snprintf(path, sizeof(path), "%s/stat", blkdir);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%llu %llu %llu", &ios, &merges, &sectors) != 3)
			sectors = 0;
		fclose(f);
	}
	return sectors * 512;
}

/* Percentage of the file's pages in the page cache. */
static double residency(int fd, size_t size)
{
	size_t pages = (size + 4095) / 4096, i, in = 0;
	unsigned char *vec = malloc(pages);
	void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);

	if (!vec || p == MAP_FAILED || mincore(p, size, vec))
		die("mincore");
	for (i = 0; i < pages; i++)
		in += vec[i] & 1;
	munmap(p, size);
	free(vec);
	return 100.0 * in / pages;
}

struct ctr {
	char name[NAME_MAX + 1];
	unsigned long long val;
};

#define STATS	"/sys/kernel/mm/p2p_router/stats"

/* Every counter of the P2P router, by name. */
static int read_ctrs(struct ctr *c)
{
	DIR *dir = opendir(STATS);
	char path[PATH_MAX];
	struct dirent *d;
	int n = 0;
	FILE *f;

	if (!dir)
		return 0;
	while (n < MAX_CTR && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), STATS "/%s", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &c[n].val) == 1) {
			snprintf(c[n].name, sizeof(c[n].name), "%s",
				 d->d_name);
			n++;
		}
		fclose(f);
	}
	closedir(dir);
	return n;
}

static unsigned long long ctr_delta(const struct ctr *c0, int n0,
				    const struct ctr *c1, int n1,
				    const char *name)
{
	int i, j;

	for (i = 0; i < n1; i++)
		for (j = 0; j < n0; j++)
			if (!strcmp(c1[i].name, name) &&
			    !strcmp(c0[j].name, name))
				return c1[i].val - c0[j].val;
	return 0;
}

/* Switch the router, so that one run shows the read with and without. */
static void router_enable(const char *val)
{
	int fd = open("/sys/kernel/mm/p2p_router/enabled", O_WRONLY);

	if (fd < 0)
		return;		/* a kernel without the router */
	if (write(fd, val, 1) != 1)
		die("p2p_router/enabled");
	close(fd);
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	sync();
	if (fd < 0 || write(fd, "3", 1) != 1)
		die("drop_caches");
	close(fd);
}

/*
 * Map SIZE bytes of device memory one page past a 2 MiB boundary.  6.12
 * would put a mapping this long on the boundary itself, and in the QEMU
 * rig a CPU copy from a large page-cache folio to an address equal to
 * the folio's modulo the reach of QEMU's direct-mapped software TLB runs
 * 10x slower (Documentation/spin/rig.rst, "Copies under TCG"): the warm
 * line would show the emulator, not the kernel.  A real CPU does not
 * care where the buffer starts.
 */
static unsigned char *map_device(int afd, size_t size)
{
	unsigned long at;
	void *p;

	p = mmap(NULL, size + (4UL << 20), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	at = (((unsigned long)p + (2UL << 20) - 1) & ~((2UL << 20) - 1)) + 4096;
	p = mmap((void *)at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, afd, 0);
	if (p == MAP_FAILED)
		die("mmap p2pmem");
	return p;
}

/* Find the block device's sysfs directory and a provider near it. */
static void find_devices(const char *file, char *provider, size_t len)
{
	char path[PATH_MAX + 32], dev[PATH_MAX] = "", best[PATH_MAX] = "";
	size_t best_common = 0;
	struct dirent *d;
	struct stat st;
	DIR *dir;

	if (stat(file, &st))
		die(file);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u",
		 major(st.st_dev), minor(st.st_dev));
	if (!realpath(path, blkdir))
		die(path);
	/* A partition's stat is fine; its disk holds device/device. */
	snprintf(path, sizeof(path), "%s/device/device", blkdir);
	if (!realpath(path, dev)) {
		snprintf(path, sizeof(path), "%s/../device/device", blkdir);
		if (!realpath(path, dev))
			dev[0] = '\0';
	}
	if (provider[0])
		return;

	dir = opendir("/sys/bus/pci/devices");
	if (!dir)
		die("/sys/bus/pci/devices");
	while ((d = readdir(dir))) {
		char pub[PATH_MAX], real[PATH_MAX];
		size_t common = 0;
		FILE *f;
		int v = 0;

		snprintf(pub, sizeof(pub), "/sys/bus/pci/devices/%s/p2pmem/published",
			 d->d_name);
		f = fopen(pub, "r");
		if (!f)
			continue;
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
		snprintf(pub, sizeof(pub), "/sys/bus/pci/devices/%s", d->d_name);
		if (!v || !realpath(pub, real))
			continue;
		/*
		 * Prefer the provider whose sysfs path shares most with the
		 * drive's: the one behind the same PCIe switch.
		 */
		while (real[common] && real[common] == dev[common])
			common++;
		if (!best[0] || common > best_common) {
			snprintf(best, sizeof(best), "%s", real);
			best_common = common;
		}
	}
	closedir(dir);
	if (!best[0]) {
		fprintf(stderr, "spin-demo: no published p2pmem provider\n");
		exit(1);
	}
	snprintf(provider, len, "%s", strrchr(best, '/') + 1);
}

int main(int argc, char **argv)
{
	static const char * const modes[] = {
		"O_DIRECT pread", "pread, cold cache", "pread, warm cache",
		"pread, router off",
	};
	char provider[256] = "", path[PATH_MAX + 32];
	unsigned char *dev, *ref;
	struct ctr c0[MAX_CTR], c1[MAX_CTR];
	struct stat st;
	size_t size;
	int fd, dfd, afd, m;

	if (argc < 2 || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: %s FILE [PROVIDER-BDF]\n", argv[0]);
		return argc < 2;
	}
	if (argc > 2)
		snprintf(provider, sizeof(provider), "%s", argv[2]);
	find_devices(argv[1], provider, sizeof(provider));

	fd = open(argv[1], O_RDONLY);
	dfd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || dfd < 0 || fstat(fd, &st))
		die(argv[1]);
	size = st.st_size & ~4095UL;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/p2pmem/allocate",
		 provider);
	afd = open(path, O_RDWR);
	if (afd < 0)
		die(path);
	dev = map_device(afd, size);
	ref = malloc(size);
	if (!ref || pread(fd, ref, size, 0) != (ssize_t)size)
		die("reference read");

	printf("spin-demo: %s (%zu MiB on %s) -> device memory of %s\n\n",
	       argv[1], size >> 20, strrchr(blkdir, '/') + 1, provider);
	printf("%-18s %6s %12s %12s  %-9s %s\n", "read", "MB/s", "from drive",
	       "cached after", "bytes", "where the bytes came from");

	for (m = 0; m < 4; m++) {
		unsigned long long rd0, rd1, dma, copied;
		double t0, t1;
		size_t off;
		int i, j, n0, n1;

		if (m != 2)
			drop_caches();
		else if (pread(fd, ref, size, 0) != (ssize_t)size)
			die("warming the page cache");	/* DMA did not */
		if (m == 3)
			router_enable("0");
		memset(dev, 0xa5, size);
		n0 = read_ctrs(c0);
		rd0 = dev_read_bytes();
		t0 = now();
		for (off = 0; off < size; off += CHUNK) {
			size_t len = size - off < CHUNK ? size - off : CHUNK;

			if (pread(m ? fd : dfd, dev + off, len, off) != (ssize_t)len)
				die(modes[m]);
		}
		t1 = now();
		if (m == 3)
			router_enable("1");
		rd1 = dev_read_bytes();
		n1 = read_ctrs(c1);
		dma = ctr_delta(c0, n0, c1, n1, "p2p_bytes");
		copied = ctr_delta(c0, n0, c1, n1, "cache_bytes");
		printf("%-18s %6.0f %8.1f MiB %11.0f%%  %-9s ", modes[m],
		       size / (t1 - t0) / 1e6, (rd1 - rd0) / 1048576.0,
		       residency(fd, size),
		       memcmp(dev, ref, size) ? "WRONG" : "verified");
		if (!m)
			printf("drive DMAs straight into device memory\n");
		else if (dma || copied)
			printf("router: %.1f MiB drive DMA, %.1f MiB CPU copy\n",
			       dma / 1048576.0, copied / 1048576.0);
		else if (rd1 > rd0)
			printf("drive -> page cache in RAM -> CPU copy\n");
		else
			printf("CPU copy from the page cache\n");
		for (i = 0; i < n1; i++)
			for (j = 0; j < n0; j++)
				if (!strcmp(c1[i].name, c0[j].name) &&
				    c1[i].val != c0[j].val)
					printf("%18s %s +%llu\n", "", c1[i].name,
					       c1[i].val - c0[j].val);
		if (memcmp(dev, ref, size))
			return 1;
	}
	return 0;
}
