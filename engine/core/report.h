/* SPDX-License-Identifier: MIT */
/*
 * The report: a flat, self-contained picture of what the engine knows at one
 * moment. The engine builds one from its live tables; the snapshot codec writes it
 * as MessagePack and reads it back; every output format (text, json, pstats, ...)
 * renders one. Keeping this the only thing they share keeps the encoder apart from
 * the engine's internals and lets a snapshot from disk render exactly like a live
 * one.
 *
 * Ownership: a report owns all its arrays and strings (one allocation each,
 * released by rp_report_free). Indices, not pointers, link its parts, so a report
 * can be copied, merged and serialised without fix-ups.
 *
 * Times are nanoseconds. Times of day (t_first/t_last) are CLOCK_MONOTONIC for
 * live data and the trace's own time base for analyzed files.
 */
#ifndef RP_ENGINE_REPORT_H
#define RP_ENGINE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#define RP_REPORT_VERSION_MAJOR 1 /* readers reject another major */
#define RP_REPORT_VERSION_MINOR 6 /* readers skip fields they do not know */

#define RP_NONE UINT32_MAX /* "no index" (the CCT root's parent, ...) */

/* What was counted instead of crashing or growing: one counter per kind. */
enum rp_anomaly {
	RP_ANOM_END_MISMATCH,	/* END for a span open below the top: the spans above
				   it were closed as truncated */
	RP_ANOM_END_UNMATCHED,	/* END (or ASYNC_END) with no open span of that name */
	RP_ANOM_DEPTH_CAP,	/* BEGIN past the stack depth cap: not recorded */
	RP_ANOM_TRACK_CAP,	/* a new track past the track cap: its events dropped */
	RP_ANOM_NAME_CAP,	/* a new name past the name cap: folded into "[other]" */
	RP_ANOM_CCT_CAP,	/* a new CCT node past the node cap: folded into
				   the parent's "[other]" child */
	RP_ANOM_CLAMPED,	/* a child overhanging its parent (trace rounding),
				   clamped to the parent's end */
	RP_ANOM_BAD_EVENT,	/* a record with an unknown kind or name id */
	RP_ANOM_OPEN_AT_END,	/* spans still open when the report was made */
	RP_ANOM_WINDOW_CAP,	/* a name past a sub-window's name cap: its sketch and
				   exact figures not kept there (Space-Saving still
				   counts it for the bottleneck lists) 1.2 */
	RP_ANOM_COUNTER_CAP,	/* a counter name past the counter cap: not kept 1.2 */
	RP_ANOM_DROP_LOST,	/* spans a producer's drop cut: open while records of
				   their thread were lost, or whose BEGIN was lost, or
				   async ones expired after a drop (rp_engine_expire());
				   not in the statistics (docs/live.md) */
	RP_ANOM_LEVEL_CAP,	/* a piece of time at a concurrency level past
				   --max-window-level in a window: counted at the cap
				   (the mean stays exact, max and percentiles are capped) */
	RP_ANOM_RESTART_GAP,	/* records a previous engine read from this producer
				   but wrote in no snapshot (it was killed): lost */
	RP_ANOM_SKETCH_EVICTED,	/* a name's all-time duration sketch given to another
				   name at --max-sketch-names (the least recently
				   active, names seen once first): it reports no
				   quantiles from then on 1.4 */
	RP_ANOM_WINDOW_EVICTED,	/* a sub-window entry called once evicted for a new
				   name at --max-window-names (its calls also count
				   as window_cap) 1.4 */
	RP_ANOM_MARK_UNMATCHED,	/* a milestone mark (RP_INSTANT_MARK) with no request
				   open on its track: not recorded 1.5 */
	RP_ANOM_MARK_REPEAT,	/* a milestone its request marked already (or past
				   RP_MARKS_PER_REQUEST names on it): not recorded 1.5 */
	RP_ANOM_CHARGE_ORPHAN,	/* a charge (RP_LINK_CHARGE) naming no open request or no
				   open span of its name: not recorded 1.6 */
	RP_ANOM_CHARGE_LATE,	/* a charged request that ended before the span charged
				   to it: its share in its name's total only 1.6 */
	RP_ANOM_CHARGE_CAP,	/* a charge past RP_CHARGE_PER_SPAN requests on a span or
				   RP_CHARGE_SPANS charged spans open: not recorded 1.6 */
	RP_ANOM_KIND_COUNT
};

