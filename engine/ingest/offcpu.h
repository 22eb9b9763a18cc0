/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU time of the producers' threads: when each was switched out and back in,
 * from the kernel's context-switch records (perf_event_open of a dummy software
 * event with context_switch = 1, on CLOCK_MONOTONIC: the producers' event clock).
 * Probed once at start (rp_offcpu_init): where the kernel refuses (EACCES, EPERM,
 * ENOSYS, perf_event_paranoid > 2) the engine says so in one line and goes on
 * without it.
 *
 * One watcher per producer ring (struct rp_offcpu_ring, kept by sources.c), holding
 * at most one perf fd, for the ring's current owner thread: opened when a new owner
 * (generation) is seen, closed when the ring retires or changes owner or its process
 * ends. At most max_threads fds are open at once; a thread past the cap, or one the
 * kernel refuses, is not watched (counted in refused). Each fd has a small mmap ring
 * (RP_OFFCPU_PAGES data pages), read (rp_offcpu_ring_read) each time sources.c reads
 * the ring's producer index: after it, so that every record the engine will process
 * from that read on finds the switches that came before it already read. A full perf
 * ring loses records (PERF_RECORD_LOST: counted in lost; a switch whose pair was lost
 * is counted in unpaired and not used). A thread is watched from the engine's first
 * read of its ring after its claim: a switch-in that ends a switch-out from before
 * is not used (nor counted), nor is the switch-out of a thread that exits.
 *
 * Attribution, exact by construction: a thread records nothing while it is switched
 * out, so each interval [out, in] lies between two consecutive records of its ring.
 * The intervals wait in a queue per ring (RP_OFFCPU_PENDING, doubled as needed up to
 * RP_OFFCPU_PENDING_MAX: the engine's backlog of that thread's records; a full one
 * leaves new intervals out, counted in overflow: their time is missing, rather than
 * put on a span that was not open then); before the engine processes a record with ts > in
 * (rp_offcpu_ring_due, one compare per record against a cached bound), each due
 * interval's length goes to the span innermost on the thread then
 * (rp_engine_offcpu()). An interval read after a later record of the thread was
 * processed (a clock skew, or a read that came late) is still added, to the span
 * open then, and counted in late. The switch times are CLOCK_MONOTONIC, the records'
 * the producer's ticks converted by its calibration (a TSC rate measured over a few
 * ms: off by up to ~1e-4, so tens of us a second apart from CLOCK_MONOTONIC after a
 * while, more than a span between a wake-up and the next record). So each read first
 * measures the two clocks' difference now (w->skew: a TSC read between two
 * CLOCK_MONOTONIC reads, converted as the records are) and moves the switch times onto
 * the records' clock.
 */
#ifndef RP_ENGINE_OFFCPU_H
#define RP_ENGINE_OFFCPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "report.h"

#define RP_OFFCPU_PAGES	  4u	 /* data pages per perf ring (plus one header page):
				    680 switch records between two reads */
#define RP_OFFCPU_PENDING 64u	 /* intervals waiting per ring, at first */
#define RP_OFFCPU_PENDING_MAX 16384u /* ... at most (256 KiB) */
#define RP_OFFCPU_THREADS 256u	 /* perf fds open at once, by default */

enum rp_offcpu_mode { RP_OFFCPU_MODE_OFF, RP_OFFCPU_MODE_AUTO, RP_OFFCPU_MODE_ON };

struct rp_offcpu_iv {
	uint64_t out, in;	/* CLOCK_MONOTONIC ns, out <= in */
};

/* One producer ring's watcher: its owner's perf fd, and the intervals not yet used
 * (q: cap entries, allocated at its first interval, freed when empty if it grew or
 * its ring is no longer watched: queues exist for watched rings and rings with
 * intervals pending). */
struct rp_offcpu_ring {
	uint64_t next;		/* the first pending interval's in; UINT64_MAX: none */
	uint64_t last_ts;	/* the newest record of the ring processed */
	int fd;			/* -1: not watched */
	pid_t tid;		/* the thread watched */
	void *map;		/* header page + data pages */
	uint64_t out;		/* a switch-out awaiting its switch-in; 0: none */
	bool fresh;		/* no record since the fd was opened */
	int64_t skew;		/* the producer's clock minus CLOCK_MONOTONIC, ns, at the
				   last read (sources.c): added to switch times */
	struct rp_offcpu_iv *q;
	uint32_t head, n, cap;
};

struct rp_offcpu {
	int mode;		/* enum rp_offcpu_mode */
	bool on;		/* the probe passed: watchers open fds */
	uint32_t max_threads;
	uint32_t open;		/* fds open now */
	struct rp_report_offcpu *rep; /* the engine's counters (engine.h) */
	size_t page;
};

/**
 * rp_offcpu_init() - probe the kernel (a dummy event on the calling thread) unless
 * @mode is off. @rep: where the counters go (the engine's e->offcpu); @why: room for
 * the one line to log, set (non-empty) when off-CPU time is refused or off.
 * @return 0, or -errno when @mode is RP_OFFCPU_MODE_ON and the kernel refuses.
 */
int rp_offcpu_init(struct rp_offcpu *o, int mode, uint32_t max_threads,
		   struct rp_report_offcpu *rep, char *why, size_t n);

/** rp_offcpu_ring_init() - an idle watcher (no fd, nothing pending). */
void rp_offcpu_ring_init(struct rp_offcpu_ring *w);

/**
 * rp_offcpu_ring_owner() - the ring's owner is now @tid (0: none, retired): the
 * previous owner's records are read one last time, its fd closed, and @tid's opened
 * (within the cap). Pending intervals stay: the previous owner's records come first.
 */
void rp_offcpu_ring_owner(struct rp_offcpu *o, struct rp_offcpu_ring *w, pid_t tid);

/** rp_offcpu_ring_read() - take the switch records the kernel wrote since the last
 * read. Called right after the ring's producer index was read (see above). */
void rp_offcpu_ring_read(struct rp_offcpu *o, struct rp_offcpu_ring *w);

/** rp_offcpu_ring_close() - close the fd, forget what is pending (the ring is gone). */
void rp_offcpu_ring_close(struct rp_offcpu *o, struct rp_offcpu_ring *w);

/** rp_offcpu_switch() - one switch record of the watched thread: @out (switched out)
 * or in, at @t. What rp_offcpu_ring_read() does with each; the tests feed it too. */
void rp_offcpu_switch(struct rp_offcpu *o, struct rp_offcpu_ring *w, bool out, uint64_t t);

/**
 * rp_offcpu_ring_pop() - the next interval due before a record at @ts (its in < @ts;
 * @ts UINT64_MAX: any): its length in *@ns; false when none is.
 */
bool rp_offcpu_ring_pop(struct rp_offcpu *o, struct rp_offcpu_ring *w, uint64_t ts,
			uint64_t *ns);

/* The record at @ts of the ring is about to be processed: true when an interval is
 * due first (then pop them). One compare against a cached bound and one store to the
 * same line: the hot path. */
static inline bool rp_offcpu_ring_due(struct rp_offcpu_ring *w, uint64_t ts)
{
	w->last_ts = ts;
	return ts > w->next;
}

#endif
