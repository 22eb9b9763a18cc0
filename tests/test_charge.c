// SPDX-License-Identifier: MIT
/*
 * Charges of batched work (engine/core/charge.h, RP_LINK_CHARGE): a batching server's
 * requests (async and tree tracks, two request names) and its batch loop, whose
 * `forward` spans (on a task's track, or nested in a loop span on a thread's stack)
 * each serve a random set of the requests open then, fed to the engine as a producer
 * writes them. Against a brute force over the same records: each request's charged_ns
 * in the slowest list and each request name's charged_ns and charged exact (dur / N
 * per request, the remainder to the first charged; a request that ended before the
 * forward gets nothing and is counted late, its share still in its name's total);
 * duplicates charged once; orphans (an unknown request, no span of that name open)
 * and cap hits (past 64 requests on a span, past 64 charged spans open) counted
 * exactly; every span's own figures as without the charges. Two engines' snapshots
 * merged: the charges add. The text report shows them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "snapshot_util.h"
#include "merge.h"
#include "render.h"
#include "snapshot.h"
#include "support.h"

#define US	1000ull
#define MS	1000000ull
#define NREQ	400u
#define NFWD	1400u
#define MAXEV	(NREQ * 6 + NFWD * 90 + 64)
#define LOOP_THREAD 7u
#define IDLE_THREAD 8u

enum { N_REQ_A, N_REQ_B, N_FORWARD, N_LOOP, N_STEP, N_NAMES };

static const char *const names[N_NAMES] = { "request{model=a}", "request{model=b}", "forward",
					    "batch_loop", "step" };
static const char *const cats[N_NAMES] = { "REQUEST", "REQUEST", "LLM", "SCHED", "" };

struct ev {
	struct rp_event e;
	uint64_t thread;
	uint32_t seq;
	bool charge;
};

static struct ev evs[MAXEV];
static uint32_t n_ev;
static uint64_t rng;

/* The brute force's figures: per request, its start, end and charged sum; per
 * request name, the shares' sum and count; the anomalies. */
static uint64_t req_b[NREQ], req_e[NREQ], req_charged[NREQ];
static uint64_t name_ns[2], name_n[2];
static uint64_t want_orphan, want_late, want_cap;

static uint64_t rnd(uint64_t m)
{
	return rp_test_rnd(&rng, m);
}

static void add(uint64_t t, uint8_t kind, uint8_t flags, uint32_t name, uint64_t track,
		uint64_t arg, uint64_t thread)
{
	assert_true(n_ev < MAXEV);
	evs[n_ev] = (struct ev){ .e = { .ts = t, .name = name, .kind = kind, .flags = flags,
					.track = track, .arg = arg },
				 .thread = thread, .seq = n_ev,
				 .charge = kind == RP_EV_LINK };
	n_ev++;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->e.ts != y->e.ts)
		return x->e.ts < y->e.ts ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static uint64_t req_track(uint32_t i)
{
	return 100 + i;
}

/*
 * Times: request records at 1 mod 4 ns, forwards' BEGIN/END at 2 mod 4, charges at
 * 3 mod 4: no two of them tie, and none falls on a sub-window boundary. Requests
 * start every 0..4 ms and last 40..300 ms; every third is a tree track. The loop
 * runs forwards back to back from the first request on: even ones on a task's track
 * of their own, odd ones nested in batch_loop on the loop thread (a step inside some,
 * so the forward is not always the innermost frame). Each forward charges the
 * requests open at its start with probability 1/2 (all of them, past the cap, for
 * every 97th), some twice, some orphans.
 */
