/* SPDX-License-Identifier: MIT */
/*
 * Test helpers: cmocka includes in the order cmocka 1.1.5 needs, a consumer view of
 * this process's own segment, and a `ringprof run` child started, waited for and
 * stopped the one way every end-to-end test does it, with the program run under it
 * snapshotted and its own call counts read; small clocks and a seeded generator.
 */
#ifndef RP_TEST_SUPPORT_H
#define RP_TEST_SUPPORT_H

#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ringprof/ringprof.h>
#include <ringprof/wire.h>

#include "segment.h"

/*
 * Initialises the producer and attaches a consumer view to its segment at the
 * producer's own addresses, so that ThreadSanitizer, which tracks addresses, sees
 * both sides of every access (a second mapping would hide them from it).
 * Cross-process tests open segments by name instead.
 */
static inline struct rp_segment *rp_test_open_self(void)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s = NULL;
	struct rp_wire_header *h = NULL;

	if (rp_init() != 0 || (h = rp_segment_header()) == NULL)
		fail_msg("rp_init failed");
	if (rp_segment_attach(h, h->segment_size, &s, why) != 0)
		fail_msg("rp_segment_attach: %s", why);
	return s;
}

static inline struct rp_wire_ring *rp_test_ring(struct rp_segment *s, uint32_t i)
{
	return (struct rp_wire_ring *)((char *)s->base + s->v.ring_desc_offset) + i;
}

static inline struct rp_wire_header *rp_test_hdr(struct rp_segment *s)
{
	return s->base;
}

static inline int rp_test_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

/*
 * rp_test_sh() - run a shell command (printf-style @fmt); all its stdout, NUL-terminated,
 * in *@out (malloc'ed; NULL: discarded) and its length in *@len (may be NULL).
 * Return: its exit status, or -1 if it did not exit.
 */
