/* SPDX-License-Identifier: MIT */
/*
 * Private to the loop: the record each operation lives in, the loop object and the
 * interface both backends implement (loop_uring.c on io_uring, loop_poll.c on poll(2)).
 * loop.c holds what they share: the fixed pool of records, operation ids,
 * timer and futex arithmetic, and the one rule about callbacks.
 *
 * The rule: a record reaches its callback only while it is live. A record stops being
 * live when the user cancels it, when a one-shot operation completes (just before its
 * callback runs) and when the loop closes; its generation changes at that moment, so
 * a stale id no longer finds it. It goes back to the free list once it is not live and
 * no backend request refers to it any more (refs counts io_uring requests whose
 * completion names the record in user_data; poll(2) never holds any), so a late
 * completion always finds the record it names, dead, and drops it.
 *
 * Memory is fixed at rp_loop_open: 2 * cap records (cap = live operations at most;
 * the slack holds cancelled records whose io_uring completions are still on their
 * way) and RP_LOOP_WRITES slots holding the paths of file writes.
 */
#ifndef RP_ENGINE_LOOP_BACKEND_H
#define RP_ENGINE_LOOP_BACKEND_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "loop.h"

#define RP_LOOP_ENTRIES_DEFAULT	 256u
#define RP_LOOP_ENTRIES_MIN	 4u
#define RP_LOOP_ENTRIES_MAX	 4096u	    /* ids keep the record index in 16 bits */
#define RP_LOOP_WRITES		 4u	    /* file writes in flight at once */
#define RP_LOOP_FUTEX_RECHECK_NS 1000000ull /* futex fallbacks re-check every 1 ms */

enum loop_kind {
	LOOP_FREE,
	LOOP_WATCH,
	LOOP_TIMER,
	LOOP_FUTEX,
	LOOP_WRITE,
	LOOP_ACCEPT, /* the socket operations: op->sock */
	LOOP_RECV,
	LOOP_SEND,
};

static inline bool loop_kind_sock(unsigned kind)
{
	return kind == LOOP_ACCEPT || kind == LOOP_RECV || kind == LOOP_SEND;
}

/* One whole-file write: the paths live here so that no write allocates. */
struct loop_write {
	const char *buf; /* the caller's, valid until the callback */
	size_t len;
	size_t done;	 /* bytes written so far */
	int fd;		 /* the temporary file while this loop owns it, else -1 */
	int err;	 /* first failure, reported once the clean-up is done */
	unsigned step;	 /* the backend's position in the chain */
	bool tmp_exists; /* the temporary file may exist: unlink it on failure */
	bool renamed;	 /* RP_LOOP_WRITE_NOW: at @path already, fd open for the tail */
	bool sync;	 /* the tail fsyncs (not on tmpfs or ramfs) */
	bool used;
	char path[PATH_MAX];
	char tmp[PATH_MAX];
};

struct loop_op {
	rp_loop_fn fn;
	void *ctx;
	uint8_t kind;  /* enum loop_kind */
	bool live;     /* the callback may still run */
	uint16_t gen;  /* 15 bits, in the id; changes when the record dies */
	uint16_t refs; /* backend requests in flight naming this record */
	uint32_t next_free;
	union {
		int fd; /* LOOP_WATCH */
		struct {
			uint64_t interval; /* ns, > 0 */
			uint64_t next;	   /* CLOCK_MONOTONIC ns of the next tick */
		} timer;		   /* LOOP_TIMER */
		struct {
			uint32_t *word;
			uint32_t val;
			uint64_t deadline; /* CLOCK_MONOTONIC ns */
		} futex;		   /* LOOP_FUTEX */
		struct loop_write *write;  /* LOOP_WRITE */
		struct {
			int fd;
			void *buf; /* the caller's; NULL for accept */
			size_t len;
		} sock; /* LOOP_ACCEPT, LOOP_RECV, LOOP_SEND */
	};
};

struct loop_backend {
	const char *name;
	/* Set up l->be_priv for at most l->nops records. @return 0 or -errno. */
	int (*init)(struct rp_loop *l, unsigned entries);
	/* Every record is dead: wait until no request refers to one, free be_priv. */
	void (*fini)(struct rp_loop *l);
	/* Begin a new, live operation. On failure nothing refers to @op. @return 0/-errno */
	int (*start)(struct rp_loop *l, struct loop_op *op);
	/* @op has just died: stop its requests; rp_loop_op_put() it when none is left. */
	void (*cancel)(struct rp_loop *l, struct loop_op *op);
	/* Sleep until something is due, then run what is due. @return 0 or -errno. */
	int (*iterate)(struct rp_loop *l);
};

struct rp_loop {
	const struct loop_backend *be;
	void *be_priv;
	struct loop_op *ops; /* nops records */
	uint32_t nops;
	uint32_t cap; /* live operations at most */
	uint32_t nlive;
	uint32_t free_head; /* index, or UINT32_MAX when empty */
	struct loop_write writes[RP_LOOP_WRITES];
	bool stop;
	bool running; /* inside rp_loop_run */
	bool closing; /* rp_loop_close ran inside a callback: free on return */
};

extern const struct loop_backend rp_loop_backend_uring;
extern const struct loop_backend rp_loop_backend_poll;

/* CLOCK_MONOTONIC in ns. */
uint64_t rp_loop_now(void);

/* Return a dead record nothing refers to any more to the free list. */
void rp_loop_op_put(struct rp_loop *l, struct loop_op *op);

/* A one-shot operation completed: the record dies, then the callback gets @res. */
void rp_loop_op_finish(struct rp_loop *l, struct loop_op *op, int res);

/*
 * A repeating operation fired: call back with @res if the record is live.
 * @return true if the same operation is still live afterwards (re-arm it).
 */
bool rp_loop_op_notify(struct rp_loop *l, struct loop_op *op, int res);

/* Expirations due at @now (>= 1); advances timer.next past @now. */
int rp_loop_timer_expire(struct loop_op *op, uint64_t now);

/*
 * Look at a futex wait's word. @return 0 if it differs from the expected value,
 * -ETIME if @now is past the deadline, else -EAGAIN with *@next = when to look again.
 */
int rp_loop_futex_check(const struct loop_op *op, uint64_t now, uint64_t *next);

/*
 * The nonblocking call of a socket operation, for the poll backend.
 * @return its result, or -EAGAIN when it would block (try again once ready).
 */
int rp_loop_sock_try(const struct loop_op *op);

/* POLLIN or POLLOUT: what a socket operation waits for. */
short rp_loop_sock_events(const struct loop_op *op);

/* Synchronous clean-up of an abandoned write: close the fd, unlink the temp file. */
void rp_loop_write_discard(struct loop_write *w);

/* write(2) all of @buf to @fd. @return 0 or -errno. */
int rp_loop_write_all(int fd, const char *buf, size_t len);

/*
 * RP_LOOP_WRITE_NOW's first half, in the caller's thread: create the temporary file,
 * write it all, rename it over the path; w->fd stays open for the tail (fsync if
 * w->sync, close), which the backend runs. @return 0, or -errno with nothing left.
 */
int rp_loop_write_now(struct loop_write *w);

#endif
