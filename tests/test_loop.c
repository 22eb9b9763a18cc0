// SPDX-License-Identifier: MIT
/*
 * test_loop: the event loop's contract, run once per backend (two cmocka groups, the
 * same tests: io_uring, then poll(2) forced). Where the kernel refuses io_uring, the
 * io_uring group skips each test with the reason rp_loop_open gave.
 *
 * Nothing here asserts an upper bound on time (the machines are noisy): timers are
 * checked by counting (never more expirations than deadlines passed, never fewer than
 * had passed before the previous callback returned: no drift) and by lower bounds.
 * Upper bounds appear only as timeouts that turn a hang into a failure.
 */
#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <time.h>

#include "loop.h"
#include "probe.h"

#define MS	1000000ull
#define LONG_NS (60000ull * MS) /* "never" for a test: turns a hang into a failure */

struct backend {
	bool force_poll;
	const char *name;
};

static struct backend be_uring = { false, "io_uring" };
static struct backend be_poll = { true, "poll" };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
}

/* A loop on the group's backend, or skip() when io_uring is refused here. */
static struct rp_loop *loop_open_n(void **state, unsigned entries)
{
	const struct backend *b = *state;
	struct rp_loop_opts o = { .force_poll = b->force_poll, .entries = entries };
	struct rp_loop *l = NULL;
	char why[RP_WHY_MAX];

	assert_int_equal(rp_loop_open(&o, &l, why), 0);
	assert_non_null(l);
	if (strcmp(rp_loop_backend(l), b->name) != 0) {
		print_message("skipping the %s variant: %s\n", b->name, why);
		rp_loop_close(l);
		skip();
	}
	return l;
}

static struct rp_loop *loop_open(void **state)
{
	return loop_open_n(state, 0);
}

/* --- run_for: run the loop until a one-shot alarm after @ns --- */

struct alarm {
	struct rp_loop *l;
	int id;
	int fired;
};

static void on_alarm(void *ctx, int res)
{
	struct alarm *a = ctx;

	(void)res;
	a->fired++;
	rp_loop_cancel_timer(a->l, a->id);
	rp_loop_stop(a->l);
}

static void run_for(struct rp_loop *l, uint64_t ns)
{
	struct alarm a = { .l = l };

	a.id = rp_loop_timer(l, ns, on_alarm, &a);
	assert_true(a.id >= 0);
	while (a.fired == 0)
		assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(a.fired, 1);
}

/* --- timers --- */

struct ticker {
	struct rp_loop *l;
	uint64_t interval;
	uint64_t t0;	 /* before rp_loop_timer */
	uint64_t t_reg;	 /* after rp_loop_timer returned */
	uint64_t t_prev; /* end of the previous callback */
	int id;
	int calls;
	int stop_after;
	int cancel_after;
	int64_t expirations;
	int bad_res, overcount, drift;
};

static void on_tick(void *ctx, int res)
{
	struct ticker *t = ctx;
	uint64_t now = now_ns();

	t->calls++;
	t->bad_res += res < 1;
	t->expirations += res;
	/* Never more expirations than deadlines passed since the timer was set... */
	t->overcount += (uint64_t)t->expirations * t->interval > now - t->t0;
	/* ...nor fewer than had passed before the previous callback returned. */
	if (t->t_prev > t->t_reg)
		t->drift += (t->t_prev - t->t_reg) / t->interval > (uint64_t)t->expirations;
	t->t_prev = now_ns();
	if (t->calls == t->cancel_after)
		assert_int_equal(rp_loop_cancel_timer(t->l, t->id), 0);
	if (t->calls == t->stop_after)
		rp_loop_stop(t->l);
}

static void ticker_start(struct ticker *t, struct rp_loop *l, uint64_t interval)
{
	t->l = l;
	t->interval = interval;
	t->t0 = now_ns();
	t->id = rp_loop_timer(l, interval, on_tick, t);
	t->t_reg = now_ns();
	assert_true(t->id >= 0);
}

static void test_loop_timer_periodic_count(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct ticker t = { .stop_after = 25 };
	uint64_t elapsed;

	ticker_start(&t, l, 2 * MS);
	assert_int_equal(rp_loop_run(l), 0);
	elapsed = now_ns() - t.t0;
	assert_int_equal(t.calls, 25); /* stopped right after the 25th callback */
	assert_int_equal(t.bad_res, 0);
	assert_int_equal(t.overcount, 0);
	assert_int_equal(t.drift, 0);
	assert_true(t.expirations >= 25);
	assert_true(elapsed >= 24 * 2 * MS);
	assert_true(elapsed >= (uint64_t)t.expirations * 2 * MS);
	assert_int_equal(rp_loop_cancel_timer(l, t.id), 0);
	assert_int_equal(rp_loop_cancel_timer(l, t.id), -ENOENT);
	rp_loop_close(l);
}

/*
 * A timer re-armed from its wake-up instead of its schedule loses the wake-up latency
 * at every tick; over 300 ticks of 1 ms that adds up past a whole period, which the
 * drift count in on_tick catches. A correct timer can never trip it, however late.
 */
static void test_loop_timer_no_drift(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct ticker t = { .stop_after = 300 };

	ticker_start(&t, l, 1 * MS);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(t.calls, 300);
	assert_int_equal(t.bad_res, 0);
	assert_int_equal(t.overcount, 0);
	assert_int_equal(t.drift, 0);
	print_message("%lld expirations in %d callbacks\n", (long long)t.expirations, t.calls);
	rp_loop_close(l);
}

static void test_loop_timer_cancel_in_callback(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct ticker a = { .cancel_after = 3 }, b = { 0 };

	ticker_start(&a, l, 1 * MS);
	ticker_start(&b, l, 3 * MS);
	run_for(l, 40 * MS);
	assert_int_equal(a.calls, 3);
	assert_true(b.calls >= 1);
	assert_int_equal(a.bad_res + b.bad_res, 0);
	assert_int_equal(a.overcount + b.overcount + a.drift + b.drift, 0);
	assert_int_equal(rp_loop_cancel_timer(l, a.id), -ENOENT);
	assert_int_equal(rp_loop_cancel_timer(l, b.id), 0);
	run_for(l, 5 * MS);
	assert_int_equal(a.calls, 3);
	rp_loop_close(l);
}

