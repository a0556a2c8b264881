// SPDX-License-Identifier: GPL-2.0
/*
 * Remote namespaces: a file on an NVMe over Fabrics namespace, read into
 * and written from device memory with plain pread()/pwrite().
 *
 * The guest is its own NVMe over Fabrics target (nvmet, configured
 * through configfs) and host: rig drive 2 is exported as namespace 1 of
 * one subsystem, over the loop transport or over TCP on 127.0.0.1, and
 * the host connects to it through /dev/nvme-fabrics.  XFS is made on the
 * namespace the host sees.  The drive behind it takes P2PDMA pages and
 * reaches the device memory, but the remote namespace does not: the loop
 * and TCP host drivers do not set BLK_FEAT_PCI_P2PDMA (their ctrl ops have
 * no supports_pci_p2pdma), so neither does the multipath head over them.
 *
 * So a buffered read into device memory and a buffered write from it
 * return the right bytes through the page cache (the router's
 * fallback_no_p2p_queue grows, and not one DMA is tried: p2p_bytes,
 * p2p_write_bytes and the other counters of routed I/O do not move);
 * O_DIRECT into or from device memory fails with EREMOTEIO, because GUP
 * refuses P2PDMA pages for a queue without the flag, and nothing changes
 * in the buffer or on disk; and the kernel log stays quiet.
 *
 * nvmet's own "p2pmem" namespace attribute (configfs.c,
 * nvmet_ns_p2pmem_store()) is tried too, with the provider's PCI name
 * and with "1": nvmet_p2pmem_ns_enable() accepts it on a block-device
 * namespace whose queue takes P2PDMA pages (rig drive 2) when the
 * provider is reachable from it, so the namespace enables.  But only a
 * controller with a p2p_client ever gets p2pmem for its data:
 * nvmet_setup_p2p_ns_map() and nvmet_p2pmem_ns_add_p2p() map the
 * namespace to a provider only when the connecting request has
 * req->p2p_client, which in 6.12 only the RDMA transport sets
 * (nvmet_rdma_alloc_rsp(), for a device that can do P2P DMA).  Neither
 * loop nor TCP does; nor do they call nvmet_req_alloc_sgls() at all
 * (loop hands the host's own scatterlist to the target, TCP uses
 * sgl_alloc()).  So with loop and TCP the attribute changes nothing:
 * p2pmem/available of the provider stays put during I/O, and
 * nvmet_p2pmem_ns_add_p2p()'s "using p2pmem" line never shows.  The
 * nvmet_p2pmem tests check the attribute's refusals: a PCI device with
 * no p2pmem or none at all (ENODEV), a change while the namespace is
 * enabled (EBUSY), a file-backed namespace and a provider the drive
 * cannot reach (enable fails with EINVAL).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* O_DIRECT, strcasestr(); lib.mk passes it too */
#endif
#include <net/if.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "spin_util.h"
#include "../kselftest_harness.h"

#define NVMET		CONFIGFS "/nvmet"	/* CONFIGFS: spin_util.h */
/* One subsystem and one port, made and removed by every case. */
#define NQN		"nqn.2014-08.org.spin-rig:remote"
#define SUBSYS		NVMET "/subsystems/" NQN
#define NS_DIR		SUBSYS "/namespaces/1"
#define PORT		NVMET "/ports/1"
#define PORT_LINK	PORT "/subsystems/" NQN
/* Not SPINRIG*: nvme_rig_ns() must never count the remote namespace. */
#define SERIAL		"SPINREMOTE"
#define TCP_ADDR	"127.0.0.1"
#define TCP_SVCID	"4420"
#define FABRICS_DEV	"/dev/nvme-fabrics"
#define NVME_CLASS	"/sys/class/nvme"
#define MNT		"/mnt/spin-remote"
#define FILE_IMG	"/tmp/spin-remote.img"

#define DATA_SIZE	(8 * MiB + 3 * 4 * KiB + 100)	/* odd on purpose */
#define MAP_LEN		(8 * MiB)

/* queue/pci_p2pdma of a block device by name ("nvme2n1"), or -1 */
static int queue_p2p(const char *ns)
{
	return queue_limit(ns, "pci_p2pdma");
}

/*
 * The kernel log from now on: /dev/kmsg, positioned at its end, so that
 * each read returns one record logged after this call.  (Counting the
 * lines of dmesg before and after would break when the ring wraps.)
 */
static int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0 && lseek(fd, 0, SEEK_END) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Words that make a kernel log line suspect, whatever its level: an
 * error, a failure, a refused P2P mapping, a P2PDMA message (nvmet's
 * "using p2pmem on ..." included), a hung or timed-out command.  "BUG",
 * "WARNING" and "Oops" only as the kernel writes them in a report: "bug"
 * in any case would match "debug".
 */
static bool kmsg_suspect(const char *msg)
{
	static const char *const words[] = {
		"error", "fail", "eremoteio", "p2p", "peer-to-peer",
		"call trace", "timeout", "timed out", "expired", "blocked",
	};
	static const char *const reports[] = { "BUG", "WARNING", "Oops" };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(words); i++)
		if (strcasestr(msg, words[i]))
			return true;
	for (i = 0; i < ARRAY_SIZE(reports); i++)
		if (strstr(msg, reports[i]))
			return true;
	return false;
}

/*
 * Lines that the rig logs in normal operation and that kmsg_suspect()
 * or their level would flag.  None is known today: connecting, the scan,
 * mounting XFS and disconnecting log only KERN_INFO and KERN_NOTICE lines
 * without those words ("nvmet: creating nvm controller 1 for subsystem
 * ...", "nvme nvme4: new ctrl: ...", "nvmet_tcp: enabling port 1 ...",
 * "XFS (nvme4n1): Mounting V5 Filesystem ...", "nvme nvme4: Removing
 * ctrl: ...").  The rig itself logs one.  Add one here only with the
 * reason it is harmless.
 */
