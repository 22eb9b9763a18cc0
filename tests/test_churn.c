// SPDX-License-Identifier: MIT
/*
 * Rings follow threads without the engine (issue 20, part 4): a thread that exits
 * leaves its ring undrained when the engine lags, and a new thread takes it over at
 * once, its records after an owner mark (RP_EV_THREAD) that tells the engine where
 * the old owner's end. Through the built binaries (RP_BIN_DIR): a real `ringprof
 * run` engine, stopped with SIGSTOP while a producer child runs 5,000 short threads,
 * 32 alive at a time; after SIGCONT its snapshot must hold every record, each
 * thread's spans exactly (the oracle: the program's own counts), nothing dropped,
 * no anomaly. Before take-overs, 98.7% of the records were lost as `noring`.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "support.h"

#define THREADS	 5000u
#define ALIVE	 32u
#define INNER	 9u	/* per thread: outer { INNER x inner }: 2 + 2 * INNER records */
#define RECORDS	 (2u + 2u * INNER)

static char bin[600], tmpdir[256];
static pid_t children[4];
static unsigned n_children;

static pid_t track(pid_t pid)
{
	if (pid > 0 && n_children < 4)
		children[n_children++] = pid;
	return pid;
}

static int wait_exit(pid_t pid)
{
	int st;

	for (unsigned i = 0; i < n_children; i++)
		if (children[i] == pid)
			children[i] = children[--n_children];
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static uint32_t outer_id, inner_id;

static void *short_thread(void *arg)
{
	(void)arg;
	rp_begin(outer_id);
	for (unsigned i = 0; i < INNER; i++) {
		rp_begin(inner_id);
		rp_end(inner_id);
	}
	rp_end(outer_id);
	return NULL;
}

/* The producer: THREADS short threads, at most ALIVE at once; exit status 0 when
 * every one ran. Runs in a child, whose exit path is the one under test. */
static int churn(const char *session)
{
	static pthread_t th[ALIVE];

	setenv("RINGPROF_SESSION", session, 1);
	unsetenv("RINGPROF_NO_ENGINE");
	if (rp_init() != 0)
		return 3;
	outer_id = rp_intern("churn_outer", "FUNCTION", __FILE__, __LINE__);
	inner_id = rp_intern("churn_inner", "FUNCTION", __FILE__, __LINE__);
	for (unsigned i = 0; i < THREADS; i++) {
		if (i >= ALIVE && pthread_join(th[i % ALIVE], NULL) != 0)
			return 4;
		if (pthread_create(&th[i % ALIVE], NULL, short_thread, NULL) != 0)
			return 5;
	}
	for (unsigned i = 0; i < ALIVE; i++)
		pthread_join(th[i], NULL);
	return 0;
}

static uint64_t json_u64(yajl_val v, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val x = yajl_tree_get(v, path, yajl_t_number);

	assert_non_null(x);
	return strtoull(YAJL_GET_NUMBER(x), NULL, 10);
}

/* Calls of the function rows named @name. */
static uint64_t calls_of(yajl_val root, const char *name)
{
	const char *fpath[] = { "functions", NULL }, *npath[] = { "name", NULL };
	yajl_val fns = yajl_tree_get(root, fpath, yajl_t_array);
	uint64_t n = 0;

	for (size_t i = 0; i < YAJL_GET_ARRAY(fns)->len; i++) {
		yajl_val f = YAJL_GET_ARRAY(fns)->values[i];
		const char *fname = YAJL_GET_STRING(yajl_tree_get(f, npath, yajl_t_string));
		if (fname != NULL && strcmp(fname, name) == 0)
			n += json_u64(f, "calls");
	}
	return n;
}

struct counts {
	uint64_t events, dropped, truncated, anomalies, outer, inner;
};

/* The session's latest snapshot, as json: the source of @pid, and the function rows. */
static void snapshot_counts(const char *session, pid_t pid, struct counts *c)
{
	char *path, *json, err[256];
	const char *spath[] = { "sources", NULL }, *apath[] = { "anomalies", NULL };
	yajl_val root, src;

	assert_int_equal(rp_test_sh(&path, NULL, "%s snapshot --timeout-ms 60000 --session %s",
				    bin, session), 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(rp_test_sh(&json, NULL, "%s report %s --format json", bin, path), 0);
	root = yajl_tree_parse(json, err, sizeof(err));
	assert_non_null(root);
	/* `ringprof snapshot` asked again while records waited: this one holds them all */
	assert_int_equal(json_u64(root, "unmerged_records"), 0);
	memset(c, 0, sizeof(*c));
	src = yajl_tree_get(root, spath, yajl_t_array);
	for (size_t i = 0; i < YAJL_GET_ARRAY(src)->len; i++) {
		yajl_val s = YAJL_GET_ARRAY(src)->values[i];
		yajl_val a = yajl_tree_get(s, apath, yajl_t_object);

		if (json_u64(s, "pid") != (uint64_t)pid)
			continue;
		c->events += json_u64(s, "events");
		c->dropped += json_u64(s, "dropped");
		c->truncated += json_u64(s, "truncated");
		assert_non_null(a);
		for (size_t k = 0; k < YAJL_GET_OBJECT(a)->len; k++)
			c->anomalies += strtoull(YAJL_GET_NUMBER(YAJL_GET_OBJECT(a)->values[k]),
						 NULL, 10);
	}
	c->outer = calls_of(root, "churn_outer");
	c->inner = calls_of(root, "churn_inner");
	yajl_tree_free(root);
	free(json);
	free(path);
}

/* `ringprof snapshot --now`: the engine's first snapshot, whatever its backlog (it
 * says how many records it left: header.unmerged_records); it answers and reads. */
static void snapshot_now(const char *session)
{
	char *path, *text;

	assert_int_equal(rp_test_sh(&path, NULL, "%s snapshot --now --session %s", bin, session),
			 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(rp_test_sh(&text, NULL, "%s report %s", bin, path), 0);
	free(text);
	free(path);
}

static void test_churn_stopped_engine_loses_nothing(void **state)
{
	char session[32];
	struct counts c;
	pid_t eng, prod;

	(void)state;
	snprintf(session, sizeof(session), "t_churn_%d", (int)getpid());
	eng = track(rp_test_engine_start(bin, tmpdir, session, NULL, "--quiet"));
	kill(eng, SIGSTOP);
	prod = track(fork());
	if (prod == 0)
		exit(churn(session)); /* exit(): the atexit exit path runs */
	assert_int_equal(wait_exit(prod), 0);
	kill(eng, SIGCONT);
	snapshot_now(session);
	snapshot_counts(session, prod, &c); /* asks until the backlog is merged */
	print_message("    %u threads x %u records: events %llu, dropped %llu, truncated %llu, "
		      "anomalies %llu\n", THREADS, RECORDS, (unsigned long long)c.events,
		      (unsigned long long)c.dropped, (unsigned long long)c.truncated,
		      (unsigned long long)c.anomalies);
	assert_int_equal(c.dropped, 0);
	assert_int_equal(c.events, (uint64_t)THREADS * RECORDS);
	assert_int_equal(c.outer, THREADS);
	assert_int_equal(c.inner, (uint64_t)THREADS * INNER);
	assert_int_equal(c.truncated, 0);
	assert_int_equal(c.anomalies, 0);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
}

static int setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR");

	(void)state;
	snprintf(bin, sizeof(bin), "%s/ringprof", b ? b : "../tools");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rp_churn_XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	while (n_children > 0) {
		kill(children[--n_children], SIGKILL);
		waitpid(children[n_children], NULL, 0);
	}
	return rp_test_sh(NULL, NULL, "rm -rf %s", tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_churn_stopped_engine_loses_nothing),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