static void generate(const uint32_t *id, uint64_t seed)
{
	uint64_t t = 1000 * MS, fs, end;
	uint32_t q[NREQ];

	rng = seed;
	n_ev = 0;
	want_orphan = want_late = want_cap = 0;
	memset(name_ns, 0, sizeof(name_ns));
	memset(name_n, 0, sizeof(name_n));
	memset(req_charged, 0, sizeof(req_charged));
	for (uint32_t i = 0; i < NREQ; i++) {
		uint64_t b = (t & ~3ull) + 1, d = (40 * MS + rnd(260 * MS)) & ~3ull;
		uint64_t tr = req_track(i);
		uint32_t nm = id[N_REQ_A + (i & 1)];

		req_b[i] = b;
		req_e[i] = b + d;
		if (i % 3 == 0) {
			add(b, RP_EV_CHILD_BEGIN, 0, nm, tr, RP_CHILD_ARG(0, 1), 1);
			add(b + d, RP_EV_CHILD_END, 0, nm, tr, 1, 1);
		} else {
			add(b, RP_EV_ASYNC_BEGIN, 0, nm, tr, 1, 1);
			add(b + d, RP_EV_ASYNC_END, 0, nm, tr, 1, 1);
		}
		t += 4 + rnd(4 * MS);
	}
	end = t + 400 * MS;
	fs = ((req_b[0] + 100 * US) & ~3ull) + 2;
	add(fs - 4, RP_EV_BEGIN, 0, id[N_LOOP], 0, 0, LOOP_THREAD);
	for (uint32_t k = 0; k < NFWD && fs < end; k++) {
		uint64_t d = (300 * US + rnd(600 * US)) & ~3ull, fe = fs + d, ct = fs + 1;
		uint64_t task = 1000000 + k, dur = fe - fs, first = 0;
		bool on_task = k % 2 == 0;
		uint32_t n = 0, all = k % 97 == 50;

		if (on_task) {
			add(fs, RP_EV_CHILD_BEGIN, RP_CHILD_TASK, id[N_FORWARD], task,
			    RP_CHILD_ARG(0, 1), 1);
			add(fe, RP_EV_CHILD_END, 0, id[N_FORWARD], task, 1, 1);
		} else {
			add(fs, RP_EV_BEGIN, 0, id[N_FORWARD], 0, 0, LOOP_THREAD);
			add(fe, RP_EV_END, 0, id[N_FORWARD], 0, 0, LOOP_THREAD);
			if (k % 3 == 1) { /* a step open while it charges */
				add(fs + 2, RP_EV_BEGIN, 0, id[N_STEP], 0, 0, LOOP_THREAD);
				add(fs + 2 + 4 * (2 + rnd(8)), RP_EV_END, 0, id[N_STEP], 0, 0,
				    LOOP_THREAD);
			}
		}
		for (uint32_t i = 0; i < NREQ; i++) {
			uint64_t at = ct + 4 * n;

			if (req_b[i] >= fs || req_e[i] <= at + 4 * 80 || (!all && rnd(2)))
				continue;
			add(at, RP_EV_LINK, RP_LINK_CHARGE, id[N_FORWARD], on_task ? task : 0,
			    req_track(i), LOOP_THREAD);
			if (n == RP_CHARGE_PER_SPAN) {
				want_cap++; /* past the cap: left out, and not one of the n */
				continue;
			}
			q[n++] = i;
		}
		if (n > 0 && k % 10 == 3) /* a request charged twice: one share */
			add(ct + 4 * 75, RP_EV_LINK, RP_LINK_CHARGE, id[N_FORWARD],
			    on_task ? task : 0, req_track(q[0]), LOOP_THREAD);
		if (k % 17 == 5) { /* a request nobody opened */
			add(ct + 4 * 76, RP_EV_LINK, RP_LINK_CHARGE, id[N_FORWARD],
			    on_task ? task : 0, 999999, LOOP_THREAD);
			want_orphan++;
		}
		if (n > 0 && k % 19 == 2) { /* no span of that name open on that thread */
			add(ct + 4 * 77, RP_EV_LINK, RP_LINK_CHARGE, id[N_FORWARD], 0,
			    req_track(q[0]), IDLE_THREAD);
			want_orphan++;
		}
		for (uint32_t j = 0; j < n; j++) {
			uint32_t i = q[j];
			uint64_t share = dur / n + (j == 0 ? dur % n : 0);

			first += share;
			name_ns[i & 1] += share;
			name_n[i & 1]++;
			if (req_e[i] < fe)
				want_late++; /* ended first: its name's, not its own */
			else
				req_charged[i] += share;
		}
		assert_true(n == 0 || first == dur); /* the shares sum to the duration */
		fs = ((fe + 4 + rnd(200 * US)) & ~3ull) + 2;
	}
	add((end & ~3ull) + 2, RP_EV_END, 0, id[N_LOOP], 0, 0, LOOP_THREAD);
	qsort(evs, n_ev, sizeof(*evs), cmp_ev);
}

