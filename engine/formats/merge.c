// SPDX-License-Identifier: MIT
/*
 * Merging reports (merge.h): @src is added to @dst, section by section.
 *
 *  - header: t_first is the minimum, t_last the maximum, created_realtime_ns the
 *    latest; unmerged_records adds (1.5); clock and caps are the first input's. Clocks must be equal: a "trace"
 *    time base and CLOCK_MONOTONIC have nothing in common, so such a merge is refused
 *    (live snapshots of different hosts are all "monotonic" and merge: their
 *    t_first/t_last then span the hosts' clocks, which only the header shows).
 *  - totals, anomalies: add (saturating at 2^64 - 1).
 *  - sources: every row of every input, in input order; span sources are renumbered.
 *  - functions: matched by (name, category, file, line); calls, times and midpoint
 *    sums add, min and max combine. Sketches merge bucket for bucket (rebuilt with
 *    rp_report_sketch_to, rp_sketch_merge, back with rp_report_sketch_from), exact as
 *    DDSketch merges are, and p50..p99 are recomputed from the merged sketch. A row
 *    with calls in both inputs but a sketch in only one (a sketch cap, a 1.1 file)
 *    has no valid quantiles: its sketch is dropped and its p50..p99 are 0
 *    (unknown). A row with no calls on one side keeps the other side's figures.
 *    A request milestone's row (1.5, `milestone`) merges the same way: it stays one.
 *    Charged work (1.6, `charged_ns`, `charged`) adds; a slowest entry keeps its own.
 *  - edges: matched by (caller, callee) functions; cct: by the path from the root
 *    (each node by its merged parent and function). Figures add.
 *  - concurrency: levels of different processes do not add over time without their
 *    timelines, and nothing in a report lets one recompute them; so a report merged
 *    from two or more inputs has no concurrency rows (nor windows[i].conc for a
 *    window present in several). Per-call midpoint sums and counts do add.
 *  - categories, counters: matched by name; as functions. A counter's last is that
 *    of the input with the later t_last (the first one on a tie), its mean the
 *    sample-weighted mean.
 *  - windows: matched by name; t_from min, t_to max, length and subwindows of the
 *    first. Per-name figures add and sketches merge as for functions (1.4; a name
 *    in a 1.3 input's window has no sketch, so its merged p50..p99 are 0). Bottleneck lists merge as Space-Saving summaries (Agarwal et al., PODS
 *    2012, as rp_spacesaving_merge): each name gets the sum of its values and of its
 *    errors over the lists, a name absent from a list counting that list's bound for
 *    both; the k largest stay (k = caps.topk, or the longer list when it is 0) and
 *    the bound is max(bound1 + bound2, the largest value dropped). So every true
 *    weight lies in [value - error, value] and any name not listed weighs at most
 *    the bound, as in each input.
 *  - bottlenecks (all time): recomputed exactly from the merged functions (error 0;
 *    the bound is the largest value not listed, 0 when every function is); slowest:
 *    the k slowest spans of the union (by duration, then start, span id, track).
 *  - steps: phases matched by name, as categories (min and max of the union).
 *  - recorder: every input's tracks, spans and samples with their indices renumbered
 *    (sources apart, counter names matched by name); from the second input on the
 *    newest spans (by end) and samples (by time) up to the first nonzero cap stay and
 *    the ones cut are added to wrapped / samples_wrapped (merge_recorder).
 *  - device: counts add; timelines (points, idle, phases) dropped once two inputs
 *    have device data; ranked: the best scores of the union, each an input's own
 *    z-score (not comparable across inputs: a shortlist) (merge_device).
 *  - expiry (async requests closed after drops): counts add; expire_ns and
 *    stale_max_ns are the largest, so the bound they give holds for every input.
 *  - off-CPU: the functions' and nodes' times and the counts add; measured (state
 *    on) if any input measured it, else refused if any was refused.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "merge.h"
#include "sketch.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct ctx {
	struct rp_report *d;
	const struct rp_report *s;
	char *why;
	size_t whylen;
	uint32_t *fmap;	  /* src function -> dst function */
	uint32_t *at;	  /* per dst function: a row + 1 in the list at hand, else 0 */
	uint32_t src_off; /* src source i is dst source src_off + i */
	uint64_t old_t_last;
	bool first;
};

static int failf(struct ctx *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int failf(struct ctx *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, c->whylen, fmt, ap);
	va_end(ap);
	return err;
}

static uint64_t sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t round_ns(double v)
{
	return v > 0 ? (v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)(v + 0.5)) : 0;
}

static char *dup(const char *s)
{
	return strdup(s ? s : "");
}

/* Grows *@p from @n to @n + @more zeroed elements of @size. */
static int grow(void *p, uint32_t n, uint32_t more, size_t size)
{
	void **pp = p;
	char *q;

	if (more == 0)
		return 0;
	q = realloc(*pp, ((size_t)n + more) * size);
	if (q == NULL)
		return -ENOMEM;
	memset(q + (size_t)n * size, 0, (size_t)more * size);
	*pp = q;
	return 0;
}

/* --- a small hash index: key hash -> row ----------------------------------------- */

struct hmap {
	uint32_t *slot; /* row + 1; 0 = empty */
	uint32_t mask;
};