/* Names of the anomaly kinds as they appear in every output ("end_mismatch", ...). */
extern const char *const rp_anomaly_names[RP_ANOM_KIND_COUNT];

/* Per source (a producer process, or a trace file). */
struct rp_report_source {
	char *name;		/* segment name or file path */
	int32_t pid;		/* producer pid; 0 for files */
	uint32_t flags;		/* RP_SRC_* */
	uint64_t events;	/* records received */
	uint64_t dropped;	/* records the producer could not write (full ring, no ring) */
	uint64_t late;		/* records older than the merge watermark */
	uint64_t truncated;	/* spans closed because the producer died or the span
				   above an END_MISMATCH was closed */
	uint64_t names_dropped;	/* rp_intern() answers of id 0 in the producer */
	uint64_t nospace_dropped; /* of `dropped`: events of threads whose ring found no
				     room in /dev/shm (wire 1.2) */
	uint64_t rings_nospace;	/* ring claims refused for want of room in /dev/shm */
	uint64_t reentrant;	/* of `dropped`: records of signal handlers that
				   interrupted a recording call of their thread */
	uint64_t resyncs;	/* implausible ring indices skipped */
	uint64_t anomalies[RP_ANOM_KIND_COUNT];
	/* Live sources: the highest backlog any of its rings had at a drain (a lower
	 * bound of the true high-water mark) and their capacity; the most records one
	 * of the engine's per-ring buffers held; merges a full buffer forced. */
	uint64_t ring_hwm, ring_capacity, buffer_hwm, forced;
	uint64_t offcpu_idle_ns; /* its threads' off-CPU time with no span open 1.3 */
	/* The producer's name table, so that names_dropped can say which to raise:
	 * entries published and their cap (RINGPROF_NAMES), arena bytes used and its
	 * size (RINGPROF_NAME_BYTES). 0: not known (older snapshots). */
	uint64_t names_used, name_capacity, name_bytes_used, name_bytes;
	/* Where its times come from (hostid.h), 1.4: the host name and boot id ("" when
	 * not known: trace files, older snapshots), and the anchor of its monotonic clock
	 * in wall time, a CLOCK_REALTIME / CLOCK_MONOTONIC pair read together (0, 0: not
	 * known). clock_shift_ns: what `ringprof merge` added to this source's times to
	 * put them on the merged report's clock (rp_report_align(); 0: its own clock). */
	char *host;
	char *boot_id;
	uint64_t anchor_realtime_ns, anchor_monotonic_ns;
	int64_t clock_shift_ns;
	/* Live, 1.4: summaries at the source (docs/summaries.md): the highest threshold
	 * in force on its threads (ns; 0: off, or a producer before them) and how many
	 * times its threads raised theirs for a ring more than half full. */
	uint64_t summary_ns, summary_raised;
};
#define RP_SRC_EXITED	0x1u	/* the producer exited normally */
#define RP_SRC_DEAD	0x2u	/* the producer died (pidfd) */
#define RP_SRC_FILE	0x4u	/* a trace file, not a live producer */
#define RP_SRC_REFUSED	0x8u	/* a segment refused (another uid, malformed): no events */

/* A DDSketch (engine/analyses/sketch.c) as data: enough to rebuild it bucket for bucket, so
 * snapshots merge with the sketch's error bound intact. Buckets are dense runs of
 * counts: pos[i] is the count of bucket pos_lo + i of positive values, likewise neg
 * for negative values (|v|). alpha == 0 means "no sketch" (everything else 0). 1.2 */
struct rp_report_sketch {
	double alpha;
	uint64_t count;		/* values recorded: zero + sum(pos) + sum(neg) */
	uint64_t zero;		/* |v| < DBL_MIN */
	uint64_t dropped;	/* NaN, infinities, overflow, no memory */
	uint64_t collapsed_neg, collapsed_pos; /* values kept in a floor bucket */
	double min, max, sum;	/* exact over the values; min = max = 0 when count = 0 */
	int32_t pos_lo, neg_lo;
	uint32_t n_pos, n_neg;
	uint64_t *pos, *neg;	/* owned; NULL when n_* = 0 */
};

