// SPDX-License-Identifier: MIT
/*
 * Rolling windows, bottleneck lists, categories and counters against brute force
 * computed here from the generated spans: windows expire exactly on the event clock,
 * quantiles within 1% of the exact order statistic, concurrency exact over the
 * window's range, top-k exact when the names fit and within the stated bound when
 * they do not, slowest spans exact, and a trace fed event by event or through the
 * Chrome importer gives the same windows.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "import_chrome.h"

#define NNAMES	 12
#define MAXSPANS 20000
#define MAXEV	 (2 * MAXSPANS)
#define US	 1000ull
#define BASE	 (1000000ull * US) /* 1 s: sub-window indices are not 0 */

struct span {
	uint32_t name; /* generator's name index */
	uint32_t track, depth;
	uint64_t start, end, self;
	uint32_t end_pos, begin_pos; /* places of its events in the stream */
};

struct ev {
	uint64_t ts;
	uint32_t span;
	bool begin;
};

static struct span sp[MAXSPANS];
static uint32_t n_sp;
static struct ev evs[MAXEV];
static uint32_t n_ev;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(uint64_t m)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % m;
}

static uint32_t add_span(uint32_t name, uint32_t track, uint32_t depth, uint64_t s, uint64_t e)
{
	sp[n_sp] = (struct span){
		.name = name, .track = track, .depth = depth, .start = s, .end = e, .self = e - s
	};
	return n_sp++;
}

/* Roots back to back per track, each with up to two children, some idle gaps. */
static void generate(uint32_t tracks, uint64_t until, uint32_t names)
{
	n_sp = n_ev = 0;
	for (uint32_t tr = 0; tr < tracks; tr++) {
		uint64_t t = BASE + rnd(3000) * US;

		while (t < BASE + until && n_sp + 3 < MAXSPANS) {
			uint64_t dur = (20 + rnd(rnd(8) == 0 ? 30000 : 3000)) * US;
			uint32_t root = add_span((uint32_t)rnd(names), tr, 0, t, t + dur);
			uint64_t c = t + US;

			for (int k = 0; k < 2 && c + 3 * US < t + dur; k++) {
				uint64_t room = (t + dur - c) / US - 1, d = 1 + rnd(room / 2 + 1);
				uint32_t n = (uint32_t)rnd(names);

				if (n == sp[root].name)
					n = (n + 1) % names;
				add_span(n, tr, 1, c, c + d * US);
				sp[root].self -= d * US;
				c += (d + 1) * US;
			}
			t += dur + (rnd(10) == 0 ? rnd(60000) : rnd(500)) * US;
		}
	}
	for (uint32_t i = 0; i < n_sp; i++) {
		evs[n_ev++] = (struct ev){ sp[i].start, i, true };
		evs[n_ev++] = (struct ev){ sp[i].end, i, false };
	}
}

static int cmp_ev(const void *x, const void *y)
{
	const struct ev *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->begin != b->begin)
		return a->begin ? 1 : -1; /* ENDs first, as the importer */
	return a->begin ? (sp[a->span].depth > sp[b->span].depth) -
				  (sp[a->span].depth < sp[b->span].depth)
			: (sp[a->span].depth < sp[b->span].depth) -
				  (sp[a->span].depth > sp[b->span].depth);
}

static void order(void)
{
	qsort(evs, n_ev, sizeof(*evs), cmp_ev);
	for (uint32_t i = 0; i < n_ev; i++) {
		if (evs[i].begin)
			sp[evs[i].span].begin_pos = i;
		else
			sp[evs[i].span].end_pos = i;
	}
}

static void name_str(uint32_t n, char *buf)
{
	snprintf(buf, 16, "fn%02u", n);
}

static const char *cat_str(uint32_t n)
{
	return n % 3 == 0 ? "gpu" : "cpu";
}

static void cfg_small(struct rp_engine_cfg *c)
{
	rp_engine_cfg_default(c);
	c->subwindows = 5;
	c->n_windows = 3;
	c->window_ns[0] = 10000 * US;  /* g = 2 ms */
	c->window_ns[1] = 40000 * US;  /* g = 8 ms */
	c->window_ns[2] = 160000 * US; /* g = 32 ms */
	c->topk = 5;
}

/* Feeds events [from, to) to @e; name ids from @ids. */
static void feed(struct rp_engine *e, uint32_t src, const uint32_t *ids, uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to; i++) {
		const struct span *s = &sp[evs[i].span];
		struct rp_event ev = { .ts = evs[i].ts,
				       .name = ids[s->name],
				       .kind = evs[i].begin ? RP_EV_BEGIN : RP_EV_END };

		rp_engine_event(e, src, s->track + 1, &ev);
	}
}

static void open_feed(const struct rp_engine_cfg *c, struct rp_engine **e, uint32_t *src,
		      uint32_t ids[NNAMES])
{
	char n[16];

	assert_int_equal(rp_engine_open(c, e), 0);
	*src = (uint32_t)rp_engine_add_source(*e, "gen", 1, 0);
	for (uint32_t i = 0; i < NNAMES; i++) {
		name_str(i, n);
		ids[i] = rp_engine_name(*e, *src, n, cat_str(i), "", 0);
	}
}

