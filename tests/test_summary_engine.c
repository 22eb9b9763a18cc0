// SPDX-License-Identifier: MIT
/*
 * The engine's side of summaries (docs/summaries.md), fed records directly: a
 * thread's summaries against the same calls sent as spans (the oracle: the engine's
 * own figures for them), function rows, edges and CCT node for node; RP_SPAN_SELF;
 * the summaries' histogram buckets (RP_SUMDATA_HIST) against the spans' percentiles,
 * rolling windows and categories; and every malformed summary counted as bad_event,
 * the statistics untouched.
 */
#include <string.h>

#include "engine.h"
#include "support.h"

enum { MAIN, F, G, H, NN };
static const char *const names[NN] = { "main", "f", "g", "h" };
static uint32_t ids[NN];

static struct rp_engine *open_engine(void)
{
	struct rp_engine *e;

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "s", 1, 0), 0);
	for (int i = 0; i < NN; i++)
		ids[i] = rp_engine_name(e, 0, names[i], "", "", 0);
	return e;
}

static void ev(struct rp_engine *e, uint64_t ts, uint8_t kind, uint8_t flags, int name,
	       uint16_t depth, uint64_t track, uint64_t arg)
{
	struct rp_event x = { .ts = ts, .name = name < 0 ? 0 : ids[name], .kind = kind,
			      .flags = flags, .depth = depth, .track = track, .arg = arg };

	rp_engine_event(e, 0, 1, &x);
}

static void summary(struct rp_engine *e, uint64_t ts, int name, uint16_t root, uint64_t level,
		    uint64_t calls, uint64_t total, uint64_t self, uint64_t min, uint64_t max)
{
	ev(e, ts, RP_EV_SUMMARY, 2, name, root, level, calls);
	ev(e, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_TIMES, -1, 0, total, self);
	ev(e, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_RANGE, -1, 0, min, max);
}

/* The same with its histogram: @n buckets of @len[i] ns and @cnt[i] calls. */
static void summary_hist(struct rp_engine *e, uint64_t ts, int name, uint16_t root,
			 uint64_t level, uint64_t calls, uint64_t total, uint64_t self,
			 uint64_t min, uint64_t max, int n, const uint64_t *len, const uint64_t *cnt)
{
	ev(e, ts, RP_EV_SUMMARY, (uint8_t)(2 + n), name, root, level, calls);
	ev(e, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_TIMES, -1, 0, total, self);
	ev(e, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_RANGE, -1, 0, min, max);
	for (int i = 0; i < n; i++)
		ev(e, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_HIST, -1, 0, len[i], cnt[i]);
}

#define BEGIN(ts, n, d)	ev(e, ts, RP_EV_BEGIN, RP_SPAN_DEPTH, n, d, 0, 0)
#define END(ts, n, d)	ev(e, ts, RP_EV_END, RP_SPAN_DEPTH, n, d, 0, 0)

/*
 * main [0, 1000) calls f three times: [10, 20) with g [12, 15), [30, 45) with g [31, 33)
 * and g [40, 44), [100, 104) with f [101, 103) (recursion: not primitive), then h [900,
 * 990) as a span. Sent once as spans, once with f's calls summarized under main.
 */
static void spans(struct rp_engine *e)
{
	BEGIN(0, MAIN, 0);
	BEGIN(10, F, 1); BEGIN(12, G, 2); END(15, G, 2); END(20, F, 1);
	BEGIN(30, F, 1); BEGIN(31, G, 2); END(33, G, 2); BEGIN(40, G, 2); END(44, G, 2);
	END(45, F, 1);
	BEGIN(100, F, 1); BEGIN(101, F, 2); END(103, F, 2); END(104, F, 1);
	BEGIN(900, H, 1); END(990, H, 1);
	END(1000, MAIN, 0);
}