/* Per name: cProfile's figures plus min/max. */
struct rp_report_fn {
	char *name;
	char *category;		/* "" if none */
	char *file;		/* "" if no source location */
	uint32_t line;		/* 0 if none */
	uint64_t calls;		/* every completed call */
	uint64_t primitive_calls; /* calls with the name not already open on the track */
	uint64_t self_ns;	/* duration minus the children's (clamped) intervals; with
				 * torch nesting (import_chrome.h), torch's sum, which may be
				 * negative: read it as an int64 (two's complement) */
	uint64_t cum_ns;	/* sum of durations of primitive calls (cProfile) */
	uint64_t total_ns;	/* sum of durations of all calls (for the mean) */
	uint64_t min_ns;	/* 0 when calls == 0 */
	uint64_t max_ns;
	/* Duration quantiles from the name's sketch (DDSketch, within 1% of the exact
	 * order statistic); absent (rp_report_fn_has_quantiles() false, the p*_ns 0)
	 * when the name has no sketch (see the caps). 1.1 */
	uint64_t p50_ns, p90_ns, p95_ns, p99_ns;
	/* Concurrency (all open spans) at each call's midpoint: sum and count of the
	 * calls for which it was known; the mean is sum / count. 1.1 */
	uint64_t midpoint_sum, midpoint_count;
	struct rp_report_sketch dur;	/* the duration sketch (ns) 1.2 */
	uint64_t drop_lost;	/* its spans a producer's drop cut (RP_ANOM_DROP_LOST whose
				   BEGIN arrived): in none of the figures above 1.3 */
	/* Off-CPU time (struct rp_report_offcpu): its thread was descheduled while it
	 * was the innermost open span (a part of self_ns), and inside its primitive
	 * calls (a part of cum_ns). 0 when not measured. 1.3 */
	uint64_t offcpu_ns, offcpu_cum_ns;
	uint64_t errors;	/* its calls that ended in error (RP_SPAN_ERROR; in calls) 1.4 */
	uint64_t started;	/* its spans begun (arrivals): calls + open now + lost by
				   drops; 0 before 1.4 1.4 */
	/* 1: a request milestone (RP_INSTANT_MARK, engine/core/marks.h), not a span: each
	 * call is one request's time from its start to the mark (in total_ns, min/max,
	 * quantiles and windows); self_ns, cum_ns, primitive_calls stay 0. 1.5 */
	uint8_t milestone;
	/* Batched work charged to this name's requests (RP_LINK_CHARGE, charge.h): the
	 * sum of their shares, and how many shares (one per charged span and request).
	 * An attribution view: the charged spans' own time stays in their rows. 1.6 */
	uint64_t charged_ns, charged;
};

/*
 * Whether @f's p50..p99 exist: its sketch holds values, or (a 1.1 snapshot, no sketch
 * written) they are not 0. A 0 with no sketch meant "none" in every version, so
 * renderers print null / "-" / no series for them, never 0.
 */
static inline int rp_report_fn_has_quantiles(const struct rp_report_fn *f)
{
	if (f->dur.alpha != 0)
		return f->dur.count != 0;
	return f->p50_ns != 0 || f->p99_ns != 0;
}

/* caller -> callee, indices into fns; the same figures, for calls made from caller. */
struct rp_report_edge {
	uint32_t caller;
	uint32_t callee;
	uint64_t calls;
	uint64_t primitive_calls;
	uint64_t self_ns;	/* callee's self time in these calls */
	uint64_t cum_ns;	/* callee's duration in these calls, primitive ones */
};

/* A calling-context tree node: the path root -> ... -> this. Node 0 is the root
 * (fn == RP_NONE, parent == RP_NONE); parents come before children. */
struct rp_report_node {
	uint32_t parent;
	uint32_t fn;		/* index into fns; an "[other]" fn for folded nodes */
	uint64_t calls;
	uint64_t self_ns;
	uint64_t total_ns;	/* sum of durations of the calls at this node */
	uint64_t offcpu_ns;	/* off-CPU time with this node innermost (in self_ns) 1.3 */
};

/* A concurrency distribution (engine/analyses/sweep.c): open spans over the observed range,
 * time-weighted. Percentiles are "lower step": the smallest level whose cumulative
 * time reaches p% of the observed time. 1.1 */
