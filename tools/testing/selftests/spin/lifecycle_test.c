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
 *  - the provider unbound or removed while an io_uring has its memory
 *    registered and reads into it: the provider goes as soon as the
 *    reads in flight are done, whatever the ring holds; later fixed I/O
 *    on the buffer fails with EFAULT and touches no device memory, and
 *    the ring's RAM buffers still work;
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
#define CG		CG_ROOT "/spin-lifecycle"
#define CG_MAX		(16 * MiB)
#define CG_IO		CG_ROOT "/spin-lifecycle-io"
#define SLOW_BPS	"33554432"	/* an 8 MiB read takes 250 ms */
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
	bool throttled;		/* in CG_IO: throttle_leave() */
	pid_t child;		/* a reader to kill and reap at teardown */
};

static void throttle_leave(FIXTURE_DATA(lifecycle) *self);

FIXTURE_SETUP(lifecycle)
{
	char nvme_dev[SYSFS_LEN], *slash;
	int wfd;

	self->fd = -1;
	ASSERT_EQ(0, access(P2P_ROUTER "/enabled", F_OK))
		TH_LOG("no P2P router in this kernel");
	SPIN_NEED(!nvme_rig_ns(2, self->ns, sizeof(self->ns)),
		  SPIN_RIG_DRIVE_FMT, 2, 3);
	ASSERT_EQ(0, nvme_pci_dev(self->ns, nvme_dev, sizeof(nvme_dev)));
	SPIN_NEED(!p2pmem_find(nvme_dev, true, self->provider,
			       sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns);
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
	if (self->child > 0) {
		kill(self->child, SIGKILL);
		waitpid(self->child, NULL, 0);
	}
	throttle_leave(self);
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
	pid_t tid;		/* __atomic */
};

static void *racer_read(void *arg)
{
	struct racer *r = arg;

	posix_fadvise(r->fd, r->off, READ_LEN, POSIX_FADV_DONTNEED);
	__atomic_store_n(&r->tid, gettid(), __ATOMIC_RELEASE);
	errno = 0;
	r->ret = pread(r->fd, r->dst, READ_LEN, r->off);
	r->err = errno;
	return NULL;
}

/*
 * This process into a cgroup whose io.max holds reads of /dev/@ns at
 * SLOW_BPS, so that a read stays in flight long enough to be met; 0 or
 * -errno.  throttle_leave() takes it out again.
 */
static int throttle_enter(FIXTURE_DATA(lifecycle) *self, const char *ns)
{
	int ret = cg_io_enter(CG_IO);

	self->throttled = true;
	return ret ?: cg_io_max(CG_IO, ns, SLOW_BPS);
}

/*
 * Out of the throttling cgroup, and the drive's throttled reads
 * forgotten: what the router learned of them (a drive at SLOW_BPS) would
 * otherwise steer the cases after this one.
 */
static void throttle_leave(FIXTURE_DATA(lifecycle) *self)
{
	if (!self->throttled)
		return;
	cg_io_leave(CG_IO);
	router_learned_reset();
	self->throttled = false;
}

/*
 * Another thread unmaps the destination while a cold pread() waits for
 * its I/O (io.max holds the drive's reads, and the munmap() waits until
 * the reader sleeps in D state, so it meets a read in flight).  The read
 * completes, comes back short or fails with EFAULT; the pages it pinned
 * go back to the provider when it is done.
 */
TEST_F_TIMEOUT(lifecycle, munmap_during_read, 300)
{
	int round, whole = 0, shrt = 0, efault = 0, met = 0, i;
	long long routed0 = router_stat("routed_reads");

	ASSERT_EQ(0, throttle_enter(self, self->ns)) TH_LOG("no cgroup v2 io.max");
	for (round = 0; round < 30; round++) {
		struct racer r = { .fd = self->fd };
		pthread_t tid;
		pid_t t;

		r.off = xorshift64(&self->rng) % (FILE_SIZE / READ_LEN) *
			READ_LEN;
		r.dst = p2pmem_map(self->provider, READ_LEN);
		ASSERT_NE(NULL, r.dst);
		memset(r.dst, POISON, READ_LEN);
		ASSERT_EQ(0, pthread_create(&tid, NULL, racer_read, &r));
		for (i = 0; i < 2000; i++) {
			t = __atomic_load_n(&r.tid, __ATOMIC_ACQUIRE);
			if (t && task_state(t) == 'D')
				break;
			sleep_us(500);
		}
		/* Later rounds at another point of the read. */
		sleep_us(xorshift64(&self->rng) % 100000);
		met += t && task_state(t) == 'D';
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
	throttle_leave(self);
	TH_LOG("30 rounds: %d whole, %d short, %d EFAULT; "
	       "%d unmaps met the reader waiting on I/O; %lld routed reads",
	       whole, shrt, efault, met, router_stat("routed_reads") - routed0);
	/* The premise: the unmaps met reads in flight, and the router's. */
	ASSERT_LE(15, met);
	ASSERT_LE(30, router_stat("routed_reads") - routed0);
	check_after(_metadata, self);
}

/* Read cold into device memory for ever, checking every read. */
static void __noreturn
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
 * memory comes back once it is gone, whatever the read was doing.  The
 * reads are held by io.max, and the kill waits until the reader sleeps
 * on one (D state), so it meets a read in flight.
 */
TEST_F_TIMEOUT(lifecycle, killed_mid_read, 300)
{
	int round, status, i, met = 0;

	ASSERT_EQ(0, throttle_enter(self, self->ns)) TH_LOG("no cgroup v2 io.max");
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
		self->child = pid;
		/* Past the first reads, then into one in flight. */
		sleep_us(50000 + xorshift64(&self->rng) % 200000);
		for (i = 0; i < 2000 && task_state(pid) != 'D'; i++)
			sleep_us(500);
		met += task_state(pid) == 'D';
		ASSERT_EQ(0, kill(pid, SIGKILL));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		self->child = 0;
		ASSERT_TRUE(WIFSIGNALED(status))
			TH_LOG("round %d: the reader exited %d (1: wrong bytes)",
			       round, WEXITSTATUS(status));
		ASSERT_EQ(SIGKILL, WTERMSIG(status));
		ASSERT_EQ(self->avail0,
			  wait_available(self->provider, self->avail0));
	}
	throttle_leave(self);
	TH_LOG("10 kills, %d of them of a reader waiting on I/O", met);
	/* The premise: the kills met reads in flight. */
	ASSERT_LE(5, met);
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
static void __noreturn
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
 * Whether the provider is bound to p2pmem_bar, the driver the removal
 * cases unbind and bind again (the rig's always is).
 */
static bool on_p2pmem_bar(FIXTURE_DATA(lifecycle) *self)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), DRIVER "/%s", self->bdf);
	return !access(path, F_OK);
}

