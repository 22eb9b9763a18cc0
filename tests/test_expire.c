// SPDX-License-Identifier: MIT
/*
 * Async requests after drops: a request whose END a producer's drop cut must not
 * stay open for ever (engine.h, rp_engine_expire()). The engine is fed directly: a
 * stream of async requests on their own tracks, some of whose ENDs are "dropped"
 * (never fed) before the source reports its drops (rp_engine_source_dropped(), as
 * sources.c does when a ring's drop count moves), then later requests, with the
 * expiry sweep run every 10 ms of event time, as the drain tick does.
 *
 * The reference is computed here from the requests alone: a lost request is closed
 * at the first sweep at least the expiry after its last record, once the drop was
 * reported; the concurrency rows must equal a brute-force sweep over the completed
 * requests plus the expired ones up to that close, exactly; and they stay within the
 * reported bound of the truth (every request with its real END).
 */
#include <string.h>

#include "engine.h"
#include "support.h"

#define MS	1000000ull
#define EXPIRE	(50 * MS)
#define SWEEP	(10 * MS)  /* the tick: expiry sweeps every 10 ms of event time */
#define T_DROP	(125 * MS) /* when the source reports its drops */
#define N_REQ	600
#define MAX_CHG (4 * N_REQ)

struct req {
	uint64_t b, e; /* its BEGIN and (real) END */
	bool lost;     /* its END was dropped */
};

static struct req rq[N_REQ];
static uint32_t rng = 12345;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % n;
}

/* One request a millisecond (0.3 ms past it: never on a sweep boundary), lasting
 * 0.5 to 3 ms; the ENDs of requests 100..119 are lost (they began before T_DROP and
 * end before it); request 110 is a long one open across the drop whose END comes
 * 30 ms later (idle < expiry: never expired). */
static void make_requests(void)
{
	for (uint32_t i = 0; i < N_REQ; i++) {
		rq[i].b = i * MS + 300000;
		rq[i].e = rq[i].b + 500000 + (uint64_t)rnd(2500) * 1000;
		rq[i].lost = i >= 100 && i < 120 && i != 110;
	}
	rq[110].e = rq[110].b + 30 * MS;
}

/* Where the reference closes lost request @r: the first sweep at or after the drop
 * report whose time is at least EXPIRE past its BEGIN (its only record). */
static uint64_t expected_close(const struct req *r)
{
	uint64_t s = (T_DROP / SWEEP + 1) * SWEEP;

	while (s - r->b < EXPIRE)
		s += SWEEP;
	return s;
}

/* The bound's N: the most requests open at a sweep after the drop report that began
 * before it (suspect), counted before the sweep closes any (an END at the sweep's
 * time comes after it). */
static uint64_t expected_peak(uint64_t last_sweep)
{
	uint64_t peak = 0;

	for (uint64_t s = (T_DROP / SWEEP + 1) * SWEEP; s <= last_sweep; s += SWEEP) {
		uint64_t n = 0;

		for (uint32_t i = 0; i < N_REQ; i++)
			n += rq[i].b < T_DROP &&
			     (rq[i].lost ? expected_close(&rq[i]) >= s : rq[i].e >= s);
		peak = n > peak ? n : peak;
	}
	return peak;
}

/* --- the brute-force sweep --- */

struct chg {
	uint64_t t;
	int d;
};

static int cmp_chg(const void *a, const void *b)
{
	const struct chg *x = a, *y = b;

	return x->t < y->t ? -1 : x->t > y->t;
}

struct conc {
	uint64_t observed, level_ns[64];
	uint32_t max;
};

/* Time at each level over [first open, last change], levels after all changes
 * sharing a timestamp (sweep.h). */
static void brute(struct chg *c, uint32_t n, struct conc *o)
{
	int level = 0;

	memset(o, 0, sizeof(*o));
	qsort(c, n, sizeof(*c), cmp_chg);
	for (uint32_t i = 0; i < n;) {
		uint64_t t = c[i].t;

		while (i < n && c[i].t == t)
			level += c[i++].d;
		assert_true(level >= 0 && level < 64);
		if (i < n && c[i].t > t) {
			o->level_ns[level] += c[i].t - t;
			o->observed += c[i].t - t;
			if (level > (int)o->max)
				o->max = (uint32_t)level;
		}
	}
}

static uint32_t pct(const struct conc *o, unsigned p100)
{
	uint64_t cum = 0;

	for (uint32_t c = 0; c < 64; c++) {
		if (o->level_ns[c] == 0)
			continue;
		cum += o->level_ns[c];
		if (cum * 10000 >= (uint64_t)p100 * o->observed)
			return c;
	}
	return 0;
}

