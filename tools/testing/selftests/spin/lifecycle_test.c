// SPDX-License-Identifier: GPL-2.0
/*
 * Device memory that goes away during a read, and reads under a memory
 * cgroup limit.
 *
 *  - munmap() of the destination from another thread during a pread();
 *  - a reader killed with SIGKILL in the middle of its reads;
 *  - the provider's driver unbound, and the provider removed through
 *    sysfs, while a process has its memory mapped and reads into it:
 *    outstanding reads complete or fail, later access to the mapping
 *    gets SIGBUS, and the provider comes back whole after a rebind or a
 *    rescan;
 *  - the provider's driver unbound while an io_uring has its memory
 *    registered: the unbind waits until the ring lets go, fixed reads
 *    meanwhile are right, and the provider comes back whole;
 *  - P-readahead and routed writes inside a memory cgroup whose
 *    memory.max is a fraction of the data: correct bytes and no OOM kill.
 *
 * After each case no device memory is lost (p2pmem/available is back
 * where it started) and the file still reads back right into RAM and
 * into device memory.  Every byte a completed read delivered, while its
 * destination was still mapped, is compared with the file's pattern.
 *
 * The removal cases unbind and remove the provider the rig's drives
 * share a switch with, so this program runs after the others.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <time.h>
#include <liburing.h>

#include "spin_util.h"
#include "../kselftest_harness.h"

#define DRIVER		"/sys/bus/pci/drivers/p2pmem_bar"
#define FILE_SIZE	(48 * MiB)
#define READ_LEN	(8 * MiB)
#define MNT		"/mnt/spin-lifecycle"
#define CG_ROOT		"/sys/fs/cgroup"
#define CG		CG_ROOT "/spin-lifecycle"
#define CG_MAX		(16 * MiB)
#define POISON		0xa5
#define EXIT_SIGBUS	42

FIXTURE(lifecycle) {
	char ns[NAME_MAX + 1];
	char provider[SYSFS_LEN];
	char bdf[64];
	unsigned char *ref;
	long long avail0;
	uint64_t seed, rng;
	int fd;
	bool mounted;
};

FIXTURE_SETUP(lifecycle)
{
	char nvme_dev[SYSFS_LEN], *slash;
	int wfd;

	self->fd = -1;
	/* What the rig always has: anything missing is a failure. */
	ASSERT_EQ(0, access(P2P_ROUTER "/enabled", F_OK))
		TH_LOG("no P2P router in this kernel");
	ASSERT_EQ(0, nvme_rig_ns(2, self->ns, sizeof(self->ns)))
		TH_LOG("rig NVMe drive 2 not found");
	ASSERT_EQ(0, nvme_pci_dev(self->ns, nvme_dev, sizeof(nvme_dev)));
	ASSERT_EQ(0, p2pmem_find(nvme_dev, true, self->provider,
				 sizeof(self->provider)))
		TH_LOG("no provider reachable from %s", self->ns);
	slash = strrchr(self->provider, '/');
	snprintf(self->bdf, sizeof(self->bdf), "%s", slash + 1);
	self->avail0 = p2pmem_available(self->provider);
	ASSERT_LT(READ_LEN, self->avail0);

	ASSERT_EQ(0, mkfs_mount("xfs", self->ns, MNT));
	self->mounted = true;
	self->seed = getpid() * 0x9e3779b97f4a7c15ULL;
	self->rng = self->seed | 1;
	TH_LOG("seed %#llx, provider %s", (unsigned long long)self->seed,
	       self->bdf);
	wfd = open(MNT "/data", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, wfd);
	ASSERT_EQ(0, write_pattern(wfd, FILE_SIZE, self->seed));
	close(wfd);
	ASSERT_EQ(0, drop_caches());
	self->fd = open(MNT "/data", O_RDONLY);
	ASSERT_LE(0, self->fd);
	self->ref = malloc(FILE_SIZE);
	ASSERT_NE(NULL, self->ref);
	pattern_fill(self->ref, FILE_SIZE, 0, self->seed);
}