static const char *const kmsg_benign[] = {
	/*
	 * KERN_WARNING, once a boot, from hrtimer_interrupt() when one
	 * timer interrupt ran longer than it should: under TCG, whenever
	 * the host preempts a vCPU thread (seen once in a fresh-clone
	 * run on 2026-11-26, "interrupt took 4961933 ns").  It is about
	 * the emulator's timing, not the code under test.
	 */
	"hrtimer: interrupt took ",
	NULL,
};

/*
 * Read every kernel log record since kmsg_open() (or the last call), and
 * count the lines that say something went wrong: logged by the kernel
 * at KERN_WARNING or worse, or matching kmsg_suspect(), and not in
 * kmsg_benign[].  Each is logged.  A line containing @expect (may be
 * NULL) is logged as expected and counted in *@seen instead.
 */
static int kmsg_trouble(struct __test_metadata *_metadata, int fd,
			const char *expect, int *seen)
{
	char rec[8192], *msg, *end;
	int trouble = 0, records, i;
	unsigned int pri;
	ssize_t n;

	if (fd < 0)
		return 1;
	for (records = 0; records < 100000; records++) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten: on to the next one */
		if (n <= 0)
			break;		/* EAGAIN: no more records */
		rec[n] = '\0';
		msg = strchr(rec, ';');
		if (sscanf(rec, "%u,", &pri) != 1 || !msg)
			continue;
		msg++;
		/* The message ends at its newline; " KEY=value" lines follow. */
		end = strchr(msg, '\n');
		if (end)
			*end = '\0';
		/* Facility 0 is the kernel; user space writes to kmsg too. */
		if (pri >> 3)
			continue;
		if (expect && strstr(msg, expect)) {
			TH_LOG("kernel log (expected): %s", msg);
			if (seen)
				(*seen)++;
			continue;
		}
		if ((pri & 7) > 4 && !kmsg_suspect(msg))
			continue;
		for (i = 0; kmsg_benign[i]; i++)
			if (strstr(msg, kmsg_benign[i]))
				break;
		if (kmsg_benign[i])
			continue;
		TH_LOG("kernel log: <%u> %s", pri & 7, msg);
		trouble++;
	}
	return trouble;
}

/* Bring up lo (the guest's init does not), for nvme-tcp on 127.0.0.1. */
static int loopback_up(void)
{
	struct ifreq ifr;
	int s, ret = 0;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr)) {
		ret = -errno;
	} else if (!(ifr.ifr_flags & IFF_UP)) {
		/* Up, lo gets 127.0.0.1/8 from the kernel (inetdev_event()). */
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr))
			ret = -errno;
	}
	close(s);
	return ret;
}

/*
 * nvmet (CONFIG_NVME_TARGET) and the fabrics host's transports, loaded if
 * they are modules (a host kernel's are: nvmet, nvme-loop, nvmet-tcp,
 * nvme-tcp, which bring in nvme-fabrics and its /dev/nvme-fabrics), and
 * configfs mounted where nvmet expects it, if it is not.  0 when nvmet is
 * there; the cases assert it, a kernel feature.
 */
static int nvmet_configfs(void)
{
	if (access(NVMET, F_OK))
		run_cmd("modprobe -a nvmet nvme-loop nvmet-tcp nvme-tcp 2>/dev/null");
	mount_once("configfs", CONFIGFS, CONFIGFS_MAGIC_NR);
	return access(NVMET, F_OK) ? -ENOENT : 0;
}

/*
 * Connect through the kernel's own interface, as nvme-cli (libnvme)
 * does: write the options to /dev/nvme-fabrics and read back
 * "instance=N,cntlid=M" from the same open file.  The new controller's
 * instance (nvmeN), or -errno.
 */
static int fabrics_connect(const char *opts)
{
	int fd, inst, cntlid, err;
	char buf[128];
	ssize_t n;

	fd = open(FABRICS_DEV, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, opts, strlen(opts)) != (ssize_t)strlen(opts)) {
		err = errno;
		close(fd);
		return -err;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	if (sscanf(buf, "instance=%d,cntlid=%d", &inst, &cntlid) != 2)
		return -EIO;
	return inst;
}

/*
 * Delete every host controller connected to our subsystem (nvme-cli's
 * "disconnect -n": delete_controller in sysfs, which waits for the
 * removal).  Returns how many are left.
 */