struct rp_report_conc {
	char *name;		/* "overall", "roots" (spans at depth 0), a category, or
				   "requests" (rp_report.requests) */
	uint64_t observed_ns;	/* [first open, last event] */
	uint64_t mean_milli;	/* time-weighted mean level x 1000, rounded */
	uint32_t p50, p90, p95, p99, max;
	uint64_t over_cap_ns;	/* time at levels above the cap (counted at it) 1.2 */
	uint32_t now;		/* open spans when the report was made (all-time rows;
				   0 in windows) 1.2 */
};

/* Per category: the durations of its spans. 1.2 */
struct rp_report_cat {
	char *name;		/* the category; "" if none */
	uint64_t calls;
	uint64_t self_ns;
	uint64_t total_ns;	/* sum of durations of all calls */
	uint64_t p50_ns, p90_ns, p95_ns, p99_ns;
	struct rp_report_sketch dur;
};

/* Per counter name (rp_counter()): its values. 1.2 */
struct rp_report_counter {
	char *name;
	char *category;
	uint64_t samples;
	int64_t last;		/* the newest sample by event time */
	int64_t min, max;
	double mean;
	double p50, p90, p95, p99;
	struct rp_report_sketch values;
};

/* One entry of a bottleneck list: fn (index into fns) with a weight whose true value
 * lies in [value - error, value]; error is 0 when the list is exact. 1.2 */
struct rp_report_top {
	uint32_t fn;
	uint64_t value;
	uint64_t error;
};

/* A slow span kept as an example of where the time went. 1.2 */
struct rp_report_span {
	uint32_t fn;		/* index into fns */
	uint32_t source;	/* index into sources */
	uint64_t track;		/* thread track id, or the async track */
	uint64_t span_id;	/* async span id; 0 on thread tracks */
	uint64_t start_ns;
	uint64_t dur_ns;
	uint64_t self_ns;
	uint64_t subtree_ns;	/* its duration plus that of async children, = dur_ns
				   on thread tracks */
	uint32_t concurrency;	/* open spans at its midpoint */
	uint32_t concurrency_known; /* 0: the change history had moved on */
	uint64_t charged_ns;	/* a request: batched work charged to it (charge.h); 0 for
				   other spans 1.6 */
};

/* Top-k lists over one window. bound_* is the Space-Saving floor F of that list: any
 * name not listed weighs at most F, and every error is at most F (0: exact). 1.2 */
struct rp_report_bottlenecks {
	struct rp_report_top *by_cum, *by_self, *by_count;
	uint32_t n_by_cum, n_by_self, n_by_count;
	uint64_t bound_cum, bound_self, bound_count;
	struct rp_report_span *slowest;
	uint32_t n_slowest;
};

/* Per name in a rolling window. 1.2 */
struct rp_report_wfn {
	uint32_t fn;		/* index into fns */
	uint64_t calls;
	uint64_t self_ns;
	uint64_t cum_ns;
	uint64_t p50_ns, p90_ns, p95_ns, p99_ns;
	/* The window's duration sketch of the name (its sub-windows merged), so that
	 * windows of several hosts merge with the sketch's bound. 1.4 */
	struct rp_report_sketch dur;
};

/* A rolling window on the event clock: the sub-windows of length length_ns /
 * subwindows that end with the one holding t_to. 1.2 */
struct rp_report_window {
	char *name;		/* "10s", "1m", "5m", ... */
	uint64_t length_ns;
	uint32_t subwindows;
	uint64_t t_from, t_to;	/* the event-clock range covered */
	struct rp_report_wfn *fns;
	uint32_t n_fns;
	struct rp_report_conc *conc; /* "overall", "roots" over the window */
	uint32_t n_conc;
	struct rp_report_bottlenecks top;
};

/* Step statistics of one phase (engine/analyses/steps.c): the durations of its step spans.
 * mean = total_ns / count; quantiles from the sketch (within 1%). 1.2 */
struct rp_report_step_phase {
	char *name;		/* the phase: a name prefix, or a category (steps.h) */
	uint64_t count;
	uint64_t total_ns;
	uint64_t min_ns, max_ns; /* 0 when count == 0 */
	uint64_t p50_ns, p95_ns, p99_ns;
	struct rp_report_sketch dur;
};

