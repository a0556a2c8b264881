// SPDX-License-Identifier: GPL-2.0
/*
 * spin-probe: one read of a file into a provider's device memory, for
 * "spin-stat check", which traces what the P2P router made of it.
 *
 * Usage: spin-probe FILE PROVIDER-DIR [BYTES]
 *
 * Reads BYTES (default 1 MiB, at most the file's size) of FILE from
 * offset 0 with one pread() into device memory mapped through
 * PROVIDER-DIR/p2pmem/allocate (whole pages of it), and checks
 * the bytes against a read of the same range into ordinary memory.
 * Prints "read N of M bytes, match" (or "mismatch at N").
 *
 * With SPIN_PROBE_MARKER set to a tracefs trace_marker file, writes
 * "spin-probe: device read done" there after the first read, so that a
 * tracer can tell its events from those of the read into RAM.
 *
 * Exit status: 0 the read returned the file's bytes, 1 it failed,
 * 2 usage error, 3 the device memory could not be mapped (the message
 * says why), 4 it returned other bytes than the read into RAM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define DEFAULT_LEN	(1UL << 20)

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	size_t len = DEFAULT_LEN, map, i;
	unsigned char *dev, *ram;
	const char *marker;
	struct stat st;
	ssize_t n, r;
	long pg;
	int fd, pfd;

	if (argc < 3 || argc > 4 || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "--help")) {
		fprintf(stderr, "Usage: %s FILE PROVIDER-DIR [BYTES]\n",
			argv[0]);
		return 2;
	}
	if (argc == 4) {
		char *end;

		len = strtoul(argv[3], &end, 0);
		if (*end || !len) {
			fprintf(stderr, "spin-probe: bad length '%s'\n",
				argv[3]);
			return 2;
		}
	}

	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "spin-probe: %s: %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	if (S_ISREG(st.st_mode)) {
		if (!st.st_size) {
			fprintf(stderr, "spin-probe: %s is empty\n", argv[1]);
			return 1;
		}
		if ((size_t)st.st_size < len)
			len = st.st_size;
	}
	pg = sysconf(_SC_PAGESIZE);
	map = (len + pg - 1) / pg * pg;

	snprintf(path, sizeof(path), "%s/p2pmem/allocate", argv[2]);
	pfd = open(path, O_RDWR);
	if (pfd < 0) {
		fprintf(stderr, "spin-probe: %s: %s\n", path, strerror(errno));
		return 3;
	}
	dev = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
	if (dev == MAP_FAILED) {
		fprintf(stderr, "spin-probe: mapping %zu bytes of %s: %s\n",
			map, path, strerror(errno));
		return 3;
	}
	ram = malloc(len);
	if (!ram) {
		perror("spin-probe: malloc");
		return 1;
	}
	memset(dev, 0xa5, len);
	memset(ram, 0x5a, len);

	/* The read the router is asked about comes first. */
	n = pread(fd, dev, len, 0);
	if (n < 0) {
		fprintf(stderr, "spin-probe: pread into device memory: %s\n",
			strerror(errno));
		return 1;
	}
	marker = getenv("SPIN_PROBE_MARKER");
	if (marker) {
		static const char done[] = "spin-probe: device read done\n";
		int mfd = open(marker, O_WRONLY);

		if (mfd < 0 || write(mfd, done, sizeof(done) - 1) < 0) {
			fprintf(stderr, "spin-probe: %s: %s\n", marker,
				strerror(errno));
			return 1;
		}
		close(mfd);
	}
	r = pread(fd, ram, len, 0);
	if (r != n) {
		fprintf(stderr, "spin-probe: read %zd bytes into device memory, %zd into RAM\n",
			n, r);
		return 1;
	}
	for (i = 0; i < (size_t)n; i++)
		if (dev[i] != ram[i])
			break;
	if (i < (size_t)n) {
		printf("read %zd of %zu bytes, mismatch at %zu\n", n, len, i);
		return 4;
	}
	printf("read %zd of %zu bytes, match\n", n, len);
	return 0;
}