/* The reference (completed requests plus the expired ones to their close) or the
 * truth (every request to its real END). */
static void reference(bool truth, struct conc *o)
{
	static struct chg c[MAX_CHG];
	uint32_t n = 0;

	for (uint32_t i = 0; i < N_REQ; i++) {
		c[n++] = (struct chg){ rq[i].b, +1 };
		uint64_t end = rq[i].lost && !truth ? expected_close(&rq[i]) : rq[i].e;

		c[n++] = (struct chg){ end, -1 };
	}
	brute(c, n, o);
}

/* --- feeding the engine --- */

struct ev {
	uint64_t t;
	uint32_t req;
	uint8_t kind;
};

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	return x->t < y->t ? -1 : x->t > y->t;
}

static struct rp_engine *feed(uint64_t expire_ns)
{
	static struct ev evs[2 * N_REQ];
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	uint32_t n = 0, name;
	uint64_t next_sweep = SWEEP;
	bool told = false;
	int src;

	rp_engine_cfg_default(&cfg);
	cfg.n_windows = 0; /* the all-time rows only: no sub-window accruals */
	cfg.async_expire_ns = expire_ns;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	src = rp_engine_add_source(e, "p", 1, 0);
	assert_true(src >= 0);
	name = rp_engine_name(e, (uint32_t)src, "req", "http", "", 0);
	for (uint32_t i = 0; i < N_REQ; i++) {
		evs[n++] = (struct ev){ rq[i].b, i, RP_EV_ASYNC_BEGIN };
		if (!rq[i].lost)
			evs[n++] = (struct ev){ rq[i].e, i, RP_EV_ASYNC_END };
	}
	qsort(evs, n, sizeof(*evs), cmp_ev);
	for (uint32_t i = 0; i < n; i++) {
		struct rp_event ev = { .ts = evs[i].t,
				       .name = name,
				       .kind = evs[i].kind,
				       .track = 1000 + evs[i].req,
				       .arg = 1 };

		while (next_sweep <= evs[i].t) { /* the drain tick, in event time */
			if (!told && next_sweep > T_DROP) {
				rp_engine_source_dropped(e, (uint32_t)src, T_DROP);
				told = true;
			}
			rp_engine_expire(e, next_sweep);
			next_sweep += SWEEP;
		}
		rp_engine_event(e, (uint32_t)src, 0, &ev);
	}
	return e;
}

