// SPDX-License-Identifier: MIT
/*
 * Sketch and window slots go to what is hot (analyses.h, window.h), at the default
 * caps: an import-like burst of N names called once each, far more than
 * max_sketch_names and max_window_names, then M hot names called many times. Every
 * hot name keeps all-time quantiles within the sketch's 1% of the exact order
 * statistic of all its durations, and a row in every window with its exact calls and
 * quantiles (brute force over the spans ending in the window's range); the burst names
 * whose sketches were given away report none; every eviction is counted, exactly as
 * the policy's model here predicts. Then live, with a tiny --max-sketch-names under the
 * demo: `ringprof top --once` shows "-" for exactly the names the snapshot has no
 * quantiles for, never 0.
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
#include <unistd.h>

#include "engine.h"
#include "snapshot.h"

#define US	1000ull
#define BASE	(1000000ull * US) /* 1 s */
#define NBURST	10000u
#define NHOT	64u
#define ROUNDS	200u

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(uint64_t m)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % m;
}

/* The hot spans, by hot name: start and end. */
static uint64_t hot_start[NHOT][ROUNDS], hot_end[NHOT][ROUNDS];

static void span(struct rp_engine *e, uint32_t src, uint32_t name, uint64_t s, uint64_t t)
{
	struct rp_event b = { .ts = s, .name = name, .kind = RP_EV_BEGIN };
	struct rp_event x = { .ts = t, .name = name, .kind = RP_EV_END };

	rp_engine_event(e, src, 1, &b);
	rp_engine_event(e, src, 1, &x);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* @got against the exact lower-rank q-quantile of @v (sorted, n > 0), within 1%. */
static void check_q(uint64_t got, const uint64_t *v, uint32_t n, double q, const char *what)
{
	uint64_t x = v[1 + (uint64_t)(q * (double)(n - 1)) - 1];

	if (fabs((double)got - (double)x) > 0.01 * (double)x + 1.0)
		fail_msg("%s q%.2f: %llu, exact %llu", what, q, (unsigned long long)got,
			 (unsigned long long)x);
}

static uint32_t row_of(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return i;
	fail_msg("no row %s", name);
	return RP_NONE;
}

/* Durations of hot name @h's spans ending in [from, to], sorted, into @d. */
static uint32_t durations(uint32_t h, uint64_t from, uint64_t to, uint64_t *d)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < ROUNDS; k++)
		if (hot_end[h][k] >= from && hot_end[h][k] <= to)
			d[n++] = hot_end[h][k] - hot_start[h][k];
	qsort(d, n, sizeof(*d), cmp_u64);
	return n;
}

