// SPDX-License-Identifier: MIT
/*
 * The analyses' batch entry point against the one it batches: random nested spans
 * on two tracks (a thread and an async request track, names in three categories,
 * sub-windows that rotate) fed to one set of analyses close by close and to another
 * with each run of closes in one rp_analyses_close_batch() call leave the same
 * state: every sweep's level array and history, the midpoint sums, the current
 * sub-window's entries, the all-time sketches, categories and slowest spans.
 * The durations the finest sub-window's entries hold back (window.h) are invisible:
 * reports taken at random times equal those of analyses that never hold any back,
 * and every name's all-time sketch equals one fed each duration directly.
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

static void assert_same(struct rp_analyses *x, struct rp_analyses *y)
{
	const struct rp_wslot *cx = x->win.w[0].cs, *cy = y->win.w[0].cs;

	rp_wslot_flush(x->win.w[0].cs); /* the durations held back, into the sketches */
	rp_wslot_flush(y->win.w[0].cs);

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
	static const char *cat[] = { "FUNCTION", "LLM", "IO" };
	struct rp_span_info pend[MAXDEPTH * 2];
	struct rp_analyses a, b;
	struct track tk[2] = { { .async = false }, { .async = true } };
	struct rp_names names;
	uint32_t id[NNAMES], n_pend = 0, spans = 0, batches = 0;
	uint64_t t = 1000 * MS;
	bool full;
	char nm[16];

	(void)state;
	assert_int_equal(rp_names_init(&names, 64), 0);
	for (uint32_t i = 0; i < NNAMES; i++) {
		snprintf(nm, sizeof(nm), "f%u", i);
		id[i] = rp_names_get(&names, nm, cat[i % 3], "x.c", i, &full);
		assert_false(full);
	}
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
	static const char *cat[] = { "FUNCTION", "LLM", "IO" };
	struct rp_analyses_cfg cfg = { .max_names = 64, .max_sketch_names = 4, .max_counters = 4,
				       .win = { .topk = 5, .max_level = 255, .max_window_names = 3 } };
	struct rp_sweep ov, rt, rq, cs[3];
	struct rp_mid mid[NNAMES];
	struct rp_analyses a;
	struct track tk[2] = { { .async = false }, { .async = true } };
	struct rp_names names;
	uint32_t id[NNAMES], spans = 0, late = 0;
	uint64_t t = 1000 * MS;
	bool full;
	char nm[16];

	(void)state;
	memset(mid, 0, sizeof(mid));
	assert_int_equal(rp_names_init(&names, 64), 0);
	for (uint32_t i = 0; i < NNAMES; i++) {
		snprintf(nm, sizeof(nm), "f%u", i);
		id[i] = rp_names_get(&names, nm, cat[i % 3], "x.c", i, &full);
		assert_false(full);
	}
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

/* Two report sketches alike: the summary and every bucket. */
static void assert_same_rsketch(const struct rp_report_sketch *x, const struct rp_report_sketch *y)
{
	assert_int_equal(x->count, y->count);
	assert_int_equal(x->zero, y->zero);
	assert_int_equal(x->dropped, y->dropped);
	assert_true(x->min == y->min && x->max == y->max && x->sum == y->sum);
	assert_int_equal(x->n_pos, y->n_pos);
	assert_int_equal(x->n_neg, y->n_neg);
	if (x->n_pos > 0) {
		assert_int_equal(x->pos_lo, y->pos_lo);
		assert_memory_equal(x->pos, y->pos, x->n_pos * sizeof(*x->pos));
	}
}

/* The analyses' part of a report: per name, category and window. */
static void report_of(struct rp_analyses *a, const uint32_t *map, uint64_t t, struct rp_report *r)
{
	memset(r, 0, sizeof(*r));
	r->fns = calloc(NNAMES, sizeof(*r->fns));
	assert_non_null(r->fns);
	r->n_fns = NNAMES;
	assert_int_equal(rp_analyses_report(a, map, t, r), 0);
}

static void assert_same_reports(const struct rp_report *x, const struct rp_report *y)
{
	for (uint32_t i = 0; i < NNAMES; i++) {
		assert_int_equal(x->fns[i].p50_ns, y->fns[i].p50_ns);
		assert_int_equal(x->fns[i].p99_ns, y->fns[i].p99_ns);
		assert_same_rsketch(&x->fns[i].dur, &y->fns[i].dur);
	}
	assert_int_equal(x->n_cats, y->n_cats);
	for (uint32_t i = 0; i < x->n_cats; i++) {
		assert_int_equal(x->cats[i].calls, y->cats[i].calls);
		assert_int_equal(x->cats[i].p90_ns, y->cats[i].p90_ns);
		assert_same_rsketch(&x->cats[i].dur, &y->cats[i].dur);
	}
	assert_int_equal(x->n_windows, y->n_windows);
	for (uint32_t w = 0; w < x->n_windows; w++) {
		const struct rp_report_window *a = &x->windows[w], *b = &y->windows[w];

		assert_int_equal(a->n_fns, b->n_fns);
		for (uint32_t i = 0; i < a->n_fns; i++) {
			assert_int_equal(a->fns[i].fn, b->fns[i].fn);
			assert_int_equal(a->fns[i].calls, b->fns[i].calls);
			assert_int_equal(a->fns[i].p95_ns, b->fns[i].p95_ns);
			assert_same_rsketch(&a->fns[i].dur, &b->fns[i].dur);
		}
	}
}

