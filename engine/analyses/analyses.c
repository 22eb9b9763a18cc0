// SPDX-License-Identifier: MIT
/*
 * Streaming analyses over the spans of the stack machine; see analyses.h. Every
 * open and close goes to the overall sweep, to its category's sweep, and for roots
 * to the roots sweep; a close adds the duration to the name's sketch and asks the
 * overall sweep for the level at the call's midpoint (after the close is fed, as
 * sweep.h requires).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"
#include "spread.h"

size_t rp_analyses_memory_bound(const struct rp_analyses_cfg *c)
{
	size_t store = (size_t)rp_sketch_default_buckets(RP_SKETCH_ALPHA) * sizeof(uint64_t);
	size_t per_name = sizeof(uint8_t) + sizeof(struct rp_sketch *) + sizeof(struct rp_mid) +
			  sizeof(uint32_t) + 2 * sizeof(uint32_t) + sizeof(uint8_t); /* + LRU */
	size_t sweep = sizeof(struct rp_sweep) + ((size_t)RP_ANALYSES_MAX_LEVEL + 1) * 8;
	size_t b = (size_t)c->max_names * per_name;

	b += (size_t)c->max_sketch_names * (sizeof(struct rp_sketch) + store);
	b += (3 + RP_ANALYSES_MAX_CATEGORIES) * sweep + RP_ANALYSES_HISTORY * 12 + 12;
	b += RP_ANALYSES_MAX_CATEGORIES * store;	  /* category sketches (stores) */
	b += (size_t)c->max_counters * (sizeof(struct rp_counter_stats) + 2 * store);
	b += RP_SLOWEST_MEMSIZE(c->win.topk);
	if (c->win.n) /* the sweep levels at the last rotation */
		b += 2 * ((size_t)RP_ANALYSES_MAX_LEVEL + 1) * sizeof(uint64_t);
	return b;
}

int rp_analyses_init(struct rp_analyses *a, const struct rp_names *names,
		     const struct rp_analyses_cfg *c)
{
	int err;

	memset(a, 0, sizeof(*a));
	a->names = names;
	a->max_names = c->max_names;
	a->max_sketch = c->max_sketch_names;
	a->max_counters = c->max_counters;
	a->next = UINT64_MAX;
	for (uint32_t i = 0; i < RP_ANALYSES_MAX_CATEGORIES; i++)
		rp_sketch_init(&a->cats[i].dur, RP_SKETCH_ALPHA);
	a->cat_of = calloc(c->max_names, sizeof(*a->cat_of));
	a->sketch = calloc(c->max_names, sizeof(*a->sketch));
	a->mid = rp_spread_calloc(c->max_names, sizeof(*a->mid), RP_SPREAD_MID);
	a->counter_of =
		rp_spread_calloc(c->max_names, sizeof(*a->counter_of), RP_SPREAD_COUNTER_OF);
	a->lru_prev = calloc(c->max_names, sizeof(*a->lru_prev));
	a->lru_next = calloc(c->max_names, sizeof(*a->lru_next));
	a->lru_list = calloc(c->max_names, sizeof(*a->lru_list));
	a->lru_head[0] = a->lru_head[1] = a->lru_tail[0] = a->lru_tail[1] = RP_NONE;
	a->counters = rp_spread_calloc(c->max_counters ? c->max_counters : 1, sizeof(*a->counters),
				       RP_SPREAD_COUNTERS);
	if (!a->cat_of || !a->sketch || !a->mid || !a->counter_of ||
	    !a->counters || !a->lru_prev || !a->lru_next || !a->lru_list ||
	    rp_slowest_init(&a->slow, c->win.topk ? c->win.topk : 1) ||
	    rp_sweep_init(&a->overall, RP_ANALYSES_MAX_LEVEL, RP_ANALYSES_HISTORY) ||
	    rp_sweep_init_levels(&a->roots, RP_ANALYSES_MAX_LEVEL) ||
	    rp_sweep_init_levels(&a->requests, RP_ANALYSES_MAX_LEVEL)) {
		err = -ENOMEM;
		goto fail;
	}
	if ((err = rp_windows_init(&a->win, &c->win)) != 0)
		goto fail;
	if (a->win.n) {
		a->next = 0;
		for (int k = 0; k < 2; k++)
			if ((a->prev[k] = calloc(RP_ANALYSES_MAX_LEVEL + 1, sizeof(uint64_t))) ==
			    NULL) {
				err = -ENOMEM;
				goto fail;
			}
	}
	return 0;
fail:
	rp_analyses_fini(a);
	return err;
}

