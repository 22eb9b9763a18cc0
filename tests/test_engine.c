// SPDX-License-Identifier: MIT
/*
 * The analysis core against a brute-force oracle. Random span trees (recursion
 * included) on several thread and async tracks become one time-ordered event stream;
 * the oracle computes every figure straight from the trees: self = duration minus
 * the children's durations, primitive = no ancestor of the same name, cum = sum of
 * primitive durations, edges from each span's parent, CCT nodes from name paths.
 * Then each irregular input: mismatched END, unmatched END, depth, track, name and
 * CCT caps, late events.
 */
#include <errno.h>
#include <string.h>

#include "engine.h"
#include "support.h"

#define NAMES 6
#define MAXSPANS 20000

struct span {
	uint64_t start, end;
	uint32_t name;	/* 0..NAMES-1: index into ids[] */
	int parent;	/* index, -1 for a root */
	uint64_t track;
	bool async;
};

static struct span spans[MAXSPANS];
static int nspans;
static uint32_t rng = 7;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 1664525u + 1013904223u;
	return (rng >> 8) % n;
}

/* Children fill [start, end) in order, with gaps; names repeat (recursion). */
static void grow(int parent, uint64_t start, uint64_t end, int depth, uint64_t track, bool async)
{
	uint64_t t = start;

	while (depth < 6 && nspans < MAXSPANS - 1 && t < end && rnd(4) != 0) {
		uint64_t len = rnd((uint32_t)(end - t) + 1);
		int i = nspans++;
		spans[i] = (struct span){ t, t + len, rnd(NAMES), parent, track, async };
		grow(i, t, t + len, depth + 1, track, async);
		t += len + rnd(3);
	}
}

struct gev {
	uint64_t ts;
	uint64_t order;	/* DFS order within the track, keeps ENDs before later BEGINs */
	int span;
	bool begin;
};

static struct gev evs[2 * MAXSPANS];
static int nevs;

static void dfs_events(int i, uint64_t *order)
{
	evs[nevs++] = (struct gev){ spans[i].start, (*order)++, i, true };
	for (int c = i + 1; c < nspans; c++)
		if (spans[c].parent == i)
			dfs_events(c, order);
	evs[nevs++] = (struct gev){ spans[i].end, (*order)++, i, false };
}

static int cmp_gev(const void *a, const void *b)
{
	const struct gev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (spans[x->span].track != spans[y->span].track ||
	    spans[x->span].async != spans[y->span].async)
		return (spans[x->span].track * 2 + spans[x->span].async) <
				       (spans[y->span].track * 2 + spans[y->span].async)
			       ? -1
			       : 1;
	return x->order < y->order ? -1 : 1;
}

static void make_workload(void)
{
	uint64_t order = 0;

	nspans = 0;
	nevs = 0;
	for (uint64_t tr = 1; tr <= 6; tr++) {
		int first = nspans;
		grow(-1, 1000 * tr, 1000 * tr + 50000, 0, tr, tr > 3);
		for (int i = first; i < nspans; i++)
			if (spans[i].parent == -1)
				dfs_events(i, &order);
	}
	qsort(evs, (size_t)nevs, sizeof(evs[0]), cmp_gev);
}

struct oracle_fn {
	uint64_t calls, prim, self, cum, total, min, max;
};

static bool is_primitive(int i)
{
	for (int p = spans[i].parent; p >= 0; p = spans[p].parent)
		if (spans[p].name == spans[i].name)
			return false;
	return true;
}

static uint64_t self_of(int i)
{
	uint64_t dur = spans[i].end - spans[i].start, kids = 0;

	for (int c = 0; c < nspans; c++)
		if (spans[c].parent == i)
			kids += spans[c].end - spans[c].start;
	return dur - kids;
}

