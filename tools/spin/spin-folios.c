// SPDX-License-Identifier: GPL-2.0
/*
 * spin-folios: what sizes of folio hold a file in the page cache?
 *
 * Usage: spin-folios FILE
 *
 * Maps FILE, touches only the pages mincore(2) says are cached (so that
 * nothing is read in), looks up each page's frame in /proc/self/pagemap
 * and its flags in /proc/kpageflags, and prints how many bytes of the
 * file sit in folios of each size, e.g. "4k:0 1024k:62914560 2048k:4194304".
 * Needs root (pagemap hides frame numbers from others).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define KPF_COMPOUND_HEAD	15
#define KPF_COMPOUND_TAIL	16
#define MAX_ORDER_SEEN		20

static uint64_t pread64_at(int fd, uint64_t idx)
{
	uint64_t v;

	if (pread(fd, &v, sizeof(v), idx * sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

int main(int argc, char **argv)
{
	unsigned long long bytes[MAX_ORDER_SEEN + 1] = { 0 };
	size_t pages, i, run = 0;
	int fd, pm, kpf, o;
	unsigned char *vec;
	volatile char *p;
	struct stat st;

	if (argc != 2 || !strcmp(argv[1], "--help")) {
		fprintf(argc == 2 ? stdout : stderr, "usage: spin-folios FILE\n");
		return argc != 2;
	}
	fd = open(argv[1], O_RDONLY);
	pm = open("/proc/self/pagemap", O_RDONLY);
	kpf = open("/proc/kpageflags", O_RDONLY);
	if (fd < 0 || pm < 0 || kpf < 0 || fstat(fd, &st)) {
		perror("spin-folios");
		return 1;
	}
	pages = (st.st_size + 4095) / 4096;
	p = mmap(NULL, pages * 4096, PROT_READ, MAP_SHARED, fd, 0);
	vec = malloc(pages + 1);
	if (p == MAP_FAILED || !vec || mincore((void *)p, pages * 4096, vec)) {
		perror("spin-folios");
		return 1;
	}
	/* A run is a head and its tails; a lone page is order 0. */
	for (i = 0; i <= pages; i++) {
		uint64_t pme = 0, flags = 0;

		if (i < pages && (vec[i] & 1)) {
			(void)p[i * 4096];
			pme = pread64_at(pm, (uintptr_t)p / 4096 + i);
			if (pme >> 63)
				flags = pread64_at(kpf, pme & ((1ULL << 55) - 1));
		}
		if (run && (i == pages || !(flags >> KPF_COMPOUND_TAIL & 1) ||
			    !(vec[i] & 1))) {
			for (o = 0; o < MAX_ORDER_SEEN && (1UL << o) < run; o++)
				;
			bytes[o] += run * 4096ULL;
			run = 0;
		}
		if (i < pages && (vec[i] & 1))
			run++;
	}
	for (o = 0, i = 0; o <= MAX_ORDER_SEEN; o++)
		if (bytes[o])
			printf("%s%luk:%llu", i++ ? " " : "", 4UL << o, bytes[o]);
	printf("\n");
	return 0;
}
