// SPDX-License-Identifier: GPL-2.0
/*
 * spin-bounce: the CPU-bounce baseline (gdsio's CPU_GPU transfer type).
 *
 * Usage: spin-bounce [-k] [-r] [-j JOBS] FILE PROVIDER-SYSFS-DIR
 *                    BLOCK-SIZE TOTAL-BYTES
 *
 * Reads the first TOTAL-BYTES of FILE in BLOCK-SIZE requests into an
 * ordinary RAM buffer (buffered pread), copies each block into device
 * memory mapped from the provider's p2pmem/allocate, and prints "MB/s"
 * for the whole transfer.  The last block each job copies is compared
 * with the RAM buffer to make sure the copy is real.
 *
 *   -k  keep the page cache as it is (default: drop caches first, a
 *       cold read)
 *   -r  random order: each block once, shuffled with a fixed seed
 *   -j  JOBS threads, each with its own buffers, taking every JOBS-th
 *       block of the (possibly shuffled) order
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

static size_t bs, nblocks, *order;
static int fd, afd, jobs = 1;

static void *job(void *arg)
{
	long id = (long)arg;
	unsigned char *dev, *ram;
	size_t i;

	dev = mmap(NULL, bs, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
	ram = aligned_alloc(4096, bs);
	if (dev == MAP_FAILED || !ram) {
		perror("buffers");
		exit(1);
	}
	for (i = id; i < nblocks; i += jobs) {
		if (pread(fd, ram, bs, (off_t)order[i] * bs) != (ssize_t)bs) {
			perror("pread");
			exit(1);
		}
		memcpy(dev, ram, bs);
	}
	if (memcmp(dev, ram, bs)) {
		fprintf(stderr, "spin-bounce: device memory does not match\n");
		exit(1);
	}
	munmap(dev, bs);
	free(ram);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long long rng = 0x9e3779b97f4a7c15ULL;
	int keep = 0, shuffle = 0, opt, dc;
	pthread_t tid[64];
	struct timespec t0, t1;
	char path[4096];
	size_t i;
	long j;
	double s;

	while ((opt = getopt(argc, argv, "krj:")) != -1) {
		switch (opt) {
		case 'k':
			keep = 1;
			break;
		case 'r':
			shuffle = 1;
			break;
		case 'j':
			jobs = atoi(optarg);
			if (jobs >= 1 && jobs <= 64)
				break;
			/* fall through */
		default:
			goto usage;
		}
	}
	if (argc - optind != 4) {
usage:
		fprintf(stderr, "usage: %s [-k] [-r] [-j JOBS] FILE PROVIDER-DIR BLOCK-SIZE TOTAL\n",
			argv[0]);
		return 2;
	}
	bs = strtoull(argv[optind + 2], NULL, 0);
	nblocks = bs ? strtoull(argv[optind + 3], NULL, 0) / bs : 0;
	fd = open(argv[optind], O_RDONLY);
	snprintf(path, sizeof(path), "%s/p2pmem/allocate", argv[optind + 1]);
	afd = open(path, O_RDWR);
	order = malloc(nblocks * sizeof(*order));
	if (fd < 0 || afd < 0 || !nblocks || !order) {
		perror("open");
		return 1;
	}
	for (i = 0; i < nblocks; i++)
		order[i] = i;
	for (i = 0; shuffle && i + 1 < nblocks; i++) {
		size_t k, t;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		k = i + rng % (nblocks - i);
		t = order[i];
		order[i] = order[k];
		order[k] = t;
	}
	if (!keep) {
		sync();
		dc = open("/proc/sys/vm/drop_caches", O_WRONLY);
		if (dc < 0 || write(dc, "3", 1) != 1)
			perror("drop_caches");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (j = 0; j < jobs; j++)
		if (pthread_create(&tid[j], NULL, job, (void *)j)) {
			perror("pthread_create");
			return 1;
		}
	for (j = 0; j < jobs; j++)
		pthread_join(tid[j], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%.0f\n", nblocks * bs / s / 1e6);
	return 0;
}
