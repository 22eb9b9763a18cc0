// SPDX-License-Identifier: MIT
/*
 * fork(): the child records into a segment of its own (named for its pid), never
 * into its parent's; the parent's rings hold exactly the parent's records; fork()
 * while another thread holds the interning lock does not deadlock the child.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>

#include "support.h"

static uint32_t cid;

/* Drains ring 0 of `s` and checks it holds exactly counters first..first+n-1. */
static int drain_exact(struct rp_segment *s, int64_t first, unsigned n)
{
	struct rp_event ev[512];
	unsigned got = rp_segment_drain(s, 0, ev, 512, NULL);

	if (got != n)
		return -1;
	for (unsigned k = 0; k < got; k++)
		if (ev[k].kind != RP_EV_COUNTER || (int64_t)ev[k].arg != first + k)
			return -2;
	return 0;
}

static int child_body(const char *parent_path)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s;
	char own[96];

	for (int i = 0; i < 100; i++)
		rp_counter(cid, 1000 + i);
	if (rp_segment_path() == NULL || strcmp(rp_segment_path(), parent_path) == 0)
		return 10;
	snprintf(own, sizeof(own), "/ringprof.%s.%d.0", getenv("RINGPROF_SESSION"),
		 (int)getpid());
	if (strcmp(rp_segment_path(), own) != 0)
		return 11;
	if (rp_segment_open(own, &s, why) != 0)
		return 12;
	if (s->v.pid != getpid() || drain_exact(s, 1000, 100) != 0)
		return 13;
	rp_segment_close(s);
	return 0;
}

static int wait_child(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void test_fork_child_gets_own_segment(void **state)
{
	struct rp_segment *parent = rp_test_open_self();
	char path[96];
	pid_t pid;

	(void)state;
	snprintf(path, sizeof(path), "%s", rp_segment_path());
	for (int i = 0; i < 5; i++)
		rp_counter(cid, i);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int rc = child_body(path);
		rp_shutdown();
		_exit(rc);
	}
	assert_int_equal(wait_child(pid), 0);
	/* The parent's ring: its 5 records, none of the child's 100. */
	assert_int_equal(drain_exact(parent, 0, 5), 0);
	assert_string_equal(rp_segment_path(), path);
	for (int i = 0; i < 3; i++)
		rp_counter(cid, 5 + i);
	assert_int_equal(drain_exact(parent, 5, 3), 0);
	rp_segment_close(parent);
}

static atomic_int stop;

static void *intern_loop(void *arg)
{
	char name[32];
	unsigned i = 0;

	(void)arg;
	while (!atomic_load(&stop)) {
		snprintf(name, sizeof(name), "n%u", i++ % 4);
		rp_intern(name, "LOOP", NULL, 0);
	}
	return NULL;
}

/* The interning lock is held around fork() by the atfork handlers; without them a
 * child forked while another thread held it would hang on its first rp_intern. */
static void test_fork_while_interning_does_not_deadlock(void **state)
{
	pthread_t th;
	int failures = 0;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, intern_loop, NULL), 0);
	for (int i = 0; i < 40; i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			/* a deadlock ends in SIGALRM, not a hung test (60 s: a sanitized
			 * child on a loaded machine is slow; a deadlock is forever) */
			alarm(60);
			uint32_t id = rp_intern("in-child", "X", NULL, 0);
			rp_counter(id, 1);
			rp_shutdown();
			_exit(id == 0 ? 1 : 0);
		}
		failures += wait_child(pid) != 0;
	}
	atomic_store(&stop, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(failures, 0);
}

/* A grandchild, too, gets a segment of its own, with the inherited names. */
static void test_fork_grandchild(void **state)
{
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		rp_counter(cid, 1);
		char mid[96];
		snprintf(mid, sizeof(mid), "%s", rp_segment_path());
		pid_t g = fork();
		if (g == 0) {
			int rc = child_body(mid);
			rp_shutdown();
			_exit(rc);
		}
		int rc = wait_child(g);
		rp_shutdown();
		_exit(rc);
	}
	assert_int_equal(wait_child(pid), 0);
}

static int setup(void **state)
{
	(void)state;
	cid = rp_intern("forked", "COUNTER", NULL, 0);
	return cid == 0 ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_child_gets_own_segment),
		cmocka_unit_test(test_fork_while_interning_does_not_deadlock),
		cmocka_unit_test(test_fork_grandchild),
	};

	setenv("RINGPROF_RING_EVENTS", "512", 1);
	setenv("RINGPROF_RINGS", "4", 1);
	if (getenv("RINGPROF_SESSION") == NULL)
		setenv("RINGPROF_SESSION", "t_fork", 1);
	return cmocka_run_group_tests(tests, setup, NULL);
}
