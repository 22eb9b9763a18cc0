// SPDX-License-Identifier: MIT
/*
 * Charging batched work to requests (charge.h): a charge record finds its request's
 * root on the request's async track and the innermost open span of its name on the
 * charged track, and adds the request to that span's entry; when the span closes
 * (rp_spans_close() calls rp_charges_close()), its duration is split between its
 * requests, each share into the request's name and, while the request is open, into
 * its track slot's sum, which the request takes with it when it closes.
 */
#include <stdlib.h>

#include "charge.h"
#include "report.h"

void rp_charges_init(struct rp_charges *c, struct rp_tracks *ts, uint32_t max_tracks,
		     uint32_t max_names, struct rp_counts *(*counts)(void *, uint32_t),
		     void *ctx)
{
	*c = (struct rp_charges){ .max_tracks = max_tracks, .max_names = max_names, .ts = ts,
				  .counts = counts, .ctx = ctx };
}

void rp_charges_free(struct rp_charges *c)
{
	free(c->open);
	free(c->sum);
	free(c->name);
	c->open = NULL;
	c->sum = NULL;
	c->name = NULL;
	c->live = c->pending = 0;
}

size_t rp_charges_memory_bound(uint32_t max_tracks, uint32_t max_names)
{
	return RP_CHARGE_SPANS * sizeof(struct rp_charge_span) +
	       (size_t)max_tracks * sizeof(struct rp_charge_sum) +
	       (size_t)max_names * sizeof(struct rp_charge_name);
}

static bool alloc_all(struct rp_charges *c)
{
	if (c->open != NULL)
		return true;
	c->open = calloc(RP_CHARGE_SPANS, sizeof(*c->open));
	c->sum = calloc(c->max_tracks ? c->max_tracks : 1, sizeof(*c->sum));
	c->name = calloc(c->max_names ? c->max_names : 1, sizeof(*c->name));
	if (c->open == NULL || c->sum == NULL || c->name == NULL) {
		rp_charges_free(c);
		return false;
	}
	return true;
}

/* The open request on async track @id of source @src: its slot, or RP_NONE. */
static uint32_t open_request(struct rp_charges *c, uint32_t src, uint64_t id)
{
	uint32_t tr = rp_tracks_find(c->ts, src, RP_TRACK_ASYNC, id);
	const struct rp_track *k;

	if (tr == RP_NONE)
		return RP_NONE;
	k = &c->ts->t[tr];
	/* f[0] is the track's oldest open frame: its request, while one is open */
	if (k->depth == 0 || !rp_is_request(k, 0) || k->f[0].lost)
		return RP_NONE;
	return tr;
}

/* The innermost open, not lost frame named @name on track @k (@any: of any name, a
 * producer that does not know it), or -1. */
static int open_frame(const struct rp_track *k, uint32_t name, bool any)
{
	for (uint32_t i = k->depth; i-- > 0;)
		if ((k->f[i].name == name || any) && !k->f[i].lost)
			return (int)i;
	return -1;
}

/* Whether entry @e's span is still open on its track (a drop may have cut it). */
static bool still_open(struct rp_charges *c, const struct rp_charge_span *e)
{
	uint32_t tr = rp_tracks_find(c->ts, e->src, e->kind, e->id);
	const struct rp_track *k;

	if (tr == RP_NONE)
		return false;
	k = &c->ts->t[tr];
	for (uint32_t i = 0; i < k->depth; i++)
		if (k->f[i].name == e->name && k->f[i].start == e->start &&
		    k->f[i].span == e->span && !k->f[i].lost)
			return true;
	return false;
}

/* The entry of the span (src, kind, id, span, start, name), made if need be (a free
 * one, or one whose span a drop cut); NULL: none free. */
static struct rp_charge_span *entry(struct rp_charges *c, const struct rp_charge_span *key,
				    bool make)
{
	struct rp_charge_span *free_e = NULL;

	for (uint32_t i = 0; i < RP_CHARGE_SPANS; i++) {
		struct rp_charge_span *e = &c->open[i];

		if (e->n == 0) {
			free_e = free_e ? free_e : e;
			continue;
		}
		if (e->src == key->src && e->kind == key->kind && e->id == key->id &&
		    e->span == key->span && e->start == key->start && e->name == key->name)
			return e;
	}
	if (!make)
		return NULL;
	for (uint32_t i = 0; free_e == NULL && i < RP_CHARGE_SPANS; i++) {
		if (!still_open(c, &c->open[i])) { /* cut by a drop: never closes */
			c->open[i].n = 0;
			c->live--;
			free_e = &c->open[i];
		}
	}
	if (free_e != NULL) {
		*free_e = *key;
		free_e->n = 0;
		c->live++; /* counted now; n becomes 1 at once (the caller adds one) */
	}
	return free_e;
}

