// SPDX-License-Identifier: MIT
/*
 * The analyses' batch entry point against the one it batches: random nested spans
 * on two tracks (a thread and an async request track, names in three categories,
 * sub-windows that rotate) fed to one set of analyses close by close and to another
 * with each run of closes in one rp_analyses_close_batch() call leave the same
 * state: every sweep's level array and history, the midpoint sums, the current
 * sub-window's entries, the all-time sketches, categories and slowest spans.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"
#include "sweepcheck.h"

#define NNAMES	 6
#define MAXDEPTH 6
#define NSPANS	 20000
#define MS	 1000000ull

static uint64_t rng = 0x5eed;

static uint64_t below(uint64_t m)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % m;
}

/* NNAMES names @prefix0, @prefix1, ... of the categories FUNCTION, LLM, IO in turn. */
static void make_names(struct rp_names *names, const char *prefix, uint32_t *id)
{
	static const char *cat[] = { "FUNCTION", "LLM", "IO" };
	char nm[16];
	bool full;

	assert_int_equal(rp_names_init(names, 64), 0);
	for (uint32_t i = 0; i < NNAMES; i++) {
		snprintf(nm, sizeof(nm), "%s%u", prefix, i);
		id[i] = rp_names_get(names, nm, cat[i % 3], "x.c", i, &full);
		assert_false(full);
	}
}

static void init(struct rp_analyses *a, const struct rp_names *names)
{
	struct rp_analyses_cfg c = {
		.max_names = 64, .max_sketch_names = 4, .max_counters = 4,
		.win = { .n = 2, .length = { 50 * MS, 200 * MS }, .subwindows = 5,
			 .max_names = 64, .topk = 5, .max_level = 255,
			 .max_window_names = 3 }, /* 3 entries for 6 names: evictions */
	};

	assert_int_equal(rp_analyses_init(a, names, &c), 0);
}

static void assert_same_sketch(const struct rp_sketch *x, const struct rp_sketch *y)
{
	assert_int_equal(x->count, y->count);
	assert_int_equal(x->pos.total, y->pos.total);
	assert_true(x->sum == y->sum && x->sum_c == y->sum_c);
	assert_true(x->min == y->min && x->max == y->max);
	for (int k = 0; k <= 20; k++)
		assert_true(rp_sketch_quantile(x, k / 20.0) == rp_sketch_quantile(y, k / 20.0) ||
			    x->count == 0);
}

static void assert_same_slowest(const struct rp_slowest *x, const struct rp_slowest *y)
{
	assert_int_equal(x->n, y->n);
	for (uint32_t i = 0; i < x->n; i++) {
		assert_int_equal(x->heap[i].dur_ns, y->heap[i].dur_ns);
		assert_int_equal(x->heap[i].name_id, y->heap[i].name_id);
		assert_int_equal(x->heap[i].concurrency, y->heap[i].concurrency);
		assert_int_equal(x->heap[i].concurrency_known, y->heap[i].concurrency_known);
	}
}

static void assert_same(const struct rp_analyses *x, const struct rp_analyses *y)
{
	const struct rp_wslot *cx = x->win.w[0].cs, *cy = y->win.w[0].cs;

	assert_sweep_state_equal(&x->overall, &y->overall);
	assert_sweep_state_equal(&x->roots, &y->roots);
	assert_sweep_state_equal(&x->requests, &y->requests);
	assert_int_equal(x->n_cat, y->n_cat);
	for (uint32_t i = 0; i < x->n_cat; i++) {
		assert_sweep_state_equal(&x->cat[i], &y->cat[i]);
		assert_int_equal(x->cats[i].calls, y->cats[i].calls);
		assert_same_sketch(&x->cats[i].dur, &y->cats[i].dur);
	}
	assert_memory_equal(x->mid, y->mid, x->max_names * sizeof(*x->mid));
	for (uint32_t i = 0; i < x->max_names; i++) {
		assert_int_equal(x->sketch[i] != NULL, y->sketch[i] != NULL);
		if (x->sketch[i] != NULL)
			assert_same_sketch(x->sketch[i], y->sketch[i]);
	}
	assert_int_equal(x->sketch_evicted, y->sketch_evicted);
	assert_int_equal(cx->n, cy->n);
	for (uint32_t i = 0; i < cx->n; i++) {
		assert_int_equal(cx->e[i].name, cy->e[i].name);
		assert_int_equal(cx->e[i].calls, cy->e[i].calls);
		assert_int_equal(cx->e[i].self_ns, cy->e[i].self_ns);
		assert_int_equal(cx->e[i].cum_ns, cy->e[i].cum_ns);
		assert_int_equal(cx->e[i].total_ns, cy->e[i].total_ns);
		assert_same_sketch(&cx->e[i].dur, &cy->e[i].dur);
	}
	assert_int_equal(x->win.cap_hits, y->win.cap_hits);
	assert_int_equal(x->win.evicted, y->win.evicted);
	assert_same_slowest(&cx->slow, &cy->slow);
	assert_same_slowest(&x->slow, &y->slow);
}

