// SPDX-License-Identifier: GPL-2.0
/*
 * spin-cache: put an exact part of a file in the page cache.
 *
 * Usage: spin-cache FILE PERCENT [contig|scatter] [CHUNK]
 *
 * Drops FILE from the page cache (POSIX_FADV_DONTNEED after an fsync),
 * then reads PERCENT of it back into RAM, so that a benchmark can start
 * from a known residency:
 *
 *   contig   the first PERCENT of the file, read as a program reading
 *            it from the start would: in 1 MiB reads with the file's
 *            usual read-ahead, so that the page cache holds it in the
 *            large folios read-ahead makes; what read-ahead brought in
 *            past that part is then dropped again (POSIX_FADV_DONTNEED),
 *            except the rest of a large folio that straddles its end;
 *   scatter  (default) PERCENT of its CHUNK-sized pieces (default
 *            64 KiB), chosen at random with a fixed seed, so the same
 *            arguments give the same pattern every time.  The pieces
 *            are read with POSIX_FADV_RANDOM, so read-ahead brings in
 *            nothing beyond them, in order-0 folios, as random reads of
 *            up to the read-ahead window would.
 *
 * Prints the residency mincore(2) then reports, in the format
 * spin-resident used: "49.8 8160/16384".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s FILE PERCENT [contig|scatter] [CHUNK]\n"
		"reads PERCENT (0-100) of FILE into the page cache, after\n"
		"dropping it: the first part (contig) or random CHUNK-sized\n"
		"pieces (scatter, default; CHUNK default 65536)\n", argv0);
	return 2;
}

/* A small fixed-seed generator, so patterns repeat across runs. */
static unsigned long long rng = 0x9e3779b97f4a7c15ULL;

static unsigned long long next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double resident(int fd, size_t len, size_t *res, size_t *pages)
{
	long psz = sysconf(_SC_PAGESIZE);
	unsigned char *vec;
	size_t i;
	void *map;

	*pages = (len + psz - 1) / psz;
	*res = 0;
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	vec = malloc(*pages);
	if (map == MAP_FAILED || !vec || mincore(map, len, vec)) {
		perror("mincore");
		exit(1);
	}
	for (i = 0; i < *pages; i++)
		*res += vec[i] & 1;
	munmap(map, len);
	free(vec);
	return 100.0 * *res / *pages;
}

int main(int argc, char **argv)
{
	size_t chunk = 65536, len, nchunks, want, i, res, pages;
	int scatter = 1, fd;
	unsigned char *pick;
	double pct;
	struct stat st;
	char *buf, *end;

	if (argc < 3 || argc > 5)
		return usage(argv[0]);
	pct = strtod(argv[2], &end);
	if (*end || pct < 0 || pct > 100)
		return usage(argv[0]);
	if (argc > 3) {
		if (!strcmp(argv[3], "contig"))
			scatter = 0;
		else if (strcmp(argv[3], "scatter"))
			return usage(argv[0]);
	}
	if (argc > 4) {
		chunk = strtoull(argv[4], &end, 0);
		if (*end || !chunk || chunk % 4096)
			return usage(argv[0]);
	}

	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	len = st.st_size;
	if (!len) {
		printf("0.0 0/0\n");
		return 0;
	}
	if (!scatter)
		chunk = 4096;
	nchunks = (len + chunk - 1) / chunk;
	want = (size_t)(pct / 100 * nchunks + 0.5);
	buf = malloc(chunk);
	pick = calloc(nchunks, 1);
	if (!buf || !pick) {
		perror("malloc");
		return 1;
	}

	/* Contiguous: the first @want; scattered: a partial Fisher-Yates. */
	if (!scatter) {
		memset(pick, 1, want);
	} else {
		size_t *idx = malloc(nchunks * sizeof(*idx));

		if (!idx) {
			perror("malloc");
			return 1;
		}
		for (i = 0; i < nchunks; i++)
			idx[i] = i;
		for (i = 0; i < want; i++) {
			size_t j = i + next() % (nchunks - i), t = idx[i];

			idx[i] = idx[j];
			idx[j] = t;
			pick[idx[i]] = 1;
		}
		free(idx);
	}

	/* Dirty pages cannot be dropped: write them back first. */
	fsync(fd);
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) ||
	    posix_fadvise(fd, 0, 0, scatter ? POSIX_FADV_RANDOM :
					       POSIX_FADV_NORMAL)) {
		perror("posix_fadvise");
		return 1;
	}
	if (!scatter && want) {
		const size_t big = 1 << 20;
		off_t stop = (off_t)want * chunk, pos;
		char *seq = malloc(big);

		if (!seq) {
			perror("malloc");
			return 1;
		}
		for (pos = 0; pos < stop; pos += big) {
			size_t n = big;

			if (stop - pos < (off_t)big)
				n = stop - pos;

			if (pread(fd, seq, n, pos) < 0) {
				perror("pread");
				return 1;
			}
		}
		free(seq);
		if ((size_t)stop < len &&
		    posix_fadvise(fd, stop, 0, POSIX_FADV_DONTNEED)) {
			perror("posix_fadvise");
			return 1;
		}
	} else {
		for (i = 0; i < nchunks; i++) {
			if (!pick[i])
				continue;
			if (pread(fd, buf, chunk, (off_t)i * chunk) < 0) {
				perror("pread");
				return 1;
			}
		}
	}
	pct = resident(fd, len, &res, &pages);
	printf("%.1f %zu/%zu\n", pct, res, pages);
	return 0;
}
