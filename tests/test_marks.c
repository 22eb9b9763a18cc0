// SPDX-License-Identifier: MIT
/*
 * Request milestones (engine/core/marks.h, RP_INSTANT_MARK): a server's requests, each
 * marking its first token and the end of its queue wait, fed to the engine as a
 * producer writes them (async and tree tracks, marks interleaved with other requests'
 * records). Against the server's own stamps (the test keeps them): each milestone's
 * calls, total, min and max exact, p50/p90/p99 within the sketch's 1% of the exact
 * order statistics, all time and in the 10 s window (marks whose time falls in it);
 * its row has no self or cumulative time, and the requests' own rows, their
 * concurrency and the roots are what the same records without marks give. Irregular
 * marks (after the request ended, twice, on an unknown track, on a task's track, a
 * span's name) are counted exactly and recorded nowhere. Then two halves of the
 * requests in two engines, snapshotted and merged: the milestone stays one, with the
 * union's calls and quantiles; and the text report lists it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "snapshot_util.h"
#include "merge.h"
#include "render.h"
#include "snapshot.h"
#include "support.h"

#define US	1000ull
#define MS	1000000ull
#define NREQ	3000u
#define MAXEV	(NREQ * 10 + 64)

enum { N_REQUEST, N_STEP, N_FIRST, N_QUEUE, N_TASK, N_NAMES };

struct ev {
	struct rp_event e;
	uint32_t seq;
	uint8_t half; /* which engine of the merge test takes it: 0, 1 */
};

static struct ev evs[MAXEV];
static uint32_t n_ev;
/* The server's own stamps: each request's start and end, when it marked its first
 * token and its queue's end (0: not marked), and its half. */
static uint64_t req_b[NREQ], req_e[NREQ], first_t[NREQ], queue_t[NREQ];
static uint64_t rng = 0x2545f4914f6cdd1dull;
/* Irregular marks the generator wrote, by what the engine must count them as. */
static uint64_t want_unmatched, want_repeat, want_bad;

static uint64_t rnd(uint64_t m)
{
	return rp_test_rnd(&rng, m);
}

static void add(uint64_t t, uint8_t kind, uint8_t flags, uint32_t name, uint64_t track,
		uint64_t arg, uint8_t half)
{
	assert_true(n_ev < MAXEV);
	evs[n_ev] = (struct ev){ .e = { .ts = t, .name = name, .kind = kind, .flags = flags,
					.track = track, .arg = arg },
				 .seq = n_ev, .half = half };
	n_ev++;
}

static void mark(uint64_t t, uint32_t name, uint64_t track, uint8_t half)
{
	add(t, RP_EV_INSTANT, RP_INSTANT_MARK, name, track, 0, half);
}

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->e.ts != y->e.ts)
		return x->e.ts < y->e.ts ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/*
 * Requests every 0..14 ms over about 20 s (odd ns, so no record falls on a sub-window
 * boundary), lasting 5..400 ms; the queue wait ends within the first quarter, the
 * first token between it and the end. Every third request is a tree track (two tasks
 * at once), the others async spans with a step. Some requests mark nothing, some
 * only the first token. Irregular marks, on their own requests: after the end, a
 * second first token, an unknown track, a task's track, a span's name.
 */
