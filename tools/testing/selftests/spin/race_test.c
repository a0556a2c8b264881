// SPDX-License-Identifier: GPL-2.0
/*
 * Racing stress for the P2P router: writers of every kind and readers
 * into device memory and into RAM work on the same bytes at the same
 * time, and an oracle that needs no locking between the threads judges
 * every word that any read returns, and the whole file at the end.
 *
 * The file (or the first FILE_SIZE bytes of a block device) is an array
 * of 8-byte words.  A write takes one version v from a global counter
 * and writes (v << 24 | word index) into every word of its range, so a
 * word tells which write left it there and whether it sits at the right
 * offset.  A hole punch or a truncation is a write of version 0 (the
 * all-zero word).  Every operation takes a stamp from one global
 * "sequence clock" when it begins and when it ends, and is logged (op
 * id, version, words, stamps, its thread's previous op) with atomics
 * only.  Per word, maxbegin[] holds the largest begin stamp of the
 * completed writes that covered it, raised (atomic max) after each
 * write's end stamp is taken.
 *
 * Rules.  A write w is *acceptable* for word i, for a read that began at
 * b and ended at e, if w covered i, began before e, and had not been
 * overwritten before b: there is no write w2 covering i that began after
 * w ended and ended before b.  That is, w.end > M, where M is the
 * largest begin of the writes that covered i and had ended before b.  A
 * reader snapshots maxbegin[] over its range just before it takes b, so
 * its M holds only writes that had ended before b: it may miss some (the
 * oracle is then more lenient, never wrong).  Every word a read returns
 * must hold the value of an acceptable write, or, since no copy in the
 * kernel or in QEMU promises to move 8 bytes at once, a byte-by-byte mix
 * of values of acceptable writes ("torn", counted, legal).  A word that
 * is neither is bad: "stale" (a lost update: its write was overwritten
 * before the read began), "misplaced" (its index field, or its write's
 * range, is not this word) or "unknown" (poison, a version nobody wrote,
 * a zero nobody punched).  At the end, with every thread joined, the
 * caches dropped and the file read back cold into RAM and into device
 * memory, each word must hold the value of a covering write after whose
 * end no covering write began (b = e = the end of the run, M = the final
 * maxbegin[]): two covering writes that overlapped in time are both
 * acceptable.  That catches lost updates that a later write has not
 * covered up.  A read may return short only across the cut of a
 * truncation that overlapped it in time.
 *
 * Threads, all on one 4 MiB region so that they collide all the time:
 *  - a routed writer: pwrite() from device memory, mostly 64 KiB to
 *    1 MiB at 8-byte-aligned offsets (the router DMAs the aligned middle
 *    and copies head and tail), some large page-aligned writes, a few
 *    small ones; half of them through io_uring;
 *  - a buffered writer: pwrite() from RAM, 8 bytes to 1 MiB;
 *  - an O_DIRECT writer: 4 KiB-aligned pwrite()s of 4 KiB to 256 KiB;
 *  - an mmap writer: plain 8-byte stores through a MAP_SHARED mapping,
 *    one version per range; the op ends after its last store;
 *  - a reader into device memory (large aligned reads that DMA,
 *    unaligned ones, runs of small sequential reads for P-readahead),
 *    one that issues the same kinds of reads through io_uring, one to
 *    four at a time (the router serves them asynchronously: the DMA is
 *    still in flight after the caller's lock is dropped), and one into
 *    RAM, each read checked as above.  In the xfs_kernel_shapes variant
 *    the first reads through test_p2pdma, a driver that reads the file
 *    into its own device memory with a bio_vec (vfs_iocb_iter_read()),
 *    and the io_uring one uses READ_FIXED into registered device memory;
 *  - a chaos thread: truncation down into the top quarter and back up,
 *    PUNCH_HOLE|KEEP_SIZE, fdatasync(), POSIX_FADV_DONTNEED, writes of 1
 *    to drop_caches, and switches of the router's cost model between the
 *    one it found and one where DMA always wins (so that the router also
 *    DMAs over clean cached data where it may), with short pauses.
 *
 * Where each writer may write, so that only races whose outcome Linux
 * defines are tested:
 *  - mmap stores stay in [0, MMAP_END) and truncation never cuts below
 *    TRUNC_LO >= MMAP_END, so the file size never drops under a mapped
 *    page: no SIGBUS, and no other writer needs to avoid truncation.
 *  - O_DIRECT writes stay in [dio_lo, FILE_SIZE), clear of the mmap
 *    stores: a store that dirties a page during an O_DIRECT write makes
 *    its invalidation fail, which upstream documents as possible data
 *    corruption (and reports as EIO to fsync()).  On a file system the
 *    buffered and routed writers share that range with it (i_rwsem
 *    orders them); a block device takes no lock for O_DIRECT, so there
 *    the O_DIRECT writer has [3 MiB, 4 MiB) to itself and the buffered
 *    and routed writers stay below.
 *  - A block device has no truncation or holes: those are skipped.
 * Readers and the chaos thread's other operations cover the whole file.
 *
 * The race must be proven: the router's counters must show routed reads
 * that DMAed, asynchronous ones among them (on XFS, reads that DMAed
 * over clean cached folios too), and routed writes that DMAed (on md
 * raid1, each leg must have been written at least the DMAed bytes);
 * and the log must show reads into device memory that
 * overlapped writes of the same words in time, and routed writes that
 * overlapped other writes of the same words.  (md's check of the legs
 * is not asked for here: md raid1 keeps no stable pages, so the mmap
 * stores of the race may legitimately leave the legs different; the
 * mirror tests of stack_test run it.)  A
 * missing router, md flag or test_p2pdma driver is a failure, never a
 * skip; a missing drive, provider or "gpu" memory (a device bound to
 * test_p2pdma) fails on the rig and skips elsewhere (SPIN_NEED()).
 *
 * $SPIN_RACE_SECS bounds the racing per variant (default 12 s, so that
 * the variants with their set-up and final checks stay well under
 * three minutes); a variant whose io_uring reads were never left in
 * flight by then races on, to three times as long, until one is.  The
 * seed is printed; $SPIN_RACE_SEED=<seed> replays each thread's
 * sequence of operations (not their interleaving).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* O_DIRECT, fallocate(); lib.mk passes it too */
#endif
#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>

#include "spin_util.h"
#include "../kselftest_harness.h"
#include "../../../../lib/test_p2pdma_uapi.h"

#define GPU_DEV		"/dev/test_p2pdma"

#define P2P_ENABLED	P2P_ROUTER "/enabled"
#define P2P_COPY_MBPS	P2P_ROUTER "/copy_mbps"
#define P2P_COPY_FROM	P2P_ROUTER "/copy_from_mbps"
/* The cost model the chaos thread switches to: DMA beats every copy. */
#define DMA_COPY_MBPS	"50"
#define DMA_COPY_FROM	"20"

#define MNT		"/mnt/spin-race"
#define MD		"/dev/md0"
#define PAGE		(4 * KiB)
#define FILE_SIZE	(4 * MiB)
#define WORDS		(FILE_SIZE / 8)
#define MMAP_END	(2 * MiB)	/* mmap stores: [0, MMAP_END) */
#define TRUNC_LO	(3 * MiB)	/* truncation cuts at or above */
#define DIO_LO_FS	(2 * MiB)	/* O_DIRECT writes on a file system */
#define DIO_LO_BDEV	(3 * MiB)	/* ... on a block device, alone */
#define MAX_IO		(1 * MiB)
#define SLICE		(MAX_IO + 2 * PAGE)	/* a thread's buffer */
#define MAX_OPS		(1U << 20)
#define NO_OP		UINT32_MAX
#define IDX_BITS	24
#define IDX_MASK	((1ULL << IDX_BITS) - 1)
#define DEFAULT_SECS	12
#define FINAL_LOGGED	5	/* bad words explained per final read */
#define BAD_QUICK	1000	/* then torn mixes are not sought */

enum role {
	ROUTED_WRITER,
	BUFFERED_WRITER,
	DIRECT_WRITER,
	MMAP_WRITER,
	DEV_READER,
	URING_READER,
	RAM_READER,
	CHAOS,
};

#define NTHREADS	8
#define CHAOS_THREAD	(NTHREADS - 1)	/* the last in roles[] */

static const enum role roles[NTHREADS] = {
	ROUTED_WRITER, BUFFERED_WRITER, DIRECT_WRITER, MMAP_WRITER,
	DEV_READER, URING_READER, RAM_READER, CHAOS,
};