/* --- fd watches --- */

struct reader {
	struct rp_loop *l;
	int fd;
	int id;
	int calls;
	int not_pollin;
	int unwatch_res;
	bool unwatch_self;
	size_t bytes;
	size_t stop_at;
};

static void on_readable(void *ctx, int res)
{
	struct reader *r = ctx;
	char buf[256];
	ssize_t n;

	r->calls++;
	r->not_pollin += !(res & POLLIN);
	while ((n = read(r->fd, buf, sizeof(buf))) > 0)
		r->bytes += (size_t)n;
	if (r->unwatch_self)
		r->unwatch_res = rp_loop_unwatch(r->l, r->id);
	if (r->bytes >= r->stop_at)
		rp_loop_stop(r->l);
}

static void pipe_put(int fd, size_t k)
{
	char buf[512];

	assert_true(k <= sizeof(buf));
	memset(buf, 'x', k);
	assert_int_equal(write(fd, buf, k), (ssize_t)k);
}

static void test_loop_watch_pipe(void **state)
{
	static const size_t sizes[] = { 1, 100, 3, 511 };
	struct rp_loop *l = loop_open(state);
	struct reader r = { .l = l };
	int p[2], calls;
	char buf[8];
	size_t i;

	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	r.fd = p[0];
	r.id = rp_loop_watch(l, p[0], on_readable, &r);
	assert_true(r.id >= 0);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		pipe_put(p[1], sizes[i]);
		r.stop_at += sizes[i];
		while (r.bytes < r.stop_at)
			assert_int_equal(rp_loop_run(l), 0);
		assert_int_equal(r.bytes, r.stop_at);
	}
	assert_int_equal(r.not_pollin, 0);
	assert_int_equal(rp_loop_unwatch(l, r.id), 0);
	assert_int_equal(rp_loop_unwatch(l, r.id), -ENOENT);
	calls = r.calls;
	pipe_put(p[1], 3);
	run_for(l, 20 * MS);
	assert_int_equal(r.calls, calls);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 3); /* still there: nobody read it */
	rp_loop_close(l);
	close(p[0]);
	close(p[1]);
}

static void test_loop_watch_unwatch_in_callback(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct reader r = { .l = l, .unwatch_self = true, .stop_at = 1, .unwatch_res = 1 };
	int p[2];

	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	r.fd = p[0];
	r.id = rp_loop_watch(l, p[0], on_readable, &r);
	assert_true(r.id >= 0);
	pipe_put(p[1], 1);
	/* The watch was the only operation: once it is gone, run returns by itself. */
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.unwatch_res, 0);
	pipe_put(p[1], 5);
	run_for(l, 20 * MS);
	assert_int_equal(r.calls, 1);
	rp_loop_close(l);
	close(p[0]);
	close(p[1]);
}

struct sig {
	struct rp_loop *l;
	int fd;
	int id;
	int calls;
	uint32_t signo;
	uint32_t pid;
};

static void on_signal(void *ctx, int res)
{
	struct sig *s = ctx;
	struct signalfd_siginfo si;

	(void)res;
	s->calls++;
	if (read(s->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		s->signo = si.ssi_signo;
		s->pid = si.ssi_pid;
	}
	rp_loop_unwatch(s->l, s->id);
	rp_loop_stop(s->l);
}

static void test_loop_watch_signalfd(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct sig s = { .l = l };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1); /* blocked for every thread in main() */
	s.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	assert_true(s.fd >= 0);
	s.id = rp_loop_watch(l, s.fd, on_signal, &s);
	assert_true(s.id >= 0);
	assert_int_equal(kill(getpid(), SIGUSR1), 0);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.signo, SIGUSR1);
	assert_int_equal(s.pid, (uint32_t)getpid());
	rp_loop_close(l);
	close(s.fd);
}

/* A timer callback that cancels itself, watches a pipe and adds timers. */
struct juggler {
	struct rp_loop *l;
	struct reader r;
	int pipe_w;
	int a, b, c;
	int a_calls, b_calls;
	int errors;
};

static void on_c(void *ctx, int res)
{
	struct juggler *j = ctx;

	(void)res;
	j->errors += rp_loop_cancel_timer(j->l, j->c) != 0;
	rp_loop_stop(j->l);
}

static void on_b(void *ctx, int res)
{
	struct juggler *j = ctx;

	(void)res;
	j->b_calls++;
	if (j->r.calls == 0)
		return;		/* the watch has not fired yet */
	pipe_put(j->pipe_w, 1); /* unwatched by now: must not call back */
	j->errors += rp_loop_cancel_timer(j->l, j->b) != 0;
	j->c = rp_loop_timer(j->l, 10 * MS, on_c, j);
	j->errors += j->c < 0;
}

static void on_a(void *ctx, int res)
{
	struct juggler *j = ctx;

	(void)res;
	j->a_calls++;
	j->errors += rp_loop_cancel_timer(j->l, j->a) != 0;
	j->r.id = rp_loop_watch(j->l, j->r.fd, on_readable, &j->r);
	j->errors += j->r.id < 0;
	pipe_put(j->pipe_w, 1);
	j->b = rp_loop_timer(j->l, 1 * MS, on_b, j);
	j->errors += j->b < 0;
}

static void test_loop_reentrant_callbacks(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct juggler j = { .l = l };
	int p[2];

	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	j.r = (struct reader){ .l = l, .fd = p[0], .unwatch_self = true, .stop_at = SIZE_MAX };
	j.pipe_w = p[1];
	j.a = rp_loop_timer(l, 1 * MS, on_a, &j);
	assert_true(j.a >= 0);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(j.errors, 0);
	assert_int_equal(j.a_calls, 1);
	assert_int_equal(j.r.calls, 1);
	assert_int_equal(j.r.unwatch_res, 0);
	assert_true(j.b_calls >= 1);
	rp_loop_close(l);
	close(p[0]);
	close(p[1]);
}

