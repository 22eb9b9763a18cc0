// SPDX-License-Identifier: MIT
/*
 * Fine-grained names of the C API (rp_begin_fine, RP_SCOPE_FINE: docs/summaries.md),
 * on prog_fine (fine names under, over and beside plain spans, a few long fine calls,
 * fine levels left by longjmp and healed by name), under a live engine (RP_BIN_DIR):
 *   - at the library's defaults (fine threshold 10 us) against RINGPROF_SUMMARY_NS=0
 *     (every fine call a span) on the same deterministic run (the program supplies
 *     the monotonic clock: a per-thread counter, so both runs see the same times):
 *     every function's calls, primitive calls, self, cumulative, shortest, longest
 *     and percentiles, every edge's calls, self and cumulative, and the calling
 *     context tree (its folded stacks, path by path with their self times) equal;
 *     the calls and edges equal the program's own counts; the long calls have their
 *     percentiles; far fewer records sent;
 *   - at real time: the same calls and edges, the long calls' percentiles there.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "support.h"
#include "report_json.h"

static char bin[600], progdir[512], tmpdir[256];
static pid_t engine;

#define run(out, ...) rp_test_sh(out, NULL, __VA_ARGS__)

/* Runs prog_fine @args with @env under a fresh engine (session <RINGPROF_SESSION>_
 * @suffix), its stdout in *@out; the json report of a snapshot taken after it exited
 * (nothing dropped), and its folded stacks sorted in *@folded. */
static yajl_val run_prog(const char *suffix, const char *env, const char *args, char **out,
			 char **folded)
{
	char *path, session[RP_WIRE_SESSION_MAX];
	yajl_val root;
	int st;

	rp_test_session(session, "t_fine", suffix);
	rp_test_engine_kill(engine); /* left by a test that failed half-way */
	{ /* det: no off-CPU intervals on the real clock beside the program's fake one
	     (test_summaries.c: start_engine) */
		char dir[600], err[700];

		snprintf(dir, sizeof(dir), "%s/snaps", tmpdir);
		snprintf(err, sizeof(err), "%s/%s.err", tmpdir, session);
		engine = rp_test_engine_spawn(bin, session, dir, err, NULL, "--quiet", "--offcpu",
					      strstr(args, "det") != NULL ? "off" : "auto",
					      (char *)NULL);
		assert_int_equal(rp_test_engine_wait(session, engine, NULL), -1);
	}
	assert_int_equal(run(out, "RINGPROF_SESSION=%s %s %s/prog_fine %s", session, env,
			     progdir, args), 0);
	path = rp_test_snapshot(bin, session);
	root = rp_test_report_json(bin, path, true);
	assert_int_equal(run(folded, "%s report %s --format folded | LC_ALL=C sort", bin, path),
			 0);
	st = rp_test_engine_stop(engine);
	engine = 0;
	assert_int_equal(st, 0);
	free(path);
	return root;
}

static uint64_t u64_of(yajl_val row, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val v = row ? yajl_tree_get(row, path, yajl_t_number) : NULL;

	return v ? (uint64_t)YAJL_GET_INTEGER(v) : UINT64_MAX; /* null: absent */
}

/* Every function's and edge's calls are the program's. */
static int expect_counts(yajl_val root, char *out, struct rp_test_count *w, int max)
{
	int n = rp_test_parse_counts(out, w, max, NULL);

	assert_true(n >= 14);
	for (int i = 0; i < n; i++) {
		uint64_t got = w[i].fn ? calls(root, w[i].a) : edge_calls(root, w[i].a, w[i].b);

		if (got != w[i].n)
			print_message("    %s %s: %llu, the program says %llu\n", w[i].a, w[i].b,
				      (unsigned long long)got, (unsigned long long)w[i].n);
		assert_int_equal(got, w[i].n);
	}
	return n;
}

static const char *const fn_keys[] = { "calls", "primitive_calls", "self_ns", "cum_ns",
				       "min_ns", "max_ns", "p50_ns", "p90_ns",
				       "p95_ns", "p99_ns" };
static const char *const edge_keys[] = { "calls", "primitive_calls", "self_ns", "cum_ns" };