static int fabrics_disconnect(void)
{
	struct dirent **names;
	int n, i, left = 0;

	n = scandir(NVME_CLASS, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		char path[PATH_MAX], nqn[256];

		snprintf(path, sizeof(path), NVME_CLASS "/%s/subsysnqn",
			 names[i]->d_name);
		if (!sysfs_read(path, nqn, sizeof(nqn)) && !strcmp(nqn, NQN)) {
			snprintf(path, sizeof(path),
				 NVME_CLASS "/%s/delete_controller",
				 names[i]->d_name);
			sysfs_write(path, "1");
			snprintf(path, sizeof(path), NVME_CLASS "/%s",
				 names[i]->d_name);
			left += !access(path, F_OK);
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return left;
}

/*
 * Tear down everything a case may have left, in the order the kernel
 * needs: the file system, the host's controllers (nothing may use the
 * namespace), the port's link to the subsystem (which disables the port),
 * the namespace (disabled, then removed), the subsystem, the port.
 * Every step is harmless when there is nothing to undo, so it also
 * cleans up after a case whose setup failed halfway (the harness runs no
 * teardown then).  Returns 0 when nothing of ours is left.
 */
static int remote_cleanup(void)
{
	int left;

	if (umount2(MNT, 0) && errno != EINVAL && errno != ENOENT)
		umount2(MNT, MNT_DETACH);
	left = fabrics_disconnect();
	if (!access(NVMET, F_OK)) {
		unlink(PORT_LINK);
		sysfs_write(NS_DIR "/enable", "0");
		rmdir(NS_DIR);
		rmdir(SUBSYS);
		rmdir(PORT);
		left += !access(SUBSYS, F_OK) + !access(PORT, F_OK);
	}
	unlink(FILE_IMG);
	return left;
}

/* Zero the first MiB of /dev/@ns: no old md or file system signature. */
static int wipe_head(const char *ns)
{
	char path[PATH_MAX], *zero = calloc(1, MiB);
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/dev/%s", ns);
	fd = open(path, O_WRONLY);
	if (fd < 0 || !zero)
		ret = -ENOENT;
	else if (pwrite(fd, zero, MiB, 0) != (ssize_t)MiB || fsync(fd))
		ret = -EIO;
	if (fd >= 0)
		close(fd);
	free(zero);
	return ret;
}

/* The subsystem, with nsid 1 on @device_path, not yet enabled. */
static int nvmet_subsys_make(const char *device_path)
{
	if (mkdir(SUBSYS, 0755) || mkdir(NS_DIR, 0755))
		return -errno;
	return sysfs_write(SUBSYS "/attr_allow_any_host", "1") ?:
	       sysfs_write(SUBSYS "/attr_serial", SERIAL) ?:
	       sysfs_write(NS_DIR "/device_path", device_path);
}

/* The port for @transport, linked to the subsystem (which enables it). */
static int nvmet_port_make(const char *transport)
{
	int ret;

	if (mkdir(PORT, 0755))
		return -errno;
	ret = sysfs_write(PORT "/addr_trtype", transport);
	if (!ret && !strcmp(transport, "tcp"))
		ret = loopback_up() ?:
		      sysfs_write(PORT "/addr_adrfam", "ipv4") ?:
		      sysfs_write(PORT "/addr_traddr", TCP_ADDR) ?:
		      sysfs_write(PORT "/addr_trsvcid", TCP_SVCID);
	if (ret)
		return ret;
	return symlink(SUBSYS, PORT_LINK) ? -errno : 0;
}

/*
 * The host's block device for our namespace: the disk in /sys/block
 * whose device (the controller or, with native multipath, the subsystem
 * that holds the head) has our NQN.  The hidden path devices
 * ("nvme4c4n1") are skipped.  0 and its name in @ns, or -ENOENT.
 */
static int remote_ns_find(char *ns, size_t len)
{
	struct dirent **names;
	int n, i, found = -ENOENT;

	n = scandir("/sys/block", &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		const char *d = names[i]->d_name;
		char path[PATH_MAX], nqn[256];

		snprintf(path, sizeof(path), "/sys/block/%s/device/subsysnqn",
			 d);
		if (found && !strncmp(d, "nvme", 4) && !strchr(d + 4, 'c') &&
		    !sysfs_read(path, nqn, sizeof(nqn)) && !strcmp(nqn, NQN)) {
			snprintf(path, sizeof(path), "/dev/%s", d);
			if (!access(path, F_OK)) {
				snprintf(ns, len, "%s", d);
				found = 0;
			}
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return found;
}

/*
 * queue/pci_p2pdma of every disk of controller nvme@ctrl (its path
 * devices under multipath): how many there are, and how many have it.
 */
static int ctrl_disks_p2p(int ctrl, int *disks)
{
	struct dirent **names;
	int n, i, p2p = 0;
	char dir[PATH_MAX];

	*disks = 0;
	snprintf(dir, sizeof(dir), NVME_CLASS "/nvme%d", ctrl);
	n = scandir(dir, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		char path[PATH_MAX + NAME_MAX + 32];
		long long v;

		snprintf(path, sizeof(path), "%s/%s/queue/pci_p2pdma", dir,
			 names[i]->d_name);
		if (!strncmp(names[i]->d_name, "nvme", 4) &&
		    !sysfs_read_ll(path, &v) && v >= 0) {
			(*disks)++;
			p2p += v == 1;
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	return p2p;
}

/*
 * p2pmem/available of a provider, sampled as fast as it can be read
 * while I/O runs in another thread: the lowest and highest seen.
 */
struct avail_sampler {
	pthread_t thread;
	const char *provider;
	long long min, max;
	long samples;
	int stop;
};

static void *sampler_main(void *arg)
{
	struct avail_sampler *s = arg;

	do {
		long long a = p2pmem_available(s->provider);

		if (!s->samples || a < s->min)
			s->min = a;
		if (!s->samples || a > s->max)
			s->max = a;
		s->samples++;
	} while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE));
	return NULL;
}

static int sampler_start(struct avail_sampler *s, const char *provider)
{
	memset(s, 0, sizeof(*s));
	s->provider = provider;
	return pthread_create(&s->thread, NULL, sampler_main, s);
}

static void sampler_stop(struct avail_sampler *s)
{
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	pthread_join(s->thread, NULL);
}

/*
 * The counters that move only when the router takes a read or write
 * past its first test (the queue's BLK_FEAT_PCI_P2PDMA), or tries a DMA.
 */
static const char *const routed_stats[] = {
	"routed_reads", "p2p_segments", "p2p_bytes", "routed_writes",
	"p2p_write_bytes", "fallback_eremoteio", "fallback_unreachable",
	"async_reads",
};

struct routed_snap {
	long long v[ARRAY_SIZE(routed_stats)];
};

static void routed_read(struct routed_snap *s)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(routed_stats); i++)
		s->v[i] = router_stat(routed_stats[i]);
}

/* None of routed_stats[] moved since @before. */
static void routed_none(struct __test_metadata *_metadata,
			const struct routed_snap *before)
{
	struct routed_snap now;
	unsigned int i;

	routed_read(&now);
	for (i = 0; i < ARRAY_SIZE(routed_stats); i++) {
		if (now.v[i] != before->v[i])
			TH_LOG("%s moved: %lld -> %lld", routed_stats[i],
			       before->v[i], now.v[i]);
		EXPECT_LE(0, before->v[i]);
		EXPECT_EQ(before->v[i], now.v[i]);
	}
}

FIXTURE(remote) {
	char rig0[NAME_MAX + 1];	/* the provider is found from it */
	char backing[NAME_MAX + 1];	/* rig drive 2: nvmet's namespace */
	char provider[SYSFS_LEN];
	char p2pmem[64];		/* what nvmet's p2pmem was set to */
	char ns[NAME_MAX + 1];		/* the remote namespace */
	char path[PATH_MAX];		/* the file on it */
	char enabled[16];		/* the router's switch, restored */
	int ctrl;			/* nvme<ctrl>, the host controller */
	int kmsg;
	int fd;				/* closed by the teardown */
	unsigned char *dev;		/* MAP_LEN of device memory */
	unsigned char *model;		/* DATA_SIZE: what the file holds */
	long long avail;		/* p2pmem/available, dev mapped */
	uint64_t seed;
	bool knob_saved;
};

enum nvmet_p2pmem { P2PMEM_OFF, P2PMEM_AUTO, P2PMEM_PROVIDER };

FIXTURE_VARIANT(remote) {
	const char *transport;		/* "loop" or "tcp" */
	enum nvmet_p2pmem p2pmem;	/* nvmet's p2pmem on the namespace */
};

FIXTURE_VARIANT_ADD(remote, loop) {
	.transport = "loop", .p2pmem = P2PMEM_OFF };
FIXTURE_VARIANT_ADD(remote, tcp) {
	.transport = "tcp", .p2pmem = P2PMEM_OFF };
/* p2pmem set to the provider's PCI name */
FIXTURE_VARIANT_ADD(remote, loop_p2pmem) {
	.transport = "loop", .p2pmem = P2PMEM_PROVIDER };
/* p2pmem set to "1": nvmet finds a provider itself */
FIXTURE_VARIANT_ADD(remote, tcp_p2pmem) {
	.transport = "tcp", .p2pmem = P2PMEM_AUTO };

/*
 * Export the backing drive over @variant's transport, connect to it and
 * make XFS with a file on the namespace the host sees.  0, or -errno
 * with the step that failed in *@step.
 */
static int remote_start(FIXTURE_DATA(remote) *self,
			const FIXTURE_VARIANT(remote) *variant,
			const char **step)
{
	char dev[NAME_MAX + 8], opts[256];
	int ret, i;

	*step = "wiping the backing drive";
	ret = wipe_head(self->backing);
	if (ret)
		return ret;
	*step = "making the nvmet subsystem and namespace";
	snprintf(dev, sizeof(dev), "/dev/%s", self->backing);
	ret = nvmet_subsys_make(dev);
	if (ret)
		return ret;
	if (variant->p2pmem != P2PMEM_OFF) {
		*step = "setting nvmet's p2pmem";
		ret = sysfs_write(NS_DIR "/p2pmem", self->p2pmem);
		if (ret)
			return ret;
	}
	/* With p2pmem: nvmet_p2pmem_ns_enable() must accept it. */
	*step = "enabling the namespace";
	ret = sysfs_write(NS_DIR "/enable", "1");
	if (ret)
		return ret;
	*step = "making the port";
	ret = nvmet_port_make(variant->transport);
	if (ret)
		return ret;

	*step = "connecting";
	if (!strcmp(variant->transport, "tcp"))
		snprintf(opts, sizeof(opts),
			 "transport=tcp,traddr=" TCP_ADDR ",trsvcid=" TCP_SVCID ",nqn=" NQN);
	else
		snprintf(opts, sizeof(opts), "transport=loop,nqn=" NQN);
	self->ctrl = fabrics_connect(opts);
	if (self->ctrl < 0)
		return self->ctrl;

	/* The namespace shows up when the controller's scan has run. */
	*step = "waiting for the namespace";
	for (i = 0; i < 300 && remote_ns_find(self->ns, sizeof(self->ns));
	     i++)
		usleep(100000);
	if (!self->ns[0])
		return -ENOENT;

	*step = "making XFS on the remote namespace";
	ret = mkfs_mount("xfs", self->ns, MNT);
	if (ret)
		return ret;

	/* The file, written from RAM; none of it left in the page cache. */
	*step = "writing the file";
	snprintf(self->path, sizeof(self->path), MNT "/data");
	self->model = malloc(DATA_SIZE);
	if (!self->model)
		return -ENOMEM;
	pattern_fill(self->model, DATA_SIZE, 0, self->seed);
	ret = write_pattern_file(self->path, DATA_SIZE, self->seed);
	if (ret)
		return ret;
	ret = drop_caches();
	if (ret)
		return ret;

	*step = "mapping device memory";
	self->dev = p2pmem_map(self->provider, MAP_LEN);
	if (!self->dev)
		return -errno;
	self->avail = p2pmem_available(self->provider);
	return self->avail < 0 ? -EIO : 0;
}

FIXTURE_SETUP(remote)
{
	const char *step = "";
	char pci[SYSFS_LEN];
	int ret;

	self->kmsg = -1;
	self->fd = -1;
	self->ctrl = -1;
	ASSERT_EQ(0, remote_cleanup())
		TH_LOG("an earlier case left %s or %s behind", SUBSYS, PORT);
	self->kmsg = kmsg_open();
	ASSERT_LE(0, self->kmsg);
	ASSERT_EQ(0, access(P2P_ROUTER "/stats/fallback_no_p2p_queue", F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	ASSERT_EQ(0, nvmet_configfs())
		TH_LOG("no %s: nvmet or configfs not in this kernel (CONFIG_NVME_TARGET)",
		       NVMET);
	ASSERT_EQ(0, access(FABRICS_DEV, F_OK))
		TH_LOG("no %s: NVMe over Fabrics host not in this kernel (CONFIG_NVME_FABRICS)",
		       FABRICS_DEV);
	SPIN_NEED(!nvme_rig_ns(0, self->rig0, sizeof(self->rig0)),
		  SPIN_RIG_DRIVE_FMT, 0, 3);
	SPIN_NEED(!nvme_rig_ns(2, self->backing, sizeof(self->backing)),
		  SPIN_RIG_DRIVE_FMT, 2, 3);
	SPIN_NEED(!p2pmem_find_for_ns(self->rig0, true, self->provider,
				      sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->rig0);
	/*
	 * The premise: the drive behind the namespace could DMA into the
	 * memory itself; only the fabric in between cannot.
	 */
	ASSERT_EQ(0, nvme_pci_dev(self->backing, pci, sizeof(pci)));
	SPIN_NEED(pci_share_switch(self->provider, pci),
		  "a provider that %s and %s reach: %s does not reach %s",
		  self->rig0, self->backing, self->backing, self->provider);
	ASSERT_EQ(1, queue_p2p(self->backing));

	if (variant->p2pmem == P2PMEM_PROVIDER)
		snprintf(self->p2pmem, sizeof(self->p2pmem), "%s",
			 strrchr(self->provider, '/') + 1);
	else
		snprintf(self->p2pmem, sizeof(self->p2pmem), "%d",
			 variant->p2pmem == P2PMEM_AUTO);
	self->seed = getpid() ^ 0x7e30ULL << 32;

	ret = remote_start(self, variant, &step);
	if (!ret) {
		/* On, so that the router is asked and counts its answer. */
		step = "turning the router on";
		ret = sysfs_read(P2P_ROUTER "/enabled", self->enabled,
				 sizeof(self->enabled));
		if (!ret) {
			self->knob_saved = true;
			ret = sysfs_write(P2P_ROUTER "/enabled", "1");
		}
	}
	/*
	 * The harness runs no teardown after a failed setup: clean up here,
	 * so that the next case (or program) finds no namespace mounted.
	 */
	if (ret) {
		if (self->knob_saved)
			sysfs_write(P2P_ROUTER "/enabled", self->enabled);
		remote_cleanup();
	}
	ASSERT_EQ(0, ret)
		TH_LOG("%s over %s: %s", step, variant->transport,
		       strerror(-ret));
	TH_LOG("%s over %s from %s (nvme%d), provider %s, nvmet p2pmem %s, seed %llu",
	       self->ns, variant->transport, self->backing, self->ctrl,
	       self->provider, self->p2pmem, (unsigned long long)self->seed);
}

FIXTURE_TEARDOWN(remote)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->dev)
		munmap(self->dev, MAP_LEN);
	free(self->model);
	EXPECT_EQ(0, remote_cleanup())
		TH_LOG("%s or %s could not be removed", SUBSYS, PORT);
	if (self->knob_saved)
		EXPECT_EQ(0, sysfs_write(P2P_ROUTER "/enabled", self->enabled));
	if (self->kmsg >= 0)
		close(self->kmsg);
}

/* Nothing in the kernel log since setup began says something went wrong. */
static void kmsg_quiet(struct __test_metadata *_metadata,
		       FIXTURE_DATA(remote) *self)
{
	ASSERT_EQ(0, kmsg_trouble(_metadata, self->kmsg, NULL, NULL));
}

/*
 * What the namespace is: on our transport, with our NQN and serial; its
 * queue, and that of every path under the controller, without P2PDMA,
 * while the drive behind it has it; nvmet's namespace enabled, p2pmem
 * as set; and no controller was given p2pmem (no "using p2pmem" line).
 */
TEST_F_TIMEOUT(remote, feature_flag, 300)
{
	char path[PATH_MAX], buf[256];
	long long enable;
	int disks, p2p;

	snprintf(path, sizeof(path), NVME_CLASS "/nvme%d/transport",
		 self->ctrl);
	ASSERT_EQ(0, sysfs_read(path, buf, sizeof(buf)));
	ASSERT_STREQ(variant->transport, buf);
	snprintf(path, sizeof(path), NVME_CLASS "/nvme%d/subsysnqn",
		 self->ctrl);
	ASSERT_EQ(0, sysfs_read(path, buf, sizeof(buf)));
	ASSERT_STREQ(NQN, buf);
	snprintf(path, sizeof(path), "/sys/block/%s/device/serial", self->ns);
	ASSERT_EQ(0, sysfs_read(path, buf, sizeof(buf)));
	ASSERT_STREQ(SERIAL, buf);

	p2p = ctrl_disks_p2p(self->ctrl, &disks);
	TH_LOG("queue/pci_p2pdma: %s %d, %d of nvme%d's %d disks, %s %d",
	       self->ns, queue_p2p(self->ns), p2p, self->ctrl, disks,
	       self->backing, queue_p2p(self->backing));
	ASSERT_EQ(0, queue_p2p(self->ns));
	ASSERT_LE(1, disks);
	ASSERT_EQ(0, p2p);
	ASSERT_EQ(1, queue_p2p(self->backing));

	ASSERT_EQ(0, sysfs_read_ll(NS_DIR "/enable", &enable));
	ASSERT_EQ(1, enable);
	ASSERT_EQ(0, sysfs_read(NS_DIR "/p2pmem", buf, sizeof(buf)));
	ASSERT_STREQ(self->p2pmem, buf);
	kmsg_quiet(_metadata, self);
}

/*
 * Cold buffered reads into device memory (one across EOF): the right
 * bytes, copied through the page cache.  Each read counts
 * fallback_no_p2p_queue, none is routed or DMAed, and nvmet takes no
 * p2pmem from the provider while they run.
 */
TEST_F_TIMEOUT(remote, buffered_read, 300)
{
	static const struct { size_t len; off_t off; } cases[] = {
		{ 4 * MiB + 17, 12345 },
		{ 1 * MiB, 0 },			/* aligned: DMA-able */
		{ 2 * MiB, 2 * MiB },
		{ 64 * KiB, 8 * MiB - 4 * KiB },	/* across EOF */
	};
	unsigned char *ref = malloc(MAP_LEN);
	struct avail_sampler s;
	struct routed_snap r0;
	unsigned int i;
	size_t j;

	ASSERT_NE(NULL, ref);
	routed_read(&r0);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len = cases[i].len;
		off_t off = cases[i].off;
		size_t want = DATA_SIZE - off < len ? DATA_SIZE - off : len;
		long long q0, q1;
		ssize_t n;
		int err;

		/* The reference, into RAM, agrees with the pattern. */
		self->fd = open(self->path, O_RDONLY);
		ASSERT_LE(0, self->fd);
		ASSERT_EQ((ssize_t)want, pread(self->fd, ref, len, off));
		ASSERT_EQ(-1, first_diff(ref, self->model + off, want));
		ASSERT_EQ(0, drop_caches());

		memset(self->dev, POISON, len);
		ASSERT_EQ(0, sampler_start(&s, self->provider));
		q0 = router_stat("fallback_no_p2p_queue");
		n = pread(self->fd, self->dev, len, off);
		err = errno;
		q1 = router_stat("fallback_no_p2p_queue");
		sampler_stop(&s);
		close(self->fd);
		self->fd = -1;
		TH_LOG("%zu at %lld: %zd (%s), fallback_no_p2p_queue +%lld, p2pmem/available %lld..%lld (%ld samples, %lld mapped)",
		       len, (long long)off, n, n < 0 ? strerror(err) : "ok",
		       q1 - q0, s.min, s.max, s.samples, self->avail);
		ASSERT_EQ((ssize_t)want, n);
		ASSERT_EQ(-1, first_diff(self->dev, ref, want));
		for (j = want; j < len && self->dev[j] == POISON; j++)
			;
		ASSERT_EQ(len, j) TH_LOG("byte %zu past EOF written", j);
		ASSERT_LE(1, q1 - q0)
			TH_LOG("the router was not asked, or did not count it");
		ASSERT_LT(0, s.samples);
		ASSERT_EQ(self->avail, s.min);
		ASSERT_EQ(self->avail, s.max);
	}
	routed_none(_metadata, &r0);
	free(ref);
	kmsg_quiet(_metadata, self);
}

/*
 * Buffered writes from device memory (unaligned, and aligned ones whose
 * middle the router would DMA on a local drive): each counts
 * fallback_no_p2p_queue and is copied through the page cache, nothing is
 * routed or DMAed, and the file then reads back right, cold, into RAM
 * and into device memory.  p2pmem/available stays put throughout.
 */
TEST_F_TIMEOUT(remote, buffered_write, 300)
{
	static const struct { size_t len; off_t off; } cases[] = {
		{ 3 * MiB + 5, 4097 },
		{ 2 * MiB, 4 * MiB },		/* aligned: DMA-able */
		{ 100 * KiB, DATA_SIZE - 50 * KiB },	/* grows the file */
	};
	size_t size = DATA_SIZE, len;
	unsigned char *ref, *model;
	struct avail_sampler s;
	struct routed_snap r0;
	const char *what;
	unsigned int i;
	long long q0, q1;
	ssize_t n;
	int err;

	/* The model grows with the last write; room for it. */
	model = realloc(self->model, DATA_SIZE + 64 * KiB);
	ASSERT_NE(NULL, model);
	self->model = model;
	routed_read(&r0);
	self->fd = open(self->path, O_RDWR);
	ASSERT_LE(0, self->fd);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		len = cases[i].len;
		pattern_fill(self->dev, len, cases[i].off,
			     self->seed + 1 + i);
		ASSERT_EQ(0, sampler_start(&s, self->provider));
		q0 = router_stat("fallback_no_p2p_queue");
		n = pwrite(self->fd, self->dev, len, cases[i].off);
		err = errno;
		q1 = router_stat("fallback_no_p2p_queue");
		sampler_stop(&s);
		what = n < 0 ? strerror(err) : "ok";
		TH_LOG("write of %zu at %lld: %zd (%s), fallback_no_p2p_queue +%lld, p2pmem/available %lld..%lld (%ld samples)",
		       len, (long long)cases[i].off, n, what, q1 - q0, s.min,
		       s.max, s.samples);
		ASSERT_EQ((ssize_t)len, n);
		ASSERT_LE(1, q1 - q0)
			TH_LOG("the router was not asked, or did not count it");
		ASSERT_LT(0, s.samples);
		ASSERT_EQ(self->avail, s.min);
		ASSERT_EQ(self->avail, s.max);
		memcpy(self->model + cases[i].off, self->dev, len);
		if ((size_t)cases[i].off + len > size)
			size = cases[i].off + len;
	}
	ASSERT_EQ(0, fsync(self->fd));
	close(self->fd);
	self->fd = -1;
	routed_none(_metadata, &r0);

	/*
	 * Cold, into RAM (one byte more: the file ends where it should),
	 * then into device memory.
	 */
	ref = malloc(size + 1);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, drop_caches());
	self->fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ((ssize_t)size, pread(self->fd, ref, size + 1, 0));
	ASSERT_EQ(-1, first_diff(ref, self->model, size));
	ASSERT_EQ(0, drop_caches());
	len = size < MAP_LEN ? size : MAP_LEN;
	memset(self->dev, POISON, len);
	ASSERT_EQ((ssize_t)len, pread(self->fd, self->dev, len, 0));
	ASSERT_EQ(-1, first_diff(self->dev, self->model, len));
	close(self->fd);
	self->fd = -1;
	free(ref);
	kmsg_quiet(_metadata, self);
}

