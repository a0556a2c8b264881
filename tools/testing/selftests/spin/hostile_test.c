// SPDX-License-Identifier: GPL-2.0
/*
 * Odd and hostile input to reads into device memory: each gets the right
 * bytes or a clear error, never a crash or wrong bytes.
 *
 *  - zero-length reads, IOV_MAX tiny iovecs alternating device memory and
 *    RAM, IOV_MAX + 1 iovecs (EINVAL);
 *  - one iovec that runs from RAM into device memory, and iovecs in two
 *    providers, one of which the drive cannot reach;
 *  - a device-memory buffer with a hole unmapped in its middle (EFAULT,
 *    or a short read of right bytes);
 *  - files on tmpfs and vfat, which the router does not serve (a plain
 *    copy);
 *  - writes from device memory through a read-only descriptor, into a
 *    write-sealed memfd and into an immutable file (refused, nothing
 *    changed), and reads under a read lease (which they do not break);
 *  - unprivileged users: no p2pmem/allocate, no router knobs, no
 *    tracefs; the counters are plain numbers.
 *
 * Every byte read is compared with the pattern the file was written
 * with.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#include "spin_util.h"
#include "../kselftest_harness.h"

#define FILE_SIZE	(8 * MiB + 123)
#define MAP_LEN		(4 * MiB)
#define MNT		"/mnt/spin-hostile"
#define NOBODY		65534

FIXTURE(hostile) {
	char ns[NAME_MAX + 1];
	char near[SYSFS_LEN], far[SYSFS_LEN];
	unsigned char *ref, *ram, *dev;
	uint64_t seed;
	int fd;
	bool mounted;
};

FIXTURE_SETUP(hostile)
{
	char nvme_dev[SYSFS_LEN];
	int wfd;

	self->fd = -1;
	SPIN_NEED(!nvme_rig_ns(2, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, 2, 3);
	ASSERT_EQ(0, nvme_pci_dev(self->ns, nvme_dev, sizeof(nvme_dev)));
	SPIN_NEED(!p2pmem_find(nvme_dev, true, self->near, sizeof(self->near)),
		  "a provider that %s reaches: none published", self->ns);
	if (p2pmem_find(nvme_dev, false, self->far, sizeof(self->far)))
		self->far[0] = '\0';
	ASSERT_EQ(0, mkfs_mount("xfs", self->ns, MNT));
	self->mounted = true;
	self->seed = getpid() * 0x9e3779b97f4a7c15ULL;
	wfd = open(MNT "/data", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, write_pattern(wfd, FILE_SIZE, self->seed));
	close(wfd);
	ASSERT_EQ(0, drop_caches());
	self->fd = open(MNT "/data", O_RDONLY);
	ASSERT_LE(0, self->fd);
	self->ref = malloc(FILE_SIZE);
	self->ram = malloc(MAP_LEN);
	ASSERT_NE(NULL, self->ref);
	ASSERT_NE(NULL, self->ram);
	pattern_fill(self->ref, FILE_SIZE, 0, self->seed);
	self->dev = p2pmem_map(self->near, MAP_LEN);
	ASSERT_NE(NULL, self->dev);
}

FIXTURE_TEARDOWN(hostile)
{
	if (self->dev)
		munmap(self->dev, MAP_LEN);
	if (self->fd >= 0)
		close(self->fd);
	free(self->ref);
	free(self->ram);
	if (self->mounted)
		umount2(MNT, MNT_DETACH);
}

TEST_F(hostile, zero_length)
{
	struct iovec iov = { self->dev, 0 };

	memset(self->dev, POISON, 4096);
	EXPECT_EQ(0, pread(self->fd, self->dev, 0, 4096));
	EXPECT_EQ(0, preadv(self->fd, &iov, 1, 12345));
	EXPECT_EQ(0, pread(self->fd, self->dev, 4096, FILE_SIZE));
	EXPECT_EQ(0, pread(self->fd, self->dev, 4096, FILE_SIZE + 10 * MiB));
	EXPECT_EQ(self->dev[0], POISON);
	EXPECT_EQ(self->dev[4095], POISON);
}

/* IOV_MAX pieces of 1 to 7 bytes, alternating device memory and RAM. */
TEST_F(hostile, iov_max)
{
	struct iovec *iov = calloc(IOV_MAX + 1, sizeof(*iov));
	size_t total = 0, dev_off = 0, ram_off = 0, off = 4095;
	int i, round;

	ASSERT_NE(NULL, iov);
	for (i = 0; i < IOV_MAX + 1; i++) {
		size_t len = 1 + i % 7;

		if (i % 2) {
			iov[i] = (struct iovec){ self->ram + ram_off, len };
			ram_off += len + 3;
		} else {
			iov[i] = (struct iovec){ self->dev + dev_off, len };
			dev_off += len + 4093;	/* a new page each time */
		}
		if (i < IOV_MAX)
			total += len;
	}
	for (round = 0; round < 2; round++) {	/* cold, then cached */
		ssize_t ret;

		memset(self->dev, POISON, MAP_LEN);
		memset(self->ram, POISON, MAP_LEN);
		ret = preadv(self->fd, iov, IOV_MAX, off);
		ASSERT_EQ((ssize_t)total, ret);
		for (i = 0; i < IOV_MAX; i++) {
			ASSERT_EQ(0, memcmp(iov[i].iov_base, self->ref + off,
					    iov[i].iov_len))
				TH_LOG("round %d iovec %d differs", round, i);
			off += iov[i].iov_len;
		}
		off = 4095;
	}
	errno = 0;
	EXPECT_EQ(-1, preadv(self->fd, iov, IOV_MAX + 1, 0));
	EXPECT_EQ(EINVAL, errno);
	free(iov);
}