/* An engine fed the records of the run of @seed, charges too unless @no_charges. */
static struct rp_engine *feed(uint64_t seed, bool no_charges)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	uint32_t src, id[N_NAMES];

	rp_engine_cfg_default(&c);
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "server", 1, 0);
	for (int i = 0; i < N_NAMES; i++)
		id[i] = rp_engine_name(e, src, names[i], cats[i], "", 0);
	generate(id, seed);
	for (uint32_t i = 0; i < n_ev; i++)
		if (!no_charges || !evs[i].charge)
			rp_engine_event(e, src, evs[i].thread, &evs[i].e);
	return e;
}

static const struct rp_report_fn *row(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	fail_msg("no row %s", name);
	return NULL;
}

/* The request of slowest entry @s (by its track and start), or NREQ. */
static uint32_t request_of(const struct rp_report *r, const struct rp_report_span *s)
{
	if (strncmp(r->fns[s->fn].name, "request{", 8) != 0)
		return NREQ;
	for (uint32_t i = 0; i < NREQ; i++)
		if (req_track(i) == s->track && req_b[i] == s->start_ns)
			return i;
	fail_msg("slowest entry of no request: track %llu", (unsigned long long)s->track);
	return NREQ;
}

static void test_charge_shares_exact(void **state)
{
	struct rp_engine *e, *plain;
	struct rp_report r, p;
	uint32_t reqs = 0;
	uint64_t charged_total = 0;

	(void)state;
	e = feed(0x2545f4914f6cdd1dull, false);
	plain = feed(0x2545f4914f6cdd1dull, true);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(rp_engine_report(plain, &p), 0);

	for (int k = 0; k < 2; k++) {
		const struct rp_report_fn *f = row(&r, names[N_REQ_A + k]);

		assert_int_equal(f->charged_ns, name_ns[k]);
		assert_int_equal(f->charged, name_n[k]);
		assert_true(name_n[k] > 1000);
	}
	assert_int_equal(r.anomalies[RP_ANOM_CHARGE_ORPHAN], want_orphan);
	assert_int_equal(r.anomalies[RP_ANOM_CHARGE_LATE], want_late);
	assert_int_equal(r.anomalies[RP_ANOM_CHARGE_CAP], want_cap);
	assert_true(want_orphan > 10 && want_late > 10 && want_cap > 0);
	assert_int_equal(r.anomalies[RP_ANOM_BAD_EVENT], 0);

	/* each request's own sum, where it is a slowest entry */
	for (uint32_t j = 0; j < r.bottlenecks.n_slowest; j++) {
		const struct rp_report_span *s = &r.bottlenecks.slowest[j];
		uint32_t i = request_of(&r, s);

		if (i == NREQ) {
			assert_int_equal(s->charged_ns, 0);
			continue;
		}
		assert_int_equal(s->charged_ns, req_charged[i]);
		charged_total += s->charged_ns;
		reqs++;
	}
	assert_true(reqs >= 5 && charged_total > 0);

	/* an attribution view: every row, and the slowest spans, as without charges */
	assert_int_equal(r.n_fns, p.n_fns);
	for (uint32_t i = 0; i < p.n_fns; i++) {
		const struct rp_report_fn *a = &p.fns[i], *b = row(&r, a->name);

		assert_int_equal(a->charged_ns + a->charged, 0);
		assert_int_equal(b->calls, a->calls);
		assert_int_equal(b->self_ns, a->self_ns);
		assert_int_equal(b->cum_ns, a->cum_ns);
		assert_int_equal(b->total_ns, a->total_ns);
		assert_int_equal(b->p99_ns, a->p99_ns);
	}
	assert_int_equal(r.bottlenecks.n_slowest, p.bottlenecks.n_slowest);
	for (uint32_t i = 0; i < r.bottlenecks.n_slowest; i++)
		assert_int_equal(r.bottlenecks.slowest[i].dur_ns, p.bottlenecks.slowest[i].dur_ns);
	assert_int_equal(r.requests.max, p.requests.max);
	print_message("    %llu + %llu shares, %llu late, %llu orphans, %llu past the cap\n",
		      (unsigned long long)name_n[0], (unsigned long long)name_n[1],
		      (unsigned long long)want_late, (unsigned long long)want_orphan,
		      (unsigned long long)want_cap);
	rp_report_free(&r);
	rp_report_free(&p);
	rp_engine_close(e);
	rp_engine_close(plain);
}

