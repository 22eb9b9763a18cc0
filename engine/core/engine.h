/* SPDX-License-Identifier: MIT */
/*
 * The engine's analysis core: the name table, the tracks and their stacks, the
 * function statistics and the CCT, and per-source counters. It is fed one ordered
 * stream of events, whatever their origin (live rings through sources.c, trace files
 * through the importers), so the offline and live results of the same events are
 * identical; and it produces reports (report.h).
 *
 * In the engine an event is a struct rp_event whose ts is in nanoseconds and whose
 * name is an engine-global name id (names.h), not the producer's.
 */
#ifndef RP_ENGINE_ENGINE_H
#define RP_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <ringprof/wire.h>

#include "analyses.h"
#include "charge.h"
#include "device.h"
#include "marks.h"
#include "names.h"
#include "recorder.h"
#include "report.h"
#include "stacks.h"
#include "stats.h"
#include "steps.h"

/* Every cap of the engine, in one place. */
struct rp_engine_cfg {
	uint32_t max_names;	/* distinct (name, category, file, line) */
	uint32_t max_tracks;	/* threads + async tracks open at once */
	uint32_t max_depth;	/* frames per track */
	uint32_t max_cct_nodes;	/* CCT nodes (and caller->callee edges) */
	uint32_t max_sources;	/* producer processes and files */
	uint32_t max_sketch_names; /* names with a duration sketch (quantiles) */
	uint32_t max_window_names; /* names per sub-window table (window.h) */
	uint32_t max_counters;	/* counter names (RP_EV_COUNTER) */
	uint32_t topk;		/* entries per bottleneck list, slowest spans kept */
	uint32_t max_window_level; /* concurrency levels per sub-window */
	uint32_t subwindows;	/* sub-windows per rolling window */
	uint32_t n_windows;	/* rolling windows (0..RP_WINDOW_MAX) */
	uint64_t window_ns[RP_WINDOW_MAX]; /* their lengths, increasing */
	/* export (recorder.h, steps.h) */
	uint32_t recorder_spans;	/* flight recorder: last spans kept */
	uint32_t recorder_samples;	/* flight recorder: last counter samples kept */
	const char *step_category;	/* NULL: "step"; "": no category rule */
	const char *step_name;		/* step name prefix; NULL or "": none */
	bool torch_nesting;	/* Chrome import: self times as torch's key_averages()
				 * (import_chrome.h) */
	struct rp_device_cfg dev;  /* device idle time (device.h) */
	/* An async request open across a producer's drop (its END may be lost) is
	 * closed as lost once idle this long (rp_engine_expire()). 0: auto, the longer
	 * of 100 ms and 4 x the longest silence an async request kept and then spoke
	 * again after (a BEGIN-to-END request's: its duration); RP_EXPIRE_NEVER: kept
	 * open, as before 1.3. */
	uint64_t async_expire_ns;
};
#define RP_EXPIRE_NEVER UINT64_MAX
#define RP_EXPIRE_AUTO_MIN_NS 100000000ull	/* the auto expiry's floor: 100 ms */

/* Defaults: 65536 names, 16384 tracks, 256 frames, 262144 nodes, 1024 sources,
 * 4096 sketches, 256 names per sub-window, 1024 counters, top 10, 255 levels, windows
 * of 10 s, 1 min and 5 min of 10 sub-windows each, a recorder of 65536 spans and 16384
 * counter samples. */
void rp_engine_cfg_default(struct rp_engine_cfg *cfg);

/** rp_engine_cfg_check() - caps in range and windows that nest (window.h).
 * @why: room for a message naming the offending setting. @return 0 or -EINVAL. */
int rp_engine_cfg_check(const struct rp_engine_cfg *cfg, char *why, size_t n);

/**
 * rp_engine_memory_bound() - worst-case bytes the engine allocates with @cfg, every
 * table at its cap (docs/memory.md): names, stats, tracks and stacks,
 * sources, analyses (sketches, sweeps, counters, categories) and windows.
 */
size_t rp_engine_memory_bound(const struct rp_engine_cfg *cfg);

struct rp_source {
	struct rp_report_source rep;	/* counters as reported; rep.name owned here */
	struct rp_counts counts;	/* what the stack machine counts */
	uint64_t finished;		/* 0 while live; else its order of finishing */
	uint64_t drop_t;		/* when its drops were last seen to grow (event
					   clock); 0: never (rp_engine_source_dropped) */
};

