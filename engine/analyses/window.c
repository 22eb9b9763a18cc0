// SPDX-License-Identifier: MIT
/*
 * Rolling windows from sub-window aggregates; the clock, the caps and the memory
 * bound are in window.h. Slots are reused in place: an entry's sketch keeps its
 * buckets across sub-windows (reset, not freed), so after warm-up nothing is
 * allocated per sub-window either.
 *
 * Top-k error bound (Space-Saving, topk.h): a window's lists come from one summary of
 * m = M counters into which every exact table entry of its sub-windows is offered and
 * every sub-window's summary of names past the table cap is merged. For each listed
 * name the true weight lies in [value - error, value], error <= F, and a name not
 * listed weighs at most F (F = bound_*, <= W / M with W the window's total weight).
 * With at most M distinct names in the window, F = 0 and the lists are exact.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"
#include "window.h"
#include "spread.h"

int rp_window_cfg_check(const struct rp_window_cfg *c, char *why, size_t n)
{
	uint64_t prev_g = 0, prev_len = 0;

	if (c->n > RP_WINDOW_MAX)
		return snprintf(why, n, "%u windows: at most %u", c->n, RP_WINDOW_MAX), -EINVAL;
	if (c->n && (c->subwindows < 1 || c->subwindows > 1000))
		return snprintf(why, n, "subwindows %u: need 1..1000", c->subwindows), -EINVAL;
	if (c->max_window_names < 1 || c->topk < 1 || c->max_level < 1 || c->max_level > 65535 ||
	    c->max_window_names > (1u << 20) || c->topk > 10000)
		return snprintf(why, n, "max-window-names, topk, max-window-level: out of range"),
		       -EINVAL;
	for (uint32_t i = 0; i < c->n; i++) {
		uint64_t len = c->length[i], g = c->subwindows ? len / c->subwindows : 0;
		char name[16];

		rp_window_name(len, name, sizeof(name));
		if (len == 0 || len % c->subwindows || g < 1000)
			return snprintf(why, n,
					"window %s: need a multiple of %u sub-windows of >= 1 us",
					name, c->subwindows),
			       -EINVAL;
		if (len <= prev_len || (prev_g && g % prev_g))
			return snprintf(why, n,
					"window %s: windows must grow, each sub-window (%llu ns) "
					"a multiple of the previous one's (%llu ns)",
					name, (unsigned long long)g, (unsigned long long)prev_g),
			       -EINVAL;
		prev_g = g;
		prev_len = len;
	}
	return 0;
}

static size_t slot_bound(const struct rp_window_cfg *c)
{
	size_t store = (size_t)rp_sketch_default_buckets(RP_SKETCH_ALPHA) * sizeof(uint64_t);

	return sizeof(struct rp_wslot) +
	       (size_t)c->max_window_names * (sizeof(struct rp_wentry) + sizeof(uint32_t) + store) +
	       3 * RP_SPACESAVING_MEMSIZE(c->max_window_names) + RP_SLOWEST_MEMSIZE(c->topk) +
	       2 * ((size_t)c->max_level + 1) * sizeof(uint64_t);
}

size_t rp_windows_memory_bound(const struct rp_window_cfg *c)
{
	return (size_t)c->n *
		       ((size_t)c->subwindows * slot_bound(c) +
			(size_t)c->max_names * sizeof(uint64_t)) +
	       (c->n ? (size_t)c->max_names * sizeof(uint64_t) : 0); /* w[0].over */
}

void rp_window_name(uint64_t ns, char *buf, size_t n)
{
	static const struct {
		uint64_t unit;
		const char *sfx;
	} u[] = { { 3600000000000ull, "h" }, { 60000000000ull, "m" }, { 1000000000ull, "s" },
		  { 1000000ull, "ms" },	     { 1000ull, "us" },	      { 1, "ns" } };

	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (ns % u[i].unit == 0 || u[i].unit == 1) {
			snprintf(buf, n, "%llu%s", (unsigned long long)(ns / u[i].unit), u[i].sfx);
			return;
		}
}