static int hmap_init(struct hmap *h, uint64_t rows)
{
	uint64_t n = 16;

	while (n < 2 * rows)
		n *= 2;
	h->slot = calloc(n, sizeof(*h->slot));
	h->mask = (uint32_t)(n - 1);
	return h->slot ? 0 : -ENOMEM;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (s = s ? s : ""; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return mix(h, 0xff);
}

/* The slot for @hash where @eq(row) holds, or the empty slot where it would go. */
static uint32_t *hmap_find(struct hmap *h, uint64_t hash, bool (*eq)(const void *, uint32_t),
			   const void *key)
{
	for (uint32_t i = (uint32_t)(hash ^ hash >> 32) & h->mask;; i = (i + 1) & h->mask)
		if (h->slot[i] == 0 || eq(key, h->slot[i] - 1))
			return &h->slot[i];
}

/* --- sketches -------------------------------------------------------------------- */

static int sketch_copy(struct rp_report_sketch *d, const struct rp_report_sketch *s)
{
	*d = *s;
	d->pos = s->n_pos ? malloc(s->n_pos * sizeof(*d->pos)) : NULL;
	d->neg = s->n_neg ? malloc(s->n_neg * sizeof(*d->neg)) : NULL;
	if ((s->n_pos && !d->pos) || (s->n_neg && !d->neg)) {
		rp_report_sketch_free(d);
		return -ENOMEM;
	}
	if (s->n_pos)
		memcpy(d->pos, s->pos, s->n_pos * sizeof(*d->pos));
	if (s->n_neg)
		memcpy(d->neg, s->neg, s->n_neg * sizeof(*d->neg));
	return 0;
}

/* What merge_q() decided for a row's quantiles. */
enum q { Q_KEEP, Q_TAKE, Q_RECOMPUTE, Q_UNKNOWN };

/* The sketch @d of a row with @dn values, plus @s with @sn; the caller then keeps its
 * quantiles (Q_KEEP), copies @s's (Q_TAKE), recomputes them from @d (Q_RECOMPUTE) or
 * zeroes them (Q_UNKNOWN: a side with values has no sketch). -errno on failure. */
static int merge_q(struct ctx *c, const char *what, const char *name, struct rp_report_sketch *d,
		   uint64_t dn, const struct rp_report_sketch *s, uint64_t sn)
{
	struct rp_sketch a, b;
	int err;

	if (sn == 0)
		return Q_KEEP;
	if (dn == 0) {
		rp_report_sketch_free(d);
		err = sketch_copy(d, s);
		return err ? failf(c, err, "out of memory") : Q_TAKE;
	}
	if (d->alpha == 0 || s->alpha == 0) {
		rp_report_sketch_free(d);
		return Q_UNKNOWN;
	}
	if (d->alpha != s->alpha)
		return failf(c, -EINVAL, "%s \"%s\": sketches of alpha %g and %g do not merge",
			     what, name, d->alpha, s->alpha);
	if (rp_sketch_init(&a, d->alpha) || rp_sketch_init(&b, d->alpha))
		return failf(c, -EINVAL, "%s \"%s\": alpha %g", what, name, d->alpha);
	err = rp_report_sketch_to(d, &a);
	if (!err)
		err = rp_report_sketch_to(s, &b);
	if (!err)
		err = rp_sketch_merge(&a, &b);
	if (!err) {
		rp_report_sketch_free(d);
		err = rp_report_sketch_from(d, &a);
	}
	rp_sketch_fini(&a);
	rp_sketch_fini(&b);
	if (err)
		return failf(c, err, "%s \"%s\": cannot merge the sketches (%s)", what, name,
			     strerror(-err));
	return Q_RECOMPUTE;
}

static const double q4[4] = { 0.50, 0.90, 0.95, 0.99 };

/* The @n quantiles @qv of the merged sketch @k into @v; false if it cannot be rebuilt. */
static bool sketch_quantiles(const struct rp_report_sketch *k, const double *qv, unsigned n,
			     double *v)
{
	struct rp_sketch s;
	bool ok;

	if (rp_sketch_init(&s, k->alpha) != 0)
		return false;
	ok = rp_report_sketch_to(k, &s) == 0;
	for (unsigned i = 0; ok && i < n; i++)
		v[i] = rp_sketch_quantile(&s, qv[i]);
	rp_sketch_fini(&s);
	return ok;
}

/* The quantiles (ns) @p at @qv of a merged row, as merge_q() said; @sp: the source's. */
static void set_q_ns(int q, uint64_t *const *p, const uint64_t *sp, const double *qv,
		     unsigned n, const struct rp_report_sketch *k)
{
	double v[4];

	for (unsigned i = 0; i < n; i++) {
		if (q == Q_TAKE)
			*p[i] = sp[i];
		else if (q == Q_UNKNOWN)
			*p[i] = 0;
	}
	if (q == Q_RECOMPUTE && sketch_quantiles(k, qv, n, v))
		for (unsigned i = 0; i < n; i++)
			*p[i] = round_ns(v[i]);
}

/* The same for a counter's double quantiles p50, p90, p95, p99. */
static void set_q_f64(int q, double *const *p, const double *sp, const struct rp_report_sketch *k)
{
	double v[4];

	for (unsigned i = 0; i < 4; i++) {
		if (q == Q_TAKE)
			*p[i] = sp[i];
		else if (q == Q_UNKNOWN)
			*p[i] = 0;
	}
	if (q == Q_RECOMPUTE && sketch_quantiles(k, q4, 4, v))
		for (unsigned i = 0; i < 4; i++)
			*p[i] = isfinite(v[i]) ? v[i] : 0;
}

/* --- header, totals, sources ----------------------------------------------------- */

static int merge_header(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;

	c->old_t_last = d->t_last;
	if (c->first) {
		d->clock = dup(s->clock);
		d->writer = rp_report_writer(); /* this ringprof made the merged one */
		if (d->clock == NULL || d->writer == NULL)
			return failf(c, -ENOMEM, "out of memory");
		d->caps = s->caps;
		d->t_first = s->t_first;
		d->t_last = s->t_last;
		d->created_realtime_ns = s->created_realtime_ns;
		d->unmerged_records = s->unmerged_records;
		return 0;
	}
	d->unmerged_records = sat(d->unmerged_records, s->unmerged_records); /* backlogs */
	if (strcmp(d->clock ? d->clock : "", s->clock ? s->clock : "") != 0)
		return failf(
			c, -EINVAL,
			"clocks differ: \"%s\" and \"%s\" (times of a trace file and of a live "
			"process have no common base)",
			d->clock ? d->clock : "", s->clock ? s->clock : "");
	d->t_first = s->t_first < d->t_first ? s->t_first : d->t_first;
	d->t_last = s->t_last > d->t_last ? s->t_last : d->t_last;
	if (s->created_realtime_ns > d->created_realtime_ns)
		d->created_realtime_ns = s->created_realtime_ns;
	return 0;
}

static void add_anomalies(uint64_t *d, const uint64_t *s)
{
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		d[k] = sat(d[k], s[k]);
}

static int merge_sources(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;

	d->events = sat(d->events, s->events);
	d->dropped = sat(d->dropped, s->dropped);
	d->late = sat(d->late, s->late);
	d->truncated = sat(d->truncated, s->truncated);
	add_anomalies(d->anomalies, s->anomalies);
	c->src_off = d->n_sources;
	if (grow(&d->sources, d->n_sources, s->n_sources, sizeof(*d->sources)))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n_sources; i++) {
		struct rp_report_source *o = &d->sources[d->n_sources];

		*o = s->sources[i];
		o->name = dup(s->sources[i].name);
		o->host = dup(s->sources[i].host);
		o->boot_id = dup(s->sources[i].boot_id);
		d->n_sources++;
		if (!o->name || !o->host || !o->boot_id)
			return failf(c, -ENOMEM, "out of memory");
	}
	return 0;
}

/* --- functions ------------------------------------------------------------------- */

struct fn_key {
	const struct rp_report *d;
	const struct rp_report_fn *f;
};

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool fn_eq(const void *key, uint32_t row)
{
	const struct fn_key *k = key;
	const struct rp_report_fn *a = k->f, *b = &k->d->fns[row];

	return a->line == b->line && str_eq(a->name, b->name) && str_eq(a->category, b->category) &&
	       str_eq(a->file, b->file);
}

static uint64_t fn_hash(const struct rp_report_fn *f)
{
	return mix(
		hash_str(hash_str(hash_str(0xcbf29ce484222325ull, f->name), f->category), f->file),
		f->line);
}

static int fn_new(struct ctx *c, const struct rp_report_fn *f)
{
	struct rp_report_fn *o = &c->d->fns[c->d->n_fns];

	*o = *f;
	memset(&o->dur, 0, sizeof(o->dur));
	o->name = dup(f->name);
	o->category = dup(f->category);
	o->file = dup(f->file);
	if (!o->name || !o->category || !o->file || sketch_copy(&o->dur, &f->dur)) {
		c->d->n_fns++; /* freed with the report */
		return failf(c, -ENOMEM, "out of memory");
	}
	return (int)c->d->n_fns++;
}

static int fn_add(struct ctx *c, struct rp_report_fn *o, const struct rp_report_fn *f)
{
	int q = merge_q(c, "function", o->name, &o->dur, o->calls, &f->dur, f->calls);

	if (q < 0)
		return q;
	set_q_ns(q, (uint64_t *[]){ &o->p50_ns, &o->p90_ns, &o->p95_ns, &o->p99_ns },
		 (const uint64_t[]){ f->p50_ns, f->p90_ns, f->p95_ns, f->p99_ns }, q4, 4, &o->dur);
	if (f->calls > 0) {
		o->min_ns = o->calls == 0 || f->min_ns < o->min_ns ? f->min_ns : o->min_ns;
		o->max_ns = f->max_ns > o->max_ns ? f->max_ns : o->max_ns;
	}
	o->calls = sat(o->calls, f->calls);
	o->primitive_calls = sat(o->primitive_calls, f->primitive_calls);
	o->self_ns = sat(o->self_ns, f->self_ns);
	o->cum_ns = sat(o->cum_ns, f->cum_ns);
	o->total_ns = sat(o->total_ns, f->total_ns);
	o->midpoint_sum = sat(o->midpoint_sum, f->midpoint_sum);
	o->midpoint_count = sat(o->midpoint_count, f->midpoint_count);
	o->drop_lost = sat(o->drop_lost, f->drop_lost);
	o->offcpu_ns = sat(o->offcpu_ns, f->offcpu_ns);
	o->offcpu_cum_ns = sat(o->offcpu_cum_ns, f->offcpu_cum_ns);
	o->errors = sat(o->errors, f->errors);
	o->started = sat(o->started, f->started);
	o->milestone |= f->milestone; /* 1.5: a milestone in either input (marks.h) */
	o->charged_ns = sat(o->charged_ns, f->charged_ns); /* 1.6: shares add (charge.h) */
	o->charged = sat(o->charged, f->charged);
	return 0;
}

