// SPDX-License-Identifier: MIT
/*
 * The loop on poll(2), for where io_uring is refused (containers often block it).
 * Same contract as loop_uring.c, done by hand each iteration:
 *
 *  - sleep in ppoll(2) on every watched fd until the earliest deadline: the next tick
 *    of a timer (CLOCK_MONOTONIC, scheduled from the previous tick, never from the
 *    wake-up, so periods do not drift), 1 ms for a pending futex wait, or now when a
 *    file write is queued;
 *  - futex waits: the word is re-checked every iteration, so at least every
 *    millisecond and at the deadline. A FUTEX_WAKE that leaves the word unchanged is
 *    not seen here (it is on io_uring's FUTEX_WAIT): the doorbell only shortens waits;
 *  - socket operations: poll(2) for POLLIN (accept, recv) or POLLOUT (send), then
 *    the nonblocking call (rp_loop_sock_try); one that would block stays pending;
 *  - file writes run synchronously inside the iteration (open, write all, fsync,
 *    close, rename; unlink the temporary file on any failure), then the callback;
 *    an RP_LOOP_WRITE_NOW write is renamed already (loop.c): its fsync and close.
 *
 * Dispatch walks the records in index order and re-checks each one right before its
 * callback: a callback may cancel, add or reuse records, or stop the loop, and then
 * the rest of the walk waits for the next iteration (poll(2) is level-triggered and
 * deadlines stay due, so nothing is lost).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop_backend.h"

struct pollset {
	struct pollfd *fds; /* one per watch at most */
	uint32_t *idx;	    /* fds[i] belongs to record idx[i]... */
	uint16_t *gen;	    /* ...of generation gen[i] */
};

static struct pollset *pollset_of(struct rp_loop *l)
{
	return l->be_priv;
}

/* --- file writes --- */

static int write_sync(struct loop_write *w)
{
	int err = 0;

	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0)
		return -errno;
	w->tmp_exists = true;
	err = rp_loop_write_all(w->fd, w->buf, w->len);
	if (err == 0 && fsync(w->fd) < 0)
		err = -errno;
	if (close(w->fd) < 0 && err == 0)
		err = -errno;
	w->fd = -1;
	if (err == 0 && rename(w->tmp, w->path) < 0)
		err = -errno;
	if (err == 0)
		w->tmp_exists = false;
	rp_loop_write_discard(w); /* unlinks the temporary file after a failure */
	return err;
}

/* RP_LOOP_WRITE_NOW's tail: the file is at its path; fsync it (unless w->sync says it
 * buys nothing), close it. */
static int write_tail(struct loop_write *w)
{
	int err = 0;

	if (w->sync && fsync(w->fd) < 0)
		err = -errno;
	if (close(w->fd) < 0 && err == 0)
		err = -errno;
	w->fd = -1;
	return err;
}

/* --- one iteration --- */

static uint64_t due_of(const struct loop_op *op, uint64_t now)
{
	uint64_t next = now;

	switch (op->kind) {
	case LOOP_TIMER: return op->timer.next;
	case LOOP_FUTEX: return rp_loop_futex_check(op, now, &next) == -EAGAIN ? next : now;
	case LOOP_WRITE: return now;
	}
	return UINT64_MAX;
}

/* Fill the pollfd array; @return its length, *@due = the earliest deadline. */
static nfds_t gather(struct rp_loop *l, uint64_t now, uint64_t *due)
{
	struct pollset *p = pollset_of(l);
	nfds_t n = 0;
	uint32_t i;

	*due = UINT64_MAX;
	for (i = 0; i < l->nops; i++) {
		const struct loop_op *op = &l->ops[i];
		uint64_t d;

		if (!op->live)
			continue;
		if (op->kind == LOOP_WATCH || loop_kind_sock(op->kind)) {
			p->fds[n] = (struct pollfd){
				.fd = op->kind == LOOP_WATCH ? op->fd : op->sock.fd,
				.events = op->kind == LOOP_WATCH ? POLLIN : rp_loop_sock_events(op),
			};
			p->idx[n] = i;
			p->gen[n++] = op->gen;
			continue;
		}
		d = due_of(op, now);
		*due = d < *due ? d : *due;
	}
	return n;
}