static void generate(const uint32_t *id)
{
	uint64_t t = 1000 * MS + 1;

	n_ev = 0;
	want_unmatched = want_repeat = want_bad = 0;
	for (uint32_t i = 0; i < NREQ; i++) {
		uint64_t b = t, d = 5 * MS + rnd(395 * MS), track = 100 + i;
		uint64_t q = b + 1 + rnd(d / 4), f = q + rnd(d - (q - b));
		uint8_t h = (uint8_t)(i & 1);

		req_b[i] = b;
		req_e[i] = b + d;
		queue_t[i] = i % 7 == 3 ? 0 : q;
		first_t[i] = i % 11 == 5 ? 0 : f;
		if (i % 3 == 2) {
			add(b, RP_EV_CHILD_BEGIN, 0, id[N_REQUEST], track, RP_CHILD_ARG(0, 1), h);
			add(q, RP_EV_CHILD_BEGIN, 0, id[N_STEP], track, RP_CHILD_ARG(1, 2), h);
			add(q + 1, RP_EV_CHILD_BEGIN, 0, id[N_STEP], track, RP_CHILD_ARG(1, 3), h);
			add(b + d - 2, RP_EV_CHILD_END, 0, id[N_STEP], track, 2, h);
			add(b + d - 1, RP_EV_CHILD_END, 0, id[N_STEP], track, 3, h);
			add(b + d, RP_EV_CHILD_END, 0, id[N_REQUEST], track, 1, h);
		} else {
			add(b, RP_EV_ASYNC_BEGIN, 0, id[N_REQUEST], track, 1, h);
			add(q, RP_EV_ASYNC_BEGIN, 0, id[N_STEP], track, 2, h);
			add(b + d - 1, RP_EV_ASYNC_END, 0, id[N_STEP], track, 2, h);
			add(b + d, RP_EV_ASYNC_END, 0, id[N_REQUEST], track, 1, h);
		}
		if (queue_t[i])
			mark(queue_t[i], id[N_QUEUE], track, h);
		if (first_t[i])
			mark(first_t[i], id[N_FIRST], track, h);
		if (i % 13 == 1) { /* after the request ended */
			mark(b + d + 1 + rnd(MS), id[N_FIRST], track, h);
			want_unmatched++;
		}
		if (i % 17 == 4 && first_t[i]) { /* a second first token */
			mark(f + (b + d - f) / 2, id[N_FIRST], track, h); /* before the END */
			want_repeat++;
		}
		if (i % 19 == 6) { /* a track nobody opened */
			mark(b + rnd(d), id[N_FIRST], 900000 + i, h);
			want_unmatched++;
		}
		if (i % 23 == 8) { /* a span's name used as a milestone */
			mark(b + 1 + rnd(d - 1), id[N_REQUEST], track, h);
			want_bad++;
		}
		t += rnd(14 * MS);
	}
	/* A task's track (a coroutine's spans outside any request): not a request. */
	add(t, RP_EV_CHILD_BEGIN, RP_CHILD_TASK, id[N_TASK], 5, RP_CHILD_ARG(0, 1), 0);
	mark(t + 10 * US, id[N_FIRST], 5, 0);
	add(t + 20 * US, RP_EV_CHILD_END, 0, id[N_TASK], 5, 1, 0);
	want_unmatched++;
	qsort(evs, n_ev, sizeof(*evs), cmp_ev);
}

static const char *const names[N_NAMES] = { "request", "step", "first_token", "queue_wait",
					    "task" };
static const char *const cats[N_NAMES] = { "REQUEST", "", "milestone", "milestone", "" };

/* An engine fed the records of @half (2: all), marks too unless @no_marks. */
static struct rp_engine *feed(int half, bool no_marks)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	uint32_t src, id[N_NAMES];

	rp_engine_cfg_default(&c);
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "server", 1, 0);
	for (int i = 0; i < N_NAMES; i++)
		id[i] = rp_engine_name(e, src, names[i], cats[i], "", 0);
	if (n_ev == 0)
		generate(id);
	for (uint32_t i = 0; i < n_ev; i++) {
		if (half != 2 && evs[i].half != half)
			continue;
		if (no_marks && evs[i].e.kind == RP_EV_INSTANT)
			continue;
		rp_engine_event(e, src, 1, &evs[i].e);
	}
	return e;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The server's figures of one milestone: its marks' times since their requests'
 * starts, of requests in @half (2: all) whose mark fell in [from, to]. */
struct truth {
	uint64_t n, total, min, max;
	uint64_t v[NREQ];
};

static void truth_of(struct truth *o, const uint64_t *at, int half, uint64_t from, uint64_t to)
{
	memset(o, 0, sizeof(*o));
	for (uint32_t i = 0; i < NREQ; i++) {
		uint64_t d;

		if (at[i] == 0 || (half != 2 && (int)(i & 1) != half) || at[i] < from ||
		    at[i] > to)
			continue;
		d = at[i] - req_b[i];
		o->v[o->n++] = d;
		o->total += d;
	}
	qsort(o->v, o->n, sizeof(*o->v), cmp_u64);
	o->min = o->n ? o->v[0] : 0;
	o->max = o->n ? o->v[o->n - 1] : 0;
}