static int merge_fns(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;
	struct hmap h;
	int err = 0;

	c->fmap = calloc(s->n_fns ? s->n_fns : 1, sizeof(*c->fmap));
	if (!c->fmap || hmap_init(&h, (uint64_t)d->n_fns + s->n_fns))
		return failf(c, -ENOMEM, "out of memory");
	if (grow(&d->fns, d->n_fns, s->n_fns, sizeof(*d->fns))) {
		free(h.slot);
		return failf(c, -ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < d->n_fns; i++) {
		struct fn_key k = { d, &d->fns[i] };
		uint32_t *slot = hmap_find(&h, fn_hash(&d->fns[i]), fn_eq, &k);

		if (*slot == 0) /* duplicates in one input stay apart */
			*slot = i + 1;
	}
	for (uint32_t i = 0; i < s->n_fns && !err; i++) {
		struct fn_key k = { d, &s->fns[i] };
		uint32_t *slot = hmap_find(&h, fn_hash(&s->fns[i]), fn_eq, &k);
		int row;

		if (*slot != 0) {
			c->fmap[i] = *slot - 1;
			err = fn_add(c, &d->fns[*slot - 1], &s->fns[i]);
			continue;
		}
		row = fn_new(c, &s->fns[i]);
		if (row < 0)
			err = row;
		else
			*slot = (uint32_t)row + 1, c->fmap[i] = (uint32_t)row;
	}
	free(h.slot);
	return err;
}

/* --- edges, cct ------------------------------------------------------------------ */

struct pair_key {
	const void *rows;
	size_t size; /* of a row; the pair is its first two uint32_t */
	uint32_t a, b;
};

static bool pair_eq(const void *key, uint32_t row)
{
	const struct pair_key *k = key;
	const uint32_t *r = (const uint32_t *)((const char *)k->rows + (size_t)row * k->size);

	return r[0] == k->a && r[1] == k->b;
}

static uint64_t pair_hash(uint32_t a, uint32_t b)
{
	return mix(mix(0x12345, a), b);
}

static int merge_edges(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;
	struct hmap h;

	if (hmap_init(&h, (uint64_t)d->n_edges + s->n_edges) ||
	    grow(&d->edges, d->n_edges, s->n_edges, sizeof(*d->edges))) {
		free(h.slot);
		return failf(c, -ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < d->n_edges; i++) {
		struct pair_key k = { d->edges, sizeof(*d->edges), d->edges[i].caller,
				      d->edges[i].callee };
		uint32_t *slot = hmap_find(&h, pair_hash(k.a, k.b), pair_eq, &k);

		*slot = *slot ? *slot : i + 1;
	}
	for (uint32_t i = 0; i < s->n_edges; i++) {
		const struct rp_report_edge *e = &s->edges[i];
		struct pair_key k = { d->edges, sizeof(*e), c->fmap[e->caller],
				      c->fmap[e->callee] };
		uint32_t *slot = hmap_find(&h, pair_hash(k.a, k.b), pair_eq, &k);
		struct rp_report_edge *o;

		if (*slot == 0) {
			o = &d->edges[d->n_edges];
			*o = *e;
			o->caller = k.a, o->callee = k.b;
			*slot = ++d->n_edges;
			continue;
		}
		o = &d->edges[*slot - 1];
		o->calls = sat(o->calls, e->calls);
		o->primitive_calls = sat(o->primitive_calls, e->primitive_calls);
		o->self_ns = sat(o->self_ns, e->self_ns);
		o->cum_ns = sat(o->cum_ns, e->cum_ns);
	}
	free(h.slot);
	return 0;
}

static int merge_cct(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;
	uint32_t *nmap = NULL;
	struct hmap h = { 0 };
	int err = -ENOMEM;

	if (s->n_nodes == 0)
		return 0;
	nmap = calloc(s->n_nodes, sizeof(*nmap));
	if (!nmap || hmap_init(&h, (uint64_t)d->n_nodes + s->n_nodes) ||
	    grow(&d->nodes, d->n_nodes, s->n_nodes, sizeof(*d->nodes)))
		goto out;
	for (uint32_t i = 1; i < d->n_nodes; i++) {
		struct pair_key k = { d->nodes, sizeof(*d->nodes), d->nodes[i].parent,
				      d->nodes[i].fn };
		uint32_t *slot = hmap_find(&h, pair_hash(k.a, k.b), pair_eq, &k);

		*slot = *slot ? *slot : i + 1;
	}
	if (d->n_nodes == 0) { /* the root, whatever its fn */
		d->nodes[0] = (struct rp_report_node){ .parent = RP_NONE, .fn = s->nodes[0].fn };
		if (s->nodes[0].fn != RP_NONE)
			d->nodes[0].fn = c->fmap[s->nodes[0].fn];
		d->n_nodes = 1;
	}
	for (uint32_t i = 0; i < s->n_nodes; i++) {
		const struct rp_report_node *n = &s->nodes[i];
		struct pair_key k = { d->nodes, sizeof(*n), 0, 0 };
		struct rp_report_node *o;
		uint32_t *slot;

		if (i == 0) {
			nmap[0] = 0;
		} else {
			k.a = nmap[n->parent], k.b = c->fmap[n->fn];
			slot = hmap_find(&h, pair_hash(k.a, k.b), pair_eq, &k);
			if (*slot == 0) {
				d->nodes[d->n_nodes] =
					(struct rp_report_node){ .parent = k.a, .fn = k.b };
				*slot = ++d->n_nodes;
			}
			nmap[i] = *slot - 1;
		}
		o = &d->nodes[nmap[i]];
		o->calls = sat(o->calls, n->calls);
		o->self_ns = sat(o->self_ns, n->self_ns);
		o->total_ns = sat(o->total_ns, n->total_ns);
		o->offcpu_ns = sat(o->offcpu_ns, n->offcpu_ns);
	}
	err = 0;
out:
	free(nmap);
	free(h.slot);
	return err ? failf(c, err, "out of memory") : 0;
}

/* --- concurrency ----------------------------------------------------------------- */

static void conc_free(struct rp_report_conc **conc, uint32_t *n)
{
	for (uint32_t i = 0; i < *n; i++)
		free((*conc)[i].name);
	free(*conc);
	*conc = NULL;
	*n = 0;
}

static int conc_copy(struct rp_report_conc **d, uint32_t *dn, const struct rp_report_conc *s,
		     uint32_t n)
{
	if (n == 0)
		return 0;
	*d = calloc(n, sizeof(**d));
	if (*d == NULL)
		return -ENOMEM;
	for (*dn = 0; *dn < n; (*dn)++) {
		(*d)[*dn] = s[*dn];
		if (((*d)[*dn].name = dup(s[*dn].name)) == NULL)
			return -ENOMEM;
	}
	return 0;
}

/* Kept while there is one input; dropped for good at the second (see the top). */
static int merge_conc(struct ctx *c)
{
	if (!c->first) {
		conc_free(&c->d->conc, &c->d->n_conc);
		free(c->d->requests.name); /* requests in flight: likewise (1.4) */
		memset(&c->d->requests, 0, sizeof(c->d->requests));
		return 0;
	}
	if (conc_copy(&c->d->conc, &c->d->n_conc, c->s->conc, c->s->n_conc))
		return failf(c, -ENOMEM, "out of memory");
	c->d->requests = c->s->requests;
	c->d->requests.name = NULL;
	if (c->s->requests.name != NULL &&
	    (c->d->requests.name = strdup(c->s->requests.name)) == NULL)
		return failf(c, -ENOMEM, "out of memory");
	return 0;
}

/* --- categories, counters -------------------------------------------------------- */

static int merge_cats(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;
	uint32_t n0 = d->n_cats;

	if (grow(&d->cats, d->n_cats, s->n_cats, sizeof(*d->cats)))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n_cats; i++) {
		const struct rp_report_cat *x = &s->cats[i];
		struct rp_report_cat *o = NULL;
		int q;

		for (uint32_t j = 0; j < n0 && !o; j++) /* categories are few */
			o = str_eq(d->cats[j].name, x->name) ? &d->cats[j] : NULL;
		if (o == NULL) {
			o = &d->cats[d->n_cats++];
			*o = *x;
			memset(&o->dur, 0, sizeof(o->dur));
			if ((o->name = dup(x->name)) == NULL || sketch_copy(&o->dur, &x->dur))
				return failf(c, -ENOMEM, "out of memory");
			continue;
		}
		q = merge_q(c, "category", o->name, &o->dur, o->calls, &x->dur, x->calls);
		if (q < 0)
			return q;
		set_q_ns(q, (uint64_t *[]){ &o->p50_ns, &o->p90_ns, &o->p95_ns, &o->p99_ns },
			 (const uint64_t[]){ x->p50_ns, x->p90_ns, x->p95_ns, x->p99_ns }, q4, 4,
			 &o->dur);
		o->calls = sat(o->calls, x->calls);
		o->self_ns = sat(o->self_ns, x->self_ns);
		o->total_ns = sat(o->total_ns, x->total_ns);
	}
	return 0;
}

static void counter_add(struct ctx *c, struct rp_report_counter *o,
			const struct rp_report_counter *x)
{
	if (x->samples == 0)
		return;
	if (o->samples == 0 || x->min < o->min)
		o->min = x->min;
	if (o->samples == 0 || x->max > o->max)
		o->max = x->max;
	if (o->samples == 0 || c->s->t_last > c->old_t_last)
		o->last = x->last;
	o->mean = (double)(((long double)o->mean * o->samples + (long double)x->mean * x->samples) /
			   ((long double)o->samples + x->samples));
	o->samples = sat(o->samples, x->samples);
}

static int merge_counters(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;
	uint32_t n0 = d->n_counters;

	if (grow(&d->counters, d->n_counters, s->n_counters, sizeof(*d->counters)))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n_counters; i++) {
		const struct rp_report_counter *x = &s->counters[i];
		struct rp_report_counter *o = NULL;
		int q;

		for (uint32_t j = 0; j < n0 && !o; j++) /* counters are capped and few */
			o = str_eq(d->counters[j].name, x->name) ? &d->counters[j] : NULL;
		if (o == NULL) {
			o = &d->counters[d->n_counters++];
			*o = *x;
			memset(&o->values, 0, sizeof(o->values));
			o->category = NULL;
			if ((o->name = dup(x->name)) == NULL ||
			    (o->category = dup(x->category)) == NULL ||
			    sketch_copy(&o->values, &x->values))
				return failf(c, -ENOMEM, "out of memory");
			continue;
		}
		q = merge_q(c, "counter", o->name, &o->values, o->samples, &x->values, x->samples);
		if (q < 0)
			return q;
		set_q_f64(q, (double *[]){ &o->p50, &o->p90, &o->p95, &o->p99 },
			  (const double[]){ x->p50, x->p90, x->p95, x->p99 }, &o->values);
		counter_add(c, o, x);
	}
	return 0;
}