static void oracle(struct oracle_fn fn[NAMES], uint64_t edge_calls[NAMES][NAMES],
		   uint64_t edge_cum[NAMES][NAMES])
{
	memset(fn, 0, sizeof(struct oracle_fn) * NAMES);
	memset(edge_calls, 0, sizeof(uint64_t) * NAMES * NAMES);
	memset(edge_cum, 0, sizeof(uint64_t) * NAMES * NAMES);
	for (int i = 0; i < nspans; i++) {
		struct oracle_fn *f = &fn[spans[i].name];
		uint64_t dur = spans[i].end - spans[i].start;
		bool prim = is_primitive(i);

		if (f->calls == 0 || dur < f->min)
			f->min = dur;
		if (dur > f->max)
			f->max = dur;
		f->calls++;
		f->total += dur;
		f->self += self_of(i);
		f->prim += prim;
		f->cum += prim ? dur : 0;
		if (spans[i].parent >= 0) {
			edge_calls[spans[spans[i].parent].name][spans[i].name]++;
			edge_cum[spans[spans[i].parent].name][spans[i].name] += prim ? dur : 0;
		}
	}
}

static const char *const names[NAMES] = { "a", "b", "c", "d", "e", "f" };

static int fn_index(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return (int)i;
	return -1;
}

static struct rp_event event_of(int k, const uint32_t ids[NAMES])
{
	const struct span *s = &spans[evs[k].span];
	struct rp_event ev = { .ts = evs[k].ts, .name = ids[s->name], .track = s->track,
			       .arg = (uint64_t)evs[k].span + 1 };

	if (s->async)
		ev.kind = evs[k].begin ? RP_EV_ASYNC_BEGIN : RP_EV_ASYNC_END;
	else
		ev.kind = evs[k].begin ? RP_EV_BEGIN : RP_EV_END;
	return ev;
}

static void feed(struct rp_engine *e, int src, uint32_t ids[NAMES])
{
	for (int k = 0; k < nevs; k++) {
		struct rp_event ev = event_of(k, ids);

		rp_engine_event(e, (uint32_t)src, ev.track, &ev);
	}
}

/* Every figure of the report against the oracle's, each @times over (sources fed
 * the same workload). */
static void check_oracle(const struct rp_report *r, const struct oracle_fn want[NAMES],
			 uint64_t ecalls[NAMES][NAMES], uint64_t ecum[NAMES][NAMES],
			 uint64_t times)
{
	assert_int_equal(r->events, times * (uint64_t)nevs);
	assert_int_equal(r->late + r->truncated + r->dropped, 0);
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		assert_int_equal(r->anomalies[k], 0);
	for (int i = 0; i < NAMES; i++) {
		const struct rp_report_fn *f = &r->fns[fn_index(r, names[i])];
		assert_int_equal(f->calls, times * want[i].calls);
		assert_int_equal(f->primitive_calls, times * want[i].prim);
		assert_int_equal(f->self_ns, times * want[i].self);
		assert_int_equal(f->cum_ns, times * want[i].cum);
		assert_int_equal(f->total_ns, times * want[i].total);
		assert_int_equal(f->min_ns, want[i].min);
		assert_int_equal(f->max_ns, want[i].max);
	}
	for (uint32_t k = 0; k < r->n_edges; k++) {
		int a = r->fns[r->edges[k].caller].name[0] - 'a';
		int b = r->fns[r->edges[k].callee].name[0] - 'a';
		assert_int_equal(r->edges[k].calls, times * ecalls[a][b]);
		assert_int_equal(r->edges[k].cum_ns, times * ecum[a][b]);
		ecalls[a][b] = 0; /* each edge once */
	}
	for (int a = 0; a < NAMES; a++)
		for (int b = 0; b < NAMES; b++)
			assert_int_equal(ecalls[a][b], 0);
}

/* The workload (spans[], evs[]) through a new engine, whose report is checked
 * against the oracle's figures; the engine is returned with its report in @r. */
