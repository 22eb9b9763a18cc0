// SPDX-License-Identifier: MIT
/*
 * Summaries at the source (docs/summaries.md), on prog_native: a known call tree at
 * a native call rate (two threads, tens of millions of calls per second, a few long
 * calls among them, and C API spans and counters beside the hooks), built with
 * ringprof-auto, under a live engine (RP_BIN_DIR):
 *   - at the defaults: nothing dropped, every function's calls and every caller
 *     edge equal to the counts the program kept itself, percentiles for the long
 *     calls, the program's peak RSS under 128 MiB;
 *   - summarized (the default threshold) against unsummarized (RINGPROF_SUMMARY_NS
 *     =0) runs of the same deterministic program (it supplies the monotonic clock: a
 *     per-thread counter, so both runs see the same times): calls, primitive calls,
 *     self, cumulative, shortest and longest times of every function and the calls,
 *     self and cumulative times of every edge equal to the nanosecond, and so are
 *     the percentiles (from the producer's histograms, exact at these lengths) and
 *     the longest rolling window's rows;
 *   - a ring too small for the threshold: the producer raises it, the engine says so
 *     (its log) and the report too (sources[i].summary_ns, summary_raised).
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "support.h"
#include "report_json.h"

static char bin[600], progdir[512], tmpdir[256];
static bool loud; /* the engine's log lines in <tmpdir>/<session>.err */
static pid_t engine;

#define run(out, ...) rp_test_sh(out, NULL, __VA_ARGS__)

/* --- the engine --- */

/* @det: the program runs on its own fake clock (prog_native's det), so the engine
 * watches no context switch: an off-CPU interval, stamped with the real monotonic
 * clock, would move the rolling windows to now, past the program's times, and whether
 * a span then kept its window row would depend on when the engine read the switch. */
static void start_engine(const char *session, bool det)
{
	char dir[600], err[700];

	rp_test_engine_kill(engine); /* left by a test that failed half-way */
	snprintf(dir, sizeof(dir), "%s/snaps", tmpdir);
	snprintf(err, sizeof(err), "%s/%s.err", tmpdir, session);
	engine = rp_test_engine_spawn(bin, session, dir, err, NULL, loud ? "--poll" : "--quiet",
				      "--offcpu", det ? "off" : "auto", (char *)NULL);
	assert_int_equal(rp_test_engine_wait(session, engine, NULL), -1);
}

static void stop_engine(void)
{
	int st = rp_test_engine_stop(engine);

	engine = 0;
	assert_int_equal(st, 0);
}

/* Runs @prog_args (from the programs' directory) with @env in session
 * <RINGPROF_SESSION>_@suffix under a fresh engine, its stdout in *@out; the json
 * report of a snapshot taken after it exited, which must show nothing dropped. */
static yajl_val run_program_as(const char *suffix, const char *env, const char *prog_args,
			       char **out, bool no_drops)
{
	char *path, session[RP_WIRE_SESSION_MAX];
	yajl_val root;

	rp_test_session(session, "t_sum", suffix);
	start_engine(session, strstr(prog_args, " det") != NULL);
	assert_int_equal(run(out, "RINGPROF_SESSION=%s %s %s/%s", session, env, progdir,
			     prog_args), 0);
	path = rp_test_snapshot(bin, session);
	root = rp_test_report_json(bin, path, no_drops);
	stop_engine();
	free(path);
	return root;
}

static yajl_val run_program(const char *suffix, const char *env, const char *prog_args,
			    char **out)
{
	return run_program_as(suffix, env, prog_args, out, true);
}

static uint64_t u64_of(yajl_val row, const char *key)
{
	return row ? json_u64(row, key) : UINT64_MAX;
}

/* Function @fn's row in the last (longest) rolling window, or NULL. */
static yajl_val window_fn_row(yajl_val root, const char *fn)
{
	yajl_val ws = json_arr(root, "windows"), fs;

	if (ws == NULL || YAJL_GET_ARRAY(ws)->len == 0)
		return NULL;
	fs = json_arr(YAJL_GET_ARRAY(ws)->values[YAJL_GET_ARRAY(ws)->len - 1], "functions");
	for (size_t i = 0; fs && i < YAJL_GET_ARRAY(fs)->len; i++) {
		yajl_val f = YAJL_GET_ARRAY(fs)->values[i];
		const char *n = json_str(f, "name");
		if (n && strcmp(n, fn) == 0)
			return f;
	}
	return NULL;
}

