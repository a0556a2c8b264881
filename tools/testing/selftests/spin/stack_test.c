// SPDX-License-Identifier: GPL-2.0
/*
 * P2PDMA through stacked block devices: md raid0, raid1, raid10, raid5
 * and linear, dm-linear and dm-stripe, XFS on md raid0, the NVMe
 * multipath head, and arrays with a member that cannot take P2PDMA pages.
 *
 * A stack advertises queue/pci_p2pdma only if it passes data through
 * untouched and all members do; O_DIRECT into device memory then
 * returns the right bytes, and otherwise fails with EREMOTEIO before any
 * member sees a P2PDMA page.  Every read is checked against a reference
 * read into RAM.
 */
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>

#include "spin_util.h"
#include "../kselftest_harness.h"

#define DATA_SIZE	(16 * MiB + 3 * 4 * KiB + 100)
#define MAP_LEN		(16 * MiB)
#define MD		"/dev/md0"
#define DM_NAME		"spin-stack"
#define DM		"/dev/mapper/" DM_NAME
#define LOOP_FILE	"/tmp/spin-loop.img"
#define MNT		"/mnt/spin-stack"

enum stack_kind { MD_ARRAY, DM_TABLE };

FIXTURE(stack) {
	char dev[64];		/* the stacked device */
	char path[PATH_MAX];	/* what is read: the device or a file on it */
	char nvme[3][NAME_MAX + 1];
	char loop[32];
	uint64_t seed;
	bool mounted;
};

FIXTURE_VARIANT(stack) {
	enum stack_kind kind;
	const char *level;	/* md level, or dm target */
	int members;		/* rig drives used */
	bool loop_member;	/* add a loop device: cannot take P2PDMA pages */
	const char *fs;		/* a file system on top, or NULL */
	bool p2p;		/* expected queue/pci_p2pdma */
	bool p2p_write;		/* O_DIRECT writes from device memory work */
	bool mirrored;		/* raid1/raid10: survives a failed member */
};

FIXTURE_VARIANT_ADD(stack, md_raid0) {
	.kind = MD_ARRAY, .level = "0", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, md_raid0_3) {
	.kind = MD_ARRAY, .level = "0", .members = 3, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, md_linear) {
	.kind = MD_ARRAY, .level = "linear", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, md_raid1) {
	.kind = MD_ARRAY, .level = "1", .members = 2, .p2p = true,
	.mirrored = true };
FIXTURE_VARIANT_ADD(stack, md_raid10) {
	.kind = MD_ARRAY, .level = "10", .members = 3, .p2p = true,
	.mirrored = true };
FIXTURE_VARIANT_ADD(stack, md_raid5) {
	.kind = MD_ARRAY, .level = "5", .members = 3, .p2p = false };
FIXTURE_VARIANT_ADD(stack, md_raid0_loop) {
	.kind = MD_ARRAY, .level = "0", .members = 1, .loop_member = true,
	.p2p = false };
FIXTURE_VARIANT_ADD(stack, dm_linear) {
	.kind = DM_TABLE, .level = "linear", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, dm_stripe) {
	.kind = DM_TABLE, .level = "striped", .members = 2, .p2p = true,
	.p2p_write = true };
FIXTURE_VARIANT_ADD(stack, dm_linear_loop) {
	.kind = DM_TABLE, .level = "linear", .members = 1, .loop_member = true,
	.p2p = false };
FIXTURE_VARIANT_ADD(stack, xfs_on_md_raid0) {
	.kind = MD_ARRAY, .level = "0", .members = 2, .fs = "xfs", .p2p = true,
	.p2p_write = true };

/* Attach @file to a free loop device; its path goes to @dev. */
static int loop_attach(const char *file, char *dev, size_t len)
{
	int ctl, fd, lfd, n, ret = -1;

	ctl = open("/dev/loop-control", O_RDWR);
	if (ctl < 0)
		return -1;
	n = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	if (n < 0)
		return -1;
	snprintf(dev, len, "/dev/loop%d", n);
	fd = open(file, O_RDWR);
	lfd = open(dev, O_RDWR);
	if (fd >= 0 && lfd >= 0)
		ret = ioctl(lfd, LOOP_SET_FD, fd);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	return ret;
}

static void loop_detach(const char *dev)
{
	int fd = open(dev, O_RDWR);

	if (fd >= 0) {
		ioctl(fd, LOOP_CLR_FD, 0);
		close(fd);
	}
}