/* The generator's name of a report row. */
static uint32_t gen_name(const struct rp_report *r, uint32_t fn)
{
	return (uint32_t)atoi(r->fns[fn].name + 2);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void check_quantile(uint64_t got, uint64_t *v, uint32_t n, double q)
{
	uint64_t x = v[1 + (uint64_t)(q * (double)(n - 1)) - 1];

	if (fabs((double)got - (double)x) > 0.01 * (double)x + 1.0)
		fail_msg("q%.2f: %llu, exact %llu", q, (unsigned long long)got,
			 (unsigned long long)x);
}

/* In the window: the END was processed and it ends in [from, to]. */
static bool in_window(const struct span *s, uint32_t processed, uint64_t from, uint64_t to)
{
	return s->end_pos < processed && s->end >= from && s->end <= to;
}

static void check_fns(const struct rp_report *r, const struct rp_report_window *w,
		      uint32_t processed)
{
	static uint64_t d[MAXSPANS];

	for (uint32_t n = 0; n < NNAMES; n++) {
		uint64_t calls = 0, self = 0, cum = 0;
		const struct rp_report_wfn *f = NULL;
		uint32_t m = 0;

		for (uint32_t i = 0; i < n_sp; i++)
			if (sp[i].name == n && in_window(&sp[i], processed, w->t_from, w->t_to)) {
				calls++;
				self += sp[i].self;
				cum += sp[i].end - sp[i].start;
				d[m++] = sp[i].end - sp[i].start;
			}
		for (uint32_t j = 0; j < w->n_fns; j++)
			if (gen_name(r, w->fns[j].fn) == n)
				f = &w->fns[j];
		if (calls == 0) {
			assert_null(f);
			continue;
		}
		assert_non_null(f);
		assert_int_equal(f->calls, calls);
		assert_int_equal(f->self_ns, self);
		assert_int_equal(f->cum_ns, cum);
		qsort(d, m, sizeof(*d), cmp_u64);
		check_quantile(f->p50_ns, d, m, 0.50);
		check_quantile(f->p90_ns, d, m, 0.90);
		check_quantile(f->p95_ns, d, m, 0.95);
		check_quantile(f->p99_ns, d, m, 0.99);
	}
}

/* Time at each level over [lo, hi) of the spans begun before @processed. */
static void brute_levels(uint32_t processed, uint64_t lo, uint64_t hi, bool roots, uint64_t *ns,
			 uint32_t n_levels)
{
	static uint64_t pts[MAXEV];
	uint32_t np = 0;

	memset(ns, 0, n_levels * sizeof(*ns));
	if (lo >= hi)
		return;
	pts[np++] = lo;
	pts[np++] = hi;
	for (uint32_t i = 0; i < n_sp; i++) {
		if (sp[i].begin_pos >= processed)
			continue;
		if (sp[i].start > lo && sp[i].start < hi)
			pts[np++] = sp[i].start;
		if (sp[i].end > lo && sp[i].end < hi)
			pts[np++] = sp[i].end;
	}
	qsort(pts, np, sizeof(*pts), cmp_u64);
	for (uint32_t k = 0; k + 1 < np; k++) {
		uint64_t a = pts[k], b = pts[k + 1];
		uint32_t level = 0;

		if (a == b)
			continue;
		for (uint32_t i = 0; i < n_sp; i++)
			if (sp[i].begin_pos < processed && (!roots || sp[i].depth == 0) &&
			    sp[i].start <= a && (sp[i].end_pos >= processed || sp[i].end > a))
				level++;
		ns[level < n_levels - 1 ? level : n_levels - 1] += b - a;
	}
}

static void check_conc(const struct rp_report_conc *c, const uint64_t *ns, uint32_t n)
{
	uint64_t total = 0;
	double area = 0;

	for (uint32_t i = 0; i < n; i++) {
		total += ns[i];
		area += (double)i * (double)ns[i];
	}
	assert_int_equal(c->observed_ns, total);
	assert_int_equal(c->p50, rp_sweep_levels_percentile(ns, n, 5000));
	assert_int_equal(c->p90, rp_sweep_levels_percentile(ns, n, 9000));
	assert_int_equal(c->p95, rp_sweep_levels_percentile(ns, n, 9500));
	assert_int_equal(c->p99, rp_sweep_levels_percentile(ns, n, 9900));
	assert_int_equal(c->max, rp_sweep_levels_max(ns, n));
	if (total)
		assert_true(fabs((double)c->mean_milli - area * 1000.0 / (double)total) <= 1.0);
}

static void check_window_conc(const struct rp_report_window *w, uint32_t processed)
{
	uint64_t first = UINT64_MAX, first_root = UINT64_MAX, ns[64];

	for (uint32_t i = 0; i < n_sp; i++)
		if (sp[i].begin_pos < processed) {
			first = sp[i].start < first ? sp[i].start : first;
			if (sp[i].depth == 0 && sp[i].start < first_root)
				first_root = sp[i].start;
		}
	assert_int_equal(w->n_conc, 2);
	brute_levels(processed, w->t_from > first ? w->t_from : first, w->t_to, false, ns, 64);
	check_conc(&w->conc[0], ns, 64);
	brute_levels(processed, w->t_from > first_root ? w->t_from : first_root, w->t_to, true, ns,
		     64);
	check_conc(&w->conc[1], ns, 64);
}

/* Weights per generator name in the window: cum, self, count. */
static void brute_weights(uint32_t processed, uint64_t from, uint64_t to, uint64_t wt[3][NNAMES])
{
	memset(wt, 0, 3 * NNAMES * sizeof(uint64_t));
	for (uint32_t i = 0; i < n_sp; i++)
		if (in_window(&sp[i], processed, from, to)) {
			wt[0][sp[i].name] += sp[i].end - sp[i].start;
			wt[1][sp[i].name] += sp[i].self;
			wt[2][sp[i].name]++;
		}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_desc(const void *a, const void *b)
{
	return -cmp_u64(a, b);
}

/* Space-Saving guarantees (topk.h) against the true weights; exact if @exact. */
static void check_top(const struct rp_report *r, const struct rp_report_top *t, uint32_t n,
		      uint64_t bound, const uint64_t *wt, uint32_t k, bool exact)
{
	uint64_t sorted[NNAMES];
	bool listed[NNAMES] = { false };
	uint32_t nz = 0;

	for (uint32_t i = 0; i < NNAMES; i++)
		if (wt[i] > 0)
			sorted[nz++] = wt[i];
	qsort(sorted, nz, sizeof(*sorted), cmp_desc);
	if (exact) {
		assert_int_equal(bound, 0);
		assert_int_equal(n, nz < k ? nz : k);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = gen_name(r, t[i].fn);

		listed[g] = true;
		assert_true(t[i].error <= bound);
		assert_true(wt[g] <= t[i].value && t[i].value - t[i].error <= wt[g]);
		if (i < nz) /* t_i <= c_i <= t_i + F */
			assert_true(sorted[i] <= t[i].value && t[i].value <= sorted[i] + bound);
		if (exact)
			assert_int_equal(t[i].value, sorted[i]);
	}
	for (uint32_t g = 0; g < NNAMES; g++)
		if (!listed[g] && n == k)
			assert_true(wt[g] <= bound || wt[g] <= t[n - 1].value);
}

static int cmp_slow(const void *x, const void *y)
{
	const struct span *a = &sp[*(const uint32_t *)x], *b = &sp[*(const uint32_t *)y];
	uint64_t da = a->end - a->start, db = b->end - b->start;

	if (da != db)
		return da > db ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return (a->track > b->track) - (a->track < b->track);
}

static uint32_t level_at(uint64_t t)
{
	uint32_t level = 0;

	for (uint32_t i = 0; i < n_sp; i++)
		level += sp[i].start <= t && sp[i].end > t;
	return level;
}

static void check_slowest(const struct rp_report *r, const struct rp_report_bottlenecks *b,
			  uint32_t processed, uint64_t from, uint64_t to, uint32_t k)
{
	static uint32_t idx[MAXSPANS];
	uint32_t n = 0;

	for (uint32_t i = 0; i < n_sp; i++)
		if (in_window(&sp[i], processed, from, to))
			idx[n++] = i;
	qsort(idx, n, sizeof(*idx), cmp_slow);
	assert_int_equal(b->n_slowest, n < k ? n : k);
	for (uint32_t i = 0; i < b->n_slowest; i++) {
		const struct span *s = &sp[idx[i]];
		const struct rp_report_span *x = &b->slowest[i];

		assert_int_equal(gen_name(r, x->fn), s->name);
		assert_int_equal(x->start_ns, s->start);
		assert_int_equal(x->dur_ns, s->end - s->start);
		assert_int_equal(x->self_ns, s->self);
		assert_int_equal(x->subtree_ns, s->end - s->start);
		assert_int_equal(x->track, s->track + 1);
		assert_int_equal(x->span_id, 0);
		if (x->concurrency_known)
			assert_int_equal(x->concurrency,
					 level_at(s->start + (s->end - s->start) / 2));
	}
}

static void check_report(const struct rp_report *r, const struct rp_engine_cfg *c,
			 uint32_t processed, bool exact)
{
	uint64_t t_last = evs[processed - 1].ts, wt[3][NNAMES];

	assert_int_equal(r->n_windows, c->n_windows);
	for (uint32_t i = 0; i < r->n_windows; i++) {
		const struct rp_report_window *w = &r->windows[i];
		uint64_t g = c->window_ns[i] / c->subwindows, J = t_last / g;

		assert_int_equal(w->length_ns, c->window_ns[i]);
		assert_int_equal(w->subwindows, c->subwindows);
		assert_int_equal(w->t_to, t_last);
		assert_int_equal(w->t_from, (J - c->subwindows + 1) * g);
		if (exact)
			check_fns(r, w, processed);
		check_window_conc(w, processed);
		brute_weights(processed, w->t_from, w->t_to, wt);
		check_top(r, w->top.by_cum, w->top.n_by_cum, w->top.bound_cum, wt[0], c->topk,
			  exact);
		check_top(r, w->top.by_self, w->top.n_by_self, w->top.bound_self, wt[1], c->topk,
			  exact);
		check_top(r, w->top.by_count, w->top.n_by_count, w->top.bound_count, wt[2], c->topk,
			  exact);
		check_slowest(r, &w->top, processed, w->t_from, w->t_to, c->topk);
	}
	/* all time: exact lists and slowest spans */
	brute_weights(processed, 0, UINT64_MAX, wt);
	check_top(r, r->bottlenecks.by_cum, r->bottlenecks.n_by_cum, r->bottlenecks.bound_cum,
		  wt[0], c->topk, true);
	check_top(r, r->bottlenecks.by_self, r->bottlenecks.n_by_self, r->bottlenecks.bound_self,
		  wt[1], c->topk, true);
	check_top(r, r->bottlenecks.by_count, r->bottlenecks.n_by_count, r->bottlenecks.bound_count,
		  wt[2], c->topk, true);
	check_slowest(r, &r->bottlenecks, processed, 0, UINT64_MAX, c->topk);
}

static void test_window_matches_brute_force(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	uint32_t src, ids[NNAMES], done = 0;
	struct rp_report r;

	(void)state;
	cfg_small(&c);
	generate(5, 400000 * US, NNAMES);
	order();
	open_feed(&c, &e, &src, ids);
	for (uint32_t step = 1; step <= 8; step++) {
		uint32_t to = (uint32_t)((uint64_t)n_ev * step / 8);

		feed(e, src, ids, done, to);
		done = to;
		assert_int_equal(rp_engine_report(e, &r), 0);
		check_report(&r, &c, done, true);
		assert_int_equal(r.anomalies[RP_ANOM_WINDOW_CAP], 0);
		rp_report_free(&r);
	}
	rp_engine_close(e);
}

/* Three names per sub-window for twelve: Space-Saving within its bound, each span
 * past the finest table counted, each eviction too. */
static void test_window_topk_within_bound_past_cap(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	uint32_t src, ids[NNAMES];
	struct rp_report r;
	uint64_t want = 0;

	(void)state;
	cfg_small(&c);
	c.n_windows = 1;
	c.max_window_names = 3;
	generate(5, 200000 * US, NNAMES);
	order();
	open_feed(&c, &e, &src, ids);
	feed(e, src, ids, 0, n_ev);
	assert_int_equal(rp_engine_report(e, &r), 0);
	check_report(&r, &c, n_ev, false);
	/* brute: per finest sub-window, a table of three names; a new name takes the
	 * place of an entry called once (window.h: the once set, taken in turn by a
	 * hand, the new name keeping the victim's place; an entry called twice leaves
	 * it, the last one taking its place), else its span overflows. Both are
	 * window_cap, each eviction window_evicted. */
	{
		uint64_t g = c.window_ns[0] / c.subwindows, cur = UINT64_MAX, evicted = 0;
		uint32_t seen[3], calls[3], once[3], n_seen = 0, n_once = 0, hand = 0;

		for (uint32_t i = 0; i < n_ev; i++) {
			const struct span *s = &sp[evs[i].span];
			uint32_t j;

			if (evs[i].ts / g != cur) {
				cur = evs[i].ts / g;
				n_seen = n_once = hand = 0;
			}
			if (evs[i].begin)
				continue;
			for (j = 0; j < n_seen && seen[j] != s->name; j++)
				;
			if (j == n_seen && n_seen < 3) {
				seen[n_seen] = s->name;
				calls[n_seen] = 0;
				once[n_once++] = n_seen++;
			} else if (j == n_seen && n_once) {
				if (hand >= n_once)
					hand = 0;
				j = once[hand++]; /* stays in the once set */
				want += calls[j];
				evicted++;
				seen[j] = s->name;
				calls[j] = 0;
			} else if (j == n_seen) {
				want++;
				continue;
			}
			if (++calls[j] == 2)
				for (uint32_t o = 0; o < n_once; o++)
					if (once[o] == j) {
						once[o] = once[--n_once];
						break;
					}
		}
		assert_true(evicted > 0);
		assert_int_equal(r.anomalies[RP_ANOM_WINDOW_EVICTED], evicted);
	}
	assert_true(want > 0);
	assert_int_equal(r.anomalies[RP_ANOM_WINDOW_CAP], want);
	rp_report_free(&r);
	rp_engine_close(e);
}

static bool same_conc(const struct rp_report_conc *a, const struct rp_report_conc *b)
{
	return a->observed_ns == b->observed_ns && a->p50 == b->p50 && a->p90 == b->p90 &&
	       a->p95 == b->p95 && a->p99 == b->p99 && a->max == b->max &&
	       a->mean_milli == b->mean_milli;
}

/* Events fed one by one and the same spans through the Chrome importer. */
static void test_window_importer_rolls_like_live(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e, *f;
	uint32_t src, ids[NNAMES];
	struct rp_report a, b;
	char why[RP_WHY_MAX] = "", nm[16];
	size_t cap = (size_t)n_sp * 128 + 64, len = 0;
	char *json;

	(void)state;
	cfg_small(&c);
	generate(4, 300000 * US, NNAMES);
	order();
	cap = (size_t)n_sp * 128 + 64;
	json = malloc(cap);
	assert_non_null(json);
	len += (size_t)snprintf(json + len, cap - len, "[");
	for (uint32_t i = 0; i < n_sp; i++) {
		name_str(sp[i].name, nm);
		len += (size_t)snprintf(
			json + len, cap - len,
			"%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%llu,"
			"\"dur\":%llu,\"pid\":1,\"tid\":%u}",
			i ? "," : "", nm, cat_str(sp[i].name),
			(unsigned long long)(sp[i].start / US),
			(unsigned long long)((sp[i].end - sp[i].start) / US), sp[i].track + 1);
	}
	len += (size_t)snprintf(json + len, cap - len, "]");
	open_feed(&c, &e, &src, ids);
	feed(e, src, ids, 0, n_ev);
	assert_int_equal(rp_engine_open(&c, &f), 0);
	if (rp_import_chrome_buf(f, json, len, "gen.json", why) != 0)
		fail_msg("import: %s", why);
	assert_int_equal(rp_engine_report(e, &a), 0);
	assert_int_equal(rp_engine_report(f, &b), 0);
	check_report(&a, &c, n_ev, true);
	assert_int_equal(a.n_windows, b.n_windows);
	for (uint32_t i = 0; i < a.n_windows; i++) {
		const struct rp_report_window *x = &a.windows[i], *y = &b.windows[i];

		assert_int_equal(x->t_from, y->t_from);
		assert_int_equal(x->t_to, y->t_to);
		assert_int_equal(x->n_fns, y->n_fns);
		for (uint32_t j = 0; j < x->n_fns; j++) {
			assert_string_equal(a.fns[x->fns[j].fn].name, b.fns[y->fns[j].fn].name);
			assert_int_equal(x->fns[j].calls, y->fns[j].calls);
			assert_int_equal(x->fns[j].self_ns, y->fns[j].self_ns);
			assert_int_equal(x->fns[j].cum_ns, y->fns[j].cum_ns);
			assert_int_equal(x->fns[j].p50_ns, y->fns[j].p50_ns);
			assert_int_equal(x->fns[j].p99_ns, y->fns[j].p99_ns);
		}
		assert_true(same_conc(&x->conc[0], &y->conc[0]));
		assert_true(same_conc(&x->conc[1], &y->conc[1]));
		assert_int_equal(x->top.n_slowest, y->top.n_slowest);
		for (uint32_t j = 0; j < x->top.n_slowest; j++) {
			assert_int_equal(x->top.slowest[j].dur_ns, y->top.slowest[j].dur_ns);
			assert_int_equal(x->top.slowest[j].start_ns, y->top.slowest[j].start_ns);
		}
	}
	free(json);
	rp_report_free(&a);
	rp_report_free(&b);
	rp_engine_close(e);
	rp_engine_close(f);
}

/* Categories and counters: quantiles within 1% of the exact order statistics. */
static void test_window_categories_and_counters(void **state)
{
	static uint64_t d[MAXSPANS];
	static int64_t vals[3][30000];
	struct rp_engine_cfg c;
	struct rp_engine *e;
	uint32_t src, ids[NNAMES], cnt[3];
	uint32_t nv[3] = { 0, 0, 0 };
	struct rp_report r;

	(void)state;
	for (int nw = 0; nw < 2; nw++) {
		memset(nv, 0, sizeof(nv));
		cfg_small(&c);
		c.n_windows = nw ? 3 : 0; /* folded at rotation, or added per span */
		generate(3, 100000 * US, NNAMES);
		order();
		open_feed(&c, &e, &src, ids);
		cnt[0] = rp_engine_name(e, src, "queue", "q", "", 0);
		cnt[1] = rp_engine_name(e, src, "delta", "q", "", 0);
		cnt[2] = rp_engine_name(e, src, "mem", "q", "", 0);
		for (uint32_t i = 0; i < n_ev; i++) {
			uint32_t k = i % 3;
			int64_t v = k == 0   ? (int64_t)rnd(100)
				    : k == 1 ? (int64_t)rnd(2000000) - 1000000
					     : (int64_t)(1ull << rnd(50)) + (int64_t)rnd(1000);
			struct rp_event ev = { .ts = evs[i].ts,
					       .name = cnt[k],
					       .kind = RP_EV_COUNTER,
					       .arg = (uint64_t)v };

			feed(e, src, ids, i, i + 1);
			rp_engine_event(e, src, 99, &ev);
			vals[k][nv[k]++] = v;
		}
		assert_int_equal(rp_engine_report(e, &r), 0);
		assert_int_equal(r.n_counters, 3);
		for (uint32_t i = 0; i < r.n_counters; i++) {
			const struct rp_report_counter *o = &r.counters[i];
			uint32_t k = strcmp(o->name, "queue") == 0   ? 0
				     : strcmp(o->name, "delta") == 0 ? 1
								     : 2;
			int64_t mn = INT64_MAX, mx = INT64_MIN;
			static int64_t s[30000];
			const double qs[4] = { 0.5, 0.9, 0.95, 0.99 },
				     got[4] = { o->p50, o->p90, o->p95, o->p99 };

			memcpy(s, vals[k], nv[k] * sizeof(*s));
			for (uint32_t j = 0; j < nv[k]; j++) {
				mn = s[j] < mn ? s[j] : mn;
				mx = s[j] > mx ? s[j] : mx;
			}
			qsort(s, nv[k], sizeof(*s), cmp_i64);
			assert_int_equal(o->samples, nv[k]);
			assert_int_equal(o->min, mn);
			assert_int_equal(o->max, mx);
			assert_int_equal(o->last, vals[k][nv[k] - 1]);
			for (int q = 0; q < 4; q++) {
				double x =
					(double)s[1 + (uint64_t)(qs[q] * (double)(nv[k] - 1)) - 1];

				if (fabs(got[q] - x) > 0.01 * fabs(x) + 1e-9)
					fail_msg("%s q%.2f: %g, exact %g", o->name, qs[q], got[q],
						 x);
			}
		}
		assert_int_equal(r.n_cats, 2);
		for (uint32_t i = 0; i < r.n_cats; i++) {
			const struct rp_report_cat *o = &r.cats[i];
			uint64_t calls = 0, self = 0, total = 0;
			uint32_t m = 0;

			for (uint32_t j = 0; j < n_sp; j++)
				if (strcmp(cat_str(sp[j].name), o->name) == 0) {
					calls++;
					self += sp[j].self;
					total += sp[j].end - sp[j].start;
					d[m++] = sp[j].end - sp[j].start;
				}
			assert_int_equal(o->calls, calls);
			assert_int_equal(o->self_ns, self);
			assert_int_equal(o->total_ns, total);
			assert_int_equal(o->dur.count, calls);
			qsort(d, m, sizeof(*d), cmp_u64);
			check_quantile(o->p50_ns, d, m, 0.50);
			check_quantile(o->p90_ns, d, m, 0.90);
			check_quantile(o->p99_ns, d, m, 0.99);
		}
		/* per function sketches: the buckets' count is the calls */
		for (uint32_t i = 0; i < r.n_fns; i++)
			assert_int_equal(r.fns[i].dur.count, r.fns[i].calls);
		assert_int_equal(r.n_windows, c.n_windows);
		rp_report_free(&r);
		rp_engine_close(e);
	}
}

/* Async spans: exemplars carry the track, the span id, the source, self and subtree. */
static void test_window_async_exemplars(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t src, req, step;
	const struct rp_report_span *x;
	const struct rp_event ev[] = {
		{ .ts = 1000, .kind = RP_EV_ASYNC_BEGIN, .track = 77, .arg = 5 },
		{ .ts = 1100, .kind = RP_EV_ASYNC_BEGIN, .track = 77, .arg = 6 },
		{ .ts = 1400, .kind = RP_EV_ASYNC_END, .track = 77, .arg = 6 },
		{ .ts = 2000, .kind = RP_EV_ASYNC_END, .track = 77, .arg = 5 },
	};

	(void)state;
	cfg_small(&c);
	assert_int_equal(rp_engine_open(&c, &e), 0);
	(void)rp_engine_add_source(e, "other", 2, 0);
	src = (uint32_t)rp_engine_add_source(e, "async", 1, 0);
	req = rp_engine_name(e, src, "request", "req", "", 0);
	step = rp_engine_name(e, src, "step", "req", "", 0);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		struct rp_event v = ev[i];

		v.name = i == 0 || i == 3 ? req : step;
		rp_engine_event(e, src, 0, &v);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.bottlenecks.n_slowest, 2);
	x = &r.bottlenecks.slowest[0];
	assert_string_equal(r.fns[x->fn].name, "request");
	assert_int_equal(x->source, src);
	assert_int_equal(x->track, 77);
	assert_int_equal(x->span_id, 5);
	assert_int_equal(x->start_ns, 1000);
	assert_int_equal(x->dur_ns, 1000);
	assert_int_equal(x->self_ns, 700);
	assert_int_equal(x->subtree_ns, 1000);
	assert_true(x->concurrency_known);
	assert_int_equal(x->concurrency, 1); /* at 1500 only the request is open */
	x = &r.bottlenecks.slowest[1];
	assert_int_equal(x->span_id, 6);
	assert_int_equal(x->concurrency, 2);
	assert_int_equal(r.windows[0].top.n_slowest, 2);
	assert_int_equal(r.windows[0].top.slowest[0].span_id, 5);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Levels above max_window_level count at it, counted as window_level_cap; over_cap_ns
 * and the mean stay exact. */
static void test_window_level_cap(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	uint32_t src, ids[NNAMES];
	struct rp_report r;
	uint64_t ns[64], capped[3], any_over = 0;

	(void)state;
	cfg_small(&c);
	c.max_window_level = 2;
	generate(6, 100000 * US, NNAMES);
	order();
	open_feed(&c, &e, &src, ids);
	feed(e, src, ids, 0, n_ev);
	assert_int_equal(rp_engine_report(e, &r), 0);
	for (uint32_t i = 0; i < r.n_windows; i++) {
		const struct rp_report_window *w = &r.windows[i];
		uint64_t over = 0, first = UINT64_MAX, total = 0;
		double area = 0;

		for (uint32_t j = 0; j < n_sp; j++)
			first = sp[j].start < first ? sp[j].start : first;
		brute_levels(n_ev, w->t_from > first ? w->t_from : first, w->t_to, false, ns, 64);
		memset(capped, 0, sizeof(capped));
		for (uint32_t l = 0; l < 64; l++) {
			capped[l < 2 ? l : 2] += ns[l];
			over += l > 2 ? ns[l] : 0;
			total += ns[l];
			area += (double)l * (double)ns[l];
		}
		any_over += over;
		assert_int_equal(w->conc[0].over_cap_ns, over);
		assert_int_equal(w->conc[0].observed_ns, total);
		assert_int_equal(w->conc[0].p50, rp_sweep_levels_percentile(capped, 3, 5000));
		assert_int_equal(w->conc[0].p99, rp_sweep_levels_percentile(capped, 3, 9900));
		assert_int_equal(w->conc[0].max, rp_sweep_levels_max(capped, 3));
		assert_true(fabs((double)w->conc[0].mean_milli - area * 1000.0 / (double)total) <=
			    1.0);
	}
	assert_true(any_over > 0);
	/* issue 10, repro 8: the cap was hit, so the report says so (it showed 0). */
	assert_true(r.anomalies[RP_ANOM_LEVEL_CAP] > 0);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* A live report as of a later time (rp_engine_report_at()): a window the clock has
 * moved past holds nothing, while the all-time figures stay; as of the last event it
 * is the plain report. */
static void test_window_empties_when_idle(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	uint32_t src, ids[NNAMES];
	struct rp_report r, idle, same;

	(void)state;
	cfg_small(&c);
	generate(6, 100000 * US, NNAMES);
	order();
	open_feed(&c, &e, &src, ids);
	feed(e, src, ids, 0, n_ev);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(rp_engine_report_at(e, r.t_last, &same), 0);
	assert_int_equal(rp_engine_report_at(e, r.t_last + 2 * c.window_ns[c.n_windows - 1], &idle),
			 0);
	assert_true(r.n_windows > 0);
	assert_int_equal(idle.n_windows, r.n_windows);
	for (uint32_t i = 0; i < r.n_windows; i++) {
		assert_true(r.windows[i].n_fns > 0);
		assert_int_equal(same.windows[i].n_fns, r.windows[i].n_fns);
		assert_int_equal(same.windows[i].t_from, r.windows[i].t_from);
		assert_int_equal(idle.windows[i].n_fns, 0);
		assert_int_equal(idle.windows[i].conc[0].observed_ns, 0);
		assert_true(idle.windows[i].t_to > r.t_last);
	}
	assert_int_equal(idle.n_fns, r.n_fns);
	for (uint32_t i = 0; i < r.n_fns; i++)
		assert_int_equal(idle.fns[i].calls, r.fns[i].calls);
	rp_report_free(&r);
	rp_report_free(&same);
	rp_report_free(&idle);
	rp_engine_close(e);
}

static void test_window_cap_counters(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	char n[16];
	uint32_t src;

	(void)state;
	rp_engine_cfg_default(&c);
	c.max_counters = 5;
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "x", 1, 0);
	for (uint32_t i = 0; i < 8; i++) {
		struct rp_event ev = { .ts = 1000 + i, .kind = RP_EV_COUNTER, .arg = i };

		snprintf(n, sizeof(n), "c%u", i);
		ev.name = rp_engine_name(e, src, n, "", "", 0);
		rp_engine_event(e, src, 1, &ev);
		rp_engine_event(e, src, 1, &ev);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.n_counters, 5);
	assert_int_equal(r.anomalies[RP_ANOM_COUNTER_CAP], 6);
	assert_int_equal(r.caps.max_counters, 5);
	assert_true(r.caps.memory_bound > 0);
	rp_report_free(&r);
	rp_engine_close(e);
}

static void test_window_config_checked(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e = NULL;
	char why[160];

	(void)state;
	cfg_small(&c);
	assert_int_equal(rp_engine_cfg_check(&c, why, sizeof(why)), 0);
	c.window_ns[1] = 35000 * US; /* g = 7 ms: not a multiple of 2 ms */
	assert_int_equal(rp_engine_cfg_check(&c, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "35ms"));
	assert_int_equal(rp_engine_open(&c, &e), -EINVAL);
	cfg_small(&c);
	c.window_ns[2] = c.window_ns[1];
	assert_int_equal(rp_engine_cfg_check(&c, why, sizeof(why)), -EINVAL);
	cfg_small(&c);
	c.window_ns[0] = 10000 * US + 3; /* not 5 whole sub-windows */
	assert_int_equal(rp_engine_cfg_check(&c, why, sizeof(why)), -EINVAL);
}

/*
 * A coarser window's full sub-window with no entry called once takes a name folded in
 * with more calls in place of the entry with the fewest (an LFU), never one with
 * fewer: two names a sub-window, two windows (g 2 ms and 8 ms). Finest sub-windows:
 * a x2 and b x2 | c x5 | d x1 | e x1 (the current one, not folded). The coarse one
 * then holds b 2 and c 5 (a's 2 calls evicted, d's 1 overflowing: 3 window_cap, 1
 * eviction); its report adds the finest current sub-window (e).
 */
static void test_window_fold_keeps_busier_names(void **state)
{
	static const char *const nm[] = { "a", "b", "c", "d", "e" };
	static const struct {
		int name, calls;
	} seq[] = { { 0, 2 }, { 1, 2 }, { 2, 5 }, { 3, 1 }, { 4, 1 } };
	static const int sub[] = { 0, 0, 1, 2, 3 };
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t src, id[5];
	uint64_t want[5] = { 0, 2, 5, 0, 1 }, got[5] = { 0 };

	(void)state;
	cfg_small(&c);
	c.n_windows = 2;
	c.max_window_names = 2;
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "s", 1, 0);
	for (int i = 0; i < 5; i++)
		id[i] = rp_engine_name(e, src, nm[i], "", "", 0);
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < seq[i].calls; k++) {
			uint64_t t = BASE + (uint64_t)sub[i] * 2000 * US + (uint64_t)(i * 10 + k) * US;
			struct rp_event b = { .ts = t, .name = id[seq[i].name], .kind = RP_EV_BEGIN };
			struct rp_event x = { .ts = t + 100, .name = id[seq[i].name],
					      .kind = RP_EV_END };

			rp_engine_event(e, src, 1, &b);
			rp_engine_event(e, src, 1, &x);
		}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.n_windows, 2);
	for (uint32_t i = 0; i < r.windows[1].n_fns; i++) {
		const struct rp_report_wfn *q = &r.windows[1].fns[i];

		for (int n = 0; n < 5; n++)
			if (strcmp(r.fns[q->fn].name, nm[n]) == 0)
				got[n] = q->calls;
	}
	for (int n = 0; n < 5; n++)
		assert_int_equal(got[n], want[n]);
	assert_int_equal(r.anomalies[RP_ANOM_WINDOW_EVICTED], 1);
	assert_int_equal(r.anomalies[RP_ANOM_WINDOW_CAP], 2 + 1);
	rp_report_free(&r);
	rp_engine_close(e);
}

