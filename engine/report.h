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
#define RP_REPORT_VERSION_MINOR 1 /* readers skip fields they do not know */

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
	uint64_t resyncs;	/* implausible ring indices skipped */
	uint64_t anomalies[RP_ANOM_KIND_COUNT];
};
#define RP_SRC_EXITED	0x1u	/* the producer exited normally */
#define RP_SRC_DEAD	0x2u	/* the producer died (pidfd) */
#define RP_SRC_FILE	0x4u	/* a trace file, not a live producer */
#define RP_SRC_REFUSED	0x8u	/* a segment refused (another uid, malformed): no events */

/* Per name: cProfile's figures plus min/max. */
struct rp_report_fn {
	char *name;
	char *category;		/* "" if none */
	char *file;		/* "" if no source location */
	uint32_t line;		/* 0 if none */
	uint64_t calls;		/* every completed call */
	uint64_t primitive_calls; /* calls with the name not already open on the track */
	uint64_t self_ns;	/* duration minus the children's (clamped) intervals */
	uint64_t cum_ns;	/* sum of durations of primitive calls (cProfile) */
	uint64_t total_ns;	/* sum of durations of all calls (for the mean) */
	uint64_t min_ns;	/* 0 when calls == 0 */
	uint64_t max_ns;
	/* Duration quantiles from the name's sketch (DDSketch, within 1% of the exact
	 * order statistic); all 0 when the name has no sketch (see the caps). 1.1 */
	uint64_t p50_ns, p90_ns, p95_ns, p99_ns;
	/* Concurrency (all open spans) at each call's midpoint: sum and count of the
	 * calls for which it was known; the mean is sum / count. 1.1 */
	uint64_t midpoint_sum, midpoint_count;
};

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
};

/* A concurrency distribution (engine/sweep.c): open spans over the observed range,
 * time-weighted. Percentiles are "lower step": the smallest level whose cumulative
 * time reaches p% of the observed time. 1.1 */
struct rp_report_conc {
	char *name;		/* "overall", "roots" (requests in flight), or a category */
	uint64_t observed_ns;	/* [first open, last event] */
	uint64_t mean_milli;	/* time-weighted mean level x 1000, rounded */
	uint32_t p50, p90, p95, p99, max;
};

/* The engine's caps (all of them; later issues add more), as configured. */
struct rp_report_caps {
	uint32_t max_names;
	uint32_t max_tracks;
	uint32_t max_depth;
	uint32_t max_cct_nodes;
	uint32_t max_sources;
};

struct rp_report {
	uint32_t version_major;
	uint32_t version_minor;
	uint64_t created_realtime_ns;	/* when the report was made (CLOCK_REALTIME) */
	uint64_t t_first;		/* first event time, ns */
	uint64_t t_last;		/* last event time, ns */
	char *clock;			/* "monotonic" (live) or "trace" (files) */
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
};

/* Frees everything a report owns (its arrays and strings) and zeroes it; NULL ok. */
void rp_report_free(struct rp_report *r);

#endif