void rp_analyses_fini(struct rp_analyses *a)
{
	for (uint32_t i = 0; a->sketch != NULL && i < a->max_names; i++)
		rp_sketch_destroy(a->sketch[i]);
	for (uint32_t i = 0; i < a->n_cat; i++)
		rp_sweep_fini(&a->cat[i]);
	for (uint32_t i = 0; i < RP_ANALYSES_MAX_CATEGORIES; i++)
		rp_sketch_fini(&a->cats[i].dur);
	for (uint32_t i = 0; i < a->n_counters; i++)
		rp_sketch_fini(&a->counters[i].values);
	rp_sweep_fini(&a->overall);
	rp_sweep_fini(&a->roots);
	rp_sweep_fini(&a->requests);
	rp_windows_fini(&a->win);
	rp_slowest_fini(&a->slow);
	free(a->prev[0]);
	free(a->prev[1]);
	free(a->cat_of);
	free(a->sketch);
	rp_spread_free(a->mid);
	rp_spread_free(a->counter_of);
	rp_spread_free(a->counters);
	free(a->lru_prev);
	free(a->lru_next);
	free(a->lru_list);
	memset(a, 0, sizeof(*a));
}

/* The category of a name seen for the first time; NULL if no sweep could be made. */
struct rp_sweep *rp_analyses_cat_new(struct rp_analyses *a, uint32_t name)
{
	const char *cat;
	uint32_t i;

	cat = a->names->e[name].category;
	for (i = 0; i < a->n_cat; i++)
		if (strcmp(a->cat_name[i], cat) == 0)
			break;
	if (i == a->n_cat) {
		if (a->n_cat == RP_ANALYSES_MAX_CATEGORIES) /* the last one is "[other]" */
			i = RP_ANALYSES_MAX_CATEGORIES - 1;
		else if (rp_sweep_init_levels(&a->cat[i], RP_ANALYSES_MAX_LEVEL) != 0)
			return NULL;
		else
			a->cat_name[a->n_cat++] =
				i == RP_ANALYSES_MAX_CATEGORIES - 1 ? "[other]" : cat;
	}
	a->cat_of[name] = (uint8_t)(i + 1);
	return &a->cat[i];
}


/* --- sketch slots: a segmented LRU (analyses.h) ------------------------------------ */

static void lru_unlink(struct rp_analyses *a, uint32_t n)
{
	int l = a->lru_list[n] - RP_LRU_PROBATION;
	uint32_t p = a->lru_prev[n], x = a->lru_next[n];

	if (p != RP_NONE)
		a->lru_next[p] = x;
	else
		a->lru_head[l] = x;
	if (x != RP_NONE)
		a->lru_prev[x] = p;
	else
		a->lru_tail[l] = p;
}

/* @n at the head (newest) of list @st. */
static void lru_push(struct rp_analyses *a, uint32_t n, enum rp_lru_state st)
{
	int l = st - RP_LRU_PROBATION;

	a->lru_list[n] = (uint8_t)st;
	a->lru_prev[n] = RP_NONE;
	a->lru_next[n] = a->lru_head[l];
	if (a->lru_head[l] != RP_NONE)
		a->lru_prev[a->lru_head[l]] = n;
	else
		a->lru_tail[l] = n;
	a->lru_head[l] = n;
}

/* The oldest name of probation, else of protected, loses its sketch (emptied). */
static struct rp_sketch *lru_evict(struct rp_analyses *a)
{
	uint32_t v = a->lru_tail[0] != RP_NONE ? a->lru_tail[0] : a->lru_tail[1];
	struct rp_sketch *k;

	if (v == RP_NONE)
		return NULL;
	lru_unlink(a, v);
	a->lru_list[v] = RP_LRU_EVICTED;
	k = a->sketch[v];
	a->sketch[v] = NULL;
	a->sketch_evicted++;
	rp_sketch_reset(k);
	return k;
}