static void test_hotnames_burst_then_hot(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	static uint32_t burst[NBURST];
	uint32_t src, hot[NHOT], M;
	uint64_t t, d[ROUNDS];
	char n[32];

	(void)state;
	rp_engine_cfg_default(&c);
	M = c.max_window_names;
	assert_true(NBURST > 2 * c.max_sketch_names && NBURST > 2 * M && NHOT < M);
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "gen", 1, 0);
	for (uint32_t i = 0; i < NBURST; i++) {
		snprintf(n, sizeof(n), "imp%05u", i);
		burst[i] = rp_engine_name(e, src, n, "import", "", 0);
	}
	for (uint32_t h = 0; h < NHOT; h++) {
		snprintf(n, sizeof(n), "hot%02u", h);
		hot[h] = rp_engine_name(e, src, n, "server", "", 0);
	}
	/* The burst: each name once, 1 us apart, all in one finest sub-window (1 s). */
	t = BASE;
	for (uint32_t i = 0; i < NBURST; i++, t += 2 * US)
		span(e, src, burst[i], t, t + US);
	/* The server, 2 s later: rounds over the hot names, 1 us .. 2 ms each. */
	t = BASE + 2 * BASE;
	for (uint32_t k = 0; k < ROUNDS; k++)
		for (uint32_t h = 0; h < NHOT; h++) {
			uint64_t dur = US + rnd(2000 * US);

			hot_start[h][k] = t;
			hot_end[h][k] = t + dur;
			span(e, src, hot[h], t, t + dur);
			t += dur + US;
		}
	assert_int_equal(rp_engine_report(e, &r), 0);

	/* All-time: every hot name's quantiles, over all of its calls. */
	for (uint32_t h = 0; h < NHOT; h++) {
		const struct rp_report_fn *f;

		snprintf(n, sizeof(n), "hot%02u", h);
		f = &r.fns[row_of(&r, n)];
		assert_int_equal(f->calls, ROUNDS);
		assert_true(rp_report_fn_has_quantiles(f));
		assert_int_equal(durations(h, 0, UINT64_MAX, d), ROUNDS);
		check_q(f->p50_ns, d, ROUNDS, 0.50, n);
		check_q(f->p90_ns, d, ROUNDS, 0.90, n);
		check_q(f->p95_ns, d, ROUNDS, 0.95, n);
		check_q(f->p99_ns, d, ROUNDS, 0.99, n);
	}
	/* The model: every name gets a sketch at its first batch and keeps it until
	 * evicted, never again after; burst names (probation) go first. */
	assert_int_equal(r.anomalies[RP_ANOM_SKETCH_EVICTED],
			 NBURST + NHOT - c.max_sketch_names);
	{
		uint32_t with = 0;

		for (uint32_t i = 0; i < r.n_fns; i++)
			if (strncmp(r.fns[i].name, "imp", 3) == 0) {
				assert_int_equal(r.fns[i].calls, 1);
				with += rp_report_fn_has_quantiles(&r.fns[i]) != 0;
			}
		assert_int_equal(with, c.max_sketch_names - NHOT);
	}
	/* Windows: the finest sub-window of the burst evicts all but the last M - 1
	 * burst names kept (NBURST - M evictions); each coarser window's sub-window
	 * holding the burst and the server's first second makes room for each hot name
	 * (called more than once there) by evicting a burst entry. */
	assert_int_equal(r.anomalies[RP_ANOM_WINDOW_EVICTED],
			 (NBURST - M) + (uint64_t)(c.n_windows - 1) * NHOT);
	assert_int_equal(r.anomalies[RP_ANOM_WINDOW_CAP],
			 (NBURST - M) + (uint64_t)(c.n_windows - 1) * NHOT);
	assert_int_equal(r.n_windows, c.n_windows);
	for (uint32_t w = 0; w < r.n_windows; w++) {
		const struct rp_report_window *win = &r.windows[w];

		for (uint32_t h = 0; h < NHOT; h++) {
			uint32_t fn, got = RP_NONE, k = durations(h, win->t_from, win->t_to, d);

			snprintf(n, sizeof(n), "hot%02u", h);
			fn = row_of(&r, n);
			for (uint32_t i = 0; i < win->n_fns; i++)
				if (win->fns[i].fn == fn)
					got = i;
			if (k == 0) {
				assert_int_equal(got, RP_NONE);
				continue;
			}
			if (got == RP_NONE)
				fail_msg("window %s: no row for %s", win->name, n);
			assert_int_equal(win->fns[got].calls, k);
			check_q(win->fns[got].p50_ns, d, k, 0.50, n);
			check_q(win->fns[got].p99_ns, d, k, 0.99, n);
		}
	}
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Live: top's p50 and p99 are "-" for the names without quantiles (77 without RP_BIN_DIR). */
static void test_hotnames_top_shows_absent(void **state)
{
	const char *bin = getenv("RP_BIN_DIR");
	char cmd[2048], dir[64], path[128], why[RP_WHY_MAX], want[300];
	static char top[65536];
	struct rp_report r;
	uint32_t absent = 0, present = 0, shown = 0;
	size_t len;
	FILE *p;

	(void)state;
	if (bin == NULL)
		skip();
	snprintf(dir, sizeof(dir), "/tmp/rp_hotnames_%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/s.msgpack", dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; mkdir -p %s; S=hn%d; %s/ringprof run --session $S --snapshot-dir %s "
		 "--quiet --max-sketch-names 3 & E=$!; " /* up: its marker (60 s, a hang) */
		 "for i in $(seq 600); do [ -s /dev/shm/ringprof.$S.engine ] && break; sleep 0.1; "
		 "done; RINGPROF_SESSION=$S "
		 /* 3 s: its events cross two boundaries of the finest sub-windows (1 s, on
		  * the event clock), so a whole second of its names folds into the all-time
		  * sketches (where the evictions are) before the snapshot; 1 s crossed one,
		  * anywhere in it, and its first part could hold 3 names or fewer */
		 "%s/ringprof-demo --quiet --duration 3 --rate 100 --time-scale 0.1 >/dev/null; "
		 "sleep 1; " /* the engine's merge delay and a loaded machine: drained first */
		 "%s/ringprof snapshot --timeout-ms 60000 --session $S -o %s >/dev/null; "
		 "%s/ringprof top --session $S "
		 "--dir %s --once > %s/top.txt; kill $E; wait $E || true",
		 dir, (int)getpid(), bin, dir, bin, bin, path, bin, dir, dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(rp_snapshot_read_file(path, &r, why), 0);
	snprintf(cmd, sizeof(cmd), "%s/top.txt", dir);
	p = fopen(cmd, "r");
	assert_non_null(p);
	len = fread(top, 1, sizeof(top) - 1, p);
	top[len] = '\0';
	fclose(p);
	assert_true(r.anomalies[RP_ANOM_SKETCH_EVICTED] > 0);
	for (uint32_t i = 0; i < r.n_fns; i++) {
		const struct rp_report_fn *f = &r.fns[i];
		bool has = rp_report_fn_has_quantiles(f) != 0;

		if (f->calls == 0)
			continue;
		snprintf(want, sizeof(want), "       -  %s [%s]\n", f->name, f->category);
		if (has)
			assert_null(strstr(top, want));
		else if (strstr(top, want + 8) != NULL) { /* listed: its p99 is "-" */
			assert_non_null(strstr(top, want));
			shown++;
		}
		absent += !has;
		present += has;
	}
	print_message("    names with quantiles %u, without %u (%u of them listed in top: \"-\"; "
		      "sketch_evicted %llu)\n", present, absent, shown,
		      (unsigned long long)r.anomalies[RP_ANOM_SKETCH_EVICTED]);
	/* Exactly the evicted names have none. The others may be more than the cap of
	 * 3: a name whose calls are all still in the current sub-window takes its all-time
	 * slot only when that sub-window folds, and its quantiles (from the window's own
	 * sketch) are exact meanwhile. */
	assert_true(absent > 0 && present > 0 && shown > 0);
	assert_int_equal(absent, r.anomalies[RP_ANOM_SKETCH_EVICTED]);
	rp_report_free(&r);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hotnames_burst_then_hot),
		cmocka_unit_test(test_hotnames_top_shows_absent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