/* --- bottleneck lists ------------------------------------------------------------ */

static int top_cmp(const void *a, const void *b)
{
	const struct rp_report_top *x = a, *y = b;

	if (x->value != y->value)
		return x->value > y->value ? -1 : 1;
	return x->fn < y->fn ? -1 : x->fn > y->fn;
}

/* The Space-Saving merge of list @d (bound *@dbound) and @s (@sbound, functions
 * through fmap) into at most @k entries. */
static int merge_tops(struct ctx *c, struct rp_report_top **d, uint32_t *dn, uint64_t *dbound,
		      const struct rp_report_top *s, uint32_t sn, uint64_t sbound, uint32_t k)
{
	uint32_t n = 0, *at = c->at;
	struct rp_report_top *u = calloc((size_t)*dn + sn + 1, sizeof(*u));
	uint8_t *in = calloc((size_t)*dn + sn + 1, 1); /* bit 0: in @d, bit 1: in @s */
	uint64_t bound = sat(*dbound, sbound);

	if (!u || !in) {
		free(u);
		free(in);
		return failf(c, -ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < *dn + sn; i++) { /* at[fn]: its row + 1 in u */
		bool ours = i < *dn;
		struct rp_report_top e = ours ? (*d)[i] : s[i - *dn];
		uint32_t r;

		if (!ours)
			e.fn = c->fmap[e.fn];
		if (at[e.fn] == 0) {
			u[n].fn = e.fn;
			at[e.fn] = ++n;
		}
		r = at[e.fn] - 1;
		u[r].value = sat(u[r].value, e.value);
		u[r].error = sat(u[r].error, e.error);
		in[r] |= ours ? 1 : 2;
	}
	for (uint32_t r = 0; r < n; r++) /* clean for the next list */
		at[u[r].fn] = 0;
	for (uint32_t r = 0; r < n; r++) { /* absent from a list: at most its bound */
		uint64_t add = in[r] & 1 ? 0 : *dbound;

		add = sat(add, in[r] & 2 ? 0 : sbound);
		u[r].value = sat(u[r].value, add);
		u[r].error = sat(u[r].error, add);
	}
	if (n > 1)
		qsort(u, n, sizeof(*u), top_cmp);
	if (n > k) {
		bound = u[k].value > bound ? u[k].value : bound;
		n = k;
	}
	free(in);
	free(*d);
	*d = u;
	*dn = n;
	*dbound = bound;
	return 0;
}

static int span_cmp(const void *a, const void *b)
{
	const struct rp_report_span *x = a, *y = b;

	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	if (x->span_id != y->span_id)
		return x->span_id < y->span_id ? -1 : 1;
	return x->track < y->track ? -1 : x->track > y->track;
}

/* The @k slowest of @d and @s (renumbered). */
static int merge_slowest(struct ctx *c, struct rp_report_bottlenecks *d,
			 const struct rp_report_bottlenecks *s, uint32_t k)
{
	uint32_t n = d->n_slowest;

	if (grow(&d->slowest, n, s->n_slowest, sizeof(*d->slowest)))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n_slowest; i++) {
		struct rp_report_span *o = &d->slowest[n + i];

		*o = s->slowest[i];
		o->fn = c->fmap[o->fn];
		if (o->source != RP_NONE)
			o->source += c->src_off;
	}
	n += s->n_slowest;
	if (n > 1)
		qsort(d->slowest, n, sizeof(*d->slowest), span_cmp);
	d->n_slowest = n < k ? n : k;
	return 0;
}

static uint32_t list_k(const struct ctx *c, uint32_t a, uint32_t b)
{
	if (c->d->caps.topk)
		return c->d->caps.topk;
	return a > b ? a : b;
}