/* The all-time sketch of @name, which has @calls new spans for it; NULL if none. */
static struct rp_sketch *name_sketch(struct rp_analyses *a, uint32_t name, uint64_t calls)
{
	struct rp_sketch *k = a->sketch[name];

	if (k != NULL) { /* seen again: protected, newest */
		if (a->lru_head[1] != name) { /* else there already */
			lru_unlink(a, name);
			lru_push(a, name, RP_LRU_PROTECTED);
		}
		return k;
	}
	if (a->lru_list[name] == RP_LRU_EVICTED)
		return NULL;
	if (a->n_sketch < a->max_sketch) {
		k = rp_sketch_create(RP_SKETCH_ALPHA);
		a->n_sketch += k != NULL;
	} else {
		k = lru_evict(a);
	}
	if (k == NULL)
		return NULL;
	a->sketch[name] = k;
	lru_push(a, name, calls > 1 ? RP_LRU_PROTECTED : RP_LRU_PROBATION);
	return k;
}

/* A span of @dur ns (@self_ns of them its own) whose name has no room in the finest
 * sub-window (or no windows). Out of line: rp_analyses_close_direct()'s rare case,
 * which in line made it save registers on every call. */
__attribute__((noinline)) static void add_direct(struct rp_analyses *a, uint32_t name,
						  uint32_t ci, uint64_t self_ns, uint64_t dur)
{
	struct rp_sketch *k = name_sketch(a, name, 1);

	if (ci) {
		a->cats[ci - 1].calls++;
		a->cats[ci - 1].self_ns += self_ns;
		a->cats[ci - 1].total_ns += dur;
		if (k != NULL)
			rp_sketch_add_ns2(k, &a->cats[ci - 1].dur, dur);
		else
			rp_sketch_add_ns(&a->cats[ci - 1].dur, dur);
	} else if (k != NULL) {
		rp_sketch_add_ns(k, dur);
	}
}

void rp_analyses_summary(struct rp_analyses *a, const struct rp_sum_call *c, const uint64_t *len,
			 const uint64_t *calls, uint32_t n)
{
	uint64_t cum = c->primitive ? c->total_ns : 0;
	struct rp_wentry *e = NULL;
	struct rp_sketch *k;
	uint32_t ci;

	rp_analyses_cat_sweep(a, c->name); /* its category, known from now on */
	ci = a->cat_of[c->name];
	/* As a span's close: a full table evicts an entry called once; and an entry
	 * that now holds more than one call is no eviction candidate any more (left
	 * in the once set, a summary of a million calls was the next victim, and its
	 * million calls counted window_cap). */
	if (a->win.n > 0 && (e = rp_window_entry(&a->win, &a->win.w[0], c->name)) == NULL)
		e = rp_analyses_evict(a, c->name);
	if (e != NULL) {
		if (e->calls == 0) /* new: an eviction candidate while all its calls are */
			e->imp = c->imp;
		e->cat = ci;
		e->calls += c->calls;
		if (e->calls > 1 && !(e->imp && c->imp))
			rp_wslot_settle(a->win.w[0].cs, e);
		e->self_ns += c->self_ns;
		e->cum_ns += cum;
		e->total_ns += c->total_ns;
		for (uint32_t i = 0; i < n; i++)
			rp_sketch_add_n(&e->dur, (double)len[i], calls[i]);
		return;
	}
	if (a->win.n > 0) { /* no room in the sub-window: as rp_analyses_close_overflow() */
		struct rp_wslot *s = a->win.w[0].cs;

		rp_spacesaving_offer(&s->ss[RP_WIN_CUM], c->name, cum);
		rp_spacesaving_offer(&s->ss[RP_WIN_SELF], c->name, c->self_ns);
		rp_spacesaving_offer(&s->ss[RP_WIN_COUNT], c->name, c->calls);
		rp_window_overflow_count(&a->win.w[0], c->name, c->calls);
		a->win.cap_hits += c->calls; /* in calls, as rp_wslot_fold() counts */
	}
	k = name_sketch(a, c->name, c->calls);
	for (uint32_t i = 0; i < n && k != NULL; i++)
		rp_sketch_add_n(k, (double)len[i], calls[i]);
	if (ci) {
		a->cats[ci - 1].calls += c->calls;
		a->cats[ci - 1].self_ns += c->self_ns;
		a->cats[ci - 1].total_ns += c->total_ns;
		for (uint32_t i = 0; i < n; i++)
			rp_sketch_add_n(&a->cats[ci - 1].dur, (double)len[i], calls[i]);
	}
}