static void teardown_stacks(const char *loop)
{
	umount2(MNT, MNT_DETACH);
	run_cmd("mdadm --stop " MD " 2>/dev/null");
	run_cmd("dmsetup remove --noudevsync " DM_NAME " 2>/dev/null");
	if (loop && loop[0])
		loop_detach(loop);
	unlink(LOOP_FILE);
}

FIXTURE_SETUP(stack)
{
	char cmd[1024], members[512] = "";
	int i, n, fd;

	setenv("DM_DISABLE_UDEV", "1", 1);
	teardown_stacks(NULL);
	for (i = 0; i < variant->members; i++)
		if (nvme_rig_ns(i, self->nvme[i], sizeof(self->nvme[i])))
			SKIP(return, "rig NVMe drive %d not found", i);
	self->seed = getpid();

	if (variant->loop_member) {
		fd = open(LOOP_FILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, ftruncate(fd, 1024 * MiB));
		close(fd);
		ASSERT_EQ(0, loop_attach(LOOP_FILE, self->loop,
					 sizeof(self->loop)));
	}

	for (i = 0; i < variant->members; i++) {
		size_t l = strlen(members);

		snprintf(members + l, sizeof(members) - l, " /dev/%s",
			 self->nvme[i]);
	}
	if (variant->loop_member) {
		size_t l = strlen(members);

		snprintf(members + l, sizeof(members) - l, " %s", self->loop);
	}
	n = variant->members + variant->loop_member;

	if (variant->kind == MD_ARRAY) {
		for (i = 0; i < variant->members; i++) {
			snprintf(cmd, sizeof(cmd),
				 "mdadm --zero-superblock /dev/%s 2>/dev/null",
				 self->nvme[i]);
			run_cmd(cmd);
		}
		snprintf(cmd, sizeof(cmd),
			 "mdadm --create " MD " --run --quiet --force --assume-clean --level=%s --raid-devices=%d%s",
			 variant->level, n, members);
		ASSERT_EQ(0, run_cmd(cmd));
		snprintf(self->dev, sizeof(self->dev), "%s", MD);
	} else if (!strcmp(variant->level, "striped")) {
		/* 64 KiB chunks over the members */
		snprintf(cmd, sizeof(cmd),
			 "dmsetup create --noudevsync " DM_NAME " --table '0 %lu striped %d 128 /dev/%s 0 /dev/%s 0'",
			 2 * 1024 * MiB / 512 * 1, n, self->nvme[0], self->nvme[1]);
		ASSERT_EQ(0, run_cmd(cmd));
		snprintf(self->dev, sizeof(self->dev), "%s", DM);
	} else {
		/* The first member holds 4 MiB, the second the rest. */
		const char *second = variant->loop_member ? self->loop : NULL;
		char second_dev[NAME_MAX + 8];

		if (!second) {
			snprintf(second_dev, sizeof(second_dev), "/dev/%s",
				 self->nvme[1]);
			second = second_dev;
		}
		snprintf(cmd, sizeof(cmd),
			 "printf '0 8192 linear /dev/%s 0\\n8192 1048576 linear %s 8192\\n' | dmsetup create --noudevsync " DM_NAME,
			 self->nvme[0], second);
		ASSERT_EQ(0, run_cmd(cmd));
		snprintf(self->dev, sizeof(self->dev), "%s", DM);
	}

	if (variant->fs) {
		ASSERT_EQ(0, mkfs_mount(variant->fs, self->dev + 5, MNT));
		self->mounted = true;
		snprintf(self->path, sizeof(self->path), MNT "/data");
		fd = open(self->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	} else {
		snprintf(self->path, sizeof(self->path), "%s", self->dev);
		fd = open(self->path, O_RDWR);
	}
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, DATA_SIZE, self->seed));
	close(fd);
	ASSERT_EQ(0, drop_caches());
	TH_LOG("%s over%s", self->path, members);
}

FIXTURE_TEARDOWN(stack)
{
	teardown_stacks(self->loop);
}

/* queue/pci_p2pdma of the top device, or -1 */
static int queue_p2p(const char *dev)
{
	char path[128];
	struct stat st;

	if (stat(dev, &st) || !S_ISBLK(st.st_mode))
		return -1;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/pci_p2pdma",
		 major(st.st_rdev), minor(st.st_rdev));
	return sysfs_read_ll(path);
}

