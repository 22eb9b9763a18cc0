// SPDX-License-Identifier: MIT
/*
 * The snapshot directory of `ringprof run`, end to end through the built binary
 * (RP_BIN_DIR), for the holes issue 20 found there: a sticky shared directory (like
 * /tmp) is accepted for the snapshots and the live socket alike, as
 * docs/operations.md says, and a refusal prints the mode in full; the temporary
 * files of writers killed mid-write are removed at the engine's start (only ours,
 * only of dead pids, only our name patterns); and `ringprof snapshot` prints why the
 * engine could not write (here: the directory removed under it), not just that no
 * file came.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <ringprof/wire.h>

#include "support.h"

static char bin[600], tmpdir[256];
static pid_t engine;

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* `ringprof run` on @session with its snapshots in @dir, stderr in @err. */
static pid_t start_engine(const char *session, const char *dir, const char *err)
{
	engine = rp_test_engine_spawn(bin, session, dir, err, NULL, "--quiet", (char *)NULL);
	return engine;
}

/* Until the engine is up (its marker names it) or has exited: its status, or -1. */
static int wait_engine(const char *session, pid_t pid)
{
	int st = rp_test_engine_wait(session, pid, NULL);

	if (st != -1)
		engine = 0;
	return st;
}

static int stop_engine(pid_t pid)
{
	engine = 0;
	return rp_test_engine_stop(pid);
}

static char *slurp(const char *path)
{
	size_t len;

	return rp_test_slurp(path, &len);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* A pid that ran and is gone (reaped). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(kill(pid, 0), -1);
	return pid;
}

static void make_file(const char *path, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

/* A sticky directory anyone may write (/tmp's mode) holds the snapshots and the live
 * socket; without the sticky bit it is refused, with its mode in full. */
static void test_snapdir_sticky_dir_accepted(void **state)
{
	char dir[300], err[320], sock[400], session[48], *msg;
	pid_t pid;

	(void)state;
	snprintf(session, sizeof(session), "t_snapdir_sticky_%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/sticky", tmpdir);
	snprintf(err, sizeof(err), "%s/sticky.err", tmpdir);
	snprintf(sock, sizeof(sock), "%s/ringprof-%s.sock", dir, session);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 01777), 0);
	pid = start_engine(session, dir, err);
	if (wait_engine(session, pid) != -1) {
		msg = slurp(err);
		fail_msg("refused a sticky directory: %s", msg);
	}
	for (int i = 0; i < 500 && !exists(sock); i++)
		sleep_ms(10);
	assert_true(exists(sock));
	assert_int_equal(stop_engine(pid), 0);

	assert_int_equal(chmod(dir, 0777), 0); /* shared, not sticky */
	pid = start_engine(session, dir, err);
	assert_int_equal(wait_engine(session, pid), 1);
	msg = slurp(err);
	print_message("    %s", msg);
	if (strstr(msg, "(mode 0777)") == NULL)
		fail_msg("no full mode in: %s", msg);
	free(msg);
}

/* Temporary files of dead writers are removed at the engine's start, and only those:
 * not a live writer's, not another session's, not a name of another pattern, not a
 * symlink, not another user's file. */
