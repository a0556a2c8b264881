// SPDX-License-Identifier: GPL-2.0
/*
 * LVM volumes and device memory: the volumes users build with
 * LVM's own tools take O_DIRECT and routed (buffered) I/O from and into
 * device memory by DMA, as md arrays and plain dm tables do.
 *
 * For lvcreate --type striped, raid1, raid10 (dm-raid) and thin (dm-thin
 * over a thin-pool) on the rig's three drives: O_DIRECT writes and routed
 * writes from device memory, then reads back through RAM and into device
 * memory, each compared with a model.  The router's counters prove the
 * DMA.  For the mirrored ones, md's own check (lvchange --syncaction
 * check) must find no mismatch, and each raid1 leg (the *_rimage_N
 * sub-volume) read alone must hold the model.  A raid1 volume with a leg
 * on SPINFAR0, which cannot reach the memory, refuses O_DIRECT writes with
 * EREMOTEIO and leaves both legs as they were, and the router copies.
 * md raid1 over thin volumes whose pool metadata sits on SPINFAR0 is
 * asked only about the pool's data device, and takes both by DMA.  A
 * raid1 volume with a dead leg serves reads and writes of device memory
 * by DMA while degraded and while lvconvert --repair rebuilds the leg.
 */
#define _GNU_SOURCE
#include "spin_util.h"
#include "../kselftest_harness.h"

#include <sys/sysmacros.h>

#define VG		"spinvg"
#define LV		"lv"
#define LV_DEV		"/dev/mapper/" VG "-" LV
#define LV_LEN		(32 * MiB)
#define REGION		(16 * MiB)	/* what the cases write and check */
#define DEV_LEN		(8 * MiB)
#define LVM		"lvm"
#define FAR_SERIAL	"SPINFAR"
#define MD		"/dev/md0"
#define MD_SYS		"/sys/block/md0/md"

struct stats {
	long long p2p_write, cache_write, p2p_read, eremote, unreach;
};

static void stats_read(struct stats *s)
{
	s->p2p_write = router_stat("p2p_write_bytes");
	s->cache_write = router_stat("cache_write_bytes");
	s->p2p_read = router_stat("p2p_bytes");
	s->eremote = router_stat("fallback_eremoteio");
	s->unreach = router_stat("fallback_unreachable");
}

static void stats_delta(const struct stats *b, struct stats *d)
{
	struct stats a;

	stats_read(&a);
	d->p2p_write = a.p2p_write - b->p2p_write;
	d->cache_write = a.cache_write - b->cache_write;
	d->p2p_read = a.p2p_read - b->p2p_read;
	d->eremote = a.eremote - b->eremote;
	d->unreach = a.unreach - b->unreach;
}

/* /sys/block/<dm>/queue/pci_p2pdma of the device node @path, or -1. */
static long long dev_p2pdma(const char *path)
{
	char sys[PATH_MAX];
	struct stat st;
	long long v;

	if (stat(path, &st))
		return -1;
	xsnprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/queue/pci_p2pdma",
		  major(st.st_rdev), minor(st.st_rdev));
	return sysfs_read_ll(sys, &v) ? -1 : v;
}

FIXTURE(lvm) {
	char ns[3][NAME_MAX + 1];
	char far[NAME_MAX + 1];
	char pvs[256];		/* " /dev/<ns>" of the three rig drives */
	char provider[SYSFS_LEN];
	unsigned char *dev;	/* device memory, DEV_LEN */
	unsigned char *model;	/* REGION */
	unsigned char *buf;	/* REGION, for O_DIRECT */
	uint64_t seed;
	bool vg;
};

FIXTURE_VARIANT(lvm) {
	const char *type;	/* what lvcreate builds */
	const char *lvcreate;	/* its options, after -n and the size */
	bool mirrored;		/* md's check applies */
	bool legs;		/* each _rimage_N holds the whole volume */
};

FIXTURE_VARIANT_ADD(lvm, striped) {
	.type = "striped", .lvcreate = "--type striped -i 3 -I 64k" };
FIXTURE_VARIANT_ADD(lvm, raid1) {
	.type = "raid1", .lvcreate = "--type raid1 -m 1",
	.mirrored = true, .legs = true };