static struct rp_engine *run_checked(struct oracle_fn *want, uint64_t ecalls[NAMES][NAMES],
				     uint64_t ecum[NAMES][NAMES], struct rp_report *r)
{
	struct rp_engine *e;
	uint32_t ids[NAMES];
	int src;

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	src = rp_engine_add_source(e, "test", 1, 0);
	for (int i = 0; i < NAMES; i++)
		ids[i] = rp_engine_name(e, (uint32_t)src, names[i], "CAT", "f.c", (uint32_t)i);
	feed(e, src, ids);
	assert_int_equal(rp_engine_report(e, r), 0);
	check_oracle(r, want, ecalls, ecum, 1);
	return e;
}

static void test_engine_matches_bruteforce_oracle(void **state)
{
	static uint64_t ecalls[NAMES][NAMES], ecum[NAMES][NAMES];
	struct oracle_fn want[NAMES];
	struct rp_engine *e;
	struct rp_report r;

	(void)state;
	make_workload();
	assert_true(nspans > 1000);
	oracle(want, ecalls, ecum);
	e = run_checked(want, ecalls, ecum, &r);
	/* CCT: total calls over nodes = spans; each node's parent precedes it. */
	uint64_t node_calls = 0;
	for (uint32_t k = 1; k < r.n_nodes; k++) {
		assert_true(r.nodes[k].parent < k);
		node_calls += r.nodes[k].calls;
	}
	assert_int_equal(node_calls, (uint64_t)nspans);
	rp_report_free(&r);
	rp_engine_close(e);
}

/*
 * A pop decides "primitive" from the parent's name first (a direct recursion), then
 * walks the frames below the parent: recursions of every shape on one thread, direct
 * (a > a), through one other name (a > b > a), through two (a > b > c > a), below a
 * direct one (b > a > a > b), nested twice (a > a > a), a name open twice below a
 * parent of another name (a > a > b > a), against the oracle's ancestor walk (every
 * name is called: the report lists only those).
 */
static void test_engine_primitive_recursion_shapes(void **state)
{
	static const char *const shapes[] = { "a", "aa", "aba", "abca", "baab", "aaa",
					      "aaba", "cbacba", "ab", "abab", "defd", "fe" };
	static uint64_t ecalls[NAMES][NAMES], ecum[NAMES][NAMES];
	struct oracle_fn want[NAMES];
	struct rp_engine *e;
	struct rp_report r;
	uint64_t order = 0, t = 1000;

	(void)state;
	nspans = 0;
	nevs = 0;
	/* each shape a chain of nested spans, each one 7 ns inside its parent */
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		int first = nspans, n = (int)strlen(shapes[k]);

		for (int i = 0; i < n; i++, nspans++)
			spans[nspans] = (struct span){ t + 7 * (uint64_t)i,
						       t + 1000 - 7 * (uint64_t)i,
						       (uint32_t)(shapes[k][i] - 'a'),
						       i ? nspans - 1 : -1, 1, false };
		dfs_events(first, &order);
		t += 2000;
	}
	qsort(evs, (size_t)nevs, sizeof(evs[0]), cmp_gev);
	oracle(want, ecalls, ecum);
	assert_int_equal(want[0].calls, 20);
	assert_int_equal(want[0].prim, 10); /* one per shape holding an "a" */
	e = run_checked(want, ecalls, ecum, &r);
	rp_report_free(&r);
	rp_engine_close(e);
}

/*
 * rp_engine_event_at(): a hint per caller thread is only ever a guess. Two sources
 * are fed the same workload, record by record interleaved, with hints that are
 * wrong in every way a hint can be: one per thread id shared by both sources (so
 * it names the other source's track half the time), one starting past the last
 * slot ever used, one whose slot is freed and reused by another track (async
 * tracks come and go), and one shared by every thread. Each run must give the
 * oracle's figures twice over.
 */