static void summarized(struct rp_engine *e)
{
	BEGIN(0, MAIN, 0);
	BEGIN(900, H, 1);
	/* what main's short calls were, as the producer folds them (f under main, g and f
	 * under f), written before the long call's BEGIN's successor, at its END */
	END(990, H, 1);
	summary(e, 1000, F, 0, 0, 3, 10 + 15 + 4, 10 - 3 + 15 - 6 + 4 - 2, 4, 15);
	summary(e, 1000, G, 0, 1, 3, 3 + 2 + 4, 9, 2, 4);
	summary(e, 1000, F, 0, 1, 1, 2, 2, 2, 2);
	/* main's self: 1000 - 29 (f) - 90 (h), measured by the producer */
	ev(e, 1000, RP_EV_END, RP_SPAN_DEPTH | RP_SPAN_SELF, MAIN, 0, 0, 1000 - 29 - 90);
}

static void test_summary_engine_matches_spans(void **state)
{
	struct rp_engine *a = open_engine(), *b;
	struct rp_stats *x, *y;

	(void)state;
	spans(a);
	b = open_engine();
	summarized(b);
	x = &a->stats;
	y = &b->stats;
	for (int i = 0; i < NN; i++) {
		const struct rp_fn_stats *p = &x->fn[ids[i]], *q = &y->fn[ids[i]];

		assert_int_equal(q->calls, p->calls);
		assert_int_equal(q->primitive_calls, p->primitive_calls);
		assert_int_equal(q->self_ns, p->self_ns);
		assert_int_equal(q->cum_ns, p->cum_ns);
		assert_int_equal(q->total_ns, p->total_ns);
		assert_int_equal(rp_fn_min_ns(q), rp_fn_min_ns(p));
		assert_int_equal(q->max_ns, p->max_ns);
	}
	assert_int_equal(x->fn[ids[F]].calls, 4);
	assert_int_equal(x->fn[ids[F]].primitive_calls, 3);
	assert_int_equal(y->n_edges, x->n_edges);
	for (uint32_t i = 0; i < x->n_edges; i++) {
		const struct rp_edge_stats *p = &x->edges[i];
		const struct rp_edge_stats *q = rp_stats_edge(y, p->caller, p->callee);

		assert_non_null(q);
		assert_int_equal(q->calls, p->calls);
		assert_int_equal(q->primitive_calls, p->primitive_calls);
		assert_int_equal(q->self_ns, p->self_ns);
		assert_int_equal(q->cum_ns, p->cum_ns);
	}
	/* The CCT: the same nodes (parent's name, name) with the same figures. */
	assert_int_equal(y->n_nodes, x->n_nodes);
	for (uint32_t i = 1; i < x->n_nodes; i++) {
		const struct rp_cct_node *p = &x->nodes[i];
		bool found = false;

		for (uint32_t j = 1; j < y->n_nodes && !found; j++) {
			const struct rp_cct_node *q = &y->nodes[j];

			if (q->name != p->name ||
			    y->nodes[q->parent].name != x->nodes[p->parent].name ||
			    (q->parent == 0) != (p->parent == 0))
				continue;
			found = true;
			assert_int_equal(q->calls, p->calls);
			assert_int_equal(q->self_ns, p->self_ns);
			assert_int_equal(q->total_ns, p->total_ns);
		}
		assert_true(found);
	}
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		assert_int_equal(b->src[0].counts.anomalies[k], 0);
	rp_engine_close(a);
	rp_engine_close(b);
}

/* summarized() with every call's length in a bucket of its own (@whole), or f's
 * buckets one call short (a producer's partial histogram: none used). */
