// SPDX-License-Identifier: MIT
/*
 * The unlink rule at normal exit (docs/operations.md, "Exit path"):
 *  - an engine running (someone holds the marker's lock): the producer waits (at
 *    most RINGPROF_EXIT_WAIT_MS) until every ring is drained, then unlinks; the
 *    engine keeps its mapping;
 *  - records nobody has read: the segment stays, whether no engine runs, the engine
 *    is too slow (stopped), or the marker is stale; the next drain removes it;
 *  - nothing unread (no records, or all drained): the producer unlinks at once;
 *  - RINGPROF_KEEP=1: the name stays, for an engine started later to drain.
 * Each case runs in a child process, since exit is once per process.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "support.h"

static const char *session(void)
{
	return getenv("RINGPROF_SESSION");
}

static void seg_name(char *buf, size_t n, pid_t pid)
{
	snprintf(buf, n, RP_WIRE_NAME_FMT ".0", session(), (int)pid);
}

static bool shm_exists(const char *name)
{
	int fd = shm_open(name, O_RDONLY, 0);

	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* Forks a producer that records n instants, sets `env` first, then exits. */
static pid_t spawn_producer(unsigned n, const char *env_name, const char *env_value)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	if (env_name != NULL)
		setenv(env_name, env_value, 1);
	uint32_t id = rp_intern("step", "STEP", NULL, 0);
	for (unsigned i = 0; i < n; i++)
		rp_instant(id);
	exit(0); /* a normal exit: atexit runs rp_shutdown */
}

static int wait_exit(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static int marker_fd = -1; /* holds the marker's lock while "an engine runs" */

/* Announces an engine with pid `pid` for this session; the lock is taken (as
 * `ringprof run` does) only when that is us, so another pid makes a stale marker. */
static void engine_marker(pid_t pid)
{
	char name[96];
	struct rp_wire_engine m = { .magic = RP_WIRE_ENGINE_MAGIC, .pid = pid };
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd;

	snprintf(name, sizeof(name), RP_WIRE_ENGINE_FMT, session());
	fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, &m, sizeof(m)), sizeof(m));
	if (pid == getpid()) {
		assert_int_equal(fcntl(fd, F_SETLK, &fl), 0);
		marker_fd = fd;
	} else {
		close(fd);
	}
}

static void engine_gone(void)
{
	char name[96];

	snprintf(name, sizeof(name), RP_WIRE_ENGINE_FMT, session());
	shm_unlink(name);
	if (marker_fd >= 0)
		close(marker_fd);
	marker_fd = -1;
}

/* A segment left behind: still there, with its @n records unread; removed. */
static void left_for_engine(const char *name, unsigned n)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s;
	struct rp_event ev[64];

	assert_true(shm_exists(name));
	assert_int_equal(rp_segment_open(name, &s, why), 0);
	assert_int_equal(rp_test_hdr(s)->state, RP_SEG_EXITED);
	assert_int_equal(rp_segment_drain(s, 0, ev, 64, NULL), n);
	rp_segment_close(s);
	assert_int_equal(shm_unlink(name), 0);
}

/* No engine: nothing unread, the name goes; records unread, it stays for the next
 * engine (it used to be unlinked, and its records lost without a count). */
static void test_exit_no_engine(void **state)
{
	char name[96];
	pid_t pid;

	(void)state;
	engine_gone();
	pid = spawn_producer(0, NULL, NULL);
	assert_int_equal(wait_exit(pid), 0);
	seg_name(name, sizeof(name), pid);
	assert_false(shm_exists(name));
	pid = spawn_producer(10, NULL, NULL);
	assert_int_equal(wait_exit(pid), 0);
	seg_name(name, sizeof(name), pid);
	left_for_engine(name, 10);
}

/* An engine drains while the producer exits: every record arrives, the producer
 * unlinks after the drain, and the engine's mapping stays readable. */