/*
 * O_DIRECT into device memory: EREMOTEIO (the namespace's queue lacks
 * BLK_FEAT_PCI_P2PDMA, so bio_iov_iter_get_pages() does not ask GUP for
 * P2PDMA pages, and GUP refuses them), the buffer untouched, nothing
 * tried by the router; O_DIRECT into RAM works on the same file, and the
 * file is unchanged.
 */
TEST_F_TIMEOUT(remote, odirect_read, 300)
{
	size_t len = 1 * MiB;
	off_t off = 2 * MiB;
	struct routed_snap r0;
	unsigned char *ram;
	ssize_t n;
	size_t i;
	int err;

	ASSERT_EQ(0, posix_memalign((void **)&ram, 4096, len));
	routed_read(&r0);
	self->fd = open(self->path, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, self->fd);
	memset(self->dev, POISON, len);
	n = pread(self->fd, self->dev, len, off);
	err = errno;
	TH_LOG("O_DIRECT into device memory: %zd (%s)", n,
	       n < 0 ? strerror(err) : "");
	ASSERT_EQ(-1, n);
	ASSERT_EQ(EREMOTEIO, err);
	for (i = 0; i < len && self->dev[i] == POISON; i++)
		;
	ASSERT_EQ(len, i) TH_LOG("byte %zu of the buffer was written", i);

	/* The control: O_DIRECT itself works on this file. */
	ASSERT_EQ((ssize_t)len, pread(self->fd, ram, len, off));
	ASSERT_EQ(-1, first_diff(ram, self->model + off, len));
	close(self->fd);
	self->fd = -1;
	routed_none(_metadata, &r0);

	ASSERT_EQ(0, drop_caches());
	self->fd = open(self->path, O_RDONLY);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ((ssize_t)len, pread(self->fd, ram, len, off));
	ASSERT_EQ(-1, first_diff(ram, self->model + off, len));
	close(self->fd);
	self->fd = -1;
	free(ram);
	kmsg_quiet(_metadata, self);
}