static int rp_test_sh(char **out, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), unused));
static int rp_test_sh(char **out, size_t *len, const char *fmt, ...)
{
	char cmd[8192], *buf = NULL;
	size_t n = 0, cap = 0, got;
	va_list ap;
	FILE *p;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	do { /* all of it: a report of many names is megabytes */
		if (n + 65536 > cap) {
			cap = cap ? cap * 2 : 1 << 20;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		got = fread(buf + n, 1, cap - n - 1, p);
		n += got;
	} while (got > 0);
	buf[n] = '\0';
	st = pclose(p);
	if (len)
		*len = n;
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The whole file at @path, NUL-terminated (malloc'ed); *@len its length. */
static char *rp_test_slurp(const char *path, size_t *len) __attribute__((unused));
static char *rp_test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (f == NULL)
		fail_msg("%s: %s", path, strerror(errno));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The 1-based number of the first line of the file at @path that holds @needle (a
 * line's text includes its newline); 0 if none. */
static uint32_t rp_test_line_of(const char *path, const char *needle) __attribute__((unused));
static uint32_t rp_test_line_of(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	uint32_t n = 0, found = 0;
	char buf[512];

	if (f == NULL)
		fail_msg("%s: %s", path, strerror(errno));
	while (!found && fgets(buf, sizeof(buf), f)) {
		n++;
		if (strstr(buf, needle))
			found = n;
	}
	fclose(f);
	return found;
}

/*
 * rp_test_rnd() - the next number of the xorshift64 sequence kept in *@rng (seeded
 * non-zero), mod @m: the same run every time, for generators that a brute force checks.
 */
static inline uint64_t rp_test_rnd(uint64_t *rng, uint64_t m)
{
	*rng ^= *rng << 13;
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	return *rng % m;
}

/* CLOCK_MONOTONIC in milliseconds: for deadlines of polls, never for a bound asserted. */
static inline uint64_t rp_test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void rp_test_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* A fresh temporary file name "/tmp/rp_test_XXXXXX@suffix"; the caller unlinks it. */
static inline void rp_test_temp_path(char path[64], const char *suffix)
{
	int fd;

	snprintf(path, 64, "/tmp/rp_test_XXXXXX%s", suffix);
	fd = mkstemps(path, (int)strlen(suffix));
	assert_true(fd >= 0);
	close(fd);
}

/* @path made to hold the @n bytes at @data. */
static inline void rp_test_write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* A loopback TCP port free just now (for an engine's --prometheus), or -1. */
static inline int rp_test_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	p = ntohs(a.sin_port);
	close(fd);
	return p;
}

/* A program's own count of its calls, as it prints it: "fn NAME N", "edge A B N". */
struct rp_test_count {
	bool fn; /* else an edge A -> B */
	char a[32], b[32];
	uint64_t n;
};

/*
 * rp_test_parse_counts() - the "fn" and "edge" lines of a program's output @out (cut
 * up by strtok_r) into @w[0..@max), and into *@rss_kib (NULL: not wanted) the N of an
 * "rss_kib N" line; other lines are passed over.
 * Return: how many counts were kept (@max at most).
 */
static inline int rp_test_parse_counts(char *out, struct rp_test_count *w, int max,
				       uint64_t *rss_kib)
{
	int n = 0;

	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		struct rp_test_count x = { 0 };
		unsigned long long v;

		if (sscanf(l, "fn %31s %llu", x.a, &v) == 2) {
			x.fn = true;
		} else if (sscanf(l, "edge %31s %31s %llu", x.a, x.b, &v) == 3) {
			x.fn = false;
		} else {
			if (rss_kib != NULL && sscanf(l, "rss_kib %llu", &v) == 1)
				*rss_kib = v;
			continue;
		}
		x.n = v;
		if (n < max)
			w[n++] = x;
	}
	return n;
}

/* --- a `ringprof run` child --- */

/*
 * rp_test_engine_spawn() - fork `@bin run --session @session --snapshot-dir @dir`
 * followed by the extra arguments (NULL-terminated), its stderr into the file @err
 * (NULL: ours), with @env ("NAME=value", NULL: none) added to its environment.
 * Does not wait for it: rp_test_engine_wait().
 * Return: its pid.
 */
static pid_t rp_test_engine_spawn(const char *bin, const char *session, const char *dir,
				  const char *err, const char *env, ...)
	__attribute__((sentinel, unused));
static pid_t rp_test_engine_spawn(const char *bin, const char *session, const char *dir,
				  const char *err, const char *env, ...)
{
	const char *argv[32] = { "ringprof", "run", "--session", session, "--snapshot-dir", dir };
	unsigned n = 6;
	va_list ap;
	pid_t pid;

	va_start(ap, env);
	while (n < 31 && (argv[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (err != NULL && freopen(err, "w", stderr) == NULL)
			_exit(126);
		if (env != NULL)
			putenv((char *)env);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/*
 * rp_test_engine_wait() - until the engine @pid of @session runs, or has ended. It
 * runs once its marker names it (it then holds the marker's lock and has blocked
 * the signals `ringprof snapshot` and SIGTERM send) and @ready (a path it makes once
 * serving, e.g. its socket; NULL: none) exists. Waits up to 60 s: a sanitized engine
 * on a loaded 2-core machine starts slowly, and the wait only turns a hang into a
 * failure.
 * Return: -1 once it runs, else its exit status (128 + signal if killed), reaped.
 */
static int rp_test_engine_wait(const char *session, pid_t pid, const char *ready)
	__attribute__((unused));
static int rp_test_engine_wait(const char *session, pid_t pid, const char *ready)
{
	struct timespec ms = { 0, 10000000 };
	char name[128];
	int st;

	snprintf(name, sizeof(name), "/dev/shm" RP_WIRE_ENGINE_FMT, session);
	for (int i = 0; i < 6000; i++) {
		struct rp_wire_engine m = { 0 };
		FILE *f = fopen(name, "rb");
		bool up = f != NULL && fread(&m, sizeof(m), 1, f) == 1 && m.pid == pid;

		if (f != NULL)
			fclose(f);
		if (up && (ready == NULL || access(ready, F_OK) == 0))
			return -1;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		nanosleep(&ms, NULL);
	}
	fail_msg("engine %d of session %s neither up nor gone after 60 s", (int)pid, session);
	return -1;
}

/*
 * rp_test_engine_start() - the common case: `@bin run` for @session with its snapshots
 * in <@tmpdir>/snaps, its stderr in <@tmpdir>/<@session>.err, @env as for
 * rp_test_engine_spawn() and one more argument @arg (NULL: none), waited for until it
 * runs (the test fails if it ends instead).
 * Return: its pid.
 */
static pid_t rp_test_engine_start(const char *bin, const char *tmpdir, const char *session,
				  const char *env, const char *arg) __attribute__((unused));
static pid_t rp_test_engine_start(const char *bin, const char *tmpdir, const char *session,
				  const char *env, const char *arg)
{
	char dir[600], err[700];
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/snaps", tmpdir);
	snprintf(err, sizeof(err), "%s/%s.err", tmpdir, session);
	pid = rp_test_engine_spawn(bin, session, dir, err, env, arg, (char *)NULL);
	assert_int_equal(rp_test_engine_wait(session, pid, NULL), -1);
	return pid;
}

/* rp_test_engine_stop() - SIGTERM to @pid, then its exit status (128 + signal), reaped. */
static int rp_test_engine_stop(pid_t pid) __attribute__((unused));
static int rp_test_engine_stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * rp_test_prog_dirs() - where a test that runs programs under `ringprof run` finds
 * them: @bin the tool ($RP_BIN_DIR/ringprof, else ../tools/ringprof), @progdir the
 * programs ($@prog_env, else @prog_dflt) and @tmpdir made afresh from @tmpl
 * ("/tmp/...XXXXXX").
 * Return: 0, or -1 if @tmpdir could not be made.
 */
static inline int rp_test_prog_dirs(char bin[600], char progdir[512], char tmpdir[256],
				    const char *prog_env, const char *prog_dflt, const char *tmpl)
{
	const char *b = getenv("RP_BIN_DIR"), *p = getenv(prog_env);

	snprintf(bin, 600, "%s/ringprof", b ? b : "../tools");
	snprintf(progdir, 512, "%s", p ? p : prog_dflt);
	snprintf(tmpdir, 256, "%s", tmpl);
	return mkdtemp(tmpdir) ? 0 : -1;
}

/* rp_test_rm_tmp() - @tmpdir removed, unless $RP_KEEP_TMP (to look at it). Return: 0. */
static inline int rp_test_rm_tmp(const char *tmpdir)
{
	return getenv("RP_KEEP_TMP") ? 0 : rp_test_sh(NULL, NULL, "rm -rf %s", tmpdir);
}

/*
 * rp_test_session() - @session set to <$RINGPROF_SESSION>_@suffix (@dflt for an unset
 * $RINGPROF_SESSION): a name of its own per run of a program, checked valid.
 */
static inline void rp_test_session(char session[RP_WIRE_SESSION_MAX], const char *dflt,
				   const char *suffix)
{
	const char *base = getenv("RINGPROF_SESSION");

	snprintf(session, RP_WIRE_SESSION_MAX, "%s_%s", base ? base : dflt, suffix);
	assert_true(rp_wire_session_valid(session));
}

/*
 * rp_test_snapshot() - a snapshot of @session's engine taken now by `@bin snapshot`
 * (waiting up to 60 s: a sanitized engine on a loaded machine is slow to answer).
 * Return: its path (malloc'ed).
 */
static inline char *rp_test_snapshot(const char *bin, const char *session)
{
	char *path = NULL;

	assert_int_equal(rp_test_sh(&path, NULL, "%s snapshot --timeout-ms 60000 --session %s",
				    bin, session), 0);
	path[strcspn(path, "\n")] = '\0';
	return path;
}

/* rp_test_engine_kill() - SIGKILL to @pid (> 0) and reaped: a test that failed half-way. */
static inline void rp_test_engine_kill(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

#endif