struct rp_engine {
	struct rp_engine_cfg cfg;
	struct rp_names names;
	struct rp_stats stats;
	struct rp_tracks tracks;
	struct rp_analyses an;
	struct rp_source *src;
	uint32_t n_src;
	struct rp_source folded;	/* finished sources whose rows were reused */
	uint64_t n_folded, n_finished;
	uint64_t t_first, t_last;	/* first and last event time seen */
	uint64_t t_merged;		/* time of the newest event processed in order */
	char clock[16];			/* "monotonic" or "trace" */
	struct rp_recorder rec;		/* export: the flight recorder */
	struct rp_steps steps;		/* export: step statistics */
	uint64_t progress_events;	/* trace events parsed by importers so far, for
					   progress displays */
	struct rp_device *dev;		/* device idle time */
	struct rp_span_sinks sinks;	/* where the stack machine sends spans */
	/* Async expiry (rp_engine_expire()): the longest gap between two records of
	 * an async request (the auto expiry), when the next sweep is due, a source has
	 * lost records, and what was expired (report.h). */
	uint64_t async_gap_ns, expire_next;
	bool drops_seen;
	struct rp_report_expiry expiry;
	struct rp_report_offcpu offcpu;	/* off-CPU: kept by its feeder (offcpu.h) */
	struct rp_marks marks;		/* request milestones (marks.h) */
	struct rp_charges charges;	/* batched work charged to requests (charge.h) */
};

/** rp_engine_open() - make an engine with @cfg (NULL: defaults). 0, -EINVAL (see
 * rp_engine_cfg_check) or -ENOMEM. */
int rp_engine_open(const struct rp_engine_cfg *cfg, struct rp_engine **out);
void rp_engine_close(struct rp_engine *e);

/**
 * rp_engine_add_source() - register a source. When max_sources rows are in use, the
 * row of the source that finished first is folded into one "[finished sources]" row
 * (its counters summed there) and reused: a long-running engine sees any number of
 * short-lived producers, in bounded memory.
 * @return its index, or -ENOSPC when every row is a live source (-ENOMEM).
 */
int rp_engine_add_source(struct rp_engine *e, const char *name, int32_t pid, uint32_t flags);

/** rp_engine_finish_source() - @src is over (exited, died, refused): its row may be
 * folded and reused when rows run out. It has no open tracks (close them first). */
void rp_engine_finish_source(struct rp_engine *e, uint32_t src);

/** rp_engine_name() - the global id of a name seen in source @src (counts the cap). */
uint32_t rp_engine_name(struct rp_engine *e, uint32_t src, const char *name,
			const char *category, const char *file, uint32_t line);

/**
 * rp_engine_event() - process one event of source @src.
 * @thread: the thread track id BEGIN/END belong to (async events use ev->track).
 * An event older than the newest one processed is counted as late (and still
 * processed: its own track's order is intact).
 */
void rp_engine_event(struct rp_engine *e, uint32_t src, uint64_t thread,
		     const struct rp_event *ev);

/**
 * rp_engine_event_at() - the same, with @hint: the slot of @thread's track found last
 * for this producer thread (any value < max_tracks at first; rp_tracks_get_at()). A
 * caller that merges several threads keeps one per thread, so that each finds its
 * track at once however their records interleave.
 */
void rp_engine_event_at(struct rp_engine *e, uint32_t src, uint64_t thread,
			const struct rp_event *ev, uint32_t *hint);

/**
 * rp_engine_run() - @n events of one producer thread @thread of @src, in order: the
 * same as rp_engine_event_at() on each, with the common ones (thread BEGIN/END)
 * done in one loop with their track found once. @hint as in rp_engine_event_at().
 */
void rp_engine_run(struct rp_engine *e, uint32_t src, uint64_t thread,
		   const struct rp_event *ev, uint32_t n, uint32_t *hint);

/* One producer thread of a run of several (rp_engine_run_lanes()). */
#define RP_RUN_LANES 2
struct rp_run_lane {
	uint32_t src;
	uint64_t thread;
	uint32_t *hint;
};

/**
 * rp_engine_run_lanes() - @n events, in order, event i of thread @lane[@which[i]]
 * (@which NULL: all of lane 0): rp_engine_run() for two threads' records merged.
 */