TEST_F_TIMEOUT(stack, feature_flag, 120)
{
	char dev[64];
	int i;

	for (i = 0; i < variant->members; i++) {
		snprintf(dev, sizeof(dev), "/dev/%s", self->nvme[i]);
		ASSERT_EQ(1, queue_p2p(dev));
	}
	if (variant->loop_member)
		ASSERT_EQ(0, queue_p2p(self->loop));
	ASSERT_EQ(variant->p2p, queue_p2p(self->dev));
}

static int ref_check(struct __test_metadata *_metadata, const char *path,
		     uint64_t seed, void *buf, size_t len, off_t off)
{
	int fd = open(path, O_RDONLY);
	void *want = malloc(len);
	ssize_t n;

	EXPECT_LE(0, fd);
	n = pread(fd, buf, len, off);
	close(fd);
	EXPECT_EQ((ssize_t)len, n);
	if (want) {
		pattern_fill(want, len, off, seed);
		EXPECT_EQ(-1, first_diff(buf, want, len));
	}
	free(want);
	return n == (ssize_t)len ? 0 : -1;
}

/*
 * O_DIRECT into device memory behind the members' switch: the right
 * bytes when the stack advertises P2PDMA, EREMOTEIO (and no member I/O
 * with P2PDMA pages) when it does not.
 */
TEST_F_TIMEOUT(stack, odirect_read, 180)
{
	static const struct { size_t len; off_t off; } cases[] = {
		{ 4 * KiB, 0 },
		{ 1 * MiB, 512 * KiB - 4 * KiB },	/* across a chunk */
		{ 4 * MiB, 2 * MiB },			/* across dm-linear's seam */
		{ 8 * MiB, 4 * KiB },
	};
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	unsigned int i;
	int fd;

	if (p2pmem_find_for_ns(self->nvme[0], true, provider,
			       sizeof(provider)))
		SKIP(return, "no provider reachable from %s", self->nvme[0]);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(MAP_LEN);
	ASSERT_NE(NULL, ref);
	fd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len = cases[i].len;
		ssize_t n;

		ASSERT_EQ(0, ref_check(_metadata, self->path, self->seed, ref,
				       len, cases[i].off));
		memset(dev, 0xa5, len);
		n = pread(fd, dev, len, cases[i].off);
		TH_LOG("%zu bytes at %lld: %zd (%s)", len,
		       (long long)cases[i].off, n, n < 0 ? strerror(errno) : "");
		if (variant->p2p) {
			ASSERT_EQ((ssize_t)len, n);
			ASSERT_EQ(-1, first_diff(dev, ref, len));
		} else {
			ASSERT_EQ(-1, n);
			ASSERT_EQ(EREMOTEIO, errno);
		}
	}
	close(fd);
	munmap(dev, MAP_LEN);
	free(ref);
}

/*
 * A provider no member can reach: EREMOTEIO, never wrong data, and an md
 * array stays healthy (a refused DMA mapping is not a media error).
 */
TEST_F_TIMEOUT(stack, unreachable_odirect, 180)
{
	char provider[SYSFS_LEN], path[PATH_MAX];
	unsigned char *dev, *ref;
	size_t len = 1 * MiB;
	ssize_t n;
	int fd;

	if (p2pmem_find_for_ns(self->nvme[0], false, provider,
			       sizeof(provider)))
		SKIP(return, "no provider that %s cannot reach", self->nvme[0]);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, ref_check(_metadata, self->path, self->seed, ref, len, 0));

	fd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memset(dev, 0xa5, len);
	n = pread(fd, dev, len, 0);
	if (n < 0) {
		ASSERT_EQ(EREMOTEIO, errno);
	} else {
		ASSERT_EQ((ssize_t)len, n);
		ASSERT_EQ(-1, first_diff(dev, ref, len));
	}
	close(fd);

	if (variant->kind == MD_ARRAY) {
		snprintf(path, sizeof(path), "/sys/block/md0/md/degraded");
		if (!access(path, F_OK))
			ASSERT_EQ(0, sysfs_read_ll(path));
	}
	munmap(dev, len);
	free(ref);
}

/* A plain pread into device memory returns the right bytes on any stack. */
TEST_F_TIMEOUT(stack, buffered_read, 180)
{
	char provider[SYSFS_LEN];
	unsigned char *dev, *ref;
	size_t len = 3 * MiB + 17;
	off_t off = 12345;
	ssize_t n;
	int fd;

	if (p2pmem_find_for_ns(self->nvme[0], true, provider,
			       sizeof(provider)))
		SKIP(return, "no provider reachable from %s", self->nvme[0]);
	dev = p2pmem_map(provider, MAP_LEN);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, ref_check(_metadata, self->path, self->seed, ref, len, off));
	ASSERT_EQ(0, drop_caches());

	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	memset(dev, 0xa5, len);
	n = pread(fd, dev, len, off);
	ASSERT_EQ((ssize_t)len, n);
	ASSERT_EQ(-1, first_diff(dev, ref, len));
	close(fd);
	munmap(dev, MAP_LEN);
	free(ref);
}