/* --- futex waits --- */

struct fres {
	int calls;
	int res;
};

static void on_futex(void *ctx, int res)
{
	struct fres *f = ctx;

	f->calls++;
	f->res = res;
}

static long futex_wake(uint32_t *word)
{
	/* Not FUTEX_PRIVATE: the word is shared memory, as a producer's doorbell is. */
	return syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

struct waker {
	uint32_t *word;
	bool change; /* store 1 then wake; else wake until a waiter is woken */
	int done;    /* atomic: the loop's callback ran */
	int woke;
};

static void *waker_main(void *arg)
{
	struct waker *w = arg;

	if (w->change) {
		sleep_ns(2 * MS);
		/* Release: pairs with the loop's acquire load of the word. */
		__atomic_store_n(w->word, 1, __ATOMIC_RELEASE);
		futex_wake(w->word);
		return NULL;
	}
	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
		if (futex_wake(w->word) >= 1) {
			w->woke = 1;
			break;
		}
		sleep_ns(1 * MS);
	}
	return NULL;
}

static uint32_t *shared_word(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

/* Wait on @word == 0 while a thread does what @change says. @return the result. */
static int futex_with_waker(struct rp_loop *l, uint32_t *word, bool change, int *woke)
{
	struct waker w = { .word = word, .change = change };
	struct fres f = { 0 };
	pthread_t t;

	*word = 0;
	assert_int_equal(rp_loop_futex_wait(l, word, 0, LONG_NS, on_futex, &f), 0);
	assert_int_equal(pthread_create(&t, NULL, waker_main, &w), 0);
	while (f.calls == 0)
		assert_int_equal(rp_loop_run(l), 0);
	__atomic_store_n(&w.done, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(f.calls, 1);
	*woke = w.woke;
	return f.res;
}

/* Does this loop wait with IORING_OP_FUTEX_WAIT (and so see a wake alone)? */
static bool loop_has_futex_op(struct rp_loop *l)
{
	struct rp_probe p;
	const char *env = getenv("RINGPROF_LOOP_NO_FUTEX_OP");

	rp_probe_run(&p);
	return strcmp(rp_loop_backend(l), "io_uring") == 0 && p.uring_futex_wait &&
	       !(env != NULL && strcmp(env, "1") == 0);
}

static void futex_cases(struct rp_loop *l)
{
	uint32_t *word = shared_word();
	struct fres f = { 0 };
	uint64_t t0;
	int woke = 0;

	/* Another thread changes the word and wakes it. */
	assert_int_equal(futex_with_waker(l, word, true, &woke), 0);

	/* Nobody wakes: -ETIME, and not before the timeout. */
	*word = 0;
	t0 = now_ns();
	assert_int_equal(rp_loop_futex_wait(l, word, 0, 20 * MS, on_futex, &f), 0);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(f.calls, 1);
	assert_int_equal(f.res, -ETIME);
	assert_true(now_ns() - t0 >= 20 * MS);

	/* The word already differs: at once, even with a "never" timeout. */
	f = (struct fres){ 0 };
	*word = 7;
	assert_int_equal(rp_loop_futex_wait(l, word, 0, LONG_NS, on_futex, &f), 0);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(f.calls, 1);
	assert_int_equal(f.res, 0);

	/* A zero timeout on an unchanged word. */
	f = (struct fres){ 0 };
	*word = 0;
	assert_int_equal(rp_loop_futex_wait(l, word, 0, 0, on_futex, &f), 0);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(f.calls, 1);
	assert_int_equal(f.res, -ETIME);

	/* A FUTEX_WAKE alone (the word unchanged) ends only a real futex wait. */
	if (loop_has_futex_op(l)) {
		assert_int_equal(futex_with_waker(l, word, false, &woke), 0);
		assert_int_equal(woke, 1);
	} else {
		print_message(
			"%s loop re-checks the word: a wake alone is not seen (as designed)\n",
			rp_loop_backend(l));
	}
	munmap(word, 4096);
}

static void test_loop_futex_wait(void **state)
{
	struct rp_loop *l = loop_open(state);

	futex_cases(l);
	rp_loop_close(l);
}

static void test_loop_futex_wait_fallback(void **state)
{
	struct rp_loop *l;

	setenv("RINGPROF_LOOP_NO_FUTEX_OP", "1", 1);
	l = loop_open(state);
	futex_cases(l);
	rp_loop_close(l);
	unsetenv("RINGPROF_LOOP_NO_FUTEX_OP");
}

/* --- file writes --- */

static void tmpdir_make(char dir[PATH_MAX])
{
	const char *base = getenv("TMPDIR");

	snprintf(dir, PATH_MAX, "%s/rp_loop.XXXXXX", base != NULL ? base : "/tmp");
	assert_non_null(mkdtemp(dir));
}

static void path_in(char out[PATH_MAX], const char *dir, const char *name)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);

	assert_true(n > 0 && n < PATH_MAX);
}

/* Entries of @dir, "." and ".." aside; removes them (and @dir) if @remove. */
static int dir_entries(const char *dir, bool remove)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(dir);
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n++;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (remove && unlink(path) < 0)
			rmdir(path);
	}
	closedir(d);
	if (remove)
		rmdir(dir);
	return n;
}

struct wres {
	int calls;
	int res;
};

static void on_written(void *ctx, int res)
{
	struct wres *w = ctx;

	w->calls++;
	w->res = res;
}

/* Write through the loop and wait for the callback. @return its result. */
static int write_wait(struct rp_loop *l, const char *path, const void *buf, size_t len)
{
	struct wres w = { 0 };
	int err = rp_loop_write_file(l, path, buf, len, on_written, &w);

	if (err < 0)
		return err;
	while (w.calls == 0)
		assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(w.calls, 1);
	return w.res;
}