void rp_analyses_mark(struct rp_analyses *a, uint32_t name, uint64_t dur)
{
	struct rp_wentry *e = NULL;
	struct rp_sketch *k;

	if (a->win.n > 0) {
		e = rp_window_entry(&a->win, &a->win.w[0], name);
		if (e == NULL)
			e = rp_analyses_evict(a, name);
	}
	if (e != NULL) {
		if (++e->calls == 2 || e->imp) /* no longer an eviction candidate */
			rp_wslot_settle(a->win.w[0].cs, e);
		e->total_ns += dur;
		rp_sketch_add_ns(&e->dur, dur);
		return;
	}
	if (a->win.n > 0) { /* no room in the sub-window: as rp_analyses_close_overflow() */
		/* counted only: a milestone has no self or cumulative time to rank */
		rp_spacesaving_offer(&a->win.w[0].cs->ss[RP_WIN_COUNT], name, 1);
		rp_window_overflow_count(&a->win.w[0], name, 1);
		a->win.cap_hits++;
	}
	k = name_sketch(a, name, 1);
	if (k != NULL)
		rp_sketch_add_ns(k, dur);
}

void rp_analyses_keep_slow(struct rp_slowest *sl, const struct rp_span_info *sp, uint32_t ci,
			   uint32_t level, bool known)
{
	struct rp_span_exemplar x = {
		.track_id = sp->track, .span_id = sp->span, .start_ns = sp->start,
		.dur_ns = sp->end - sp->start, .self_ns = sp->self_ns,
		.subtree_ns = sp->subtree_ns, .name_id = sp->name, .source = sp->src,
		.concurrency = known ? level : 0, .category_id = (uint16_t)ci,
		.concurrency_known = known, .charged_ns = sp->charged_ns,
	};

	rp_slowest_offer(sl, &x);
}

/* A protected name seen again, not the newest, to the head of the protected list: as
 * lru_unlink() and lru_push() move it, knowing it has a predecessor and the list a head. */
static inline void lru_front(struct rp_analyses *a, uint32_t name)
{
	uint32_t p = a->lru_prev[name], x = a->lru_next[name], h = a->lru_head[1];

	a->lru_next[p] = x;
	if (x != RP_NONE)
		a->lru_prev[x] = p;
	else
		a->lru_tail[1] = p;
	a->lru_prev[name] = RP_NONE;
	a->lru_next[name] = h;
	a->lru_prev[h] = name;
	a->lru_head[1] = name;
}

/* Without windows, every span: add_direct() with name_sketch()'s common case (a
 * protected name, so one with a sketch) in line, the duration's bucket index computed
 * once for the name's sketch and its category's. Out of line itself: inlined into
 * rp_analyses_close(), it cost the windowed path 2.3 instructions per event of
 * bench_engine (the engine's loop, into which everything is inlined, spilled more).
 * It takes scalars, not the span: the span need not be stored for it, and its body
 * ends in tail calls, with no registers to save. */
void rp_analyses_close_direct(struct rp_analyses *a, uint32_t name, uint32_t ci, uint64_t self_ns,
			      uint64_t dur)
{
	if (a->lru_list[name] != RP_LRU_PROTECTED) {
		add_direct(a, name, ci, self_ns, dur);
		return;
	}
	if (a->lru_head[1] != name)
		lru_front(a, name);
	if (ci) {
		a->cats[ci - 1].calls++;
		a->cats[ci - 1].self_ns += self_ns;
		a->cats[ci - 1].total_ns += dur;
		rp_sketch_add_ns2(a->sketch[name], &a->cats[ci - 1].dur, dur);
	} else {
		rp_sketch_add_ns(a->sketch[name], dur);
	}
}