/*
 * O_DIRECT writes from device memory: the data lands where a buffered
 * read finds it.  raid1 and raid10 refuse them with EREMOTEIO (mirrors
 * could diverge), as do stacks without P2PDMA, and nothing changes.
 */
TEST_F_TIMEOUT(stack, odirect_write, 180)
{
	char provider[SYSFS_LEN];
	size_t len = 2 * MiB;
	off_t off = 1 * MiB + 8 * KiB;
	unsigned char *dev, *ref;
	ssize_t n;
	int fd;

	if (p2pmem_find_for_ns(self->nvme[0], true, provider,
			       sizeof(provider)))
		SKIP(return, "no provider reachable from %s", self->nvme[0]);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);

	pattern_fill(dev, len, off, self->seed + 1);
	fd = open(self->path, O_RDWR | O_DIRECT);
	ASSERT_LE(0, fd);
	n = pwrite(fd, dev, len, off);
	TH_LOG("pwrite: %zd (%s)", n, n < 0 ? strerror(errno) : "");
	if (variant->p2p_write) {
		ASSERT_EQ((ssize_t)len, n);
	} else {
		ASSERT_EQ(-1, n);
		ASSERT_EQ(EREMOTEIO, errno);
	}
	ASSERT_EQ(0, fsync(fd));
	close(fd);
	ASSERT_EQ(0, drop_caches());

	/* What is there now: the new bytes, or the old ones untouched. */
	fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)len, pread(fd, ref, len, off));
	close(fd);
	if (variant->p2p_write) {
		ASSERT_EQ(-1, first_diff(ref, dev, len));
	} else {
		pattern_fill(dev, len, off, self->seed);
		ASSERT_EQ(-1, first_diff(ref, dev, len));
	}
	if (variant->kind == MD_ARRAY && !access("/sys/block/md0/md/degraded", F_OK))
		ASSERT_EQ(0, sysfs_read_ll("/sys/block/md0/md/degraded"));
	munmap(dev, len);
	free(ref);
}

/*
 * A mirrored array keeps serving P2P reads, with the right bytes, while a
 * member fails, while degraded, and while the member is rebuilt.
 */
TEST_F_TIMEOUT(stack, member_failure, 300)
{
	char provider[SYSFS_LEN], cmd[1024];
	size_t len = 1 * MiB;
	unsigned char *dev, *ref;
	int fd, i, rebuilt = 0;

	if (!variant->mirrored)
		SKIP(return, "not a mirrored array");
	if (p2pmem_find_for_ns(self->nvme[0], true, provider,
			       sizeof(provider)))
		SKIP(return, "no provider reachable from %s", self->nvme[0]);
	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	fd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);

	for (i = 0; i < 60; i++) {
		off_t off = (i * 7 % 15) * MiB;

		if (i == 5) {
			snprintf(cmd, sizeof(cmd), "mdadm --quiet " MD " --fail /dev/%s",
				 self->nvme[1]);
			ASSERT_EQ(0, run_cmd(cmd));
		}
		if (i == 20) {
			ASSERT_EQ(1, sysfs_read_ll("/sys/block/md0/md/degraded"));
			snprintf(cmd, sizeof(cmd),
				 "mdadm --quiet " MD " --remove /dev/%s && mdadm --zero-superblock /dev/%s && mdadm --quiet " MD " --add /dev/%s",
				 self->nvme[1], self->nvme[1], self->nvme[1]);
			ASSERT_EQ(0, run_cmd(cmd));
		}
		pattern_fill(ref, len, off, self->seed);
		memset(dev, 0xa5, len);
		ASSERT_EQ((ssize_t)len, pread(fd, dev, len, off));
		ASSERT_EQ(-1, first_diff(dev, ref, len));
		if (i > 20 && sysfs_read_ll("/sys/block/md0/md/degraded") == 0)
			rebuilt++;
	}
	TH_LOG("reads after the rebuild finished: %d", rebuilt);
	close(fd);
	munmap(dev, len);
	free(ref);
}

/*
 * A member that returns media errors (dm-dust over an NVMe drive, itself
 * P2P capable): a mirrored array retries on the other member and returns
 * the right bytes; any other stack returns EIO, never wrong data.
 */