/*
 * O_DIRECT from device memory: EREMOTEIO and nothing changed on disk
 * (read back cold); the same bytes from RAM by O_DIRECT do land.
 */
TEST_F_TIMEOUT(remote, odirect_write, 300)
{
	size_t len = 1 * MiB;
	off_t off = 1 * MiB;
	struct routed_snap r0;
	unsigned char *ram;
	ssize_t n;
	int err;

	ASSERT_EQ(0, posix_memalign((void **)&ram, 4096, len));
	routed_read(&r0);
	pattern_fill(self->dev, len, off, self->seed + 9);
	self->fd = open(self->path, O_RDWR | O_DIRECT);
	ASSERT_LE(0, self->fd);
	n = pwrite(self->fd, self->dev, len, off);
	err = errno;
	TH_LOG("O_DIRECT from device memory: %zd (%s)", n,
	       n < 0 ? strerror(err) : "");
	ASSERT_EQ(-1, n);
	ASSERT_EQ(EREMOTEIO, err);
	ASSERT_EQ(0, fsync(self->fd));
	close(self->fd);
	self->fd = -1;
	routed_none(_metadata, &r0);

	ASSERT_EQ(0, drop_caches());
	self->fd = open(self->path, O_RDWR | O_DIRECT);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ((ssize_t)len, pread(self->fd, ram, len, off));
	ASSERT_EQ(-1, first_diff(ram, self->model + off, len))
		TH_LOG("the refused write changed the file");

	/* The control: the same bytes from RAM are written. */
	pattern_fill(ram, len, off, self->seed + 9);
	ASSERT_EQ((ssize_t)len, pwrite(self->fd, ram, len, off));
	ASSERT_EQ(0, fsync(self->fd));
	memset(ram, POISON, len);
	ASSERT_EQ((ssize_t)len, pread(self->fd, ram, len, off));
	pattern_fill(self->model + off, len, off, self->seed + 9);
	ASSERT_EQ(-1, first_diff(ram, self->model + off, len));
	close(self->fd);
	self->fd = -1;
	free(ram);
	kmsg_quiet(_metadata, self);
}