static size_t read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return SIZE_MAX;
	while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
		got += (size_t)n;
	close(fd);
	return got;
}

static void test_loop_write_file_whole(void **state)
{
	struct rp_loop *l = loop_open(state);
	size_t len = (1u << 20) + 13, i;
	char *buf = malloc(len), *back = malloc(len + 1);
	char dir[PATH_MAX], path[PATH_MAX];
	struct stat st;

	assert_non_null(buf);
	assert_non_null(back);
	for (i = 0; i < len; i++)
		buf[i] = (char)(i * 131 + (i >> 9));
	tmpdir_make(dir);
	path_in(path, dir, "snap");
	assert_int_equal(write_wait(l, path, buf, len), 0);
	assert_int_equal(read_file(path, back, len + 1), len);
	assert_memory_equal(buf, back, len);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(dir_entries(dir, false), 1); /* no temporary file left */

	/* Smaller, then empty: each replaces the whole file. */
	assert_int_equal(write_wait(l, path, "abc", 3), 0);
	assert_int_equal(read_file(path, back, len), 3);
	assert_memory_equal(back, "abc", 3);
	assert_int_equal(write_wait(l, path, NULL, 0), 0);
	assert_int_equal(read_file(path, back, len), 0);
	assert_int_equal(dir_entries(dir, true), 1);
	rp_loop_close(l);
	free(buf);
	free(back);
}

static void test_loop_write_file_errors(void **state)
{
	struct rp_loop *l = loop_open(state);
	char dir[PATH_MAX], path[PATH_MAX + 64];
	struct wres w = { 0 };
	char *longp;
	int i;

	tmpdir_make(dir);
	snprintf(path, sizeof(path), "%s/missing/snap", dir);
	assert_int_equal(write_wait(l, path, "x", 1), -ENOENT);
	assert_int_equal(dir_entries(dir, false), 0);

	/* Fails at the rename: the temporary file must be gone afterwards. */
	snprintf(path, sizeof(path), "%s/adir", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(write_wait(l, path, "x", 1), -EISDIR);
	assert_int_equal(dir_entries(dir, false), 1);

	/* The same path twice at once would share the temporary file. */
	snprintf(path, sizeof(path), "%s/twice", dir);
	assert_int_equal(rp_loop_write_file(l, path, "1", 1, on_written, &w), 0);
	assert_int_equal(rp_loop_write_file(l, path, "2", 1, on_written, &w), -EBUSY);
	while (w.calls == 0)
		assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(w.res, 0);

	/* A bounded number of writes in flight. */
	w = (struct wres){ 0 };
	for (i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/many%d", dir, i);
		assert_int_equal(rp_loop_write_file(l, path, "m", 1, on_written, &w),
				 i < 4 ? 0 : -EBUSY);
	}
	while (w.calls < 4)
		assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(w.res, 0);

	longp = malloc(PATH_MAX);
	assert_non_null(longp);
	memset(longp, 'a', PATH_MAX - 4);
	longp[PATH_MAX - 4] = '\0';
	assert_int_equal(rp_loop_write_file(l, longp, "x", 1, on_written, &w), -ENAMETOOLONG);
	free(longp);
	assert_int_equal(dir_entries(dir, true), 6); /* adir, twice, many0..3 */
	rp_loop_close(l);
}

/* Content that proves itself whole: magic, length, version, checksum of the rest. */
#define BLOB_MAGIC 0x52504c57u
#define BLOB_MAX   (1000u + 100u * 1237u + 16u)

static uint32_t fnv1a(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n-- > 0)
		h = (h ^ *p++) * 16777619u;
	return h;
}

static size_t blob_make(unsigned char *buf, uint32_t version)
{
	uint32_t len = 1000u + version * 1237u, x = version * 2654435761u + 1u, i;
	uint32_t head[4];

	for (i = 16; i < len; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
	head[0] = BLOB_MAGIC;
	head[1] = len;
	head[2] = version;
	head[3] = fnv1a(buf + 16, len - 16);
	memcpy(buf, head, sizeof(head));
	return len;
}

static bool blob_ok(const unsigned char *buf, size_t n)
{
	uint32_t head[4];

	if (n < 16)
		return false;
	memcpy(head, buf, sizeof(head));
	return head[0] == BLOB_MAGIC && head[1] == n && fnv1a(buf + 16, n - 16) == head[3];
}

struct watcher {
	const char *path;
	int stop;   /* atomic */
	long reads; /* atomic */
	long bad, missing;
};

static void *watcher_main(void *arg)
{
	struct watcher *w = arg;
	unsigned char *buf = malloc(BLOB_MAX + 1);
	size_t n;

	if (buf == NULL)
		return NULL;
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		n = read_file(w->path, (char *)buf, BLOB_MAX + 1);
		if (n == SIZE_MAX)
			w->missing++;
		else if (!blob_ok(buf, n))
			w->bad++;
		__atomic_fetch_add(&w->reads, 1, __ATOMIC_RELEASE);
	}
	free(buf);
	return NULL;
}

/* issue 10, repro 6: a link planted at the temporary name the engine used to pick
 * (<path>.tmp.<pid>) must not redirect the write into the link's target. */
static void test_loop_write_file_ignores_planted_link(void **state)
{
	struct rp_loop *l = loop_open(state);
	char dir[PATH_MAX], path[PATH_MAX], victim[PATH_MAX], link[PATH_MAX + 32], back[16];
	int fd;

	tmpdir_make(dir);
	path_in(path, dir, "snap");
	path_in(victim, dir, "victim");
	fd = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "precious", 8), 8);
	close(fd);
	snprintf(link, sizeof(link), "%s.tmp.%ld", path, (long)getpid());
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(write_wait(l, path, "snapshot", 8), 0);
	assert_int_equal(read_file(victim, back, sizeof(back)), 8);
	assert_memory_equal(back, "precious", 8);
	assert_int_equal(read_file(path, back, sizeof(back)), 8);
	assert_memory_equal(back, "snapshot", 8);
	assert_int_equal(dir_entries(dir, true), 3); /* snap, victim, the link */
	rp_loop_close(l);
}

