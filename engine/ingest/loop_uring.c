// SPDX-License-Identifier: MIT
/*
 * The loop on io_uring. Every request's user_data is the address of its record in
 * the pool (loop_backend.h), its low bits tagging which of the record's requests
 * completed; a cancel request carries 0 and its completion only ends its count.
 *
 *  - timers: IORING_OP_TIMEOUT with IORING_TIMEOUT_ABS on CLOCK_MONOTONIC, re-armed at
 *    the next scheduled tick after each expiration, so periods never add up drift;
 *  - fd watches: multishot poll, re-armed when a completion lacks IORING_CQE_F_MORE.
 *    It reports wake-ups, not levels: data a callback leaves unread brings no new
 *    callback until more arrives (poll(2) would call again at once), so callbacks
 *    must drain their fd (read until EAGAIN) on either backend;
 *  - futex waits: IORING_OP_FUTEX_WAIT (kernel 6.7+, found by the probe) linked to an
 *    absolute IORING_OP_LINK_TIMEOUT; without it, a timeout re-checks the word every
 *    millisecond and at the deadline (rp_loop_futex_check);
 *  - socket operations: IORING_OP_ACCEPT/RECV/SEND. A nonblocking socket may answer
 *    -EAGAIN (whether the kernel waits by itself depends on its version): then a
 *    one-shot poll for POLLIN/POLLOUT (tag TAG_POLL) and the operation again;
 *  - file writes: openat, write until all is written, fsync, close, renameat, one
 *    request after the other; a failed step closes and unlinks the temporary file
 *    before the callback hears the first error. Close comes before the rename so the
 *    rename is the one commit point: any error means the target was not touched.
 *    RP_LOOP_WRITE_NOW writes arrive renamed (loop.c, in the caller's thread: no
 *    loop turn between the steps): only their fsync (not on tmpfs) and close.
 *
 * Cancelling submits IORING_OP_ASYNC_CANCEL for the record's request; the record
 * stays in the pool, dead, until its last completion has arrived. Closing cancels
 * everything and waits for every request, so nothing in the kernel refers to a
 * record or to a caller's buffer once rp_loop_close returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "loop_backend.h"
#include "probe.h"

/* What a completion's user_data says besides the record's address. */
#define TAG_OP	 0u /* the record's main request */
#define TAG_LINK 1u /* the timeout linked to a futex wait */
#define TAG_POLL 2u /* a socket operation's wait for readiness after -EAGAIN */
#define TAG_MASK 3u

_Static_assert(_Alignof(struct loop_op) > TAG_MASK, "user_data tags need aligned records");

/* The kernel uapi for IORING_OP_FUTEX_WAIT, newer than liburing 2.3's headers. */
#define FUTEX2_SIZE_U32	       0x02u /* no FUTEX2_PRIVATE: the word is in shared memory */
#define FUTEX_BITSET_MATCH_ANY 0xffffffffu

enum write_step { W_OPEN, W_WRITE, W_FSYNC, W_CLOSE, W_RENAME, W_CLOSE_FAILED, W_UNLINK };

struct uring {
	struct io_uring ring;
	struct __kernel_timespec *ts; /* one per record: the time of its timeout */
	unsigned inflight;	      /* requests whose last completion is due, cancels too */
	bool futex_op;		      /* IORING_OP_FUTEX_WAIT is usable */
};

static struct uring *uring_of(struct rp_loop *l)
{
	return l->be_priv;
}

/*
 * Room for @n SQEs, submitting what is queued if needed (a futex wait and its linked
 * timeout must go in together).
 */
static bool sq_room(struct uring *u, unsigned n)
{
	if (io_uring_sq_space_left(&u->ring) < n && io_uring_submit(&u->ring) < 0)
		return false;
	return io_uring_sq_space_left(&u->ring) >= n;
}

/* An SQE, or NULL if even submitting what is queued frees none. */
static struct io_uring_sqe *sqe_get(struct uring *u)
{
	return sq_room(u, 1) ? io_uring_get_sqe(&u->ring) : NULL;
}

static void sqe_own(struct uring *u, struct io_uring_sqe *sqe, struct loop_op *op, unsigned tag)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)op | tag);
	op->refs++;
	u->inflight++;
}

static struct __kernel_timespec *ts_at(struct rp_loop *l, const struct loop_op *op, uint64_t ns)
{
	struct __kernel_timespec *ts = &uring_of(l)->ts[op - l->ops];

	ts->tv_sec = (long long)(ns / 1000000000ull);
	ts->tv_nsec = (long long)(ns % 1000000000ull);
	return ts;
}