void rp_analyses_open_late(struct rp_analyses *a, struct rp_sweep *c, uint32_t depth, uint64_t t,
			   bool request)
{
	rp_sweep_open_hist(&a->overall, t);
	if (c != NULL)
		rp_sweep_open_levels(c, t);
	if (depth == 0)
		rp_sweep_open_levels(&a->roots, t);
	if (request)
		rp_sweep_open_levels(&a->requests, t);
}

bool rp_analyses_close_late(struct rp_analyses *a, uint32_t ci, const struct rp_span_info *sp,
			    uint32_t *level)
{
	if (ci != 0)
		rp_sweep_close_levels(&a->cat[ci - 1], sp->end);
	if (sp->depth == 0)
		rp_sweep_close_levels(&a->roots, sp->end);
	if (sp->request)
		rp_sweep_close_levels(&a->requests, sp->end);
	return rp_sweep_close_hist_mid(&a->overall, sp->end, sp->start, level) >= 0;
}

void rp_analyses_close_batch(struct rp_analyses *a, const struct rp_span_info *sp, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		rp_analyses_close(a, &sp[i]);
}

void rp_analyses_close_new(struct rp_analyses *a, const struct rp_span_info *sp, uint32_t ci)
{
	struct rp_window *w0 = &a->win.w[0];
	struct rp_wentry *e = rp_window_insert(&a->win, w0, sp->name);

	if (e == NULL)
		e = rp_analyses_evict(a, sp->name);
	if (e != NULL)
		rp_analyses_entry_add(w0->cs, e, sp, ci);
	else
		rp_analyses_close_overflow(a, sp, ci);
}

void rp_analyses_close_overflow(struct rp_analyses *a, const struct rp_span_info *sp,
				uint32_t ci)
{
	uint64_t dur = sp->end - sp->start;

	rp_wslot_overflow(a->win.w[0].cs, sp->name, sp->primitive ? dur : 0, sp->self_ns);
	rp_window_overflow_count(&a->win.w[0], sp->name, 1);
	a->win.cap_hits++;
	add_direct(a, sp->name, ci, sp->self_ns, dur);
}

/* An entry of the finest window into the all-time sketches. */
static void fold_entry(struct rp_analyses *a, const struct rp_wentry *e)
{
	struct rp_sketch *k = name_sketch(a, e->name, e->calls);

	if (k != NULL)
		rp_sketch_merge(k, &e->dur);
	if (e->cat) {
		struct rp_cat_stats *c = &a->cats[e->cat - 1];

		c->calls += e->calls;
		c->self_ns += e->self_ns;
		c->total_ns += e->total_ns;
		rp_sketch_merge(&c->dur, &e->dur);
	}
}

/* The finest window's finished sub-window into the all-time sketches and spans. */
static void fold_alltime(struct rp_analyses *a, const struct rp_wslot *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		fold_entry(a, &s->e[i]);
	rp_slowest_merge(&a->slow, &s->slow);
}

/*
 * No candidate in the finest sub-window: @name takes the place of the least-called
 * entry if its calls that overflowed there (a power of two >= 2, so the table is
 * scanned a few times per name and sub-window) outnumber that entry's; else NULL.
 */
static struct rp_wentry *busier(struct rp_window *w0, uint32_t name)
{
	uint32_t ov = rp_window_overflowed(w0, name);
	struct rp_wslot *s = w0->cs;
	struct rp_wentry *v = NULL;

	if (ov < 2 || (ov & (ov - 1)) != 0)
		return NULL;
	for (uint32_t i = 0; i < s->n; i++)
		if (s->e[i].calls < ov && (v == NULL || s->e[i].calls < v->calls))
			v = &s->e[i];
	return v;
}

struct rp_wentry *rp_analyses_evict(struct rp_analyses *a, uint32_t name)
{
	struct rp_window *w0 = &a->win.w[0];
	struct rp_wentry *v = rp_window_victim(w0);

	if (v == NULL && (v = busier(w0, name)) == NULL)
		return NULL;
	fold_entry(a, v); /* its spans stay in the all-time figures */
	rp_wslot_spill(&a->win, w0->cs, v);
	return rp_window_replace(&a->win, w0, v, name);
}

/* Time at each level since the last rotation into every window's sub-window of the
 * finest one's current; the sweeps are accrued up to the sub-window's end first. */
