// SPDX-License-Identifier: MIT
/*
 * C and C++ programs under a live engine (`ringprof run`, RP_BIN_DIR), checked
 * against models of their call trees computed here:
 *   - prog_auto, built with -finstrument-functions and ringprof-auto and no ringprof
 *     call of its own: the call count of every function and of the edges between
 *     them, on the main thread, T threads and a forked child; names resolved,
 *     a static function in a shared library and a demangled C++ one in a namespace
 *     among them, each with its source file and line (with libdw; else the object
 *     it lives in), checked against the sources;
 *   - prog_scopes (ringprof.hpp): RAII scopes left by return, break, an exception
 *     and the end of a block nest exactly; async scopes moved across threads end
 *     once; counter samples arrive;
 *   - prog_longjmp: calls made after longjmps out of traced calls are all counted;
 *   - prog_sort (std::sort over a vector): RINGPROF_AUTO_EXCLUDE='std::*,__gnu_cxx::*'
 *     leaves out every standard-library template, those whose demangled names start
 *     with a return type included, and nothing else;
 *   - prog_firstcall: the first call of each of 2,000 functions (a name lookup) costs
 *     its caller no self time: main's matches that of the same calls made warm;
 *   - prog_clones: symbols named as compilers name their copies of a function
 *     ("f.constprop.0", "f.llvm.<hash>") are reported as the source function.
 *   - prog_inline: a header's static inline function, its path spelled three ways
 *     by the units that include it, is one row.
 * Every event the programs emitted is accounted for: none dropped.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "support.h"
#include "report_json.h"

static char bin[600], progdir[512], srcdir[512], tmpdir[256];
static char *last_text; /* the text report of run_program()'s last snapshot */
static pid_t engine;

#define run(out, ...) rp_test_sh(out, NULL, __VA_ARGS__)

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* --- the engine --- */

static void start_engine(const char *session)
{
	rp_test_engine_kill(engine); /* left by a test that failed half-way */
	engine = rp_test_engine_start(bin, tmpdir, session, NULL, "--quiet");
}

static void stop_engine(void)
{
	int st = rp_test_engine_stop(engine);

	engine = 0;
	assert_int_equal(st, 0);
}

/* Runs @prog_args (from the programs' directory) with @env in session
 * <RINGPROF_SESSION>_@suffix under a fresh engine; the json report of a snapshot
 * taken after it exited. */
static yajl_val run_program(const char *suffix, const char *env, const char *prog_args)
{
	char *path, session[RP_WIRE_SESSION_MAX];
	yajl_val root;

	rp_test_session(session, "t_auto", suffix);
	start_engine(session);
	assert_int_equal(run(NULL, "RINGPROF_SESSION=%s %s %s/%s", session, env, progdir,
			     prog_args), 0);
	path = rp_test_snapshot(bin, session);
	root = rp_test_report_json(bin, path, true);
	free(last_text);
	assert_int_equal(run(&last_text, "%s report %s --format text", bin, path), 0);
	stop_engine();
	free(path);
	return root;
}

/* The 1-based line of @src (in the sources' directory) holding @needle; 0 if none. */
static uint32_t line_of(const char *src, const char *needle)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", srcdir, src);
	return rp_test_line_of(path, needle);
}

/*
 * Where function @fn was said to be. With DWARF (libdw, -g): @src at the line of
 * its declarator (clang) or of the brace that opens its body, on the next line here
 * (gcc). Without: the object it lives in (@object is the end of its path), line 0.
 */
static void expect_where(yajl_val root, const char *fn, const char *src, const char *decl,
			 const char *object)
{
	yajl_val f = fn_row(root, fn);
	const char *file;
	uint64_t line;

	assert_non_null(f);
	file = json_str(f, "file");
	line = json_u64(f, "line");
	print_message("    %s: %s:%llu\n", fn, file ? file : "(none)", (unsigned long long)line);
#ifdef RP_AUTO_DWARF
	uint32_t want = line_of(src, decl);
	char tail[64];
	(void)object;
	snprintf(tail, sizeof(tail), "/%s", src);
	assert_true(ends_with(file, tail));
	assert_true(want > 0 && (line == want || line == want + 1));
#else
	(void)src;
	(void)decl;
	assert_true(ends_with(file, object));
	assert_int_equal(line, 0);
#endif
}

/* --- the models --- */

/* Calls fib(n) makes of itself, the root included, by doing them. */
static uint64_t fib_calls(int n)
{
	return n < 2 ? 1 : 1 + fib_calls(n - 1) + fib_calls(n - 2);
}