static const char *const role_name[] = {
	[ROUTED_WRITER] = "routed writer",
	[BUFFERED_WRITER] = "buffered writer",
	[DIRECT_WRITER] = "O_DIRECT writer",
	[MMAP_WRITER] = "mmap writer",
	[DEV_READER] = "reader into device memory",
	[URING_READER] = "io_uring reader into device memory",
	[RAM_READER] = "reader into RAM",
	[CHAOS] = "chaos",
};

static bool is_reader(enum role role)
{
	return role == DEV_READER || role == URING_READER ||
	       role == RAM_READER;
}

/* What a logged operation did. */
enum op_how {
	INITIAL,
	ROUTED,
	BUFFERED,
	DIRECT,
	MMAP_STORES,
	PUNCH,
	TRUNCATE,
	READ_DEV,
	READ_URING,
	READ_RAM,
	NR_HOW
};

static const char *const how_name[NR_HOW] = {
	[INITIAL] = "initial write",
	[ROUTED] = "routed pwrite",
	[BUFFERED] = "buffered pwrite",
	[DIRECT] = "O_DIRECT pwrite",
	[MMAP_STORES] = "mmap stores",
	[PUNCH] = "hole punch",
	[TRUNCATE] = "truncation",
	[READ_DEV] = "pread into device memory",
	[READ_URING] = "io_uring read into device memory",
	[READ_RAM] = "pread into RAM",
};

static bool how_reads(enum op_how how)
{
	return how == READ_DEV || how == READ_URING || how == READ_RAM;
}

static bool how_zeroes(enum op_how how)
{
	return how == PUNCH || how == TRUNCATE;
}

/*
 * One operation in the log.  Everything but the stamps is written before
 * the op is published (its thread's last[] entry, and ver_op[] for a
 * write); begin and end are stored with release once taken.
 */
struct op {
	uint64_t version;	/* what a write left: 0 for punch, truncate */
	uint32_t lo, hi;	/* words [lo, hi) */
	uint32_t begin, end;	/* clock stamps; 0 until taken */
	uint32_t prev;		/* its thread's previous op, or NO_OP */
	uint8_t how;
	uint8_t thread;		/* NTHREADS for the initial write */
};

struct race;

struct worker {
	struct race *r;
	pthread_t tid;
	int id;
	enum role role;
	uint64_t rng;
	int fd;			/* its own open file */
	uint32_t last;		/* its newest op */
	unsigned char *dev;	/* SLICE of device memory */
	uint64_t *ram;		/* SLICE of RAM, page aligned */
	uint32_t *snap;		/* readers: maxbegin[] before the read */
	uint64_t *map;		/* mmap writer: [0, MMAP_END) */
	struct io_uring ring;	/* io_uring reader, routed writer */
	bool has_ring;
	bool fixed;		/* io_uring reader: READ_FIXED of @dev */
	int gpu_fd;		/* reader: reads by test_p2pdma into @dev */
	bool flipped;		/* chaos: the DMA-favouring model is set */
	long ops;
	long appends;		/* writes at the size of a cut file */
	long long words;	/* read and judged */
	long long fresh;	/* ... whose write was in flight at b */
	long long torn;		/* ... that were legal mixes */
	long long bad[3];	/* stale, misplaced, unknown */
	char err[1024];		/* the first failure */
};

struct race {
	struct op *ops;
	uint32_t *ver_op;	/* version -> op; NO_OP if none */
	uint32_t *maxbegin;	/* per word, see the top of the file */
	uint32_t nops;		/* slots handed out */
	uint32_t clock;		/* the sequence clock */
	uint64_t next_version;
	uint32_t last[NTHREADS];	/* each thread's newest op */
	int stop;
	bool log_full;
	bool fs;		/* a file, not a block device */
	bool append;		/* see the ext4_append variant */
	size_t rw_hi;		/* buffered, routed writes: [0, rw_hi) */
	size_t dio_lo;		/* O_DIRECT writes: [dio_lo, FILE_SIZE) */
	const char *copy_mbps;	/* the cost model found */
	const char *copy_from;
	struct worker w[NTHREADS];
};

enum verdict { GOOD, FRESH, TORN, STALE, MISPLACED, UNKNOWN };

static uint64_t rnd(struct worker *w, uint64_t n)
{
	return n ? xorshift64(&w->rng) % n : 0;
}

static bool stopped(struct race *r)
{
	return __atomic_load_n(&r->stop, __ATOMIC_RELAXED);
}

static uint32_t tick(struct race *r)
{
	return __atomic_add_fetch(&r->clock, 1, __ATOMIC_SEQ_CST);
}

/* Record the first failure of a thread; @stop ends the run for all. */
static void __printf(3, 4)
note(struct worker *w, bool stop, const char *fmt, ...)
{
	va_list ap;

	if (!w->err[0]) {
		va_start(ap, fmt);
		vsnprintf(w->err, sizeof(w->err), fmt, ap);
		va_end(ap);
	}
	if (stop)
		__atomic_store_n(&w->r->stop, 1, __ATOMIC_RELAXED);
}

/*
 * Log the start of an operation on bytes [@off, @off + @len) and take
 * its begin stamp; a write takes its version first.  NO_OP when the log
 * is full, which ends the run.
 */
static uint32_t op_begin(struct worker *w, enum op_how how, size_t off,
			 size_t len)
{
	struct race *r = w->r;
	uint32_t slot = __atomic_fetch_add(&r->nops, 1, __ATOMIC_SEQ_CST);
	struct op *op;

	if (slot >= MAX_OPS) {
		__atomic_store_n(&r->log_full, true, __ATOMIC_RELAXED);
		__atomic_store_n(&r->stop, 1, __ATOMIC_RELAXED);
		return NO_OP;
	}
	op = &r->ops[slot];
	op->lo = off / 8;
	op->hi = (off + len) / 8;
	op->how = how;
	op->thread = w->id;
	op->prev = w->last;
	op->version = 0;
	if (!how_reads(how) && !how_zeroes(how)) {
		op->version = __atomic_fetch_add(&r->next_version, 1,
						 __ATOMIC_SEQ_CST);
		__atomic_store_n(&r->ver_op[op->version], slot,
				 __ATOMIC_RELEASE);
	}
	w->last = slot;
	__atomic_store_n(&r->last[w->id], slot, __ATOMIC_RELEASE);
	__atomic_store_n(&op->begin, tick(r), __ATOMIC_RELEASE);
	return slot;
}