static void test_loop_write_file_atomic_replace(void **state)
{
	struct rp_loop *l = loop_open(state);
	unsigned char *buf = malloc(BLOB_MAX);
	char dir[PATH_MAX], path[PATH_MAX];
	struct watcher w = { .path = path };
	pthread_t t;
	uint32_t v;

	assert_non_null(buf);
	tmpdir_make(dir);
	path_in(path, dir, "snap");
	assert_int_equal(write_wait(l, path, buf, blob_make(buf, 0)), 0);
	assert_int_equal(pthread_create(&t, NULL, watcher_main, &w), 0);
	while (__atomic_load_n(&w.reads, __ATOMIC_ACQUIRE) == 0)
		sleep_ns(MS / 10);
	for (v = 1; v <= 100; v++)
		assert_int_equal(write_wait(l, path, buf, blob_make(buf, v)), 0);
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(t, NULL), 0);
	print_message("%ld reads during 100 rewrites\n", w.reads);
	assert_int_equal(w.missing, 0);
	assert_int_equal(w.bad, 0);
	assert_int_equal(dir_entries(dir, true), 1);
	rp_loop_close(l);
	free(buf);
}

/* RP_LOOP_WRITE_NOW: the file is whole at its name when the call returns (the buffer
 * may change right after), on a disk and on tmpfs (no fsync there), then the callback
 * once the tail (fsync, close) is done. */
static void write_now_in(struct rp_loop *l, const char *base)
{
	size_t len = (1u << 20) + 29, i;
	char *buf = malloc(len), *want = malloc(len), *back = malloc(len + 1);
	char dir[PATH_MAX], path[PATH_MAX];
	struct wres w = { 0 };
	struct stat st;

	assert_non_null(buf);
	assert_non_null(want);
	assert_non_null(back);
	snprintf(dir, PATH_MAX, "%s/rp_loop_now.XXXXXX", base);
	assert_non_null(mkdtemp(dir));
	path_in(path, dir, "snap");
	for (i = 0; i < len; i++)
		want[i] = buf[i] = (char)(i * 151 + (i >> 7));
	assert_int_equal(rp_loop_write_file_flags(l, path, buf, len, RP_LOOP_WRITE_NOW,
						  on_written, &w),
			 0);
	memset(buf, 'x', len); /* not used after the call */
	assert_int_equal(w.calls, 0);
	assert_int_equal(read_file(path, back, len + 1), len);
	assert_memory_equal(back, want, len);
	assert_int_equal(dir_entries(dir, false), 1); /* renamed: no temporary file */
	/* Another write of the same path may start while the first one's tail runs. */
	assert_int_equal(rp_loop_write_file_flags(l, path, "abc", 3, RP_LOOP_WRITE_NOW,
						  on_written, &w),
			 0);
	assert_int_equal(read_file(path, back, len), 3);
	assert_memory_equal(back, "abc", 3);
	while (w.calls < 2)
		assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(w.calls, 2);
	assert_int_equal(w.res, 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(dir_entries(dir, true), 1);
	free(buf);
	free(want);
	free(back);
}

static void test_loop_write_file_now_whole(void **state)
{
	struct rp_loop *l = loop_open(state);
	const char *base = getenv("TMPDIR");

	write_now_in(l, base != NULL ? base : "/tmp");
	write_now_in(l, "/dev/shm");
	rp_loop_close(l);
}

/* Errors before the rename come back from the call, the callback never runs, the
 * target is untouched and no temporary file stays. */
static void test_loop_write_file_now_errors(void **state)
{
	struct rp_loop *l = loop_open(state);
	char dir[PATH_MAX], path[PATH_MAX + 64], back[16];
	struct rlimit old, small;
	struct wres w = { 0 };
	char big[8192];

	tmpdir_make(dir);
	snprintf(path, sizeof(path), "%s/missing/snap", dir);
	assert_int_equal(rp_loop_write_file_flags(l, path, "x", 1, RP_LOOP_WRITE_NOW,
						  on_written, &w),
			 -ENOENT);
	/* Fails at the rename. */
	snprintf(path, sizeof(path), "%s/adir", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(rp_loop_write_file_flags(l, path, "x", 1, RP_LOOP_WRITE_NOW,
						  on_written, &w),
			 -EISDIR);
	assert_int_equal(dir_entries(dir, false), 1);
	/* Fails at the write (a full disk would say ENOSPC the same way): the old
	 * file stays whole. */
	snprintf(path, sizeof(path), "%s/snap", dir);
	assert_int_equal(write_wait(l, path, "old", 3), 0);
	memset(big, 'b', sizeof(big));
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = old;
	small.rlim_cur = 4096;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	assert_int_equal(rp_loop_write_file_flags(l, path, big, sizeof(big), RP_LOOP_WRITE_NOW,
						  on_written, &w),
			 -EFBIG);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(read_file(path, back, sizeof(back)), 3);
	assert_memory_equal(back, "old", 3);
	assert_int_equal(dir_entries(dir, false), 2); /* adir, snap */
	/* A write of the same path not renamed yet: which would win is unclear. */
	assert_int_equal(rp_loop_write_file(l, path, "1", 1, on_written, &w), 0);
	assert_int_equal(rp_loop_write_file_flags(l, path, "2", 1, RP_LOOP_WRITE_NOW,
						  on_written, &w),
			 -EBUSY);
	assert_int_equal(rp_loop_write_file_flags(l, path, "2", 1, 2u, on_written, &w), -EINVAL);
	while (w.calls == 0)
		assert_int_equal(rp_loop_run(l), 0);
	run_for(l, 5 * MS); /* no callback of the failed ones comes late */
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.res, 0);
	assert_int_equal(read_file(path, back, sizeof(back)), 1);
	assert_memory_equal(back, "1", 1);
	assert_int_equal(dir_entries(dir, true), 2);
	rp_loop_close(l);
}

/* Closed with a renamed write's tail pending: no callback, the file stays whole. */
static void test_loop_write_file_now_close_pending(void **state)
{
	struct rp_loop *l = loop_open(state);
	char dir[PATH_MAX], path[PATH_MAX], back[16];
	struct wres w = { 0 };

	tmpdir_make(dir);
	path_in(path, dir, "snap");
	assert_int_equal(rp_loop_write_file_flags(l, path, "renamed", 7, RP_LOOP_WRITE_NOW,
						  on_written, &w),
			 0);
	rp_loop_close(l);
	assert_int_equal(w.calls, 0);
	assert_int_equal(read_file(path, back, sizeof(back)), 7);
	assert_memory_equal(back, "renamed", 7);
	assert_int_equal(dir_entries(dir, true), 1);
}

/* --- stop, close, open --- */

struct stopper {
	struct rp_loop *l;
	int calls;
	int nested;
};

static void on_stop_tick(void *ctx, int res)
{
	struct stopper *s = ctx;

	(void)res;
	s->calls++;
	s->nested = rp_loop_run(s->l);
	rp_loop_stop(s->l);
}

static void test_loop_stop_from_callback(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct stopper s = { .l = l };
	int id = rp_loop_timer(l, 1 * MS, on_stop_tick, &s);

	assert_true(id >= 0);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.nested, -EBUSY);
	assert_int_equal(rp_loop_run(l), 0); /* runs again after a stop */
	assert_int_equal(s.calls, 2);
	assert_int_equal(rp_loop_cancel_timer(l, id), 0);
	assert_int_equal(rp_loop_run(l), 0); /* nothing left: returns at once */
	assert_int_equal(s.calls, 2);
	rp_loop_close(l);
}