static void slot_fini(struct rp_wslot *s, uint32_t M)
{
	for (uint32_t i = 0; s->e != NULL && i < M; i++)
		rp_sketch_fini(&s->e[i].dur);
	free(s->e);
	free(s->once);
	for (int i = 0; i < 3; i++)
		rp_spacesaving_fini(&s->ss[i]);
	rp_slowest_fini(&s->slow);
	free(s->conc[0]);
	free(s->conc[1]);
}

static int slot_init(struct rp_wslot *s, const struct rp_windows *ws)
{
	memset(s, 0, sizeof(*s));
	s->index = UINT64_MAX;
	s->e = calloc(ws->M, sizeof(*s->e));
	s->once = calloc(ws->M, sizeof(*s->once));
	s->conc[0] = calloc((size_t)ws->max_level + 1, sizeof(uint64_t));
	s->conc[1] = calloc((size_t)ws->max_level + 1, sizeof(uint64_t));
	if (!s->e || !s->once || !s->conc[0] || !s->conc[1] || rp_slowest_init(&s->slow, ws->k))
		return -ENOMEM;
	for (uint32_t i = 0; i < ws->M; i++)
		rp_sketch_init(&s->e[i].dur, RP_SKETCH_ALPHA);
	for (int i = 0; i < 3; i++)
		if (rp_spacesaving_init(&s->ss[i], ws->M))
			return -ENOMEM;
	return 0;
}

static void slot_clear(struct rp_wslot *s, const struct rp_windows *ws, uint64_t idx)
{
	for (uint32_t i = 0; i < s->n; i++)
		rp_sketch_reset(&s->e[i].dur);
	s->n = 0;
	s->n_once = 0;
	s->hand = 0;
	for (int i = 0; i < 3; i++)
		if (rp_spacesaving_total(&s->ss[i]) > 0)
			rp_spacesaving_reset(&s->ss[i]);
	rp_slowest_reset(&s->slow);
	for (int i = 0; i < 2; i++) {
		memset(s->conc[i], 0, ((size_t)ws->max_level + 1) * sizeof(uint64_t));
		s->excess[i] = 0;
		s->over_cap_ns[i] = 0;
	}
	s->index = idx;
}

int rp_windows_init(struct rp_windows *ws, const struct rp_window_cfg *c)
{
	char why[128];

	memset(ws, 0, sizeof(*ws));
	if (rp_window_cfg_check(c, why, sizeof(why)))
		return -EINVAL;
	ws->S = c->subwindows;
	ws->M = c->max_window_names;
	ws->k = c->topk;
	ws->max_level = c->max_level;
	ws->max_names = c->max_names;
	for (uint32_t i = 0; i < c->n; i++) {
		struct rp_window *w = &ws->w[i];

		ws->n++;
		w->length = c->length[i];
		w->g = c->length[i] / c->subwindows;
		rp_window_name(w->length, w->name, sizeof(w->name));
		w->gen = 1;
		w->tag = rp_spread_calloc(c->max_names ? c->max_names : 1, sizeof(*w->tag),
					  RP_SPREAD_TAG);
		w->slot = calloc(ws->S, sizeof(*w->slot));
		if (i == 0)
			w->over = calloc(c->max_names ? c->max_names : 1, sizeof(*w->over));
		if (!w->tag || !w->slot || (i == 0 && !w->over))
			goto nomem;
		for (uint32_t s = 0; s < ws->S; s++)
			if (slot_init(&w->slot[s], ws))
				goto nomem;
		w->cs = &w->slot[0];
	}
	return 0;
nomem:
	rp_windows_fini(ws);
	return -ENOMEM;
}

void rp_windows_fini(struct rp_windows *ws)
{
	for (uint32_t i = 0; i < ws->n; i++) {
		for (uint32_t s = 0; ws->w[i].slot != NULL && s < ws->S; s++)
			slot_fini(&ws->w[i].slot[s], ws->M);
		free(ws->w[i].slot);
		rp_spread_free(ws->w[i].tag);
		free(ws->w[i].over);
	}
	memset(ws, 0, sizeof(*ws));
}