static void test_snapdir_stale_temps_removed(void **state)
{
	char dir[300], err[320], session[48], snap[400], p[16][480], *msg;
	pid_t dead = dead_pid(), dead2 = dead_pid(), pid;
	int n = 0;

	(void)state;
	snprintf(session, sizeof(session), "t_snapdir_temps_%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/temps", tmpdir);
	snprintf(err, sizeof(err), "%s/temps.err", tmpdir);
	snprintf(snap, sizeof(snap), "%s/ringprof-%s.msgpack", dir, session);
	assert_int_equal(mkdir(dir, 0700), 0);
	/* removed: p[0], p[1] (1000 + 24 bytes) */
	snprintf(p[n++], sizeof(p[0]), "%s.tmp.%d", snap, (int)dead);
	make_file(p[0], 1000);
	snprintf(p[n++], sizeof(p[0]), "%s.tmp.%d.3.0123abcd", snap, (int)dead2);
	make_file(p[1], 24);
	/* kept */
	snprintf(p[n], sizeof(p[0]), "%s.tmp.%d.1.0123abcd", snap, (int)getpid());
	make_file(p[n++], 5);
	snprintf(p[n], sizeof(p[0]), "%s.tmp.%d.x", snap, (int)dead);
	make_file(p[n++], 5);
	snprintf(p[n], sizeof(p[0]), "%s.tmp.%d.1.0123abcd0", snap, (int)dead);
	make_file(p[n++], 5);
	snprintf(p[n], sizeof(p[0]), "%s/ringprof-%s_other.msgpack.tmp.%d", dir, session,
		 (int)dead);
	make_file(p[n++], 5);
	snprintf(p[n], sizeof(p[0]), "%s/target", dir);
	make_file(p[n++], 5);
	snprintf(p[n], sizeof(p[0]), "%s.tmp.%d.2.0123abcd", snap, (int)dead);
	assert_int_equal(symlink(p[n - 1], p[n]), 0);
	n++;
	snprintf(p[n], sizeof(p[0]), "%s.tmp.%d.4.0123abcd", snap, (int)dead);
	make_file(p[n], 5);
	if (chown(p[n], 65534, 65534) == 0) /* root: another user's file */
		n++;
	else
		unlink(p[n]);
	pid = start_engine(session, dir, err);
	assert_int_equal(wait_engine(session, pid), -1);
	assert_int_equal(stop_engine(pid), 0);
	for (int i = 0; i < n; i++)
		if (exists(p[i]) != (i >= 2))
			fail_msg("%s %s", p[i], exists(p[i]) ? "left" : "removed");
	msg = slurp(err);
	print_message("    %s", msg);
	if (strstr(msg, "removed 2 temporary snapshot files of dead writers (1024 bytes)") == NULL)
		fail_msg("no count in: %s", msg);
	free(msg);
}

/* The directory removed under a running engine: `ringprof snapshot` says the engine's
 * reason (the path and errno), at once, not "no snapshot within 5000 ms". */
static void test_snapdir_snapshot_failure_reported(void **state)
{
	char dir[300], err[320], session[48], *out = NULL, want[600];
	pid_t pid;
	int rc;

	(void)state;
	snprintf(session, sizeof(session), "t_snapdir_fail_%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/fail", tmpdir);
	snprintf(err, sizeof(err), "%s/fail.err", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	pid = start_engine(session, dir, err);
	assert_int_equal(wait_engine(session, pid), -1);
	rc = rp_test_sh(&out, NULL, "%s snapshot --timeout-ms 60000 --session %s 2>&1", bin, session);
	assert_int_equal(rc, 0); /* it works first */
	free(out);
	assert_int_equal(rp_test_sh(NULL, NULL, "rm -rf %s", dir), 0);
	rc = rp_test_sh(&out, NULL, "%s snapshot --session %s --timeout-ms 60000 2>&1", bin,
			session);
	print_message("    %s", out);
	assert_int_equal(rc, 1);
	snprintf(want, sizeof(want),
		 "could not write its snapshot: %s/ringprof-%s.msgpack: %s "
		 "(errno %d)",
		 dir, session, strerror(ENOENT), ENOENT);
	if (strstr(out, want) == NULL)
		fail_msg("no \"%s\" in: %s", want, out);
	/* told, not timed out: that message names no reason of the engine's own */
	assert_null(strstr(out, "wrote no snapshot"));
	free(out);
	stop_engine(pid); /* its final snapshot fails too */
}

static int setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR");

	(void)state;
	if (b == NULL) {
		fprintf(stderr, "RP_BIN_DIR is not set (run through ctest)\n");
		return -1;
	}
	snprintf(bin, sizeof(bin), "%s/ringprof", b);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rp_snapdir_XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	rp_test_engine_kill(engine);
	return rp_test_sh(NULL, NULL, "rm -rf %s", tmpdir) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapdir_sticky_dir_accepted),
		cmocka_unit_test(test_snapdir_stale_temps_removed),
		cmocka_unit_test(test_snapdir_snapshot_failure_reported),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