/* One track's open frames. */
struct track {
	struct rp_span_info f[MAXDEPTH];
	uint64_t child[MAXDEPTH];
	uint32_t depth;
	bool async;
};

static void test_analyses_close_batch_equals_closes(void **state)
{
	struct rp_span_info pend[MAXDEPTH * 2];
	struct rp_analyses a, b;
	struct track tk[2] = { { .async = false }, { .async = true } };
	struct rp_names names;
	uint32_t id[NNAMES], n_pend = 0, spans = 0, batches = 0;
	uint64_t t = 1000 * MS;

	(void)state;
	make_names(&names, "f", id);
	init(&a, &names);
	init(&b, &names);
	while (spans < NSPANS || tk[0].depth || tk[1].depth) {
		struct track *k = &tk[below(2)];
		bool open = spans < NSPANS && k->depth < MAXDEPTH && (k->depth == 0 || below(2));

		t += below(4) == 0 ? 0 : below(300000); /* equal times too */
		if (open) {
			struct rp_span_info *f = &k->f[k->depth];

			if (n_pend > 0) { /* the batch ends before an open */
				rp_analyses_close_batch(&b, pend, n_pend);
				n_pend = 0;
				batches++;
			}
			*f = (struct rp_span_info){ .start = t, .name = id[below(NNAMES)],
						    .depth = k->depth, .track = k->async ? 2 : 1,
						    .span = k->async ? spans + 1 : 0,
						    .request = k->async && k->depth == 0 };
			f->primitive = true;
			for (uint32_t d = 0; d < k->depth; d++)
				f->primitive &= k->f[d].name != f->name;
			k->child[k->depth] = 0;
			rp_analyses_clock(&a, t);
			rp_analyses_clock(&b, t);
			rp_analyses_open(&a, f->name, f->depth, t, f->request);
			rp_analyses_open(&b, f->name, f->depth, t, f->request);
			k->depth++;
			spans++;
		} else if (k->depth > 0) {
			struct rp_span_info *f = &k->f[--k->depth];

			f->end = t;
			f->subtree_ns = t - f->start;
			f->self_ns = f->subtree_ns - k->child[k->depth];
			if (k->depth > 0)
				k->child[k->depth - 1] += f->subtree_ns;
			if (n_pend > 0 && t >= b.next) { /* nor crosses a sub-window */
				rp_analyses_close_batch(&b, pend, n_pend);
				n_pend = 0;
				batches++;
			}
			rp_analyses_clock(&a, t);
			rp_analyses_clock(&b, t);
			rp_analyses_close(&a, f);
			pend[n_pend++] = *f;
		}
	}
	rp_analyses_close_batch(&b, pend, n_pend);
	assert_true(batches > 1000);
	assert_true(a.win.evicted > 0 && a.overall.hist_seq > 1000);
	assert_same(&a, &b);
	rp_analyses_fini(&a);
	rp_analyses_fini(&b);
	rp_names_free(&names);
}

/* A report's concurrency row against a standalone sweep, through its completed level
 * array (rp_sweep_levels()) and the plain array's quantiles. */
static void assert_conc_row(const struct rp_report_conc *o, const struct rp_sweep *s)
{
	uint64_t *lv = calloc(s->n_alloc, sizeof(*lv));
	uint32_t q[4], max;

	assert_non_null(lv);
	rp_sweep_levels(s, lv);
	rp_sweep_levels_quantiles(lv, s->n_alloc, q, &max);
	assert_int_equal(o->observed_ns, rp_sweep_observed_ns(s));
	assert_int_equal(o->p50, q[0]);
	assert_int_equal(o->p90, q[1]);
	assert_int_equal(o->p95, q[2]);
	assert_int_equal(o->p99, q[3]);
	assert_int_equal(o->max, max);
	assert_int_equal(o->over_cap_ns, s->over_cap_ns);
	assert_int_equal(o->now, rp_sweep_level(s));
	free(lv);
}

/* The analyses' report rows (overall, roots, each category, requests) against the
 * standalone sweeps: the report reads the sweeps' levels through their accessor. */