TEST(dust_member_errors)
{
	char ns0[NAME_MAX + 1], ns1[NAME_MAX + 1];
	char provider[SYSFS_LEN], cmd[2048];
	size_t len = 256 * KiB;
	unsigned char *dev, *ref;
	uint64_t seed = getpid();
	long long data_off, bad;
	ssize_t n;
	int fd;

	setenv("DM_DISABLE_UDEV", "1", 1);
	teardown_stacks(NULL);
	if (nvme_rig_ns(0, ns0, sizeof(ns0)) || nvme_rig_ns(1, ns1, sizeof(ns1)))
		SKIP(return, "two rig NVMe drives needed");
	if (p2pmem_find_for_ns(ns0, true, provider,
			       sizeof(provider)))
		SKIP(return, "no provider reachable from %s", ns0);

	/* dust with 4 KiB blocks over the first drive, mirrored with the second */
	snprintf(cmd, sizeof(cmd),
		 "dmsetup create --noudevsync " DM_NAME " --table \"0 $(blockdev --getsz /dev/%s) dust /dev/%s 0 4096\" && mdadm --zero-superblock /dev/%s 2>/dev/null; mdadm --create " MD " --run --quiet --force --assume-clean --level=1 --raid-devices=2 " DM " --write-mostly /dev/%s",
		 ns0, ns0, ns1, ns1);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(DM));
	ASSERT_EQ(1, queue_p2p(MD));
	fd = open(MD, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 4 * MiB, seed));
	close(fd);
	ASSERT_EQ(0, drop_caches());

	/*
	 * Four bad 4 KiB blocks at 400 KiB into the array's data, which
	 * starts data_offset sectors into the dust device.
	 */
	data_off = sysfs_read_ll("/sys/block/md0/md/dev-dm-0/offset");
	ASSERT_LE(0, data_off);
	bad = (data_off * 512 + 400 * KiB) / (4 * KiB);
	snprintf(cmd, sizeof(cmd),
		 "for b in %lld %lld %lld %lld; do dmsetup message " DM_NAME " 0 addbadblock $b; done && dmsetup message " DM_NAME " 0 enable",
		 bad, bad + 1, bad + 2, bad + 3);
	ASSERT_EQ(0, run_cmd(cmd));

	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	pattern_fill(ref, len, 384 * KiB, seed);

	/* The healthy member is write-mostly: reads go to dust first. */
	fd = open(MD, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (int i = 0; i < 8; i++) {
		memset(dev, 0xa5, len);
		n = pread(fd, dev, len, 384 * KiB);
		ASSERT_EQ((ssize_t)len, n);
		ASSERT_EQ(-1, first_diff(dev, ref, len));
	}
	close(fd);
	/* md corrected the bad blocks from the other member */
	ASSERT_LT(0, sysfs_read_ll("/sys/block/md0/md/dev-dm-0/errors"));
	ASSERT_EQ(0, sysfs_read_ll("/sys/block/md0/md/degraded"));

	/* The dust device on its own: EIO for the bad range, never wrong bytes. */
	teardown_stacks(NULL);
	snprintf(cmd, sizeof(cmd),
		 "dmsetup create --noudevsync " DM_NAME " --table \"0 $(blockdev --getsz /dev/%s) dust /dev/%s 0 4096\" && for b in 100 101 102 103; do dmsetup message " DM_NAME " 0 addbadblock $b; done && dmsetup message " DM_NAME " 0 enable",
		 ns0, ns0);
	ASSERT_EQ(0, run_cmd(cmd));
	fd = open(DM, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memset(dev, 0xa5, len);
	n = pread(fd, dev, len, 384 * KiB);
	TH_LOG("dust alone: %zd (%s)", n, n < 0 ? strerror(errno) : "");
	if (n >= 0) {
		ASSERT_EQ(-1, first_diff(dev, ref, n));
	} else {
		ASSERT_EQ(EIO, errno);
	}
	close(fd);
	teardown_stacks(NULL);
	munmap(dev, len);
	free(ref);
}

/*
 * The flag follows the members: growing a linear array by a member that
 * cannot take P2PDMA pages clears it, and so does reloading a dm table
 * onto such a device; reloading back onto NVMe sets it again.
 */
TEST(flag_follows_members)
{
	char ns0[NAME_MAX + 1], ns1[NAME_MAX + 1], loop[32], cmd[2048];
	int fd;

	setenv("DM_DISABLE_UDEV", "1", 1);
	teardown_stacks(NULL);
	if (nvme_rig_ns(0, ns0, sizeof(ns0)) || nvme_rig_ns(1, ns1, sizeof(ns1)))
		SKIP(return, "two rig NVMe drives needed");
	fd = open(LOOP_FILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 256 * MiB));
	close(fd);
	ASSERT_EQ(0, loop_attach(LOOP_FILE, loop, sizeof(loop)));

	snprintf(cmd, sizeof(cmd),
		 "mdadm --zero-superblock /dev/%s /dev/%s 2>/dev/null; mdadm --create " MD " --run --quiet --force --level=linear --raid-devices=2 /dev/%s /dev/%s",
		 ns0, ns1, ns0, ns1);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(MD));
	snprintf(cmd, sizeof(cmd), "mdadm --grow " MD " --add %s", loop);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(0, queue_p2p(MD));
	run_cmd("mdadm --stop " MD);

	snprintf(cmd, sizeof(cmd),
		 "dmsetup create --noudevsync " DM_NAME " --table '0 8192 linear /dev/%s 0'",
		 ns0);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(DM));
	snprintf(cmd, sizeof(cmd),
		 "dmsetup reload " DM_NAME " --table '0 8192 linear %s 0' && dmsetup resume --noudevsync " DM_NAME,
		 loop);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(0, queue_p2p(DM));
	snprintf(cmd, sizeof(cmd),
		 "dmsetup reload " DM_NAME " --table '0 8192 linear /dev/%s 0' && dmsetup resume --noudevsync " DM_NAME,
		 ns1);
	ASSERT_EQ(0, run_cmd(cmd));
	ASSERT_EQ(1, queue_p2p(DM));
	/* dm-zero fills with the CPU: never */
	ASSERT_EQ(0, run_cmd("dmsetup reload " DM_NAME " --table '0 8192 zero' && dmsetup resume --noudevsync " DM_NAME));
	ASSERT_EQ(0, queue_p2p(DM));
	teardown_stacks(loop);
}