/* An absolute CLOCK_MONOTONIC timeout for @op at @ns. */
static int arm_timeout(struct rp_loop *l, struct loop_op *op, uint64_t ns)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe = sqe_get(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_timeout(sqe, ts_at(l, op, ns), 0, IORING_TIMEOUT_ABS);
	sqe_own(u, sqe, op, TAG_OP);
	return 0;
}

static int arm_watch(struct rp_loop *l, struct loop_op *op)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe = sqe_get(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_poll_multishot(sqe, op->fd, POLLIN);
	sqe_own(u, sqe, op, TAG_OP);
	return 0;
}

/* IORING_OP_FUTEX_WAIT on a shared u32, linked to a timeout at the deadline. */
static int arm_futex_op(struct rp_loop *l, struct loop_op *op)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe, *link;

	if (!sq_room(u, 2))
		return -EBUSY;
	sqe = io_uring_get_sqe(&u->ring);
	link = io_uring_get_sqe(&u->ring);
	io_uring_prep_rw(RP_IORING_OP_FUTEX_WAIT, sqe, (int)FUTEX2_SIZE_U32, op->futex.word, 0,
			 op->futex.val);
	sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
	sqe->rw_flags = 0; /* sqe->futex_flags in the kernel's union */
	sqe->flags |= IOSQE_IO_LINK;
	sqe_own(u, sqe, op, TAG_OP);
	io_uring_prep_link_timeout(link, ts_at(l, op, op->futex.deadline), IORING_TIMEOUT_ABS);
	sqe_own(u, link, op, TAG_LINK);
	return 0;
}

/* The fallback: look at the word now if it already moved, else in 1 ms or at the end. */
static int arm_futex_check(struct rp_loop *l, struct loop_op *op)
{
	uint64_t now = rp_loop_now(), next = now;

	rp_loop_futex_check(op, now, &next);
	return arm_timeout(l, op, next);
}

/* --- sockets --- */

static int arm_sock(struct rp_loop *l, struct loop_op *op)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe = sqe_get(u);

	if (sqe == NULL)
		return -EBUSY;
	switch (op->kind) {
	case LOOP_ACCEPT:
		io_uring_prep_accept(sqe, op->sock.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		break;
	case LOOP_RECV:
		io_uring_prep_recv(sqe, op->sock.fd, op->sock.buf, op->sock.len, 0);
		break;
	default:
		io_uring_prep_send(sqe, op->sock.fd, op->sock.buf, op->sock.len, MSG_NOSIGNAL);
		break;
	}
	sqe_own(u, sqe, op, TAG_OP);
	return 0;
}

static int arm_sock_poll(struct rp_loop *l, struct loop_op *op)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe = sqe_get(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, op->sock.fd, (unsigned)rp_loop_sock_events(op));
	sqe_own(u, sqe, op, TAG_POLL);
	return 0;
}

/* The operation (TAG_OP) or its readiness poll (TAG_POLL) completed. */
static void sock_complete(struct rp_loop *l, struct loop_op *op, int res, unsigned tag)
{
	int err;

	if (tag == TAG_OP && res != -EAGAIN) {
		rp_loop_op_finish(l, op, res);
		return;
	}
	/* Would block: wait until ready; once ready (or the poll failed): try again. */
	if (tag == TAG_OP)
		err = arm_sock_poll(l, op);
	else
		err = res < 0 ? res : arm_sock(l, op);
	if (err < 0)
		rp_loop_op_finish(l, op, err);
}

/* --- file writes --- */

static int write_submit(struct rp_loop *l, struct loop_op *op, enum write_step step)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe = sqe_get(u);
	struct loop_write *w = op->write;
	size_t chunk = w->len - w->done > (1u << 30) ? (1u << 30) : w->len - w->done;

	if (sqe == NULL)
		return -EBUSY;
	w->step = step;
	switch (step) {
	case W_OPEN:
		io_uring_prep_openat(sqe, AT_FDCWD, w->tmp,
				     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		break;
	case W_WRITE:
		io_uring_prep_write(sqe, w->fd, w->buf + w->done, (unsigned)chunk, w->done);
		break;
	case W_FSYNC: io_uring_prep_fsync(sqe, w->fd, 0); break;
	case W_CLOSE:
	case W_CLOSE_FAILED:
		io_uring_prep_close(sqe, w->fd);
		w->fd = -1; /* the kernel closes it whatever the result */
		break;
	case W_RENAME: io_uring_prep_renameat(sqe, AT_FDCWD, w->tmp, AT_FDCWD, w->path, 0); break;
	case W_UNLINK: io_uring_prep_unlinkat(sqe, AT_FDCWD, w->tmp, 0); break;
	}
	sqe_own(u, sqe, op, TAG_OP);
	return 0;
}