/*
 * nvmet's p2pmem attribute on its own, on a namespace that is never
 * connected to: what the 6.12 code accepts and refuses.
 * pci_p2pdma_enable_store() takes "0", "1" or the PCI name of a device
 * that publishes p2pmem (pci_has_p2pmem()), else ENODEV;
 * nvmet_ns_p2pmem_store() refuses a change while the namespace is
 * enabled (EBUSY); nvmet_p2pmem_ns_enable() fails the enable with EINVAL
 * for a namespace that is not a block device, or whose queue lacks
 * BLK_FEAT_PCI_P2PDMA, or when the named provider is too far from the
 * drive (pci_p2pdma_distance() < 0).
 */
FIXTURE(nvmet_p2pmem) {
	char rig0[NAME_MAX + 1];
	char backing[NAME_MAX + 1];
	char backing_dev[NAME_MAX + 8];
	char near[SYSFS_LEN];		/* reachable from the drives */
	char far[SYSFS_LEN];		/* on another root port */
	int kmsg;
};

FIXTURE_SETUP(nvmet_p2pmem)
{
	char pci[SYSFS_LEN];

	self->kmsg = -1;
	ASSERT_EQ(0, remote_cleanup())
		TH_LOG("an earlier case left %s or %s behind", SUBSYS, PORT);
	ASSERT_EQ(0, nvmet_configfs())
		TH_LOG("no %s: nvmet or configfs not in this kernel (CONFIG_NVME_TARGET)",
		       NVMET);
	SPIN_NEED(!nvme_rig_ns(0, self->rig0, sizeof(self->rig0)),
		  SPIN_RIG_DRIVE_FMT, 0, 3);
	SPIN_NEED(!nvme_rig_ns(2, self->backing, sizeof(self->backing)),
		  SPIN_RIG_DRIVE_FMT, 2, 3);
	snprintf(self->backing_dev, sizeof(self->backing_dev), "/dev/%s",
		 self->backing);
	SPIN_NEED(!p2pmem_find_for_ns(self->rig0, true, self->near,
				      sizeof(self->near)),
		  "a provider that %s reaches: none published", self->rig0);
	SPIN_NEED(!p2pmem_find_for_ns(self->rig0, false, self->far,
				      sizeof(self->far)),
		  "a provider that %s cannot reach: none published",
		  self->rig0);
	ASSERT_EQ(0, nvme_pci_dev(self->backing, pci, sizeof(pci)));
	SPIN_NEED(pci_share_switch(self->near, pci),
		  "a provider that %s and %s reach: %s does not reach %s",
		  self->rig0, self->backing, self->backing, self->near);
	SPIN_NEED(!pci_share_switch(self->far, pci),
		  "a provider that %s and %s cannot reach: %s reaches %s",
		  self->rig0, self->backing, self->backing, self->far);
	ASSERT_EQ(1, queue_p2p(self->backing));
	self->kmsg = kmsg_open();
	ASSERT_LE(0, self->kmsg);
}