/* The native NVMe multipath head of the rig's shared namespace, or -ENOENT. */
static int nvme_mpath_head(char *ns, size_t len)
{
	struct dirent **names;
	int n, i, found = -ENOENT;

	n = scandir("/sys/block", &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		const char *d = names[i]->d_name;
		char path[PATH_MAX], serial[64];

		snprintf(path, sizeof(path), "/sys/block/%s/device/serial", d);
		if (found && !strncmp(d, "nvme", 4) && !strchr(d + 4, 'c') &&
		    !sysfs_read(path, serial, sizeof(serial)) &&
		    !strcmp(serial, "SPINMPATH")) {
			snprintf(ns, len, "%s", d);
			found = 0;
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return found;
}

/*
 * A namespace shared by two controllers, behind the native multipath
 * head: the head advertises P2PDMA because both paths do, and O_DIRECT
 * through it returns the right bytes.
 */
TEST(nvme_multipath)
{
	char head[NAME_MAX + 1], ns0[NAME_MAX + 1];
	char provider[SYSFS_LEN], path[NAME_MAX + 8];
	size_t len = 4 * MiB;
	unsigned char *dev, *ref;
	uint64_t seed = getpid();
	int fd;

	if (nvme_mpath_head(head, sizeof(head)))
		SKIP(return, "no multipathed rig namespace (serial SPINMPATH)");
	if (nvme_rig_ns(0, ns0, sizeof(ns0)))
		SKIP(return, "no rig NVMe drive");
	if (p2pmem_find_for_ns(ns0, true, provider,
			       sizeof(provider)))
		SKIP(return, "no provider reachable from %s", ns0);
	snprintf(path, sizeof(path), "/dev/%s", head);
	TH_LOG("multipath head %s", path);
	ASSERT_EQ(1, queue_p2p(path));

	fd = open(path, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_pattern(fd, 2 * len, seed));
	close(fd);
	ASSERT_EQ(0, drop_caches());

	dev = p2pmem_map(provider, len);
	ASSERT_NE(NULL, dev);
	ref = malloc(len);
	ASSERT_NE(NULL, ref);
	pattern_fill(ref, len, 64 * KiB, seed);
	fd = open(path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memset(dev, 0xa5, len);
	ASSERT_EQ((ssize_t)len, pread(fd, dev, len, 64 * KiB));
	ASSERT_EQ(-1, first_diff(dev, ref, len));
	close(fd);
	munmap(dev, len);
	free(ref);
}

TEST_HARNESS_MAIN
