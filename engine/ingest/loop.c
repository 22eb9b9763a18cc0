// SPDX-License-Identifier: MIT
/*
 * The event loop's common half: rp_loop_open picks a backend (io_uring, or poll(2)
 * where io_uring is refused), and every rp_loop_* call becomes a record from a fixed
 * pool handed to that backend through the interface in loop_backend.h. Nothing here
 * knows which backend runs; nothing allocates after rp_loop_open.
 *
 * Ids are (generation << 16 | record index): a record's generation changes when it
 * dies, so unwatching or cancelling twice, or with an id whose record was reused,
 * answers -ENOENT instead of hitting someone else's operation.
 *
 * Re-entrancy: callbacks may call any rp_loop_* function. rp_loop_run from a callback
 * answers -EBUSY; rp_loop_close from a callback is deferred until rp_loop_run returns
 * (no callback runs in between, and the loop is gone once rp_loop_run has returned).
 * rp_loop_run also returns, with 0, once no operation is left: nothing could call
 * back, so nothing could ever stop it.
 *
 * Watches: io_uring reports readiness as it happens, poll(2) as long as it lasts; a
 * callback that drains its fd (reads until EAGAIN) sees the same on both.
 *
 * Errors after the fact (io_uring only: a watch's poll failing, no SQE to re-arm a
 * timer) reach the callback once as a negative res; the operation then stays
 * registered but inactive until it is cancelled.
 *
 * Test hooks (environment, read by rp_loop_open): RINGPROF_LOOP_FAIL_URING=1 treats
 * io_uring_queue_init as refused with EPERM; RINGPROF_LOOP_NO_FUTEX_OP=1 makes the
 * io_uring backend use its futex fallback even where IORING_OP_FUTEX_WAIT exists.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include "loop.h"
#include "loop_backend.h"

#define NO_RECORD UINT32_MAX
#define GEN_MASK  0x7fffu

uint64_t rp_loop_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t deadline_after(uint64_t ns)
{
	uint64_t now = rp_loop_now();

	return ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
}

/* --- the pool of records --- */

static int op_id(const struct rp_loop *l, const struct loop_op *op)
{
	return (int)((uint32_t)op->gen << 16 | (uint32_t)(op - l->ops));
}

static struct loop_op *op_lookup(struct rp_loop *l, int id, enum loop_kind kind)
{
	struct loop_op *op;

	if (id < 0 || ((uint32_t)id & 0xffffu) >= l->nops)
		return NULL;
	op = &l->ops[(uint32_t)id & 0xffffu];
	if (!op->live || op->kind != kind || op->gen != (uint32_t)id >> 16)
		return NULL;
	return op;
}

/* A live record, or NULL when cap operations are live or every record is in use. */
static struct loop_op *op_get(struct rp_loop *l, enum loop_kind kind, rp_loop_fn fn, void *ctx)
{
	struct loop_op *op;

	if (l->nlive >= l->cap || l->free_head == NO_RECORD)
		return NULL;
	op = &l->ops[l->free_head];
	l->free_head = op->next_free;
	op->kind = (uint8_t)kind;
	op->live = true;
	op->refs = 0;
	op->fn = fn;
	op->ctx = ctx;
	l->nlive++;
	return op;
}

void rp_loop_op_put(struct rp_loop *l, struct loop_op *op)
{
	if (op->live || op->refs != 0 || op->kind == LOOP_FREE)
		return;
	if (op->kind == LOOP_WRITE) {
		rp_loop_write_discard(op->write);
		op->write->used = false;
	}
	op->kind = LOOP_FREE;
	op->next_free = l->free_head;
	l->free_head = (uint32_t)(op - l->ops);
}

/* The record dies: no callback from now on, and its id stops working. */
static void op_die(struct rp_loop *l, struct loop_op *op)
{
	assert(op->live);
	op->live = false;
	op->gen = (op->gen + 1) & GEN_MASK;
	l->nlive--;
}

static void op_kill(struct rp_loop *l, struct loop_op *op)
{
	op_die(l, op);
	l->be->cancel(l, op);
}