static void summarized_hist(struct rp_engine *e, bool whole)
{
	static const uint64_t f_len[] = { 4, 10, 15 }, f_cnt[] = { 1, 1, 1 };
	static const uint64_t g_len[] = { 2, 3, 4 }, g_cnt[] = { 1, 1, 1 };
	static const uint64_t r_len[] = { 2 }, r_cnt[] = { 1 };

	BEGIN(0, MAIN, 0);
	BEGIN(900, H, 1);
	END(990, H, 1);
	summary_hist(e, 1000, F, 0, 0, 3, 10 + 15 + 4, 10 - 3 + 15 - 6 + 4 - 2, 4, 15,
		     whole ? 3 : 2, f_len, f_cnt);
	summary_hist(e, 1000, G, 0, 1, 3, 3 + 2 + 4, 9, 2, 4, 3, g_len, g_cnt);
	summary_hist(e, 1000, F, 0, 1, 1, 2, 2, 2, 2, 1, r_len, r_cnt);
	ev(e, 1000, RP_EV_END, RP_SPAN_DEPTH | RP_SPAN_SELF, MAIN, 0, 0, 1000 - 29 - 90);
}

static const struct rp_report_fn *report_fn(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

/* Histograms reach the sketches, windows and categories as the spans' lengths do. */
static void test_summary_engine_histograms(void **state)
{
	struct rp_engine *a = open_engine(), *b = open_engine(), *c = open_engine();
	struct rp_report ra, rb, rc;

	(void)state;
	spans(a);
	summarized_hist(b, true);
	summarized_hist(c, false);
	assert_int_equal(rp_engine_report(a, &ra), 0);
	assert_int_equal(rp_engine_report(b, &rb), 0);
	assert_int_equal(rp_engine_report(c, &rc), 0);
	for (int i = 0; i < NN; i++) {
		const struct rp_report_fn *p = report_fn(&ra, names[i]);
		const struct rp_report_fn *q = report_fn(&rb, names[i]);

		assert_non_null(p);
		assert_non_null(q);
		assert_int_equal(q->p50_ns, p->p50_ns);
		assert_int_equal(q->p90_ns, p->p90_ns);
		assert_int_equal(q->p95_ns, p->p95_ns);
		assert_int_equal(q->p99_ns, p->p99_ns);
	}
	assert_true(report_fn(&rb, "f")->p50_ns > 0);
	/* every window's rows and the categories: the spans' figures */
	assert_int_equal(rb.n_windows, ra.n_windows);
	assert_true(ra.n_windows > 0);
	for (uint32_t w = 0; w < ra.n_windows; w++) {
		assert_int_equal(rb.windows[w].n_fns, ra.windows[w].n_fns);
		for (uint32_t i = 0; i < ra.windows[w].n_fns; i++) {
			const struct rp_report_wfn *p = &ra.windows[w].fns[i];
			const struct rp_report_wfn *q = &rb.windows[w].fns[i];

			assert_string_equal(rb.fns[q->fn].name, ra.fns[p->fn].name);
			assert_int_equal(q->calls, p->calls);
			assert_int_equal(q->self_ns, p->self_ns);
			assert_int_equal(q->cum_ns, p->cum_ns);
			assert_int_equal(q->p50_ns, p->p50_ns);
			assert_int_equal(q->p99_ns, p->p99_ns);
		}
	}
	assert_int_equal(rb.n_cats, ra.n_cats);
	for (uint32_t i = 0; i < ra.n_cats; i++) {
		assert_int_equal(rb.cats[i].calls, ra.cats[i].calls);
		assert_int_equal(rb.cats[i].self_ns, ra.cats[i].self_ns);
		assert_int_equal(rb.cats[i].p50_ns, ra.cats[i].p50_ns);
		assert_int_equal(rb.cats[i].p99_ns, ra.cats[i].p99_ns);
	}
	/* a partial histogram: f's percentiles absent (0), g's there */
	assert_int_equal(report_fn(&rc, "f")->p50_ns, 0);
	assert_int_equal(report_fn(&rc, "f")->p99_ns, 0);
	assert_int_equal(report_fn(&rc, "g")->p50_ns, report_fn(&ra, "g")->p50_ns);
	assert_int_equal(report_fn(&rc, "f")->calls, 4);
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		assert_int_equal(b->src[0].counts.anomalies[k], 0);
	rp_report_free(&ra);
	rp_report_free(&rb);
	rp_report_free(&rc);
	rp_engine_close(a);
	rp_engine_close(b);
	rp_engine_close(c);
}

/* Each malformed input: one bad_event, no figure of it anywhere. */
static void test_summary_engine_rejects_malformed(void **state)
{
	struct rp_engine *e = open_engine();
	uint64_t *bad = &e->src[0].counts.anomalies[RP_ANOM_BAD_EVENT];

	(void)state;
	BEGIN(0, MAIN, 0);
	ev(e, 1, RP_EV_SUMMARY_DATA, RP_SUMDATA_TIMES, -1, 0, 5, 5); /* no summary */
	assert_int_equal(*bad, 1);
	summary(e, 2, F, 3, 0, 1, 5, 5, 5, 5); /* root level 3: not open */
	assert_int_equal(*bad, 2);
	summary(e, 3, F, 0, 2, 1, 5, 5, 5, 5); /* tree level 2 with no level 1 */
	assert_int_equal(*bad, 3);
	summary(e, 4, F, 0, 0, 1, 5, 6, 5, 5); /* self above total */
	assert_int_equal(*bad, 4);
	summary(e, 5, F, 0, 0, 2, 5, 5, 4, 3); /* min above max */
	assert_int_equal(*bad, 5);
	ev(e, 6, RP_EV_SUMMARY, 2, F, 0, 0, 1); /* its data never comes */
	ev(e, 6, RP_EV_SUMMARY, 2, F, 0, 0, 1);
	assert_int_equal(*bad, 6);
	ev(e, 6, RP_EV_SUMMARY_DATA, RP_SUMDATA_TIMES, -1, 0, 5, 5);
	ev(e, 6, RP_EV_SUMMARY_DATA, RP_SUMDATA_TIMES, -1, 0, 5, 5); /* no range */
	assert_int_equal(*bad, 7);
	summary(e, 7, G, RP_SUMMARY_TOP, 1, 1, 5, 5, 5, 5); /* level 1 under a bad one */
	assert_int_equal(*bad, 8);
	ev(e, 8, RP_EV_SUMMARY, 0, F, 0, 0, 1); /* no data announced */
	assert_int_equal(*bad, 9);
	assert_int_equal(e->stats.fn[ids[F]].calls, 0);
	assert_int_equal(e->stats.fn[ids[G]].calls, 0);
	/* and a good one still goes in */
	summary(e, 9, F, 0, 0, 2, 6, 6, 3, 3);
	assert_int_equal(*bad, 9);
	assert_int_equal(e->stats.fn[ids[F]].calls, 2);
	summary(e, 9, G, RP_SUMMARY_TOP, 0, 1, 1, 1, 1, 1); /* at the track's root */
	assert_int_equal(e->stats.fn[ids[G]].calls, 1);
	assert_int_equal(*bad, 9);
	rp_engine_close(e);
}

/* One event of name id @id (not one of names[]). */
static void ev_id(struct rp_engine *e, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t id,
		  uint16_t depth, uint64_t track, uint64_t arg)
{
	struct rp_event x = { .ts = ts, .name = id, .kind = kind, .flags = flags,
			      .depth = depth, .track = track, .arg = arg };

	rp_engine_event(e, 0, 1, &x);
}

/*
 * main calls g, h, i once each, then f 1000 times (1 ns each: spans, or one summary
 * with its histogram when @sum), then j and k once each. @x: the ids of g h i j k.
 */
static void cap_run(struct rp_engine *e, bool sum, const uint32_t *x)
{
	static const uint64_t len[] = { 1 }, cnt[] = { 1000 };

	BEGIN(0, MAIN, 0);
	for (uint32_t i = 0; i < 3; i++) {
		ev_id(e, 1 + 2 * i, RP_EV_BEGIN, RP_SPAN_DEPTH, x[i], 1, 0, 0);
		ev_id(e, 2 + 2 * i, RP_EV_END, RP_SPAN_DEPTH, x[i], 1, 0, 0);
	}
	if (sum) {
		summary_hist(e, 2010, F, 0, 0, 1000, 1000, 1000, 1, 1, 1, len, cnt);
	} else {
		for (uint64_t k = 0; k < 1000; k++) {
			BEGIN(10 + 2 * k, F, 1);
			END(11 + 2 * k, F, 1);
		}
	}
	for (uint32_t i = 3; i < 5; i++) {
		ev_id(e, 3000 + 2 * i, RP_EV_BEGIN, RP_SPAN_DEPTH, x[i], 1, 0, 0);
		ev_id(e, 3001 + 2 * i, RP_EV_END, RP_SPAN_DEPTH, x[i], 1, 0, 0);
	}
	ev(e, 4000, RP_EV_END, RP_SPAN_DEPTH | RP_SPAN_SELF, MAIN, 0, 0, 4000 - 5 - 1000);
}

/*
 * A summary takes its name's entry of the sub-window as the same calls' spans do, and
 * keeps it: with 4 names a sub-window, f's 1000 calls, summarized after g, h and i took
 * three entries, are no victim for the names after them (an entry called once is).
 * The oracle, the same calls as spans: window_cap and window_evicted equal (i, j and k
 * evicted in turn), and so is every window row.
 */
static void test_summary_engine_window_cap(void **state)
{
	static const char *const xn[] = { "g2", "h2", "i2", "j2", "k2" };
	struct rp_engine *eng[2];
	struct rp_report r[2];
	struct rp_engine_cfg c;
	uint32_t x[5];

	(void)state;
	rp_engine_cfg_default(&c);
	c.max_window_names = 4;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(rp_engine_open(&c, &eng[k]), 0);
		assert_int_equal(rp_engine_add_source(eng[k], "s", 1, 0), 0);
		for (int i = 0; i < NN; i++)
			ids[i] = rp_engine_name(eng[k], 0, names[i], "", "", 0);
		for (int i = 0; i < 5; i++)
			x[i] = rp_engine_name(eng[k], 0, xn[i], "", "", 0);
		cap_run(eng[k], k == 1, x);
		assert_int_equal(rp_engine_report(eng[k], &r[k]), 0);
	}
	assert_int_equal(r[0].anomalies[RP_ANOM_WINDOW_CAP], 3);
	assert_int_equal(r[1].anomalies[RP_ANOM_WINDOW_CAP], r[0].anomalies[RP_ANOM_WINDOW_CAP]);
	assert_int_equal(r[1].anomalies[RP_ANOM_WINDOW_EVICTED],
			 r[0].anomalies[RP_ANOM_WINDOW_EVICTED]);
	assert_int_equal(r[1].n_windows, r[0].n_windows);
	for (uint32_t w = 0; w < r[0].n_windows; w++) {
		assert_int_equal(r[1].windows[w].n_fns, r[0].windows[w].n_fns);
		for (uint32_t i = 0; i < r[0].windows[w].n_fns; i++) {
			const struct rp_report_wfn *p = &r[0].windows[w].fns[i];
			const struct rp_report_wfn *q = &r[1].windows[w].fns[i];

			assert_string_equal(r[1].fns[q->fn].name, r[0].fns[p->fn].name);
			assert_int_equal(q->calls, p->calls);
			assert_int_equal(q->self_ns, p->self_ns);
			assert_int_equal(q->cum_ns, p->cum_ns);
		}
	}
	assert_int_equal(eng[1]->src[0].counts.anomalies[RP_ANOM_BAD_EVENT], 0);
	for (int k = 0; k < 2; k++) {
		rp_report_free(&r[k]);
		rp_engine_close(eng[k]);
	}
}