/* One iovec whose first half is RAM and second half device memory. */
TEST_F(hostile, iovec_straddles_ram_and_device)
{
	size_t half = 1 * MiB;
	unsigned char *p, *dev2;
	char path[PATH_MAX];
	int afd, round;

	p = mmap(NULL, 2 * half, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	snprintf(path, sizeof(path), "%s/p2pmem/allocate", self->near);
	afd = open(path, O_RDWR);
	ASSERT_LE(0, afd);
	dev2 = mmap(p + half, half, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_FIXED, afd, 0);
	close(afd);
	ASSERT_EQ(p + half, dev2);
	for (round = 0; round < 2; round++) {
		memset(p, POISON, 2 * half);
		ASSERT_EQ((ssize_t)(2 * half - 1),
			  pread(self->fd, p + 1, 2 * half - 1, 8191));
		EXPECT_EQ(-1, first_diff(p + 1, self->ref + 8191, 2 * half - 1));
		EXPECT_EQ(POISON, p[0]);
	}
	munmap(p, 2 * half);
}

/* Device memory the drive can reach and device memory it cannot. */
TEST_F(hostile, two_providers)
{
	struct iovec iov[4];
	unsigned char *far;
	size_t len = 256 * KiB;
	int i, round;

	SPIN_NEED(self->far[0],
		  "a provider that %s cannot reach: none published", self->ns);
	far = p2pmem_map(self->far, 2 * len);
	ASSERT_NE(NULL, far);
	iov[0] = (struct iovec){ self->dev, len };
	iov[1] = (struct iovec){ far, len };
	iov[2] = (struct iovec){ self->dev + len, len };
	iov[3] = (struct iovec){ far + len, len - 1 };
	for (round = 0; round < 2; round++) {
		off_t off = 4096 * 3;

		ASSERT_EQ(0, drop_caches());
		memset(self->dev, POISON, 2 * len);
		memset(far, POISON, 2 * len);
		ASSERT_EQ((ssize_t)(4 * len - 1), preadv(self->fd, iov, 4, off));
		for (i = 0; i < 4; i++) {
			EXPECT_EQ(-1, first_diff(iov[i].iov_base,
						 self->ref + off,
						 iov[i].iov_len))
				TH_LOG("round %d iovec %d", round, i);
			off += iov[i].iov_len;
		}
	}
	munmap(far, 2 * len);
}

/*
 * A hole in the middle of the destination: the read stops at the hole
 * (short) or fails with EFAULT; what it did deliver is right.
 */
TEST_F(hostile, partly_unmapped)
{
	size_t len = 2 * MiB, hole = 1 * MiB + 64 * KiB;
	unsigned char *p = p2pmem_map(self->near, len);
	int round;

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, munmap(p + hole, 64 * KiB));
	for (round = 0; round < 2; round++) {
		ssize_t ret;

		if (!round)
			ASSERT_EQ(0, drop_caches());
		memset(p, POISON, hole);
		errno = 0;
		ret = pread(self->fd, p, len, 0);
		if (ret < 0) {
			EXPECT_EQ(EFAULT, errno);
		} else {
			EXPECT_GE(hole, (size_t)ret);
			EXPECT_EQ(-1, first_diff(p, self->ref, ret));
		}
		TH_LOG("%s: %zd (%s)", round ? "cached" : "cold", ret,
		       ret < 0 ? strerror(errno) : "bytes");
	}
	munmap(p, hole);
	munmap(p + hole + 64 * KiB, len - hole - 64 * KiB);
}

