/* SPDX-License-Identifier: MIT */
/*
 * Test helpers: cmocka includes in the order cmocka 1.1.5 needs, and a consumer
 * view of this process's own segment.
 */
#ifndef RP_TEST_SUPPORT_H
#define RP_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ringprof/ringprof.h>

#include "segment.h"

/* Initialises the producer and opens its segment as a consumer would. */
static inline struct rp_segment *rp_test_open_self(void)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s = NULL;

	if (rp_init() != 0 || rp_segment_path() == NULL)
		fail_msg("rp_init failed");
	if (rp_segment_open(rp_segment_path(), &s, why) != 0)
		fail_msg("rp_segment_open: %s", why);
	return s;
}

static inline struct rp_wire_ring *rp_test_ring(struct rp_segment *s, uint32_t i)
{
	return (struct rp_wire_ring *)((char *)s->base + s->v.ring_desc_offset) + i;
}

static inline struct rp_wire_header *rp_test_hdr(struct rp_segment *s)
{
	return s->base;
}

static inline int rp_test_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

#endif
