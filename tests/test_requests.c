// SPDX-License-Identifier: MIT
/*
 * Requests in flight, exactly (analyses.h, report.h rp_report.requests): a batching
 * server's records as its producer writes them (wire.h), fed to the engine. Requests
 * are async spans (RP_EV_ASYNC_BEGIN at the top of their own track, as rp_async_begin()
 * and Python's request() write them) with nested async steps, some on tree tracks
 * (RP_EV_CHILD_BEGIN) with concurrent tasks; and a batching loop on a thread holds
 * spans ("batch", with a "forward" inside) that belong to no request, some of which
 * outlive every request. The requests row must equal a brute-force sweep over the
 * requests' own timestamps alone (time at each level, percentiles, max, mean, now),
 * while the roots row, which counts the batching loop too, must not. Then live: the
 * demo server (`ringprof run` + `ringprof-demo`, whose workers hold handle_request
 * spans on their own threads beside the requests' async tracks), against a brute force
 * over the request spans the flight recorder kept (all of them: it must not wrap).
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
#include "snapshot.h"
#include "support.h"

#define US	1000ull
#define NREQ	400u
#define NOPEN	3u /* requests still open at the report */
#define MAXEV	(NREQ * 8 + 4096)

struct ev {
	uint64_t t;
	struct rp_event e;
	uint64_t thread; /* 0: an async record */
	uint32_t seq;	 /* ENDs before BEGINs at one time, then in generation order */
	bool end;
};

static struct ev evs[MAXEV];
static uint32_t n_ev;
static uint64_t req_b[NREQ], req_e[NREQ]; /* req_e 0: still open */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t m)
{
	return rp_test_rnd(&rng, m);
}

static void add(uint64_t t, uint8_t kind, uint32_t name, uint64_t track, uint64_t arg,
		uint64_t thread, bool end)
{
	assert_true(n_ev < MAXEV);
	evs[n_ev] = (struct ev){ .t = t, .e = { .ts = t, .name = name, .kind = kind,
						.track = track, .arg = arg },
				 .thread = thread, .seq = n_ev, .end = end };
	n_ev++;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->end != y->end)
		return x->end ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The brute force: time at each level of the requests alone over [first BEGIN, last
 * request record], the level after all changes sharing a timestamp (sweep.h). */
