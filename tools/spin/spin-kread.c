// SPDX-License-Identifier: GPL-2.0
/*
 * spin-kread: the in-kernel bio_vec path, as a GPU driver takes it
 * (AMD's KFD for hipFile: vfs_iocb_iter_read() with an ITER_BVEC of its
 * P2PDMA pages, IOCB_DIRECT only for a file opened O_DIRECT).
 *
 * Usage: spin-kread FILE BLOCK-SIZE TOTAL-BYTES
 *
 * Reads the first TOTAL-BYTES of FILE in BLOCK-SIZE requests into a
 * buffer of lib/test_p2pdma.c's device memory (/dev/test_p2pdma,
 * TEST_P2PDMA_RW), buffered, and prints "MB/s" for the whole transfer.
 * The page cache is left as it is.  The last block is then read again
 * into RAM and compared with the device buffer, through the driver's
 * mapping, to make sure the read is real.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "lib/test_p2pdma_uapi.h"

#define BUF_LEN	(16UL << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct test_p2pdma_rw rw = { 0 };
	uint64_t size = BUF_LEN;
	size_t bs, total, done;
	unsigned char *dev, *ram;
	int fd, gfd;
	double t;
	long ret;

	if (argc != 4 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: spin-kread FILE BLOCK-SIZE TOTAL-BYTES\n");
		return argc == 2 ? 0 : 2;
	}
	bs = strtoull(argv[2], NULL, 0);
	total = strtoull(argv[3], NULL, 0);
	if (!bs || bs > BUF_LEN || total < bs) {
		fprintf(stderr, "spin-kread: need 0 < BLOCK-SIZE <= %lu <= TOTAL-BYTES\n",
			BUF_LEN);
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	gfd = open("/dev/test_p2pdma", O_RDWR);
	if (fd < 0 || gfd < 0 || ioctl(gfd, TEST_P2PDMA_ALLOC, &size)) {
		perror("spin-kread: open or TEST_P2PDMA_ALLOC");
		return 1;
	}
	rw.fd = fd;
	rw.len = bs;
	t = now();
	for (done = 0; done + bs <= total; done += bs) {
		rw.pos = done;
		rw.offset = done % (BUF_LEN - BUF_LEN % bs);
		ret = ioctl(gfd, TEST_P2PDMA_RW, &rw);
		if (ret != (long)bs) {
			fprintf(stderr, "spin-kread: read at %zu returned %ld: %s\n",
				done, ret, ret < 0 ? strerror(errno) : "short");
			return 1;
		}
	}
	t = now() - t;
	printf("%.0f\n", done / t / 1e6);

	/* The last block, read again into RAM, is what the buffer holds. */
	dev = mmap(NULL, BUF_LEN, PROT_READ, MAP_SHARED, gfd, 0);
	ram = malloc(bs);
	if (dev == MAP_FAILED || !ram ||
	    pread(fd, ram, bs, rw.pos) != (ssize_t)bs) {
		perror("spin-kread: check");
		return 1;
	}
	if (memcmp(dev + rw.offset, ram, bs)) {
		fprintf(stderr, "spin-kread: device memory does not match\n");
		return 1;
	}
	return 0;
}
