// SPDX-License-Identifier: GPL-2.0
/*
 * spin-bounce: the CPU-bounce baseline (gdsio's CPU_GPU transfer type).
 *
 * Usage: spin-bounce FILE PROVIDER-SYSFS-DIR BLOCK-SIZE TOTAL-BYTES
 *
 * Reads FILE from offset 0 in BLOCK-SIZE requests into an ordinary RAM
 * buffer (buffered pread, cold cache: it drops caches first), copies
 * each block into device memory mapped from the provider's
 * p2pmem/allocate, and prints "MB/s" for the whole transfer.  The last
 * block is compared with the file to make sure the copy is real.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

int main(int argc, char **argv)
{
	char path[4096];
	unsigned char *dev, *ram;
	struct timespec t0, t1;
	size_t bs, total, off;
	int fd, afd, dc;
	double s;

	if (argc != 5) {
		fprintf(stderr, "usage: %s FILE PROVIDER-DIR BLOCK-SIZE TOTAL\n", argv[0]);
		return 2;
	}
	bs = strtoull(argv[3], NULL, 0);
	total = strtoull(argv[4], NULL, 0) / bs * bs;
	fd = open(argv[1], O_RDONLY);
	snprintf(path, sizeof(path), "%s/p2pmem/allocate", argv[2]);
	afd = open(path, O_RDWR);
	if (fd < 0 || afd < 0 || !bs || !total) {
		perror("open");
		return 1;
	}
	dev = mmap(NULL, bs, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
	ram = aligned_alloc(4096, bs);
	if (dev == MAP_FAILED || !ram) {
		perror("buffers");
		return 1;
	}
	sync();
	dc = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (dc < 0 || write(dc, "3", 1) != 1)
		perror("drop_caches");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (off = 0; off < total; off += bs) {
		if (pread(fd, ram, bs, off) != (ssize_t)bs) {
			perror("pread");
			return 1;
		}
		memcpy(dev, ram, bs);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (memcmp(dev, ram, bs)) {
		fprintf(stderr, "spin-bounce: device memory does not match\n");
		return 1;
	}
	s = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%.0f\n", total / s / 1e6);
	return 0;
}