/* File systems the router does not serve: a plain copy, right bytes. */
static void other_fs(struct __test_metadata *_metadata,
		     FIXTURE_DATA(hostile) *self, const char *what,
		     const char *mkfs, const char *fstype, const char *opts)
{
	const char *mnt = "/mnt/spin-hostile-other";
	char cmd[512];
	int fd;

	umount2(mnt, MNT_DETACH);
	mkdir(mnt, 0755);
	if (mkfs) {
		/* A file system image in a file on the XFS. */
		xsnprintf(cmd, sizeof(cmd),
			  "truncate -s 64M " MNT "/img && %s " MNT
			  "/img >/dev/null && mount -o loop " MNT "/img %s", mkfs, mnt);
		ASSERT_EQ(0, run_cmd(cmd))
			TH_LOG("cannot make and mount %s", what);
	} else {
		ASSERT_EQ(0, mount(fstype, mnt, fstype, 0, opts));
	}
	snprintf(cmd, sizeof(cmd), "%s/f", mnt);
	fd = open(cmd, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 3 * MiB + 7, self->seed));
	memset(self->dev, POISON, 3 * MiB + 2);
	ASSERT_EQ((ssize_t)(3 * MiB + 2), pread(fd, self->dev, 3 * MiB + 10, 5));
	EXPECT_EQ(-1, first_diff(self->dev, self->ref + 5, 3 * MiB + 2));
	EXPECT_EQ(POISON, self->dev[3 * MiB + 2]);
	close(fd);
	umount2(mnt, MNT_DETACH);
}

TEST_F(hostile, tmpfs)
{
	other_fs(_metadata, self, "tmpfs", NULL, "tmpfs", "size=16m");
}

TEST_F(hostile, vfat)
{
	ASSERT_EQ(0, run_cmd("command -v mkfs.vfat >/dev/null"))
		TH_LOG("no mkfs.vfat in the initramfs");
	other_fs(_metadata, self, "vfat", "mkfs.vfat", "vfat", NULL);
}

/*
 * Writes from device memory obey the same checks as any write: a
 * read-only descriptor, a write-sealed memfd and an immutable file are
 * refused and keep their bytes.
 */
TEST_F(hostile, write_permissions)
{
	const size_t len = 1 * MiB + 5;
	unsigned char *back = malloc(len);
	int fd, flags = FS_IMMUTABLE_FL, zero = 0;

	ASSERT_NE(NULL, back);
	memset(self->dev, 0x3c, len);

	/* self->fd is O_RDONLY. */
	errno = 0;
	EXPECT_EQ(-1, pwrite(self->fd, self->dev, len, 4096));
	EXPECT_EQ(EBADF, errno);

	fd = memfd_create("spin-sealed", MFD_ALLOW_SEALING);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 2 * MiB, self->seed));
	ASSERT_EQ(0, fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
	errno = 0;
	EXPECT_EQ(-1, pwrite(fd, self->dev, len, 4096));
	EXPECT_EQ(EPERM, errno);
	ASSERT_EQ((ssize_t)len, pread(fd, back, len, 4096));
	EXPECT_EQ(-1, first_diff(back, self->ref + 4096, len));
	close(fd);

	fd = open(MNT "/immutable", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 2 * MiB, self->seed));
	close(fd);
	fd = open(MNT "/immutable", O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioctl(fd, FS_IOC_SETFLAGS, &flags));
	close(fd);
	errno = 0;
	EXPECT_EQ(-1, open(MNT "/immutable", O_RDWR));
	EXPECT_EQ(EPERM, errno);
	fd = open(MNT "/immutable", O_RDONLY);
	ASSERT_LE(0, fd);
	errno = 0;
	EXPECT_EQ(-1, pwrite(fd, self->dev, len, 4096));
	EXPECT_EQ(EBADF, errno);
	ASSERT_EQ(0, drop_caches());
	memset(self->dev, POISON, len);
	ASSERT_EQ((ssize_t)len, pread(fd, self->dev, len, 4096));
	EXPECT_EQ(-1, first_diff(self->dev, self->ref + 4096, len));
	ASSERT_EQ(0, ioctl(fd, FS_IOC_SETFLAGS, &zero));
	close(fd);
	unlink(MNT "/immutable");
	free(back);
}

