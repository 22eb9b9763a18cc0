/* SPDX-License-Identifier: MIT */
/*
 * Timeline exports of a report's flight recorder (engine/analyses/recorder.h) and the step
 * statistics blocks of the json and text formats.
 *
 * Tracks: every recorded track becomes a Chrome (pid, tid) pair (or a Gantt row).
 * Processes are (source, pid text): a trace's own numeric pid is kept when no other
 * process has taken it; other processes (a second source with the same pid, string
 * pids, live producers without one) get the lowest free number, so sources never
 * share a pid. Likewise a numeric tid is kept within its process, else a free one
 * is chosen. Async tracks (requests) become threads of their source's process
 * named "async <id>": their spans nest per request, as on a thread. Names of
 * processes ("pid <pid> (<source file>)", or "<pid text> (<source file>)" for a
 * string pid) and threads ("tid <tid text>", "async <id>",
 * "thread <id>") go in process_name/thread_name metadata events.
 *
 * Filters (inclusive, in the report's clock, ns): a span is kept when it overlaps
 * [from, to] (end >= from and start <= to), a counter sample when from <= ts <= to.
 */
#ifndef RP_TOOLS_RENDER_EXPORT_H
#define RP_TOOLS_RENDER_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

struct rp_export_opts {
	uint64_t from, to; /* 0, UINT64_MAX: everything */
	uint32_t max_rows; /* gantt: tracks drawn (0: 200); the rest are noted */
};

/* A track as exported. */
struct rp_export_track {
	uint32_t pid, tid; /* Chrome numbers */
	uint32_t proc;	   /* index of its process */
	char name[96];	   /* thread_name */
};

struct rp_export_proc {
	uint32_t source;
	uint32_t pid;
	const char *label; /* the pid text ("" if none): the report's, or own */
	char own[16];
	uint32_t next_tid; /* the lowest tid that may be free */
};

struct rp_export_map {
	struct rp_export_track *t; /* per recorder track */
	struct rp_export_proc *p;
	uint32_t n_p;
};

/** rp_export_map_build() - pids and tids of every recorder track. 0 or -ENOMEM. */
int rp_export_map_build(const struct rp_report *r, struct rp_export_map *m);
void rp_export_map_free(struct rp_export_map *m);

/** rp_export_keep_span() - does the span pass the filter? */
static inline int rp_export_keep_span(const struct rp_export_opts *o, uint64_t start, uint64_t dur)
{
	return start + dur >= o->from && start <= o->to;
}

/**
 * rp_export_steps_range() - the time range [*from, *to] of the recorded steps with
 * ordinals @a..@b (inclusive, 0-based, in completion order): the earliest start and
 * latest end among them. @return 0, or -ENOENT when the recorder holds none.
 */
int rp_export_steps_range(const struct rp_report *r, uint64_t a, uint64_t b, uint64_t *from,
			  uint64_t *to);

/**
 * rp_render_chrome() - one Chrome trace JSON object {"traceEvents": [...],
 * "displayTimeUnit": "ns", "otherData": {...}}: "M" process_name/thread_name events,
 * an "X" event per recorded span (name, cat, pid, tid, ts and dur in µs with three
 * decimals, so ns exact; args.step for steps), sorted by start then depth, and a "C"
 * event per counter sample (args {"value": v}). @return 0, -ENOMEM or -EIO.
 */
int rp_render_chrome(const struct rp_report *r, FILE *out, const struct rp_export_opts *o);

/**
 * rp_render_chrome_warning() - when the flight recorder dropped spans (its cap keeps
 * the newest), a sentence saying how many and which part of the run the timeline
 * still covers, for stderr and the file's otherData.warning. @return whether it
 * wrote one into @buf.
 */
bool rp_render_chrome_warning(const struct rp_report *r, char *buf, size_t len);

/**
 * rp_render_gantt() - an SVG Gantt chart of the recorded spans: a row per track
 * (nested spans in stacked sub-rows, 8 at most), one <rect class="s"> per span with a
 * <title> tooltip, colour by category with a legend (<g class="lg"> per category),
 * a time axis with 1-2-5 ticks. @return 0, -ENOMEM or -EIO.
 */
int rp_render_gantt(const struct rp_report *r, FILE *out, const struct rp_export_opts *o);

/* Step statistics and recorder counters as json members (",\n  \"steps\": ...,
 * \"recorder\": {...}") and as a text block (nothing without steps). */
void rp_render_steps_json(const struct rp_report *r, FILE *out);
void rp_render_steps_text(const struct rp_report *r, FILE *out);

#endif
