// SPDX-License-Identifier: MIT
/*
 * A producer whose session no engine drains says so once on stderr, naming the
 * session and how to start its engine, RINGPROF_NO_ENGINE_WARN_S seconds after its
 * segment was made; never before that, never when an engine has attached
 * (consumer_pid), never with RINGPROF_QUIET=1 or RINGPROF_NO_ENGINE=discard. Each
 * case is a child process (the check is once per process), its stderr a file.
 */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "support.h"

enum { SILENT_BEFORE, AFTER, ATTACHED };

static void *record(void *arg)
{
	uint32_t id = rp_intern("worker", "T", NULL, 0);

	(void)arg;
	rp_instant(id);
	return NULL;
}

/*
 * Runs a producer: records on the main thread, waits @wait_ms, records on a new
 * thread (a ring claimed: a check) and exits (another check). @attached: an engine
 * attaches first (its pid in consumer_pid, as sources.c writes it). Its stderr is
 * returned (malloc'ed).
 */
static char *producer(const char *const env[], unsigned wait_ms, bool attached)
{
	char path[] = "/tmp/rp_undrained_XXXXXX", *out = NULL;
	int fd = mkstemp(path), status;
	pid_t pid;

	assert_true(fd >= 0);
	pid = fork();
	if (pid == 0) {
		struct timespec pause = { wait_ms / 1000, (long)(wait_ms % 1000) * 1000000 };
		pthread_t th;

		dup2(fd, STDERR_FILENO);
		unsetenv("RINGPROF_NO_ENGINE");
		setenv("RINGPROF_KEEP_MAX", "0", 1); /* no segment left behind */
		for (size_t i = 0; env[i] != NULL; i += 2)
			setenv(env[i], env[i + 1], 1);
		rp_instant(rp_intern("main", "T", NULL, 0));
		if (attached)
			__atomic_store_n(&rp_segment_header()->consumer_pid, (int32_t)getppid(),
					 __ATOMIC_RELAXED);
		nanosleep(&pause, NULL);
		pthread_create(&th, NULL, record, NULL);
		pthread_join(th, NULL);
		exit(0); /* atexit: rp_shutdown */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(rp_test_sh(&out, NULL, "cat %s", path), 0);
	unlink(path);
	close(fd);
	return out;
}

static void test_undrained_said_once_after_n_seconds(void **state)
{
	const char *const env[] = { "RINGPROF_NO_ENGINE_WARN_S", "1", NULL };
	const char *session = getenv("RINGPROF_SESSION");
	char want[512], *err = producer(env, 1200, false);

	(void)state;
	snprintf(want, sizeof(want), "ringprof: no engine has drained session \"%s\" in 1 s "
		 "(segment /dev/shm/ringprof.%s.", session, session);
	assert_memory_equal(err, want, strlen(want));
	snprintf(want, sizeof(want), "): start one with `ringprof run --session %s`, or set "
		 "RINGPROF_SESSION to a running engine's session (RINGPROF_QUIET=1: not said)\n",
		 session);
	assert_non_null(strstr(err, want));
	/* once: one line, although the new thread and the exit both looked */
	assert_int_equal(strchr(err, '\n') - err + 1, (long)strlen(err));
	free(err);
}

static void test_undrained_silent_before_n_seconds(void **state)
{
	const char *const env[] = { "RINGPROF_NO_ENGINE_WARN_S", "60", NULL };
	char *err = producer(env, 100, false);

	(void)state;
	assert_string_equal(err, "");
	free(err);
}

static void test_undrained_silent_when_an_engine_attached(void **state)
{
	const char *const env[] = { "RINGPROF_NO_ENGINE_WARN_S", "1", NULL };
	char *err = producer(env, 1200, true);

	(void)state;
	assert_string_equal(err, "");
	free(err);
}

static void test_undrained_silent_when_quiet_or_discard(void **state)
{
	const char *const quiet[] = { "RINGPROF_NO_ENGINE_WARN_S", "1", "RINGPROF_QUIET", "1",
				      NULL };
	const char *const discard[] = { "RINGPROF_NO_ENGINE_WARN_S", "1", "RINGPROF_NO_ENGINE",
					"discard", NULL };
	const char *const off[] = { "RINGPROF_NO_ENGINE_WARN_S", "0", NULL };
	char *err;

	(void)state;
	err = producer(quiet, 1200, false);
	assert_string_equal(err, "");
	free(err);
	err = producer(discard, 1200, false);
	assert_string_equal(err, "");
	free(err);
	err = producer(off, 1200, false);
	assert_string_equal(err, "");
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_undrained_said_once_after_n_seconds),
		cmocka_unit_test(test_undrained_silent_before_n_seconds),
		cmocka_unit_test(test_undrained_silent_when_an_engine_attached),
		cmocka_unit_test(test_undrained_silent_when_quiet_or_discard),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