struct conc {
	uint64_t observed, level_ns[NREQ + 1];
	uint32_t max, now;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void brute(struct conc *o)
{
	static uint64_t ts[2 * NREQ];
	uint32_t n = 0;

	memset(o, 0, sizeof(*o));
	for (uint32_t i = 0; i < NREQ; i++) {
		ts[n++] = req_b[i];
		if (req_e[i])
			ts[n++] = req_e[i];
		else
			o->now++;
	}
	qsort(ts, n, sizeof(*ts), cmp_u64);
	for (uint32_t k = 0; k + 1 < n; k++) {
		uint32_t level = 0;

		if (ts[k + 1] == ts[k])
			continue;
		for (uint32_t i = 0; i < NREQ; i++) /* open over [ts[k], ts[k + 1]) */
			level += req_b[i] <= ts[k] && (req_e[i] == 0 || req_e[i] > ts[k]);
		o->level_ns[level] += ts[k + 1] - ts[k];
		o->observed += ts[k + 1] - ts[k];
		o->max = level > o->max ? level : o->max;
	}
}

static uint32_t pct(const struct conc *o, unsigned p100)
{
	uint64_t cum = 0; /* observed < 2^40 here: no overflow */

	for (uint32_t c = 0; c <= NREQ; c++) {
		cum += o->level_ns[c];
		if (o->level_ns[c] && cum * 10000 >= o->observed * p100)
			return c;
	}
	return 0;
}

static uint64_t mean_milli(const struct conc *o)
{
	uint64_t area = 0;

	for (uint32_t c = 1; c <= NREQ; c++)
		area += c * o->level_ns[c];
	return o->observed ? (uint64_t)((double)area / (double)o->observed * 1000.0 + 0.5) : 0;
}

/* Requests arriving every 0..400 us, lasting 50 us .. 20 ms, each with a tokenize
 * step and (every third one, on a tree track) two concurrent tasks; the batching
 * loop runs back to back all along, on a thread, outside any request. */
static void generate(uint32_t n_request, uint32_t n_tok, uint32_t n_task, uint32_t n_batch,
		     uint32_t n_fwd)
{
	uint64_t t = 1000 * US, end = 0;

	n_ev = 0;
	for (uint32_t i = 0; i < NREQ; i++) {
		uint64_t b = t, d = 50 * US + rnd(20000 * US), track = 1000 + i;
		uint64_t tb = b + 1 + rnd(d / 2), te = tb + 1 + rnd(d / 4);

		req_b[i] = b;
		req_e[i] = i >= NREQ - NOPEN ? 0 : b + d;
		if (i % 3 == 2) { /* a tree track: the request, two tasks at once */
			add(b, RP_EV_CHILD_BEGIN, n_request, track, RP_CHILD_ARG(0, 1), 0, false);
			add(tb, RP_EV_CHILD_BEGIN, n_task, track, RP_CHILD_ARG(1, 2), 0, false);
			add(tb + 1, RP_EV_CHILD_BEGIN, n_task, track, RP_CHILD_ARG(1, 3), 0, false);
			add(te, RP_EV_CHILD_END, n_task, track, 2, 0, true);
			add(te + 1, RP_EV_CHILD_END, n_task, track, 3, 0, true);
			if (req_e[i])
				add(req_e[i], RP_EV_CHILD_END, n_request, track, 1, 0, true);
		} else {
			add(b, RP_EV_ASYNC_BEGIN, n_request, track, 1, 0, false);
			add(tb, RP_EV_ASYNC_BEGIN, n_tok, track, 2, 0, false);
			add(te, RP_EV_ASYNC_END, n_tok, track, 2, 0, true);
			if (req_e[i])
				add(req_e[i], RP_EV_ASYNC_END, n_request, track, 1, 0, true);
		}
		end = req_e[i] > end ? req_e[i] : end;
		t += rnd(400 * US);
	}
	/* The batching loop: from before the first request to after the last one. */
	for (t = 500 * US; t < end + 5000 * US;) {
		uint64_t d = 100 * US + rnd(3000 * US);

		add(t, RP_EV_BEGIN, n_batch, 0, 0, 7, false);
		add(t + d / 3, RP_EV_BEGIN, n_fwd, 0, 0, 7, false);
		add(t + 2 * d / 3, RP_EV_END, n_fwd, 0, 0, 7, true);
		add(t + d, RP_EV_END, n_batch, 0, 0, 7, true);
		t += d + rnd(50 * US);
	}
	add(t, RP_EV_BEGIN, n_batch, 0, 0, 7, false); /* a batch still running */
	qsort(evs, n_ev, sizeof(*evs), cmp_ev);
}

static void test_requests_exact_beside_batching_loop(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	struct conc o;
	uint32_t src, id[5];
	const char *names[5] = { "request", "tokenize", "task", "batch", "forward" };

	(void)state;
	rp_engine_cfg_default(&c);
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "server", 1, 0);
	for (int i = 0; i < 5; i++)
		id[i] = rp_engine_name(e, src, names[i], "", "", 0);
	generate(id[0], id[1], id[2], id[3], id[4]);
	for (uint32_t i = 0; i < n_ev; i++)
		rp_engine_event(e, src, evs[i].thread, &evs[i].e);
	assert_int_equal(rp_engine_report(e, &r), 0);
	brute(&o);
	assert_true(rp_report_has_requests(&r));
	assert_string_equal(r.requests.name, "requests");
	assert_int_equal(r.requests.observed_ns, o.observed);
	assert_int_equal(r.requests.p50, pct(&o, 5000));
	assert_int_equal(r.requests.p90, pct(&o, 9000));
	assert_int_equal(r.requests.p95, pct(&o, 9500));
	assert_int_equal(r.requests.p99, pct(&o, 9900));
	assert_int_equal(r.requests.max, o.max);
	assert_int_equal(r.requests.mean_milli, mean_milli(&o));
	assert_int_equal(r.requests.now, o.now);
	assert_int_equal(r.requests.over_cap_ns, 0);
	print_message("    requests: max %u p99 %u mean %.3f now %u; roots: max %u now %u\n",
		      r.requests.max, r.requests.p99, (double)r.requests.mean_milli / 1000,
		      r.requests.now, r.conc[1].max, r.conc[1].now);
	/* roots counts the batching loop's spans too: one more whenever it is busy, and
	 * now (a batch still runs). */
	assert_true(r.n_conc >= 2);
	assert_int_equal(r.conc[1].now, o.now + 1);
	assert_true(r.conc[1].max > r.requests.max);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* No request span at all (a batching loop, threads only): the figure is absent. */
static void test_requests_absent_without_requests(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t src, n;

	(void)state;
	rp_engine_cfg_default(&c);
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "loop", 1, 0);
	n = rp_engine_name(e, src, "batch", "", "", 0);
	for (uint64_t t = 1; t < 100; t += 2) {
		struct rp_event b = { .ts = t * US, .name = n, .kind = RP_EV_BEGIN };
		struct rp_event x = { .ts = (t + 1) * US, .name = n, .kind = RP_EV_END };

		rp_engine_event(e, src, 7, &b);
		rp_engine_event(e, src, 7, &x);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_false(rp_report_has_requests(&r));
	assert_true(r.n_conc >= 2 && r.conc[1].max == 1);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* The demo, live: requests against the recorder's request spans (77 without RP_BIN_DIR);
 * a recorder that holds every span of the run (run's default keeps 8192). */
static void test_requests_demo_exact(void **state)
{
	const char *bin = getenv("RP_BIN_DIR");
	char cmd[2048], dir[64], path[128], why[RP_WHY_MAX];
	struct rp_report r;
	struct conc o;
	uint32_t n = 0, handle = RP_NONE;

	(void)state;
	if (bin == NULL)
		skip();
	snprintf(dir, sizeof(dir), "/tmp/rp_requests_%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/s.msgpack", dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; mkdir -p %s; S=rq%d; %s/ringprof run --session $S --snapshot-dir %s "
		 "--recorder-spans 65536 --quiet & E=$!; sleep 0.5; RINGPROF_SESSION=$S %s/ringprof-demo --quiet "
		 "--duration 2 --rate 150 --time-scale 0.2 >/dev/null; %s/ringprof snapshot "
		 "--session $S -o %s >/dev/null; kill $E; wait $E || true",
		 dir, (int)getpid(), bin, dir, bin, bin, path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(rp_snapshot_read_file(path, &r, why), 0);
	assert_int_equal(r.recorder.wrapped, 0);
	assert_true(rp_report_has_requests(&r));
	for (uint32_t i = 0; i < r.recorder.n_spans && n < NREQ; i++) {
		const struct rp_report_rspan *sp = &r.recorder.spans[i];

		if (sp->depth == 0 && r.recorder.tracks[sp->track].kind == 2) {
			assert_string_equal(r.fns[sp->fn].name, "request");
			req_b[n] = sp->start_ns;
			req_e[n++] = sp->start_ns + sp->dur_ns;
		}
		if (strcmp(r.fns[sp->fn].name, "handle_request") == 0)
			handle = sp->fn;
	}
	assert_true(n > 100 && n < NREQ && handle != RP_NONE);
	for (uint32_t i = n; i < NREQ; i++) /* the brute force's unused slots: nothing */
		req_b[i] = req_e[i] = req_b[0];
	brute(&o);
	print_message("    demo: %u requests, max %u p99 %u mean %.3f; roots max %u\n", n,
		      r.requests.max, r.requests.p99, (double)r.requests.mean_milli / 1000,
		      r.conc[1].max);
	assert_int_equal(r.requests.observed_ns, o.observed);
	assert_int_equal(r.requests.p50, pct(&o, 5000));
	assert_int_equal(r.requests.p99, pct(&o, 9900));
	assert_int_equal(r.requests.max, o.max);
	assert_int_equal(r.requests.mean_milli, mean_milli(&o));
	assert_int_equal(r.requests.now, 0);
	assert_true(r.conc[1].max > r.requests.max); /* workers' handle_request: roots too */
	rp_report_free(&r);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requests_exact_beside_batching_loop),
		cmocka_unit_test(test_requests_absent_without_requests),
		cmocka_unit_test(test_requests_demo_exact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
