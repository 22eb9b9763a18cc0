/* SPDX-License-Identifier: MIT */
/*
 * Milestones of requests (RP_EV_INSTANT with RP_INSTANT_MARK, wire.h): "the first
 * token came 180 ms after the request began". A mark names its request by its async
 * track; its figure is the mark's time minus the start of the track's request (its
 * root span), recorded under the mark's name as a call of that length: calls, total,
 * min, max, the name's sketch and its window entries, so milestones get percentiles,
 * windows, Prometheus series and top's rows as spans do. A milestone adds no self or
 * cumulative time to any name (its own row's are 0), has no caller, no CCT node, and
 * never enters the concurrency sweeps nor the slowest spans: it is not a span in
 * flight. Its row carries the `milestone` flag (report.h).
 * Irregular marks are counted and left out, never a wrong figure:
 *   no request open on the track (unknown track, the request ended, a task's track,
 *   its root lost by a drop)               -> RP_ANOM_MARK_UNMATCHED;
 *   a name the request marked already, or past RP_MARKS_PER_REQUEST names on it
 *                                          -> RP_ANOM_MARK_REPEAT;
 *   a name begun as a span's                 -> RP_ANOM_BAD_EVENT.
 * Memory: one set of marked names per track slot (made at the first mark).
 */
#ifndef RP_ENGINE_MARKS_H
#define RP_ENGINE_MARKS_H

#include <stddef.h>
#include <stdint.h>

#include <ringprof/wire.h>

#include "stacks.h"

struct rp_analyses;

/* Distinct milestones one request can mark (the first token, the queue's end, ...). */
#define RP_MARKS_PER_REQUEST 8

/* The names a track slot's current request marked: valid while (src, id, start) are
 * its track's and its root's (a reused slot or a new request on the track starts
 * empty). */
struct rp_mark_set {
	uint64_t id, start;
	uint32_t src, n;
	uint32_t name[RP_MARKS_PER_REQUEST];
};

struct rp_marks {
	struct rp_mark_set *set;	/* per track slot; NULL until the first mark */
	uint32_t max_tracks;
};

void rp_marks_init(struct rp_marks *m, uint32_t max_tracks);
void rp_marks_free(struct rp_marks *m);
size_t rp_marks_memory_bound(uint32_t max_tracks);

/**
 * rp_marks_event() - a mark record @ev of source @src: its milestone into @ts's
 * statistics (the name's row) and @an's sketches and windows, or counted in @c.
 */
void rp_marks_event(struct rp_marks *m, struct rp_tracks *ts, struct rp_analyses *an,
		    uint32_t src, const struct rp_event *ev, struct rp_counts *c);

#endif