static void test_engine_hints_are_only_guesses(void **state)
{
	static uint64_t ecalls[NAMES][NAMES], ecum[NAMES][NAMES];
	struct oracle_fn want[NAMES];
	struct rp_engine_cfg cfg;

	(void)state;
	make_workload();
	rp_engine_cfg_default(&cfg);
	cfg.max_tracks = 64;
	for (int mode = 0; mode < 3; mode++) {
		uint32_t hint[8], ids[2][NAMES];
		struct rp_engine *e;
		struct rp_report r;

		oracle(want, ecalls, ecum);
		assert_int_equal(rp_engine_open(&cfg, &e), 0);
		for (int s = 0; s < 2; s++) {
			assert_int_equal(rp_engine_add_source(e, s ? "b" : "a", 1 + s, 0), s);
			for (int i = 0; i < NAMES; i++)
				ids[s][i] = rp_engine_name(e, (uint32_t)s, names[i], "CAT", "f.c",
							   (uint32_t)i);
		}
		for (int i = 0; i < 8; i++)
			hint[i] = mode == 1 ? cfg.max_tracks - 1 : (uint32_t)i;
		for (int k = 0; k < nevs; k++)
			for (int s = 0; s < 2; s++) {
				struct rp_event ev = event_of(k, ids[s]);
				uint32_t *h = mode == 2 ? &hint[0] : &hint[ev.track];

				rp_engine_event_at(e, (uint32_t)s, ev.track, &ev, h);
				assert_true(*h < cfg.max_tracks);
			}
		assert_int_equal(rp_engine_report(e, &r), 0);
		check_oracle(&r, want, ecalls, ecum, 2);
		rp_report_free(&r);
		rp_engine_close(e);
	}
}

/* A small engine and a source, with names a..f. */
static struct rp_engine *small(struct rp_engine_cfg *cfg, uint32_t ids[NAMES])
{
	struct rp_engine *e;

	assert_int_equal(rp_engine_open(cfg, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "s", 1, 0), 0);
	for (int i = 0; i < NAMES; i++)
		ids[i] = rp_engine_name(e, 0, names[i], "", "", 0);
	return e;
}

static void ev(struct rp_engine *e, uint8_t kind, uint32_t name, uint64_t ts)
{
	struct rp_event x = { .ts = ts, .name = name, .kind = kind };

	rp_engine_event(e, 0, 1, &x);
}

static const struct rp_report_fn *fn(const struct rp_report *r, const char *name)
{
	int i = fn_index(r, name);

	assert_true(i >= 0);
	return &r->fns[i];
}

/* a[0,100) { b[10, c[20 ... END a at 50: b and c close at 50 as truncated. */
static void test_engine_end_mismatch_truncates_above(void **state)
{
	uint32_t id[NAMES];
	struct rp_engine *e = small(NULL, id);
	struct rp_report r;

	(void)state;
	ev(e, RP_EV_BEGIN, id[0], 0);
	ev(e, RP_EV_BEGIN, id[1], 10);
	ev(e, RP_EV_BEGIN, id[2], 20);
	ev(e, RP_EV_END, id[0], 50);
	ev(e, RP_EV_END, id[3], 60); /* nothing open */
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.anomalies[RP_ANOM_END_MISMATCH], 1);
	assert_int_equal(r.anomalies[RP_ANOM_END_UNMATCHED], 1);
	assert_int_equal(r.truncated, 2);
	assert_int_equal(fn(&r, "c")->self_ns, 30);
	assert_int_equal(fn(&r, "b")->cum_ns, 40);
	assert_int_equal(fn(&r, "b")->self_ns, 10);
	assert_int_equal(fn(&r, "a")->cum_ns, 50);
	assert_int_equal(fn(&r, "a")->self_ns, 10);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Depth cap 2: the third level is not pushed, its END ignored, the rest exact. */
static void test_engine_depth_cap(void **state)
{
	struct rp_engine_cfg cfg;
	uint32_t id[NAMES];
	struct rp_engine *e;
	struct rp_report r;

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.max_depth = 2;
	e = small(&cfg, id);
	ev(e, RP_EV_BEGIN, id[0], 0);
	ev(e, RP_EV_BEGIN, id[1], 10);
	ev(e, RP_EV_BEGIN, id[2], 20);
	ev(e, RP_EV_BEGIN, id[3], 25);
	ev(e, RP_EV_END, id[3], 26);
	ev(e, RP_EV_END, id[2], 30);
	ev(e, RP_EV_END, id[1], 40);
	ev(e, RP_EV_END, id[0], 100);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.anomalies[RP_ANOM_DEPTH_CAP], 2);
	assert_int_equal(r.anomalies[RP_ANOM_END_UNMATCHED], 0);
	assert_int_equal(fn_index(&r, "c"), -1);
	assert_int_equal(fn(&r, "b")->self_ns, 30);
	assert_int_equal(fn(&r, "a")->self_ns, 70);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Caps on tracks, names and CCT nodes: counted, folded, bounded. */