void rp_loop_op_finish(struct rp_loop *l, struct loop_op *op, int res)
{
	rp_loop_fn fn = op->fn;
	void *ctx = op->ctx;

	op_die(l, op);
	rp_loop_op_put(l, op);
	if (!l->closing)
		fn(ctx, res);
}

bool rp_loop_op_notify(struct rp_loop *l, struct loop_op *op, int res)
{
	uint16_t gen = op->gen;

	if (!op->live || l->closing)
		return false;
	op->fn(op->ctx, res);
	/* The callback may have cancelled it, and a new operation may hold the record. */
	return op->live && op->gen == gen;
}

/* Hand a new record to the backend. @return its id or -errno. */
static int op_start(struct rp_loop *l, struct loop_op *op)
{
	int err = l->be->start(l, op);

	if (err < 0) {
		op_die(l, op);
		rp_loop_op_put(l, op);
		return err;
	}
	return op_id(l, op);
}

/* --- shared arithmetic --- */

int rp_loop_timer_expire(struct loop_op *op, uint64_t now)
{
	uint64_t n = 1;

	/* Count from the schedule, not from now: a late wake-up never shifts later ticks. */
	if (now > op->timer.next)
		n += (now - op->timer.next) / op->timer.interval;
	op->timer.next += n * op->timer.interval;
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

int rp_loop_futex_check(const struct loop_op *op, uint64_t now, uint64_t *next)
{
	/*
	 * Acquire: pairs with the release store of whoever changes the word, so the
	 * callback sees what was written before the doorbell was rung.
	 */
	if (__atomic_load_n(op->futex.word, __ATOMIC_ACQUIRE) != op->futex.val)
		return 0;
	if (now >= op->futex.deadline)
		return -ETIME;
	*next = op->futex.deadline - now > RP_LOOP_FUTEX_RECHECK_NS ? now + RP_LOOP_FUTEX_RECHECK_NS
								    : op->futex.deadline;
	return -EAGAIN;
}

void rp_loop_write_discard(struct loop_write *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (w->tmp_exists)
		unlink(w->tmp);
	w->tmp_exists = false;
}

int rp_loop_write_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Whether an fsync of @fd buys anything: not where the file system lives in memory
 * (tmpfs, ramfs: /dev/shm, often /tmp), which a crash empties whatever we do. */
static bool write_needs_sync(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) != 0)
		return true;
	return sf.f_type != TMPFS_MAGIC && sf.f_type != RAMFS_MAGIC;
}

int rp_loop_write_now(struct loop_write *w)
{
	int err;

	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0)
		return -errno;
	w->tmp_exists = true;
	err = rp_loop_write_all(w->fd, w->buf, w->len);
	if (err == 0 && rename(w->tmp, w->path) < 0)
		err = -errno;
	if (err < 0) {
		rp_loop_write_discard(w); /* closes, unlinks the temporary file */
		return err;
	}
	w->tmp_exists = false;
	w->renamed = true;
	w->sync = write_needs_sync(w->fd);
	return 0;
}

/* --- open and close --- */

static bool env_set(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && strcmp(v, "1") == 0;
}

static int backend_use(struct rp_loop *l, const struct loop_backend *be, unsigned entries)
{
	int err = be->init(l, entries);

	if (err == 0)
		l->be = be;
	return err;
}

static int backend_pick(struct rp_loop *l, const struct rp_loop_opts *opts, unsigned entries,
			char why[RP_WHY_MAX])
{
	int err;

	if (opts->force_poll) {
		snprintf(why, RP_WHY_MAX, "poll(2) backend forced");
		return backend_use(l, &rp_loop_backend_poll, entries);
	}
	if (env_set("RINGPROF_LOOP_FAIL_URING"))
		err = -EPERM;
	else
		err = backend_use(l, &rp_loop_backend_uring, entries);
	if (err == 0)
		return 0;
	if (err != -EPERM && err != -ENOSYS && err != -EACCES) {
		snprintf(why, RP_WHY_MAX, "io_uring_queue_init: %s", strerror(-err));
		return err;
	}
	snprintf(why, RP_WHY_MAX, "io_uring: %s; using poll(2)", strerror(-err));
	return backend_use(l, &rp_loop_backend_poll, entries);
}