void rp_engine_run_lanes(struct rp_engine *e, const struct rp_run_lane *lane,
			 const struct rp_event *ev, const uint8_t *which, uint32_t n);

/*
 * A stretch of one producer ring read in place (sources.c): its slots and the
 * producer's clock and name map, so that the engine takes each record straight from
 * its slot, with no copy between the ring and the analyses.
 */
struct rp_ring_slice {
	const struct rp_event *slots;	/* record i at slots[(h + i) & mask] */
	uint32_t mask, h, n;		/* n records published and not yet read */
	const struct rp_wire_clock *clock; /* the producer's ticks -> ns */
	const uint32_t *names;		/* producer name id -> engine id (RP_NONE: not
					   resolved yet) */
	uint32_t n_names;
	uint64_t lim;			/* a record after this time is not due */
	uint64_t last_ts;		/* out: the newest time among those processed */
	uint64_t tail_ts;		/* out: the time of the last one processed */
};

/**
 * rp_engine_run_ring() - the records of @sl, in order, of producer thread @thread of
 * @src, each as rp_engine_event_at() with its time converted and its name mapped,
 * while nothing but that is to be done for it: it stops before a record that is not
 * due (after sl->lim), is an owner mark or a summary's data, or whose name is not
 * mapped yet, and leaves that one to the caller. A thread's BEGIN or END with nothing
 * irregular about it is done in the run's loop (as rp_engine_run()), any other record
 * due and in order is dispatched there too, and a late one or one at the finest
 * sub-window's end takes the one-event path; none leaves the loop. @return the
 * records processed.
 */
uint32_t rp_engine_run_ring(struct rp_engine *e, uint32_t src, uint64_t thread,
			    struct rp_ring_slice *sl, uint32_t *hint);

/**
 * rp_engine_offcpu() - thread @thread of @src was off-CPU for @ns (ingest/offcpu.h):
 * added to its innermost open span, or to the source's offcpu_idle_ns when none is
 * open. Called before the thread's first record after the interval. @hint as in
 * rp_engine_event_at().
 */
void rp_engine_offcpu(struct rp_engine *e, uint32_t src, uint64_t thread, uint64_t ns,
		      uint32_t *hint);

/** rp_engine_close_thread() - a thread track ended (exit, ring reuse): close it. */
void rp_engine_close_thread(struct rp_engine *e, uint32_t src, uint64_t thread, uint64_t t,
			    int why);

/**
 * rp_engine_source_dropped() - @src's producer was seen to have lost more records
 * at @t (the event clock: CLOCK_MONOTONIC ns for live producers): an async request
 * of @src opened before @t may have lost its END (its track is "suspect").
 */
void rp_engine_source_dropped(struct rp_engine *e, uint32_t src, uint64_t t);

/**
 * rp_engine_async_expire_ns() - the async expiry in force (cfg.async_expire_ns, or
 * the auto value now); RP_EXPIRE_NEVER: none.
 */
uint64_t rp_engine_async_expire_ns(const struct rp_engine *e);

/**
 * rp_engine_expire() - the expiry sweep, as of @now (the event clock, at least the
 * newest event processed): every suspect async track idle (no record) for the
 * expiry or longer is closed as lost at @now (rp_track_expire(): its spans leave
 * the concurrency sweeps then). Does nothing until a source lost records, nor more
 * often than every expiry / 8 (at least 1 ms) of @now: one pass over the track
 * slots each time, none per event. Counted in e->expiry (report.h).
 */
void rp_engine_expire(struct rp_engine *e, uint64_t now);

/** rp_engine_close_source() - close every track of @src at @t (see rp_track_close). */
void rp_engine_close_source(struct rp_engine *e, uint32_t src, uint64_t t, int why);

/**
 * rp_engine_report() - build a report of everything so far. Functions with no
 * completed call and no CCT node are left out. @return 0 or -ENOMEM (then @out
 * is freeable).
 */
int rp_engine_report(const struct rp_engine *e, struct rp_report *out);

/**
 * rp_engine_report_at() - rp_engine_report() as of @now_ns (the event clock,
 * CLOCK_MONOTONIC ns for live producers): the rolling windows end at the later of
 * @now_ns and the newest event, so a live window empties when traffic stops instead
 * of freezing at the last event. 0: as of the newest event (rp_engine_report()).
 */
int rp_engine_report_at(const struct rp_engine *e, uint64_t now_ns, struct rp_report *out);

#endif