static void atomic_max(uint32_t *p, uint32_t v)
{
	uint32_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, true,
						       __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

/* Take the end stamp; a write then raises maxbegin[] over its words. */
static uint32_t op_end(struct race *r, uint32_t slot)
{
	struct op *op = &r->ops[slot];
	uint32_t end = tick(r), i;

	if (!how_reads(op->how))
		for (i = op->lo; i < op->hi; i++)
			atomic_max(&r->maxbegin[i], op->begin);
	__atomic_store_n(&op->end, end, __ATOMIC_RELEASE);
	return end;
}

static uint64_t word(uint64_t version, uint32_t i)
{
	return version << IDX_BITS | (i & IDX_MASK);
}

/* The value that write @op leaves in word @i. */
static uint64_t op_value(const struct op *op, uint32_t i)
{
	return op->version ? word(op->version, i) : 0;
}

/* Fill @n words for words @lo.. with @version, with plain 8-byte stores. */
static void fill(void *buf, uint32_t lo, size_t n, uint64_t version)
{
	uint64_t *p = buf;
	size_t k;

	for (k = 0; k < n; k++)
		p[k] = word(version, lo + k);
}

/*
 * Whether write @op is acceptable for word @i in a read that ended at @e,
 * with @m the largest begin of the covering writes known to have ended
 * before the read began.  An op whose begin stamp is not visible yet has
 * not started writing (it stores the stamp before its I/O), so nothing
 * the read saw came from it.
 */
static bool acceptable(const struct op *op, uint32_t i, uint32_t e,
		       uint32_t m)
{
	uint32_t begin = __atomic_load_n(&op->begin, __ATOMIC_ACQUIRE);
	uint32_t end;

	if (!begin || begin >= e || how_reads(op->how) || i < op->lo ||
	    i >= op->hi)
		return false;
	end = __atomic_load_n(&op->end, __ATOMIC_ACQUIRE);
	return !end || end > m;
}

/*
 * A walk back along the writer threads' chains of ops, yielding every
 * write acceptable for word @i.  A thread's ops are sequential, so once
 * one of them ended before @m, all earlier ones did too: the walk stays
 * short.  The initial write ends every chain.
 */
struct walk {
	struct race *r;
	uint32_t i, e, m;
	bool zeroes_only;	/* only punches and truncations */
	int t;			/* the chain being walked */
	uint32_t s;		/* the next op on it */
};

static void walk_start(struct walk *k, struct race *r, uint32_t i,
		       uint32_t e, uint32_t m, bool zeroes_only)
{
	k->r = r;
	k->i = i;
	k->e = e;
	k->m = m;
	k->zeroes_only = zeroes_only;
	k->t = zeroes_only ? CHAOS_THREAD - 1 : -1;
	k->s = NO_OP;
}

static const struct op *walk_next(struct walk *k)
{
	const struct op *op;
	uint32_t end;

	for (;;) {
		if (k->s == NO_OP) {
			do
				k->t++;
			while (k->t < NTHREADS && is_reader(roles[k->t]));
			if (k->t >= NTHREADS)
				return NULL;
			k->s = __atomic_load_n(&k->r->last[k->t],
					       __ATOMIC_ACQUIRE);
			continue;
		}
		op = &k->r->ops[k->s];
		end = __atomic_load_n(&op->end, __ATOMIC_ACQUIRE);
		if (end && end < k->m) {
			k->s = NO_OP;
			continue;
		}
		k->s = op->prev;
		if ((!k->zeroes_only || how_zeroes(op->how)) &&
		    acceptable(op, k->i, k->e, k->m))
			return op;
	}
}

/*
 * Why @val in word @i is not acceptable: STALE if its write covered the
 * word and was overwritten before the read began, MISPLACED if its index
 * or its write's range is another word's, else UNKNOWN.
 */
static enum verdict why_bad(struct race *r, uint32_t i, uint64_t val,
			    uint32_t e, uint32_t m, const struct op **opp)
{
	uint64_t v = val >> IDX_BITS;
	uint32_t s = NO_OP, begin, end;
	const struct op *op;

	*opp = NULL;
	if (v && v < __atomic_load_n(&r->next_version, __ATOMIC_ACQUIRE))
		s = __atomic_load_n(&r->ver_op[v], __ATOMIC_ACQUIRE);
	if (s == NO_OP)
		return UNKNOWN;
	*opp = op = &r->ops[s];
	if ((val & IDX_MASK) != (i & IDX_MASK) || i < op->lo || i >= op->hi)
		return MISPLACED;
	begin = __atomic_load_n(&op->begin, __ATOMIC_ACQUIRE);
	end = __atomic_load_n(&op->end, __ATOMIC_ACQUIRE);
	if (begin && begin < e && end && end < m)
		return STALE;
	return UNKNOWN;
}

/*
 * Judge word @i holding @val, read between clock @b and @e with @m as
 * above.  @hint is the last zero-write that explained a zero word.  The
 * search for a torn mix walks the writers' chains back to @m; @quick
 * skips it (once a thread has found BAD_QUICK bad words the run has
 * failed anyway, and the walks would only slow the report down).
 */
static enum verdict judge(struct race *r, uint32_t i, uint64_t val,
			  uint32_t b, uint32_t e, uint32_t m,
			  const struct op **hint, bool quick)
{
	uint64_t allowed[8][4] = { { 0 } }, v = val >> IDX_BITS, x;
	const struct op *op = NULL, *culprit;
	struct walk k;
	uint32_t s, end;
	unsigned int j, byte;

	if (!val) {
		if (*hint && acceptable(*hint, i, e, m)) {
			op = *hint;
		} else {
			walk_start(&k, r, i, e, m, true);
			op = walk_next(&k);
			if (op)
				*hint = op;
		}
	} else if ((val & IDX_MASK) == (i & IDX_MASK) &&
		   v < __atomic_load_n(&r->next_version, __ATOMIC_ACQUIRE)) {
		s = __atomic_load_n(&r->ver_op[v], __ATOMIC_ACQUIRE);
		if (s != NO_OP && acceptable(&r->ops[s], i, e, m))
			op = &r->ops[s];
	}
	if (op) {
		end = __atomic_load_n(&op->end, __ATOMIC_ACQUIRE);
		return !end || end > b ? FRESH : GOOD;
	}

	if (quick)
		return why_bad(r, i, val, e, m, &culprit);
	/* A mix, byte by byte, of the values of acceptable writes? */
	walk_start(&k, r, i, e, m, false);
	while ((op = walk_next(&k))) {
		x = op_value(op, i);
		for (j = 0; j < 8; j++) {
			byte = x >> (8 * j) & 0xff;
			allowed[j][byte / 64] |= 1ULL << (byte % 64);
		}
	}
	for (j = 0; j < 8; j++) {
		byte = val >> (8 * j) & 0xff;
		if (!(allowed[j][byte / 64] >> (byte % 64) & 1))
			return why_bad(r, i, val, e, m, &culprit);
	}
	return TORN;
}

/* The write that set @m for word @i: it began at @m and covered @i. */
static const struct op *superseder(struct race *r, uint32_t i, uint32_t m)
{
	const struct op *op;
	uint32_t s, end;
	int t;

	for (t = 0; t < NTHREADS; t++) {
		if (is_reader(roles[t]))
			continue;
		for (s = __atomic_load_n(&r->last[t], __ATOMIC_ACQUIRE);
		     s != NO_OP; s = op->prev) {
			op = &r->ops[s];
			end = __atomic_load_n(&op->end, __ATOMIC_ACQUIRE);
			if (end && end < m)
				break;
			if (i >= op->lo && i < op->hi &&
			    __atomic_load_n(&op->begin, __ATOMIC_ACQUIRE) == m)
				return op;
		}
	}
	return NULL;
}

/* Append to the message in @buf of @len bytes, @n of them used so far. */
static void __printf(4, 5)
append(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
	va_list ap;

	if (*n >= len)
		return;
	va_start(ap, fmt);
	*n += vsnprintf(buf + *n, len - *n, fmt, ap);
	va_end(ap);
}

static void describe(char *buf, size_t len, size_t *n, const struct op *op)
{
	if (!op)
		append(buf, len, n, "(not found)");
	else
		append(buf, len, n,
		       "%s of words [%u, %u) by thread %d, clock %u-%u",
		       how_name[op->how], op->lo, op->hi, op->thread,
		       op->begin, op->end);
}

/* One line on why word @i holding @val is bad, and what it may hold. */
static void explain(struct race *r, uint32_t i, uint64_t val, uint32_t b,
		    uint32_t e, uint32_t m, char *buf, size_t len)
{
	const struct op *op;
	enum verdict why = why_bad(r, i, val, e, m, &op);
	struct walk k;
	size_t n = 0;
	int listed = 0;

	append(buf, len, &n, "word %u (byte %u) holds %#018llx", i, i * 8,
	       (unsigned long long)val);
	if (op) {
		append(buf, len, &n, ", version %llu from the ",
		       (unsigned long long)op->version);
		describe(buf, len, &n, op);
	}
	if (why == STALE) {
		append(buf, len, &n, ": stale, overwritten before %s by the ",
		       b == UINT32_MAX ? "the end" : "the read began");
		describe(buf, len, &n, superseder(r, i, m));
		append(buf, len, &n, ", which began after it ended");
	} else if (why == MISPLACED) {
		append(buf, len, &n, ": misplaced (index %llu in word %u)",
		       val & IDX_MASK, i);
	} else if (!val) {
		append(buf, len, &n,
		       ": zero, but no punch or truncation can have left it");
	} else if (op) {
		append(buf, len, &n,
		       ": its write had not begun when the read ended");
	} else {
		append(buf, len, &n,
		       ": written by no write (poison is 0xa5...)");
	}
	append(buf, len, &n, "; acceptable:");
	walk_start(&k, r, i, e, m, false);
	while ((op = walk_next(&k)) && listed++ < 4) {
		append(buf, len, &n, " %#018llx (",
		       (unsigned long long)op_value(op, i));
		describe(buf, len, &n, op);
		append(buf, len, &n, ")");
	}
	if (!listed)
		append(buf, len, &n, " none");
}

/*
 * Whether a read of [@off, @off + @len) may have returned only @n bytes:
 * a truncation overlapped it and cut at or below where it stopped.
 */
static bool short_read_ok(struct race *r, size_t off, ssize_t n,
			  uint32_t b, uint32_t e)
{
	const struct op *op;
	uint32_t s, begin, end;

	if (n % 8)
		return false;
	for (s = __atomic_load_n(&r->last[CHAOS_THREAD], __ATOMIC_ACQUIRE);
	     s != NO_OP; s = op->prev) {
		op = &r->ops[s];
		begin = __atomic_load_n(&op->begin, __ATOMIC_ACQUIRE);
		end = __atomic_load_n(&op->end, __ATOMIC_ACQUIRE);
		if (end && end < b)
			break;
		if (op->how == TRUNCATE && begin && begin < e &&
		    (size_t)op->lo * 8 <= off + n)
			return true;
	}
	return false;
}

/*
 * A length in [@min, @max], a multiple of @align (as both are): uniform
 * below a bound picked by doubling @min a random number of times, so
 * that small lengths are as common as large ones.
 */
static size_t rnd_len(struct worker *w, size_t min, size_t max, size_t align)
{
	unsigned int doublings = rnd(w, 12);
	size_t top = min;

	while (doublings-- && top < max)
		top = top * 2 < max ? top * 2 : max;
	return (min + rnd(w, top - min + 1)) / align * align;
}

/* An offset in [@lo, @hi - @len], a multiple of @align. */
static size_t rnd_off(struct worker *w, size_t lo, size_t hi, size_t len,
		      size_t align)
{
	return lo + rnd(w, (hi - lo - len) / align + 1) * align;
}

/*
 * Read [@off, @off + @len) into @buf and judge every word returned.  The
 * snapshot of maxbegin[] is taken before the begin stamp.
 */
/*
 * Poison @buf, snapshot maxbegin[] over [@off, @off + @len) into @snap and
 * take the read's begin stamp: everything before the read is issued.
 */
static uint32_t read_begin(struct worker *w, enum op_how how,
			   unsigned char *buf, size_t off, size_t len,
			   uint32_t *snap)
{
	uint32_t lo = off / 8, k;

	memset(buf, POISON, len);
	for (k = 0; k < len / 8; k++)
		snap[k] = __atomic_load_n(&w->r->maxbegin[lo + k],
					  __ATOMIC_RELAXED);
	return op_begin(w, how, off, len);
}

/*
 * Judge the @n bytes (or the error @err) that the read in @slot returned
 * into @buf, taking its end stamp first.
 */
static void read_judge(struct worker *w, unsigned char *buf, size_t off,
		       size_t len, const uint32_t *snap, uint32_t slot,
		       ssize_t n, int err)
{
	struct race *r = w->r;
	enum op_how how = r->ops[slot].how;
	const struct op *hint = NULL;
	const uint64_t *got = (const uint64_t *)buf;
	long long bad = w->bad[0] + w->bad[1] + w->bad[2];
	uint32_t lo = off / 8, b, e, k;
	char why[768];

	e = op_end(r, slot);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	b = r->ops[slot].begin;
	if (n < 0) {
		note(w, true, "%s of [%zu, +%zu): %s", how_name[how], off, len,
		     strerror(err));
		return;
	}
	if ((size_t)n < len && !short_read_ok(r, off, n, b, e)) {
		note(w, false,
		     "%s of [%zu, +%zu) (clock %u-%u) returned %zd with no truncation under way",
		     how_name[how], off, len, b, e, n);
		w->bad[UNKNOWN - STALE]++;
	}
	for (k = 0; k < (size_t)n / 8; k++) {
		enum verdict v = judge(r, lo + k, got[k], b, e, snap[k],
				       &hint, bad >= BAD_QUICK);

		if (v == FRESH)
			w->fresh++;
		else if (v == TORN)
			w->torn++;
		if (v < STALE)
			continue;
		if (!w->err[0]) {
			explain(r, lo + k, got[k], b, e, snap[k], why,
				sizeof(why));
			note(w, false, "%s of [%zu, +%zu) (clock %u-%u): %s",
			     how_name[how], off, len, b, e, why);
		}
		w->bad[v - STALE]++;
		bad++;
	}
	w->words += n / 8;
}

static void op_read(struct worker *w, unsigned char *buf, size_t off,
		    size_t len)
{
	enum op_how how = w->role == RAM_READER ? READ_RAM : READ_DEV;
	uint32_t slot = read_begin(w, how, buf, off, len, w->snap);
	struct test_p2pdma_rw rw = {
		.fd = w->fd, .pos = off, .len = len, .offset = buf - w->dev,
	};
	ssize_t n;

	if (slot == NO_OP)
		return;
	if (w->gpu_fd >= 0)
		n = ioctl(w->gpu_fd, TEST_P2PDMA_RW, &rw);
	else
		n = pread(w->fd, buf, len, off);
	read_judge(w, buf, off, len, w->snap, slot, n, errno);
}

/*
 * One to four reads into device memory through io_uring, submitted at
 * once, each into its own part of the thread's slice: large aligned ones
 * that DMA, and any words into any buffer offset.  Each read's end stamp
 * is taken when its completion is reaped, which is after it ended.
 */
#define URING_QD	4

static void uring_reads(struct worker *w)
{
	struct {
		size_t off, len;
		unsigned char *buf;
		uint32_t slot;
	} io[URING_QD];
	unsigned int n = 1 + rnd(w, URING_QD), i, got = 0;
	size_t part = SLICE / n / PAGE * PAGE;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;

	for (i = 0; i < n; i++) {
		size_t boff = 0, len, off;

		if (rnd(w, 3)) {
			len = rnd_len(w, 64 * KiB,
				      part < MAX_IO ? part : MAX_IO, PAGE);
			off = rnd_off(w, 0, FILE_SIZE, len, PAGE);
		} else {
			len = rnd_len(w, 8, part - PAGE, 8);
			off = rnd_off(w, 0, FILE_SIZE, len, 8);
			boff = rnd(w, 2) ? off % PAGE : rnd(w, PAGE / 8) * 8;
		}
		io[i].off = off;
		io[i].len = len;
		io[i].buf = w->dev + i * part + boff;
		io[i].slot = read_begin(w, READ_URING, io[i].buf, off, len,
					w->snap + i * (part / 8));
		if (io[i].slot == NO_OP)
			break;
		sqe = io_uring_get_sqe(&w->ring);
		if (w->fixed)
			io_uring_prep_read_fixed(sqe, w->fd, io[i].buf, len,
						 off, 0);
		else
			io_uring_prep_read(sqe, w->fd, io[i].buf, len, off);
		io_uring_sqe_set_data64(sqe, i);
	}
	n = i;
	if (n && io_uring_submit(&w->ring) != (int)n) {
		note(w, true, "io_uring_submit of %u reads failed", n);
		return;
	}
	for (; got < n; got++) {
		int ret = io_uring_wait_cqe(&w->ring, &cqe);

		if (ret) {
			note(w, true, "io_uring_wait_cqe: %s", strerror(-ret));
			return;
		}
		i = io_uring_cqe_get_data64(cqe);
		ret = cqe->res;
		io_uring_cqe_seen(&w->ring, cqe);
		read_judge(w, io[i].buf, io[i].off, io[i].len,
			   w->snap + i * (part / 8), io[i].slot,
			   ret < 0 ? -1 : ret, ret < 0 ? -ret : 0);
	}
}

/* pwrite() one version over [@off, @off + @len) from @buf. */
/* pwrite(), but through io_uring: one write, waited for. */
static ssize_t uring_pwrite(struct worker *w, const void *buf, size_t len,
			    size_t off)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	struct io_uring_cqe *cqe;
	int ret;

	io_uring_prep_write(sqe, w->fd, buf, len, off);
	ret = io_uring_submit_and_wait(&w->ring, 1);
	if (ret >= 0)
		ret = io_uring_wait_cqe(&w->ring, &cqe);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	ret = cqe->res;
	io_uring_cqe_seen(&w->ring, cqe);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

static void op_pwrite(struct worker *w, enum op_how how, uint64_t *buf,
		      size_t off, size_t len, bool uring)
{
	uint32_t slot = op_begin(w, how, off, len);
	ssize_t n;
	int err;

	if (slot == NO_OP)
		return;
	fill(buf, off / 8, len / 8, w->r->ops[slot].version);
	if (uring)
		n = uring_pwrite(w, buf, len, off);
	else
		n = pwrite(w->fd, buf, len, off);
	err = errno;
	op_end(w->r, slot);
	if (n != (ssize_t)len)
		note(w, true, "%s of [%zu, +%zu) returned %zd (%s)",
		     how_name[how], off, len, n,
		     n < 0 ? strerror(err) : "short");
}

/*
 * Mostly 64 KiB or more at any word, so that the router DMAs an aligned
 * middle and copies head and tail; a third large and page aligned; some
 * between the cost model's threshold (20 KiB) and 64 KiB, a few small.
 * The source sits at the file offset's page offset, or anywhere.
 */
/*
 * In the ext4_append variant, half the routed and buffered writes go to
 * the end of the file while a truncation has it cut short, where they
 * extend it: O_APPEND without the flag, so that the write stays inside
 * [0, rw_hi) and the oracle's range is the one written.  Returns @off
 * otherwise, and trims *@len to the file.
 */
static size_t append_off(struct worker *w, size_t off, size_t *len)
{
	struct stat st;

	if (!w->r->append || rnd(w, 2) || fstat(w->fd, &st) ||
	    (size_t)st.st_size >= w->r->rw_hi || st.st_size % 8)
		return off;
	if (*len > w->r->rw_hi - st.st_size)
		*len = w->r->rw_hi - st.st_size;
	w->appends++;
	return st.st_size;
}

static void routed_write(struct worker *w)
{
	size_t len, off, boff;
	unsigned int kind = rnd(w, 10);

	if (kind < 4) {
		len = rnd_len(w, 64 * KiB, MAX_IO, 8);
		off = rnd_off(w, 0, w->r->rw_hi, len, 8);
	} else if (kind < 7) {
		len = rnd_len(w, 64 * KiB, MAX_IO, PAGE);
		off = rnd_off(w, 0, w->r->rw_hi, len, PAGE);
	} else if (kind < 9) {
		len = rnd_len(w, 20 * KiB, 64 * KiB, 8);
		off = rnd_off(w, 0, w->r->rw_hi, len, 8);
	} else {
		len = rnd_len(w, 8, 16 * KiB, 8);
		off = rnd_off(w, 0, w->r->rw_hi, len, 8);
	}
	off = append_off(w, off, &len);
	boff = rnd(w, 4) ? off % PAGE : rnd(w, PAGE / 8) * 8;
	op_pwrite(w, ROUTED, (uint64_t *)(w->dev + boff), off, len,
		  rnd(w, 2));
}

static void buffered_write(struct worker *w)
{
	size_t align = rnd(w, 4) ? 8 : PAGE, len, off;
	unsigned int kind = rnd(w, 10);

	if (kind < 4)
		len = rnd_len(w, 8, 4 * KiB, 8);
	else if (kind < 7)
		len = rnd_len(w, 4 * KiB, 64 * KiB, 8);
	else
		len = rnd_len(w, 64 * KiB, MAX_IO, 8);
	if (align == PAGE)
		len = (len + PAGE - 1) / PAGE * PAGE;
	off = rnd_off(w, 0, w->r->rw_hi, len, align);
	off = append_off(w, off, &len);
	op_pwrite(w, BUFFERED, w->ram + rnd(w, PAGE / 8), off, len, false);
}

static void direct_write(struct worker *w)
{
	size_t len = rnd_len(w, PAGE, 256 * KiB, PAGE);
	size_t off = rnd_off(w, w->r->dio_lo, FILE_SIZE, len, PAGE);

	op_pwrite(w, DIRECT, w->ram, off, len, false);
}

/* One version over a range by 8-byte stores through the mapping. */
static void mmap_write(struct worker *w)
{
	size_t len = rnd_len(w, 8, 256 * KiB, 8);
	size_t off = rnd_off(w, 0, MMAP_END, len, rnd(w, 4) ? 8 : PAGE);
	uint32_t slot = op_begin(w, MMAP_STORES, off, len), i;
	uint64_t version;

	if (slot == NO_OP)
		return;
	version = w->r->ops[slot].version;
	for (i = off / 8; i < (off + len) / 8; i++)
		__atomic_store_n(&w->map[i], word(version, i),
				 __ATOMIC_RELAXED);
	op_end(w->r, slot);
	/* Stores are cheap: pace them like the other writers' syscalls. */
	usleep(rnd(w, 500));
}

/* A run of 4 to 32 sequential reads of 4, 8 or 16 KiB: P-readahead's. */
static void sequential_reads(struct worker *w, unsigned char *buf)
{
	size_t len = PAGE << rnd(w, 3);
	size_t off = rnd_off(w, 0, FILE_SIZE, len, PAGE);
	unsigned int i, n = 4 + rnd(w, 29);

	for (i = 0; i < n && off + len <= FILE_SIZE && !stopped(w->r);
	     i++, off += len)
		op_read(w, buf, off, len);
}

/*
 * Reads of the whole file: large aligned ones that DMA, any words into
 * any buffer offset, small ones, and (into device memory) runs of small
 * sequential reads.
 */
static void reader(struct worker *w)
{
	unsigned char *base = w->role == DEV_READER ? w->dev :
			      (unsigned char *)w->ram;
	unsigned int kind = rnd(w, 20);
	size_t len, off, boff = 0;

	if (kind >= 13 && kind < 17 && w->role == DEV_READER) {
		sequential_reads(w, base);
		return;
	}
	if (kind < 7) {
		len = rnd_len(w, 64 * KiB, MAX_IO, PAGE);
		off = rnd_off(w, 0, FILE_SIZE, len, PAGE);
	} else if (kind < 13) {
		len = rnd_len(w, 8, MAX_IO, 8);
		off = rnd_off(w, 0, FILE_SIZE, len, 8);
		boff = rnd(w, 2) ? off % PAGE : rnd(w, PAGE / 8) * 8;
	} else {
		len = rnd_len(w, 8, 16 * KiB, 8);
		off = rnd_off(w, 0, FILE_SIZE, len, 8);
		boff = rnd(w, PAGE / 8) * 8;
	}
	op_read(w, base + boff, off, len);
}

static int flip_model(struct worker *w)
{
	struct race *r = w->r;

	w->flipped = !w->flipped;
	if (sysfs_write(P2P_COPY_MBPS, w->flipped ? DMA_COPY_MBPS :
						    r->copy_mbps) ||
	    sysfs_write(P2P_COPY_FROM, w->flipped ? DMA_COPY_FROM :
						    r->copy_from))
		return -1;
	return 0;
}

static void chaos(struct worker *w)
{
	struct race *r = w->r;
	unsigned int kind = rnd(w, 100);
	size_t off, len;
	uint32_t slot;
	int ret = 0;

	if (!r->fs && kind < 35)
		kind = 55 + rnd(w, 30);	/* no truncation or holes */
	if (kind < (r->append ? 25 : 10)) {
		/* Cut into the top quarter (mostly mid-page), grow back. */
		off = rnd_off(w, TRUNC_LO, FILE_SIZE, 8, 8);
		if (!rnd(w, 4))
			off &= ~(PAGE - 1);
		slot = op_begin(w, TRUNCATE, off, FILE_SIZE - off);
		if (slot == NO_OP)
			return;
		ret = ftruncate(w->fd, off) ? errno : 0;
		/* Cut for longer when the writers append to the cut. */
		usleep(rnd(w, r->append ? 20000 : 2000));
		if (!ret && ftruncate(w->fd, FILE_SIZE))
			ret = errno;
		op_end(r, slot);
		if (ret)
			note(w, true, "truncation to %zu and back: %s", off,
			     strerror(ret));
		return;
	}
	if (kind < 35) {
		len = rnd_len(w, 8, 512 * KiB, 8);
		off = rnd_off(w, 0, FILE_SIZE, len, rnd(w, 3) ? 8 : PAGE);
		slot = op_begin(w, PUNCH, off, len);
		if (slot == NO_OP)
			return;
		ret = fallocate(w->fd, FALLOC_FL_PUNCH_HOLE |
				FALLOC_FL_KEEP_SIZE, off, len) ? errno : 0;
		op_end(r, slot);
		if (ret)
			note(w, true, "punch of [%zu, +%zu): %s", off, len,
			     strerror(ret));
		return;
	}
	if (kind < 55) {
		if (fdatasync(w->fd))
			note(w, true, "fdatasync: %s", strerror(errno));
	} else if (kind < 85) {
		/* A range, or (length 0) the whole file. */
		len = rnd(w, 4) ? rnd_len(w, 8, MAX_IO, 8) : 0;
		off = len ? rnd_off(w, 0, FILE_SIZE, len, 8) : 0;
		ret = posix_fadvise(w->fd, off, len, POSIX_FADV_DONTNEED);
		if (ret)
			note(w, true, "POSIX_FADV_DONTNEED: %s", strerror(ret));
	} else if (kind < 90) {
		if (sysfs_write("/proc/sys/vm/drop_caches", "1"))
			note(w, true, "drop_caches: %s", strerror(errno));
	} else if (flip_model(w)) {
		note(w, true, "cannot set the router's cost model");
	}
	usleep(500 + rnd(w, 4000));
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!stopped(w->r)) {
		switch (w->role) {
		case ROUTED_WRITER:
			routed_write(w);
			break;
		case BUFFERED_WRITER:
			buffered_write(w);
			break;
		case DIRECT_WRITER:
			direct_write(w);
			break;
		case MMAP_WRITER:
			mmap_write(w);
			break;
		case DEV_READER:
		case RAM_READER:
			reader(w);
			break;
		case URING_READER:
			uring_reads(w);
			break;
		case CHAOS:
			chaos(w);
			break;
		}
		w->ops++;
	}
	return NULL;
}