/*
 * Takes the provider away (@remove: through sysfs, else by unbinding its
 * driver) while a child reads into its memory, checks what the child
 * saw, and brings the provider back; three times, at random moments of a
 * read in flight (io.max holds the reads, and the removal waits until the
 * child sleeps on one, in D state).
 */
static void provider_goes_away(struct __test_metadata *_metadata,
			       FIXTURE_DATA(lifecycle) *self, bool remove)
{
	char path[PATH_MAX], c;
	struct timespec t0, t1;
	int pipefd[2], status, round, i, met = 0;
	pid_t pid;

	ASSERT_EQ(0, throttle_enter(self, self->ns)) TH_LOG("no cgroup v2 io.max");
	for (round = 0; round < 3; round++) {
		ASSERT_EQ(0, pipe(pipefd));
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			close(pipefd[0]);
			removal_child(self, pipefd[1]);
		}
		self->child = pid;
		close(pipefd[1]);
		/* The child has done two reads and is starting a third. */
		ASSERT_EQ(1, read(pipefd[0], &c, 1));
		close(pipefd[0]);
		for (i = 0; i < 2000 && task_state(pid) != 'D'; i++)
			sleep_us(500);
		sleep_us(xorshift64(&self->rng) % 100000);
		met += task_state(pid) == 'D';

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
		self->child = 0;
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
	throttle_leave(self);
	TH_LOG("3 rounds, %d of them with the child waiting on a read", met);
	/* The premise: the removals met reads in flight. */
	ASSERT_LE(2, met);
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

/*
 * The child in the cgroup: the whole file read into RAM (which fills the
 * cgroup), 4 KiB sequential reads of it into device memory (P-readahead),
 * then routed writes from device memory of
 * a second file twice the cgroup's limit, read back into RAM.  Exits 0
 * when every byte was right.
 */
static void __noreturn
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
	SPIN_NEED(on_p2pmem_bar(self), "the provider %s on p2pmem_bar: it has another driver",
		  self->bdf);
	provider_goes_away(_metadata, self, false);
}