FIXTURE_TEARDOWN(lifecycle)
{
	if (self->fd >= 0)
		close(self->fd);
	free(self->ref);
	if (self->mounted)
		umount2(MNT, MNT_DETACH);
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };

	nanosleep(&ts, NULL);
}

/* p2pmem/available of @provider once it is back to @want; -1 on timeout. */
static long long wait_available(const char *provider, long long want)
{
	long long now = -1;
	int i;

	for (i = 0; i < 100; i++) {
		now = p2pmem_available(provider);
		if (now == want)
			break;
		sleep_us(50000);
	}
	return now;
}

/*
 * The file still reads back right, cold, into RAM and into device
 * memory, and no device memory is lost.
 */
static void check_after(struct __test_metadata *_metadata,
			FIXTURE_DATA(lifecycle) *self)
{
	unsigned char *ram = malloc(READ_LEN), *dev;
	off_t off;

	ASSERT_NE(NULL, ram);
	EXPECT_EQ(self->avail0, wait_available(self->provider, self->avail0));
	ASSERT_EQ(0, drop_caches());
	for (off = 0; off < (off_t)FILE_SIZE; off += READ_LEN) {
		ASSERT_EQ((ssize_t)READ_LEN, pread(self->fd, ram, READ_LEN, off));
		ASSERT_EQ(-1, first_diff(ram, self->ref + off, READ_LEN))
			TH_LOG("RAM read at %lld is wrong", (long long)off);
	}
	free(ram);
	dev = p2pmem_map(self->provider, READ_LEN);
	ASSERT_NE(NULL, dev);
	ASSERT_EQ(0, drop_caches());
	memset(dev, POISON, READ_LEN);
	ASSERT_EQ((ssize_t)READ_LEN, pread(self->fd, dev, READ_LEN, 8 * MiB));
	EXPECT_EQ(-1, first_diff(dev, self->ref + 8 * MiB, READ_LEN));
	munmap(dev, READ_LEN);
	EXPECT_EQ(self->avail0, wait_available(self->provider, self->avail0));
}

struct racer {
	int fd;
	unsigned char *dst;
	off_t off;
	ssize_t ret;
	int err;
};

static void *racer_read(void *arg)
{
	struct racer *r = arg;

	posix_fadvise(r->fd, r->off, READ_LEN, POSIX_FADV_DONTNEED);
	errno = 0;
	r->ret = pread(r->fd, r->dst, READ_LEN, r->off);
	r->err = errno;
	return NULL;
}

/*
 * Another thread unmaps the destination while a cold pread() is DMAing
 * into it.  The read completes, comes back short or fails with EFAULT;
 * the pages it pinned go back to the provider when it is done.
 */
TEST_F_TIMEOUT(lifecycle, munmap_during_read, 300)
{
	int round, whole = 0, shrt = 0, efault = 0;

	for (round = 0; round < 30; round++) {
		struct racer r = { .fd = self->fd };
		pthread_t tid;

		r.off = xorshift64(&self->rng) % (FILE_SIZE / READ_LEN) *
			READ_LEN;
		r.dst = p2pmem_map(self->provider, READ_LEN);
		ASSERT_NE(NULL, r.dst);
		memset(r.dst, POISON, READ_LEN);
		ASSERT_EQ(0, pthread_create(&tid, NULL, racer_read, &r));
		/* A cold 8 MiB read takes a few ms in the rig. */
		sleep_us(xorshift64(&self->rng) % 4000);
		ASSERT_EQ(0, munmap(r.dst, READ_LEN));
		ASSERT_EQ(0, pthread_join(tid, NULL));
		if (r.ret == (ssize_t)READ_LEN) {
			whole++;
		} else if (r.ret >= 0) {
			shrt++;
		} else {
			EXPECT_EQ(EFAULT, r.err);
			efault++;
		}
	}
	TH_LOG("30 rounds: %d whole, %d short, %d EFAULT", whole, shrt, efault);
	check_after(_metadata, self);
}