/* At the defaults: 2 x 4 M iterations of 8 calls, 2 x 20 long calls. */
static void test_summaries_native_exact(void **state)
{
	struct rp_test_count w[64];
	uint64_t rss = 0, sent;
	char *out = NULL;
	yajl_val root, slow, src;
	int n;

	(void)state;
	root = run_program("native", "", "prog_native 4000000 20", &out);
	n = rp_test_parse_counts(out, w, 64, &rss);
	assert_true(n >= 12);
	for (int i = 0; i < n; i++) {
		uint64_t got = w[i].fn ? calls(root, w[i].a)
						      : edge_calls(root, w[i].a, w[i].b);
		if (got != w[i].n)
			print_message("    %s %s %s: %llu, the program says %llu\n",
				      w[i].fn ? "fn" : "edge", w[i].a, w[i].b,
				      (unsigned long long)got, (unsigned long long)w[i].n);
		assert_int_equal(got, w[i].n);
	}
	assert_int_equal(calls(root, "nat_leaf"), 2 * (4000000ull * 4 + 20 * 1000));
	/* The long calls are spans: their percentiles are there, and they spin 50 us. */
	slow = fn_row(root, "nat_slow");
	assert_non_null(slow);
	assert_true(json_u64(slow, "p50_ns") >= 45000);
	assert_true(json_u64(slow, "p99_ns") >= json_u64(slow, "p50_ns"));
	/* The short calls, summarized, have theirs too (the producer's histograms),
	 * within their range; and the longest window has every call. */
	for (int i = 0; i < n; i++) {
		yajl_val f = w[i].fn ? fn_row(root, w[i].a) : NULL;

		if (f == NULL || strcmp(w[i].a, "nat_leaf") == 0) /* (leaf: can read 0) */
			continue;
		assert_true(json_u64(f, "p50_ns") > 0);
		assert_true(json_u64(f, "p50_ns") >= json_u64(f, "min_ns"));
		assert_true(json_u64(f, "p99_ns") >= json_u64(f, "p50_ns"));
		assert_true(json_u64(f, "p99_ns") <= json_u64(f, "max_ns"));
		assert_int_equal(u64_of(window_fn_row(root, w[i].a), "calls"), w[i].n);
	}
	/* Summarized: far fewer records than calls (two per call unsummarized). */
	sent = json_u64(root, "events");
	print_message("    %llu records for %llu calls, peak RSS %llu KiB\n",
		      (unsigned long long)sent,
		      (unsigned long long)(calls(root, "nat_a") * 8),
		      (unsigned long long)rss);
	assert_true(sent < calls(root, "nat_leaf") / 10); /* 2 per call unsummarized */
	assert_int_equal(anomaly(root, "bad_event"), 0);
	assert_true(rss > 0 && rss < 128 * 1024);
	/* ringprof-auto's default threshold, in force and never raised */
	src = YAJL_GET_ARRAY(json_arr(root, "sources"))->values[0];
	assert_int_equal(json_u64(src, "summary_ns"), 10000);
	assert_int_equal(json_u64(src, "summary_raised"), 0);
	free(out);
	yajl_tree_free(root);
}

/* The percentiles too: with the det clock every call lasts less than 128 ticks, where
 * the producer's histogram buckets are one length each (docs/summaries.md), so the
 * sketches hold the very same lengths either way. */
static const char *const fn_keys[] = { "calls", "primitive_calls", "self_ns", "cum_ns",
				       "min_ns", "max_ns", "p50_ns", "p90_ns",
				       "p95_ns", "p99_ns" };
static const char *const edge_keys[] = { "calls", "primitive_calls", "self_ns", "cum_ns" };