/*
 * Pairs of ops, one from each of two threads' lists (each in time
 * order), that overlapped in time and in words; and the words shared.
 */
static void sweep(const struct race *r, const uint32_t *a, size_t na,
		  const uint32_t *b, size_t nb, long long *pairs,
		  long long *words)
{
	size_t x, j = 0, k;

	for (x = 0; x < na; x++) {
		const struct op *p = &r->ops[a[x]];

		while (j < nb && r->ops[b[j]].end < p->begin)
			j++;
		for (k = j; k < nb && r->ops[b[k]].begin < p->end; k++) {
			const struct op *q = &r->ops[b[k]];
			uint32_t lo = p->lo > q->lo ? p->lo : q->lo;
			uint32_t hi = p->hi < q->hi ? p->hi : q->hi;

			if (lo < hi) {
				(*pairs)++;
				*words += hi - lo;
			}
		}
	}
}

struct overlaps {
	long long reads;	/* (read, write) pairs on the same words */
	long long read_words;
	long long dev_reads;	/* those of reads into device memory */
	long long dev_read_words;
	long long routed;	/* (routed write, other write) pairs */
	long long routed_words;
	long per_how[NR_HOW];
};

/* After the run: how often the race the test is about happened. */
static int count_overlaps(const struct race *r, struct overlaps *o)
{
	uint32_t nops = r->nops < MAX_OPS ? r->nops : MAX_OPS, s;
	uint32_t *list[NTHREADS] = { NULL };
	size_t n[NTHREADS] = { 0 };
	int t, u, ret = 0;

	memset(o, 0, sizeof(*o));
	for (s = 0; s < nops; s++) {
		o->per_how[r->ops[s].how]++;
		if (r->ops[s].thread < NTHREADS)
			n[r->ops[s].thread]++;
	}
	for (t = 0; t < NTHREADS; t++) {
		list[t] = malloc(sizeof(uint32_t) * (n[t] + 1));
		if (!list[t])
			ret = -ENOMEM;
		n[t] = 0;
	}
	for (s = 0; s < nops && !ret; s++) {
		t = r->ops[s].thread;
		if (t < NTHREADS)
			list[t][n[t]++] = s;
	}
	for (t = 0; t < NTHREADS && !ret; t++) {
		for (u = 0; u < NTHREADS; u++) {
			if (is_reader(roles[u]))
				continue;
			if (is_reader(roles[t])) {
				long long p = 0, w = 0;

				sweep(r, list[t], n[t], list[u], n[u], &p, &w);
				o->reads += p;
				o->read_words += w;
				if (roles[t] != RAM_READER) {
					o->dev_reads += p;
					o->dev_read_words += w;
				}
			} else if (roles[t] == ROUTED_WRITER && u != t)
				sweep(r, list[t], n[t], list[u], n[u],
				      &o->routed, &o->routed_words);
		}
	}
	for (t = 0; t < NTHREADS; t++)
		free(list[t]);
	return ret;
}