/* Read cold into device memory for ever, checking every read. */
static void __attribute__((noreturn))
reader_loop(FIXTURE_DATA(lifecycle) *self, unsigned char *dst, int secs)
{
	time_t end = time(NULL) + secs;
	uint64_t rng = self->seed ^ getpid();

	while (time(NULL) < end) {
		off_t off = xorshift64(&rng) % (FILE_SIZE / READ_LEN) * READ_LEN;
		ssize_t ret;

		posix_fadvise(self->fd, off, READ_LEN, POSIX_FADV_DONTNEED);
		memset(dst, POISON, READ_LEN);
		ret = pread(self->fd, dst, READ_LEN, off);
		if (ret < 0)
			_exit(errno == EFAULT ? 10 : 11);
		if (first_diff(dst, self->ref + off, ret) != -1)
			_exit(1);
	}
	_exit(3);
}

/*
 * A reader is killed with SIGKILL in the middle of its reads: its device
 * memory comes back once it is gone, whatever the read was doing.
 */
TEST_F_TIMEOUT(lifecycle, killed_mid_read, 300)
{
	int round, status;

	for (round = 0; round < 10; round++) {
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (!pid) {
			unsigned char *dst = p2pmem_map(self->provider,
							READ_LEN);

			if (!dst)
				_exit(12);
			reader_loop(self, dst, 60);
		}
		sleep_us(50000 + xorshift64(&self->rng) % 200000);
		ASSERT_EQ(0, kill(pid, SIGKILL));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFSIGNALED(status))
			TH_LOG("round %d: the reader exited %d (1: wrong bytes)",
			       round, WEXITSTATUS(status));
		ASSERT_EQ(SIGKILL, WTERMSIG(status));
		ASSERT_EQ(self->avail0,
			  wait_available(self->provider, self->avail0));
	}
	check_after(_metadata, self);
}

static sigjmp_buf bus_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(bus_jmp, 1);
}

/*
 * The child of the removal tests: reads into its mapping until the
 * mapping goes away.  Exits EXIT_SIGBUS when touching the mapping gets
 * SIGBUS (what must happen once the provider is gone), 1 on wrong bytes,
 * 2 when a read failed but the mapping is still there, 3 if the
 * provider never went away.
 */
static void __attribute__((noreturn))
removal_child(FIXTURE_DATA(lifecycle) *self, int ready)
{
	struct sigaction sa = { .sa_handler = on_sigbus };
	uint64_t rng = self->seed ^ getpid();
	time_t end = time(NULL) + 120;
	static volatile unsigned long reads;	/* survives siglongjmp() */
	volatile unsigned char *dst;

	dst = p2pmem_map(self->provider, READ_LEN);
	if (!dst)
		_exit(12);
	sigaction(SIGBUS, &sa, NULL);
	if (sigsetjmp(bus_jmp, 1)) {
		fprintf(stderr, "# child: SIGBUS after %lu reads\n", reads);
		_exit(EXIT_SIGBUS);
	}
	while (time(NULL) < end) {
		off_t off = xorshift64(&rng) % (FILE_SIZE / READ_LEN) * READ_LEN;
		ssize_t ret;

		posix_fadvise(self->fd, off, READ_LEN, POSIX_FADV_DONTNEED);
		memset((void *)dst, POISON, READ_LEN);
		if (reads++ == 2 && write(ready, "r", 1) != 1)
			_exit(13);
		ret = pread(self->fd, (void *)dst, READ_LEN, off);
		if (ret < 0) {
			fprintf(stderr, "# child: read %lu failed: %s\n",
				reads, strerror(errno));
			dst[0] = 0;	/* must fault: SIGBUS */
			_exit(2);
		}
		if (first_diff((void *)dst, self->ref + off, ret) != -1)
			_exit(1);
	}
	_exit(3);
}