/* @got against the exact lower-rank q-quantile (sketch.h), within the sketch's 1%. */
static void check_q(uint64_t got, const struct truth *o, double q, const char *what)
{
	uint64_t x = o->v[(uint64_t)(q * (double)(o->n - 1))];

	if (fabs((double)got - (double)x) > 0.01 * (double)x + 1.0)
		fail_msg("%s q%.2f: %llu, exact %llu", what, q, (unsigned long long)got,
			 (unsigned long long)x);
}

static const struct rp_report_fn *row(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	fail_msg("no row %s", name);
	return NULL;
}

static void check_row(const struct rp_report_fn *f, const struct truth *o, const char *what)
{
	assert_int_equal(f->milestone, 1);
	assert_int_equal(f->calls, o->n);
	assert_int_equal(f->started, o->n); /* never in flight */
	assert_int_equal(f->total_ns, o->total);
	assert_int_equal(f->min_ns, o->min);
	assert_int_equal(f->max_ns, o->max);
	assert_int_equal(f->self_ns + f->cum_ns + f->primitive_calls + f->midpoint_count, 0);
	assert_true(rp_report_fn_has_quantiles(f));
	check_q(f->p50_ns, o, 0.50, what);
	check_q(f->p90_ns, o, 0.90, what);
	check_q(f->p99_ns, o, 0.99, what);
}

static void test_marks_ttft_against_server_stamps(void **state)
{
	struct rp_engine *e, *plain;
	struct rp_report r, p;
	static struct truth o;
	const struct rp_report_window *w = NULL;
	uint32_t fi;

	(void)state;
	n_ev = 0;
	e = feed(2, false);
	plain = feed(2, true);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(rp_engine_report(plain, &p), 0);

	truth_of(&o, first_t, 2, 0, UINT64_MAX);
	check_row(row(&r, "first_token"), &o, "first_token");
	print_message("    first_token: %llu requests, p50 %.3f ms (exact %.3f) p99 %.3f ms "
		      "(exact %.3f)\n", (unsigned long long)o.n,
		      (double)row(&r, "first_token")->p50_ns / 1e6,
		      (double)o.v[(uint64_t)(0.5 * (double)(o.n - 1))] / 1e6,
		      (double)row(&r, "first_token")->p99_ns / 1e6,
		      (double)o.v[(uint64_t)(0.99 * (double)(o.n - 1))] / 1e6);
	truth_of(&o, queue_t, 2, 0, UINT64_MAX);
	check_row(row(&r, "queue_wait"), &o, "queue_wait");

	/* counted, not recorded */
	assert_int_equal(r.anomalies[RP_ANOM_MARK_UNMATCHED], want_unmatched);
	assert_int_equal(r.anomalies[RP_ANOM_MARK_REPEAT], want_repeat);
	assert_int_equal(r.anomalies[RP_ANOM_BAD_EVENT], want_bad);
	assert_int_equal(p.anomalies[RP_ANOM_BAD_EVENT], 0);

	/* a milestone is no span: every other row, and the concurrency, as without marks */
	assert_int_equal(r.n_fns, p.n_fns + 2);
	for (uint32_t i = 0; i < p.n_fns; i++) {
		const struct rp_report_fn *a = &p.fns[i], *b = row(&r, a->name);

		assert_int_equal(b->milestone, 0);
		assert_int_equal(b->calls, a->calls);
		assert_int_equal(b->self_ns, a->self_ns);
		assert_int_equal(b->cum_ns, a->cum_ns);
		assert_int_equal(b->started, a->started);
		assert_int_equal(b->midpoint_sum, a->midpoint_sum);
		assert_int_equal(b->p99_ns, a->p99_ns);
	}
	assert_int_equal(r.n_edges, p.n_edges);
	assert_int_equal(r.n_nodes, p.n_nodes);
	assert_int_equal(r.requests.max, p.requests.max);
	assert_int_equal(r.requests.mean_milli, p.requests.mean_milli);
	assert_int_equal(r.requests.observed_ns, p.requests.observed_ns);
	assert_true(r.n_conc >= 2 && r.n_conc == p.n_conc);
	for (uint32_t i = 0; i < r.n_conc; i++) {
		assert_int_equal(r.conc[i].max, p.conc[i].max);
		assert_int_equal(r.conc[i].mean_milli, p.conc[i].mean_milli);
	}
	assert_int_equal(r.bottlenecks.n_slowest, p.bottlenecks.n_slowest);
	for (uint32_t i = 0; i < r.bottlenecks.n_slowest; i++)
		assert_int_equal(r.bottlenecks.slowest[i].dur_ns, p.bottlenecks.slowest[i].dur_ns);

	/* the 10 s window: the marks whose time falls in it */
	for (uint32_t i = 0; i < r.n_windows; i++)
		if (r.windows[i].length_ns == 10000000000ull)
			w = &r.windows[i];
	assert_non_null(w);
	assert_true(w->t_from > req_b[0]); /* the run is longer: a part of the marks */
	fi = (uint32_t)(row(&r, "first_token") - r.fns);
	truth_of(&o, first_t, 2, w->t_from, w->t_to);
	assert_true(o.n > 100);
	for (uint32_t i = 0; i < w->n_fns; i++) {
		if (w->fns[i].fn != fi)
			continue;
		assert_int_equal(w->fns[i].calls, o.n);
		assert_int_equal(w->fns[i].self_ns + w->fns[i].cum_ns, 0);
		check_q(w->fns[i].p50_ns, &o, 0.50, "window first_token");
		check_q(w->fns[i].p90_ns, &o, 0.90, "window first_token");
		check_q(w->fns[i].p99_ns, &o, 0.99, "window first_token");
		fi = RP_NONE;
		break;
	}
	assert_int_equal(fi, RP_NONE); /* it was there */
	rp_report_free(&r);
	rp_report_free(&p);
	rp_engine_close(e);
	rp_engine_close(plain);
}