/*
 * Spans of six names on one track (nested, some closing in the same ns, long ones
 * past the sketch's window, a few past 2^53 ns in total), with request milestones
 * and summaries between them, into analyses @a and into @b, whose finest sub-window
 * is flushed after every step (it never holds a duration back). Reports taken at
 * random times, with sub-windows rotating and entries evicted, are the same, and
 * each name's all-time sketch is the one fed every duration of it in order (its
 * sum too while that is exact: merged, an inexact sum may round otherwise).
 */
static void test_analyses_held_durations_invisible(void **state)
{
	static const char *cat[] = { "FUNCTION", "LLM", "IO" };
	struct rp_analyses a, b;
	struct rp_names names;
	struct rp_sketch oracle[NNAMES];
	struct rp_span_info f[MAXDEPTH];
	uint32_t id[NNAMES], map[64], depth = 0, reports = 0;
	uint64_t t = UINT64_C(1) << 51; /* room for spans 2^50 ns long */
	bool full;
	char nm[16];
	struct rp_analyses_cfg c = {
		.max_names = 64, .max_sketch_names = 64, .max_counters = 4,
		.win = { .n = 2, .length = { 50 * MS, 200 * MS }, .subwindows = 5,
			 .max_names = 64, .topk = 5, .max_level = 255,
			 .max_window_names = 4 }, /* 4 entries for 6 names: evictions */
	};

	(void)state;
	assert_int_equal(rp_names_init(&names, 64), 0);
	for (uint32_t i = 0; i < 64; i++)
		map[i] = RP_NONE;
	for (uint32_t i = 0; i < NNAMES; i++) {
		snprintf(nm, sizeof(nm), "g%u", i);
		id[i] = rp_names_get(&names, nm, cat[i % 3], "x.c", i, &full);
		assert_false(full);
		map[id[i]] = i;
		assert_int_equal(rp_sketch_init(&oracle[i], RP_SKETCH_ALPHA), 0);
	}
	assert_int_equal(rp_analyses_init(&a, &names, &c), 0);
	assert_int_equal(rp_analyses_init(&b, &names, &c), 0);
	for (uint32_t step = 0; step < 60000; step++) {
		uint32_t k = (uint32_t)below(NNAMES), r = (uint32_t)below(100);

		t += below(3) == 0 ? 0 : below(below(50) == 0 ? 20 * MS : 200000);
		rp_analyses_clock(&a, t);
		rp_analyses_clock(&b, t);
		if (r < 2) { /* a milestone: a duration, one call */
			uint64_t d = 1 + below(1000000);

			rp_analyses_mark(&a, id[k], d);
			rp_analyses_mark(&b, id[k], d);
			rp_sketch_add_ns(&oracle[k], d);
		} else if (r < 3 && depth == 0) { /* a summary of a few calls */
			uint64_t len[2] = { 1 + below(5000), 1 + below(5000000) },
				 calls[2] = { 1 + below(3), 1 + below(2) };
			struct rp_sum_call sc = { .name = id[k], .calls = calls[0] + calls[1],
						  .total_ns = len[0] * calls[0] + len[1] * calls[1],
						  .primitive = true, .sketched = true };

			rp_analyses_summary(&a, &sc, len, calls, 2);
			rp_analyses_summary(&b, &sc, len, calls, 2);
			for (int i = 0; i < 2; i++)
				rp_sketch_add_n(&oracle[k], (double)len[i], calls[i]);
		} else if (depth < MAXDEPTH && (depth == 0 || r < 55)) {
			f[depth] = (struct rp_span_info){ .start = t, .name = id[k], .depth = depth,
							  .track = 1, .primitive = true };
			rp_analyses_open(&a, id[k], depth, t, false);
			rp_analyses_open(&b, id[k], depth, t, false);
			depth++;
		} else if (depth > 0) {
			struct rp_span_info *s = &f[--depth];

			if (below(500) == 0)
				s->start = t - (UINT64_C(1) << 50) - below(1000); /* past 2^53 in all */
			s->end = t;
			s->self_ns = s->subtree_ns = t - s->start;
			rp_analyses_close(&a, s);
			rp_analyses_close(&b, s);
			rp_sketch_add_ns(&oracle[map[s->name]], t - s->start);
		}
		rp_wslot_flush(b.win.w[0].cs);
		if (below(400) == 0) {
			struct rp_report ra, rb;
			struct rp_report_sketch o;

			report_of(&a, map, t, &ra);
			report_of(&b, map, t, &rb);
			assert_same_reports(&ra, &rb);
			for (uint32_t i = 0; i < NNAMES; i++) {
				assert_int_equal(rp_report_sketch_from(&o, &oracle[i]), 0);
				if (!oracle[i].sum_int) /* merged in another order */
					o.sum = ra.fns[i].dur.sum;
				assert_same_rsketch(&ra.fns[i].dur, &o);
				rp_report_sketch_free(&o);
			}
			rp_report_free(&ra);
			rp_report_free(&rb);
			reports++;
		}
	}
	assert_true(reports > 100);
	assert_true(a.win.evicted > 0);
	for (uint32_t i = 0; i < NNAMES; i++) /* held back at the end, reported here */
		assert_true(rp_sketch_count(&oracle[i]) > 1000);
	rp_analyses_fini(&a);
	rp_analyses_fini(&b);
	for (uint32_t i = 0; i < NNAMES; i++)
		rp_sketch_fini(&oracle[i]);
	rp_names_free(&names);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_analyses_close_batch_equals_closes),
		cmocka_unit_test(test_analyses_sweeps_equal_general),
		cmocka_unit_test(test_analyses_held_durations_invisible),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