/*
 * A hot name first seen after the finest table filled takes the place of a quieter
 * entry once its overflowed calls reach a power of two that outnumbers that entry
 * (window.h): four names a sub-window, p0..p3 called 2, 3, 3, 3 times, then h 100
 * times. h overflows 4 times (at 2, 2 < 2 is false; at 4, p0's 2 calls are fewer),
 * then takes p0's place: 96 calls exact in every window, 4 + 2 window_cap, 1 eviction.
 */
static void test_window_hot_late_name_gets_in(void **state)
{
	static const char *const nm[] = { "p0", "p1", "p2", "p3", "h" };
	static const int calls[] = { 2, 3, 3, 3, 100 };
	const uint64_t want[] = { 0, 3, 3, 3, 96 };
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t src, id[5];
	uint64_t t = BASE;

	(void)state;
	cfg_small(&c);
	c.max_window_names = 4;
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "s", 1, 0);
	for (int i = 0; i < 5; i++)
		id[i] = rp_engine_name(e, src, nm[i], "", "", 0);
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < calls[i]; k++, t += 10) {
			struct rp_event b = { .ts = t, .name = id[i], .kind = RP_EV_BEGIN };
			struct rp_event x = { .ts = t + 5, .name = id[i], .kind = RP_EV_END };

			rp_engine_event(e, src, 1, &b);
			rp_engine_event(e, src, 1, &x);
		}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.anomalies[RP_ANOM_WINDOW_EVICTED], 1);
	assert_int_equal(r.anomalies[RP_ANOM_WINDOW_CAP], 4 + 2);
	assert_true(r.n_windows > 0);
	for (uint32_t w = 0; w < r.n_windows; w++) {
		uint64_t got[5] = { 0 };

		for (uint32_t i = 0; i < r.windows[w].n_fns; i++)
			for (int n = 0; n < 5; n++)
				if (strcmp(r.fns[r.windows[w].fns[i].fn].name, nm[n]) == 0)
					got[n] = r.windows[w].fns[i].calls;
		for (int n = 0; n < 5; n++)
			assert_int_equal(got[n], want[n]);
	}
	rp_report_free(&r);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_matches_brute_force),
		cmocka_unit_test(test_window_topk_within_bound_past_cap),
		cmocka_unit_test(test_window_importer_rolls_like_live),
		cmocka_unit_test(test_window_categories_and_counters),
		cmocka_unit_test(test_window_async_exemplars),
		cmocka_unit_test(test_window_level_cap),
		cmocka_unit_test(test_window_empties_when_idle),
		cmocka_unit_test(test_window_cap_counters),
		cmocka_unit_test(test_window_config_checked),
		cmocka_unit_test(test_window_fold_keeps_busier_names),
		cmocka_unit_test(test_window_hot_late_name_gets_in),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