/* A window's lists: Space-Saving merges. */
static int merge_window_top(struct ctx *c, struct rp_report_bottlenecks *d,
			    const struct rp_report_bottlenecks *s)
{
	int err = merge_tops(c, &d->by_cum, &d->n_by_cum, &d->bound_cum, s->by_cum, s->n_by_cum,
			     s->bound_cum, list_k(c, d->n_by_cum, s->n_by_cum));

	if (!err)
		err = merge_tops(c, &d->by_self, &d->n_by_self, &d->bound_self, s->by_self,
				 s->n_by_self, s->bound_self,
				 list_k(c, d->n_by_self, s->n_by_self));
	if (!err)
		err = merge_tops(c, &d->by_count, &d->n_by_count, &d->bound_count, s->by_count,
				 s->n_by_count, s->bound_count,
				 list_k(c, d->n_by_count, s->n_by_count));
	if (!err)
		err = merge_slowest(c, d, s, list_k(c, d->n_slowest, s->n_slowest));
	return err;
}

/* An exact list of the @k largest functions by @field. */
static int exact_top(struct ctx *c, struct rp_report_top **out, uint32_t *n, uint64_t *bound,
		     size_t field, uint32_t k)
{
	const struct rp_report *d = c->d;
	struct rp_report_top *u = calloc(d->n_fns ? d->n_fns : 1, sizeof(*u));

	if (u == NULL)
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < d->n_fns; i++)
		u[i] = (struct rp_report_top){
			.fn = i, .value = *(const uint64_t *)((const char *)&d->fns[i] + field)
		};
	if (d->n_fns > 1)
		qsort(u, d->n_fns, sizeof(*u), top_cmp);
	*bound = d->n_fns > k ? u[k].value : 0;
	*n = d->n_fns < k ? d->n_fns : k;
	free(*out);
	*out = u;
	return 0;
}

static int merge_bottlenecks(struct ctx *c)
{
	struct rp_report_bottlenecks *d = &c->d->bottlenecks;
	const struct rp_report_bottlenecks *s = &c->s->bottlenecks;
	int err;

	err = exact_top(c, &d->by_cum, &d->n_by_cum, &d->bound_cum,
			offsetof(struct rp_report_fn, cum_ns), list_k(c, d->n_by_cum, s->n_by_cum));
	if (!err)
		err = exact_top(c, &d->by_self, &d->n_by_self, &d->bound_self,
				offsetof(struct rp_report_fn, self_ns),
				list_k(c, d->n_by_self, s->n_by_self));
	if (!err)
		err = exact_top(c, &d->by_count, &d->n_by_count, &d->bound_count,
				offsetof(struct rp_report_fn, calls),
				list_k(c, d->n_by_count, s->n_by_count));
	if (!err)
		err = merge_slowest(c, d, s, list_k(c, d->n_slowest, s->n_slowest));
	return err;
}

/* --- windows --------------------------------------------------------------------- */

static int window_new(struct ctx *c, struct rp_report_window *o, const struct rp_report_window *w)
{
	const struct rp_report_bottlenecks *t = &w->top;
	int err;

	*o = (struct rp_report_window){ .length_ns = w->length_ns,
					.subwindows = w->subwindows,
					.t_from = w->t_from,
					.t_to = w->t_to };
	o->name = dup(w->name);
	o->fns = calloc(w->n_fns ? w->n_fns : 1, sizeof(*o->fns));
	if (!o->name || !o->fns || conc_copy(&o->conc, &o->n_conc, w->conc, w->n_conc))
		return failf(c, -ENOMEM, "out of memory");
	for (o->n_fns = 0; o->n_fns < w->n_fns; o->n_fns++) {
		o->fns[o->n_fns] = w->fns[o->n_fns];
		o->fns[o->n_fns].fn = c->fmap[w->fns[o->n_fns].fn];
		if (sketch_copy(&o->fns[o->n_fns].dur, &w->fns[o->n_fns].dur)) {
			o->fns[o->n_fns].dur = (struct rp_report_sketch){ 0 };
			return failf(c, -ENOMEM, "out of memory");
		}
	}
	/* Merged into empty exact lists: the same lists, renumbered. */
	err = merge_tops(c, &o->top.by_cum, &o->top.n_by_cum, &o->top.bound_cum, t->by_cum,
			 t->n_by_cum, t->bound_cum, t->n_by_cum);
	if (!err)
		err = merge_tops(c, &o->top.by_self, &o->top.n_by_self, &o->top.bound_self,
				 t->by_self, t->n_by_self, t->bound_self, t->n_by_self);
	if (!err)
		err = merge_tops(c, &o->top.by_count, &o->top.n_by_count, &o->top.bound_count,
				 t->by_count, t->n_by_count, t->bound_count, t->n_by_count);
	if (!err)
		err = merge_slowest(c, &o->top, t, t->n_slowest);
	return err;
}

/* A name in several inputs' window: figures add, the sketches merge (1.4; a 1.3 input
 * has none, and the quantiles are then unknown, 0). */
static int wfn_add(struct ctx *c, const char *win, struct rp_report_wfn *f,
		   const struct rp_report_wfn *x)
{
	char what[64];
	int q;

	snprintf(what, sizeof(what), "window %s, function", win ? win : "");
	q = merge_q(c, what, c->d->fns[f->fn].name, &f->dur, f->calls, &x->dur, x->calls);
	if (q < 0)
		return q;
	set_q_ns(q, (uint64_t *[]){ &f->p50_ns, &f->p90_ns, &f->p95_ns, &f->p99_ns },
		 (const uint64_t[]){ x->p50_ns, x->p90_ns, x->p95_ns, x->p99_ns }, q4, 4, &f->dur);
	f->calls = sat(f->calls, x->calls);
	f->self_ns = sat(f->self_ns, x->self_ns);
	f->cum_ns = sat(f->cum_ns, x->cum_ns);
	return 0;
}

static int window_add(struct ctx *c, struct rp_report_window *o, const struct rp_report_window *w)
{
	uint32_t *at = c->at, n0 = o->n_fns;
	int err = 0;

	if (grow(&o->fns, o->n_fns, w->n_fns, sizeof(*o->fns)))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < n0; i++)
		at[o->fns[i].fn] = at[o->fns[i].fn] ? at[o->fns[i].fn] : i + 1;
	for (uint32_t i = 0; i < w->n_fns && !err; i++) {
		const struct rp_report_wfn *x = &w->fns[i];
		uint32_t fn = c->fmap[x->fn];
		struct rp_report_wfn *f;

		if (at[fn] == 0) {
			f = &o->fns[o->n_fns];
			*f = *x;
			f->fn = fn;
			at[fn] = ++o->n_fns;
			if (sketch_copy(&f->dur, &x->dur)) {
				f->dur = (struct rp_report_sketch){ 0 };
				err = failf(c, -ENOMEM, "out of memory");
			}
			continue;
		}
		f = &o->fns[at[fn] - 1];
		err = wfn_add(c, w->name, f, x);
	}
	for (uint32_t i = 0; i < o->n_fns; i++) /* clean for the next list */
		at[o->fns[i].fn] = 0;
	if (err)
		return err;
	o->t_from = w->t_from < o->t_from ? w->t_from : o->t_from;
	o->t_to = w->t_to > o->t_to ? w->t_to : o->t_to;
	conc_free(&o->conc, &o->n_conc);
	return merge_window_top(c, &o->top, &w->top);
}

static int merge_windows(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;
	uint32_t n0 = d->n_windows;
	int err = 0;

	if (grow(&d->windows, d->n_windows, s->n_windows, sizeof(*d->windows)))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n_windows && !err; i++) {
		struct rp_report_window *o = NULL;

		for (uint32_t j = 0; j < n0 && !o; j++) /* windows are a handful */
			o = str_eq(d->windows[j].name, s->windows[i].name) ? &d->windows[j] : NULL;
		if (o != NULL) {
			err = window_add(c, o, &s->windows[i]);
			continue;
		}
		err = window_new(c, &d->windows[d->n_windows++], &s->windows[i]);
	}
	return err;
}

