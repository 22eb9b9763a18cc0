// SPDX-License-Identifier: MIT
/*
 * Kernel feature probe for the consumer loop; see probe.h. Each probe asks the
 * kernel directly (io_uring_queue_init, IORING_REGISTER_PROBE, a futex_waitv call
 * that must fail with EINVAL when it exists) rather than reading version numbers,
 * which lie in containers and on backported kernels.
 */
#include <errno.h>
#include <liburing.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "probe.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

static void probe_uring(struct rp_probe *p)
{
	struct io_uring ring;
	struct io_uring_probe *pr;
	int err = io_uring_queue_init(2, &ring, 0);

	p->io_uring_err = err;
	if (err < 0)
		return;
	pr = io_uring_get_probe_ring(&ring);
	if (pr != NULL) {
		p->uring_futex_wait = pr->last_op >= RP_IORING_OP_FUTEX_WAIT &&
				      io_uring_opcode_supported(pr, RP_IORING_OP_FUTEX_WAIT);
		p->uring_futex_waitv = pr->last_op >= RP_IORING_OP_FUTEX_WAITV &&
				       io_uring_opcode_supported(pr, RP_IORING_OP_FUTEX_WAITV);
		io_uring_free_probe(pr);
	}
	io_uring_queue_exit(&ring);
}

static bool tsc_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;

	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return false;
	__get_cpuid(0x80000007u, &a, &b, &c, &d);
	return (d >> 8) & 1u;
#else
	return false;
#endif
}

void rp_probe_run(struct rp_probe *p)
{
	*p = (struct rp_probe){ 0 };
	probe_uring(p);
	/* No waiters and nr_futexes 0: EINVAL if the call exists, ENOSYS if not. */
	p->futex_waitv = syscall(SYS_futex_waitv, NULL, 0, 0, NULL, 0) < 0 && errno != ENOSYS;
	p->tsc_invariant = tsc_invariant();
}

const char *rp_probe_doorbell(const struct rp_probe *p)
{
	if (p->io_uring_err == 0 && p->uring_futex_waitv)
		return "io_uring FUTEX_WAITV (one wait over every segment's doorbell)";
	if (p->io_uring_err == 0 && p->uring_futex_wait)
		return "io_uring FUTEX_WAIT per segment";
	if (p->futex_waitv)
		return "futex_waitv(2) between loop iterations";
	return "timed drain ticks only (no futex wait available)";
}