/* The same deterministic run summarized and not: every figure equal. */
static void test_summaries_match_unsummarized(void **state)
{
	/* Rings that hold the unsummarized run whole: none of it dropped. */
	const char *env = "RINGPROF_CLOCK=monotonic RINGPROF_RING_EVENTS=1048576";
	char off_env[160], *out_on = NULL, *out_off = NULL;
	struct rp_test_count w[64];
	uint64_t rss = 0, ev_on, ev_off;
	yajl_val on, off;
	int n;

	(void)state;
	snprintf(off_env, sizeof(off_env), "%s RINGPROF_SUMMARY_NS=0", env);
	on = run_program("det_on", env, "prog_native 20000 10 det", &out_on);
	off = run_program("det_off", off_env, "prog_native 20000 10 det", &out_off);
	n = rp_test_parse_counts(out_on, w, 64, &rss);
	assert_true(n >= 12);
	/* The worker resolved no name inside nat_worker (main resolved them before it
	 * started: prog_native.c), so its times do not depend on the threads' race. */
	assert_int_equal(edge_calls(on, "nat_worker", "[ringprof-auto: resolve]"), 0);
	assert_int_equal(edge_calls(off, "nat_worker", "[ringprof-auto: resolve]"), 0);
	assert_int_equal(calls(on, "[ringprof-auto: resolve]"), 7); /* one per function */
	assert_int_equal(calls(off, "[ringprof-auto: resolve]"), 7);
	for (int i = 0; i < n; i++) {
		bool fn = w[i].fn;
		yajl_val a = fn ? fn_row(on, w[i].a) : edge_row(on, w[i].a, w[i].b);
		yajl_val b = fn ? fn_row(off, w[i].a) : edge_row(off, w[i].a, w[i].b);
		const char *const *keys = fn ? fn_keys : edge_keys;
		size_t nk = fn ? sizeof(fn_keys) / sizeof(fn_keys[0])
			       : sizeof(edge_keys) / sizeof(edge_keys[0]);

		assert_non_null(a);
		assert_non_null(b);
		assert_int_equal(u64_of(a, "calls"), w[i].n);
		if (fn) { /* the rolling windows: the same rows (the run fits in them) */
			static const char *const wk[] = { "calls", "self_ns", "cum_ns",
							  "p50_ns", "p99_ns" };
			yajl_val wa = window_fn_row(on, w[i].a), wb = window_fn_row(off, w[i].a);

			for (size_t k = 0; k < sizeof(wk) / sizeof(wk[0]); k++)
				assert_int_equal(u64_of(wa, wk[k]), u64_of(wb, wk[k]));
			assert_int_equal(u64_of(wa, "calls"), w[i].n);
		}
		for (size_t k = 0; k < nk; k++) {
			if (u64_of(a, keys[k]) != u64_of(b, keys[k]))
				print_message("    %s %s %s %s: %llu summarized, %llu not\n",
					      w[i].fn ? "fn" : "edge", w[i].a, w[i].b, keys[k],
					      (unsigned long long)u64_of(a, keys[k]),
					      (unsigned long long)u64_of(b, keys[k]));
			assert_int_equal(u64_of(a, keys[k]), u64_of(b, keys[k]));
		}
	}
	ev_on = json_u64(on, "events");
	ev_off = json_u64(off, "events");
	print_message("    %llu records summarized, %llu not\n", (unsigned long long)ev_on,
		      (unsigned long long)ev_off);
	assert_true(ev_on * 100 < ev_off);
	assert_int_equal(anomaly(on, "bad_event"), 0);
	free(out_on);
	free(out_off);
	yajl_tree_free(on);
	yajl_tree_free(off);
}

/*
 * A ring too small for the threshold asked for: the producer doubles it rather than
 * keep dropping, and the engine says so (its log); the threshold seen in the ring
 * descriptor is the raised one.
 */
static void test_summaries_threshold_adapts(void **state)
{
	char *out = NULL, *log = NULL, *session = NULL;
	uint64_t raised, thr;
	yajl_val root, src;

	(void)state;
	loud = true;
	root = run_program_as("adapt", "RINGPROF_RING_EVENTS=1024 RINGPROF_SUMMARY_NS=20",
			      "prog_native 400000 20", &out, false);
	loud = false;
	assert_int_equal(run(&session, "echo ${RINGPROF_SESSION:-t_sum}_adapt"), 0);
	session[strcspn(session, "\n")] = '\0';
	assert_int_equal(run(&log, "cat %s/%s.err", tmpdir, session), 0);
	if (!strstr(log, "summary threshold raised to"))
		print_message("    engine log: %s\n", log);
	assert_non_null(strstr(log, "summary threshold raised to"));
	/* ... and the report, per source: the threshold now in force (doubled from 20
	 * ns at least once) and how many times it was raised */
	src = YAJL_GET_ARRAY(json_arr(root, "sources"))->values[0];
	raised = json_u64(src, "summary_raised");
	thr = json_u64(src, "summary_ns");
	print_message("    threshold raised %llu times, now %llu ns\n", (unsigned long long)raised,
		      (unsigned long long)thr);
	assert_true(raised >= 1);
	assert_true(thr >= 40 && thr <= 10000000);
	free(out);
	free(log);
	free(session);
	yajl_tree_free(root);
}

static int setup(void **state)
{
	(void)state;
	return rp_test_prog_dirs(bin, progdir, tmpdir, "RP_AUTO_DIR", "auto", "/tmp/rp_sum_XXXXXX");
}

static int teardown(void **state)
{
	(void)state;
	rp_test_engine_kill(engine);
	return rp_test_rm_tmp(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_summaries_native_exact),
		cmocka_unit_test(test_summaries_match_unsummarized),
		cmocka_unit_test(test_summaries_threshold_adapts),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