static int sleep_until(struct rp_loop *l, nfds_t n, uint64_t now, uint64_t due)
{
	struct timespec ts, *tsp = NULL;

	if (due != UINT64_MAX) {
		uint64_t wait = due > now ? due - now : 0;

		ts.tv_sec = (time_t)(wait / 1000000000ull);
		ts.tv_nsec = (long)(wait % 1000000000ull);
		tsp = &ts;
	}
	if (ppoll(pollset_of(l)->fds, n, tsp, NULL) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

/* Call back the watches and socket operations poll(2) found ready. @return true if the loop stopped. */
static bool run_watches(struct rp_loop *l, nfds_t n)
{
	struct pollset *p = pollset_of(l);
	nfds_t i;

	for (i = 0; i < n && !l->stop; i++) {
		struct loop_op *op = &l->ops[p->idx[i]];
		int res;

		if (p->fds[i].revents == 0 || op->gen != p->gen[i] || !op->live)
			continue;
		if (op->kind == LOOP_WATCH) {
			rp_loop_op_notify(l, op, p->fds[i].revents);
			continue;
		}
		if (!loop_kind_sock(op->kind))
			continue;
		/* POLLERR/POLLHUP too: the call then reports what happened. */
		res = rp_loop_sock_try(op);
		if (res != -EAGAIN)
			rp_loop_op_finish(l, op, res);
	}
	return l->stop;
}

static void run_one(struct rp_loop *l, struct loop_op *op, uint64_t now)
{
	uint64_t next;
	int res;

	switch (op->kind) {
	case LOOP_TIMER:
		if (now >= op->timer.next)
			rp_loop_op_notify(l, op, rp_loop_timer_expire(op, now));
		break;
	case LOOP_FUTEX:
		res = rp_loop_futex_check(op, now, &next);
		if (res != -EAGAIN)
			rp_loop_op_finish(l, op, res);
		break;
	case LOOP_WRITE:
		res = op->write->renamed ? write_tail(op->write) : write_sync(op->write);
		rp_loop_op_finish(l, op, res);
		break;
	}
}

/* Call back the timers, futex waits and writes that are due. */
static void run_due(struct rp_loop *l)
{
	uint64_t now = rp_loop_now();
	uint32_t i;

	for (i = 0; i < l->nops && !l->stop; i++)
		if (l->ops[i].live && l->ops[i].kind != LOOP_WATCH &&
		    !loop_kind_sock(l->ops[i].kind))
			run_one(l, &l->ops[i], now);
}

/* --- the backend interface --- */

static int poll_iterate(struct rp_loop *l)
{
	uint64_t now = rp_loop_now(), due;
	nfds_t n = gather(l, now, &due);
	int err = sleep_until(l, n, now, due);

	if (err < 0)
		return err;
	if (!run_watches(l, n))
		run_due(l);
	return 0;
}

static int poll_init(struct rp_loop *l, unsigned entries)
{
	struct pollset *p = calloc(1, sizeof(*p));

	(void)entries; /* watches are bounded by the records */
	if (p == NULL)
		return -ENOMEM;
	p->fds = calloc(l->nops, sizeof(*p->fds));
	p->idx = calloc(l->nops, sizeof(*p->idx));
	p->gen = calloc(l->nops, sizeof(*p->gen));
	if (p->fds == NULL || p->idx == NULL || p->gen == NULL) {
		free(p->fds);
		free(p->idx);
		free(p->gen);
		free(p);
		return -ENOMEM;
	}
	l->be_priv = p;
	return 0;
}

static void poll_fini(struct rp_loop *l)
{
	struct pollset *p = pollset_of(l);

	free(p->fds);
	free(p->idx);
	free(p->gen);
	free(p);
	l->be_priv = NULL;
}

static int poll_start(struct rp_loop *l, struct loop_op *op)
{
	(void)l;
	(void)op; /* the next gather() picks it up */
	return 0;
}

static void poll_cancel(struct rp_loop *l, struct loop_op *op)
{
	rp_loop_op_put(l, op); /* nothing in flight refers to it */
}

const struct loop_backend rp_loop_backend_poll = {
	.name = "poll",
	.init = poll_init,
	.fini = poll_fini,
	.start = poll_start,
	.cancel = poll_cancel,
	.iterate = poll_iterate,
};
