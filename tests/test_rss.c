// SPDX-License-Identifier: MIT
/*
 * The engine's memory under load, end to end: `ringprof run` drains `ringprof-demo`
 * and we read the engine's resident set (VmRSS) once every event is in.
 *   - flat: after 10 M demo events the RSS is within 10% of the RSS after 1 M (each
 *     in a fresh engine), so nothing grows with the number of events;
 *   - bounded: with 1,000,000 distinct tool names (20 M events: about 120,000 tool
 *     calls, past the engine's 65,536-name cap; the producer's name table is raised
 *     to hold them all) the names past the cap are folded
 *     (counted as name_cap) and the RSS stays under caps.memory_bound.
 * The demo is paced (--rate, --time-scale) so that the engine keeps up: a run with
 * more than 1% dropped would not measure what it says, and fails.
 * Under a sanitizer the binaries' memory is the sanitizer's: skipped.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "support.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

static char bin[600], demo[600], dir[256];
static pid_t engine = -1; /* killed by teardown if a test fails half-way */

#define run(out, ...) rp_test_sh(out, NULL, __VA_ARGS__)

static uint64_t num(yajl_val root, const char *a, const char *b)
{
	const char *path[] = { a, b, NULL };
	yajl_val v = yajl_tree_get(root, path, yajl_t_number);

	assert_non_null(v);
	return (uint64_t)YAJL_GET_INTEGER(v);
}

static uint64_t rss_kb(pid_t pid)
{
	char path[64], line[256];
	unsigned long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

struct result {
	uint64_t rss_kb, emitted, events, dropped, name_cap, bound;
};

/* A fresh engine, one demo run with @args, every event in: the engine's figures. */
static void measure(const char *session, const char *args, struct result *res)
{
	char *out, *json;
	yajl_val root;
	int status;

	engine = rp_test_engine_spawn(bin, session, dir, NULL, NULL, "--quiet", "--no-socket",
				      (char *)NULL);
	assert_int_equal(rp_test_engine_wait(session, engine, NULL), -1);
	assert_int_equal(
		run(&out, "RINGPROF_SESSION=%s %s --duration 0 --quiet %s", session, demo, args),
		0);
	assert_int_equal(sscanf(out, "emitted: %" SCNu64, &res->emitted), 1);
	free(out);
	for (int i = 0;; i++) { /* until the engine has every event */
		assert_int_equal(
			run(&out, "%s snapshot --session %s --timeout-ms 60000", bin, session), 0);
		out[strcspn(out, "\n")] = '\0';
		assert_int_equal(run(&json, "%s report %s --format json", bin, out), 0);
		free(out);
		root = yajl_tree_parse(json, NULL, 0);
		assert_non_null(root);
		free(json);
		res->events = num(root, "events", NULL);
		res->dropped = num(root, "dropped", NULL);
		res->name_cap = num(root, "anomalies", "name_cap");
		res->bound = num(root, "caps", "memory_bound");
		yajl_tree_free(root);
		if (res->events + res->dropped >= res->emitted || i == 100)
			break;
		usleep(100000);
	}
	res->rss_kb = rss_kb(engine);
	kill(engine, SIGTERM);
	assert_int_equal(waitpid(engine, &status, 0), engine);
	engine = -1;
	print_message("  %s %s: emitted %" PRIu64 ", events %" PRIu64 ", dropped %" PRIu64
		      ", name_cap %" PRIu64 ", RSS %" PRIu64 " kB\n",
		      session, args, res->emitted, res->events, res->dropped, res->name_cap,
		      res->rss_kb);
	assert_int_equal(res->events + res->dropped, res->emitted);
	assert_true(res->dropped * 100 <= res->emitted); /* else this measured nothing */
}

#define PACED "--rate 20000 --time-scale 0.01"

static void test_rss_flat_in_events(void **state)
{
	char s1[64], s10[64];
	struct result r1, r10;

	(void)state;
	if (UNDER_SANITIZER)
		skip();
	snprintf(s1, sizeof(s1), "%s_1m", getenv("RINGPROF_SESSION"));
	snprintf(s10, sizeof(s10), "%s_10m", getenv("RINGPROF_SESSION"));
	measure(s1, "--events 1000000 " PACED, &r1);
	measure(s10, "--events 10000000 " PACED, &r10);
	print_message("  RSS after 10 M / after 1 M: %.3f\n", (double)r10.rss_kb / r1.rss_kb);
	assert_true(r10.events >= 9 * r1.events);
	assert_true(r10.rss_kb * 10 <= r1.rss_kb * 11);
}

static void test_rss_bounded_in_names(void **state)
{
	char s[64];
	struct result r;

	(void)state;
	if (UNDER_SANITIZER)
		skip();
	snprintf(s, sizeof(s), "%s_names", getenv("RINGPROF_SESSION"));
	/* the producer's own name table (RINGPROF_NAMES, RINGPROF_NAME_BYTES) must hold them
	 * all for the engine's cap to be what is tested */
	setenv("RINGPROF_NAMES", "1048576", 1);
	setenv("RINGPROF_NAME_BYTES", "67108864", 1);
	measure(s, "--events 20000000 --distinct-names 1000000 " PACED, &r);
	unsetenv("RINGPROF_NAMES");
	unsetenv("RINGPROF_NAME_BYTES");
	print_message("  RSS %" PRIu64 " kB of a %" PRIu64 " kB bound (%.1f%%)\n", r.rss_kb,
		      r.bound / 1024, 100.0 * (double)r.rss_kb * 1024 / (double)r.bound);
	assert_true(r.name_cap > 0); /* the cap was reached: names were folded */
	assert_true(r.rss_kb * 1024 <= r.bound);
}

static int setup(void **state)
{
	const char *bd = getenv("RP_BIN_DIR");

	(void)state;
	assert_non_null(bd);
	snprintf(bin, sizeof(bin), "%s/ringprof", bd);
	snprintf(demo, sizeof(demo), "%s/ringprof-demo", bd);
	snprintf(dir, sizeof(dir), "/tmp/rp_rss_%d", (int)getpid());
	return mkdir(dir, 0700);
}

static int teardown(void **state)
{
	char *out;

	(void)state;
	if (engine > 0) {
		kill(engine, SIGKILL);
		waitpid(engine, NULL, 0);
	}
	run(&out, "rm -rf %s", dir);
	free(out);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rss_flat_in_events),
		cmocka_unit_test(test_rss_bounded_in_names),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