static void test_auto_call_tree_exact(void **state)
{
	const int N = 12, K = 7, M = 5, P = 9, T = 3, F = 1;
	const uint64_t R = 1 + T + F; /* run_tree() invocations: main, threads, child */
	char args[128];
	yajl_val root;

	(void)state;
	snprintf(args, sizeof(args), "prog_auto %d %d %d %d %d %d", N, K, M, P, T, F);
	root = run_program("tree", "", args);
	assert_int_equal(calls(root, "main"), 1);
	assert_int_equal(calls(root, "worker"), T);
	assert_int_equal(calls(root, "run_tree"), R);
	assert_int_equal(calls(root, "fib"), R * fib_calls(N));
	assert_int_equal(calls(root, "leaf_small"), R * K);
	assert_int_equal(calls(root, "shlib_fn"), R * M);
	assert_int_equal(calls(root, "shlib_helper"), R * M);
	assert_int_equal(calls(root, "cxx_entry"), R);
	assert_int_equal(calls(root, "demo::ns::work(int)"), R * P);

	assert_int_equal(edge_calls(root, "main", "run_tree"), 1);
	assert_int_equal(edge_calls(root, "worker", "run_tree"), T);
	assert_int_equal(edge_calls(root, "run_tree", "fib"), R);
	assert_int_equal(edge_calls(root, "fib", "fib"), R * (fib_calls(N) - 1));
	assert_int_equal(edge_calls(root, "run_tree", "shlib_fn"), R * M);
	assert_int_equal(edge_calls(root, "shlib_fn", "shlib_helper"), R * M);
	assert_int_equal(edge_calls(root, "cxx_entry", "demo::ns::work(int)"), R * P);

	expect_where(root, "fib", "prog_auto.c", "static int fib(int n)", "/prog_auto");
	expect_where(root, "shlib_helper", "autolib.c", "int shlib_helper(int x)",
		     "/libautolib.so");
	expect_where(root, "demo::ns::work(int)", "autocxx.cpp", "int work(int i)",
		     "/prog_auto");
	yajl_tree_free(root);
}

/* RINGPROF_AUTO_EXCLUDE: a filtered function is not recorded, the rest are. */
static void test_auto_exclude_filter(void **state)
{
	yajl_val root;

	(void)state;
	root = run_program("excl", "RINGPROF_AUTO_EXCLUDE='fib,demo::*'",
			   "prog_auto 6 2 2 2 0 0");
	assert_null(fn_row(root, "fib"));
	assert_null(fn_row(root, "demo::ns::work(int)"));
	assert_int_equal(calls(root, "leaf_small"), 2);
	assert_int_equal(calls(root, "cxx_entry"), 1);
	assert_int_equal(calls(root, "run_tree"), 1);
	assert_int_equal(edge_calls(root, "run_tree", "leaf_small"), 2);
	yajl_tree_free(root);
}

/* Contains "std::" or "__gnu_cxx::" anywhere: in this program, a standard library
 * function, or one whose parameters are (app::sum). */
static bool mentions_std(const char *name)
{
	return strstr(name, "std::") || strstr(name, "__gnu_cxx::");
}

/*
 * Patterns match the qualified name too: 'std::*,__gnu_cxx::*' leaves out every
 * function of the standard library, "void std::__sort<...>(...)" and
 * "__gnu_cxx::__normal_iterator<...> std::__unguarded_partition<...>(...)" among
 * them; every other function of the unfiltered run stays, with its calls; app::sum,
 * whose parameter is a std::vector, stays. An include pattern without the
 * parameter list ('app::make') matches "app::make(int)".
 */