/* Callbacks that must never run, or not after a close. */
struct late {
	struct rp_loop *l;
	bool closed;
	int calls;
	int after_close;
};

static void on_late(void *ctx, int res)
{
	struct late *c = ctx;

	(void)res;
	c->calls++;
	c->after_close += c->closed;
}

static void on_closer(void *ctx, int res)
{
	struct late *c = ctx;

	on_late(ctx, res);
	if (!c->closed) {
		c->closed = true;
		rp_loop_close(c->l);
	}
}

/* Queue one of each operation, all on @c; @return the pipe. */
static void queue_pending(struct rp_loop *l, struct late *c, int p[2], uint32_t *word,
			  const char *path)
{
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	pipe_put(p[1], 4); /* readable, never read */
	assert_true(rp_loop_watch(l, p[0], on_late, c) >= 0);
	assert_true(rp_loop_timer(l, 1 * MS, on_late, c) >= 0);
	assert_true(rp_loop_timer(l, LONG_NS, on_late, c) >= 0);
	*word = 0;
	assert_int_equal(rp_loop_futex_wait(l, word, 0, LONG_NS, on_late, c), 0);
	assert_int_equal(rp_loop_write_file(l, path, "pending", 7, on_late, c), 0);
}

static void test_loop_close_pending(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct late c = { .l = l };
	char dir[PATH_MAX], path[PATH_MAX];
	uint32_t *word = shared_word();
	int p[2];

	tmpdir_make(dir);
	path_in(path, dir, "snap");
	queue_pending(l, &c, p, word, path);
	rp_loop_close(l); /* never ran: nothing may call back, nothing may leak */
	assert_int_equal(c.calls, 0);
	assert_int_equal(dir_entries(dir, true), 0); /* no target, no temporary file */
	close(p[0]);
	close(p[1]);
	munmap(word, 4096);
}

static void test_loop_close_in_callback(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct late c = { .l = l };
	char dir[PATH_MAX], path[PATH_MAX];
	uint32_t *word = shared_word();
	int p[2];

	tmpdir_make(dir);
	path_in(path, dir, "snap");
	queue_pending(l, &c, p, word, path);
	assert_true(rp_loop_timer(l, 1 * MS, on_closer, &c) >= 0);
	assert_int_equal(rp_loop_run(l), 0); /* returns once the callback closed it */
	assert_true(c.closed);
	assert_int_equal(c.after_close, 0);
	dir_entries(dir, true); /* the write may or may not have finished: both are fine */
	close(p[0]);
	close(p[1]);
	munmap(word, 4096);
}

static void test_loop_open_why(void **state)
{
	const struct backend *b = *state;
	struct rp_loop_opts o = { .force_poll = b->force_poll };
	struct rp_loop *l = NULL;
	char why[RP_WHY_MAX];

	assert_int_equal(rp_loop_open(&o, &l, why), 0);
	if (b->force_poll) {
		assert_string_equal(rp_loop_backend(l), "poll");
		assert_string_equal(why, "poll(2) backend forced");
	} else if (strcmp(rp_loop_backend(l), "io_uring") == 0) {
		assert_string_equal(why, "");
	} else {
		print_message("io_uring refused here: %s\n", why);
		assert_non_null(strstr(why, "using poll(2)"));
	}
	rp_loop_close(l);
	rp_loop_close(NULL);
}

static void test_loop_open_refused(void **state)
{
	const struct backend *b = *state;
	struct rp_loop_opts o = { .force_poll = b->force_poll };
	struct rp_loop *l = NULL;
	struct ticker t = { .stop_after = 3 };
	char why[RP_WHY_MAX];

	setenv("RINGPROF_LOOP_FAIL_URING", "1", 1);
	assert_int_equal(rp_loop_open(&o, &l, why), 0);
	unsetenv("RINGPROF_LOOP_FAIL_URING");
	assert_string_equal(rp_loop_backend(l), "poll");
	assert_string_equal(why, b->force_poll
					 ? "poll(2) backend forced"
					 : "io_uring: Operation not permitted; using poll(2)");
	ticker_start(&t, l, 1 * MS);
	assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(t.calls, 3);
	rp_loop_close(l);
}

