/* SPDX-License-Identifier: MIT */
/*
 * The producer's summaries of short calls (docs/summaries.md): per-ring private
 * state and the hooks of the library's slow paths; see summary.c.
 */
#ifndef RP_PRODUCER_SUMMARY_H
#define RP_PRODUCER_SUMMARY_H

#include <stdint.h>

#include <ringprof/ringprof.h>

/* A doubled threshold stops here (a full ring); and the periodic flush's period. */
#define RP_SUM_THR_MAX_NS	(UINT64_C(10) * 1000 * 1000)
#define RP_SUM_PERIOD_NS	(UINT64_C(100) * 1000 * 1000)

/* Once per process with the segment, with its clock (which outlives it); @thr_ns 0:
 * off for every thread (nothing allocated until a fine name's first BEGIN, whose
 * threshold is @fine_ns; 0: off too). -ENOMEM: summaries off, every call a span. */
int rp_sum_alloc(uint32_t rings, uint64_t thr_ns, uint64_t fine_ns,
		 const struct rp_wire_clock *c);

/* At a ring claim, after rp_shadow_attach(): summaries on for @t if they are. */
void rp_sum_attach(struct rp_thread *t, uint32_t idx, const struct rp_wire_clock *c);

/* A fine name's BEGIN on @t (which has ring @idx) with summaries off: on, if they can
 * be (true); else false and t->nofine set. */
bool rp_sum_fine_on(struct rp_thread *t, uint32_t idx, const struct rp_wire_clock *c);

/* At thread exit and at the process's exit path: what is folded is written. */
void rp_sum_exit(struct rp_thread *t);

#endif