static void check_conc(const struct rp_analyses *a, const struct rp_names *names,
		       const struct rp_sweep *ov, const struct rp_sweep *rt,
		       const struct rp_sweep *rq, const struct rp_sweep *cs, const uint32_t *id,
		       uint64_t t)
{
	uint32_t map[64];
	struct rp_report r;

	memset(&r, 0, sizeof(r));
	for (uint32_t i = 0; i < 64; i++)
		map[i] = RP_NONE;
	assert_true(names->n <= 64);
	assert_int_equal(rp_analyses_report(a, map, t, &r), 0);
	assert_int_equal(r.n_conc, 2 + a->n_cat);
	assert_conc_row(&r.conc[0], ov);
	assert_conc_row(&r.conc[1], rt);
	for (uint32_t i = 0; i < NNAMES; i++) /* name i is of category i % 3 */
		if (a->cat_of[id[i]] != 0)
			assert_conc_row(&r.conc[2 + a->cat_of[id[i]] - 1], &cs[i % 3]);
	if (a->requests.opened)
		assert_conc_row(&r.requests, rq);
	rp_report_free(&r);
}

/*
 * The analyses step their sweeps as a group (one time test per event, a leaf's
 * midpoint from the overall close's step): against standalone sweeps fed the same
 * spans through the general entry points (overall with the analyses' history, one
 * per category, roots, requests) and midpoint sums from rp_sweep_level_at(), with
 * equal times, late records (times going back) and abandoned spans.
 */
static void test_analyses_sweeps_equal_general(void **state)
{
	struct rp_analyses_cfg cfg = { .max_names = 64, .max_sketch_names = 4, .max_counters = 4,
				       .win = { .topk = 5, .max_level = 255, .max_window_names = 3 } };
	struct rp_sweep ov, rt, rq, cs[3];
	struct rp_mid mid[NNAMES];
	struct rp_analyses a;
	struct track tk[2] = { { .async = false }, { .async = true } };
	struct rp_names names;
	uint32_t id[NNAMES], spans = 0, late = 0;
	uint64_t t = 1000 * MS;

	(void)state;
	memset(mid, 0, sizeof(mid));
	make_names(&names, "f", id);
	assert_int_equal(rp_analyses_init(&a, &names, &cfg), 0); /* no windows: no rotation */
	assert_int_equal(rp_sweep_init(&ov, RP_ANALYSES_MAX_LEVEL, RP_ANALYSES_HISTORY), 0);
	assert_int_equal(rp_sweep_init_levels(&rt, RP_ANALYSES_MAX_LEVEL), 0);
	assert_int_equal(rp_sweep_init_levels(&rq, RP_ANALYSES_MAX_LEVEL), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rp_sweep_init_levels(&cs[i], RP_ANALYSES_MAX_LEVEL), 0);
	while (spans < NSPANS || tk[0].depth || tk[1].depth) {
		struct track *k = &tk[below(2)];
		bool open = spans < NSPANS && k->depth < MAXDEPTH && (k->depth == 0 || below(2));
		uint64_t r = below(100);

		t += r < 25 ? 0 : r < 95 ? below(300000) : 0; /* equal times too */
		if (r >= 95) { /* a late record */
			t -= below(1000);
			late++;
		}
		if (open) {
			struct rp_span_info *f = &k->f[k->depth];
			uint32_t n = (uint32_t)below(NNAMES);

			*f = (struct rp_span_info){ .start = t, .name = id[n], .depth = k->depth,
						    .request = k->async && k->depth == 0 };
			rp_analyses_open(&a, f->name, f->depth, t, f->request);
			rp_sweep_open_hist(&ov, t);
			rp_sweep_open_levels(&cs[n % 3], t);
			if (f->depth == 0)
				rp_sweep_open_levels(&rt, t);
			if (f->request)
				rp_sweep_open_levels(&rq, t);
			k->depth++;
			spans++;
			if (spans % 997 == 0) /* spans open: pending levels */
				check_conc(&a, &names, &ov, &rt, &rq, cs, id, t);
		} else if (k->depth > 0) {
			struct rp_span_info *f = &k->f[--k->depth];
			uint32_t n = 0, lv = 0;

			while (id[n] != f->name)
				n++;
			f->end = t;
			rp_sweep_close_hist(&ov, t);
			rp_sweep_close_levels(&cs[n % 3], t);
			if (f->depth == 0)
				rp_sweep_close_levels(&rt, t);
			if (f->request)
				rp_sweep_close_levels(&rq, t);
			if (below(50) == 0) { /* a drop cut it */
				rp_analyses_abandon(&a, f->name, f->depth, t, f->request);
			} else {
				rp_analyses_close(&a, f);
				if (rp_sweep_level_at(&ov, rp_sweep_midpoint(f->start, t), &lv) >= 0) {
					mid[n].sum += lv;
					mid[n].count++;
				}
			}
		}
	}
	assert_true(late > 100 && ov.backwards > 0 && ov.hist_seq > 1000);
	check_conc(&a, &names, &ov, &rt, &rq, cs, id, t);
	assert_sweep_state_equal(&a.overall, &ov);
	assert_sweep_state_equal(&a.roots, &rt);
	assert_sweep_state_equal(&a.requests, &rq);
	assert_int_equal(a.n_cat, 3);
	for (uint32_t i = 0; i < NNAMES; i++) {
		assert_sweep_state_equal(&a.cat[a.cat_of[id[i]] - 1], &cs[i % 3]);
		assert_int_equal(a.mid[id[i]].sum, mid[i].sum);
		assert_int_equal(a.mid[id[i]].count, mid[i].count);
	}
	rp_sweep_fini(&ov);
	rp_sweep_fini(&rt);
	rp_sweep_fini(&rq);
	for (int i = 0; i < 3; i++)
		rp_sweep_fini(&cs[i]);
	rp_analyses_fini(&a);
	rp_names_free(&names);
}