/* Record what a step's completion changed about the files, for any clean-up. */
static void write_note(struct loop_write *w, int res)
{
	if (w->step == W_OPEN && res >= 0) {
		w->fd = res;
		w->tmp_exists = true;
	} else if ((w->step == W_RENAME && res == 0) || w->step == W_UNLINK) {
		w->tmp_exists = false;
	}
}

/* The step after a successful one. */
static enum write_step write_next(struct loop_write *w, int res)
{
	if (w->step == W_WRITE)
		w->done += (size_t)res;
	switch (w->step) {
	case W_OPEN: return w->len > 0 ? W_WRITE : W_FSYNC;
	case W_WRITE: return w->done < w->len ? W_WRITE : W_FSYNC;
	case W_FSYNC: return W_CLOSE;
	default: return W_RENAME; /* after W_CLOSE (not reached once renamed) */
	}
}

/* The step after @res, or -1 when the write is over (its result in w->err). */
static int write_after(struct loop_write *w, int res)
{
	if (w->step == W_UNLINK)
		return -1;
	if (w->step == W_CLOSE_FAILED) /* on the error path already */
		return w->tmp_exists ? W_UNLINK : -1;
	if (res >= 0)
		return (int)write_next(w, res);
	w->err = res;
	if (w->fd >= 0)
		return W_CLOSE_FAILED;
	return w->tmp_exists ? W_UNLINK : -1;
}

static void write_complete(struct rp_loop *l, struct loop_op *op, int res)
{
	struct loop_write *w = op->write;
	int next;

	write_note(w, res);
	if (!op->live) {
		rp_loop_op_put(l, op); /* abandoned at close: the put cleans up */
		return;
	}
	if ((w->step == W_RENAME || (w->step == W_CLOSE && w->renamed)) && res == 0) {
		rp_loop_op_finish(l, op, 0);
		return;
	}
	if (w->step == W_WRITE && res == 0)
		res = -EIO; /* no progress: never spin */
	next = write_after(w, res);
	if (next < 0) {
		rp_loop_op_finish(l, op, w->err);
		return;
	}
	if (write_submit(l, op, (enum write_step)next) == 0)
		return;
	/* No SQE to be had: finish the clean-up here. */
	if (w->err == 0)
		w->err = -EBUSY;
	rp_loop_write_discard(w);
	rp_loop_op_finish(l, op, w->err);
}

/* --- completions --- */

static void timer_complete(struct rp_loop *l, struct loop_op *op, int res)
{
	int err;

	if (res != -ETIME) {
		rp_loop_op_notify(l, op, res < 0 ? res : -EIO); /* stays registered, inactive */
		return;
	}
	if (!rp_loop_op_notify(l, op, rp_loop_timer_expire(op, rp_loop_now())))
		return;
	err = arm_timeout(l, op, op->timer.next);
	if (err < 0)
		rp_loop_op_notify(l, op, err);
}

static void watch_complete(struct rp_loop *l, struct loop_op *op, int res, unsigned flags)
{
	int err;

	if (res < 0) {
		rp_loop_op_notify(l, op, res); /* stays registered, inactive */
		return;
	}
	if (!rp_loop_op_notify(l, op, res) || (flags & IORING_CQE_F_MORE))
		return;
	err = arm_watch(l, op); /* the kernel ended the multishot poll: start another */
	if (err < 0)
		rp_loop_op_notify(l, op, err);
}

static void futex_complete(struct rp_loop *l, struct loop_op *op, int res)
{
	struct uring *u = uring_of(l);
	uint64_t next = 0;
	int err;

	if (u->futex_op) {
		/* -EAGAIN: the word differed already; -ECANCELED: the linked timeout. */
		if (res == -EAGAIN)
			res = 0;
		else if (res == -ECANCELED)
			res = -ETIME;
		rp_loop_op_finish(l, op, res);
		return;
	}
	if (res == -ETIME)
		res = rp_loop_futex_check(op, rp_loop_now(), &next);
	if (res == -EAGAIN) {
		err = arm_timeout(l, op, next);
		if (err == 0)
			return;
		res = err;
	}
	rp_loop_op_finish(l, op, res);
}

static void complete(struct rp_loop *l, uint64_t ud, int res, unsigned flags)
{
	struct loop_op *op = (struct loop_op *)(uintptr_t)(ud & ~(uint64_t)TAG_MASK);

	if (!(flags & IORING_CQE_F_MORE)) {
		uring_of(l)->inflight--;
		if (op != NULL)
			op->refs--;
	}
	if (op == NULL)
		return; /* a cancel request's own completion */
	if (op->kind == LOOP_WRITE) {
		write_complete(l, op, res);
		return;
	}
	if ((ud & TAG_MASK) == TAG_LINK || !op->live) {
		rp_loop_op_put(l, op);
		return;
	}
	switch (op->kind) {
	case LOOP_TIMER: timer_complete(l, op, res); break;
	case LOOP_WATCH: watch_complete(l, op, res, flags); break;
	case LOOP_FUTEX: futex_complete(l, op, res); break;
	case LOOP_ACCEPT:
	case LOOP_RECV:
	case LOOP_SEND: sock_complete(l, op, res, (unsigned)(ud & TAG_MASK)); break;
	}
}