static unsigned clamp_entries(unsigned entries)
{
	if (entries == 0)
		return RP_LOOP_ENTRIES_DEFAULT;
	if (entries < RP_LOOP_ENTRIES_MIN)
		return RP_LOOP_ENTRIES_MIN;
	return entries > RP_LOOP_ENTRIES_MAX ? RP_LOOP_ENTRIES_MAX : entries;
}

static struct rp_loop *loop_alloc(unsigned entries)
{
	struct rp_loop *l = calloc(1, sizeof(*l));
	uint32_t i;

	if (l == NULL)
		return NULL;
	l->cap = entries;
	l->nops = 2 * entries;
	l->ops = calloc(l->nops, sizeof(*l->ops));
	if (l->ops == NULL) {
		free(l);
		return NULL;
	}
	for (i = 0; i < l->nops; i++)
		l->ops[i].next_free = i + 1 < l->nops ? i + 1 : NO_RECORD;
	for (i = 0; i < RP_LOOP_WRITES; i++)
		l->writes[i].fd = -1;
	return l;
}

int rp_loop_open(const struct rp_loop_opts *opts, struct rp_loop **out, char why[RP_WHY_MAX])
{
	static const struct rp_loop_opts defaults;
	struct rp_loop *l;
	unsigned entries;
	int err;

	assert(out != NULL && why != NULL);
	*out = NULL;
	why[0] = '\0';
	if (opts == NULL)
		opts = &defaults;
	entries = clamp_entries(opts->entries);
	l = loop_alloc(entries);
	if (l == NULL) {
		snprintf(why, RP_WHY_MAX, "loop: out of memory");
		return -ENOMEM;
	}
	err = backend_pick(l, opts, entries, why);
	if (err < 0) {
		free(l->ops);
		free(l);
		return err;
	}
	*out = l;
	return 0;
}

static void loop_free(struct rp_loop *l)
{
	uint32_t i;

	l->closing = true;
	for (i = 0; i < l->nops; i++)
		if (l->ops[i].live)
			op_kill(l, &l->ops[i]);
	l->be->fini(l);
	free(l->ops);
	free(l);
}

void rp_loop_close(struct rp_loop *l)
{
	if (l == NULL)
		return;
	if (l->running) {
		/* Inside a callback: rp_loop_run frees the loop on its way out. */
		l->closing = true;
		l->stop = true;
		return;
	}
	loop_free(l);
}

const char *rp_loop_backend(const struct rp_loop *l)
{
	return l->be->name;
}

/* --- operations --- */

int rp_loop_watch(struct rp_loop *l, int fd, rp_loop_fn fn, void *ctx)
{
	struct loop_op *op;

	assert(l != NULL && fn != NULL);
	if (fd < 0)
		return -EBADF;
	op = op_get(l, LOOP_WATCH, fn, ctx);
	if (op == NULL)
		return -EBUSY;
	op->fd = fd;
	return op_start(l, op);
}

int rp_loop_unwatch(struct rp_loop *l, int id)
{
	struct loop_op *op = op_lookup(l, id, LOOP_WATCH);

	if (op == NULL)
		return -ENOENT;
	op_kill(l, op);
	return 0;
}

int rp_loop_timer(struct rp_loop *l, uint64_t interval_ns, rp_loop_fn fn, void *ctx)
{
	struct loop_op *op;

	assert(l != NULL && fn != NULL);
	if (interval_ns == 0 || interval_ns > UINT64_MAX / 4)
		return -EINVAL;
	op = op_get(l, LOOP_TIMER, fn, ctx);
	if (op == NULL)
		return -EBUSY;
	op->timer.interval = interval_ns;
	op->timer.next = deadline_after(interval_ns);
	return op_start(l, op);
}

