/* SPDX-License-Identifier: MIT */
/*
 * Live sources: the producer segments of one session, attached, drained and merged
 * into the engine's single ordered stream.
 *
 * Discovery: rp_sources_scan() looks at /dev/shm for "ringprof.<session>.*" (at start,
 * and whenever inotify reports a new file). A segment still being created (magic 0)
 * is retried at the next scan; a malformed one or one owned by another uid is
 * refused once, with a one-line reason, and counted. A refused segment whose producer
 * (the pid in its name) is gone is removed, and counted (refused_removed): nobody
 * will ever read it, and it takes /dev/shm space; one whose producer lives is looked
 * at again at each scan, never removed while it lives.
 *
 * Draining: records already due (older than the watermark) are merged in place,
 * read once out of the ring and released as they are processed, so that a backlog
 * crosses memory once. What is not yet due is taken into the engine's own per-ring
 * buffer (times converted to ns) and released at once: at the end of every drain,
 * and between slices for a ring at risk of filling (a live owner, a quarter full),
 * so a producer's ring only has to cover the engine's wake-up latency, never the
 * merge delay (docs/live.md has the sizing rule). Buffers grow by doubling up to
 * buf_ring_max records each (in place, in address space reserved for that much) and
 * buf_budget records in all; a buffer that cannot take a ring's records forces the
 * merge past the watermark (to the middle of that buffer: counted as "forced"; a few
 * records may then be late) rather than let the ring fill. The high-water marks of rings and buffers are kept and reported.
 *
 * Ordered merge: each ring's records (its buffer's, then those in place) are merged
 * with a heap keyed by each ring's next timestamp, up to a watermark; newer records
 * wait. A record older than what was already processed is counted as late (and
 * still processed).
 *
 * Tracks: a thread track is (ring, owner generation), so a ring reused by another
 * thread starts a new track; a retired, drained ring or a replaced generation closes
 * its track, open spans counted as truncated. In a 1.2 segment a record's generation
 * is the one its ring's owner marks (RP_EV_THREAD) say: a thread may take over a
 * retired ring undrained, and the old owner's track closes at the mark (its spans
 * lost if the mark says it lost records, else truncated).
 *
 * Ends: a producer that exited normally is closed once its rings are drained; a dead
 * one (pidfd readable, or its pid gone) is drained, its open spans closed as
 * truncated at its last timestamp, and its segment unlinked (it is ours: same uid).
 */
#ifndef RP_ENGINE_SOURCES_H
#define RP_ENGINE_SOURCES_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "offcpu.h"
#include "segment.h"

struct rp_live;	/* one attached segment */

/* Per-ring buffer cap and the budget of all buffers, in records (40 bytes each):
 * 2^20 records hold 100 ms of one thread at 10 M events/s. */
#define RP_SOURCES_RING_BUFFER	 (1u << 20)
#define RP_SOURCES_BUFFER_BUDGET (1u << 23)
/* An empty buffer larger than this shrinks to it, its pages above going back to the
 * system (it grows again on demand). */
#define RP_SOURCES_KEEP		 16384u
/* Records processed between two copies of every ring (rp_sources_drain). */
#define RP_SOURCES_SLICE	 8192u
/* Records of one ring merged in one go at most (a ring whose records lead every
 * other's): a slice is at most RP_SOURCES_SLICE + RP_SOURCES_RUN records, so a drain
 * asks ss->interrupt that often, whatever one ring's backlog. */
#define RP_SOURCES_RUN		 65536u
/* Records copied out of the rings between two asks of ss->interrupt (one is also asked
 * before a buffer grows): a copy into memory never touched is the drain's longest
 * stretch (docs/performance.md, Snapshots). */
#define RP_SOURCES_COPY_ASK	 16384u

/* A finished segment whose name waits for a snapshot (defer_unlink). */
struct rp_unlink {
	struct rp_unlink *next;
	bool covered;		/* finished before the snapshot being written was taken */
	char name[];
};

struct rp_sources {
	struct rp_engine *e;
	char session[RP_WIRE_SESSION_MAX];
	char shm_dir[64];		/* "/dev/shm" */
	struct rp_live **live;		/* attached, in attach order */
	uint32_t n_live, max_live;
	struct rp_live *zombies;	/* finished while pinned: unmapped at unpin */
	struct rp_heap_item *heap;	/* merge heap scratch */
	uint32_t heap_cap;
	char **seen;			/* names refused or finished: not retried */
	uint32_t n_seen, cap_seen;
	uint64_t refused;		/* segments refused (uid, malformed) */
	uint64_t refused_removed;	/* ... and removed once their producer was gone */
	char **refused_live;		/* refused, producer alive: looked at each scan */
	uint32_t n_refused_live;
	uint64_t truncated;		/* segments whose file shrank while attached */
	uint64_t restart_gap;		/* records a previous engine read and wrote in
					   no snapshot (RP_ANOM_RESTART_GAP) */
	bool defer_unlink;		/* finished segments are unlinked only once a
					   snapshot holding them is written */
	struct rp_unlink *unlinks;	/* those waiting */
	uint32_t n_unlinks;
	uint32_t pending;		/* segments still being created at the last scan */
	uint64_t attached;		/* segments attached since start */
	uint32_t buf_ring_max;		/* records per ring buffer (RP_SOURCES_RING_BUFFER) */
	uint64_t buf_budget;		/* records in all buffers (RP_SOURCES_BUFFER_BUDGET) */
	uint64_t buf_events;		/* records allocated in all buffers */
	uint64_t drops_said_at;		/* when the last line about drops went out */
	uint32_t copy_since_ask;	/* records copied since ss->interrupt was asked */
	bool copy_asks;			/* this drain may be interrupted (not final) */
	bool copy_held;			/* ... and was: copies wait for the next one */
	uint64_t mark_scans;		/* backlogs searched for an owner mark (a new
					   generation whose claim_tail could not say) */
	void (*log)(void *ctx, const char *line); /* one line per notable event; may be NULL */
	void *log_ctx;
	/* A producer's pidfd appears and goes (for the loop to watch); may be NULL. */
	void (*pidfd_added)(void *ctx, int pidfd);
	void (*pidfd_removed)(void *ctx, int pidfd);
	void *hook_ctx;
	/* Asked between two slices of a drain that is not final, and within its copies
	 * out of the rings (may be NULL): true stops the drain there, the rest of the
	 * rings read in place by the next one (a snapshot is wanted: it need not wait
	 * for the backlog, docs/live.md). Same ctx as the pidfd hooks. */
	bool (*interrupt)(void *ctx);
	struct rp_offcpu off;		/* off-CPU time (rp_sources_offcpu) */
};