FIXTURE_VARIANT_ADD(lvm, raid10) {
	/* Two stripes of two mirrors want four drives: the rig has three. */
	.type = "raid10",
	.lvcreate = "--type raid10 -i 2 -m 1 -I 64k --alloc anywhere",
	.mirrored = true };
FIXTURE_VARIANT_ADD(lvm, thin) { .type = "thin" };

/*
 * Whatever an earlier case left: the volume group, its dm devices and the
 * /dev/VG links lvm made (without udev, nobody else removes them).
 */
static void vg_remove(void)
{
	md_stop_ours(MD);
	run_cmd(LVM " vgchange -an " VG " >/dev/null 2>&1");
	run_cmd(LVM " vgremove -ff -y " VG " >/dev/null 2>&1");
	dm_remove_spin();
	run_cmd("rm -rf /dev/" VG);
}

/*
 * What the cases need of the kernel and the guest, a failure if missing
 * here or anywhere: the P2P router and lvm.  In a fixture's setup, before
 * VG_NEED(), so that a machine without the drives still checks them.
 */
static void vg_tools(struct __test_metadata *_metadata)
{
	ASSERT_EQ(0, access(P2P_ROUTER, F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	ASSERT_EQ(0, run_cmd(LVM " version >/dev/null"))
		TH_LOG("no lvm in the guest");
}

/*
 * What vg_setup() builds on, into FIXTURE_DATA(lvm) *@self: the three rig
 * drives, SPINFAR0 and a provider the first drive reaches.  SPINFAR0 is
 * needed with @need_far, and in strict mode (the rig has it, and every
 * VG is made over it as before); elsewhere, without @need_far, it is ""
 * if there is none, and the VG has three PVs (no LV of those cases is on
 * it).  A macro, for SPIN_NEED(): in a fixture's setup, after
 * vg_tools(), before vg_setup().
 */
#define VG_NEED(self, need_far) do {					\
	int __i;							\
									\
	for (__i = 0; __i < 3; __i++)					\
		SPIN_NEED(!nvme_rig_ns(__i, (self)->ns[__i],		\
				       sizeof((self)->ns[__i])),	\
			  SPIN_RIG_DRIVE_FMT, __i, 3);			\
	if (nvme_serial_ns(FAR_SERIAL, (self)->far, sizeof((self)->far))) \
		(self)->far[0] = '\0';					\
	if ((need_far) || spin_strict())				\
		SPIN_NEED((self)->far[0], "the drive outside the switch " \
			  "(serial " FAR_SERIAL "0): not found");	\
	SPIN_NEED(!p2pmem_find_for_ns((self)->ns[0], true,		\
				      (self)->provider,			\
				      sizeof((self)->provider)),	\
		  "a provider that %s reaches: none published",		\
		  (self)->ns[0]);					\
} while (0)

/*
 * The volume group over the rig drives and SPINFAR0 (if VG_NEED() found
 * it), device memory.
 */
static void vg_setup(struct __test_metadata *_metadata,
		     FIXTURE_DATA(lvm) *self, const char *type)
{
	char all[sizeof(self->pvs) + NAME_MAX + 8];
	int i;

	/* vg_tools() checked the router and lvm. */
	self->pvs[0] = '\0';
	for (i = 0; i < 3; i++)
		xsnprintf(self->pvs + strlen(self->pvs),
			  sizeof(self->pvs) - strlen(self->pvs), " /dev/%s",
			  self->ns[i]);
	setenv("LVM_SUPPRESS_FD_WARNINGS", "1", 1);
	run_cmd("mkdir -p /run/lvm /run/lock/lvm");
	vg_remove();
	ASSERT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", "1"));
	self->seed = getpid() ^ 0x17a5ULL << 36;
	TH_LOG("%s, seed %llu", type, (unsigned long long)self->seed);

	xsnprintf(all, sizeof(all), "%s%s%s", self->pvs,
		  self->far[0] ? " /dev/" : "", self->far);
	/* md arrays of earlier tests leave superblocks lvm will not touch. */
	run_cmdf("mdadm --zero-superblock%s 2>/dev/null", all);
	ASSERT_EQ(0, run_cmdf(LVM " pvcreate -ff -y -q%s >/dev/null", all));
	ASSERT_EQ(0, run_cmdf(LVM " vgcreate -q -s 4m " VG "%s >/dev/null",
			      all));
	self->vg = true;

	self->dev = p2pmem_map(self->provider, DEV_LEN);
	ASSERT_NE(NULL, self->dev);
	self->model = malloc(REGION);
	ASSERT_NE(NULL, self->model);
	ASSERT_EQ(0, posix_memalign((void **)&self->buf, 4096, REGION));
}

static void vg_free(FIXTURE_DATA(lvm) *self)
{
	if (self->vg)
		vg_remove();
	if (self->dev)
		munmap(self->dev, DEV_LEN);
	free(self->model);
	free(self->buf);
}

FIXTURE_SETUP(lvm)
{
	router_learned_reset();	/* each case starts from defaults */
	vg_tools(_metadata);
	VG_NEED(self, false);
	vg_setup(_metadata, self, variant->type);
}

FIXTURE_TEARDOWN(lvm)
{
	vg_free(self);
}

/* lvs field @field of VG/@lv into @buf, trimmed; 0 or -1. */
static int lvs_field(const char *lv, const char *field, char *buf,
		     size_t len)
{
	char cmd[256];
	FILE *p;
	char *s, *e;

	xsnprintf(cmd, sizeof(cmd),
		  LVM " lvs --noheadings -o %s " VG "/%s 2>/dev/null", field,
		  lv);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (!fgets(buf, len, p)) {
		pclose(p);
		return -1;
	}
	pclose(p);
	for (s = buf; *s == ' '; s++)
		;
	for (e = s + strlen(s); e > s && (e[-1] == '\n' || e[-1] == ' '); e--)
		;
	*e = '\0';
	memmove(buf, s, e - s + 1);
	return 0;
}

/* Wait up to 300 s for a mirrored LV's sync action to be idle. */
static int lv_wait_idle(const char *lv)
{
	char action[64], pct[64];
	int i;

	for (i = 0; i < 3000; i++) {
		if (!lvs_field(lv, "raid_sync_action", action, sizeof(action)) &&
		    !lvs_field(lv, "sync_percent", pct, sizeof(pct)) &&
		    !strcmp(action, "idle") && !strncmp(pct, "100", 3))
			return 0;
		usleep(100000);
	}
	return -1;
}

/* Create VG/@lv of LV_LEN as the variant says, on @pvs (or anywhere). */
static int lv_create(FIXTURE_DATA(lvm) *self, const char *type,
		     const char *opts, const char *lv, const char *pvs)
{
	if (!strcmp(type, "thin")) {
		if (run_cmdf(LVM " lvcreate -q -y --type thin-pool -L 64m -n pool " VG
			     " %s >/dev/null", pvs))
			return -1;
		return run_cmdf(LVM " lvcreate -q -y --type thin -V %lum -n %s " VG
				"/pool >/dev/null", LV_LEN / MiB, lv);
	}
	return run_cmdf(LVM " lvcreate -q -y %s -L %lum -n %s " VG " %s >/dev/null",
			opts, LV_LEN / MiB, lv, pvs);
}

/* Fill the region from RAM, in the model too. */
static int lv_fill(FIXTURE_DATA(lvm) *self, const char *path)
{
	int fd = open(path, O_RDWR), ret;

	if (fd < 0)
		return -1;
	ret = write_pattern(fd, REGION, self->seed);
	close(fd);
	pattern_fill(self->model, REGION, 0, self->seed);
	return ret;
}

/*
 * Write @len of pattern(@seed) from device memory at @off: O_DIRECT if
 * @direct, else buffered for the router, then fsync().  The model
 * follows a write that succeeded.  Returns pwrite()'s result, errno kept.
 */
static ssize_t lv_write(FIXTURE_DATA(lvm) *self, const char *path,
			bool direct, off_t off, size_t len, uint64_t seed)
{
	int fd = open(path, O_RDWR | (direct ? O_DIRECT : 0)), err;
	unsigned char *src = self->dev + off % 4096;
	ssize_t n;

	if (fd < 0)
		return -1;
	pattern_fill(src, len, off, seed);
	n = pwrite(fd, src, len, off);
	err = errno;
	if (n == (ssize_t)len && fsync(fd))
		n = -1;
	close(fd);
	if (n > 0)
		memcpy(self->model + off, src, n);
	errno = err;
	return n;
}

/* The region read cold into RAM (O_DIRECT) against the model. */
static long lv_diff_ram(FIXTURE_DATA(lvm) *self, const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	ssize_t n;

	if (fd < 0)
		return -2;
	n = pread(fd, self->buf, REGION, 0);
	close(fd);
	return n == REGION ? first_diff(self->buf, self->model, REGION) : -3;
}

/*
 * The region read into device memory, 4 MiB at a time, O_DIRECT or
 * through the router after drop_caches(), against the model.
 */
static long lv_diff_dev(FIXTURE_DATA(lvm) *self, const char *path,
			bool direct)
{
	int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
	off_t off;
	long d;

	if (fd < 0)
		return -2;
	if (!direct)
		drop_caches();
	for (off = 0; off < (off_t)REGION; off += 4 * MiB) {
		memset(self->dev, POISON, 4 * MiB);
		if (pread(fd, self->dev, 4 * MiB, off) != (ssize_t)(4 * MiB)) {
			close(fd);
			return -3;
		}
		d = first_diff(self->dev, self->model + off, 4 * MiB);
		if (d != -1) {
			close(fd);
			return off + d;
		}
	}
	close(fd);
	return -1;
}

/*
 * Run the lvm command line @fmt quietly: LVM prints warnings (a PV gone
 * missing, one come back) even with -q, which the console would show as
 * the kernel's.  Its output, lowercased, goes to stderr if it fails.
 */
static int __printf(1, 2) lvm_quiet(const char *fmt, ...)
{
	va_list ap;
	char *cmd;
	int ret;

	va_start(ap, fmt);
	cmd = str_vprintf(fmt, ap);
	va_end(ap);
	if (!cmd)
		return -1;
	ret = run_cmdf(LVM " %s >/tmp/lvm.log 2>&1 || { tr A-Z a-z </tmp/lvm.log >&2; false; }",
		       cmd);
	free(cmd);
	return ret;
}

/* md's check on a mirrored LV: its mismatch count, or -1. */
static long long lv_mismatches(const char *lv)
{
	char buf[64];

	if (lvm_quiet("lvchange -q --syncaction check " VG "/%s", lv))
		return -1;
	usleep(500000);
	if (lv_wait_idle(lv) ||
	    lvs_field(lv, "raid_mismatch_count", buf, sizeof(buf)))
		return -1;
	return atoll(buf);
}

/* The writes every case makes: routed ones, unaligned, and O_DIRECT. */
static const struct { bool direct; off_t off; size_t len; } lv_writes[] = {
	{ false, 1 * MiB + 123, 3 * MiB + 1000 },
	{ true, 0, 1 * MiB },
	{ false, 6 * MiB, 2 * MiB },
	{ true, 9 * MiB + 512 * KiB - 4 * KiB, 1 * MiB + 8 * KiB },
	{ true, 12 * MiB, 4 * MiB },
	{ false, 10 * MiB + 4095, 1 * MiB + 2 },
};

/*
 * Every write of lv_writes to @path: the routed ones whole, the O_DIRECT
 * ones whole, or failing with @direct_errno if it is not 0.  The router's
 * counters over the writes in *@d; the bytes of the routed ones returned.
 */
static size_t lv_writes_all(struct __test_metadata *_metadata,
			    FIXTURE_DATA(lvm) *self, const char *path,
			    int direct_errno, struct stats *d)
{
	struct stats before;
	size_t routed = 0;
	unsigned int i;
	ssize_t n;

	stats_read(&before);
	for (i = 0; i < ARRAY_SIZE(lv_writes); i++) {
		n = lv_write(self, path, lv_writes[i].direct,
			     lv_writes[i].off, lv_writes[i].len,
			     self->seed + 1 + i);
		TH_LOG("%s write of %zu at %lld: %zd (%s)",
		       lv_writes[i].direct ? "O_DIRECT" : "routed",
		       lv_writes[i].len, (long long)lv_writes[i].off, n,
		       n < 0 ? strerror(errno) : "");
		if (lv_writes[i].direct && direct_errno) {
			ASSERT_EQ(-1, n);
			ASSERT_EQ(direct_errno, errno);
		} else {
			ASSERT_EQ((ssize_t)lv_writes[i].len, n);
		}
		if (!lv_writes[i].direct)
			routed += lv_writes[i].len;
	}
	stats_delta(&before, d);
	TH_LOG("p2p_write_bytes %lld, cache_write_bytes %lld, fallback_eremoteio %lld, fallback_unreachable %lld",
	       d->p2p_write, d->cache_write, d->eremote, d->unreach);
	return routed;
}

/*
 * Every write of lv_writes to @path, each whole: the routed ones' aligned
 * middles DMAed, nothing refused or found unreachable.
 */
static void lv_writes_dma(struct __test_metadata *_metadata,
			  FIXTURE_DATA(lvm) *self, const char *path)
{
	struct stats d;
	size_t routed;

	routed = lv_writes_all(_metadata, self, path, 0, &d);
	EXPECT_LT((long long)routed / 2, d.p2p_write);
	EXPECT_EQ(0, d.eremote);
	EXPECT_EQ(0, d.unreach);
}

/*
 * A thin volume's blocks never written read as zeros: dm-thin fills the
 * bio, device memory here, with the CPU, through pci_p2pdma_memset() (a
 * kprobe counts the calls).
 */
#define KP_ZERO		"spin_p2pdma_zero"

static void thin_zero_fill(struct __test_metadata *_metadata,
			   FIXTURE_DATA(lvm) *self)
{
	const size_t len = 4 * MiB;
	long long zeros;
	int fd;
	long d;

	kprobe_set(KP_ZERO, NULL);
	ASSERT_EQ(0, kprobe_set(KP_ZERO, "pci_p2pdma_memset"));
	zeros = kprobe_hits(KP_ZERO);
	ASSERT_LE(0, zeros);
	fd = open(LV_DEV, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memset(self->dev, 0x5a, len);
	ASSERT_EQ((ssize_t)len, pread(fd, self->dev, len, LV_LEN - len));
	close(fd);
	zeros = kprobe_hits(KP_ZERO) - zeros;
	kprobe_set(KP_ZERO, NULL);
	for (d = 0; d < (long)len && !self->dev[d]; d++)
		;
	TH_LOG("unprovisioned 4 MiB read: pci_p2pdma_memset() %lld times, first non-zero byte %ld",
	       zeros, d < (long)len ? d : -1);
	EXPECT_EQ((long)len, d);
	EXPECT_LT(0, zeros);
}

/*
 * O_DIRECT and routed writes from device memory, all DMAed; the volume
 * read back through RAM and into device memory (O_DIRECT and routed);
 * for mirrored volumes md's check and each raid1 leg alone.
 */
TEST_F_TIMEOUT(lvm, dma_rw, 600)
{
	struct stats before, d;
	char leg[PATH_MAX];
	unsigned int i;
	int fd;

	ASSERT_EQ(0, lv_create(self, variant->type, variant->lvcreate, LV,
			       self->pvs)) TH_LOG("lvcreate %s", variant->type);
	if (variant->mirrored) {
		ASSERT_EQ(0, lv_wait_idle(LV)) TH_LOG("no initial sync");
	}
	/* The premise: the volume passes P2PDMA. */
	ASSERT_EQ(1, dev_p2pdma(LV_DEV))
		TH_LOG("%s does not pass P2PDMA", LV_DEV);
	ASSERT_EQ(0, lv_fill(self, LV_DEV));

	lv_writes_dma(_metadata, self, LV_DEV);

	EXPECT_EQ(-1, lv_diff_ram(self, LV_DEV));
	EXPECT_EQ(-1, lv_diff_dev(self, LV_DEV, true));
	stats_read(&before);
	EXPECT_EQ(-1, lv_diff_dev(self, LV_DEV, false));
	stats_delta(&before, &d);
	TH_LOG("routed reads: p2p_bytes %lld", d.p2p_read);
	EXPECT_LT(0, d.p2p_read);

	if (!strcmp(variant->type, "thin"))
		thin_zero_fill(_metadata, self);
	if (variant->mirrored)
		EXPECT_EQ(0, lv_mismatches(LV));
	if (variant->legs) {
		for (i = 0; i < 2; i++) {
			xsnprintf(leg, sizeof(leg),
				  "/dev/mapper/" VG "-" LV "_rimage_%u", i);
			fd = open(leg, O_RDONLY);
			ASSERT_LE(0, fd) TH_LOG("%s: %s", leg, strerror(errno));
			close(fd);
			EXPECT_EQ(-1, lv_diff_ram(self, leg))
				TH_LOG("leg %u differs", i);
		}
	}
}

/*
 * A raid1 volume with one leg on SPINFAR0: O_DIRECT writes from device
 * memory fail with EREMOTEIO before either leg is written; routed ones
 * are copied by the router (fallback_unreachable), and both legs end up
 * equal to the model.
 */
FIXTURE(far) {
	FIXTURE_DATA(lvm) l;
};

FIXTURE_SETUP(far)
{
	router_learned_reset();	/* each case starts from defaults */
	vg_tools(_metadata);
	VG_NEED(&self->l, true);
	vg_setup(_metadata, &self->l, "raid1 with a far leg");
}

FIXTURE_TEARDOWN(far)
{
	vg_free(&self->l);
}

TEST_F_TIMEOUT(far, raid1_leg_refused, 600)
{
	FIXTURE_DATA(lvm) *l = &self->l;
	char pvs[128], leg[PATH_MAX];
	struct stats d;
	unsigned int i;

	xsnprintf(pvs, sizeof(pvs), "/dev/%s /dev/%s", l->ns[0], l->far);
	ASSERT_EQ(0, lv_create(l, "raid1", "--type raid1 -m 1", LV, pvs));
	ASSERT_EQ(0, lv_wait_idle(LV)) TH_LOG("no initial sync");
	ASSERT_EQ(1, dev_p2pdma(LV_DEV));
	ASSERT_EQ(0, lv_fill(l, LV_DEV));

	lv_writes_all(_metadata, l, LV_DEV, EREMOTEIO, &d);
	EXPECT_EQ(0, d.p2p_write);
	EXPECT_LT(0, d.unreach);

	EXPECT_EQ(-1, lv_diff_ram(l, LV_DEV));
	EXPECT_EQ(0, lv_mismatches(LV));
	for (i = 0; i < 2; i++) {
		xsnprintf(leg, sizeof(leg),
			  "/dev/mapper/" VG "-" LV "_rimage_%u", i);
		EXPECT_EQ(-1, lv_diff_ram(l, leg)) TH_LOG("leg %u", i);
	}
}

/* The kernel name (dm-N) of VG/@lv into @buf; 0 or -1. */
static int lv_kname(const char *lv, char *buf, size_t len)
{
	char cmd[256];
	FILE *p;
	int ret;

	xsnprintf(cmd, sizeof(cmd),
		  "dmsetup info -c --noheadings -o blkdevname " VG "-%s", lv);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	ret = fgets(buf, len, p) ? 0 : -1;
	pclose(p);
	buf[strcspn(buf, "\n ")] = '\0';
	return ret || !buf[0] ? -1 : 0;
}

/*
 * md raid1 over two thin volumes of one pool whose data sits on a rig
 * drive and whose metadata sits on SPINFAR0, which cannot reach the
 * memory.  The metadata device never sees a bio of the caller's pages, so
 * it is not asked: O_DIRECT writes from device memory go through, routed
 * ones are DMAed (none copied as unreachable), both thin legs hold the
 * model and md's check finds them equal.
 */
TEST_F_TIMEOUT(far, md_raid1_over_thin_far_metadata, 600)
{
	FIXTURE_DATA(lvm) *l = &self->l;
	char tmeta[NAME_MAX + 1], path[PATH_MAX], leg[PATH_MAX];
	unsigned int i;

	ASSERT_EQ(0, run_cmdf(LVM " lvcreate -q -y -L 8m -n pool_meta " VG " /dev/%s >/dev/null",
			      l->far));
	ASSERT_EQ(0, run_cmdf(LVM " lvcreate -q -y -L 96m -n pool " VG " /dev/%s >/dev/null",
			      l->ns[0]));
	/* Its warnings (no spare, metadata wiped) would read as the kernel's. */
	ASSERT_EQ(0, run_cmd(LVM
			     " lvconvert -q -y --type thin-pool --poolmetadataspare n --poolmetadata "
			     VG "/pool_meta " VG "/pool >/tmp/lvconvert.log 2>&1 || { "
			     "tr A-Z a-z </tmp/lvconvert.log >&2; false; }"));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, run_cmdf(LVM " lvcreate -q -y --type thin -V %lum -n t%u " VG
				      "/pool >/dev/null", LV_LEN / MiB, i));
	}
	/* The premise: the pool's metadata device is on SPINFAR0. */
	ASSERT_EQ(0, lv_kname("pool_tmeta", tmeta, sizeof(tmeta)));
	xsnprintf(path, sizeof(path), "/sys/block/%s/slaves/%s", tmeta,
		  l->far);
	ASSERT_EQ(0, access(path, F_OK)) TH_LOG("%s: %s", path,
						strerror(errno));
	ASSERT_EQ(0, run_cmd("mdadm --create " MD
			     " --run --quiet --force --assume-clean --metadata=1.0 --level=1 --raid-devices=2 /dev/mapper/"
			     VG "-t0 /dev/mapper/" VG "-t1"));
	ASSERT_EQ(1, dev_p2pdma(MD));
	ASSERT_EQ(0, lv_fill(l, MD));

	lv_writes_dma(_metadata, l, MD);

	EXPECT_EQ(-1, lv_diff_ram(l, MD));
	EXPECT_EQ(0, md_check(MD_SYS));
	for (i = 0; i < 2; i++) {
		xsnprintf(leg, sizeof(leg), "/dev/mapper/" VG "-t%u", i);
		EXPECT_EQ(-1, lv_diff_ram(l, leg)) TH_LOG("thin leg %u", i);
	}
	EXPECT_EQ(0, run_cmd("mdadm --stop " MD));
}