struct rp_wentry *rp_window_insert(struct rp_windows *ws, struct rp_window *w, uint32_t name)
{
	struct rp_wslot *s = w->cs;
	struct rp_wentry *e;

	if (s->n == ws->M)
		return NULL;
	e = &s->e[s->n];
	e->name = name;
	e->cat = 0;
	e->imp = 0;
	e->calls = e->self_ns = e->cum_ns = e->total_ns = 0;
	e->once_pos = s->n_once; /* new: called at most once so far */
	s->once[s->n_once++] = s->n;
	w->tag[name] = rp_window_tag(w, e);
	s->n++;
	return e;
}

void rp_wslot_spill(struct rp_windows *ws, struct rp_wslot *s, const struct rp_wentry *v)
{
	rp_spacesaving_offer(&s->ss[RP_WIN_CUM], v->name, v->cum_ns);
	rp_spacesaving_offer(&s->ss[RP_WIN_SELF], v->name, v->self_ns);
	rp_spacesaving_offer(&s->ss[RP_WIN_COUNT], v->name, v->calls);
	ws->cap_hits += v->calls; /* its spans' exact figures are no longer kept here */
	ws->evicted++;
}

struct rp_wentry *rp_window_replace(struct rp_windows *ws, struct rp_window *w,
				    struct rp_wentry *v, uint32_t name)
{
	(void)ws;
	w->tag[v->name] = 0; /* gen 0 is never current: the victim's tag is stale */
	v->name = name;
	v->cat = 0;
	v->imp = 0;
	v->calls = v->self_ns = v->cum_ns = v->total_ns = 0;
	rp_sketch_reset(&v->dur);
	w->tag[name] = rp_window_tag(w, v); /* keeps once_pos */
	return v;
}

const struct rp_wentry *rp_window_find(const struct rp_window *w, uint32_t name)
{
	uint64_t t = w->tag[name];

	return w->started && (uint32_t)(t >> 32) == w->gen ? rp_window_tagged(w, t) : NULL;
}

struct rp_wslot *rp_window_at(struct rp_windows *ws, struct rp_window *w, uint64_t idx)
{
	struct rp_wslot *s = &w->slot[idx % ws->S];

	if (w->started && idx <= w->cur)
		return s->index == idx ? s : NULL;
	w->started = true;
	w->cur = idx;
	w->cs = s;
	slot_clear(s, ws, idx);
	if (++w->gen == 0) { /* 2^32 sub-windows: start the tags afresh */
		memset(w->tag, 0, (size_t)ws->max_names * sizeof(*w->tag));
		if (w->over != NULL)
			memset(w->over, 0, (size_t)ws->max_names * sizeof(*w->over));
		w->gen = 1;
	}
	return s;
}

void rp_wslot_overflow(struct rp_wslot *s, uint32_t name, uint64_t cum, uint64_t self)
{
	rp_spacesaving_offer(&s->ss[RP_WIN_CUM], name, cum);
	rp_spacesaving_offer(&s->ss[RP_WIN_SELF], name, self);
	rp_spacesaving_offer(&s->ss[RP_WIN_COUNT], name, 1);
}

void rp_wslot_add_time(struct rp_windows *ws, struct rp_wslot *s, int which, uint64_t level,
		       uint64_t dt)
{
	if (level > ws->max_level) { /* a cap hit: counted, so reports say so */
		ws->level_cap_hits++;
		s->excess[which] += (double)(level - ws->max_level) * (double)dt;
		s->over_cap_ns[which] += dt;
		level = ws->max_level;
	}
	s->conc[which][level] += dt;
}