/* Run the completions that are ready, until one of them stops the loop. */
static void reap(struct rp_loop *l)
{
	struct uring *u = uring_of(l);
	struct io_uring_cqe *cqe;

	/* Closing: no callback can run, so reap everything (rp_loop_close drains). */
	while ((!l->stop || l->closing) && io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		uint64_t ud = cqe->user_data;
		int res = cqe->res;
		unsigned flags = cqe->flags;

		/* Consumed before the callback, which may queue requests of its own. */
		io_uring_cqe_seen(&u->ring, cqe);
		complete(l, ud, res, flags);
	}
}

/* --- the backend interface --- */

static int uring_init(struct rp_loop *l, unsigned entries)
{
	struct uring *u = calloc(1, sizeof(*u));
	struct rp_probe probe;
	int err = -ENOMEM;

	if (u == NULL)
		return err;
	u->ts = calloc(l->nops, sizeof(*u->ts));
	if (u->ts == NULL)
		goto err_free;
	err = io_uring_queue_init(entries, &u->ring, 0);
	if (err < 0)
		goto err_free;
	rp_probe_run(&probe);
	u->futex_op = probe.uring_futex_wait;
	if (getenv("RINGPROF_LOOP_NO_FUTEX_OP") != NULL &&
	    strcmp(getenv("RINGPROF_LOOP_NO_FUTEX_OP"), "1") == 0)
		u->futex_op = false;
	l->be_priv = u;
	return 0;
err_free:
	free(u->ts);
	free(u);
	return err;
}

static void uring_fini(struct rp_loop *l)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe = sqe_get(u);
	int err;

	/* Backstop for a cancel that found no SQE: cancel whatever is still pending. */
	if (sqe != NULL) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ALL | IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data64(sqe, 0);
		u->inflight++;
	}
	while (u->inflight > 0) {
		err = io_uring_submit_and_wait(&u->ring, 1);
		if (err < 0 && err != -EINTR && err != -EAGAIN && err != -EBUSY)
			break; /* the ring is unusable; queue_exit cancels what is left */
		reap(l);
	}
	io_uring_queue_exit(&u->ring);
	free(u->ts);
	free(u);
	l->be_priv = NULL;
}

static int uring_start(struct rp_loop *l, struct loop_op *op)
{
	switch (op->kind) {
	case LOOP_WATCH: return arm_watch(l, op);
	case LOOP_TIMER: return arm_timeout(l, op, op->timer.next);
	case LOOP_FUTEX:
		return uring_of(l)->futex_op ? arm_futex_op(l, op) : arm_futex_check(l, op);
	case LOOP_WRITE:
		/* RP_LOOP_WRITE_NOW: created, written and renamed in loop.c; the tail. */
		if (op->write->renamed)
			return write_submit(l, op, op->write->sync ? W_FSYNC : W_CLOSE);
		return write_submit(l, op, W_OPEN);
	case LOOP_ACCEPT:
	case LOOP_RECV:
	case LOOP_SEND: return arm_sock(l, op);
	}
	return -EINVAL;
}

static void uring_cancel(struct rp_loop *l, struct loop_op *op)
{
	struct uring *u = uring_of(l);
	struct io_uring_sqe *sqe;

	/* A write's steps are short: let the current one end, then clean up. */
	if (op->refs == 0 || op->kind == LOOP_WRITE) {
		rp_loop_op_put(l, op);
		return;
	}
	sqe = sqe_get(u);
	if (sqe == NULL)
		return; /* the record stays dead until close cancels everything */
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)op | TAG_OP, 0);
	io_uring_sqe_set_data64(sqe, 0);
	u->inflight++;
}

static int uring_iterate(struct rp_loop *l)
{
	int err = io_uring_submit_and_wait(&uring_of(l)->ring, 1);

	/* EINTR: a signal; EBUSY/EAGAIN: completions to reap first. */
	if (err < 0 && err != -EINTR && err != -EAGAIN && err != -EBUSY)
		return err;
	reap(l);
	return 0;
}

const struct loop_backend rp_loop_backend_uring = {
	.name = "io_uring",
	.init = uring_init,
	.fini = uring_fini,
	.start = uring_start,
	.cancel = uring_cancel,
	.iterate = uring_iterate,
};
