// SPDX-License-Identifier: MIT
/*
 * Milestones of requests (marks.h): a mark finds its request's root span on its
 * async track, checks the request has not marked that name yet, and records the time
 * since the request began as one call of the milestone's name, in its row (no self,
 * cumulative time, caller or CCT node) and in the analyses' sketches and windows
 * (rp_analyses_mark(): no sweep, no slowest list).
 */
#include <stdlib.h>

#include "analyses.h"
#include "marks.h"

void rp_marks_init(struct rp_marks *m, uint32_t max_tracks)
{
	*m = (struct rp_marks){ .set = NULL, .max_tracks = max_tracks };
}

void rp_marks_free(struct rp_marks *m)
{
	free(m->set);
	m->set = NULL;
}

size_t rp_marks_memory_bound(uint32_t max_tracks)
{
	return (size_t)max_tracks * sizeof(struct rp_mark_set);
}

/* Whether the request on slot @tr, root started at @start, may mark @name now (and
 * remember it did); false: marked already, or no room for another name. */
static bool first_mark(struct rp_marks *m, uint32_t tr, const struct rp_track *k,
		       uint64_t start, uint32_t name, struct rp_counts *c)
{
	struct rp_mark_set *s;

	if (m->set == NULL) {
		m->set = calloc(m->max_tracks, sizeof(*m->set));
		if (m->set == NULL) {
			c->anomalies[RP_ANOM_BAD_EVENT]++; /* no memory: not recorded */
			return false;
		}
	}
	s = &m->set[tr];
	if (s->id != k->id || s->src != k->src || s->start != start || s->n == 0)
		*s = (struct rp_mark_set){ .id = k->id, .src = k->src, .start = start };
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->name[i] == name) {
			c->anomalies[RP_ANOM_MARK_REPEAT]++;
			return false;
		}
	}
	if (s->n == RP_MARKS_PER_REQUEST) {
		c->anomalies[RP_ANOM_MARK_REPEAT]++; /* cannot tell a repeat any more */
		return false;
	}
	s->name[s->n++] = name;
	return true;
}

void rp_marks_event(struct rp_marks *m, struct rp_tracks *ts, struct rp_analyses *an,
		    uint32_t src, const struct rp_event *ev, struct rp_counts *c)
{
	uint32_t tr = rp_tracks_find(ts, src, RP_TRACK_ASYNC, ev->track);
	struct rp_fn_stats *f = &ts->stats->fn[ev->name];
	const struct rp_track *k;
	uint64_t start, dur;

	if (tr == RP_NONE) {
		c->anomalies[RP_ANOM_MARK_UNMATCHED]++;
		return;
	}
	k = &ts->t[tr];
	/* f[0] is the track's oldest open frame: its request, while one is open */
	if (k->depth == 0 || !rp_is_request(k, 0) || k->f[0].lost) {
		c->anomalies[RP_ANOM_MARK_UNMATCHED]++;
		return;
	}
	if (f->started != 0 && !f->milestone) { /* a span's name: its row is not ours */
		c->anomalies[RP_ANOM_BAD_EVENT]++;
		return;
	}
	start = k->f[0].start;
	if (!first_mark(m, tr, k, start, ev->name, c))
		return;
	/* One producer clock; a mark from another thread a tick before the request's
	 * BEGIN was read is at its start. */
	dur = ev->ts > start ? ev->ts - start : 0;
	rp_fn_min_add(f, dur);
	if (dur > f->max_ns)
		f->max_ns = dur;
	f->milestone = true;
	f->calls++;
	f->started++; /* arrived and done: never in flight */
	f->total_ns += dur;
	rp_analyses_mark(an, ev->name, dur);
}