/* Waits for the provider, rebound or rescanned, to be published again. */
static void provider_back(struct __test_metadata *_metadata,
			  FIXTURE_DATA(lifecycle) *self)
{
	long long published;
	char path[PATH_MAX];
	int i;

	snprintf(path, sizeof(path), "%s/p2pmem/published", self->provider);
	for (i = 0; i < 100 && (sysfs_read_ll(path, &published) ||
				published != 1); i++)
		sleep_us(50000);
	ASSERT_EQ(0, sysfs_read_ll(path, &published))
		TH_LOG("%s did not come back as a published provider",
		       self->bdf);
	ASSERT_EQ(1, published)
		TH_LOG("%s did not come back as a published provider",
		       self->bdf);
}

/*
 * Takes the provider away (@remove: through sysfs, else by unbinding its
 * driver) while a child reads into its memory, checks what the child
 * saw, and brings the provider back; three times, at random moments.
 */
static void provider_goes_away(struct __test_metadata *_metadata,
			       FIXTURE_DATA(lifecycle) *self, bool remove)
{
	char path[PATH_MAX], c;
	struct timespec t0, t1;
	int pipefd[2], status, round;
	pid_t pid;

	for (round = 0; round < 3; round++) {
		ASSERT_EQ(0, pipe(pipefd));
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			close(pipefd[0]);
			removal_child(self, pipefd[1]);
		}
		close(pipefd[1]);
		/* The child has done two reads and is starting a third. */
		ASSERT_EQ(1, read(pipefd[0], &c, 1));
		close(pipefd[0]);
		sleep_us(xorshift64(&self->rng) % 100000);

		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (remove) {
			snprintf(path, sizeof(path), "%s/remove",
				 self->provider);
			ASSERT_EQ(0, sysfs_write(path, "1"));
		} else {
			ASSERT_EQ(0, sysfs_write(DRIVER "/unbind", self->bdf));
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		TH_LOG("round %d: %s took %ld ms", round,
		       remove ? "remove" : "unbind",
		       (t1.tv_sec - t0.tv_sec) * 1000 +
		       (t1.tv_nsec - t0.tv_nsec) / 1000000);

		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(EXIT_SIGBUS, WEXITSTATUS(status))
			TH_LOG("child exited %d (1 wrong bytes, 2 no SIGBUS, 3 no removal)",
			       WEXITSTATUS(status));

		/* No new mapping can be made while it is gone. */
		snprintf(path, sizeof(path), "%s/p2pmem/allocate",
			 self->provider);
		EXPECT_NE(0, access(path, F_OK));

		if (remove) {
			ASSERT_EQ(0, sysfs_write("/sys/bus/pci/rescan", "1"));
		} else {
			ASSERT_EQ(0, sysfs_write(DRIVER "/bind", self->bdf));
		}
		provider_back(_metadata, self);
		check_after(_metadata, self);
	}
}

static bool has_memory_controller(void)
{
	char buf[256];

	if (access(CG_ROOT "/cgroup.controllers", F_OK) &&
	    mount("cgroup2", CG_ROOT, "cgroup2", 0, NULL))
		return false;
	if (sysfs_read(CG_ROOT "/cgroup.controllers", buf, sizeof(buf)) ||
	    !strstr(buf, "memory"))
		return false;
	if (sysfs_read(CG_ROOT "/cgroup.subtree_control", buf, sizeof(buf)))
		return false;
	return strstr(buf, "memory") ||
	       !sysfs_write(CG_ROOT "/cgroup.subtree_control", "+memory");
}

static long long cg_event(const char *file, const char *key)
{
	char path[PATH_MAX], line[128];
	long long val = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", CG, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) &&
		    line[strlen(key)] == ' ')
			val = strtoll(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return val;
}

static long long vmstat(const char *key)
{
	char line[128];
	long long val = -1;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) &&
		    line[strlen(key)] == ' ')
			val = strtoll(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return val;
}

/*
 * The child in the cgroup: the whole file read into RAM (which fills the
 * cgroup), 4 KiB sequential reads of it into device memory (P-readahead),
 * then routed writes from device memory of
 * a second file twice the cgroup's limit, read back into RAM.  Exits 0
 * when every byte was right.
 */