static void test_engine_caps_fold_and_count(void **state)
{
	struct rp_engine_cfg cfg;
	uint32_t id[NAMES], extra;
	struct rp_engine *e;
	struct rp_report r;

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.max_tracks = 2;
	cfg.max_names = NAMES + 1;	/* "[other]" + a..f */
	cfg.max_cct_nodes = 3;		/* root + 2 */
	e = small(&cfg, id);
	extra = rp_engine_name(e, 0, "g", "", "", 0);
	assert_int_equal(extra, RP_NAMES_OTHER);
	for (uint64_t a = 1; a <= 3; a++) { /* the third async track is refused */
		struct rp_event x = { .ts = a, .name = id[a], .kind = RP_EV_ASYNC_BEGIN,
				      .track = a, .arg = a };
		rp_engine_event(e, 0, 0, &x);
	}
	assert_int_equal(e->tracks.live, 2);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.anomalies[RP_ANOM_NAME_CAP], 1);
	assert_int_equal(r.anomalies[RP_ANOM_TRACK_CAP], 1);
	assert_int_equal(r.anomalies[RP_ANOM_CCT_CAP], 0);
	rp_report_free(&r);
	for (uint64_t a = 1; a <= 2; a++) { /* closing them frees both track slots */
		struct rp_event x = { .ts = 5, .name = id[a], .kind = RP_EV_ASYNC_END,
				      .track = a, .arg = a };
		rp_engine_event(e, 0, 0, &x);
	}
	assert_int_equal(e->tracks.live, 0);
	/* Two more root names past the node cap fold into the root's "[other]". */
	for (int k = 3; k < 5; k++) {
		ev(e, RP_EV_BEGIN, id[k], 10);
		ev(e, RP_EV_END, id[k], 12);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.anomalies[RP_ANOM_CCT_CAP], 2);
	assert_int_equal(r.n_nodes, 4); /* root, b, c, [other] */
	assert_int_equal(r.nodes[3].calls, 2);
	assert_string_equal(r.fns[r.nodes[3].fn].name, "[other]");
	assert_int_equal(fn(&r, "d")->calls, 1); /* the function rows stay exact */
	rp_report_free(&r);
	rp_engine_close(e);
}

static void test_engine_late_and_async_release(void **state)
{
	uint32_t id[NAMES];
	struct rp_engine *e = small(NULL, id);
	struct rp_report r;
	struct rp_event x = { .ts = 100, .name = id[0], .kind = RP_EV_ASYNC_BEGIN, .track = 9,
			      .arg = 1 };

	(void)state;
	rp_engine_event(e, 0, 0, &x);
	x.ts = 50; /* older than what was processed: late, still applied */
	x.kind = RP_EV_INSTANT;
	rp_engine_event(e, 0, 0, &x);
	x.ts = 300;
	x.kind = RP_EV_ASYNC_END;
	rp_engine_event(e, 0, 0, &x);
	assert_int_equal(e->tracks.live, 0); /* an async track goes when it empties */
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.late, 1);
	assert_int_equal(fn(&r, "a")->cum_ns, 200);
	assert_int_equal(r.t_first, 50);
	assert_int_equal(r.t_last, 300);
	rp_report_free(&r);
	rp_engine_close(e);
}

static void child(struct rp_engine *e, uint8_t kind, uint32_t name, uint64_t ts, uint64_t arg)
{
	struct rp_event x = { .ts = ts, .name = name, .kind = kind, .track = 42, .arg = arg };

	rp_engine_event(e, 0, 1, &x);
}