/*
 * The final judgement of a cold read of the whole file: every word must
 * hold a write after whose end no covering write began.
 */
static long long final_check(struct __test_metadata *_metadata,
			     struct race *r, const uint64_t *got,
			     const char *what)
{
	long long bad[3] = { 0 }, torn = 0;
	const struct op *hint = NULL;
	char why[768];
	uint32_t i;

	for (i = 0; i < WORDS; i++) {
		enum verdict v = judge(r, i, got[i], UINT32_MAX, UINT32_MAX,
				       r->maxbegin[i], &hint,
				       bad[0] + bad[1] + bad[2] >= BAD_QUICK);

		if (v == TORN)
			torn++;
		if (v < STALE)
			continue;
		if (bad[0] + bad[1] + bad[2] < FINAL_LOGGED) {
			explain(r, i, got[i], UINT32_MAX, UINT32_MAX,
				r->maxbegin[i], why, sizeof(why));
			TH_LOG("%s: %s", what, why);
		}
		bad[v - STALE]++;
	}
	TH_LOG("%s: %lld lost (stale), %lld misplaced, %lld unknown words; "
	       "%lld torn mixes of overlapping writes",
	       what, bad[0], bad[1], bad[2], torn);
	return bad[0] + bad[1] + bad[2];
}

/* The router's counters that the test reads around the race. */
enum {
	ROUTED_READS,
	P2P_BYTES,
	CACHE_BYTES,
	ROUTED_WRITES,
	P2P_WRITE_BYTES,
	CACHE_WRITE_BYTES,
	FALLBACK_EREMOTEIO,
	FALLBACK_ERROR,
	ASYNC_READS,
	ASYNC_DEFERRED,
	NOWAIT_AGAIN,
	FOLDED_BYTES,
	NR_STATS
};

