// SPDX-License-Identifier: MIT
/*
 * test_errors: spans that end in error (RP_SPAN_ERROR on END, ASYNC_END, CHILD_END)
 * are counted per name, exactly. The engine is fed a random stream of its three span
 * shapes (thread stacks, async spans, request trees), each END flagged at random, and
 * now and then an END that closes spans above it (they are truncated: not errors, even
 * when the END is flagged, which only speaks for its own span). The oracle counts the
 * flagged ENDs of spans closed by their own END, per name, here. Then the same counts
 * must survive a snapshot round trip, add up in a merge of two reports, and appear as
 * ringprof_span_errors_total in the Prometheus text; the JSON category sums its names'.
 * Last, the producer API: rp_end_error(), rp_async_end_error() and rp_child_end_error()
 * through this process's ring, drained by an engine here, counted exactly.
 */
#include <inttypes.h>
#include <string.h>

#include "engine.h"
#include "merge.h"
#include "render.h"
#include "snapshot.h"
#include "sources.h"
#include "support.h"

#define NAMES 6
#define ROUNDS 4000

static const char *const names[NAMES] = { "a", "b", "c", "req", "task", "io" };

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void ev(struct rp_engine *e, uint8_t kind, uint8_t flags, uint32_t name, uint64_t track,
	       uint64_t arg, uint64_t ts)
{
	struct rp_event x = {
		.ts = ts, .name = name, .kind = kind, .flags = flags, .track = track, .arg = arg
	};

	rp_engine_event(e, 0, 1, &x);
}

static int fn_of(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* Feeds one engine; @want[name] gets the errors the oracle expects. */
static uint64_t begun[NAMES]; /* the oracle of started: every BEGIN fed */

static void feed(struct rp_engine *e, const uint32_t *id, uint64_t *want, uint64_t *calls)
{
	uint32_t stack[8], depth = 0;
	uint64_t ts = 1000, track = 100;

	for (int i = 0; i < ROUNDS; i++) {
		uint32_t what = rnd(10);
		uint8_t err = rnd(3) == 0 ? RP_SPAN_ERROR : 0;

		ts += 1 + rnd(50);
		if (what < 4 && depth < 8) { /* thread: open one of a, b, c */
			stack[depth] = rnd(3);
			ev(e, RP_EV_BEGIN, 0, id[stack[depth]], 0, 0, ts);
			begun[stack[depth]]++;
			depth++;
		} else if (what < 7 && depth > 0) { /* thread: close the top */
			depth--;
			ev(e, RP_EV_END, err, id[stack[depth]], 0, 0, ts);
			want[stack[depth]] += err != 0;
			calls[stack[depth]]++;
		} else if (what == 7 && depth > 1) { /* thread: close one below the top */
			uint32_t at = rnd(depth - 1), j;

			for (j = at + 1; j < depth && stack[j] != stack[at]; j++)
				;
			if (j < depth) /* an END closes the innermost open span of its name */
				continue;
			ev(e, RP_EV_END, err, id[stack[at]], 0, 0, ts);
			want[stack[at]] += err != 0;
			/* the frames above it: truncated, never errors */
			for (j = at; j < depth; j++)
				calls[stack[j]]++;
			depth = at;
		} else if (what == 8) { /* an async span */
			track++;
			ev(e, RP_EV_ASYNC_BEGIN, 0, id[5], track, 7, ts);
			begun[5]++;
			ev(e, RP_EV_ASYNC_END, err, id[5], track, 7, ts + 5);
			want[5] += err != 0;
			calls[5]++;
		} else if (what == 9) { /* a request tree: req { task } */
			uint8_t err2 = rnd(2) ? RP_SPAN_ERROR : 0;

			track++;
			ev(e, RP_EV_CHILD_BEGIN, 0, id[3], track, RP_CHILD_ARG(0, 1), ts);
			ev(e, RP_EV_CHILD_BEGIN, 0, id[4], track, RP_CHILD_ARG(1, 2), ts + 1);
			begun[3]++;
			begun[4]++;
			ev(e, RP_EV_CHILD_END, err2, id[4], track, 2, ts + 3);
			ev(e, RP_EV_CHILD_END, err, id[3], track, 1, ts + 4);
			want[4] += err2 != 0;
			want[3] += err != 0;
			calls[3]++;
			calls[4]++;
		}
	}
	while (depth > 0) {
		depth--;
		ts += 10;
		ev(e, RP_EV_END, 0, id[stack[depth]], 0, 0, ts);
		calls[stack[depth]]++;
	}
}

static void report_of(uint64_t seed, struct rp_report *r, uint64_t *want, uint64_t *calls)
{
	struct rp_engine *e;
	uint32_t id[NAMES];

	rng = seed;
	memset(begun, 0, sizeof(begun));
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "s", 1, 0), 0);
	for (int i = 0; i < NAMES; i++)
		id[i] = rp_engine_name(e, 0, names[i], i < 3 ? "CPU" : "REQ", "", 0);
	feed(e, id, want, calls);
	assert_int_equal(rp_engine_report(e, r), 0);
	rp_engine_close(e);
}

static void check(const struct rp_report *r, const uint64_t *want, const uint64_t *calls)
{
	for (int i = 0; i < NAMES; i++) {
		int f = fn_of(r, names[i]);

		assert_true(f >= 0);
		assert_int_equal(r->fns[f].errors, want[i]);
		assert_int_equal(r->fns[f].calls, calls[i]);
		/* Every span fed was closed: each BEGIN is one call (arrivals = completions). */
		assert_int_equal(r->fns[f].started, calls[i]);
	}
}