static void test_auto_exclude_qualified(void **state)
{
	const char *sum = "app::sum(std::vector<int, std::allocator<int> > const&)";
	yajl_val all, some, fns;
	size_t kept = 0, with_return_type = 0, n;

	(void)state;
	all = run_program("qall", "", "prog_sort 300");
	some = run_program("qexcl", "RINGPROF_AUTO_EXCLUDE='std::*,__gnu_cxx::*'", "prog_sort 300");
	/* No longjmp here: gcc -O2 calls some exit hooks after the epilogue freed the
	 * frame (std::sort's helpers), which must not read as functions left unseen. */
	for (size_t i = 0; i < YAJL_GET_ARRAY(json_arr(all, "sources"))->len; i++) {
		yajl_val src = YAJL_GET_ARRAY(json_arr(all, "sources"))->values[i];
		const char *path[] = { "anomalies", NULL };
		yajl_val an = yajl_tree_get(src, path, yajl_t_object);

		assert_non_null(an);
		assert_int_equal(json_u64(an, "end_mismatch"), 0);
		assert_int_equal(json_u64(an, "end_unmatched"), 0);
		assert_int_equal(json_u64(src, "truncated"), 0);
	}
	fns = json_arr(all, "functions");
	n = YAJL_GET_ARRAY(fns)->len;
	for (size_t i = 0; i < n; i++) {
		yajl_val f = YAJL_GET_ARRAY(fns)->values[i];
		const char *name = json_str(f, "name");
		bool expect_kept = !mentions_std(name) || strcmp(name, sum) == 0;
		yajl_val g = fn_row(some, name);
		if (expect_kept != (g != NULL))
			print_message("    %s: %s\n", expect_kept ? "lost" : "kept", name);
		assert_int_equal(expect_kept, g != NULL);
		if (g && strcmp(name, "[ringprof-auto: resolve]") != 0)
			assert_int_equal(json_u64(g, "calls"), json_u64(f, "calls"));
		kept += expect_kept;
		with_return_type += !expect_kept && strncmp(name, "std::", 5) != 0 &&
				    strncmp(name, "__gnu_cxx::", 11) != 0;
	}
	print_message("    %zu of %zu names excluded, %zu of them after a return type\n",
		      n - kept, n, with_return_type);
	assert_int_equal(YAJL_GET_ARRAY(json_arr(some, "functions"))->len, kept);
	assert_true(with_return_type >= 5); /* void std::sort<...>, std::__sort<...>, ... */
	assert_non_null(fn_row(some, sum));
	assert_int_equal(calls(some, "app::make(int)"), 1);
	yajl_tree_free(some);

	some = run_program("qincl", "RINGPROF_AUTO_INCLUDE='app::make,main'", "prog_sort 300");
	assert_int_equal(calls(some, "app::make(int)"), 1);
	assert_int_equal(calls(some, "main"), 1);
	assert_null(fn_row(some, sum));
	assert_int_equal(edge_calls(some, "main", "app::make(int)"), 1);
	yajl_tree_free(some);
	yajl_tree_free(all);
}

static void test_auto_cxx_scopes_nest(void **state)
{
	const int A = 4, B = 5, T = 3;
	const uint64_t R = 1 + T; /* top() invocations */
	char args[64];
	const char *cpath[] = { "counters", NULL };
	yajl_val root, cs;
	uint64_t samples = 0;

	(void)state;
	snprintf(args, sizeof(args), "prog_scopes %d %d %d", A, B, T);
	root = run_program("scopes", "", args);
	assert_int_equal(calls(root, "top"), R);
	assert_int_equal(calls(root, "mid"), R * A);
	assert_int_equal(calls(root, "leaf"), R * A * B);
	assert_int_equal(calls(root, "thrower"), R);
	assert_int_equal(calls(root, "block"), R);
	assert_int_equal(calls(root, "request"), R);
	assert_int_equal(edge_calls(root, "top", "mid"), R * A);
	assert_int_equal(edge_calls(root, "mid", "leaf"), R * A * B);
	assert_int_equal(edge_calls(root, "top", "thrower"), R);
	assert_int_equal(edge_calls(root, "top", "block"), R);
	/* Nothing else nests anywhere: every edge is one of the four above. */
	yajl_val es = json_arr(root, "edges");
	for (size_t i = 0; i < YAJL_GET_ARRAY(es)->len; i++) {
		yajl_val e = YAJL_GET_ARRAY(es)->values[i];
		const char *a = json_str(e, "caller"), *b = json_str(e, "callee");
		bool known = (strcmp(a, "top") == 0 && (strcmp(b, "mid") == 0 ||
							strcmp(b, "thrower") == 0 ||
							strcmp(b, "block") == 0)) ||
			     (strcmp(a, "mid") == 0 && strcmp(b, "leaf") == 0);
		if (!known)
			print_message("    unexpected edge %s -> %s\n", a, b);
		assert_true(known);
	}
	cs = yajl_tree_get(root, cpath, yajl_t_array);
	assert_non_null(cs);
	for (size_t i = 0; i < YAJL_GET_ARRAY(cs)->len; i++) {
		yajl_val c = YAJL_GET_ARRAY(cs)->values[i];
		if (strcmp(json_str(c, "name"), "depth") == 0) {
			samples += json_u64(c, "samples");
			assert_int_equal(json_u64(c, "last"), A);
		}
	}
	assert_int_equal(samples, R);
	yajl_tree_free(root);
}

/* longjmp out of J x D traced calls, then N calls: each counted, no depth cap (the
 * nesting heals at the next call of a shallower frame: producers/shadow.c). */