static void test_loop_pool_bounded(void **state)
{
	struct rp_loop *l = loop_open_n(state, 8);
	struct fres f = { 0 };
	uint32_t word = 0;
	int ids[8], i, id;

	for (i = 0; i < 8; i++) {
		ids[i] = rp_loop_timer(l, LONG_NS, on_futex, &f);
		assert_true(ids[i] >= 0);
	}
	assert_int_equal(rp_loop_timer(l, LONG_NS, on_futex, &f), -EBUSY);
	assert_int_equal(rp_loop_watch(l, 0, on_futex, &f), -EBUSY);
	assert_int_equal(rp_loop_futex_wait(l, &word, 0, LONG_NS, on_futex, &f), -EBUSY);
	assert_int_equal(rp_loop_write_file(l, "/nonexistent/x", "x", 1, on_futex, &f), -EBUSY);
	/* Cancel and add again, many times: cancelled records come back. */
	assert_int_equal(rp_loop_cancel_timer(l, ids[7]), 0);
	assert_int_equal(rp_loop_cancel_timer(l, ids[6]), 0);
	for (i = 0; i < 50; i++) {
		id = rp_loop_timer(l, LONG_NS, on_futex, &f);
		assert_true(id >= 0);
		assert_int_equal(rp_loop_cancel_timer(l, id), 0);
		run_for(l, MS / 10);
	}
	assert_int_equal(f.calls, 0);
	rp_loop_close(l);
}

static void test_loop_invalid_args(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct fres f = { 0 };
	uint32_t words[2] = { 0, 0 };
	int id = rp_loop_timer(l, LONG_NS, on_futex, &f);

	assert_true(id >= 0);
	assert_int_equal(rp_loop_unwatch(l, -1), -ENOENT);
	assert_int_equal(rp_loop_unwatch(l, 0x7fffffff), -ENOENT);
	assert_int_equal(rp_loop_unwatch(l, id), -ENOENT); /* a timer's id */
	assert_int_equal(rp_loop_cancel_timer(l, -5), -ENOENT);
	assert_int_equal(rp_loop_timer(l, 0, on_futex, &f), -EINVAL);
	assert_int_equal(rp_loop_watch(l, -1, on_futex, &f), -EBADF);
	assert_int_equal(rp_loop_futex_wait(l, NULL, 0, 1, on_futex, &f), -EINVAL);
	assert_int_equal(rp_loop_futex_wait(l, (uint32_t *)((char *)words + 1), 0, 1, on_futex, &f),
			 -EINVAL);
	assert_int_equal(rp_loop_write_file(l, NULL, "x", 1, on_futex, &f), -EINVAL);
	assert_int_equal(rp_loop_write_file(l, "", "x", 1, on_futex, &f), -EINVAL);
	assert_int_equal(rp_loop_cancel_timer(l, id), 0);
	assert_int_equal(f.calls, 0);
	rp_loop_close(l);
}

/* --- socket operations --- */

struct sockop {
	struct rp_loop *l;
	int res;
	int calls;
	bool stop;
};

static void on_sockop(void *ctx, int res)
{
	struct sockop *o = ctx;

	o->res = res;
	o->calls++;
	if (o->stop)
		rp_loop_stop(o->l);
}

/* Run until @o has been called back (or a minute passes: a hang becomes a failure). */
static void run_until(struct rp_loop *l, struct sockop *o)
{
	uint64_t end = now_ns() + LONG_NS;

	o->stop = true;
	while (o->calls == 0 && now_ns() < end)
		assert_int_equal(rp_loop_run(l), 0);
	assert_int_equal(o->calls, 1);
}