static void test_marks_merge_two_snapshots(void **state)
{
	struct rp_engine *e0, *e1;
	struct rp_report a, b, x, y;
	static struct truth o;
	char why[256];

	(void)state;
	n_ev = 0;
	e0 = feed(0, false);
	e1 = feed(1, false);
	assert_int_equal(rp_engine_report(e0, &a), 0);
	assert_int_equal(rp_engine_report(e1, &b), 0);
	rp_test_through_snapshot(&a, &x);
	rp_test_through_snapshot(&b, &y);
	truth_of(&o, first_t, 0, 0, UINT64_MAX);
	check_row(row(&x, "first_token"), &o, "half 0");
	assert_int_equal(rp_report_merge(&x, &y, why, sizeof(why)), 0);
	truth_of(&o, first_t, 2, 0, UINT64_MAX);
	check_row(row(&x, "first_token"), &o, "merged");
	truth_of(&o, queue_t, 2, 0, UINT64_MAX);
	check_row(row(&x, "queue_wait"), &o, "merged queue_wait");
	assert_int_equal(row(&x, "request")->milestone, 0);
	rp_report_free(&a);
	rp_report_free(&b);
	rp_report_free(&x);
	rp_report_free(&y);
	rp_engine_close(e0);
	rp_engine_close(e1);
}

/* The text report lists the milestones apart, with their requests and quantiles. */
static void test_marks_text_report(void **state)
{
	struct rp_engine *e;
	struct rp_report r;
	char *buf = NULL, *at;
	size_t len = 0;
	FILE *f;
	static struct truth o;
	char want[64];

	(void)state;
	n_ev = 0;
	e = feed(2, false);
	assert_int_equal(rp_engine_report(e, &r), 0);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(rp_render_text(&r, f, 0), 0);
	fclose(f);
	at = strstr(buf, "\nmilestones 2: time from a request's start to its mark\n");
	assert_non_null(at);
	truth_of(&o, first_t, 2, 0, UINT64_MAX);
	snprintf(want, sizeof(want), "%15llu ", (unsigned long long)o.n);
	at = strstr(at, want);
	assert_non_null(at);
	assert_non_null(strstr(at, "first_token [milestone]"));
	free(buf);
	rp_report_free(&r);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_marks_ttft_against_server_stamps),
		cmocka_unit_test(test_marks_merge_two_snapshots),
		cmocka_unit_test(test_marks_text_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