static void test_auto_longjmp_heals(void **state)
{
	const int J = 300, D = 21, N = 10000;
	const char *cap[] = { "anomalies", "depth_cap", NULL };
	char args[64];
	yajl_val root, v;

	(void)state;
	snprintf(args, sizeof(args), "prog_longjmp %d %d %d", J, D, N);
	root = run_program("longjmp", "", args);
	assert_int_equal(calls(root, "work"), N);
	assert_int_equal(calls(root, "dive"), (uint64_t)J * D); /* truncated where cut */
	assert_int_equal(calls(root, "main"), 1);
	v = yajl_tree_get(root, cap, yajl_t_number);
	assert_true(v == NULL || YAJL_GET_INTEGER(v) == 0);
	yajl_tree_free(root);
}

/*
 * main calls 2,000 functions for the first time, warm() the same 2,000 again. Each
 * first call's symbol lookup must be off its caller's clock: a span of its own
 * ("[ringprof-auto: resolve]") under main, one per function resolved, none under
 * warm(). Before, the lookups had no row and were main's self time (2.1 ms against
 * 0.05 ms warm). The times are printed as figures, never asserted: no test fails on
 * a loaded machine's time.
 */
static void test_auto_first_call_off_caller_clock(void **state)
{
	const uint64_t N = 2000;
	yajl_val root = run_program("first", "", "prog_firstcall"), r;
	uint64_t main_self, warm_self, lookups;

	(void)state;
	assert_int_equal(calls(root, "main"), 1);
	assert_int_equal(calls(root, "warm"), 1);
	assert_int_equal(calls(root, "fn_0000"), 2);
	assert_int_equal(calls(root, "fn_1999"), 2);
	assert_int_equal(edge_calls(root, "main", "fn_1234"), 1);
	assert_int_equal(edge_calls(root, "warm", "fn_1234"), 1);
	r = fn_row(root, "[ringprof-auto: resolve]");
	assert_non_null(r);
	/* Every lookup is a span of its own under the caller that missed (main, warm
	 * and the 2,000; a C runtime function may add a few), so its time is in main's
	 * cum, not its self, by construction; warm() resolves nothing. */
	assert_true(json_u64(r, "calls") >= N + 2);
	assert_true(edge_calls(root, "main", "[ringprof-auto: resolve]") >= N);
	assert_int_equal(edge_calls(root, "warm", "[ringprof-auto: resolve]"), 0);
	/* The times, as figures only (a loaded machine moves them). */
	main_self = json_u64(fn_row(root, "main"), "self_ns");
	warm_self = json_u64(fn_row(root, "warm"), "self_ns");
	lookups = json_u64(r, "cum_ns");
	print_message("    main self %llu ns, warm self %llu ns, lookups %llu ns\n",
		      (unsigned long long)main_self, (unsigned long long)warm_self,
		      (unsigned long long)lookups);
	yajl_tree_free(root);
}

/*
 * Caps name their knobs: with ringprof-auto the name arena defaults to 8 MiB (room
 * for demangled C++); RINGPROF_NAMES=1000 against prog_firstcall's 2,002 functions
 * drops the names past the table (id 0 and the resolve row take two entries), and
 * the text report says which variables to raise and their values; every engine cap
 * hit (window_cap here: 2,000 names in one window) names its `ringprof run` option.
 */
static void test_auto_caps_name_knobs(void **state)
{
	const uint64_t N = 2000, cap = 1000;
	char want[256];
	yajl_val root, srcs, an;

	(void)state;
	root = run_program("knobs", "RINGPROF_NAMES=1000", "prog_firstcall");
	srcs = json_arr(root, "sources");
	assert_int_equal(YAJL_GET_ARRAY(srcs)->len, 1);
	assert_int_equal(json_u64(YAJL_GET_ARRAY(srcs)->values[0], "names_dropped"),
			 N + 2 - (cap - 2));
	snprintf(want, sizeof(want), "    names_dropped %llu: recorded as [overflow]; raise "
		 "RINGPROF_NAME_BYTES (now 8388608, ", (unsigned long long)(N + 2 - (cap - 2)));
	if (!strstr(last_text, want))
		print_message("%s", last_text);
	assert_non_null(strstr(last_text, want));
	assert_non_null(strstr(last_text, " used) or RINGPROF_NAMES (now 1000, 1000 used)\n"));

	an = yajl_tree_get(root, (const char *[]){ "anomalies", NULL }, yajl_t_object);
	assert_non_null(an);
	for (size_t i = 0; i < YAJL_GET_OBJECT(an)->len; i++) {
		const char *k = YAJL_GET_OBJECT(an)->keys[i];
		uint64_t n = (uint64_t)YAJL_GET_INTEGER(YAJL_GET_OBJECT(an)->values[i]);
		if (n == 0 || strlen(k) < 4 || strcmp(k + strlen(k) - 4, "_cap") != 0)
			continue;
		snprintf(want, sizeof(want), "\n  %s %llu: raise ringprof run --max-", k,
			 (unsigned long long)n);
		print_message("    %s %llu: knob named\n", k, (unsigned long long)n);
		assert_non_null(strstr(last_text, want));
	}
	yajl_tree_free(root);
}