static void __attribute__((noreturn))
memcg_child(FIXTURE_DATA(lifecycle) *self)
{
	const size_t wsize = 2 * CG_MAX, chunk = 1 * MiB + 4096 + 3;
	uint64_t wseed = self->seed ^ 0x77;
	unsigned char *dst, *ram;
	size_t off;
	int wfd;

	dst = p2pmem_map(self->provider, READ_LEN);
	ram = malloc(chunk);
	if (!dst || !ram)
		_exit(12);
	/* Fill the cgroup with ordinary page cache first: it is at its limit. */
	for (off = 0; off < FILE_SIZE; off += chunk) {
		size_t n = FILE_SIZE - off < chunk ? FILE_SIZE - off : chunk;

		if (pread(self->fd, ram, n, off) != (ssize_t)n ||
		    first_diff(ram, self->ref + off, n) != -1)
			_exit(1);
	}
	for (off = 0; off < FILE_SIZE; off += 4096)
		if (pread(self->fd, dst + off % READ_LEN, 4096, off) != 4096 ||
		    first_diff(dst + off % READ_LEN, self->ref + off, 4096) != -1)
			_exit(1);

	wfd = open(MNT "/written", O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (wfd < 0)
		_exit(13);
	for (off = 0; off < wsize; off += chunk) {
		size_t n = wsize - off < chunk ? wsize - off : chunk;

		pattern_fill(dst, n, off, wseed);
		if (pwrite(wfd, dst, n, off) != (ssize_t)n)
			_exit(2);
	}
	if (fsync(wfd))
		_exit(2);
	posix_fadvise(wfd, 0, 0, POSIX_FADV_DONTNEED);
	for (off = 0; off < wsize; off += chunk) {
		size_t n = wsize - off < chunk ? wsize - off : chunk;

		if (pread(wfd, ram, n, off) != (ssize_t)n)
			_exit(3);
		pattern_fill(dst, n, off, wseed);	/* the expected bytes */
		if (first_diff(ram, dst, n) != -1)
			_exit(3);
	}
	close(wfd);
	_exit(0);
}

/* The router's and P-readahead's counters that memcg_limit looks at. */
enum {
	ST_RA_READS, ST_RA_PAGES, ST_RA_HITS, ST_RA_EVICTED, ST_RA_REMOVED,
	ST_ROUTED_WRITES, ST_P2P_WRITE_BYTES, ST_NR
};

static const char *const st_names[ST_NR] = {
	"ra_reads", "ra_pages", "ra_hits", "ra_evicted", "ra_removed",
	"routed_writes", "p2p_write_bytes",
};

/*
 * P-readahead and routed writes in a memory cgroup whose memory.max is
 * a third of the file: the cgroup reclaims its own page cache (the partition
 * first), every byte is right, and nobody is OOM-killed.  The counters
 * prove the premise: the 4 KiB reads went through the partition, which
 * turned over rather than grew, and the writes were routed and DMAed.
 */
TEST_F_TIMEOUT(lifecycle, memcg_limit, 300)
{
	long long oom0, file_kb, max_events, enabled, ra_kb;
	long long st0[ST_NR], d[ST_NR];
	char val[32], line[256];
	size_t len = 0;
	int status, i;
	pid_t pid;

	ASSERT_TRUE(has_memory_controller())
		TH_LOG("no cgroup2 memory controller");
	/* The premise: the router on, P-readahead on (the defaults). */
	ASSERT_EQ(0, sysfs_read_ll(P2P_ROUTER "/enabled", &enabled));
	ASSERT_EQ(1, enabled);
	ASSERT_EQ(0, sysfs_read_ll(P2P_ROUTER "/readahead_kb", &ra_kb));
	ASSERT_LT(0, ra_kb) TH_LOG("P-readahead is off (readahead_kb %lld)",
				   ra_kb);
	for (i = 0; i < ST_NR; i++) {
		const char *name = st_names[i];

		ASSERT_LE(0, router_stat(name)) TH_LOG("no counter %s", name);
	}
	rmdir(CG);
	ASSERT_EQ(0, mkdir(CG, 0755));
	snprintf(val, sizeof(val), "%lu", CG_MAX);
	ASSERT_EQ(0, sysfs_write(CG "/memory.max", val));
	ASSERT_EQ(0, drop_caches());
	oom0 = vmstat("oom_kill");
	/* After the drop, which takes pages out of the partition too. */
	for (i = 0; i < ST_NR; i++)
		st0[i] = router_stat(st_names[i]);

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		char me[32];

		snprintf(me, sizeof(me), "%d", getpid());
		if (sysfs_write(CG "/cgroup.procs", me))
			_exit(14);
		memcg_child(self);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	for (i = 0; i < ST_NR; i++) {
		d[i] = router_stat(st_names[i]) - st0[i];
		len += snprintf(line + len, sizeof(line) - len, " %s=%lld",
				st_names[i], d[i]);
	}
	TH_LOG("counters moved:%s (readahead_kb %lld)", line, ra_kb);
	file_kb = cg_event("memory.stat", "file") / 1024;
	max_events = cg_event("memory.events", "max");
	TH_LOG("memory.max %lu KiB: %lld 'max' events, %lld OOM kills in the cgroup, %lld in the system; file pages now %lld KiB",
	       CG_MAX / KiB, max_events, cg_event("memory.events", "oom_kill"),
	       vmstat("oom_kill") - oom0, file_kb);
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("child exited %d (1 read, 2 write, 3 read-back wrong; 1x: setup)",
		       WEXITSTATUS(status));
	EXPECT_EQ(0, cg_event("memory.events", "oom_kill"));
	EXPECT_EQ(0, vmstat("oom_kill") - oom0);
	EXPECT_LT(0, max_events) TH_LOG("the cgroup never reached memory.max");
	/* The 4 KiB reads into device memory came from the partition... */
	EXPECT_LT(0, d[ST_RA_READS]);
	EXPECT_LT(0, d[ST_RA_PAGES]);
	EXPECT_LT(0, d[ST_RA_HITS]);
	/* ...which gave pages back, to its cap or to the cgroup's reclaim: */
	EXPECT_LT(0, d[ST_RA_EVICTED] + d[ST_RA_REMOVED]);
	/* the writes from device memory were routed, their middles DMAed. */
	EXPECT_LT(0, d[ST_ROUTED_WRITES]);
	EXPECT_LT(0, d[ST_P2P_WRITE_BYTES]);
	/* Nothing is left counted in the partition once the cache is gone. */
	ASSERT_EQ(0, drop_caches());
	EXPECT_EQ(0, router_stat("ra_partition_pages"));
	EXPECT_EQ(0, rmdir(CG));
	check_after(_metadata, self);
}

/* These take the provider away: they come last. */
TEST_F_TIMEOUT(lifecycle, unbind_during_read, 300)
{
	provider_goes_away(_metadata, self, false);
}

TEST_F_TIMEOUT(lifecycle, remove_during_read, 300)
{
	provider_goes_away(_metadata, self, true);
}

TEST_HARNESS_MAIN

/*
 * One READ_FIXED of READ_LEN at @off into the registered buffer @buf,
 * then a WRITE_FIXED of it into @scratch, read back into RAM: the
 * buffer's bytes, which its zapped mapping no longer shows.
 */
static void fixed_read_check(struct __test_metadata *_metadata,
			     FIXTURE_DATA(lifecycle) *self,
			     struct io_uring *ring, void *buf, int scratch,
			     off_t off)
{
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	unsigned char *ram;
	int step;

	ram = malloc(READ_LEN);
	ASSERT_NE(NULL, ram);
	posix_fadvise(self->fd, off, READ_LEN, POSIX_FADV_DONTNEED);
	for (step = 0; step < 2; step++) {
		sqe = io_uring_get_sqe(ring);
		ASSERT_NE(NULL, sqe);
		if (!step)
			io_uring_prep_read_fixed(sqe, self->fd, buf, READ_LEN,
						 off, 0);
		else
			io_uring_prep_write_fixed(sqe, scratch, buf, READ_LEN,
						  0, 0);
		ASSERT_EQ(1, io_uring_submit(ring));
		ASSERT_EQ(0, io_uring_wait_cqe(ring, &cqe));
		EXPECT_EQ((int)READ_LEN, cqe->res)
			TH_LOG("%s at %lld: %s", step ? "WRITE_FIXED" :
			       "READ_FIXED", (long long)off,
			       cqe->res < 0 ? strerror(-cqe->res) : "short");
		io_uring_cqe_seen(ring, cqe);
	}
	memset(ram, POISON, READ_LEN);
	ASSERT_EQ((ssize_t)READ_LEN, pread(scratch, ram, READ_LEN, 0));
	EXPECT_EQ(-1, first_diff(ram, self->ref + off, READ_LEN))
		TH_LOG("READ_FIXED at %lld delivered wrong bytes",
		       (long long)off);
	free(ram);
}

struct unbinder {
	const char *bdf;
	int ret;
	bool done;		/* __atomic */
};

static void *unbind_thread(void *arg)
{
	struct unbinder *u = arg;

	u->ret = sysfs_write(DRIVER "/unbind", u->bdf);
	__atomic_store_n(&u->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * The provider's driver is unbound while an io_uring has a buffer in its
 * memory registered (pinned without FOLL_LONGTERM, see
 * io_pin_p2pdma_pages()).  The pins hold the provider's pages, so the
 * unbind must wait, and fixed reads meanwhile still deliver the right
 * bytes (or a clean error, never a crash); once the buffer is
 * unregistered (round 0) or the ring closed (round 1), the unbind
 * finishes, and after a rebind the provider is whole and no device
 * memory is lost.
 */
TEST_F_TIMEOUT(lifecycle, unbind_with_registered_buffer, 300)
{
	int round, i, scratch;

	scratch = open(MNT "/scratch", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, scratch);
	for (round = 0; round < 2; round++) {
		struct unbinder u = { .bdf = self->bdf };
		struct io_uring ring;
		struct iovec iov;
		unsigned char *dev;
		pthread_t tid;
		char path[PATH_MAX];

		dev = p2pmem_map(self->provider, READ_LEN);
		ASSERT_NE(NULL, dev);
		ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
		iov.iov_base = dev;
		iov.iov_len = READ_LEN;
		ASSERT_EQ(0, io_uring_register_buffers(&ring, &iov, 1))
			TH_LOG("device memory cannot be registered");
		fixed_read_check(_metadata, self, &ring, dev, scratch, 0);

		ASSERT_EQ(0, pthread_create(&tid, NULL, unbind_thread, &u));
		sleep_us(500000);
		EXPECT_FALSE(__atomic_load_n(&u.done, __ATOMIC_ACQUIRE))
			TH_LOG("round %d: unbind did not wait for the registered buffer (%s)",
			       round, strerror(-u.ret));
		/* The provider is going: its memory is no longer handed out. */
		snprintf(path, sizeof(path), "%s/p2pmem/allocate",
			 self->provider);
		EXPECT_NE(0, access(path, F_OK));
		fixed_read_check(_metadata, self, &ring, dev, scratch,
				 16 * MiB);

		if (!round) {
			ASSERT_EQ(0, io_uring_unregister_buffers(&ring));
		} else {
			io_uring_queue_exit(&ring);
		}
		for (i = 0; i < 200 && !__atomic_load_n(&u.done,
							 __ATOMIC_ACQUIRE); i++)
			sleep_us(50000);
		EXPECT_TRUE(__atomic_load_n(&u.done, __ATOMIC_ACQUIRE))
			TH_LOG("round %d: unbind still waits 10 s after the ring let go",
			       round);
		ASSERT_EQ(0, pthread_join(tid, NULL));
		EXPECT_EQ(0, u.ret);
		if (!round)
			io_uring_queue_exit(&ring);
		munmap(dev, READ_LEN);

		ASSERT_EQ(0, sysfs_write(DRIVER "/bind", self->bdf));
		provider_back(_metadata, self);
		check_after(_metadata, self);
	}
	close(scratch);
}