FIXTURE_TEARDOWN(nvmet_p2pmem)
{
	EXPECT_EQ(0, remote_cleanup())
		TH_LOG("%s or %s could not be removed", SUBSYS, PORT);
	if (self->kmsg >= 0)
		close(self->kmsg);
}

/* The PCI name of a device's sysfs directory. */
static const char *pci_basename(const char *sysfs_dir)
{
	return strrchr(sysfs_dir, '/') + 1;
}

static void p2pmem_is(struct __test_metadata *_metadata, const char *want)
{
	char buf[64];

	ASSERT_EQ(0, sysfs_read(NS_DIR "/p2pmem", buf, sizeof(buf)));
	ASSERT_STREQ(want, buf);
}

/*
 * "0", "1" and the provider's name are taken and read back; the PCI name
 * of the NVMe drive (no p2pmem) and of no device are refused with ENODEV
 * and leave the value alone; with the provider named, the namespace
 * enables, and then the attribute cannot change (EBUSY).
 */
TEST_F_TIMEOUT(nvmet_p2pmem, attr_values, 120)
{
	char drive_pci[SYSFS_LEN], real[PATH_MAX];
	long long enable;
	int seen = 0;

	ASSERT_EQ(0, nvmet_subsys_make(self->backing_dev));
	p2pmem_is(_metadata, "0");
	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", "1"));
	p2pmem_is(_metadata, "1");
	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", "0"));
	p2pmem_is(_metadata, "0");
	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", pci_basename(self->near)));
	p2pmem_is(_metadata, pci_basename(self->near));

	ASSERT_EQ(0, nvme_pci_dev(self->backing, drive_pci,
				  sizeof(drive_pci)));
	ASSERT_NE(NULL, realpath(drive_pci, real));
	ASSERT_EQ(-ENODEV, sysfs_write(NS_DIR "/p2pmem", pci_basename(real)));
	ASSERT_EQ(0, kmsg_trouble(_metadata, self->kmsg,
				  "PCI device has no peer-to-peer memory",
				  &seen));
	ASSERT_EQ(1, seen);
	ASSERT_EQ(-ENODEV, sysfs_write(NS_DIR "/p2pmem", "0000:ff:1f.7"));
	ASSERT_EQ(0, kmsg_trouble(_metadata, self->kmsg, "No such PCI device",
				  &seen));
	ASSERT_EQ(2, seen);
	p2pmem_is(_metadata, pci_basename(self->near));

	ASSERT_EQ(0, sysfs_write(NS_DIR "/enable", "1"));
	ASSERT_EQ(0, sysfs_read_ll(NS_DIR "/enable", &enable));
	ASSERT_EQ(1, enable);
	ASSERT_EQ(-EBUSY, sysfs_write(NS_DIR "/p2pmem", "0"));
	p2pmem_is(_metadata, pci_basename(self->near));
	ASSERT_EQ(0, sysfs_write(NS_DIR "/enable", "0"));
	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", "0"));
	p2pmem_is(_metadata, "0");
}