/*
 * A request tree (RP_EV_CHILD_*): a[0,100) holds b[10,60) and c[20,80) at once
 * (siblings, not nested), b holds d[30,40), and a's span e closes after its
 * parent's END (an END below open descendants: truncated). Self times by hand:
 * a: 100 - |[10,80)| = 30; b: 50 - 10 = 40; c: 60; d: 10. Then an END of a span
 * the track never had is end_unmatched.
 */
static void test_engine_tree_siblings(void **state)
{
	uint32_t id[NAMES];
	struct rp_engine *e = small(NULL, id);
	struct rp_report r;

	(void)state;
	child(e, RP_EV_CHILD_BEGIN, id[0], 0, RP_CHILD_ARG(0, 1));
	child(e, RP_EV_CHILD_BEGIN, id[1], 10, RP_CHILD_ARG(1, 2));
	child(e, RP_EV_CHILD_BEGIN, id[2], 20, RP_CHILD_ARG(1, 3));
	child(e, RP_EV_CHILD_BEGIN, id[3], 30, RP_CHILD_ARG(2, 4));
	child(e, RP_EV_CHILD_END, id[3], 40, 4);
	child(e, RP_EV_CHILD_END, id[1], 60, 2); /* b closes under c's feet: fine */
	child(e, RP_EV_CHILD_END, id[2], 80, 3);
	child(e, RP_EV_CHILD_END, id[0], 100, 1);
	assert_int_equal(e->tracks.live, 0);
	assert_int_equal(rp_engine_report(e, &r), 0);
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		assert_int_equal(r.anomalies[k], 0);
	assert_int_equal(fn(&r, "a")->self_ns, 30);
	assert_int_equal(fn(&r, "a")->cum_ns, 100);
	assert_int_equal(fn(&r, "b")->self_ns, 40);
	assert_int_equal(fn(&r, "c")->self_ns, 60);
	assert_int_equal(fn(&r, "d")->self_ns, 10);
	assert_int_equal(r.conc[1].max, 1);
	assert_int_equal(r.conc[0].max, 4); /* a, b, c, d in [30, 40) */
	rp_report_free(&r);

	/* e under a, f under e; a ends first: f and e close as truncated, at 150. */
	child(e, RP_EV_CHILD_BEGIN, id[0], 110, RP_CHILD_ARG(0, 1));
	child(e, RP_EV_CHILD_BEGIN, id[4], 120, RP_CHILD_ARG(1, 5));
	child(e, RP_EV_CHILD_BEGIN, id[5], 130, RP_CHILD_ARG(5, 6));
	child(e, RP_EV_CHILD_END, id[0], 150, 1);
	child(e, RP_EV_CHILD_END, id[4], 160, 5);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.anomalies[RP_ANOM_END_MISMATCH], 1);
	assert_int_equal(r.anomalies[RP_ANOM_END_UNMATCHED], 1);
	assert_int_equal(r.truncated, 2);
	assert_int_equal(fn(&r, "e")->cum_ns, 30);
	assert_int_equal(fn(&r, "e")->self_ns, 10);
	assert_int_equal(fn(&r, "f")->self_ns, 20);
	assert_int_equal(fn(&r, "a")->self_ns, 30 + 10);
	rp_report_free(&r);

	/* Malformed mixes on one track (1.0 async spans and tree spans, duplicate and
	 * self-parent ids) are irregular but finite: everything closes. */
	child(e, RP_EV_ASYNC_BEGIN, id[0], 200, 7);
	child(e, RP_EV_CHILD_BEGIN, id[1], 210, RP_CHILD_ARG(7, 7));
	child(e, RP_EV_CHILD_BEGIN, id[2], 220, RP_CHILD_ARG(9, 9));
	child(e, RP_EV_ASYNC_BEGIN, id[3], 230, 9);
	child(e, RP_EV_CHILD_END, id[1], 240, 7);
	child(e, RP_EV_ASYNC_END, id[0], 250, 7);
	child(e, RP_EV_CHILD_END, id[2], 260, 9);
	child(e, RP_EV_ASYNC_END, id[3], 270, 9);
	assert_int_equal(rp_engine_report(e, &r), 0);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Rows of finished sources are folded and reused when the table is full; live
 * sources never are; totals keep every count. */