static const char *const stat_names[NR_STATS] = {
	"routed_reads", "p2p_bytes", "cache_bytes", "routed_writes",
	"p2p_write_bytes", "cache_write_bytes", "fallback_eremoteio",
	"fallback_error", "async_reads", "async_deferred", "nowait_again",
	"folded_bytes",
};

/* Read them all; the name of one that cannot be read, or NULL. */
static const char *stats_read(long long *v)
{
	const char *missing = NULL;
	int i;

	for (i = 0; i < NR_STATS; i++) {
		v[i] = router_stat(stat_names[i]);
		if (v[i] < 0)
			missing = stat_names[i];
	}
	return missing;
}

/* The file as it starts: version 1 everywhere, the first op in the log. */
static int initial_write(struct race *r, int fd)
{
	struct op *op = &r->ops[0];
	uint64_t *buf = malloc(MAX_IO);
	size_t off;
	int t, ret = 0;

	if (!buf)
		return -ENOMEM;
	*op = (struct op){ .version = 1, .lo = 0, .hi = WORDS,
			   .how = INITIAL, .thread = NTHREADS, .prev = NO_OP };
	r->ver_op[1] = 0;
	r->next_version = 2;
	r->nops = 1;
	op->begin = tick(r);
	for (off = 0; off < FILE_SIZE && !ret; off += MAX_IO) {
		fill(buf, off / 8, MAX_IO / 8, 1);
		if (pwrite(fd, buf, MAX_IO, off) != (ssize_t)MAX_IO)
			ret = -EIO;
	}
	free(buf);
	if (!ret && fsync(fd))
		ret = -errno;
	op_end(r, 0);
	for (t = 0; t < NTHREADS; t++)
		r->last[t] = 0;
	return ret;
}

FIXTURE(race) {
	char ns[2][NAME_MAX + 1];	/* the rig drives used */
	char blk[NAME_MAX + 1];		/* the block device under test */
	char nvme_dev[SYSFS_LEN];	/* PCI function of the first drive */
	char provider[SYSFS_LEN];	/* device memory it can reach */
	char path[PATH_MAX];		/* the file, or the block device */
	char knobs[3][64];		/* see knob_paths[] */
	bool knobs_saved;
	bool mounted;
	bool assembled;
};

FIXTURE_VARIANT(race) {
	const char *fs;		/* NULL: the block device itself */
	int nvme;		/* first rig drive */
	int members;		/* > 1: md over that many rig drives */
	int level;		/* its RAID level */
	bool p2p_write;		/* routed writes DMA */
	bool shapes;		/* readers: a driver's bio_vec, READ_FIXED */
	bool append;		/* writers append to a cut file */
};

FIXTURE_VARIANT_ADD(race, xfs) {
	.fs = "xfs", .nvme = 0, .members = 1, .p2p_write = true };
FIXTURE_VARIANT_ADD(race, ext4) {
	.fs = "ext4", .nvme = 1, .members = 1, .p2p_write = true };
FIXTURE_VARIANT_ADD(race, raw) {
	.fs = NULL, .nvme = 2, .members = 1, .p2p_write = true };
FIXTURE_VARIANT_ADD(race, raid0) {
	.fs = NULL, .nvme = 0, .members = 2, .level = 0, .p2p_write = true };
FIXTURE_VARIANT_ADD(race, raid1_xfs) {
	.fs = "xfs", .nvme = 1, .members = 2, .level = 1, .p2p_write = true };
/*
 * Device memory in the shapes GPU stacks hand it out: the reader into
 * device memory is test_p2pdma reading the file with a bio_vec of its
 * pages (vfs_iocb_iter_read(), as AMD's KFD does), the io_uring reader
 * uses READ_FIXED into a registered buffer of device memory.
 */
FIXTURE_VARIANT_ADD(race, xfs_kernel_shapes) {
	.fs = "xfs", .nvme = 2, .members = 1, .p2p_write = true,
	.shapes = true };