TEST_F_TIMEOUT(lifecycle, remove_during_read, 300)
{
	SPIN_NEED(on_p2pmem_bar(self), "the provider %s on p2pmem_bar: it has another driver",
		  self->bdf);
	provider_goes_away(_metadata, self, true);
}

/* One fixed read or write of the registered buffer @idx: its result. */
static int fixed_rw(struct io_uring *ring, bool write, int fd, void *buf,
		    size_t len, off_t off, int idx)
{
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	int res;

	sqe = io_uring_get_sqe(ring);
	if (!sqe)
		return -EBUSY;
	if (write)
		io_uring_prep_write_fixed(sqe, fd, buf, len, off, idx);
	else
		io_uring_prep_read_fixed(sqe, fd, buf, len, off, idx);
	if (io_uring_submit(ring) != 1 || io_uring_wait_cqe(ring, &cqe))
		return -EIO;
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

/*
 * A READ_FIXED of READ_LEN at @off into the registered device buffer
 * @buf (index 0), then a WRITE_FIXED of it into @scratch at @off, read
 * back into RAM.  The device memory's bytes are read by a DMA or a copy
 * of the kernel's, never through the process's mapping, which may be gone.
 * Returns 0 when both completed and the bytes are right, the first
 * negative result when one failed, 1 on wrong bytes.
 */
static int fixed_read_via(FIXTURE_DATA(lifecycle) *self,
			  struct io_uring *ring, void *buf, int scratch,
			  off_t off, unsigned char *ram, bool *inflight)
{
	bool none;
	int res;

	if (!inflight)
		inflight = &none;
	posix_fadvise(self->fd, off, READ_LEN, POSIX_FADV_DONTNEED);
	__atomic_store_n(inflight, true, __ATOMIC_RELEASE);
	res = fixed_rw(ring, false, self->fd, buf, READ_LEN, off, 0);
	if (res == (int)READ_LEN)
		res = fixed_rw(ring, true, scratch, buf, READ_LEN, off, 0);
	__atomic_store_n(inflight, false, __ATOMIC_RELEASE);
	if (res != (int)READ_LEN)
		return res < 0 ? res : -ENODATA;
	memset(ram, POISON, READ_LEN);
	if (pread(scratch, ram, READ_LEN, off) != (ssize_t)READ_LEN)
		return -EIO;
	return first_diff(ram, self->ref + off, READ_LEN) == -1 ? 0 : 1;
}

struct unbinder {
	const char *path, *val;
	int ret;
	double end;		/* when it returned */
	bool done;		/* __atomic */
};

static void *unbind_thread(void *arg)
{
	struct unbinder *u = arg;

	u->ret = sysfs_write(u->path, u->val);
	u->end = now_sec();
	__atomic_store_n(&u->done, true, __ATOMIC_RELEASE);
	return NULL;
}

struct fixed_racer {
	FIXTURE_DATA(lifecycle) *self;
	struct io_uring *ring;
	void *buf;
	unsigned char *ram;	/* READ_LEN, for the check */
	int scratch;
	uint64_t rng;
	bool stop, inflight;	/* __atomic */
	int ios, efault;	/* __atomic: reads done, EFAULT */
	double io_end;		/* __atomic: when the last one ended */
	int good, shrt, wrong, other, other_res;
};

/*
 * Fixed reads into the registered device buffer, each checked through a
 * WRITE_FIXED of it, until told to stop.  Once the provider is gone
 * every one fails with EFAULT.
 */
static void *fixed_racer(void *arg)
{
	struct fixed_racer *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		off_t off = xorshift64(&r->rng) % (FILE_SIZE / READ_LEN - 2) *
			    READ_LEN;
		double end;
		int res;

		res = fixed_read_via(r->self, r->ring, r->buf, r->scratch,
				     off, r->ram, &r->inflight);
		end = now_sec();
		__atomic_store(&r->io_end, &end, __ATOMIC_RELEASE);
		__atomic_add_fetch(&r->ios, 1, __ATOMIC_ACQ_REL);
		if (!res) {
			r->good++;
		} else if (res == -EFAULT) {
			__atomic_add_fetch(&r->efault, 1, __ATOMIC_ACQ_REL);
		} else if (res == -ENODATA) {
			r->shrt++;	/* the mapping went during the read */
		} else if (res == 1) {
			r->wrong++;
		} else {
			r->other++;
			r->other_res = res;
		}
	}
	return NULL;
}