/*
 * A full coarser sub-window and no entry called once: the entry with the fewest calls,
 * if it has fewer than @calls (the name folded in), else NULL. So the names that
 * fill a coarse sub-window first (an import burst, each name called a few times) give
 * way to busier ones folded later (a server's handlers), as an LFU would; never a
 * busier name to a quieter one, so a hot table does not churn. A scan of the table:
 * folds come once per finest sub-window, not per span.
 */
static struct rp_wentry *fewer_calls(struct rp_wslot *s, uint64_t calls)
{
	struct rp_wentry *v = NULL;

	for (uint32_t i = 0; i < s->n; i++)
		if (s->e[i].calls < calls && (v == NULL || s->e[i].calls < v->calls))
			v = &s->e[i];
	return v;
}

void rp_wslot_fold(struct rp_windows *ws, struct rp_window *w, const struct rp_wslot *src)
{
	struct rp_wslot *dst = w->cs;

	for (uint32_t i = 0; i < src->n; i++) {
		const struct rp_wentry *e = &src->e[i];
		struct rp_wentry *d = rp_window_entry(ws, w, e->name);

		if (d == NULL && ((d = rp_window_victim(w)) != NULL ||
				  (!e->imp && (d = fewer_calls(dst, e->calls)) != NULL))) {
			rp_wslot_spill(ws, dst, d);
			d = rp_window_replace(ws, w, d, e->name);
		}
		if (d == NULL) {
			rp_spacesaving_offer(&dst->ss[RP_WIN_CUM], e->name, e->cum_ns);
			rp_spacesaving_offer(&dst->ss[RP_WIN_SELF], e->name, e->self_ns);
			rp_spacesaving_offer(&dst->ss[RP_WIN_COUNT], e->name, e->calls);
			ws->cap_hits += e->calls;
			continue;
		}
		if (d->calls == 0) /* new here: import time if its calls were */
			d->imp = e->imp;
		d->cat = e->cat;
		d->calls += e->calls;
		d->self_ns += e->self_ns;
		d->cum_ns += e->cum_ns;
		d->total_ns += e->total_ns;
		if (d->calls > 1 && !(d->imp && e->imp))
			rp_wslot_settle(dst, d);
		rp_sketch_merge(&d->dur, &e->dur); /* -ENOMEM leaves d's sketch as it was */
	}
	for (int i = 0; i < 3; i++)
		if (rp_spacesaving_total(&src->ss[i]) > 0)
			rp_spacesaving_merge(&dst->ss[i], &src->ss[i]);
	rp_slowest_merge(&dst->slow, &src->slow);
}

void rp_windows_const(struct rp_windows *ws, uint64_t a, uint64_t b, const uint64_t lv[2],
		      const bool have[2])
{
	if (a >= b || (!have[0] && !have[1]))
		return;
	for (uint32_t i = 0; i < ws->n; i++) {
		struct rp_window *w = &ws->w[i];
		uint64_t first = a / w->g, last = (b - 1) / w->g;

		if (last - first >= ws->S)
			first = last - ws->S + 1;
		for (uint64_t idx = first; idx <= last; idx++) {
			struct rp_wslot *s = rp_window_at(ws, w, idx);
			uint64_t lo = idx * w->g, hi = lo + w->g;

			if (s == NULL)
				continue;
			lo = lo > a ? lo : a;
			hi = hi < b ? hi : b;
			for (int k = 0; k < 2; k++)
				if (have[k])
					rp_wslot_add_time(ws, s, k, lv[k], hi - lo);
		}
	}
}

/* --- reports ------------------------------------------------------------------------ */

int rp_window_top(const struct rp_spacesaving *ss, uint32_t k, const uint32_t *map,
		  struct rp_report_top **out, uint32_t *n, uint64_t *bound)
{
	struct rp_topk_entry *t = calloc(k, sizeof(*t));
	uint32_t got, j = 0;