static const struct rp_report_fn *fn_of(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

static void check_row(const struct rp_report_conc *c, const struct conc *o)
{
	assert_int_equal(c->observed_ns, o->observed);
	assert_int_equal(c->p50, pct(o, 5000));
	assert_int_equal(c->p90, pct(o, 9000));
	assert_int_equal(c->p95, pct(o, 9500));
	assert_int_equal(c->p99, pct(o, 9900));
	assert_int_equal(c->max, o->max);
	assert_int_equal(c->now, 0);
}

/* Lost ENDs: the requests expire, concurrency comes down, exactly as the reference. */
static void test_expire_lost_ends_come_down(void **state)
{
	struct conc ref, truth;
	struct rp_report r;
	struct rp_engine *e;
	const struct rp_report_fn *f;
	uint64_t lost = 0, stale = 0;

	(void)state;
	make_requests();
	e = feed(EXPIRE);
	assert_int_equal(rp_engine_report(e, &r), 0);
	for (uint32_t i = 0; i < N_REQ; i++)
		if (rq[i].lost) {
			lost++;
			if (expected_close(&rq[i]) - rq[i].b > stale)
				stale = expected_close(&rq[i]) - rq[i].b;
		}
	assert_int_equal(lost, 19);
	reference(false, &ref);
	reference(true, &truth);
	check_row(&r.conc[0], &ref); /* overall */
	check_row(&r.conc[1], &ref); /* roots: one span a request */
	/* What the report says of it: the expiry, what it closed, the bound. */
	assert_int_equal(r.expiry.expire_ns, EXPIRE);
	assert_int_equal(r.expiry.requests, lost);
	assert_int_equal(r.expiry.spans, lost);
	assert_int_equal(r.expiry.stale_max_ns, stale);
	assert_true(stale < EXPIRE + SWEEP);
	assert_int_equal(r.expiry.suspect_requests, 0);
	assert_int_equal(r.expiry.peak_spans, expected_peak(rq[N_REQ - 1].e / SWEEP * SWEEP));
	assert_int_equal(r.expiry.peak_spans, lost + 1); /* and request 110 */
	assert_int_equal(r.anomalies[RP_ANOM_DROP_LOST], lost);
	assert_int_equal(r.anomalies[RP_ANOM_END_UNMATCHED], 0);
	assert_int_equal(r.anomalies[RP_ANOM_TRACK_CAP], 0);
	f = fn_of(&r, "req");
	assert_non_null(f);
	assert_int_equal(f->calls, N_REQ - lost); /* the lost ones are in no figure */
	assert_int_equal(f->drop_lost, lost);
	/* Within the bound of the truth: each level at most peak_spans above it. */
	assert_true(r.conc[0].max <= truth.max + r.expiry.peak_spans);
	assert_true(r.conc[0].p50 <= pct(&truth, 5000) + r.expiry.peak_spans);
	assert_true(r.conc[0].p99 <= pct(&truth, 9900) + r.expiry.peak_spans);
	assert_true(r.conc[0].max >= truth.max); /* never below it: only longer spans */
	print_message("  max %u p99 %u (truth %u %u), %llu expired, stale <= %llu ms\n",
		      r.conc[0].max, r.conc[0].p99, truth.max, pct(&truth, 9900),
		      (unsigned long long)r.expiry.requests,
		      (unsigned long long)(r.expiry.stale_max_ns / MS));
	rp_report_free(&r);
	rp_engine_close(e);
}

/* With no expiry, as before: the lost requests stay open to the end. */
static void test_expire_never_keeps_them_open(void **state)
{
	struct rp_report r;
	struct rp_engine *e;

	(void)state;
	make_requests();
	e = feed(RP_EXPIRE_NEVER);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.conc[0].now, 19);
	assert_int_equal(r.expiry.requests, 0);
	assert_int_equal(r.expiry.expire_ns, 0);
	assert_int_equal(r.expiry.suspect_requests, 19); /* the bound still says so */
	assert_int_equal(r.expiry.suspect_spans, 19);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* No drop reported: nothing is suspect, nothing expires however long it idles. */
static void test_expire_needs_a_drop(void **state)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t name;
	int src;

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.async_expire_ns = EXPIRE;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	src = rp_engine_add_source(e, "p", 1, 0);
	name = rp_engine_name(e, (uint32_t)src, "req", "", "", 0);
	rp_engine_event(
		e, (uint32_t)src, 0,
		&(struct rp_event){
			.ts = MS, .name = name, .kind = RP_EV_ASYNC_BEGIN, .track = 7, .arg = 1 });
	rp_engine_expire(e, 1000 * MS);
	/* A drop reported before it began: not suspect either. */
	rp_engine_source_dropped(e, (uint32_t)src, MS / 2);
	rp_engine_expire(e, 2000 * MS);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.expiry.requests, 0);
	assert_int_equal(r.conc[0].now, 1);
	rp_report_free(&r);
	/* Now one after it began: it goes at the next sweep. */
	rp_engine_source_dropped(e, (uint32_t)src, 2000 * MS);
	rp_engine_expire(e, 3000 * MS);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.expiry.requests, 1);
	assert_int_equal(r.expiry.stale_max_ns, 2999 * MS);
	assert_int_equal(r.expiry.peak_spans, 1);
	assert_int_equal(r.conc[0].now, 0);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* A tree track (a request with tasks): its open frames are lost together, each
 * leaving the sweeps; the roots row counts the request once. */
static void test_expire_tree_track(void **state)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t req, task;
	int src;

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.async_expire_ns = EXPIRE;
	cfg.n_windows = 0;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	src = rp_engine_add_source(e, "p", 1, 0);
	req = rp_engine_name(e, (uint32_t)src, "request", "", "", 0);
	task = rp_engine_name(e, (uint32_t)src, "task", "", "", 0);
	rp_engine_event(e, (uint32_t)src, 0,
			&(struct rp_event){ .ts = MS,
					    .name = req,
					    .kind = RP_EV_CHILD_BEGIN,
					    .track = 9,
					    .arg = RP_CHILD_ARG(0, 1) });
	for (uint32_t k = 0; k < 2; k++)
		rp_engine_event(e, (uint32_t)src, 0,
				&(struct rp_event){ .ts = 2 * MS,
						    .name = task,
						    .kind = RP_EV_CHILD_BEGIN,
						    .track = 9,
						    .arg = RP_CHILD_ARG(1, 2 + k) });
	rp_engine_source_dropped(e, (uint32_t)src, 3 * MS);
	rp_engine_expire(e, 51 * MS); /* 49 ms idle: not yet */
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.conc[0].now, 3);
	assert_int_equal(r.expiry.suspect_requests, 1);
	assert_int_equal(r.expiry.suspect_spans, 3);
	rp_report_free(&r);
	rp_engine_expire(e, 60 * MS);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.conc[0].now, 0);
	assert_int_equal(r.conc[1].now, 0);
	assert_int_equal(r.conc[0].max, 3);
	assert_int_equal(r.conc[1].max, 1);
	assert_int_equal(r.conc[0].observed_ns, 59 * MS);
	assert_int_equal(r.expiry.requests, 1);
	assert_int_equal(r.expiry.spans, 3);
	assert_int_equal(r.expiry.stale_max_ns, 58 * MS);
	assert_int_equal(r.expiry.peak_spans, 3);
	assert_int_equal(r.anomalies[RP_ANOM_DROP_LOST], 3);
	assert_int_equal(fn_of(&r, "task")->drop_lost, 2);
	assert_int_equal(fn_of(&r, "request")->drop_lost, 1);
	assert_int_equal(fn_of(&r, "task")->calls, 0);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* When its source ends, a suspect request is lost (its END may be), not cut at the
 * end with a made-up duration; with the expiry off it is cut, as before. */