int rp_loop_cancel_timer(struct rp_loop *l, int id)
{
	struct loop_op *op = op_lookup(l, id, LOOP_TIMER);

	if (op == NULL)
		return -ENOENT;
	op_kill(l, op);
	return 0;
}

int rp_loop_futex_wait(struct rp_loop *l, uint32_t *word, uint32_t val, uint64_t timeout_ns,
		       rp_loop_fn fn, void *ctx)
{
	struct loop_op *op;
	int id;

	assert(l != NULL && fn != NULL);
	if (word == NULL || ((uintptr_t)word & 3u) != 0)
		return -EINVAL;
	op = op_get(l, LOOP_FUTEX, fn, ctx);
	if (op == NULL)
		return -EBUSY;
	op->futex.word = word;
	op->futex.val = val;
	op->futex.deadline = deadline_after(timeout_ns);
	id = op_start(l, op);
	return id < 0 ? id : 0;
}

/* A free write slot for @path, or NULL (all busy, or @path is being written already). */
static struct loop_write *write_slot(struct rp_loop *l, const char *path)
{
	struct loop_write *free_slot = NULL;
	unsigned i;

	for (i = 0; i < RP_LOOP_WRITES; i++) {
		if (!l->writes[i].used)
			free_slot = free_slot != NULL ? free_slot : &l->writes[i];
		else if (!l->writes[i].renamed && strcmp(l->writes[i].path, path) == 0)
			return NULL; /* both would rename onto @path: which one wins? */
	}
	return free_slot;
}

/* The temporary file's name: pid, a counter and random bits, so that a name planted
 * in a shared directory is unlikely to be ours; the backends create it with
 * O_EXCL | O_NOFOLLOW, so a planted file or link fails that one write instead of
 * redirecting it (and the next write has another name). */
static int write_prepare(struct loop_write *w, const char *path, const void *buf, size_t len)
{
	static unsigned seq;
	unsigned rnd = 0;
	int n;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		rnd = (unsigned)ts.tv_nsec;
	}
	n = snprintf(w->tmp, sizeof(w->tmp), "%s.tmp.%ld.%u.%08x", path, (long)getpid(), ++seq,
		     rnd);

	if (n < 0 || (size_t)n >= sizeof(w->tmp))
		return -ENAMETOOLONG;
	memcpy(w->path, path, strlen(path) + 1);
	w->buf = buf;
	w->len = len;
	w->done = 0;
	w->fd = -1;
	w->err = 0;
	w->step = 0;
	w->tmp_exists = false;
	w->renamed = false;
	w->sync = true;
	return 0;
}

/* The pid in @rest, what follows "<base>.tmp.": "<pid>" or "<pid>.<n>.<8 hex>"; 0
 * when @rest is neither. */
static long temp_pid(const char *rest)
{
	const char *p = rest;
	long pid = 0;
	size_t hex;

	for (; *p >= '0' && *p <= '9' && pid < (1L << 30); p++)
		pid = pid * 10 + (*p - '0');
	if (p == rest || pid <= 0 || pid >= (1L << 30))
		return 0;
	if (*p == '\0')
		return pid;
	if (*p++ != '.' || !(*p >= '0' && *p <= '9'))
		return 0;
	p += strspn(p, "0123456789");
	if (*p++ != '.')
		return 0;
	hex = strspn(p, "0123456789abcdef");
	return hex == 8 && p[8] == '\0' ? pid : 0;
}

int rp_loop_clean_temps(const char *path, uint64_t *bytes)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX], prefix[NAME_MAX + 8];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (bytes != NULL)
		*bytes = 0;
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (snprintf(prefix, sizeof(prefix), "%s.tmp.", slash ? slash + 1 : path) >=
	    (int)sizeof(prefix))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (d == NULL)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		long pid;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		pid = temp_pid(e->d_name + strlen(prefix));
		/* ESRCH only: EPERM means it runs (as another user) */
		if (pid == 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		/* no symlink followed, nobody else's file removed */
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) != 0)
			continue;
		n++;
		if (bytes != NULL)
			*bytes += (uint64_t)st.st_size;
	}
	closedir(d);
	return n;
}