static void test_errors_counted_exactly(void **state)
{
	uint64_t want[NAMES] = { 0 }, calls[NAMES] = { 0 }, total = 0;
	struct rp_report r = { 0 };

	(void)state;
	report_of(42, &r, want, calls);
	for (int i = 0; i < NAMES; i++)
		total += want[i];
	assert_true(total > 100); /* the stream exercised it */
	assert_true(r.anomalies[RP_ANOM_END_MISMATCH] > 0);
	check(&r, want, calls);
	for (int i = 0; i < NAMES; i++) /* arrivals: the BEGINs fed, counted apart */
		assert_int_equal(r.fns[fn_of(&r, names[i])].started, begun[i]);
	rp_report_free(&r);
}

static void test_errors_snapshot_merge_prom_json(void **state)
{
	uint64_t w1[NAMES] = { 0 }, c1[NAMES] = { 0 }, w2[NAMES] = { 0 }, c2[NAMES] = { 0 };
	struct rp_report a = { 0 }, b = { 0 }, back = { 0 };
	struct rp_membuf m = { 0 };
	char why[RP_WHY_MAX], line[200], *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	report_of(42, &a, w1, c1);
	report_of(7, &b, w2, c2);
	assert_int_equal(rp_snapshot_encode(&a, rp_membuf_sink, &m), 0);
	assert_int_equal(rp_snapshot_decode(m.data, m.len, &back, why), 0);
	check(&back, w1, c1);
	assert_int_equal(rp_report_merge(&back, &b, why, sizeof(why)), 0);
	for (int i = 0; i < NAMES; i++) {
		w1[i] += w2[i];
		c1[i] += c2[i];
	}
	check(&back, w1, c1);
	f = open_memstream(&text, &len);
	assert_int_equal(rp_render_prom(&back, f, NULL), 0);
	fclose(f);
	for (int i = 0; i < NAMES; i++) {
		snprintf(line, sizeof(line),
			 "\nringprof_span_errors_total{name=\"%s\",category=\"%s\"} %" PRIu64 "\n",
			 names[i], i < 3 ? "CPU" : "REQ", w1[i]);
		assert_non_null(strstr(text, line));
		snprintf(line, sizeof(line),
			 "\nringprof_span_started_total{name=\"%s\",category=\"%s\"} %" PRIu64 "\n",
			 names[i], i < 3 ? "CPU" : "REQ", c1[i]);
		assert_non_null(strstr(text, line));
	}
	free(text);
	f = open_memstream(&text, &len);
	assert_int_equal(rp_render_json(&back, f), 0);
	fclose(f);
	snprintf(line, sizeof(line), "\"CPU\":{\"calls\":%" PRIu64 ",\"errors\":%" PRIu64 ",",
		 c1[0] + c1[1] + c1[2], w1[0] + w1[1] + w1[2]);
	assert_non_null(strstr(text, line));
	free(text);
	rp_membuf_free(&m);
	rp_report_free(&a);
	rp_report_free(&b);
	rp_report_free(&back);
}

#define API_N 1000

static void test_errors_c_api(void **state)
{
	uint32_t s = rp_intern("api_sync", "C", NULL, 0), a = rp_intern("api_async", "C", NULL, 0);
	uint32_t c = rp_intern("api_child", "C", NULL, 0);
	struct rp_engine *e;
	struct rp_sources ss;
	struct rp_report r;
	static const char *const api[3] = { "api_sync", "api_async", "api_child" };
	const uint64_t want[3] = { (API_N + 2) / 3, (API_N + 3) / 4, (API_N + 4) / 5 };

	(void)state;
	rp_instant(s); /* claims this thread's ring before the engine scans */
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_sources_init(&ss, e, getenv("RINGPROF_SESSION")), 0);
	assert_int_equal(rp_sources_scan(&ss), 1);
	for (uint32_t i = 0; i < API_N; i++) {
		rp_begin(s);
		if (i % 3 == 0)
			rp_end_error(s);
		else
			rp_end(s);
		rp_async_begin(a, 7, i + 1);
		if (i % 4 == 0)
			rp_async_end_error(a, 7, i + 1);
		else
			rp_async_end(a, 7, i + 1);
		rp_child_begin(c, 9, 0, i + 1);
		if (i % 5 == 0)
			rp_child_end_error(c, 9, i + 1);
		else
			rp_child_end(c, 9, i + 1);
		if (i % 64 == 0) /* the ring never fills */
			rp_sources_drain(&ss, UINT64_MAX);
	}
	rp_sources_drain(&ss, UINT64_MAX);
	rp_sources_update(&ss);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.dropped, 0);
	for (int i = 0; i < 3; i++) {
		const struct rp_report_fn *f = NULL;

		for (uint32_t j = 0; j < r.n_fns; j++)
			if (strcmp(r.fns[j].name, api[i]) == 0)
				f = &r.fns[j];
		assert_non_null(f);
		assert_int_equal(f->calls, API_N);
		assert_int_equal(f->errors, want[i]);
	}
	rp_report_free(&r);
	rp_sources_free(&ss);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors_counted_exactly),
		cmocka_unit_test(test_errors_snapshot_merge_prom_json),
		cmocka_unit_test(test_errors_c_api),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