/* A track of the flight recorder (engine/analyses/recorder.c) and how exports name it. 1.2 */
struct rp_report_rtrack {
	uint32_t source;	/* index into sources */
	uint8_t kind;		/* 1 thread, 2 async (enum rp_track_kind) */
	uint64_t id;		/* the engine's thread track id, or the async track id */
	char *pid, *tid;	/* the trace's own pid and tid text; "" when unknown
				   (live producers, async tracks) */
};

/* A span of the flight recorder. 1.2 */
struct rp_report_rspan {
	uint32_t fn;		/* index into fns */
	uint32_t track;		/* index into recorder.tracks */
	uint32_t depth;		/* 0 = a root of its track */
	uint64_t step;		/* step ordinal + 1 (0-based ordinals in completion
				   order); 0 if not a step */
	uint64_t start_ns, dur_ns;
};

/* A counter sample of the flight recorder. 1.2 */
struct rp_report_rsample {
	uint32_t name;		/* index into recorder.names */
	uint32_t track;		/* index into recorder.tracks */
	uint64_t ts_ns;
	int64_t value;
};

/* The flight recorder: the most recent spans and counter samples. 1.2 */
struct rp_report_recorder {
	uint32_t max_spans, max_samples;	/* the ring sizes (caps) */
	uint64_t spans_seen, samples_seen;	/* recorded since the start */
	uint64_t wrapped;			/* spans overwritten: "recorder_wrapped" */
	uint64_t samples_wrapped;		/* samples overwritten */
	uint64_t unlisted;	/* kept spans left out of the report (unknown name
				   or source row) */
	uint64_t labels_dropped;		/* tracks past the label cap */
	struct rp_report_rtrack *tracks;
	uint32_t n_tracks;
	struct rp_report_rspan *spans;		/* oldest (first completed) first */
	uint32_t n_spans;
	char **names;				/* counter names */
	uint32_t n_names;
	struct rp_report_rsample *samples;	/* oldest first */
	uint32_t n_samples;
};

/* The engine's caps (all of them; later issues add more), as configured. */
struct rp_report_caps {
	uint32_t max_names;
	uint32_t max_tracks;
	uint32_t max_depth;
	uint32_t max_cct_nodes;
	uint32_t max_sources;
	uint32_t max_sketch_names;	/* 1.2 */
	uint32_t max_window_names;	/* names per sub-window 1.2 */
	uint32_t max_counters;		/* 1.2 */
	uint32_t topk;			/* entries per bottleneck list 1.2 */
	uint64_t memory_bound;		/* worst-case engine bytes at these caps 1.2 */
	uint32_t subwindows;		/* sub-windows per rolling window 1.2 */
	uint32_t max_window_level;	/* concurrency levels kept per sub-window 1.2 */
};

/* Device idle time (engine/analyses/device.h has the exact semantics, torch's BasicEvaluation).
 * 1.2 */
struct rp_report_dev_point {	/* queue depth from t_ns on */
	uint64_t t_ns;
	uint32_t depth;
};

struct rp_report_dev_interval {	/* [start_ns, end_ns), idle intervals and phases */
	uint64_t start_ns, end_ns;
};

struct rp_report_dev_span {	/* a span worth optimizing */
	char *name;
	char *source;		/* the "file.py(line): fn" frame; "" if none */
	char *source_file;	/* its file ("" if none) */
	uint32_t source_line;	/* its line (0 if none) */
	uint32_t queue_depth;	/* queue depth at its start */
	uint32_t phase;		/* index into phases of the first phase it overlaps */
	uint64_t start_ns, dur_ns;
	int64_t self_ns;	/* torch's: dur minus its children's durations, device
				   work included (a launch's kernel is its child), so a
				   launch's may be negative */
	uint64_t idle_ns;	/* overlap with the idle intervals */
	double idle_fraction;	/* idle_ns / dur_ns; 0 when dur_ns = 0 */
	double score;		/* z(idle_fraction) + 0.6 z(self_ns); 0 when either
				   standard deviation is 0 or there is one candidate */
};