/* The same deterministic run folded and not: every figure and every CCT path equal. */
static void test_fine_matches_unsummarized(void **state)
{
	const char *env = "RINGPROF_CLOCK=monotonic RINGPROF_RING_EVENTS=1048576";
	char off_env[160], *out_on = NULL, *out_off = NULL, *fold_on = NULL, *fold_off = NULL;
	struct rp_test_count w[64];
	uint64_t ev_on, ev_off;
	yajl_val on, off, src;
	int n;

	(void)state;
	snprintf(off_env, sizeof(off_env), "%s RINGPROF_SUMMARY_NS=0", env);
	on = run_prog("det_on", env, "20000 10 det", &out_on, &fold_on);
	off = run_prog("det_off", off_env, "20000 10 det", &out_off, &fold_off);
	assert_string_equal(out_on, out_off);
	n = expect_counts(on, out_on, w, 64);
	for (int i = 0; i < n; i++) {
		yajl_val a = w[i].fn ? fn_row(on, w[i].a) : edge_row(on, w[i].a, w[i].b);
		yajl_val b = w[i].fn ? fn_row(off, w[i].a) : edge_row(off, w[i].a, w[i].b);
		const char *const *keys = w[i].fn ? fn_keys : edge_keys;
		size_t nk = w[i].fn ? sizeof(fn_keys) / sizeof(fn_keys[0])
				    : sizeof(edge_keys) / sizeof(edge_keys[0]);

		assert_non_null(a);
		assert_non_null(b);
		for (size_t k = 0; k < nk; k++) {
			if (u64_of(a, keys[k]) != u64_of(b, keys[k]))
				print_message("    %s %s %s: %llu folded, %llu not\n", w[i].a,
					      w[i].b, keys[k],
					      (unsigned long long)u64_of(a, keys[k]),
					      (unsigned long long)u64_of(b, keys[k]));
			assert_int_equal(u64_of(a, keys[k]), u64_of(b, keys[k]));
		}
	}
	/* the calling context tree, path by path */
	if (strcmp(fold_on, fold_off) != 0)
		print_message("    folded:\n%s    unfolded:\n%s", fold_on, fold_off);
	assert_string_equal(fold_on, fold_off);
	assert_non_null(strstr(fold_on, "outer;fine_a;mid;fine_leaf "));
	assert_non_null(strstr(fold_on, "outer;fine_jump;fine_leaf "));
	/* the long fine calls are spans with their percentiles */
	assert_true(u64_of(fn_row(on, "fine_slow"), "p50_ns") >= 12000);
	ev_on = json_u64(on, "events");
	ev_off = json_u64(off, "events");
	print_message("    %llu records folded, %llu not\n", (unsigned long long)ev_on,
		      (unsigned long long)ev_off);
	assert_true(ev_on * 4 < ev_off);
	assert_int_equal(anomaly(on, "bad_event"), 0);
	assert_int_equal(anomaly(on, "window_cap"), anomaly(off, "window_cap"));
	src = YAJL_GET_ARRAY(json_arr(on, "sources"))->values[0];
	assert_int_equal(json_u64(src, "summary_ns"), RP_FINE_DEFAULT_NS);
	free(out_on);
	free(out_off);
	free(fold_on);
	free(fold_off);
	yajl_tree_free(on);
	yajl_tree_free(off);
}

/* At real time (the TSC, where there is one): the counts, and the long calls' spans. */
static void test_fine_real_clock(void **state)
{
	char *out = NULL, *fold = NULL;
	struct rp_test_count w[64];
	yajl_val root, slow;

	(void)state;
	/* rings that hold the run whole: no drop however late the engine reads */
	root = run_prog("real", "RINGPROF_RING_EVENTS=1048576", "200000 20", &out, &fold);
	expect_counts(root, out, w, 64);
	slow = fn_row(root, "fine_slow");
	assert_true(u64_of(slow, "p50_ns") >= 45000);
	assert_true(u64_of(fn_row(root, "fine_a"), "p50_ns") != UINT64_MAX);
	assert_int_equal(anomaly(root, "bad_event"), 0);
	free(out);
	free(fold);
	yajl_tree_free(root);
}

static int setup(void **state)
{
	(void)state;
	return rp_test_prog_dirs(bin, progdir, tmpdir, "RP_FINE_DIR", ".", "/tmp/rp_fine_XXXXXX");
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
		cmocka_unit_test(test_fine_matches_unsummarized),
		cmocka_unit_test(test_fine_real_clock),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