/* --- rows keyed by one string (step phases, counter names) ------------------------ */

struct str_key {
	const char *base; /* the first row's string pointer */
	size_t stride;	  /* bytes between rows */
	const char *s;
};

static bool str_row_eq(const void *key, uint32_t row)
{
	const struct str_key *k = key;

	return str_eq(*(char *const *)(k->base + (size_t)row * k->stride), k->s);
}

/* The slot of @s among the rows indexed in @h (rows at @base, @stride apart). */
static uint32_t *str_slot(struct hmap *h, const void *base, size_t stride, const char *s)
{
	struct str_key k = { base, stride, s };

	return hmap_find(h, hash_str(0xcbf29ce484222325ull, s), str_row_eq, &k);
}

/* --- steps ------------------------------------------------------------------------ */

/* Phases matched by name; as categories, with min and max of the union. */
static int merge_steps(struct ctx *c)
{
	struct rp_report *d = c->d;
	const struct rp_report *s = c->s;
	const size_t stride = sizeof(*d->steps);
	struct hmap h;
	int err = 0;

	d->steps_folded = sat(d->steps_folded, s->steps_folded);
	if (grow(&d->steps, d->n_steps, s->n_steps, stride) ||
	    hmap_init(&h, (uint64_t)d->n_steps + s->n_steps))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < d->n_steps; i++) {
		uint32_t *slot = str_slot(&h, &d->steps[0].name, stride, d->steps[i].name);

		if (*slot == 0) /* duplicates in one input stay apart */
			*slot = i + 1;
	}
	for (uint32_t i = 0; i < s->n_steps && !err; i++) {
		const struct rp_report_step_phase *x = &s->steps[i];
		uint32_t *slot = str_slot(&h, &d->steps[0].name, stride, x->name);
		struct rp_report_step_phase *o;
		int q;

		if (*slot == 0) {
			o = &d->steps[d->n_steps++];
			*o = *x;
			memset(&o->dur, 0, sizeof(o->dur));
			if ((o->name = dup(x->name)) == NULL || sketch_copy(&o->dur, &x->dur))
				err = failf(c, -ENOMEM, "out of memory");
			*slot = d->n_steps;
			continue;
		}
		o = &d->steps[*slot - 1];
		q = merge_q(c, "step phase", o->name, &o->dur, o->count, &x->dur, x->count);
		if (q < 0) {
			err = q;
			break;
		}
		set_q_ns(q, (uint64_t *[]){ &o->p50_ns, &o->p95_ns, &o->p99_ns },
			 (const uint64_t[]){ x->p50_ns, x->p95_ns, x->p99_ns },
			 (const double[]){ 0.50, 0.95, 0.99 }, 3, &o->dur);
		if (x->count > 0 && (o->count == 0 || x->min_ns < o->min_ns))
			o->min_ns = x->min_ns;
		if (x->count > 0 && (o->count == 0 || x->max_ns > o->max_ns))
			o->max_ns = x->max_ns;
		o->count = sat(o->count, x->count);
		o->total_ns = sat(o->total_ns, x->total_ns);
	}
	free(h.slot);
	return err;
}

/* --- the flight recorder ---------------------------------------------------------- */

/* A sort key: a time, then the position in the concatenation (a stable sort). */
struct ord {
	uint64_t t;
	uint32_t i;
};

