/* SPDX-License-Identifier: MIT */
/*
 * The engine's event loop: one io_uring serves timers, file descriptors (signalfd,
 * inotify, pidfds, sockets), doorbell futex waits and whole-file writes. Where
 * io_uring is refused (EPERM/ENOSYS in many containers) the same interface runs on
 * poll(2); the engine's logic never knows which. Single-threaded: every
 * callback runs on the thread in rp_loop_run().
 */
#ifndef RP_ENGINE_LOOP_H
#define RP_ENGINE_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "segment.h" /* RP_WHY_MAX */

struct rp_loop;

struct rp_loop_opts {
	bool force_poll;	/* use the poll(2) backend even if io_uring works */
	unsigned entries;	/* io_uring queue depth; 0 = 256 */
};

/* Called when a watched fd is readable (res = POLLIN mask), a timer fires (res =
 * expirations, >= 1), a futex wait ends (res = 0 woken or value changed, -ETIME
 * timed out), or a file write finishes (res = 0 or -errno). */
typedef void (*rp_loop_fn)(void *ctx, int res);

/**
 * rp_loop_open() - create a loop.
 * @why: set when io_uring was refused and the poll backend is used instead (one line
 *	 for the user, e.g. "io_uring: Operation not permitted; using poll(2)"), or
 *	 on failure. Empty otherwise.
 * @return 0 or -errno.
 */
int rp_loop_open(const struct rp_loop_opts *opts, struct rp_loop **out, char why[RP_WHY_MAX]);

/** rp_loop_close() - release everything; pending operations are cancelled. NULL ok. */
void rp_loop_close(struct rp_loop *l);

/** rp_loop_backend() - "io_uring" or "poll". */
const char *rp_loop_backend(const struct rp_loop *l);

/**
 * rp_loop_watch() - call @fn each time @fd becomes readable, until rp_loop_unwatch.
 * The loop does not read the fd: the callback must, or it fires again.
 * @return a watch id >= 0, or -errno.
 */
int rp_loop_watch(struct rp_loop *l, int fd, rp_loop_fn fn, void *ctx);

/** rp_loop_unwatch() - stop watching (the fd is not closed). @return 0 or -ENOENT. */
int rp_loop_unwatch(struct rp_loop *l, int id);

/**
 * rp_loop_timer() - call @fn every @interval_ns until rp_loop_cancel_timer.
 * @return a timer id >= 0, or -errno.
 */
int rp_loop_timer(struct rp_loop *l, uint64_t interval_ns, rp_loop_fn fn, void *ctx);
int rp_loop_cancel_timer(struct rp_loop *l, int id);

/**
 * rp_loop_futex_wait() - one-shot: call @fn once *@word != @val or after a wake on
 * @word (a shared futex: FUTEX_WAKE from another process), or after @timeout_ns.
 * io_uring backend: IORING_OP_FUTEX_WAIT where the kernel has it; otherwise, and on
 * the poll backend, the loop re-checks the word at least every millisecond and
 * at the timeout (the doorbell then only shortens waits, as designed).
 * @return 0 or -errno.
 */
int rp_loop_futex_wait(struct rp_loop *l, uint32_t *word, uint32_t val, uint64_t timeout_ns,
		       rp_loop_fn fn, void *ctx);

/**
 * rp_loop_write_file() - write @len bytes of @buf to @path whole or not at all:
 * "<path>.tmp.<pid>", write, fsync, rename over @path; then @fn(ctx, 0 or -errno).
 * @buf must stay valid until @fn runs. On io_uring every step is asynchronous.
 */
int rp_loop_write_file(struct rp_loop *l, const char *path, const void *buf, size_t len,
		       rp_loop_fn fn, void *ctx);

/* rp_loop_write_file_flags(): the file is renamed into place within the call. */
#define RP_LOOP_WRITE_NOW 0x1u

/**
 * rp_loop_write_file_flags() - rp_loop_write_file(), or with RP_LOOP_WRITE_NOW: create
 * "<path>.tmp.<pid>...", write it all and rename it over @path within the call, in the
 * loop's thread (no loop turn in between: @path holds the whole file when it returns
 * 0, and @buf is not used afterwards); then fsync it, off the thread on io_uring,
 * unless its file system keeps nothing across a crash anyway (tmpfs, ramfs), close
 * it, and @fn(ctx, 0 or -errno) says how that ended. The rename before the fsync
 * means a machine crash in between can leave @path empty or partial on a file system
 * that does not write a renamed file's data first (ext4 does, auto_da_alloc; XFS
 * need not); without the flag, the fsync comes first. Another write to the same
 * @path may start once this one has renamed. @return 0, or -errno with @fn never
 * called (@path unchanged unless the error came after the rename: no request left
 * for the fsync).
 */
int rp_loop_write_file_flags(struct rp_loop *l, const char *path, const void *buf, size_t len,
			     unsigned flags, rp_loop_fn fn, void *ctx);

/**
 * rp_loop_clean_temps() - remove the temporary files a writer of @path left when it
 * died mid-write (SIGKILL between create and rename): "<path>.tmp.<pid>" (one-shot
 * writers, rp_snapshot_write_file) and "<path>.tmp.<pid>.<n>.<8 hex>" (this loop),
 * and only those that are regular files of our uid whose <pid> no longer runs.
 * @bytes: if not NULL, set to the bytes they held.
 * @return how many were removed, or -errno when the directory cannot be read.
 */
int rp_loop_clean_temps(const char *path, uint64_t *bytes);

/*
 * Socket operations, one-shot: @fn(ctx, res) once, res = the accepted fd (accept),
 * the byte count (recv: 0 = the peer closed; send: 1..len, maybe short) or -errno.
 * On io_uring they are IORING_OP_ACCEPT/RECV/SEND (an -EAGAIN from a nonblocking
 * socket re-arms a poll and tries again); on poll(2) the nonblocking call is made
 * once poll says the fd is ready. Neither backend ever blocks the loop on a slow
 * peer: a send that cannot progress just stays pending. @buf must stay valid until
 * @fn runs. There is no cancel: shutdown(2) the socket, and the pending operation
 * completes (recv 0, send -EPIPE, accept -EINVAL) and calls back; rp_loop_close
 * ends whatever is left without calling back. Accepted fds are O_NONBLOCK and
 * O_CLOEXEC; sends use MSG_NOSIGNAL (no SIGPIPE).
 * @return an id >= 0, or -errno (-EBUSY: no record free).
 */
int rp_loop_accept(struct rp_loop *l, int fd, rp_loop_fn fn, void *ctx);
int rp_loop_recv(struct rp_loop *l, int fd, void *buf, size_t len, rp_loop_fn fn, void *ctx);
int rp_loop_send(struct rp_loop *l, int fd, const void *buf, size_t len, rp_loop_fn fn,
		 void *ctx);

/** rp_loop_run() - run callbacks until rp_loop_stop(). @return 0 or -errno. */
int rp_loop_run(struct rp_loop *l);

/** rp_loop_stop() - make rp_loop_run return after the current callback. */
void rp_loop_stop(struct rp_loop *l);

#endif