/*
 * The provider is unbound (even rounds) or removed through sysfs (odd
 * rounds) while an io_uring has a buffer in its memory registered, next
 * to a RAM buffer, and another thread reads into the device buffer with
 * READ_FIXED, at a random moment of a read in flight (io.max holds each
 * for 250 ms).  Registration pins nothing: each fixed I/O pins for its own
 * duration, as O_DIRECT does, so the provider goes within 2 s of the end
 * of the read in flight, with the buffer still registered.  After that, fixed
 * I/O on the device buffer fails with EFAULT, and touches no device
 * memory: device memory mapped after the provider comes back keeps its
 * bytes while the old buffer is read into and written from.  The RAM
 * buffer works throughout, and no device memory is lost.
 */
TEST_F_TIMEOUT(lifecycle, unbind_with_registered_buffer, 600)
{
	int round, i, scratch, overlapped = 0;
	double start, ended;
	unsigned char *ram, *rram, *fresh;
	char path[PATH_MAX];

	SPIN_NEED(on_p2pmem_bar(self), "the provider %s on p2pmem_bar: it has another driver",
		  self->bdf);
	scratch = open(MNT "/scratch", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, scratch);
	ASSERT_EQ(0, ftruncate(scratch, FILE_SIZE));
	ram = mmap(NULL, READ_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, ram);
	rram = malloc(READ_LEN);
	ASSERT_NE(NULL, rram);
	ASSERT_EQ(0, throttle_enter(self, self->ns)) TH_LOG("no cgroup v2 io.max");
	for (round = 0; round < 6; round++) {
		bool remove = round & 1;
		struct unbinder u = {};
		struct fixed_racer r = {
			.self = self, .scratch = scratch, .ram = rram,
			.rng = self->seed ^ (round + 1),
		};
		struct iovec iov[2];
		struct io_uring ring;
		unsigned char *dev;
		pthread_t tid, rtid;
		bool met;
		int ios, res;

		dev = p2pmem_map(self->provider, READ_LEN);
		ASSERT_NE(NULL, dev);
		ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
		iov[0].iov_base = dev;
		iov[0].iov_len = READ_LEN;
		iov[1].iov_base = ram;
		iov[1].iov_len = READ_LEN;
		ASSERT_EQ(0, io_uring_register_buffers(&ring, iov, 2))
			TH_LOG("device memory cannot be registered");
		ASSERT_EQ(0, fixed_read_via(self, &ring, dev, scratch, 0, ram,
					    NULL));
		EXPECT_EQ(self->avail0 - (long long)READ_LEN,
			  p2pmem_available(self->provider));

		r.ring = &ring;
		r.buf = dev;
		ASSERT_EQ(0, pthread_create(&rtid, NULL, fixed_racer, &r));
		while (__atomic_load_n(&r.ios, __ATOMIC_ACQUIRE) < 2)
			sleep_us(1000);
		/* Into the third read, somewhere in its 250 ms. */
		for (i = 0; i < 10000 &&
		     !__atomic_load_n(&r.inflight, __ATOMIC_ACQUIRE); i++)
			sleep_us(100);
		sleep_us(xorshift64(&self->rng) % 200000);

		if (remove) {
			snprintf(path, sizeof(path), "%s/remove",
				 self->provider);
			u.path = path;
			u.val = "1";
		} else {
			u.path = DRIVER "/unbind";
			u.val = self->bdf;
		}
		ios = __atomic_load_n(&r.ios, __ATOMIC_ACQUIRE);
		met = __atomic_load_n(&r.inflight, __ATOMIC_ACQUIRE);
		overlapped += met;
		start = now_sec();
		ASSERT_EQ(0, pthread_create(&tid, NULL, unbind_thread, &u));
		/*
		 * Done within 2 s of the end of the read that was in flight
		 * (or of the start, if none was).
		 */
		ended = start;
		while (!__atomic_load_n(&u.done, __ATOMIC_ACQUIRE)) {
			if (__atomic_load_n(&r.ios, __ATOMIC_ACQUIRE) > ios)
				__atomic_load(&r.io_end, &ended,
					      __ATOMIC_ACQUIRE);
			else if (now_sec() - start < 10)
				ended = now_sec();
			if (now_sec() - ended > 2)
				break;
			sleep_us(10000);
		}
		EXPECT_TRUE(__atomic_load_n(&u.done, __ATOMIC_ACQUIRE))
			TH_LOG("round %d: %s waits for a registered buffer",
			       round, remove ? "remove" : "unbind");
		if (!__atomic_load_n(&u.done, __ATOMIC_ACQUIRE)) {
			/* Let it go, and bring the provider back for the rest. */
			__atomic_store_n(&r.stop, true, __ATOMIC_RELEASE);
			ASSERT_EQ(0, pthread_join(rtid, NULL));
			io_uring_queue_exit(&ring);
			ASSERT_EQ(0, pthread_join(tid, NULL));
			munmap(dev, READ_LEN);
			if (remove)
				sysfs_write("/sys/bus/pci/rescan", "1");
			else
				sysfs_write(DRIVER "/bind", self->bdf);
			provider_back(_metadata, self);
			break;
		}
		ASSERT_EQ(0, pthread_join(tid, NULL));
		EXPECT_EQ(0, u.ret);
		/* The racer goes on until it has met the provider's absence. */
		for (i = 0; i < 200 &&
		     !__atomic_load_n(&r.efault, __ATOMIC_ACQUIRE); i++)
			sleep_us(10000);
		__atomic_store_n(&r.stop, true, __ATOMIC_RELEASE);
		ASSERT_EQ(0, pthread_join(rtid, NULL));
		TH_LOG("round %d (%s, a read %s): %.0f ms, %d reads before it, %d right, %d short, %d EFAULT",
		       round, remove ? "remove" : "unbind",
		       met ? "in flight" : "not in flight",
		       (u.end - start) * 1000, ios, r.good, r.shrt, r.efault);
		EXPECT_EQ(0, r.wrong);
		EXPECT_EQ(0, r.other)
			TH_LOG("a fixed read failed with %d", r.other_res);
		EXPECT_LT(0, r.efault);

		/* Gone: a clean error; the RAM buffer still works. */
		EXPECT_EQ(-EFAULT, fixed_rw(&ring, false, self->fd, dev,
					    READ_LEN, 0, 0));
		memset(ram, POISON, READ_LEN);
		posix_fadvise(self->fd, 16 * MiB, READ_LEN, POSIX_FADV_DONTNEED);
		EXPECT_EQ((int)READ_LEN, fixed_rw(&ring, false, self->fd, ram,
						  READ_LEN, 16 * MiB, 1));
		EXPECT_EQ(-1, first_diff(ram, self->ref + 16 * MiB, READ_LEN));

		if (remove) {
			ASSERT_EQ(0, sysfs_write("/sys/bus/pci/rescan", "1"));
		} else {
			ASSERT_EQ(0, sysfs_write(DRIVER "/bind", self->bdf));
		}
		provider_back(_metadata, self);

		/*
		 * The provider's memory, handed out again, is not the old
		 * buffer's: reads into and writes from it fail and change
		 * nothing there.
		 */
		fresh = p2pmem_map(self->provider, self->avail0);
		ASSERT_NE(NULL, fresh);
		memset(fresh, POISON, self->avail0);
		res = fixed_rw(&ring, false, self->fd, dev, READ_LEN, 0, 0);
		EXPECT_EQ(-EFAULT, res);
		res = fixed_rw(&ring, true, scratch, dev, READ_LEN, 0, 0);
		EXPECT_EQ(-EFAULT, res);
		for (i = 0; i < self->avail0; i += 4096)
			if (fresh[i] != POISON || fresh[i + 4095] != POISON)
				break;
		EXPECT_EQ(self->avail0, i)
			TH_LOG("device memory at %d changed", i);
		munmap(fresh, self->avail0);

		io_uring_queue_exit(&ring);
		munmap(dev, READ_LEN);
		check_after(_metadata, self);
	}
	throttle_leave(self);
	/* The premise: the unbinds and removals met reads in flight. */
	EXPECT_LE(4, overlapped)
		TH_LOG("%d of 6 unbinds met a fixed read in flight", overlapped);
	free(rram);
	munmap(ram, READ_LEN);
	close(scratch);
}

TEST_HARNESS_MAIN