static int ord_cmp(const void *a, const void *b)
{
	const struct ord *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Sorts the @n elements of @size at *@p by @key (oldest first) and keeps the newest
 * @cap of them; returns how many it cut. -ENOMEM leaves *@p as it was. */
static int64_t keep_newest(void *p, uint32_t *n, size_t size, uint32_t cap, struct ord *key)
{
	char **pp = p, *a = *pp, *out;
	uint32_t cut = *n > cap ? *n - cap : 0;

	qsort(key, *n, sizeof(*key), ord_cmp);
	out = malloc(((size_t)(*n - cut) + 1) * size);
	if (out == NULL)
		return -ENOMEM;
	for (uint32_t k = cut; k < *n; k++)
		memcpy(out + (size_t)(k - cut) * size, a + (size_t)key[k].i * size, size);
	free(a);
	*pp = out;
	*n -= cut;
	return cut;
}

/* The index of counter name @name in @r's names (indexed in @h), appended if new. */
static int rec_name(struct rp_report_recorder *r, struct hmap *h, const char *name, uint32_t *idx)
{
	uint32_t *slot = str_slot(h, r->names, sizeof(*r->names), name);

	if (*slot == 0) {
		if ((r->names[r->n_names] = dup(name)) == NULL)
			return -ENOMEM;
		*slot = ++r->n_names;
	}
	*idx = *slot - 1;
	return 0;
}

/* Tracks, spans and samples of every input, indices renumbered: tracks keep their
 * (renumbered) source, so inputs never share a track; counter names are matched by
 * name. From the second input on, spans are ordered by end time and samples by time
 * (ties: input order), and the oldest past the cap (the first input's, or the first
 * nonzero one) are cut, counted in wrapped / samples_wrapped. */
static int merge_recorder(struct ctx *c)
{
	struct rp_report_recorder *d = &c->d->recorder;
	const struct rp_report_recorder *s = &c->s->recorder;
	uint32_t t0 = d->n_tracks, *nm = NULL;
	struct hmap h = { 0 };
	struct ord *key = NULL;
	int64_t cut;

	if (d->max_spans == 0)
		d->max_spans = s->max_spans;
	if (d->max_samples == 0)
		d->max_samples = s->max_samples;
	d->spans_seen = sat(d->spans_seen, s->spans_seen);
	d->samples_seen = sat(d->samples_seen, s->samples_seen);
	d->wrapped = sat(d->wrapped, s->wrapped);
	d->samples_wrapped = sat(d->samples_wrapped, s->samples_wrapped);
	d->unlisted = sat(d->unlisted, s->unlisted);
	d->labels_dropped = sat(d->labels_dropped, s->labels_dropped);
	if (grow(&d->tracks, d->n_tracks, s->n_tracks, sizeof(*d->tracks)) ||
	    grow(&d->spans, d->n_spans, s->n_spans, sizeof(*d->spans)) ||
	    grow(&d->samples, d->n_samples, s->n_samples, sizeof(*d->samples)) ||
	    (nm = calloc(s->n_names ? s->n_names : 1, sizeof(*nm))) == NULL)
		goto nomem;
	for (uint32_t i = 0; i < s->n_tracks; i++) {
		struct rp_report_rtrack *t = &d->tracks[d->n_tracks];

		*t = s->tracks[i];
		t->source += c->src_off;
		t->pid = dup(s->tracks[i].pid);
		t->tid = dup(s->tracks[i].tid);
		d->n_tracks++; /* freed with the rest from here on */
		if (t->pid == NULL || t->tid == NULL)
			goto nomem;
	}
	for (uint32_t i = 0; i < s->n_spans; i++) {
		struct rp_report_rspan *x = &d->spans[d->n_spans++];

		*x = s->spans[i];
		x->fn = c->fmap[x->fn];
		x->track += t0;
	}
	/* Counter names: matched by name, through a hash index (a snapshot may hold many). */
	if (grow(&d->names, d->n_names, s->n_names, sizeof(*d->names)) ||
	    hmap_init(&h, (uint64_t)d->n_names + s->n_names))
		goto nomem;
	for (uint32_t i = 0; i < d->n_names; i++) {
		uint32_t *slot = str_slot(&h, d->names, sizeof(*d->names), d->names[i]);

		if (*slot == 0)
			*slot = i + 1;
	}
	for (uint32_t i = 0; i < s->n_names; i++)
		if (rec_name(d, &h, s->names[i], &nm[i]))
			goto nomem;
	free(h.slot);
	h.slot = NULL;
	for (uint32_t i = 0; i < s->n_samples; i++) {
		struct rp_report_rsample *x = &d->samples[d->n_samples++];

		*x = s->samples[i];
		x->name = nm[x->name];
		x->track += t0;
	}
	free(nm);
	nm = NULL;
	if (c->first)
		return 0; /* one input: its order, as the engine wrote it */
	if ((key = malloc(((size_t)d->n_spans + d->n_samples + 1) * sizeof(*key))) == NULL)
		goto nomem;
	for (uint32_t i = 0; i < d->n_spans; i++) {
		const struct rp_report_rspan *x = &d->spans[i];

		key[i] = (struct ord){ .t = sat(x->start_ns, x->dur_ns), .i = i };
	}
	cut = keep_newest(&d->spans, &d->n_spans, sizeof(*d->spans), d->max_spans, key);
	if (cut < 0)
		goto nomem;
	d->wrapped = sat(d->wrapped, (uint64_t)cut);
	for (uint32_t i = 0; i < d->n_samples; i++)
		key[i] = (struct ord){ .t = d->samples[i].ts_ns, .i = i };
	cut = keep_newest(&d->samples, &d->n_samples, sizeof(*d->samples), d->max_samples, key);
	if (cut < 0)
		goto nomem;
	d->samples_wrapped = sat(d->samples_wrapped, (uint64_t)cut);
	free(key);
	return 0;
nomem:
	free(h.slot);
	free(nm);
	free(key);
	return failf(c, -ENOMEM, "out of memory");
}

/* --- device idle time ------------------------------------------------------------- */

static bool dev_has(const struct rp_report_device *v)
{
	return v->launches || v->kernels || v->other_device || v->spans || v->n_points_total ||
	       v->n_idle_total || v->n_phases_total || v->candidates || v->n_ranked;
}

static int dev_span_copy(struct rp_report_dev_span *o, const struct rp_report_dev_span *x)
{
	*o = *x;
	o->name = dup(x->name);
	o->source = dup(x->source);
	o->source_file = dup(x->source_file);
	return o->name && o->source && o->source_file ? 0 : -ENOMEM;
}

static int dev_copy_list(void *dst, const void *src, uint32_t n, size_t size)
{
	void **pp = dst;

	*pp = NULL;
	if (n == 0)
		return 0;
	if ((*pp = malloc((size_t)n * size)) == NULL)
		return -ENOMEM;
	memcpy(*pp, src, (size_t)n * size);
	return 0;
}

/* Best score first; ties: the earlier start, then the name (a total order, so the
 * result does not depend on qsort). */
static int rank_cmp(const void *a, const void *b)
{
	const struct rp_report_dev_span *x = a, *y = b;
	int k;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns < y->dur_ns ? -1 : 1;
	k = strcmp(x->name ? x->name : "", y->name ? y->name : "");
	return k ? k : strcmp(x->source ? x->source : "", y->source ? y->source : "");
}

/* Counts, times and totals add, max_queue_depth is the largest. The first input with
 * device data keeps its lists; once a second one comes, the queue depth points, idle
 * intervals and phases are dropped (time series of different devices or runs do not
 * make one timeline), every ranked span's phase becomes nil, and the ranked list is
 * the best by score of the union, as long as the longest input list. Scores are each
 * input's own z-scores, not comparable across inputs: the merged ranking is a
 * shortlist, not a ranking of the union. */
static int merge_device(struct ctx *c)
{
	struct rp_report_device *d = &c->d->device;
	const struct rp_report_device *s = &c->s->device;
	bool had = dev_has(d), has = dev_has(s);
	uint64_t *dc[] = { &d->launches,
			   &d->kernels,
			   &d->other_device,
			   &d->linked,
			   &d->unmatched_launches,
			   &d->unmatched_kernels,
			   &d->spans,
			   &d->busy_ns,
			   &d->idle_ns,
			   &d->n_points_total,
			   &d->n_idle_total,
			   &d->n_phases_total,
			   &d->candidates,
			   &d->spans_dropped,
			   &d->events_dropped,
			   &d->links_dropped,
			   &d->links_orphan };
	const uint64_t sc[] = { s->launches,
				s->kernels,
				s->other_device,
				s->linked,
				s->unmatched_launches,
				s->unmatched_kernels,
				s->spans,
				s->busy_ns,
				s->idle_ns,
				s->n_points_total,
				s->n_idle_total,
				s->n_phases_total,
				s->candidates,
				s->spans_dropped,
				s->events_dropped,
				s->links_dropped,
				s->links_orphan };
	uint32_t k = d->n_ranked > s->n_ranked ? d->n_ranked : s->n_ranked;

	_Static_assert(ARRAY_SIZE(dc) == ARRAY_SIZE(sc), "device counts");
	for (size_t i = 0; i < ARRAY_SIZE(dc); i++)
		*dc[i] = sat(*dc[i], sc[i]);
	if (s->max_queue_depth > d->max_queue_depth)
		d->max_queue_depth = s->max_queue_depth;
	if (!has)
		return 0;
	if (!had) { /* the first input with device data: its lists as they are */
		if (dev_copy_list(&d->points, s->points, s->n_points, sizeof(*s->points)) ||
		    dev_copy_list(&d->idle, s->idle, s->n_idle, sizeof(*s->idle)) ||
		    dev_copy_list(&d->phases, s->phases, s->n_phases, sizeof(*s->phases)) ||
		    (d->ranked = calloc(s->n_ranked ? s->n_ranked : 1, sizeof(*d->ranked))) == NULL)
			return failf(c, -ENOMEM, "out of memory");
		d->n_points = s->n_points;
		d->n_idle = s->n_idle;
		d->n_phases = s->n_phases;
		for (uint32_t i = 0; i < s->n_ranked; i++)
			if (dev_span_copy(&d->ranked[d->n_ranked++], &s->ranked[i]))
				return failf(c, -ENOMEM, "out of memory");
		return 0;
	}
	free(d->points), free(d->idle), free(d->phases);
	d->points = NULL, d->idle = NULL, d->phases = NULL;
	d->n_points = d->n_idle = d->n_phases = 0;
	if (grow(&d->ranked, d->n_ranked, s->n_ranked, sizeof(*d->ranked)))
		return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n_ranked; i++)
		if (dev_span_copy(&d->ranked[d->n_ranked++], &s->ranked[i]))
			return failf(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < d->n_ranked; i++)
		d->ranked[i].phase = RP_NONE;
	qsort(d->ranked, d->n_ranked, sizeof(*d->ranked), rank_cmp);
	while (d->n_ranked > k) {
		struct rp_report_dev_span *x = &d->ranked[--d->n_ranked];

		free(x->name), free(x->source), free(x->source_file);
	}
	return 0;
}

static void merge_expiry(struct ctx *c)
{
	struct rp_report_expiry *d = &c->d->expiry;
	const struct rp_report_expiry *s = &c->s->expiry;

	d->expire_ns = s->expire_ns > d->expire_ns ? s->expire_ns : d->expire_ns;
	d->stale_max_ns = s->stale_max_ns > d->stale_max_ns ? s->stale_max_ns : d->stale_max_ns;
	d->requests = sat(d->requests, s->requests);
	d->spans = sat(d->spans, s->spans);
	d->suspect_requests = sat(d->suspect_requests, s->suspect_requests);
	d->suspect_spans = sat(d->suspect_spans, s->suspect_spans);
	d->peak_spans = sat(d->peak_spans, s->peak_spans); /* the inputs' at once, at most */
}