int rp_loop_write_file_flags(struct rp_loop *l, const char *path, const void *buf, size_t len,
			     unsigned flags, rp_loop_fn fn, void *ctx)
{
	struct loop_write *w;
	struct loop_op *op;
	int err;

	assert(l != NULL && fn != NULL);
	if (path == NULL || path[0] == '\0' || (buf == NULL && len > 0) ||
	    (flags & ~RP_LOOP_WRITE_NOW) != 0)
		return -EINVAL;
	w = write_slot(l, path);
	if (w == NULL)
		return -EBUSY;
	err = write_prepare(w, path, buf, len);
	if (err < 0)
		return err;
	op = op_get(l, LOOP_WRITE, fn, ctx);
	if (op == NULL)
		return -EBUSY;
	w->used = true;
	op->write = w;
	/* Before the backend sees it: the backends start a renamed write at its tail. */
	if ((flags & RP_LOOP_WRITE_NOW) != 0 && (err = rp_loop_write_now(w)) < 0) {
		op_die(l, op);
		rp_loop_op_put(l, op);
		return err;
	}
	err = op_start(l, op);
	return err < 0 ? err : 0;
}

int rp_loop_write_file(struct rp_loop *l, const char *path, const void *buf, size_t len,
		       rp_loop_fn fn, void *ctx)
{
	return rp_loop_write_file_flags(l, path, buf, len, 0, fn, ctx);
}

/* --- sockets --- */

int rp_loop_sock_try(const struct loop_op *op)
{
	ssize_t n;
	int fd;

	do {
		switch (op->kind) {
		case LOOP_ACCEPT:
			fd = accept4(op->sock.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			n = fd;
			break;
		case LOOP_RECV: n = recv(op->sock.fd, op->sock.buf, op->sock.len, MSG_DONTWAIT); break;
		default:
			n = send(op->sock.fd, op->sock.buf, op->sock.len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			break;
		}
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

short rp_loop_sock_events(const struct loop_op *op)
{
	return op->kind == LOOP_SEND ? POLLOUT : POLLIN;
}

static int sock_op(struct rp_loop *l, enum loop_kind kind, int fd, void *buf, size_t len,
		   rp_loop_fn fn, void *ctx)
{
	struct loop_op *op;

	assert(l != NULL && fn != NULL);
	if (fd < 0)
		return -EBADF;
	if (kind != LOOP_ACCEPT && (buf == NULL || len == 0))
		return -EINVAL;
	op = op_get(l, kind, fn, ctx);
	if (op == NULL)
		return -EBUSY;
	op->sock.fd = fd;
	op->sock.buf = buf;
	/* One io_uring request moves at most INT32_MAX bytes; a short count says so. */
	op->sock.len = len > INT32_MAX ? INT32_MAX : len;
	return op_start(l, op);
}

int rp_loop_accept(struct rp_loop *l, int fd, rp_loop_fn fn, void *ctx)
{
	return sock_op(l, LOOP_ACCEPT, fd, NULL, 0, fn, ctx);
}

int rp_loop_recv(struct rp_loop *l, int fd, void *buf, size_t len, rp_loop_fn fn, void *ctx)
{
	return sock_op(l, LOOP_RECV, fd, buf, len, fn, ctx);
}

int rp_loop_send(struct rp_loop *l, int fd, const void *buf, size_t len, rp_loop_fn fn,
		 void *ctx)
{
	return sock_op(l, LOOP_SEND, fd, (void *)buf, len, fn, ctx);
}

/* --- running --- */

int rp_loop_run(struct rp_loop *l)
{
	int err = 0;

	assert(l != NULL);
	if (l->running)
		return -EBUSY;
	l->running = true;
	l->stop = false;
	while (!l->stop && l->nlive > 0 && err == 0)
		err = l->be->iterate(l);
	l->running = false;
	if (l->closing)
		loop_free(l);
	return err;
}

void rp_loop_stop(struct rp_loop *l)
{
	assert(l != NULL);
	l->stop = true;
}