/* A unix stream listener at a fresh path; *@path receives it. */
static int unix_listener(char *path, size_t size)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(path, size, "/tmp/rp_test_loop.%d.sock", (int)getpid());
	unlink(path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* accept, then recv and send through the accepted fd, each byte checked. */
static void test_loop_socket_accept_recv_send(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct sockop o = { .l = l };
	char path[108], buf[64], big[100000];
	int lfd = unix_listener(path, sizeof(path)), cfd, sfd, flags;
	size_t i, got = 0;

	/* Nothing to accept yet: the operation waits without blocking the loop. */
	assert_true(rp_loop_accept(l, lfd, on_sockop, &o) >= 0);
	run_for(l, 20 * MS);
	assert_int_equal(o.calls, 0);
	cfd = unix_connect(path);
	run_until(l, &o);
	sfd = o.res;
	assert_true(sfd >= 0);
	flags = fcntl(sfd, F_GETFL);
	assert_true(flags & O_NONBLOCK);
	/* recv: pending until the peer writes; then exactly what it wrote. */
	o = (struct sockop){ .l = l };
	assert_true(rp_loop_recv(l, sfd, buf, sizeof(buf), on_sockop, &o) >= 0);
	run_for(l, 20 * MS);
	assert_int_equal(o.calls, 0);
	assert_int_equal(write(cfd, "hello", 5), 5);
	run_until(l, &o);
	assert_int_equal(o.res, 5);
	assert_memory_equal(buf, "hello", 5);
	/* send of more than the socket buffer: a short count, the rest later. */
	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	fcntl(cfd, F_SETFL, O_NONBLOCK);
	while (got < sizeof(big)) {
		static char rbuf[sizeof(big)];
		size_t at = got;
		ssize_t n;

		o = (struct sockop){ .l = l };
		assert_true(rp_loop_send(l, sfd, big + got, sizeof(big) - got, on_sockop, &o) >= 0);
		run_until(l, &o);
		assert_true(o.res > 0);
		got += (size_t)o.res;
		/* Empty the peer's side so the next send has room. */
		while (at < got && (n = read(cfd, rbuf + at, got - at)) > 0)
			at += (size_t)n;
		assert_int_equal(at, got);
		assert_memory_equal(rbuf, big, got);
	}
	assert_int_equal(got, sizeof(big));
	close(cfd);
	close(sfd);
	close(lfd);
	unlink(path);
	rp_loop_close(l);
}

/* The bytes arrive whole and in order through the loop's sends. */
static void test_loop_socket_send_order(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct sockop o;
	int sv[2];
	char out[3000], in[3000];
	size_t i, sent = 0, got = 0;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	for (i = 0; i < sizeof(out); i++)
		out[i] = (char)(i % 251);
	while (sent < sizeof(out)) {
		size_t n = sizeof(out) - sent < 700 ? sizeof(out) - sent : 700;

		o = (struct sockop){ .l = l };
		assert_true(rp_loop_send(l, sv[0], out + sent, n, on_sockop, &o) >= 0);
		run_until(l, &o);
		assert_true(o.res > 0);
		sent += (size_t)o.res;
	}
	while (got < sizeof(in)) {
		o = (struct sockop){ .l = l };
		assert_true(rp_loop_recv(l, sv[1], in + got, sizeof(in) - got, on_sockop, &o) >= 0);
		run_until(l, &o);
		assert_true(o.res > 0);
		got += (size_t)o.res;
	}
	assert_memory_equal(in, out, sizeof(out));
	close(sv[0]);
	close(sv[1]);
	rp_loop_close(l);
}

/*
 * A peer that never reads: the send stays pending while timers keep firing; then
 * shutdown(2) ends it with an error, and a pending recv ends with 0.
 */
static void test_loop_socket_stalled_peer_shutdown(void **state)
{
	struct rp_loop *l = loop_open(state);
	static char big[1 << 22];
	struct sockop snd = { .l = l }, rcv = { .l = l };
	int sv[2];
	char buf[16];
	size_t sent = 0;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	/* Fill the socket buffer (nobody reads sv[1]). */
	for (;;) {
		ssize_t n = send(sv[0], big, sizeof(big), MSG_DONTWAIT);

		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	assert_true(sent > 0);
	assert_true(rp_loop_send(l, sv[0], big, sizeof(big), on_sockop, &snd) >= 0);
	run_for(l, 50 * MS); /* returns: the loop was not blocked by the send */
	assert_int_equal(snd.calls, 0);
	assert_int_equal(shutdown(sv[0], SHUT_RDWR), 0);
	run_until(l, &snd);
	assert_true(snd.res < 0);
	assert_true(rp_loop_recv(l, sv[0], buf, sizeof(buf), on_sockop, &rcv) >= 0);
	run_until(l, &rcv);
	assert_int_equal(rcv.res, 0);
	close(sv[0]);
	close(sv[1]);
	rp_loop_close(l);
}

/* Closing the loop with socket operations pending: no callback. */
static void test_loop_socket_close_pending(void **state)
{
	struct rp_loop *l = loop_open(state);
	struct sockop o = { .l = l };
	char buf[16];
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	assert_true(rp_loop_recv(l, sv[0], buf, sizeof(buf), on_sockop, &o) >= 0);
	assert_int_equal(rp_loop_recv(l, sv[0], NULL, 4, on_sockop, &o), -EINVAL);
	assert_int_equal(rp_loop_send(l, -1, buf, 4, on_sockop, &o), -EBADF);
	run_for(l, 10 * MS);
	rp_loop_close(l);
	assert_int_equal(o.calls, 0);
	close(sv[0]);
	close(sv[1]);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_loop_open_why),
	cmocka_unit_test(test_loop_open_refused),
	cmocka_unit_test(test_loop_timer_periodic_count),
	cmocka_unit_test(test_loop_timer_no_drift),
	cmocka_unit_test(test_loop_timer_cancel_in_callback),
	cmocka_unit_test(test_loop_watch_pipe),
	cmocka_unit_test(test_loop_watch_unwatch_in_callback),
	cmocka_unit_test(test_loop_watch_signalfd),
	cmocka_unit_test(test_loop_reentrant_callbacks),
	cmocka_unit_test(test_loop_futex_wait),
	cmocka_unit_test(test_loop_futex_wait_fallback),
	cmocka_unit_test(test_loop_write_file_whole),
	cmocka_unit_test(test_loop_write_file_errors),
	cmocka_unit_test(test_loop_write_file_atomic_replace),
	cmocka_unit_test(test_loop_write_file_ignores_planted_link),
	cmocka_unit_test(test_loop_write_file_now_whole),
	cmocka_unit_test(test_loop_write_file_now_errors),
	cmocka_unit_test(test_loop_write_file_now_close_pending),
	cmocka_unit_test(test_loop_stop_from_callback),
	cmocka_unit_test(test_loop_close_pending),
	cmocka_unit_test(test_loop_close_in_callback),
	cmocka_unit_test(test_loop_pool_bounded),
	cmocka_unit_test(test_loop_invalid_args),
	cmocka_unit_test(test_loop_socket_accept_recv_send),
	cmocka_unit_test(test_loop_socket_send_order),
	cmocka_unit_test(test_loop_socket_stalled_peer_shutdown),
	cmocka_unit_test(test_loop_socket_close_pending),
};

#define NTESTS (sizeof(tests) / sizeof(tests[0]))

/* The same tests on @b: each starts with *state = @b. */
static int run_on(const char *group, struct backend *b)
{
	struct CMUnitTest on[NTESTS];
	size_t i;

	for (i = 0; i < NTESTS; i++) {
		on[i] = tests[i];
		on[i].initial_state = b;
	}
	return cmocka_run_group_tests_name(group, on, NULL, NULL);
}

int main(void)
{
	sigset_t set;
	int failed;

	/* Before any thread starts, so that every thread inherits it (signalfd test). */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	failed = run_on("loop on io_uring", &be_uring);
	failed += run_on("loop on poll(2)", &be_poll);
	return failed;
}