void rp_charges_event(struct rp_charges *c, uint32_t src, uint64_t thread,
		      const struct rp_event *ev, struct rp_counts *cnt)
{
	uint8_t kind = ev->track != 0 ? RP_TRACK_ASYNC : RP_TRACK_THREAD;
	uint32_t rq, tr;
	struct rp_charge_span key, *e;
	const struct rp_track *k;
	uint64_t start;
	int at;

	if (!alloc_all(c)) {
		cnt->anomalies[RP_ANOM_CHARGE_CAP]++; /* no memory: left out */
		return;
	}
	rq = open_request(c, src, ev->arg);
	tr = rp_tracks_find(c->ts, src, kind, ev->track != 0 ? ev->track : thread);
	if (rq == RP_NONE || tr == RP_NONE ||
	    (at = open_frame(&c->ts->t[tr], ev->name, ev->flags & RP_LINK_ANY)) < 0) {
		cnt->anomalies[RP_ANOM_CHARGE_ORPHAN]++;
		return;
	}
	k = &c->ts->t[tr];
	key = (struct rp_charge_span){ .id = k->id, .span = k->f[at].span,
				       .start = k->f[at].start, .src = src, .name = k->f[at].name,
				       .kind = k->kind };
	e = entry(c, &key, true);
	if (e == NULL) {
		cnt->anomalies[RP_ANOM_CHARGE_CAP]++;
		return;
	}
	start = c->ts->t[rq].f[0].start;
	for (uint32_t i = 0; i < e->n; i++)
		if (e->req[i].track == ev->arg && e->req[i].start == start)
			return; /* charged already: one share per request */
	if (e->n == RP_CHARGE_PER_SPAN) {
		cnt->anomalies[RP_ANOM_CHARGE_CAP]++;
		return;
	}
	e->req[e->n++] = (struct rp_charge_req){ .track = ev->arg, .start = start,
						 .name = c->ts->t[rq].f[0].name };
}

/* A share @ns of request @q of source @src: to its name, and to its sum while it is
 * open (else it ended before the span: late). */
static void share(struct rp_charges *c, uint32_t src, const struct rp_charge_req *q,
		  uint64_t ns)
{
	uint32_t rq = open_request(c, src, q->track);
	struct rp_charge_sum *s;

	if (q->name < c->max_names) {
		c->name[q->name].ns += ns;
		c->name[q->name].n++;
	}
	if (rq == RP_NONE || c->ts->t[rq].f[0].start != q->start) {
		if (c->counts != NULL)
			c->counts(c->ctx, src)->anomalies[RP_ANOM_CHARGE_LATE]++;
		return;
	}
	s = &c->sum[rq];
	if (s->ns == 0 || s->id != q->track || s->src != src || s->start != q->start) {
		if (s->ns == 0)
			c->pending++;
		*s = (struct rp_charge_sum){ .id = q->track, .start = q->start, .src = src };
	}
	s->ns += ns;
	if (s->ns == 0) /* a zero-length span: nothing to carry */
		c->pending--;
}

void rp_charges_close_slow(struct rp_charges *c, const struct rp_track *k,
			   const struct rp_span_info *sp, uint64_t *charged_ns)
{
	struct rp_charge_span key = { .id = sp->track, .span = sp->span, .start = sp->start,
				      .src = sp->src, .name = sp->name, .kind = k->kind };
	struct rp_charge_span *e = c->live ? entry(c, &key, false) : NULL;

	if (e != NULL) {
		uint64_t dur = sp->end - sp->start, each = dur / e->n;

		/* the remainder to the first: the shares sum to the duration */
		for (uint32_t i = 0; i < e->n; i++)
			share(c, sp->src, &e->req[i], each + (i == 0 ? dur % e->n : 0));
		e->n = 0;
		c->live--;
	}
	if (sp->request && c->pending != 0) {
		uint32_t rq = rp_tracks_find(c->ts, sp->src, RP_TRACK_ASYNC, sp->track);
		struct rp_charge_sum *s = rq == RP_NONE ? NULL : &c->sum[rq];

		if (s != NULL && s->ns != 0 && s->id == sp->track && s->src == sp->src &&
		    s->start == sp->start) {
			*charged_ns = s->ns;
			s->ns = 0;
			c->pending--;
		}
	}
}

void rp_charges_report(const struct rp_charges *c, const uint32_t *map, uint32_t n_names,
		       struct rp_report *r)
{
	if (c->name == NULL)
		return;
	for (uint32_t i = 0; i < n_names && i < c->max_names; i++) {
		if (map[i] == RP_NONE)
			continue;
		r->fns[map[i]].charged_ns = c->name[i].ns;
		r->fns[map[i]].charged = c->name[i].n;
	}
}