static int cmp_u64_desc(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return (a < b) - (a > b);
}

/*
 * Without windows every close goes to rp_analyses_close_direct(): its name's sketch
 * (a name's first span the long way, then protected), its category's figures and
 * sketch, and the slowest list. Checked against sketches fed one rp_sketch_add_ns()
 * per span, sums kept here, and the largest durations sorted here (room for every
 * name's sketch: no eviction to model).
 */
static void test_analyses_windowless_equals_direct_adds(void **state)
{
	struct rp_analyses_cfg cfg = { .max_names = 64, .max_sketch_names = NNAMES,
				       .max_counters = 4,
				       .win = { .topk = 5, .max_level = 255, .max_window_names = 3 } };
	struct rp_sketch nk[NNAMES], ck[3];
	uint64_t calls[3] = { 0 }, self[3] = { 0 }, total[3] = { 0 };
	static uint64_t durs[NSPANS];
	struct rp_analyses a;
	struct rp_names names;
	uint32_t id[NNAMES];
	uint64_t t = 1000 * MS;

	(void)state;
	make_names(&names, "g", id);
	for (uint32_t i = 0; i < NNAMES; i++) {
		assert_int_equal(rp_sketch_init(&nk[i], RP_SKETCH_ALPHA), 0);
	}
	for (int c = 0; c < 3; c++)
		assert_int_equal(rp_sketch_init(&ck[c], RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_analyses_init(&a, &names, &cfg), 0);
	assert_int_equal(a.win.n, 0);
	for (uint32_t i = 0; i < NSPANS; i++) {
		/* runs of one name (the head of the list) and switches (moves) */
		uint32_t n = below(3) == 0 ? (i > 0 ? (uint32_t)below(NNAMES) : 0)
					   : (uint32_t)(i * 7 / 5 % NNAMES);
		uint64_t dur = below(4) == 0 ? below(8) : below(5000000); /* zeros too */
		struct rp_span_info sp = { .start = t, .end = t + dur, .name = id[n],
					   .primitive = true };

		sp.self_ns = below(dur + 1);
		sp.subtree_ns = dur;
		rp_analyses_open(&a, sp.name, 0, t, false);
		rp_analyses_close(&a, &sp);
		rp_sketch_add_ns(&nk[n], dur);
		rp_sketch_add_ns(&ck[n % 3], dur);
		calls[n % 3]++;
		self[n % 3] += sp.self_ns;
		total[n % 3] += dur;
		durs[i] = dur;
		t += dur + below(1000);
	}
	assert_int_equal(a.n_cat, 3);
	assert_int_equal(a.sketch_evicted, 0);
	for (uint32_t i = 0; i < NNAMES; i++) {
		struct rp_cat_stats *c = &a.cats[a.cat_of[id[i]] - 1];

		assert_non_null(a.sketch[id[i]]);
		assert_same_sketch(a.sketch[id[i]], &nk[i]);
		assert_int_equal(c->calls, calls[i % 3]);
		assert_int_equal(c->self_ns, self[i % 3]);
		assert_int_equal(c->total_ns, total[i % 3]);
		assert_same_sketch(&c->dur, &ck[i % 3]);
	}
	qsort(durs, NSPANS, sizeof(*durs), cmp_u64_desc);
	assert_int_equal(a.slow.n, 5);
	{
		uint64_t kept[5];

		for (uint32_t i = 0; i < 5; i++)
			kept[i] = a.slow.heap[i].dur_ns;
		qsort(kept, 5, sizeof(*kept), cmp_u64_desc);
		for (uint32_t i = 0; i < 5; i++)
			assert_int_equal(kept[i], durs[i]);
	}
	for (uint32_t i = 0; i < NNAMES; i++)
		rp_sketch_fini(&nk[i]);
	for (int c = 0; c < 3; c++)
		rp_sketch_fini(&ck[c]);
	rp_analyses_fini(&a);
	rp_names_free(&names);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_analyses_close_batch_equals_closes),
		cmocka_unit_test(test_analyses_sweeps_equal_general),
		cmocka_unit_test(test_analyses_windowless_equals_direct_adds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