/*
 * Import time gives way (RP_SUMMARY_IMPORT, docs/windows.md): with 4 names a
 * sub-window, four import-time summaries of 5 calls each fill it; then three names
 * called as spans, 3 times each, interleaved, and main closes. Flagged, the summaries
 * are eviction candidates taken in turn: the four names take their entries (each
 * eviction counted, the 4 x 5 import calls window_cap) and keep all their calls, so
 * the window rows equal the all-time rows. Unflagged (the same records from a
 * producer that does not say import time), the entries hold 5 calls each and the
 * spans overflow: 10 calls window_cap, no eviction, no row.
 */
static void test_summary_engine_import_gives_way(void **state)
{
	static const char *const in[] = { "imp0", "imp1", "imp2", "imp3" };
	static const char *const wn[] = { "w0", "w1", "w2" };
	struct rp_engine_cfg c;
	uint32_t imp[4], w[3];

	(void)state;
	rp_engine_cfg_default(&c);
	c.max_window_names = 4;
	for (int flagged = 0; flagged < 2; flagged++) {
		struct rp_engine *e;
		struct rp_report r;
		uint64_t t = 100;

		assert_int_equal(rp_engine_open(&c, &e), 0);
		assert_int_equal(rp_engine_add_source(e, "s", 1, 0), 0);
		for (int i = 0; i < NN; i++)
			ids[i] = rp_engine_name(e, 0, names[i], "", "", 0);
		for (int i = 0; i < 4; i++)
			imp[i] = rp_engine_name(e, 0, in[i], "", "", 0);
		for (int i = 0; i < 3; i++)
			w[i] = rp_engine_name(e, 0, wn[i], "", "", 0);
		BEGIN(0, MAIN, 0);
		for (int i = 0; i < 4; i++) {
			struct rp_event x = { .ts = 50, .name = imp[i], .kind = RP_EV_SUMMARY,
					      .flags = 3 | (flagged ? RP_SUMMARY_IMPORT : 0),
					      .depth = 0, .track = 0, .arg = 5 };

			rp_engine_event(e, 0, 1, &x);
			ev(e, 50, RP_EV_SUMMARY_DATA, RP_SUMDATA_TIMES, -1, 0, 10, 10);
			ev(e, 50, RP_EV_SUMMARY_DATA, RP_SUMDATA_RANGE, -1, 0, 2, 2);
			ev(e, 50, RP_EV_SUMMARY_DATA, RP_SUMDATA_HIST, -1, 0, 2, 5);
		}
		for (int k = 0; k < 3; k++)
			for (int i = 0; i < 3; i++) {
				ev_id(e, t, RP_EV_BEGIN, RP_SPAN_DEPTH, w[i], 1, 0, 0);
				ev_id(e, t + 1 + (uint64_t)i, RP_EV_END, RP_SPAN_DEPTH, w[i], 1, 0,
				      0);
				t += 10;
			}
		END(1000, MAIN, 0);
		assert_int_equal(rp_engine_report(e, &r), 0);
		/* main's one call too: it closes last, into a full table */
		assert_int_equal(r.anomalies[RP_ANOM_WINDOW_EVICTED], flagged ? 4 : 0);
		assert_int_equal(r.anomalies[RP_ANOM_WINDOW_CAP], flagged ? 4 * 5 : 3 * 3 + 1);
		assert_int_equal(r.anomalies[RP_ANOM_BAD_EVENT], 0);
		assert_true(r.n_windows > 0);
		for (uint32_t k = 0; k < r.n_windows; k++) {
			uint32_t found = 0;

			for (uint32_t i = 0; i < r.windows[k].n_fns; i++) {
				const struct rp_report_wfn *q = &r.windows[k].fns[i];
				const struct rp_report_fn *f = &r.fns[q->fn];

				if (f->name[0] != 'w')
					continue;
				found++;
				assert_int_equal(q->calls, 3);
				assert_int_equal(q->calls, f->calls);
				assert_int_equal(q->cum_ns, f->cum_ns);
				assert_true(q->p50_ns > 0);
			}
			assert_int_equal(found, flagged ? 3 : 0);
		}
		rp_report_free(&r);
		rp_engine_close(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_summary_engine_matches_spans),
		cmocka_unit_test(test_summary_engine_rejects_malformed),
		cmocka_unit_test(test_summary_engine_histograms),
		cmocka_unit_test(test_summary_engine_window_cap),
		cmocka_unit_test(test_summary_engine_import_gives_way),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
