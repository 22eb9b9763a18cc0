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

static void start_engine(const char *session)
{
	char name[128];
	struct timespec ms = { 0, 10000000 };

	/* A marker left by an engine killed in an earlier run would pass for ours. */
	snprintf(name, sizeof(name), "/dev/shm/ringprof.%s.engine", session);
	unlink(name);
	engine = fork();
	if (engine == 0) {
		char dir[300];

		snprintf(dir, sizeof(dir), "%s/snaps", tmpdir);
		execl(bin, "ringprof", "run", "--session", session, "--snapshot-dir", dir,
		      "--quiet", (char *)NULL);
		_exit(127);
	}
	assert_true(engine > 0);
	for (int i = 0; i < 500 && access(name, F_OK) != 0; i++)
		nanosleep(&ms, NULL);
	assert_int_equal(access(name, F_OK), 0);
}

static void stop_engine(void)
{
	int st;

	kill(engine, SIGTERM);
	assert_int_equal(waitpid(engine, &st, 0), engine);
	engine = 0;
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Runs prog_fine @args with @env under a fresh engine (session <RINGPROF_SESSION>_
 * @suffix), its stdout in *@out; the json report of a snapshot taken after it exited
 * (nothing dropped), and its folded stacks sorted in *@folded. */
static yajl_val run_prog(const char *suffix, const char *env, const char *args, char **out,
			 char **folded)
{
	char *path, *json, err[256], session[RP_WIRE_SESSION_MAX];
	const char *base = getenv("RINGPROF_SESSION");
	yajl_val root, srcs;

	snprintf(session, sizeof(session), "%s_%s", base ? base : "t_fine", suffix);
	assert_true(rp_wire_session_valid(session));
	start_engine(session);
	assert_int_equal(run(out, "RINGPROF_SESSION=%s %s %s/prog_fine %s", session, env,
			     progdir, args), 0);
	assert_int_equal(run(&path, "%s snapshot --session %s", bin, session), 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(run(&json, "%s report %s --format json", bin, path), 0);
	assert_int_equal(run(folded, "%s report %s --format folded | LC_ALL=C sort", bin, path),
			 0);
	stop_engine();
	root = yajl_tree_parse(json, err, sizeof(err));
	assert_non_null(root);
	srcs = json_arr(root, "sources");
	for (size_t i = 0; i < YAJL_GET_ARRAY(srcs)->len; i++)
		assert_int_equal(json_u64(YAJL_GET_ARRAY(srcs)->values[i], "dropped"), 0);
	free(json);
	free(path);
	return root;
}

/* The program's own counts: "fn NAME N" and "edge A B N" lines. */
struct want {
	bool fn;
	char a[32], b[32];
	uint64_t n;
};

static int parse_counts(char *out, struct want *w, int max)
{
	int n = 0;

	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		struct want x = { 0 };
		unsigned long long v;

		if (sscanf(l, "fn %31s %llu", x.a, &v) == 2)
			x.fn = true;
		else if (sscanf(l, "edge %31s %31s %llu", x.a, x.b, &v) != 3)
			continue;
		x.n = v;
		if (n < max)
			w[n++] = x;
	}
	return n;
}

static uint64_t u64_of(yajl_val row, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val v = row ? yajl_tree_get(row, path, yajl_t_number) : NULL;

	return v ? (uint64_t)YAJL_GET_INTEGER(v) : UINT64_MAX; /* null: absent */
}

static yajl_val edge_row(yajl_val root, const char *caller, const char *callee)
{
	yajl_val es = json_arr(root, "edges");

	for (size_t i = 0; i < YAJL_GET_ARRAY(es)->len; i++) {
		yajl_val e = YAJL_GET_ARRAY(es)->values[i];
		const char *a = json_str(e, "caller"), *b = json_str(e, "callee");

		if (a && b && strcmp(a, caller) == 0 && strcmp(b, callee) == 0)
			return e;
	}
	return NULL;
}

static uint64_t anomaly(yajl_val root, const char *name)
{
	const char *path[] = { "anomalies", name, NULL };
	yajl_val v = yajl_tree_get(root, path, yajl_t_number);

	return v ? (uint64_t)YAJL_GET_INTEGER(v) : 0;
}

/* Every function's and edge's calls are the program's. */
static int expect_counts(yajl_val root, char *out, struct want *w, int max)
{
	int n = parse_counts(out, w, max);

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
	struct want w[64];
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
	struct want w[64];
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
	const char *b = getenv("RP_BIN_DIR"), *p = getenv("RP_FINE_DIR");

	(void)state;
	snprintf(bin, sizeof(bin), "%s/ringprof", b ? b : "../tools");
	snprintf(progdir, sizeof(progdir), "%s", p ? p : ".");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rp_fine_XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (engine > 0) {
		kill(engine, SIGKILL);
		waitpid(engine, NULL, 0);
	}
	return getenv("RP_KEEP_TMP") ? 0 : run(NULL, "rm -rf %s", tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fine_matches_unsummarized),
		cmocka_unit_test(test_fine_real_clock),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