/*
 * Appending writers on ext4: the chaos thread cuts the file more often and
 * for longer, and half the routed and buffered writes go to its end while
 * it is cut, so that they extend it (ext4's orphan handling, the write-back
 * below the direct part) while the others read and write the same words.
 */
FIXTURE_VARIANT_ADD(race, ext4_append) {
	.fs = "ext4", .nvme = 0, .members = 1, .p2p_write = true,
	.append = true };

static const char *const knob_paths[3] = {
	P2P_ENABLED, P2P_COPY_MBPS, P2P_COPY_FROM,
};

FIXTURE_SETUP(race)
{
	char members[512] = "", path[PATH_MAX];
	long long p2p;
	int i;

	router_learned_reset();	/* each case starts from defaults */
	ASSERT_EQ(0, access(P2P_ROUTER "/stats/p2p_write_bytes", F_OK))
		TH_LOG("no P2P router in this kernel (%s)", P2P_ROUTER);
	if (variant->shapes) {
		ASSERT_EQ(0, test_p2pdma_driver())
			TH_LOG("no %s (CONFIG_TEST_P2PDMA)", TEST_P2PDMA_DRV);
	}
	for (i = 0; i < variant->members; i++)
		SPIN_NEED(!nvme_rig_ns(variant->nvme + i, self->ns[i],
				       sizeof(self->ns[i])),
			  SPIN_RIG_DRIVE_FMT, variant->nvme + i,
			  variant->nvme + variant->members);
	ASSERT_EQ(0, nvme_pci_dev(self->ns[0], self->nvme_dev,
				  sizeof(self->nvme_dev)));
	SPIN_NEED(!p2pmem_find(self->nvme_dev, true, self->provider,
			       sizeof(self->provider)),
		  "a provider that %s reaches: none published", self->ns[0]);
	/* Its DEV_READER reads through test_p2pdma, which makes the node. */
	if (variant->shapes)
		SPIN_NEED(!access(GPU_DEV, F_OK),
			  "the \"gpu\" memory (a device bound to test_p2pdma): no %s",
			  GPU_DEV);
	/* What an earlier test that failed may have left on the drives. */
	umount2(MNT, MNT_DETACH);
	md_stop_ours(MD);
	dm_remove_spin();
	snprintf(self->blk, sizeof(self->blk), "%s", self->ns[0]);

	if (variant->members > 1) {
		ASSERT_EQ(0, md_create(MD, variant->members, self->ns, NULL,
				       members, sizeof(members), "--level=%d",
				       variant->level))
			TH_LOG("cannot assemble md raid%d over%s",
			       variant->level, members);
		self->assembled = true;
		snprintf(self->blk, sizeof(self->blk), "md0");
		/* Without it the router is never asked: a lost md flag. */
		snprintf(path, sizeof(path), "/sys/block/md0/queue/pci_p2pdma");
		ASSERT_EQ(0, sysfs_read_ll(path, &p2p))
			TH_LOG(MD " does not pass P2PDMA");
		ASSERT_EQ(1, p2p) TH_LOG(MD " does not pass P2PDMA");
	}

	if (variant->fs) {
		ASSERT_EQ(0, mkfs_mount(variant->fs, self->blk, MNT));
		self->mounted = true;
		snprintf(self->path, sizeof(self->path), MNT "/race");
	} else {
		snprintf(self->path, sizeof(self->path), "/dev/%s", self->blk);
	}

	/* Last: a setup that fails later would leave them changed. */
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, sysfs_read(knob_paths[i], self->knobs[i],
					sizeof(self->knobs[i])));
	}
	self->knobs_saved = true;
	ASSERT_EQ(0, sysfs_write(P2P_ENABLED, "1"));
	TH_LOG("%s on%s (%s), provider %s", self->path, members,
	       self->nvme_dev, self->provider);
}

/*
 * In the parent, once the test's process and every file it had are gone:
 * the file system must then unmount, or the kernel kept a reference.
 */
