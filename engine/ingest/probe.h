/* SPDX-License-Identifier: MIT */
/*
 * What the running kernel offers the consumer's loop: io_uring at all (containers
 * often refuse it with EPERM or ENOSYS), futex operations inside io_uring (the
 * doorbell wait without a thread of its own: kernel 6.7+), and futex_waitv(2)
 * (one wait on many producers' doorbells: kernel 5.16+). Probed once at start.
 */
#ifndef RP_ENGINE_PROBE_H
#define RP_ENGINE_PROBE_H

#include <stdbool.h>

/* Opcodes newer than the liburing headers this builds against (kernel uapi values). */
#define RP_IORING_OP_FUTEX_WAIT  51
#define RP_IORING_OP_FUTEX_WAKE  52
#define RP_IORING_OP_FUTEX_WAITV 53

struct rp_probe {
	int io_uring_err;	/* 0 if io_uring_queue_init worked, else -errno */
	bool uring_futex_wait;	/* IORING_OP_FUTEX_WAIT supported */
	bool uring_futex_waitv;	/* IORING_OP_FUTEX_WAITV supported */
	bool futex_waitv;	/* the futex_waitv syscall exists */
	bool tsc_invariant;	/* cpuid: invariant TSC */
};

/* Fills @p. Never fails: what cannot be probed reads as absent. */
void rp_probe_run(struct rp_probe *p);

/* The doorbell wait the loop will use, in words: "io_uring FUTEX_WAITV", ... */
const char *rp_probe_doorbell(const struct rp_probe *p);

#endif