/* Caps: a 65th charged span open at once, and a charge record with two sides set. */
static void test_charge_caps(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t src, req, fwd;
	uint64_t t = 1000 * MS + 1;

	(void)state;
	rp_engine_cfg_default(&c);
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "server", 1, 0);
	req = rp_engine_name(e, src, "request", "REQUEST", "", 0);
	fwd = rp_engine_name(e, src, "forward", "", "", 0);
	rp_engine_event(e, src, 1, &(struct rp_event){ .ts = t, .name = req,
		.kind = RP_EV_ASYNC_BEGIN, .track = 5, .arg = 1 });
	for (uint64_t th = 0; th <= RP_CHARGE_SPANS; th++) /* 65 threads, one forward each */
		rp_engine_event(e, src, 10 + th, &(struct rp_event){ .ts = t + 10 + th,
			.name = fwd, .kind = RP_EV_BEGIN });
	for (uint64_t th = 0; th <= RP_CHARGE_SPANS; th++)
		rp_engine_event(e, src, 10 + th, &(struct rp_event){ .ts = t + 100 + th,
			.name = fwd, .kind = RP_EV_LINK, .flags = RP_LINK_CHARGE, .arg = 5 });
	rp_engine_event(e, src, 10, &(struct rp_event){ .ts = t + 200, .name = fwd,
		.kind = RP_EV_LINK, .flags = RP_LINK_CHARGE | RP_LINK_LAUNCH, .arg = 5 });
	for (uint64_t th = 0; th <= RP_CHARGE_SPANS; th++) /* each 1000 ns long */
		rp_engine_event(e, src, 10 + th, &(struct rp_event){ .ts = t + 1010 + th,
			.name = fwd, .kind = RP_EV_END });
	rp_engine_event(e, src, 1, &(struct rp_event){ .ts = t + 5000, .name = req,
		.kind = RP_EV_ASYNC_END, .track = 5, .arg = 1 });
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.anomalies[RP_ANOM_CHARGE_CAP], 1);
	assert_int_equal(r.anomalies[RP_ANOM_BAD_EVENT], 1);
	assert_int_equal(row(&r, "request")->charged, RP_CHARGE_SPANS);
	assert_int_equal(row(&r, "request")->charged_ns, RP_CHARGE_SPANS * 1000ull);
	assert_int_equal(r.bottlenecks.slowest[0].charged_ns, RP_CHARGE_SPANS * 1000ull);
	rp_report_free(&r);
	rp_engine_close(e);
}

