/* SPDX-License-Identifier: MIT */
/*
 * The producer's shadow of each thread's open spans (private memory, one slice of
 * RP_SHADOW levels per ring) and the stack bounds that decide when a frame may
 * heal; see shadow.c and docs/producer.md, "Self-healing nesting".
 */
#ifndef RP_PRODUCER_SHADOW_H
#define RP_PRODUCER_SHADOW_H

#include <stdint.h>

#include <ringprof/ringprof.h>

/* One slice per ring, once per process (a fork child keeps the parent's); -ENOMEM:
 * threads get no shadow and heal nothing, the rest works. */
int rp_shadow_alloc(uint32_t rings);

/* At a ring claim (ring @idx) and at thread exit; rp_shadow_none() before any. */
void rp_shadow_attach(struct rp_thread *t, uint32_t idx);
void rp_shadow_detach(struct rp_thread *t);

/* @sp lies on this thread's own stack (known once it has a ring). */
bool rp_shadow_on_stack(const struct rp_thread *t, uintptr_t sp);

static inline void rp_shadow_none(struct rp_thread *t)
{
	if (t->scap == 0)
		t->ftop = UINTPTR_MAX;
}

#endif