static void test_exit_waits_for_engine_drain(void **state)
{
	char name[96], why[RP_WHY_MAX];
	struct rp_segment *s = NULL;
	struct rp_event ev[512];
	struct timespec ms = { 0, 1000000 }, a, b;
	uint64_t received = 0;
	int status = -1;
	pid_t pid;

	(void)state;
	engine_marker(getpid());
	clock_gettime(CLOCK_MONOTONIC, &a);
	pid = spawn_producer(1000, "RINGPROF_EXIT_WAIT_MS", "60000");
	seg_name(name, sizeof(name), pid);
	while (rp_segment_open(name, &s, why) != 0)
		nanosleep(&ms, NULL);
	for (;;) {
		received += rp_segment_drain(s, 0, ev, 512, NULL);
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		nanosleep(&ms, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	received += rp_segment_drain(s, 0, ev, 512, NULL);
	assert_true(WIFEXITED(status));
	assert_int_equal(received, 1000);
	assert_int_equal(rp_test_hdr(s)->state, RP_SEG_EXITED);
	assert_true(rp_test_hdr(s)->exit_ticks != 0);
	assert_false(shm_exists(name));
	/* It left as soon as the rings were drained, not at the 60 s limit. */
	assert_true(b.tv_sec - a.tv_sec < 30);
	rp_segment_close(s);
	engine_gone();
}

/* issue 10, repro 2: an engine that does not drain in time (stopped, slow) costs the
 * exit at most RINGPROF_EXIT_WAIT_MS, and a marker left by a dead engine (nobody
 * holds its lock) costs nothing; either way the segment stays, records unread, for
 * the engine to drain and remove (it was unlinked: 10,750 events lost unseen). */
static void test_exit_bounded_wait_and_stale_marker(void **state)
{
	char name[96];
	struct timespec a, b;
	pid_t pid, dead;

	(void)state;
	engine_marker(getpid()); /* alive, but does not drain */
	pid = spawn_producer(10, "RINGPROF_EXIT_WAIT_MS", "50");
	assert_int_equal(wait_exit(pid), 0);
	seg_name(name, sizeof(name), pid);
	left_for_engine(name, 10);
	engine_gone();
	dead = fork();
	if (dead == 0)
		_exit(0);
	assert_int_equal(wait_exit(dead), 0);
	engine_marker(dead); /* a pid that no longer runs */
	clock_gettime(CLOCK_MONOTONIC, &a);
	pid = spawn_producer(10, "RINGPROF_EXIT_WAIT_MS", "60000");
	assert_int_equal(wait_exit(pid), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true(b.tv_sec - a.tv_sec < 30); /* no wait for a stale marker */
	seg_name(name, sizeof(name), pid);
	left_for_engine(name, 10);
	engine_gone();
}

/* RINGPROF_KEEP=1: the segment outlives its producer, whole, for a later engine. */
static void test_exit_keep_leaves_segment(void **state)
{
	char name[96], why[RP_WHY_MAX];
	struct rp_segment *s;
	struct rp_event ev[64];
	pid_t pid;

	(void)state;
	engine_gone();
	pid = spawn_producer(10, "RINGPROF_KEEP", "1");
	assert_int_equal(wait_exit(pid), 0);
	seg_name(name, sizeof(name), pid);
	assert_true(shm_exists(name));
	assert_int_equal(rp_segment_open(name, &s, why), 0);
	assert_int_equal(s->v.pid, pid);
	assert_int_equal(rp_test_hdr(s)->state, RP_SEG_EXITED);
	assert_int_equal(rp_segment_drain(s, 0, ev, 64, NULL), 10);
	for (int i = 0; i < 10; i++)
		assert_int_equal(ev[i].kind, RP_EV_INSTANT);
	rp_segment_close(s);
	assert_int_equal(shm_unlink(name), 0);
}

int main(void)
{
	/* The default exit path is under test here, not the suite's cleanup mode. */
	unsetenv("RINGPROF_NO_ENGINE");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_no_engine),
		cmocka_unit_test(test_exit_waits_for_engine_drain),
		cmocka_unit_test(test_exit_bounded_wait_and_stale_marker),
		cmocka_unit_test(test_exit_keep_leaves_segment),
	};

	{
		/* Per process: a concurrent run of this test elsewhere on the machine
		 * must not see our segments, nor we its. */
		char s[32];
		const char *base = getenv("RINGPROF_SESSION");
		snprintf(s, sizeof(s), "%.18s_%d", base ? base : "t_exit", (int)getpid());
		setenv("RINGPROF_SESSION", s, 1);
	}
	setenv("RINGPROF_RINGS", "2", 1);
	setenv("RINGPROF_RING_EVENTS", "4096", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