	*out = calloc(k, sizeof(**out));
	if (t == NULL || *out == NULL) {
		free(t);
		return -ENOMEM;
	}
	got = rp_spacesaving_top(ss, t, k);
	for (uint32_t i = 0; i < got; i++)
		if (map[t[i].key] != RP_NONE)
			(*out)[j++] = (struct rp_report_top){ .fn = map[t[i].key],
							      .value = t[i].count,
							      .error = t[i].error };
	*n = j;
	*bound = rp_spacesaving_floor(ss);
	free(t);
	return 0;
}

int rp_window_spans(const struct rp_slowest *sl, const uint32_t *map, struct rp_report_span **out,
		    uint32_t *n)
{
	struct rp_span_exemplar *x = calloc(sl->k ? sl->k : 1, sizeof(*x));
	uint32_t got, j = 0;

	*out = calloc(sl->k ? sl->k : 1, sizeof(**out));
	if (x == NULL || *out == NULL) {
		free(x);
		return -ENOMEM;
	}
	got = rp_slowest_sorted(sl, x);
	for (uint32_t i = 0; i < got; i++)
		if (map[x[i].name_id] != RP_NONE)
			(*out)[j++] = (struct rp_report_span){
				.fn = map[x[i].name_id],
				.source = x[i].source,
				.track = x[i].track_id,
				.span_id = x[i].span_id,
				.start_ns = x[i].start_ns,
				.dur_ns = x[i].dur_ns,
				.self_ns = x[i].self_ns,
				.subtree_ns = x[i].subtree_ns,
				.concurrency = x[i].concurrency,
				.concurrency_known = x[i].concurrency_known,
				.charged_ns = x[i].charged_ns,
			};
	*n = j;
	free(x);
	return 0;
}

/* What a window's report merges: per name rows, summaries, slowest, levels. */
struct wacc {
	uint32_t *row_of; /* name id -> row; RP_NONE */
	struct rp_wentry *rows;
	uint32_t n_rows;
	struct rp_spacesaving ss[3];
	struct rp_slowest slow;
	uint64_t *conc[2];
	double excess[2];
	uint64_t over_cap_ns[2];
};

static void wacc_free(struct wacc *a, uint32_t n_names)
{
	(void)n_names;
	for (uint32_t i = 0; a->rows != NULL && i < a->n_rows; i++)
		rp_sketch_fini(&a->rows[i].dur);
	free(a->row_of);
	free(a->rows);
	for (int i = 0; i < 3; i++)
		rp_spacesaving_fini(&a->ss[i]);
	rp_slowest_fini(&a->slow);
	free(a->conc[0]);
	free(a->conc[1]);
}

static int wacc_init(struct wacc *a, const struct rp_windows *ws, uint32_t n_names)
{
	memset(a, 0, sizeof(*a));
	a->row_of = malloc((size_t)(n_names ? n_names : 1) * sizeof(*a->row_of));
	a->rows = calloc(n_names ? n_names : 1, sizeof(*a->rows));
	a->conc[0] = calloc((size_t)ws->max_level + 1, sizeof(uint64_t));
	a->conc[1] = calloc((size_t)ws->max_level + 1, sizeof(uint64_t));
	if (!a->row_of || !a->rows || !a->conc[0] || !a->conc[1] ||
	    rp_slowest_init(&a->slow, ws->k))
		return -ENOMEM;
	for (int i = 0; i < 3; i++)
		if (rp_spacesaving_init(&a->ss[i], ws->M))
			return -ENOMEM;
	memset(a->row_of, 0xff, (size_t)n_names * sizeof(*a->row_of));
	return 0;
}

