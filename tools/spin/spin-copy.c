// SPDX-License-Identifier: GPL-2.0
/*
 * spin-copy: how fast does this CPU (or this emulator) copy into device
 * memory, by each of the instructions a kernel or a libc would use?
 *
 * Usage: spin-copy [-c CHUNK] [-o OFFSET] [-s SRC] METHOD DEST BLOCK-SIZE
 *                  TOTAL-BYTES
 *
 * Copies TOTAL-BYTES from an ordinary RAM buffer of BLOCK-SIZE bytes
 * into a BLOCK-SIZE destination, one block at a time, and prints MB/s.
 * The destination starts on a 2 MiB boundary.
 * DEST is "ram" (an anonymous mapping) or a p2pmem provider's sysfs
 * directory, whose p2pmem/allocate is mapped as device memory.  Each
 * block is copied in CHUNK-sized pieces (default: the whole block in
 * one instruction), so "-c 4096 movsb" is what the kernel's
 * copy_to_user() does on a CPU with FSRM, one page at a time.
 * The source starts OFFSET bytes (-o, default 0) past a 2 MiB boundary;
 * SRC is "ram" (default: MADV_NOHUGEPAGE, 4 KiB pages) or "thp"
 * (MADV_HUGEPAGE).
 *
 * METHOD is one of
 *   memcpy  the C library's memcpy()
 *   movsb   rep movsb
 *   movsq   rep movsq (CHUNK and BLOCK-SIZE multiples of 8)
 *
 * The destination is compared with the source at the end, so that a
 * copy that did nothing cannot look fast.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: spin-copy [-c CHUNK] [-o OFFSET] [-s ram|thp] memcpy|movsb|movsq "
		"ram|PROVIDER-SYSFS-DIR BLOCK-SIZE TOTAL-BYTES\n");
}

static size_t size_arg(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case '\0': break;
	default: usage(stderr); exit(2);
	}
	return v;
}

static void copy_movsb(void *d, const void *s, size_t n)
{
	asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void copy_movsq(void *d, const void *s, size_t n)
{
	n /= 8;
	asm volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

int main(int argc, char **argv)
{
	void (*copy)(void *, const void *, size_t);
	size_t bs, total, chunk = 0, soff = 0, done, off, n;
	unsigned char *src, *dst;
	struct timespec t0, t1;
	int opt, thp = 0;
	double secs;

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	while ((opt = getopt(argc, argv, "c:o:s:")) != -1) {
		switch (opt) {
		case 'c': chunk = size_arg(optarg); break;
		case 'o': soff = size_arg(optarg); break;
		case 's':
			if (strcmp(optarg, "ram") && strcmp(optarg, "thp")) {
				usage(stderr);
				return 2;
			}
			thp = !strcmp(optarg, "thp");
			break;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 4) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[optind], "memcpy"))
		copy = (void (*)(void *, const void *, size_t))memcpy;
	else if (!strcmp(argv[optind], "movsb"))
		copy = copy_movsb;
	else if (!strcmp(argv[optind], "movsq"))
		copy = copy_movsq;
	else {
		usage(stderr);
		return 2;
	}
	bs = size_arg(argv[optind + 2]);
	total = size_arg(argv[optind + 3]);
	if (!chunk || chunk > bs)
		chunk = bs;
	if (!bs || bs % chunk || chunk % 8) {
		fprintf(stderr, "spin-copy: BLOCK-SIZE must be a multiple of CHUNK, CHUNK of 8\n");
		return 2;
	}

	/* A 2 MiB-aligned destination: reserve, then map over it. */
	dst = mmap(NULL, bs + (2UL << 20), PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dst == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	dst = (unsigned char *)(((unsigned long)dst + (2UL << 20) - 1) &
				~((2UL << 20) - 1));
	if (!strcmp(argv[optind + 1], "ram")) {
		dst = mmap(dst, bs, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	} else {
		char path[4096];
		int afd;

		snprintf(path, sizeof(path), "%s/p2pmem/allocate", argv[optind + 1]);
		afd = open(path, O_RDWR);
		if (afd < 0) {
			perror(path);
			return 1;
		}
		dst = mmap(dst, bs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			   afd, 0);
	}
	/* A 2 MiB-aligned source, then OFFSET bytes into it. */
	src = mmap(NULL, bs + soff + (2UL << 20), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src != MAP_FAILED) {
		src = (unsigned char *)(((unsigned long)src + (2UL << 20) - 1) &
					~((2UL << 20) - 1));
		madvise(src, bs + soff, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
		src += soff;
	}
	if (dst == MAP_FAILED || src == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	/* Differs from page to page, so a misplaced chunk cannot match. */
	for (off = 0; off < bs; off++)
		src[off] = (unsigned char)(off * 131 + (off >> 12) * 29 + 7);
	memset(dst, 0, bs);	/* fault everything in before the clock */

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (done = 0; done < total; done += bs)
		for (off = 0; off < bs; off += chunk) {
			n = chunk;
			copy(dst + off, src + off, n);
		}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (memcmp(dst, src, bs)) {
		fprintf(stderr, "spin-copy: destination does not match\n");
		return 1;
	}
	secs = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (getenv("SPIN_COPY_VERBOSE"))
		fprintf(stderr, "spin-copy: src %p dst %p\n", (void *)src, (void *)dst);
	printf("%.0f\n", done / secs / 1e6);
	return 0;
}
