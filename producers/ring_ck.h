/* SPDX-License-Identifier: MIT */
/*
 * The bridge between the public ring layout (struct rp_wire_spsc in wire.h, which
 * spells out Concurrency Kit's struct ck_ring so that users need no ck header) and
 * ck itself, which the library and the engine keep using. Every field the two sides
 * share is checked here at compile time: if a ck release moved one, the build stops
 * instead of the wire format changing silently.
 */
#ifndef RP_PRODUCER_RING_CK_H
#define RP_PRODUCER_RING_CK_H

#include <stddef.h>

#include <ck_ring.h>

#include <ringprof/wire.h>

_Static_assert(sizeof(struct ck_ring) == sizeof(struct rp_wire_spsc), "ck_ring size");
_Static_assert(offsetof(struct ck_ring, c_head) == offsetof(struct rp_wire_spsc, c_head),
	       "ck_ring c_head");
_Static_assert(offsetof(struct ck_ring, p_tail) == offsetof(struct rp_wire_spsc, p_tail),
	       "ck_ring p_tail");
_Static_assert(offsetof(struct ck_ring, p_head) == offsetof(struct rp_wire_spsc, p_head),
	       "ck_ring p_head");
_Static_assert(offsetof(struct ck_ring, size) == offsetof(struct rp_wire_spsc, size),
	       "ck_ring size field");
_Static_assert(offsetof(struct ck_ring, mask) == offsetof(struct rp_wire_spsc, mask),
	       "ck_ring mask");

/* The ck view of a descriptor's ring. */
static inline struct ck_ring *rp_ring_ck(struct rp_wire_ring *r)
{
	return (struct ck_ring *)(void *)&r->ring;
}

#endif