/*
 * A file-backed namespace (a file in tmpfs, buffered_io so that tmpfs
 * need not take O_DIRECT): with p2pmem the enable fails with EINVAL
 * ("not supported by non-block device namespaces"); without, it
 * enables, so it was p2pmem that was refused.
 */
TEST_F_TIMEOUT(nvmet_p2pmem, file_backed, 120)
{
	long long enable;
	int fd, seen = 0;

	fd = open(FILE_IMG, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 64 * MiB));
	close(fd);
	ASSERT_EQ(0, nvmet_subsys_make(FILE_IMG));
	ASSERT_EQ(0, sysfs_write(NS_DIR "/buffered_io", "1"));
	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", "1"));
	ASSERT_EQ(-EINVAL, sysfs_write(NS_DIR "/enable", "1"));
	ASSERT_EQ(0, sysfs_read_ll(NS_DIR "/enable", &enable));
	ASSERT_EQ(0, enable);
	ASSERT_EQ(0, kmsg_trouble(_metadata, self->kmsg,
				  "not supported by non-block device namespaces",
				  &seen));
	ASSERT_EQ(1, seen);

	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", "0"));
	ASSERT_EQ(0, sysfs_write(NS_DIR "/enable", "1"));
	ASSERT_EQ(0, sysfs_read_ll(NS_DIR "/enable", &enable));
	ASSERT_EQ(1, enable);
}

/*
 * The provider on another root port, named for a namespace on the rig
 * drive: the name is taken (it publishes p2pmem), but the enable fails
 * with EINVAL, pci_p2pdma_distance() saying why; the provider behind the
 * drive's switch enables.
 */
TEST_F_TIMEOUT(nvmet_p2pmem, unreachable, 120)
{
	long long enable;
	int seen = 0;

	ASSERT_EQ(0, nvmet_subsys_make(self->backing_dev));
	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", pci_basename(self->far)));
	ASSERT_EQ(-EINVAL, sysfs_write(NS_DIR "/enable", "1"));
	ASSERT_EQ(0, sysfs_read_ll(NS_DIR "/enable", &enable));
	ASSERT_EQ(0, enable);
	ASSERT_EQ(0, kmsg_trouble(_metadata, self->kmsg,
				  "cannot be used for peer-to-peer DMA",
				  &seen));
	ASSERT_LE(1, seen);

	ASSERT_EQ(0, sysfs_write(NS_DIR "/p2pmem", pci_basename(self->near)));
	ASSERT_EQ(0, sysfs_write(NS_DIR "/enable", "1"));
	ASSERT_EQ(0, sysfs_read_ll(NS_DIR "/enable", &enable));
	ASSERT_EQ(1, enable);
	ASSERT_EQ(0, kmsg_trouble(_metadata, self->kmsg, NULL, NULL));
}

TEST_HARNESS_MAIN
