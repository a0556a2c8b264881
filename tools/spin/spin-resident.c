// SPDX-License-Identifier: GPL-2.0
/*
 * spin-resident: how much of a file is in the page cache.
 *
 * Usage: spin-resident FILE
 *
 * Maps FILE, asks mincore(2) which of its pages are resident, and prints
 * the percentage with one decimal, then the counts: "97.3 255068/262144".
 * Mapping the file does not fault anything in.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
	size_t len, pages, i, resident = 0;
	long psz = sysconf(_SC_PAGESIZE);
	unsigned char *vec;
	struct stat st;
	void *map;
	int fd;

	if (argc != 2 || (argv[1][0] == '-' && argv[1][1] == 'h')) {
		fprintf(stderr, "usage: %s FILE\n"
			"prints the percentage of FILE in the page cache\n",
			argv[0]);
		return argc == 2 ? 0 : 2;
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
	pages = (len + psz - 1) / psz;
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	vec = malloc(pages);
	if (map == MAP_FAILED || !vec || mincore(map, len, vec)) {
		perror("mincore");
		return 1;
	}
	for (i = 0; i < pages; i++)
		resident += vec[i] & 1;
	printf("%.1f %zu/%zu\n", 100.0 * resident / pages, resident, pages);
	return 0;
}