static void test_charge_merge_two_snapshots(void **state)
{
	struct rp_engine *e0, *e1;
	struct rp_report a, b, x, y;
	uint64_t ns[2], n[2];
	char why[256];

	(void)state;
	e0 = feed(0x9e3779b97f4a7c15ull, false);
	memcpy(ns, name_ns, sizeof(ns));
	memcpy(n, name_n, sizeof(n));
	e1 = feed(0x2545f4914f6cdd1dull, false);
	assert_int_equal(rp_engine_report(e0, &a), 0);
	assert_int_equal(rp_engine_report(e1, &b), 0);
	rp_test_through_snapshot(&a, &x);
	rp_test_through_snapshot(&b, &y);
	for (uint32_t j = 0; j < y.bottlenecks.n_slowest; j++) { /* kept through a snapshot */
		uint32_t i = request_of(&y, &y.bottlenecks.slowest[j]);

		if (i < NREQ)
			assert_int_equal(y.bottlenecks.slowest[j].charged_ns, req_charged[i]);
	}
	assert_int_equal(rp_report_merge(&x, &y, why, sizeof(why)), 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(row(&x, names[N_REQ_A + k])->charged_ns, ns[k] + name_ns[k]);
		assert_int_equal(row(&x, names[N_REQ_A + k])->charged, n[k] + name_n[k]);
	}
	assert_int_equal(x.anomalies[RP_ANOM_CHARGE_LATE],
			 a.anomalies[RP_ANOM_CHARGE_LATE] + b.anomalies[RP_ANOM_CHARGE_LATE]);
	rp_report_free(&a);
	rp_report_free(&b);
	rp_report_free(&x);
	rp_report_free(&y);
	rp_engine_close(e0);
	rp_engine_close(e1);
}

/* The text report: a charged column in the slowest list, per request name a line. */
static void test_charge_text_report(void **state)
{
	struct rp_engine *e;
	struct rp_report r;
	char *buf = NULL, want[160];
	size_t len = 0;
	FILE *f;

	(void)state;
	e = feed(0x2545f4914f6cdd1dull, false);
	assert_int_equal(rp_engine_report(e, &r), 0);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(rp_render_text(&r, f, 0), 0);
	fclose(f);
	if (strstr(buf, "   charged ms   conc  name [category]\n") == NULL)
		fail_msg("no charged column in the slowest list:\n%s", buf);
	if (strstr(buf, "\ncharged to requests 2: ") == NULL)
		fail_msg("no charged section:\n%s", buf);
	snprintf(want, sizeof(want), "\n%15llu ", (unsigned long long)name_n[0]);
	if (strstr(buf, want) == NULL)
		fail_msg("no \"%s\" in:\n%s", want, buf);
	free(buf);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Prometheus: per request name, the charged seconds and shares, exact; promtool (when
 * installed) finds the exposition clean. */
static void test_charge_prom(void **state)
{
	struct rp_engine *e;
	struct rp_report r;
	char *buf = NULL, want[200], path[] = "/tmp/rp_charge_XXXXXX";
	size_t len = 0;
	FILE *f;
	int fd;

	(void)state;
	e = feed(0x2545f4914f6cdd1dull, false);
	assert_int_equal(rp_engine_report(e, &r), 0);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(rp_render_prom(&r, f, NULL), 0);
	fclose(f);
	snprintf(want, sizeof(want),
		 "\nringprof_span_charged_total{name=\"%s\",category=\"REQUEST\"} %llu\n",
		 names[N_REQ_B], (unsigned long long)name_n[1]);
	if (strstr(buf, want) == NULL)
		fail_msg("no \"%s\" in:\n%s", want, buf);
	snprintf(want, sizeof(want),
		 "\nringprof_span_charged_seconds_total{name=\"%s\",category=\"REQUEST\"} "
		 "%llu.%09llu\n", names[N_REQ_A], (unsigned long long)(name_ns[0] / 1000000000u),
		 (unsigned long long)(name_ns[0] % 1000000000u));
	if (strstr(buf, want) == NULL)
		fail_msg("no \"%s\" in:\n%s", want, buf);
	assert_null(strstr(buf, "ringprof_span_charged_total{name=\"forward\""));
	if (rp_test_sh(NULL, NULL, "command -v promtool >/dev/null") == 0) {
		fd = mkstemp(path);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, buf, len), (ssize_t)len);
		close(fd);
		assert_int_equal(rp_test_sh(NULL, NULL, "promtool check metrics < %s 1>&2", path),
				 0);
		unlink(path);
	} else {
		print_message("    no promtool: its check skipped\n");
	}
	free(buf);
	rp_report_free(&r);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_charge_shares_exact),
		cmocka_unit_test(test_charge_caps),
		cmocka_unit_test(test_charge_merge_two_snapshots),
		cmocka_unit_test(test_charge_text_report),
		cmocka_unit_test(test_charge_prom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