FIXTURE_TEARDOWN_PARENT(race)
{
	if (self->knobs_saved) {
		EXPECT_EQ(0, sysfs_write(P2P_COPY_MBPS, self->knobs[1]));
		EXPECT_EQ(0, sysfs_write(P2P_COPY_FROM, self->knobs[2]));
		EXPECT_EQ(0, sysfs_write(P2P_ENABLED, self->knobs[0]));
	}
	if (self->mounted) {
		int ret = umount_settled(MNT, 30);

		EXPECT_EQ(0, ret)
			TH_LOG("%s on %s: umount after the test exited: %s",
			       variant->fs, self->blk, strerror(-ret));
	}
	if (self->assembled)
		run_cmd("mdadm --stop " MD " 2>/dev/null");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

TEST_F_TIMEOUT(race, same_words, 300)
{
	const char *env_secs = getenv("SPIN_RACE_SECS");
	const char *env_seed = getenv("SPIN_RACE_SEED");
	int secs = env_secs && atoi(env_secs) > 0 ? atoi(env_secs) :
						     DEFAULT_SECS;
	long long before[NR_STATS], after[NR_STATS], bad = 0, avail0;
	long long leg0[2] = { 0 }, leg[2] = { 0 };
	long appends = 0;
	struct race r = {
		.fs = !!variant->fs,
		.append = variant->append,
		.rw_hi = variant->fs ? FILE_SIZE : DIO_LO_BDEV,
		.dio_lo = variant->fs ? DIO_LO_FS : DIO_LO_BDEV,
		.copy_mbps = self->knobs[1],
		.copy_from = self->knobs[2],
	};
	size_t dev_len = NTHREADS * SLICE;
	const char *missing;
	struct overlaps o;
	unsigned char *dev;
	uint64_t seed, *ram;
	double t0, elapsed;
	struct stat st;
	int fd, i, created;

	seed = env_seed ? strtoull(env_seed, NULL, 0) :
			  ((uint64_t)time(NULL) << 16 ^ getpid());
	TH_LOG("seed %llu (SPIN_RACE_SEED=%llu replays each thread's operations), %d s, %d threads",
	       (unsigned long long)seed, (unsigned long long)seed, secs,
	       NTHREADS);

	r.ops = calloc(MAX_OPS, sizeof(*r.ops));
	r.ver_op = malloc(sizeof(uint32_t) * (MAX_OPS + 2));
	r.maxbegin = calloc(WORDS, sizeof(uint32_t));
	ASSERT_NE(NULL, r.ops);
	ASSERT_NE(NULL, r.ver_op);
	ASSERT_NE(NULL, r.maxbegin);
	memset(r.ver_op, 0xff, sizeof(uint32_t) * (MAX_OPS + 2));

	fd = open(self->path, O_RDWR | (variant->fs ? O_CREAT | O_TRUNC : 0),
		  0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, initial_write(&r, fd));
	ASSERT_EQ(0, drop_caches());
	avail0 = p2pmem_available(self->provider);
	ASSERT_LT(0, avail0);
	/* Mapping p2pmem is what makes this process's I/O candidates. */
	dev = p2pmem_map(self->provider, dev_len);
	ASSERT_NE(NULL, dev);
	ASSERT_EQ(0, posix_memalign((void **)&ram, PAGE, FILE_SIZE));

	for (i = 0; i < NTHREADS; i++) {
		struct worker *w = &r.w[i];

		w->r = &r;
		w->id = i;
		w->role = roles[i];
		w->rng = seed ^ 0x9e3779b97f4a7c15ULL * (i + 1);
		w->last = 0;
		w->dev = dev + i * SLICE;
		w->gpu_fd = -1;
		w->fd = open(self->path, O_RDWR |
			     (w->role == DIRECT_WRITER ? O_DIRECT : 0));
		ASSERT_LE(0, w->fd) TH_LOG("open %s for the %s: %s",
					   self->path, role_name[w->role],
					   strerror(errno));
		ASSERT_EQ(0, posix_memalign((void **)&w->ram, PAGE, SLICE));
		if (is_reader(w->role)) {
			w->snap = malloc(SLICE / 8 * sizeof(uint32_t));
			ASSERT_NE(NULL, w->snap);
		}
		if (w->role == URING_READER || w->role == ROUTED_WRITER) {
			ASSERT_EQ(0, io_uring_queue_init(URING_QD, &w->ring,
							 0));
			w->has_ring = true;
		}
		if (variant->shapes && w->role == URING_READER) {
			struct iovec reg = { w->dev, SLICE };

			ASSERT_EQ(0, io_uring_register_buffers(&w->ring, &reg,
							       1));
			w->fixed = true;
		}
		if (variant->shapes && w->role == DEV_READER) {
			uint64_t size = SLICE;

			w->gpu_fd = open(GPU_DEV, O_RDWR);
			ASSERT_LE(0, w->gpu_fd)
				TH_LOG("%s: %s", GPU_DEV, strerror(errno));
			ASSERT_EQ(0, ioctl(w->gpu_fd, TEST_P2PDMA_ALLOC, &size));
			w->dev = mmap(NULL, SLICE, PROT_READ | PROT_WRITE,
				      MAP_SHARED, w->gpu_fd, 0);
			ASSERT_NE(MAP_FAILED, w->dev);
		}
		if (w->role == MMAP_WRITER) {
			w->map = mmap(NULL, MMAP_END, PROT_READ | PROT_WRITE,
				      MAP_SHARED, w->fd, 0);
			ASSERT_NE(MAP_FAILED, w->map);
		}
	}
	missing = stats_read(before);
	for (i = 0; i < variant->members && variant->level == 1; i++)
		leg0[i] = sectors_written(self->ns[i]);
	ASSERT_EQ(NULL, missing) TH_LOG("no counter %s", missing);

	/* No ASSERT while the threads run: they use what it would free. */
	for (created = 0; created < NTHREADS; created++)
		if (pthread_create(&r.w[created].tid, NULL, worker_main,
				   &r.w[created]))
			break;
	t0 = now();
	/*
	 * Race for @secs, and on, to three times as long, until an io_uring
	 * read was left in flight: on ext4 one is only when the nowait
	 * trylock of i_rwsem beats the writers, a few times in 12 s.
	 */
	while (!stopped(&r) && created == NTHREADS &&
	       (now() - t0 < secs ||
		(now() - t0 < 3 * secs &&
		 router_stat("async_reads") <= before[ASYNC_READS])))
		usleep(100 * 1000);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < created; i++)
		pthread_join(r.w[i].tid, NULL);
	elapsed = now() - t0;
	stats_read(after);
	for (i = 0; i < variant->members && variant->level == 1; i++)
		leg[i] = sectors_written(self->ns[i]) - leg0[i];
	ASSERT_EQ(NTHREADS, created) TH_LOG("cannot start thread %d", created);
	if (r.log_full)
		TH_LOG("the op log filled up after %.1f s: stopped early",
		       elapsed);

	for (i = 0; i < NTHREADS; i++) {
		struct worker *w = &r.w[i];
		long long b = w->bad[0] + w->bad[1] + w->bad[2];

		if (w->role == ROUTED_WRITER)
			appends = w->appends;
		TH_LOG("thread %d (%s): %ld ops, %lld words judged, %lld written during their read, %lld torn mixes, %lld stale, %lld misplaced, %lld unknown",
		       i, role_name[w->role], w->ops, w->words, w->fresh,
		       w->torn, w->bad[0], w->bad[1], w->bad[2]);
		EXPECT_EQ(0, w->err[0])
			TH_LOG("thread %d: %s (seed %llu)", i, w->err,
			       (unsigned long long)seed);
		bad += b;
	}
	ASSERT_EQ(0, count_overlaps(&r, &o));
	TH_LOG("%.1f s: %ld routed, %ld buffered, %ld O_DIRECT and %ld mmap writes, %ld punches, %ld truncations, %ld reads into device memory (%ld through io_uring), %ld into RAM",
	       elapsed, o.per_how[ROUTED], o.per_how[BUFFERED],
	       o.per_how[DIRECT], o.per_how[MMAP_STORES], o.per_how[PUNCH],
	       o.per_how[TRUNCATE], o.per_how[READ_DEV] + o.per_how[READ_URING],
	       o.per_how[READ_URING], o.per_how[READ_RAM]);
	TH_LOG("overlaps in time on the same words: %lld read/write pairs (%lld words; "
	       "into device memory %lld pairs, %lld words), %lld routed-write/other-write pairs (%lld words)",
	       o.reads, o.read_words, o.dev_reads, o.dev_read_words, o.routed,
	       o.routed_words);
	for (i = 0; i < NR_STATS; i++)
		after[i] -= before[i];
	TH_LOG("router: %lld routed reads (%lld asynchronous, %lld parts deferred), %lld bytes DMAed (%lld of them over clean cached folios) and %lld copied into device memory; %lld routed writes, %lld bytes DMAed and %lld copied out of it; %lld nowait_again, %lld fallback_eremoteio, %lld fallback_error",
	       after[ROUTED_READS], after[ASYNC_READS], after[ASYNC_DEFERRED],
	       after[P2P_BYTES], after[FOLDED_BYTES], after[CACHE_BYTES],
	       after[ROUTED_WRITES], after[P2P_WRITE_BYTES],
	       after[CACHE_WRITE_BYTES], after[NOWAIT_AGAIN],
	       after[FALLBACK_EREMOTEIO], after[FALLBACK_ERROR]);
	EXPECT_EQ(0, bad) TH_LOG("%lld bad words read (seed %llu)", bad,
				 (unsigned long long)seed);

	/* The whole file, cold, into RAM and into device memory. */
	for (i = 0; i < NTHREADS; i++) {
		struct worker *w = &r.w[i];

		if (w->map)
			munmap(w->map, MMAP_END);
		if (w->has_ring)
			io_uring_queue_exit(&w->ring);
		if (w->gpu_fd >= 0) {
			munmap(w->dev, SLICE);
			close(w->gpu_fd);
		}
		close(w->fd);
		free(w->ram);
		free(w->snap);
	}
	ASSERT_EQ(0, fsync(fd)) TH_LOG("fsync: %s", strerror(errno));
	if (variant->fs) {
		ASSERT_EQ(0, fstat(fd, &st));
		EXPECT_EQ((off_t)FILE_SIZE, st.st_size);
	}
	ASSERT_EQ(0, drop_caches());
	memset(ram, POISON, FILE_SIZE);
	ASSERT_EQ((ssize_t)FILE_SIZE, pread(fd, ram, FILE_SIZE, 0));
	EXPECT_EQ(0, final_check(_metadata, &r, ram, "cold read into RAM"))
		TH_LOG("seed %llu", (unsigned long long)seed);
	ASSERT_EQ(0, drop_caches());
	memset(dev, POISON, FILE_SIZE);
	ASSERT_EQ((ssize_t)FILE_SIZE, pread(fd, dev, FILE_SIZE, 0));
	EXPECT_EQ(0, final_check(_metadata, &r, (uint64_t *)dev,
				 "cold read into device memory"))
		TH_LOG("seed %llu", (unsigned long long)seed);
	EXPECT_EQ(-1, first_diff(ram, dev, FILE_SIZE));
	close(fd);
	munmap(dev, dev_len);
	free(ram);
	free(r.ops);
	free(r.ver_op);
	free(r.maxbegin);
	/* Every page of device memory came back. */
	EXPECT_EQ(avail0, p2pmem_available(self->provider));

	/* The premise: the race this test is about did happen. */
	ASSERT_LT(0, after[ROUTED_READS]);
	ASSERT_LT(0, after[P2P_BYTES]) TH_LOG("no read was DMAed");
	ASSERT_LT(0, after[ASYNC_READS])
		TH_LOG("no io_uring read was routed asynchronously");
	/* XFS folds clean cached folios, large ones too, into DMAs. */
	if (variant->fs && !strcmp(variant->fs, "xfs")) {
		ASSERT_LT(0, after[FOLDED_BYTES])
			TH_LOG("no read DMAed over clean cached folios");
	}
	if (variant->p2p_write) {
		ASSERT_LT(0, after[ROUTED_WRITES]);
		ASSERT_LT(0, after[P2P_WRITE_BYTES])
			TH_LOG("no write was DMAed");
	}
	/*
	 * A mirror wrote at least the DMAed bytes to each of its legs, and
	 * the same to both (no resync runs: the array is --assume-clean).
	 */
	for (i = 0; i < variant->members && variant->level == 1; i++) {
		TH_LOG("leg %s: %lld sectors written during the race",
		       self->ns[i], leg[i]);
		ASSERT_LE(after[P2P_WRITE_BYTES] / 512, leg[i]);
	}
	if (variant->level == 1) {
		ASSERT_LE(0, leg0[0]);
		ASSERT_LE(0, leg0[1]);
		EXPECT_GT(after[P2P_WRITE_BYTES] / 1024, llabs(leg[0] - leg[1]));
	}
	ASSERT_LT(0, o.dev_reads)
		TH_LOG("no read into device memory overlapped a write");
	ASSERT_LT(0, o.routed)
		TH_LOG("no routed write overlapped another write");
	TH_LOG("%ld routed writes went to the end of a cut file", appends);
	if (variant->append) {
		ASSERT_LT(0, appends) TH_LOG("no routed write appended");
	}
}

TEST_HARNESS_MAIN