struct rp_report_device {
	uint64_t launches;	/* queue launches (cudaLaunchKernel family) */
	uint64_t kernels;	/* queue kernels (device work but memory operations) */
	uint64_t other_device;	/* device work that is not a kernel (memcpy, memset) */
	uint64_t linked;	/* launches mapped to a kernel */
	uint64_t unmatched_launches; /* launches with no kernel mapped */
	uint64_t unmatched_kernels;  /* kernels no launch mapped to */
	uint64_t spans;		/* spans analysed: torch's event tree (CPU spans of
				   thread tracks and device work) */
	uint64_t busy_ns;	/* union of the kernels' intervals */
	uint64_t idle_ns;	/* sum of the idle intervals */
	uint32_t max_queue_depth;
	uint64_t n_points_total;	/* change points before the cap */
	struct rp_report_dev_point *points;
	uint32_t n_points;
	uint64_t n_idle_total;		/* idle intervals before the cap */
	struct rp_report_dev_interval *idle;
	uint32_t n_idle;
	uint64_t n_phases_total;	/* falling phases before the cap */
	struct rp_report_dev_interval *phases;
	uint32_t n_phases;
	uint64_t candidates;		/* spans in a falling phase */
	struct rp_report_dev_span *ranked;
	uint32_t n_ranked;
	/* Caps hit: kept data the analysis had to go without. */
	uint64_t spans_dropped;		/* spans past max_spans */
	uint64_t events_dropped;	/* launches/kernels past max_events */
	uint64_t links_dropped;		/* links with no room to wait for their span */
	uint64_t links_orphan;		/* links with no open span, or whose span
					   did not end normally */
};

/*
 * Async requests whose END a drop may have cut (engine.h, rp_engine_expire()): a
 * request open across a producer's drop and idle for expire_ns is closed as lost.
 * Until then it counts as open. A span that overstates the level at some time (its
 * END was lost) is still open, and suspect, at the next sweep after the drop is
 * reported, so the sweeps ("overall", "roots" alike) overstate the level by at most
 * max(peak_spans, suspect_spans) at any time, each span for at most
 * max(stale_max_ns, expire_ns). 1.3
 */
struct rp_report_expiry {
	uint64_t expire_ns;	/* the idle time in force; 0: no expiry */
	uint64_t requests;	/* async tracks closed as lost by the expiry */
	uint64_t spans;		/* their open spans (each also under drop_lost) */
	uint64_t stale_max_ns;	/* the longest one stayed open after its last record */
	uint64_t suspect_requests; /* open now, across a drop: may have lost their END */
	uint64_t suspect_spans;	/* their open spans */
	uint64_t peak_spans;	/* the most suspect spans open at a sweep */
};

/*
 * The bound the expiry leaves (above): at most *@spans open spans too many at any
 * time, each for at most *@ns;
 * UINT64_MAX: suspects are open and nothing expires them (no expiry). Both 0: none.
 */
static inline void rp_report_expiry_bound(const struct rp_report_expiry *x, uint64_t *spans,
					  uint64_t *ns)
{
	*spans = x->peak_spans > x->suspect_spans ? x->peak_spans : x->suspect_spans;
	*ns = x->stale_max_ns > x->expire_ns ? x->stale_max_ns : x->expire_ns;
	if (x->suspect_spans > 0 && x->expire_ns == 0)
		*ns = UINT64_MAX;
	if (*spans == 0)
		*ns = 0;
}

/*
 * Off-CPU time (engine/ingest/offcpu.h): context switches of the producers' threads
 * (perf_event_open), each interval [switched out, switched in] added to the span
 * innermost on its thread then. 1.3
 */
enum rp_offcpu_state {
	RP_OFFCPU_UNKNOWN = 0,	/* not measured: off, or not a live session */
	RP_OFFCPU_ON = 1,	/* measured for the threads counted below */
	RP_OFFCPU_REFUSED = 2,	/* the kernel refused it (the engine log says why) */
};