static int wacc_add(struct wacc *a, const struct rp_windows *ws, const struct rp_wslot *s,
		    bool with_conc)
{
	for (uint32_t i = 0; i < s->n; i++) {
		const struct rp_wentry *e = &s->e[i];
		struct rp_wentry *d;

		if (a->row_of[e->name] == RP_NONE) {
			a->row_of[e->name] = a->n_rows;
			d = &a->rows[a->n_rows++];
			d->name = e->name;
			rp_sketch_init(&d->dur, RP_SKETCH_ALPHA);
		}
		d = &a->rows[a->row_of[e->name]];
		d->calls += e->calls;
		d->self_ns += e->self_ns;
		d->cum_ns += e->cum_ns;
		d->total_ns += e->total_ns;
		if (rp_sketch_merge(&d->dur, &e->dur) == -ENOMEM)
			return -ENOMEM;
	}
	for (int i = 0; i < 3; i++)
		if (rp_spacesaving_total(&s->ss[i]) > 0)
			rp_spacesaving_merge(&a->ss[i], &s->ss[i]);
	rp_slowest_merge(&a->slow, &s->slow);
	for (int k = 0; with_conc && k < 2; k++) {
		for (uint32_t c = 0; c <= ws->max_level; c++)
			a->conc[k][c] += s->conc[k][c];
		a->excess[k] += s->excess[k];
		a->over_cap_ns[k] += s->over_cap_ns[k];
	}
	return 0;
}