/** rp_sources_init() - @session's sources feeding @e. @return 0 or -errno. */
int rp_sources_init(struct rp_sources *ss, struct rp_engine *e, const char *session);

/**
 * rp_sources_offcpu() - measure the producers' off-CPU time (offcpu.h), @mode an
 * enum rp_offcpu_mode, at most @max_threads threads at once: probes the kernel, says
 * in one line (ss->log) when it refuses. @return 0, or -errno when @mode is
 * RP_OFFCPU_MODE_ON and it refuses. Off until called.
 */
int rp_sources_offcpu(struct rp_sources *ss, int mode, uint32_t max_threads);

/** rp_sources_free() - detach everything (no unlink). */
void rp_sources_free(struct rp_sources *ss);

/** rp_sources_scan() - attach the session's new segments. @return how many.
 * Segments still being created are counted in ss->pending: scan again soon. */
int rp_sources_scan(struct rp_sources *ss);

/**
 * rp_sources_touch() - read one byte of every page that holds a ring's undrained
 * records, through the engine's own mapping. For benchmarks: a freshly attached
 * segment pays a page-table fill at the first read of each page, which an engine
 * attached for longer than one lap of its rings has paid already (on a guest with
 * shadow page tables that fill costs more than draining the page). @return pages read.
 */
uint64_t rp_sources_touch(struct rp_sources *ss);

/**
 * rp_sources_drain() - merge and process every record with a timestamp <= @watermark
 * (UINT64_MAX: everything), then finish sources that exited or died.
 * @return records processed.
 */
uint64_t rp_sources_drain(struct rp_sources *ss, uint64_t watermark);

/**
 * rp_sources_drain_some() - rp_sources_drain(), but at most @max_slices slices of
 * RP_SOURCES_SLICE records (a final drain, @watermark UINT64_MAX, takes everything):
 * what a snapshot merges before it is taken, so that it answers at once however
 * far behind the engine is. @return records processed.
 */
uint64_t rp_sources_drain_some(struct rp_sources *ss, uint64_t watermark, unsigned max_slices);

/**
 * rp_sources_unmerged() - records published in the producers' rings or copied into
 * the engine's buffers and not merged yet (not in a report made now): the backlog a
 * snapshot states (header.unmerged_records, docs/snapshot.md). Owner marks count:
 * they are records.
 */
uint64_t rp_sources_unmerged(const struct rp_sources *ss);

/**
 * rp_sources_snapshot_taken() - a report for a snapshot was just made: remember
 * each ring's head. rp_sources_snapshot_written() - that snapshot is on disk (@ok):
 * publish the heads in the rings (snap_head), so that an engine after us can count
 * what we read and never wrote (the restart gap) if we die; or it failed (!@ok).
 * Between the two, sources are not finished (see check_ends()).
 */
void rp_sources_snapshot_taken(struct rp_sources *ss);
void rp_sources_snapshot_written(struct rp_sources *ss, bool ok); /* ok: on disk */

/** rp_sources_update() - copy producer-side counters (drops, ...) into the engine's
 * source rows, for a report. */
void rp_sources_update(struct rp_sources *ss);

/**
 * rp_sources_watch_drops() - say (ss->log) when a source starts losing records, and
 * every @every_ns while it goes on: the first drop of a source at once, then one
 * summary line per period with drops. @now_ns: CLOCK_MONOTONIC.
 * @return records lost since the last call, all sources.
 */
uint64_t rp_sources_watch_drops(struct rp_sources *ss, uint64_t now_ns, uint64_t every_ns);

/**
 * rp_sources_arm() - tell every producer we wait (consumer_sleeping): a producer
 * whose ring reaches 1/RP_DOORBELL_FRACTION full rings the doorbell. Unlike
 * rp_sources_sleep_prepare it does not look at the rings: the engine keeps its
 * doorbells armed between drains, so a fast producer wakes it before its ring fills.
 */
void rp_sources_arm(struct rp_sources *ss);

/**
 * rp_sources_sleep_prepare() - tell every producer we are about to sleep
 * (consumer_sleeping), re-checking the rings after.
 * @return true if records are pending (do not sleep).
 */
bool rp_sources_sleep_prepare(struct rp_sources *ss);

/** rp_sources_wake() - clear consumer_sleeping everywhere. */
void rp_sources_wake(struct rp_sources *ss);

/**
 * rp_sources_pin() - live source @i for a doorbell wait: its futex word in @word,
 * and a handle that keeps the segment mapped (even if the source finishes) until
 * rp_sources_unpin(). NULL if it is already pinned (one wait at a time).
 */
struct rp_live *rp_sources_pin(struct rp_sources *ss, uint32_t i, uint32_t **word,
			       uint32_t *value);
void rp_sources_unpin(struct rp_sources *ss, struct rp_live *l);

#endif