static void test_expire_source_end(void **state)
{
	static const uint64_t expire[2] = { EXPIRE, RP_EXPIRE_NEVER };

	(void)state;
	for (int k = 0; k < 2; k++) {
		struct rp_engine_cfg cfg;
		struct rp_engine *e;
		struct rp_report r;
		uint32_t name;
		int src;

		rp_engine_cfg_default(&cfg);
		cfg.async_expire_ns = expire[k];
		assert_int_equal(rp_engine_open(&cfg, &e), 0);
		src = rp_engine_add_source(e, "p", 1, 0);
		name = rp_engine_name(e, (uint32_t)src, "req", "", "", 0);
		for (uint64_t id = 1; id <= 2; id++) /* 2 begins after the drop: not suspect */
			rp_engine_event(e, (uint32_t)src, 0,
					&(struct rp_event){ .ts = id * 2 * MS,
							    .name = name,
							    .kind = RP_EV_ASYNC_BEGIN,
							    .track = id,
							    .arg = 1 });
		rp_engine_source_dropped(e, (uint32_t)src, 3 * MS);
		rp_engine_close_source(e, (uint32_t)src, 10 * MS, RP_ANOM_KIND_COUNT);
		assert_int_equal(rp_engine_report(e, &r), 0);
		assert_int_equal(r.expiry.requests, k == 0 ? 1 : 0);
		assert_int_equal(r.anomalies[RP_ANOM_DROP_LOST], k == 0 ? 1 : 0);
		assert_int_equal(r.truncated, k == 0 ? 1 : 2);
		assert_int_equal(fn_of(&r, "req")->calls, k == 0 ? 1 : 2);
		assert_int_equal(fn_of(&r, "req")->drop_lost, k == 0 ? 1 : 0);
		assert_int_equal(r.conc[0].now, 0);
		rp_report_free(&r);
		rp_engine_close(e);
	}
}

/* The auto expiry: the longer of 100 ms and 4 x the longest gap between two records
 * of a request (here its BEGIN and END; a track's first BEGIN starts no gap). */
static void test_expire_auto(void **state)
{
	struct rp_engine *e;
	uint32_t name;
	int src;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_engine_async_expire_ns(e), RP_EXPIRE_AUTO_MIN_NS);
	src = rp_engine_add_source(e, "p", 1, 0);
	name = rp_engine_name(e, (uint32_t)src, "req", "", "", 0);
	rp_engine_event(
		e, (uint32_t)src, 0,
		&(struct rp_event){
			.ts = MS, .name = name, .kind = RP_EV_ASYNC_BEGIN, .track = 7, .arg = 1 });
	rp_engine_event(e, (uint32_t)src, 0,
			&(struct rp_event){ .ts = 701 * MS,
					    .name = name,
					    .kind = RP_EV_ASYNC_END,
					    .track = 7,
					    .arg = 1 });
	assert_int_equal(rp_engine_async_expire_ns(e), 2800 * MS);
	/* A new request long after: its first BEGIN starts no gap. */
	rp_engine_event(e, (uint32_t)src, 0,
			&(struct rp_event){ .ts = 9000 * MS,
					    .name = name,
					    .kind = RP_EV_ASYNC_BEGIN,
					    .track = 7,
					    .arg = 1 });
	assert_int_equal(rp_engine_async_expire_ns(e), 2800 * MS);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expire_lost_ends_come_down),
		cmocka_unit_test(test_expire_never_keeps_them_open),
		cmocka_unit_test(test_expire_needs_a_drop),
		cmocka_unit_test(test_expire_tree_track),
		cmocka_unit_test(test_expire_source_end),
		cmocka_unit_test(test_expire_auto),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