/*
 * A raid1 volume keeps serving reads into device memory, and taking
 * writes from it, with a leg on a drive that has died, and while
 * lvconvert --repair rebuilds the leg on another drive.  The drive under
 * leg 1 fails every request (fail_make_request) from before a write that
 * makes md fail the leg, to the end of the repair, as a dead drive would.
 * The reads are routed (after drop_caches()) and O_DIRECT, each checked
 * against the model; the routed ones go by DMA from the surviving leg
 * while degraded and during the rebuild (shown under way, slowed by
 * --maxrecoveryrate).  Afterwards both legs hold the model, the new one
 * on drive 2, and md's check finds them equal.
 */
#define FAIL_DIR	"/sys/kernel/debug/fail_make_request"

FIXTURE(repair) {
	FIXTURE_DATA(lvm) l;
	struct fault_attrs fa;
	bool failing;
};

FIXTURE_SETUP(repair)
{
	router_learned_reset();	/* each case starts from defaults */
	vg_tools(_metadata);
	debugfs_mount();
	ASSERT_EQ(0, access(FAIL_DIR, F_OK))
		TH_LOG("no %s (CONFIG_FAIL_MAKE_REQUEST)", FAIL_DIR);
	VG_NEED(&self->l, false);
	vg_setup(_metadata, &self->l, "raid1 leg failed and repaired");
	ASSERT_EQ(0, fault_attrs_save(&self->fa, FAIL_DIR));
}

