/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What router_test and readahead_test share on top of spin_util.h: the
 * P2P router's knobs, with their documented defaults and a way to save
 * and put them back, and tables of its counters (P2P_STATS) read into a
 * test's own struct of long longs, so that a test can take deltas
 * around what it does and log the counters that moved.
 */
#ifndef SPIN_ROUTER_H
#define SPIN_ROUTER_H

#include <stddef.h>

#include "spin_util.h"

#define P2P_ENABLED	P2P_ROUTER "/enabled"
#define P2P_COPY_MBPS	P2P_ROUTER "/copy_mbps"
#define P2P_COPY_FROM	P2P_ROUTER "/copy_from_mbps"
#define P2P_COST_NS	P2P_ROUTER "/p2p_cost_ns"
#define P2P_RA_KB	P2P_ROUTER "/readahead_kb"

/* The documented defaults, which the expectations are derived from. */
#define DEFAULT_COST_NS		"4096:80000 131072:120000 1048576:380000"
#define DEFAULT_COPY_MBPS	"4000"
#define DEFAULT_COPY_FROM	"200"

/*
 * One counter: its file in P2P_STATS and where its long long sits in
 * the test's struct.  ROUTER_STAT_FILE(struct x, name) for member name.
 */
struct router_stat_file {
	const char *name;
	size_t off;
};

#define ROUTER_STAT_FILE(type, name) { #name, offsetof(type, name) }

/* The counter @f in the struct @s. */
static inline long long *router_stat_at(const void *s,
					const struct router_stat_file *f)
{
	return (long long *)((const char *)s + f->off);
}

/* Read the @n counters of @files into @s; one unreadable reads as -1. */
static inline void router_stats_read(const struct router_stat_file *files,
				     size_t n, void *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		*router_stat_at(s, &files[i]) = router_stat(files[i].name);
}

/* Whether every counter of @files can be read. */
static inline bool router_stats_readable(const struct router_stat_file *files,
					 size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (router_stat(files[i].name) < 0)
			return false;
	return true;
}

/* What changed since @before, into @delta. */
static inline void router_stats_delta(const struct router_stat_file *files,
				      size_t n, const void *before,
				      void *delta)
{
	size_t i;

	for (i = 0; i < n; i++)
		*router_stat_at(delta, &files[i]) =
			router_stat(files[i].name) -
			*router_stat_at(before, &files[i]);
}

/*
 * The counters of @delta that moved, on one line (" name=value..." in
 * @line), or " no counter moved": what a failing test needs to say.
 */
static inline const char *
router_stats_moved(const struct router_stat_file *files, size_t n,
		   const void *delta, char *line, size_t len)
{
	size_t used = 0, i;

	line[0] = '\0';
	for (i = 0; i < n && used < len; i++) {
		long long v = *router_stat_at(delta, &files[i]);

		if (v)
			used += snprintf(line + used, len - used, " %s=%lld",
					 files[i].name, v);
	}
	return used ? line : " no counter moved";
}

/* The router's tunables, as read, to put back what a test changed. */
struct router_knobs {
	char enabled[16];
	char copy_mbps[32];
	char copy_from[32];
	char cost_ns[256];
	char ra_kb[32];
	char learn[16];
};

static inline int router_knobs_save(struct router_knobs *k)
{
	if (sysfs_read(P2P_ENABLED, k->enabled, sizeof(k->enabled)) ||
	    sysfs_read(P2P_COPY_MBPS, k->copy_mbps, sizeof(k->copy_mbps)) ||
	    sysfs_read(P2P_COPY_FROM, k->copy_from, sizeof(k->copy_from)) ||
	    sysfs_read(P2P_COST_NS, k->cost_ns, sizeof(k->cost_ns)) ||
	    sysfs_read(P2P_RA_KB, k->ra_kb, sizeof(k->ra_kb)) ||
	    sysfs_read(P2P_LEARN, k->learn, sizeof(k->learn)))
		return -1;
	return 0;
}

/* Everything is put back, even when one write fails; enabled last. */
static inline int router_knobs_restore(const struct router_knobs *k)
{
	int ret = 0;

	ret |= sysfs_write(P2P_COST_NS, k->cost_ns);
	ret |= sysfs_write(P2P_COPY_MBPS, k->copy_mbps);
	ret |= sysfs_write(P2P_COPY_FROM, k->copy_from);
	ret |= sysfs_write(P2P_RA_KB, k->ra_kb);
	ret |= sysfs_write(P2P_LEARN, k->learn);
	ret |= sysfs_write(P2P_ENABLED, k->enabled);
	return ret ? -1 : 0;
}

/*
 * The router on, planning with the documented cost model and not with
 * what it learned, and a P-readahead partition of @ra_kb KiB (0:
 * P-readahead off).  Learning is on by default and every program runs
 * with it; a case whose expectations follow from the documented model
 * (how many bytes go by DMA, say) calls this after router_knobs_save(),
 * and router_knobs_restore() puts learning back.
 */
static inline int router_knobs_default(long long ra_kb)
{
	char val[32];

	snprintf(val, sizeof(val), "%lld", ra_kb);
	if (sysfs_write(P2P_COST_NS, DEFAULT_COST_NS) ||
	    sysfs_write(P2P_COPY_MBPS, DEFAULT_COPY_MBPS) ||
	    sysfs_write(P2P_COPY_FROM, DEFAULT_COPY_FROM) ||
	    sysfs_write(P2P_RA_KB, val) ||
	    sysfs_write(P2P_LEARN, "0") ||
	    sysfs_write(P2P_ENABLED, "1"))
		return -1;
	return 0;
}

#endif /* SPIN_ROUTER_H */