static void take_levels(struct rp_analyses *a, uint64_t end)
{
	struct rp_sweep *sw[2] = { &a->overall, &a->roots };
	struct rp_window *w0 = &a->win.w[0];
	struct rp_wslot *slot[RP_WINDOW_MAX];

	for (uint32_t i = 0; i < a->win.n; i++)
		slot[i] = rp_window_at(&a->win, &a->win.w[i], w0->cur * w0->g / a->win.w[i].g);
	for (int k = 0; k < 2; k++) {
		struct rp_sweep *s = sw[k];

		if (!s->opened)
			continue;
		if (s->last_t < end)
			rp_sweep_accrue(s, end);
		for (uint32_t c = 0; c < s->n_alloc; c++) {
			uint64_t x = rp_sweep_ns(s, c), d = x - a->prev[k][c];

			a->prev[k][c] = x;
			for (uint32_t i = 0; d && i < a->win.n; i++)
				if (slot[i] != NULL)
					rp_wslot_add_time(&a->win, slot[i], k, c, d);
		}
	}
}

void rp_analyses_rotate(struct rp_analyses *a, uint64_t t)
{
	struct rp_windows *ws = &a->win;
	struct rp_window *w0 = &ws->w[0];
	struct rp_sweep *sw[2] = { &a->overall, &a->roots };
	uint64_t g = w0->g, J = t / g, lv[2];
	bool have[2];

	if (ws->n == 0)
		return;
	if (w0->started) {
		uint64_t E = (w0->cur + 1) * g, B = J * g;

		take_levels(a, E);
		for (uint32_t i = 1; i < ws->n; i++) {
			struct rp_window *w = &ws->w[i];

			if (rp_window_at(ws, w, w0->cur * g / w->g) == w->cs)
				rp_wslot_fold(ws, w, w0->cs);
		}
		fold_alltime(a, w0->cs);
		for (int k = 0; k < 2; k++) { /* [E, B): no event, constant levels */
			have[k] = sw[k]->opened;
			lv[k] = rp_sweep_level(sw[k]);
		}
		rp_windows_const(ws, E, B, lv, have);
		for (int k = 0; k < 2; k++)
			if (have[k] && B > E) {
				if (sw[k]->last_t < B)
					rp_sweep_accrue(sw[k], B);
				rp_sweep_levels(sw[k], a->prev[k]);
			}
	}
	rp_window_at(ws, w0, J);
	a->next = J + 1 > UINT64_MAX / g ? UINT64_MAX : (J + 1) * g;
}

bool rp_analyses_counter(struct rp_analyses *a, uint32_t name, uint64_t t, int64_t v)
{
	uint32_t r = a->counter_of[name];
	struct rp_counter_stats *c;

	if (r == 0) {
		if (a->n_counters == a->max_counters)
			return false;
		c = &a->counters[a->n_counters];
		*c = (struct rp_counter_stats){ .name = name, .min = v, .max = v };
		rp_sketch_init(&c->values, RP_SKETCH_ALPHA);
		r = ++a->n_counters;
		a->counter_of[name] = r;
	}
	c = &a->counters[r - 1];
	c->samples++;
	if (t >= c->last_ts) {
		c->last_ts = t;
		c->last = v;
	}
	c->min = v < c->min ? v : c->min;
	c->max = v > c->max ? v : c->max;
	if (v > 0) /* (double)v == (double)(uint64_t)v: rp_sketch_add_ns()'s short path */
		rp_sketch_add_ns(&c->values, (uint64_t)v);
	else
		rp_sketch_add(&c->values, (double)v);
	return true;
}