FIXTURE_TEARDOWN(repair)
{
	if (self->failing)
		make_it_fail(self->l.ns[1], false);
	fault_attrs_restore(&self->fa);
	vg_free(&self->l);
}

/*
 * The health characters of VG/@lv's dm-raid table ("AA", "AD", "Aa")
 * and its sync action, from dmsetup status; 0 or -1.
 */
static int lv_raid_status(const char *lv, char *health, char *action)
{
	char cmd[256], line[512];
	FILE *p;
	int n;

	xsnprintf(cmd, sizeof(cmd), "dmsetup status " VG "-%s", lv);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fgets(line, sizeof(line), p) ?
	    sscanf(line, "%*u %*u raid %*s %*u %31s %*s %31s", health,
		   action) : 0;
	pclose(p);
	return n == 2 ? 0 : -1;
}

TEST_F_TIMEOUT(repair, raid1_failed_leg, 600)
{
	FIXTURE_DATA(lvm) *l = &self->l;
	char pvs[128], leg[PATH_MAX], kname[NAME_MAX + 1];
	char health[32] = "", action[32] = "";
	int i, during = 0, fd;
	struct stats before, d;
	double t0;

	xsnprintf(pvs, sizeof(pvs), "/dev/%s /dev/%s", l->ns[0], l->ns[1]);
	ASSERT_EQ(0, lv_create(l, "raid1", "--type raid1 -m 1", LV, pvs));
	ASSERT_EQ(0, lv_wait_idle(LV)) TH_LOG("no initial sync");
	ASSERT_EQ(1, dev_p2pdma(LV_DEV));
	ASSERT_EQ(0, lv_fill(l, LV_DEV));

	/* Drive 1 dies; a write from RAM makes md fail the leg on it. */
	ASSERT_EQ(0, fault_attrs_arm(FAIL_DIR, "-1"));
	ASSERT_EQ(0, make_it_fail(l->ns[1], true));
	self->failing = true;
	fd = open(LV_DEV, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	memcpy(l->buf, l->model, MiB);
	ASSERT_EQ((ssize_t)MiB, pwrite(fd, l->buf, MiB, 0));
	close(fd);
	for (i = 0; i < 100 && !strchr(health, 'D'); i++) {
		usleep(100000);
		lv_raid_status(LV, health, action);
	}
	TH_LOG("after the write: health %s, %s", health, action);
	ASSERT_EQ(0, strcmp(health, "AD")) TH_LOG("leg 1 not failed");

	/* Degraded: routed and O_DIRECT, reads and writes. */
	stats_read(&before);
	EXPECT_EQ(-1, lv_diff_dev(l, LV_DEV, false));
	stats_delta(&before, &d);
	TH_LOG("degraded routed reads: p2p_bytes %lld", d.p2p_read);
	EXPECT_LE((long long)REGION, d.p2p_read);
	EXPECT_EQ(-1, lv_diff_dev(l, LV_DEV, true));
	lv_writes_dma(_metadata, l, LV_DEV);
	EXPECT_EQ(-1, lv_diff_ram(l, LV_DEV));

	/* The repair, slowed so that the reads meet it: 32 MiB in 8-33 s. */
	ASSERT_EQ(0, lvm_quiet("lvchange -q --maxrecoveryrate 4M " VG "/" LV));
	ASSERT_EQ(0, lvm_quiet("lvconvert -q -y --repair " VG "/" LV " /dev/%s",
			       l->ns[2]));
	stats_read(&before);
	t0 = now_sec();
	while (now_sec() - t0 < 60) {
		char a0[32] = "", a1[32] = "";

		lv_raid_status(LV, health, a0);
		EXPECT_EQ(-1, lv_diff_dev(l, LV_DEV, false));
		lv_raid_status(LV, health, a1);
		if (!strcmp(a0, "recover") && !strcmp(a1, "recover"))
			during++;
		else if (during)
			break;
	}
	stats_delta(&before, &d);
	TH_LOG("%d passes of routed reads within the rebuild: p2p_bytes %lld",
	       during, d.p2p_read);
	ASSERT_LE(1, during) TH_LOG("the rebuild was not under way");
	EXPECT_LE((long long)during * REGION, d.p2p_read);
	EXPECT_EQ(0, make_it_fail(l->ns[1], false));
	self->failing = false;
	EXPECT_EQ(0, lvm_quiet("lvchange -q --maxrecoveryrate 0 " VG "/" LV));
	ASSERT_EQ(0, lv_wait_idle(LV)) TH_LOG("the repair did not finish");
	lv_raid_status(LV, health, action);
	TH_LOG("after the repair: health %s, %s", health, action);
	EXPECT_EQ(0, strcmp(health, "AA"));

	/* The new leg is on drive 2, and both hold the model. */
	ASSERT_EQ(0, lv_kname(LV "_rimage_1", kname, sizeof(kname)));
	xsnprintf(leg, sizeof(leg), "/sys/block/%s/slaves/%s", kname,
		  l->ns[2]);
	i = access(leg, F_OK) ? errno : 0;
	EXPECT_EQ(0, i) TH_LOG("%s: %s", leg, strerror(i));
	EXPECT_EQ(-1, lv_diff_ram(l, LV_DEV));
	EXPECT_EQ(-1, lv_diff_dev(l, LV_DEV, false));
	EXPECT_EQ(0, lv_mismatches(LV));
	for (i = 0; i < 2; i++) {
		xsnprintf(leg, sizeof(leg),
			  "/dev/mapper/" VG "-" LV "_rimage_%d", i);
		EXPECT_EQ(-1, lv_diff_ram(l, leg)) TH_LOG("leg %d", i);
	}
}

TEST_HARNESS_MAIN