/*
 * A compiler's copies of a function are that function: prog_clones' symbols named as
 * gcc and LLVM name clones ("work.constprop.0", "split.isra.0.part.1", "hot.cold",
 * "promoted.llvm.8812345", a C++ "_ZN4demo5cloneEl.constprop.3") are reported under
 * their source names, with every call; names whose dot is no copy's stay whole.
 */
static void test_auto_copies_named_as_source(void **state)
{
	static const char *const want[] = { "work", "split", "promoted", "hot",
					     "demo::clone(long)", "dotted.name",
					     "almost.llvmx.1" };
	static const char *const gone[] = { "work.constprop.0", "split.isra.0.part.1",
					     "split.isra.0", "promoted.llvm.8812345",
					     "hot.cold", "demo::clone(long) [clone .constprop.3]" };
	const uint64_t N = 1000;
	yajl_val root;

	(void)state;
	root = run_program("clones", "", "prog_clones 1000");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		print_message("    %s: %llu calls\n", want[i],
			      (unsigned long long)calls(root, want[i]));
		assert_int_equal(calls(root, want[i]), (i + 1) * N);
		assert_int_equal(edge_calls(root, "main", want[i]), (i + 1) * N);
	}
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		assert_null(fn_row(root, gone[i]));
	yajl_tree_free(root);
}

/*
 * prog_inline: a header's static inline function, one copy in each of three units
 * that spell the header's path "inl.h", "./inl.h" and "<dir>/../auto/inl.h", is one
 * function: one row with every copy's calls, its file one spelling with neither "."
 * nor ".." in it (with libdw; without, every copy is the program's object, line 0).
 */
static void test_auto_inline_one_row(void **state)
{
	const uint64_t N = 1000;
	yajl_val root, fns;
	uint32_t rows = 0;

	(void)state;
	root = run_program("inline", "", "prog_inline 1000");
	fns = json_arr(root, "functions");
	for (size_t i = 0; i < YAJL_GET_ARRAY(fns)->len; i++) {
		yajl_val f = YAJL_GET_ARRAY(fns)->values[i];
		const char *name = json_str(f, "name"), *file = json_str(f, "file");

		if (name == NULL || strcmp(name, "inl_twice") != 0)
			continue;
		rows++;
		print_message("    inl_twice: %s:%llu, %llu calls\n", file ? file : "(none)",
			      (unsigned long long)json_u64(f, "line"),
			      (unsigned long long)json_u64(f, "calls"));
		assert_int_equal(json_u64(f, "calls"), 3 * N);
#ifdef RP_AUTO_DWARF
		assert_true(ends_with(file, "/inl.h"));
		assert_null(strstr(file, "/./"));
		assert_null(strstr(file, "/../"));
#endif
	}
	assert_int_equal(rows, 1);
	yajl_tree_free(root);
}

static int setup(void **state)
{
	const char *src = getenv("RP_AUTO_SRC");

	(void)state;
	snprintf(srcdir, sizeof(srcdir), "%s", src ? src : "../../tests/auto");
	return rp_test_prog_dirs(bin, progdir, tmpdir, "RP_AUTO_DIR", "auto",
				 "/tmp/rp_auto_XXXXXX");
}

static int teardown(void **state)
{
	(void)state;
	rp_test_engine_kill(engine);
	free(last_text);
	return rp_test_rm_tmp(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_call_tree_exact),
		cmocka_unit_test(test_auto_exclude_filter),
		cmocka_unit_test(test_auto_exclude_qualified),
		cmocka_unit_test(test_auto_cxx_scopes_nest),
		cmocka_unit_test(test_auto_longjmp_heals),
		cmocka_unit_test(test_auto_first_call_off_caller_clock),
		cmocka_unit_test(test_auto_caps_name_knobs),
		cmocka_unit_test(test_auto_copies_named_as_source),
		cmocka_unit_test(test_auto_inline_one_row),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