/*
 * A read lease: reads into device memory, routed or not, do not break
 * it, and a writer still has to break it before it may write.
 */
TEST_F(hostile, lease)
{
	const size_t len = 2 * MiB;
	int fd, wfd;

	/* The break is signalled to the holder, here: SIGIO by default. */
	signal(SIGIO, SIG_IGN);
	fd = open(MNT "/data", O_RDONLY);
	ASSERT_LE(0, fd);
	/* No other open for writing, so a read lease can be had. */
	ASSERT_EQ(0, fcntl(fd, F_SETLEASE, F_RDLCK));
	ASSERT_EQ(0, drop_caches());
	memset(self->dev, POISON, len);
	ASSERT_EQ((ssize_t)len, pread(fd, self->dev, len, 1 * MiB));
	EXPECT_EQ(-1, first_diff(self->dev, self->ref + 1 * MiB, len));
	EXPECT_EQ(F_RDLCK, fcntl(fd, F_GETLEASE));
	errno = 0;
	wfd = open(MNT "/data", O_WRONLY | O_NONBLOCK);
	EXPECT_EQ(-1, wfd);
	EXPECT_EQ(EWOULDBLOCK, errno);
	if (wfd >= 0)
		close(wfd);
	ASSERT_EQ(0, fcntl(fd, F_SETLEASE, F_UNLCK));
	close(fd);
	signal(SIGIO, SIG_DFL);
}

/*
 * An unprivileged user gets no device memory, cannot touch the router's
 * knobs and cannot read the tracepoints; the counters, which anyone may
 * read, are plain numbers with no addresses in them.
 */
TEST_F(hostile, unprivileged)
{
	char path[PATH_MAX], buf[128];
	struct dirent *de;
	struct stat st;
	DIR *d;
	pid_t pid;
	int status;

	snprintf(path, sizeof(path), "%s/p2pmem/allocate", self->near);
	ASSERT_EQ(0, stat(path, &st));
	/* Root's by default (0660 root:root): nothing for others. */
	EXPECT_EQ(0, st.st_mode & 0007) TH_LOG("p2pmem/allocate is %o",
					       st.st_mode & 0777);
	EXPECT_EQ(0, st.st_uid);
	EXPECT_EQ(0, st.st_gid);
	/* What the checks below need: else they would pass for nothing. */
	d = opendir(P2P_ROUTER "/stats");
	ASSERT_NE(NULL, d) TH_LOG("no P2P router in this kernel (%s)",
				  P2P_ROUTER);
	if (access(TRACEFS "/trace", F_OK)) {
		ASSERT_EQ(0, mount("tracefs", TRACEFS, "tracefs", 0, NULL))
			TH_LOG("no tracefs at " TRACEFS);
	}
	while ((de = readdir(d))) {
		char *end;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), P2P_ROUTER "/stats/%s",
			 de->d_name);
		ASSERT_EQ(0, sysfs_read(path, buf, sizeof(buf)));
		strtoull(buf, &end, 10);
		EXPECT_TRUE(buf[0] && !*end)
			TH_LOG("stats/%s reads '%s'", de->d_name, buf);
	}
	closedir(d);

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int bad = 0;

		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(100);
		snprintf(path, sizeof(path), "%s/p2pmem/allocate", self->near);
		bad |= open(path, O_RDWR) >= 0;
		bad |= (open(P2P_ROUTER "/enabled", O_WRONLY) >= 0) << 1;
		bad |= (open(P2P_ROUTER "/p2p_cost_ns", O_WRONLY) >= 0) << 2;
		bad |= (open(TRACEFS "/trace", O_RDONLY) >= 0) << 3;
		bad |= (open(MNT "/data", O_RDONLY) >= 0) << 4;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("nobody could open: mask %d (1 allocate, 2 enabled, 4 p2p_cost_ns, 8 trace, 16 a 0600 file)",
		       WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