static uint64_t round_ns(double v)
{
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

static int conc_row(struct rp_report_conc *o, const char *name, const struct rp_sweep *s)
{
	uint32_t q[4];

	o->name = strdup(name);
	if (o->name == NULL)
		return -ENOMEM;
	o->observed_ns = rp_sweep_observed_ns(s);
	o->mean_milli = round_ns(rp_sweep_mean(s) * 1000.0);
	rp_sweep_quantiles(s, q, &o->max);
	o->p50 = q[0];
	o->p90 = q[1];
	o->p95 = q[2];
	o->p99 = q[3];
	o->over_cap_ns = s->over_cap_ns;
	o->now = rp_sweep_level(s);
	return 0;
}

/* @k (may be NULL) plus the finest current sub-window's entry of @name into @out. */
static int merged_sketch(const struct rp_analyses *a, const struct rp_sketch *k, uint32_t name,
			 struct rp_sketch *out)
{
	const struct rp_wentry *e = a->win.n ? rp_window_find(&a->win.w[0], name) : NULL;
	int err = 0;

	rp_sketch_init(out, RP_SKETCH_ALPHA);
	if (k != NULL)
		err = rp_sketch_merge(out, k);
	if (e != NULL && !err)
		err = rp_sketch_merge(out, &e->dur);
	return err;
}

static void quantiles(const struct rp_sketch *k, uint64_t *p50, uint64_t *p90, uint64_t *p95,
		      uint64_t *p99)
{
	if (rp_sketch_count(k) == 0)
		return;
	*p50 = round_ns(rp_sketch_quantile(k, 0.50));
	*p90 = round_ns(rp_sketch_quantile(k, 0.90));
	*p95 = round_ns(rp_sketch_quantile(k, 0.95));
	*p99 = round_ns(rp_sketch_quantile(k, 0.99));
}

static int report_fns(const struct rp_analyses *a, const uint32_t *map, struct rp_report *r)
{
	struct rp_sketch m;
	int err;

	for (uint32_t i = 0; i < a->names->n; i++) {
		struct rp_report_fn *f;
		const struct rp_sketch *k = a->sketch[i];

		if (map[i] == RP_NONE)
			continue;
		f = &r->fns[map[i]];
		f->midpoint_sum = a->mid[i].sum;
		f->midpoint_count = a->mid[i].count;
		if (a->lru_list[i] == RP_LRU_EVICTED || (k == NULL && a->max_sketch == 0))
			continue; /* its sketch was evicted (or none allowed): no quantiles */
		err = merged_sketch(a, k, i, &m);
		if (!err && rp_sketch_count(&m) > 0) {
			quantiles(&m, &f->p50_ns, &f->p90_ns, &f->p95_ns, &f->p99_ns);
			err = rp_report_sketch_from(&f->dur, &m);
		}
		rp_sketch_fini(&m);
		if (err)
			return err;
	}
	return 0;
}

static int report_conc(const struct rp_analyses *a, struct rp_report *r)
{
	int err;

	r->conc = calloc(2 + a->n_cat, sizeof(*r->conc));
	if (r->conc == NULL)
		return -ENOMEM;
	if ((err = conc_row(&r->conc[r->n_conc++], "overall", &a->overall)) ||
	    (err = conc_row(&r->conc[r->n_conc++], "roots", &a->roots)))
		return err;
	for (uint32_t i = 0; i < a->n_cat; i++)
		if ((err = conc_row(&r->conc[r->n_conc++],
				    a->cat_name[i][0] ? a->cat_name[i] : "(none)", &a->cat[i])))
			return err;
	/* Requests in flight: absent (name NULL) until a request span opened. */
	if (a->requests.opened && (err = conc_row(&r->requests, "requests", &a->requests)))
		return err;
	return 0;
}

static int report_cats(const struct rp_analyses *a, struct rp_report *r)
{
	const struct rp_wslot *cs = a->win.n && a->win.w[0].started ? a->win.w[0].cs : NULL;
	struct rp_sketch m;
	int err = 0;

	r->cats = calloc(a->n_cat ? a->n_cat : 1, sizeof(*r->cats));
	if (r->cats == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < a->n_cat && !err; i++) {
		struct rp_report_cat *o = &r->cats[r->n_cats++];

		rp_sketch_init(&m, RP_SKETCH_ALPHA);
		err = rp_sketch_merge(&m, &a->cats[i].dur);
		o->calls = a->cats[i].calls;
		o->self_ns = a->cats[i].self_ns;
		o->total_ns = a->cats[i].total_ns;
		for (uint32_t j = 0; cs != NULL && j < cs->n && !err; j++)
			if (cs->e[j].cat == i + 1) {
				o->calls += cs->e[j].calls;
				o->self_ns += cs->e[j].self_ns;
				o->total_ns += cs->e[j].total_ns;
				err = rp_sketch_merge(&m, &cs->e[j].dur);
			}
		o->name = strdup(a->cat_name[i]);
		quantiles(&m, &o->p50_ns, &o->p90_ns, &o->p95_ns, &o->p99_ns);
		if (o->name == NULL)
			err = -ENOMEM;
		if (!err)
			err = rp_report_sketch_from(&o->dur, &m);
		rp_sketch_fini(&m);
	}
	return err;
}

static int report_counters(const struct rp_analyses *a, struct rp_report *r)
{
	r->counters = calloc(a->n_counters ? a->n_counters : 1, sizeof(*r->counters));
	if (r->counters == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < a->n_counters; i++) {
		const struct rp_counter_stats *c = &a->counters[i];
		const struct rp_name_entry *ne = &a->names->e[c->name];
		struct rp_report_counter *o = &r->counters[r->n_counters++];

		o->name = strdup(ne->name);
		o->category = strdup(ne->category);
		o->samples = c->samples;
		o->last = c->last;
		o->min = c->min;
		o->max = c->max;
		o->mean = rp_sketch_sum(&c->values) / (double)c->samples;
		o->p50 = rp_sketch_quantile(&c->values, 0.50);
		o->p90 = rp_sketch_quantile(&c->values, 0.90);
		o->p95 = rp_sketch_quantile(&c->values, 0.95);
		o->p99 = rp_sketch_quantile(&c->values, 0.99);
		if (!o->name || !o->category || rp_report_sketch_from(&o->values, &c->values))
			return -ENOMEM;
	}
	return 0;
}

static int report_windows(const struct rp_analyses *a, const uint32_t *map, uint64_t t_last,
			  struct rp_report *r)
{
	const struct rp_sweep *sw[2] = { &a->overall, &a->roots };
	uint64_t *pend[2] = { NULL, NULL };
	const uint64_t *cpend[2];
	uint32_t n[2] = { 0, 0 };
	int err = -ENOMEM;

	if (a->win.n == 0 || !a->win.w[0].started)
		return 0;
	t_last = t_last > a->t_hi ? t_last : a->t_hi;
	for (int k = 0; k < 2; k++) {
		uint32_t level = rp_sweep_level(sw[k]);

		level = level < RP_ANALYSES_MAX_LEVEL ? level : RP_ANALYSES_MAX_LEVEL;
		n[k] = sw[k]->n_alloc > level ? sw[k]->n_alloc : level + 1;
		pend[k] = calloc(n[k], sizeof(uint64_t));
		if (pend[k] == NULL)
			goto out;
		for (uint32_t c = 0; sw[k]->opened && c < sw[k]->n_alloc; c++)
			pend[k][c] = rp_sweep_ns(sw[k], c) - a->prev[k][c];
		/* The sweep's level holds from its last event to the newest event time
		 * (what the rotation's accrual would add). */
		if (sw[k]->opened && t_last > sw[k]->last_t)
			pend[k][level] += t_last - sw[k]->last_t;
		cpend[k] = pend[k];
	}
	err = rp_windows_report(&a->win, t_last, cpend, n, map,
				a->names->n, r);
out:
	free(pend[0]);
	free(pend[1]);
	return err;
}

static int report_slowest(const struct rp_analyses *a, const uint32_t *map, struct rp_report *r)
{
	struct rp_slowest m;
	int err;

	if (rp_slowest_init(&m, a->slow.k))
		return -ENOMEM;
	rp_slowest_merge(&m, &a->slow);
	if (a->win.n && a->win.w[0].started)
		rp_slowest_merge(&m, &a->win.w[0].cs->slow);
	err = rp_window_spans(&m, map, &r->bottlenecks.slowest, &r->bottlenecks.n_slowest);
	rp_slowest_fini(&m);
	return err;
}

int rp_analyses_report(const struct rp_analyses *a, const uint32_t *map, uint64_t t_last,
		       struct rp_report *r)
{
	int err;

	r->anomalies[RP_ANOM_SKETCH_EVICTED] += a->sketch_evicted;
	if ((err = report_fns(a, map, r)) || (err = report_conc(a, r)) ||
	    (err = report_cats(a, r)) || (err = report_counters(a, r)) ||
	    (err = report_windows(a, map, t_last, r)) || (err = report_slowest(a, map, r)))
		return err;
	return 0;
}