static void merge_offcpu(struct ctx *c)
{
	struct rp_report_offcpu *d = &c->d->offcpu;
	const struct rp_report_offcpu *s = &c->s->offcpu;

	if (s->state == RP_OFFCPU_ON || (s->state == RP_OFFCPU_REFUSED && d->state != RP_OFFCPU_ON))
		d->state = s->state;
	d->threads = d->threads + s->threads < d->threads ? UINT32_MAX : d->threads + s->threads;
	d->watched = sat(d->watched, s->watched);
	d->refused = sat(d->refused, s->refused);
	d->lost = sat(d->lost, s->lost);
	d->unpaired = sat(d->unpaired, s->unpaired);
	d->overflow = sat(d->overflow, s->overflow);
	d->overflow_ns = sat(d->overflow_ns, s->overflow_ns);
	d->late = sat(d->late, s->late);
	d->intervals = sat(d->intervals, s->intervals);
	d->total_ns = sat(d->total_ns, s->total_ns);
}

/* --- clocks of several hosts (rp_report_align) ------------------------------------- */

/* The first source of @r with an anchor: its host's clock as @r has it. */
static const struct rp_report_source *anchored(const struct rp_report *r)
{
	for (uint32_t i = 0; i < r->n_sources; i++)
		if (r->sources[i].anchor_realtime_ns != 0)
			return &r->sources[i];
	return NULL;
}

/* @r's clock minus wall time, through source @s: its monotonic anchor as placed in
 * @r (plus its shift) minus its realtime anchor; modulo 2^64 (the figures come from
 * files: no signed overflow), read as signed by the caller. */
static uint64_t clock_offset(const struct rp_report_source *s)
{
	return s->anchor_monotonic_ns - s->anchor_realtime_ns + (uint64_t)s->clock_shift_ns;
}

/* @t moved by @by, kept in 0 .. 2^64 - 1 (a time pushed out is clamped, counted). */
static void shift_t(uint64_t *t, int64_t by, uint64_t *clamped)
{
	uint64_t mag = by < 0 ? (uint64_t)0 - (uint64_t)by : (uint64_t)by;

	if (*t == 0)
		return; /* 0 is "none" in several places (and the floor) */
	if (by < 0 && *t < mag) {
		*t = 0;
		(*clamped)++;
	} else if (by > 0 && *t > UINT64_MAX - mag) {
		*t = UINT64_MAX;
		(*clamped)++;
	} else {
		*t = by < 0 ? *t - mag : *t + mag;
	}
}

static void shift_spans(struct rp_report_span *sp, uint32_t n, int64_t by, uint64_t *cl)
{
	for (uint32_t i = 0; i < n; i++)
		shift_t(&sp[i].start_ns, by, cl);
}

static void shift_report(struct rp_report *r, int64_t by, uint64_t *cl)
{
	struct rp_report_device *dv = &r->device;

	shift_t(&r->t_first, by, cl);
	shift_t(&r->t_last, by, cl);
	for (uint32_t i = 0; i < r->n_windows; i++) {
		shift_t(&r->windows[i].t_from, by, cl);
		shift_t(&r->windows[i].t_to, by, cl);
		shift_spans(r->windows[i].top.slowest, r->windows[i].top.n_slowest, by, cl);
	}
	shift_spans(r->bottlenecks.slowest, r->bottlenecks.n_slowest, by, cl);
	for (uint32_t i = 0; i < r->recorder.n_spans; i++)
		shift_t(&r->recorder.spans[i].start_ns, by, cl);
	for (uint32_t i = 0; i < r->recorder.n_samples; i++)
		shift_t(&r->recorder.samples[i].ts_ns, by, cl);
	for (uint32_t i = 0; i < dv->n_points; i++)
		shift_t(&dv->points[i].t_ns, by, cl);
	for (uint32_t i = 0; i < dv->n_idle; i++)
		shift_t(&dv->idle[i].start_ns, by, cl), shift_t(&dv->idle[i].end_ns, by, cl);
	for (uint32_t i = 0; i < dv->n_phases; i++)
		shift_t(&dv->phases[i].start_ns, by, cl), shift_t(&dv->phases[i].end_ns, by, cl);
	for (uint32_t i = 0; i < dv->n_ranked; i++)
		shift_t(&dv->ranked[i].start_ns, by, cl);
	for (uint32_t i = 0; i < r->n_sources; i++)
		r->sources[i].clock_shift_ns =
			(int64_t)((uint64_t)r->sources[i].clock_shift_ns + (uint64_t)by);
}

void rp_report_align(const struct rp_report *dst, struct rp_report *src, struct rp_align *a)
{
	const struct rp_report_source *d = anchored(dst), *s = anchored(src);

	memset(a, 0, sizeof(*a));
	if (dst->version_major == 0)
		return; /* the first input sets the clock */
	if (strcmp(dst->clock ? dst->clock : "", "monotonic") != 0 ||
	    strcmp(src->clock ? src->clock : "", "monotonic") != 0) {
		snprintf(a->note, sizeof(a->note), "not a live (monotonic) clock: times left as they are");
		return;
	}
	if (d == NULL || s == NULL) {
		snprintf(a->note, sizeof(a->note),
			 "no clock anchor (a snapshot older than 1.4): times left on their own "
			 "host's monotonic clock");
		return;
	}
	if (d->boot_id && s->boot_id && d->boot_id[0] && strcmp(d->boot_id, s->boot_id) == 0 &&
	    d->clock_shift_ns == s->clock_shift_ns) {
		snprintf(a->note, sizeof(a->note), "same host and boot (%s): one clock, no shift",
			 s->host ? s->host : "");
		return;
	}
	a->shift_ns = (int64_t)(clock_offset(d) - clock_offset(s));
	a->shifted = true;
	shift_report(src, a->shift_ns, &a->clamped);
	snprintf(a->note, sizeof(a->note),
		 "host %s (boot %.8s) aligned on wall time to host %s (boot %.8s): its times "
		 "shifted by %+.6f s%s",
		 s->host && s->host[0] ? s->host : "?", s->boot_id ? s->boot_id : "",
		 d->host && d->host[0] ? d->host : "?", d->boot_id ? d->boot_id : "",
		 (double)a->shift_ns / 1e9, a->clamped ? " (some out of range: clamped)" : "");
}

int rp_report_merge(struct rp_report *dst, const struct rp_report *src, char *why, size_t whylen)
{
	struct ctx c = {
		.d = dst, .s = src, .why = why, .whylen = whylen, .first = dst->version_major == 0
	};
	int err;

	why[0] = '\0';
	err = merge_header(&c);
	if (!err)
		err = merge_sources(&c);
	if (!err)
		err = merge_fns(&c);
	if (!err)
		err = merge_edges(&c);
	if (!err)
		err = merge_cct(&c);
	if (!err)
		err = merge_conc(&c);
	if (!err)
		err = merge_cats(&c);
	if (!err)
		err = merge_counters(&c);
	if (!err && (c.at = calloc(dst->n_fns ? dst->n_fns : 1, sizeof(*c.at))) == NULL)
		err = failf(&c, -ENOMEM, "out of memory");
	if (!err)
		err = merge_windows(&c);
	if (!err)
		err = merge_bottlenecks(&c);
	if (!err)
		err = merge_steps(&c);
	if (!err)
		err = merge_recorder(&c);
	if (!err)
		err = merge_device(&c);
	if (!err)
		merge_expiry(&c);
	if (!err)
		merge_offcpu(&c);
	free(c.fmap);
	free(c.at);
	dst->version_major = RP_REPORT_VERSION_MAJOR;
	dst->version_minor = RP_REPORT_VERSION_MINOR;
	return err;
}