struct rp_report_offcpu {
	uint32_t state;		/* enum rp_offcpu_state */
	uint32_t threads;	/* producer threads watched now */
	uint64_t watched;	/* threads ever watched */
	uint64_t refused;	/* threads not watched: the cap, or the kernel said no */
	uint64_t lost;		/* switch records the kernel lost (ring full): the
				   intervals they held are missing */
	uint64_t unpaired;	/* switch records without their pair (after a loss) */
	uint64_t overflow;	/* intervals left out: their thread's queue was full
				   (the engine far behind its records) */
	uint64_t overflow_ns;	/* their sum: off-CPU time missing from the spans */
	uint64_t late;		/* intervals read after a later record of their thread
				   was processed: added to the span open then */
	uint64_t intervals;	/* off-CPU intervals attributed */
	uint64_t total_ns;	/* their sum (spans' and idle) */
};

struct rp_report {
	uint32_t version_major;
	uint32_t version_minor;
	uint64_t created_realtime_ns;	/* when the report was made (CLOCK_REALTIME) */
	uint64_t t_first;		/* first event time, ns */
	uint64_t t_last;		/* last event time, ns */
	char *clock;			/* "monotonic" (live) or "trace" (files) */
	char *writer;			/* 1.4: "ringprof X.Y.Z", the version that made
					   the report ("" in older snapshots) */
	struct rp_report_caps caps;

	/* Totals over all sources. Caps hit are the *_CAP anomalies. */
	uint64_t events, dropped, late, truncated;
	uint64_t anomalies[RP_ANOM_KIND_COUNT];

	struct rp_report_source *sources;
	uint32_t n_sources;
	struct rp_report_fn *fns;
	uint32_t n_fns;
	struct rp_report_edge *edges;
	uint32_t n_edges;
	struct rp_report_node *nodes;
	uint32_t n_nodes;
	struct rp_report_conc *conc;	/* conc[0] "overall", conc[1] "roots", then categories */
	uint32_t n_conc;
	struct rp_report_cat *cats;	/* 1.2 */
	uint32_t n_cats;
	struct rp_report_counter *counters; /* 1.2 */
	uint32_t n_counters;
	struct rp_report_window *windows; /* 1.2 */
	uint32_t n_windows;
	struct rp_report_bottlenecks bottlenecks; /* all time 1.2 */
	struct rp_report_step_phase *steps; /* step statistics by phase 1.2 */
	uint32_t n_steps;
	uint64_t steps_folded;		/* steps of phases past the phase cap, counted
					   in the "[other]" phase 1.2 */
	struct rp_report_recorder recorder; /* the flight recorder 1.2 */
	struct rp_report_device device;	/* device idle time 1.2 */
	struct rp_report_expiry expiry;	/* async requests closed after drops 1.3 */
	struct rp_report_offcpu offcpu;	/* off-CPU time, how it was measured 1.3 */
	/* Requests in flight: request spans (async tracks' roots: rp_async_*, Python
	 * request()) open at once, exactly; unlike conc[1] "roots", no batching loop's
	 * spans. name NULL or "": absent (no request seen, an older or merged report). 1.4 */
	struct rp_report_conc requests;
	/* 1.5: records the producers had published that this report does not hold yet
	 * (a live snapshot is taken without draining the backlog first: they are in
	 * the next one); 0 for a trace file's report and in older snapshots. */
	uint64_t unmerged_records;
};

/* Whether @r has a requests-in-flight figure (r->requests). */
static inline int rp_report_has_requests(const struct rp_report *r)
{
	return r->requests.name != NULL && r->requests.name[0] != '\0';
}

void rp_report_device_free(struct rp_report_device *d);

struct rp_sketch;

/* A sketch as report data (@out owns its buckets), and back: rebuilds @out (an
 * initialised sketch of the same alpha, emptied first). 0, -ENOMEM or -EINVAL. */
int rp_report_sketch_from(struct rp_report_sketch *out, const struct rp_sketch *s);
int rp_report_sketch_to(const struct rp_report_sketch *in, struct rp_sketch *out);
void rp_report_sketch_free(struct rp_report_sketch *k);
void rp_report_bottlenecks_free(struct rp_report_bottlenecks *b);
void rp_report_recorder_free(struct rp_report_recorder *rec);

/* Frees everything a report owns (its arrays and strings) and zeroes it; NULL ok. */
void rp_report_free(struct rp_report *r);

/* rp_report_writer() - "ringprof X.Y.Z" (rp_version()) for rp_report.writer, malloc'd;
 * NULL when out of memory. */
char *rp_report_writer(void);

#endif