static uint64_t round_u64(double v)
{
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

static int conc_row(struct rp_report_conc *o, const char *name, const uint64_t *ns, uint32_t n,
		    double excess, uint64_t over)
{
	double area = excess;
	uint64_t total = 0;
	uint32_t q[4];

	for (uint32_t c = 0; c < n; c++) {
		total += ns[c];
		area += (double)c * (double)ns[c];
	}
	o->name = strdup(name);
	if (o->name == NULL)
		return -ENOMEM;
	o->observed_ns = total;
	o->mean_milli = total ? round_u64(area * 1000.0 / (double)total) : 0;
	rp_sweep_levels_quantiles(ns, n, q, &o->max);
	o->p50 = q[0];
	o->p90 = q[1];
	o->p95 = q[2];
	o->p99 = q[3];
	o->over_cap_ns = over;
	return 0;
}

static int cmp_wfn(const void *x, const void *y)
{
	const struct rp_report_wfn *a = x, *b = y;

	if (a->cum_ns != b->cum_ns)
		return a->cum_ns < b->cum_ns ? 1 : -1;
	return (a->fn > b->fn) - (a->fn < b->fn);
}

static uint64_t quantile_ns(const struct rp_sketch *k, double q)
{
	return rp_sketch_count(k) ? round_u64(rp_sketch_quantile(k, q)) : 0;
}

static int window_fill(struct wacc *a, const struct rp_windows *ws, const struct rp_window *w,
		       const uint32_t *map, struct rp_report_window *o)
{
	struct rp_report_bottlenecks *b = &o->top;
	int err;

	o->fns = calloc(a->n_rows ? a->n_rows : 1, sizeof(*o->fns));
	o->conc = calloc(2, sizeof(*o->conc));
	if (o->fns == NULL || o->conc == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < a->n_rows; i++) {
		const struct rp_wentry *d = &a->rows[i];

		rp_spacesaving_offer(&a->ss[RP_WIN_CUM], d->name, d->cum_ns);
		rp_spacesaving_offer(&a->ss[RP_WIN_SELF], d->name, d->self_ns);
		rp_spacesaving_offer(&a->ss[RP_WIN_COUNT], d->name, d->calls);
		if (map[d->name] == RP_NONE)
			continue;
		o->fns[o->n_fns++] = (struct rp_report_wfn){
			.fn = map[d->name],
			.calls = d->calls,
			.self_ns = d->self_ns,
			.cum_ns = d->cum_ns,
			.p50_ns = quantile_ns(&d->dur, 0.50),
			.p90_ns = quantile_ns(&d->dur, 0.90),
			.p95_ns = quantile_ns(&d->dur, 0.95),
			.p99_ns = quantile_ns(&d->dur, 0.99),
		};
		/* Kept for merges across hosts (the report's size: window.h). */
		if (rp_report_sketch_from(&o->fns[o->n_fns - 1].dur, &d->dur) != 0)
			return -ENOMEM;
	}
	qsort(o->fns, o->n_fns, sizeof(*o->fns), cmp_wfn);
	if ((err = conc_row(&o->conc[o->n_conc++], "overall", a->conc[0], ws->max_level + 1,
			    a->excess[0], a->over_cap_ns[0])) ||
	    (err = conc_row(&o->conc[o->n_conc++], "roots", a->conc[1], ws->max_level + 1,
			    a->excess[1], a->over_cap_ns[1])) ||
	    (err = rp_window_top(&a->ss[RP_WIN_CUM], ws->k, map, &b->by_cum, &b->n_by_cum,
				 &b->bound_cum)) ||
	    (err = rp_window_top(&a->ss[RP_WIN_SELF], ws->k, map, &b->by_self, &b->n_by_self,
				 &b->bound_self)) ||
	    (err = rp_window_top(&a->ss[RP_WIN_COUNT], ws->k, map, &b->by_count, &b->n_by_count,
				 &b->bound_count)))
		return err;
	(void)w;
	return rp_window_spans(&a->slow, map, &b->slowest, &b->n_slowest);
}

static int window_report(const struct rp_windows *ws, const struct rp_window *w, uint64_t t_last,
			 const uint64_t *pending[2], const uint32_t n_pending[2],
			 const uint32_t *map, uint32_t n_names, struct rp_report_window *o)
{
	uint64_t J = t_last / w->g;
	const struct rp_window *w0 = &ws->w[0];
	struct wacc a;
	bool fresh;
	int err;

	memset(&a, 0, sizeof(a));
	o->name = strdup(w->name);
	o->length_ns = w->length;
	o->subwindows = ws->S;
	o->t_from = J >= ws->S - 1 ? (J - ws->S + 1) * w->g : 0;
	o->t_to = t_last;
	if (o->name == NULL || (err = wacc_init(&a, ws, n_names)) != 0) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t s = 0; s < ws->S && w->started; s++) {
		const struct rp_wslot *sl = &w->slot[s];

		if (sl->index != UINT64_MAX && sl->index <= J && sl->index + ws->S > J &&
		    (err = wacc_add(&a, ws, sl, true)) != 0)
			goto out;
	}
	/* The finest window's current sub-window is not folded into the others yet. A
	 * live report may end later than any event (rp_engine_report_at()): once that
	 * sub-window has left @w, neither it nor the time pending since the last
	 * rotation belongs to @w any more, which is how an idle window empties. */
	fresh = w0->started && w0->cur / (w->g / w0->g) + ws->S > J;
	if (w != w0 && fresh && (err = wacc_add(&a, ws, w0->cs, false)) != 0)
		goto out;
	for (int k = 0; k < 2 && fresh; k++)
		for (uint32_t c = 0; c < n_pending[k]; c++) {
			uint32_t lv = c < ws->max_level ? c : ws->max_level;

			a.conc[k][lv] += pending[k][c];
			if (c > ws->max_level) {
				a.excess[k] += (double)(c - ws->max_level) * (double)pending[k][c];
				a.over_cap_ns[k] += pending[k][c];
			}
		}
	err = window_fill(&a, ws, w, map, o);
out:
	wacc_free(&a, n_names);
	return err;
}

int rp_windows_report(const struct rp_windows *ws, uint64_t t_last, const uint64_t *pending[2],
		      const uint32_t n_pending[2], const uint32_t *map, uint32_t n_names,
		      struct rp_report *r)
{
	int err;

	r->anomalies[RP_ANOM_WINDOW_CAP] += ws->cap_hits;
	r->anomalies[RP_ANOM_WINDOW_EVICTED] += ws->evicted;
	r->anomalies[RP_ANOM_LEVEL_CAP] += ws->level_cap_hits;
	if (ws->n == 0)
		return 0;
	r->windows = calloc(ws->n, sizeof(*r->windows));
	if (r->windows == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < ws->n; i++) {
		err = window_report(ws, &ws->w[i], t_last, pending, n_pending, map, n_names,
				    &r->windows[r->n_windows++]);
		if (err)
			return err;
	}
	return 0;
}