static void test_engine_finished_sources_fold(void **state)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report r;
	struct rp_event x = { .kind = RP_EV_INSTANT };

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.max_sources = 2;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "a", 1, 0), 0);
	assert_int_equal(rp_engine_add_source(e, "b", 2, 0), 1);
	assert_int_equal(rp_engine_add_source(e, "c", 3, 0), -ENOSPC); /* all live */
	for (int k = 0; k < 3; k++)
		rp_engine_event(e, 0, 0, &x);
	rp_engine_event(e, 1, 0, &x);
	rp_engine_finish_source(e, 1);
	rp_engine_finish_source(e, 0);
	assert_int_equal(rp_engine_add_source(e, "c", 3, 0), 1); /* b finished first */
	rp_engine_event(e, 1, 0, &x);
	assert_int_equal(rp_engine_add_source(e, "d", 4, 0), 0); /* then a */
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.n_sources, 3);
	assert_string_equal(r.sources[0].name, "d");
	assert_string_equal(r.sources[1].name, "c");
	assert_string_equal(r.sources[2].name, "[2 finished sources]");
	assert_int_equal(r.sources[2].events, 4);
	assert_int_equal(r.sources[1].events, 1);
	assert_int_equal(r.events, 5);
	rp_report_free(&r);
	rp_engine_close(e);
}

/*
 * The rows' shortest call (stored as its complement, stats.h) as the report shows it:
 * a name begun and never ended has no call and min_ns 0, a name whose calls lasted 0
 * ns has 0, one with several calls the shortest (milestones' rows: test_marks).
 */
static void test_engine_min_of_rows(void **state)
{
	uint32_t id[NAMES];
	struct rp_engine *e = small(NULL, id);
	struct rp_report r;

	(void)state;
	ev(e, RP_EV_BEGIN, id[0], 100); /* a: open at the report, no call */
	ev(e, RP_EV_BEGIN, id[1], 110);
	ev(e, RP_EV_END, id[1], 110); /* b: 0 */
	ev(e, RP_EV_BEGIN, id[2], 120);
	ev(e, RP_EV_END, id[2], 150); /* c: 30, 7, 12 */
	ev(e, RP_EV_BEGIN, id[2], 160);
	ev(e, RP_EV_END, id[2], 167);
	ev(e, RP_EV_BEGIN, id[2], 170);
	ev(e, RP_EV_END, id[2], 182);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(fn(&r, "a")->calls, 0);
	assert_int_equal(fn(&r, "a")->started, 1);
	assert_int_equal(fn(&r, "a")->min_ns, 0);
	assert_int_equal(fn(&r, "a")->max_ns, 0);
	assert_int_equal(fn(&r, "b")->calls, 1);
	assert_int_equal(fn(&r, "b")->min_ns, 0);
	assert_int_equal(fn(&r, "c")->calls, 3);
	assert_int_equal(fn(&r, "c")->min_ns, 7);
	assert_int_equal(fn(&r, "c")->max_ns, 30);
	rp_report_free(&r);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_matches_bruteforce_oracle),
		cmocka_unit_test(test_engine_primitive_recursion_shapes),
		cmocka_unit_test(test_engine_hints_are_only_guesses),
		cmocka_unit_test(test_engine_end_mismatch_truncates_above),
		cmocka_unit_test(test_engine_depth_cap),
		cmocka_unit_test(test_engine_caps_fold_and_count),
		cmocka_unit_test(test_engine_late_and_async_release),
		cmocka_unit_test(test_engine_tree_siblings),
		cmocka_unit_test(test_engine_finished_sources_fold),
		cmocka_unit_test(test_engine_min_of_rows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
