// SPDX-License-Identifier: MIT
/*
 * Self-healing nesting: the producer's slow paths for the shadow of open spans.
 *
 * A thread's depth is rp_begin minus rp_end; after a longjmp out of open spans it
 * would only grow, and the engine's stack with it, until every span is past the
 * depth cap. The shadow keeps, per open level, the span's name and the innermost
 * known frame below it (ftop before it opened; ringprof.h), so that:
 *  - an END whose name is below the top pops to that level (rp_heal_name), as the
 *    engine's stack does by name; its record carries the healed depth;
 *  - a scope or ringprof-auto record made from a frame shallower than the innermost
 *    known open frame pops the levels opened in deeper frames (rp_heal_frame):
 *    their functions were left without their END.
 * Spans nest, so a level above a known frame ends before that frame's function
 * returns: levels of unknown frame (plain rp_begin) go with the frame below them.
 * The engine follows the depth the records carry (engine.c, realign), counting what
 * was cut as truncated under one end_mismatch.
 *
 * Frames heal only on the thread's own stack, its bounds learned at the ring claim
 * (pthread_getattr_np): a frame on a sigaltstack handler's stack, a fiber's or a
 * ucontext's never pops, and is never popped by frame.
 *
 * Memory: RP_SHADOW levels of 16 bytes and one bounds pair per ring, calloc'ed once
 * per process with the segment (not TLS: the Python extension's initial-exec TLS
 * comes from glibc's small static surplus).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "shadow.h"

struct bounds {
	uintptr_t lo, hi;	/* the thread's stack: [lo, hi); 0, 0: unknown */
};

static struct {
	struct rp_shadow *lv;	/* rings x RP_SHADOW */
	struct bounds *b;	/* per ring */
	uint32_t rings;
} sh;

int rp_shadow_alloc(uint32_t rings)
{
	if (sh.lv != NULL && sh.rings == rings)
		return 0; /* a fork child: the parent's slices, its own copy */
	free(sh.lv);
	free(sh.b);
	sh.lv = calloc((size_t)rings * RP_SHADOW, sizeof(*sh.lv));
	sh.b = calloc(rings, sizeof(*sh.b));
	sh.rings = rings;
	if (sh.lv == NULL || sh.b == NULL) {
		free(sh.lv);
		free(sh.b);
		sh.lv = NULL;
		sh.b = NULL;
		sh.rings = 0;
		return -ENOMEM;
	}
	return 0;
}

static void learn_stack(struct bounds *b)
{
	pthread_attr_t a;
	void *addr;
	size_t size;

	b->lo = b->hi = 0;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &addr, &size) == 0) {
		b->lo = (uintptr_t)addr;
		b->hi = (uintptr_t)addr + size;
	}
	pthread_attr_destroy(&a);
}

void rp_shadow_attach(struct rp_thread *t, uint32_t idx)
{
	struct rp_shadow *lv;
	uint32_t known;

	if (sh.lv == NULL || idx >= sh.rings)
		return;
	lv = &sh.lv[(size_t)idx * RP_SHADOW];
	learn_stack(&sh.b[idx]);
	/* Levels opened before this claim (no ring then): their names are unknown,
	 * so nothing heals through them. */
	known = t->depth < RP_SHADOW ? t->depth : RP_SHADOW;
	for (uint32_t i = 0; i < known; i++)
		lv[i] = (struct rp_shadow){ .name = RP_SHADOW_UNKNOWN, .below = UINTPTR_MAX };
	t->ftop = UINTPTR_MAX;
	t->shadow = lv;
	t->scap = RP_SHADOW;
}

void rp_shadow_detach(struct rp_thread *t)
{
	t->scap = 0;
	t->shadow = NULL;
	t->ftop = UINTPTR_MAX;
}

static const struct bounds *bounds_of(const struct rp_thread *t)
{
	return &sh.b[(size_t)(t->shadow - sh.lv) / RP_SHADOW];
}

static bool on_stack(const struct bounds *b, uintptr_t x)
{
	return x >= b->lo && x < b->hi;
}

bool rp_shadow_on_stack(const struct rp_thread *t, uintptr_t sp)
{
	return t->scap != 0 && on_stack(bounds_of(t), sp);
}

/*
 * A span record from a frame @probe: pop the levels whose frame is strictly deeper
 * (ftop < probe), then at @probe itself a level of the same opener (@obj, not 0) as
 * the new BEGIN: the same scope object, or the same entry hook call site, in the
 * same frame, is a new activation of it (two live ones never share a frame), while
 * other scopes of the function, and functions inlined into it (their hooks are
 * called from its frame, at other sites), are kept. Only on this thread's stack,
 * and only while the levels are shadowed.
 */
void rp_heal_frame(struct rp_thread *t, uintptr_t probe, uint32_t obj)
{
	uint16_t d = t->depth;
	const struct bounds *b;

	if (t->scap == 0 || d > t->scap)
		return;
	b = bounds_of(t);
	if (probe <= b->lo || probe > b->hi)
		return;
	while (d > 0 && on_stack(b, t->ftop) &&
	       (t->ftop < probe ||
		(t->ftop == probe && obj != 0 && t->shadow[d - 1].obj == obj))) {
		d--;
		t->ftop = t->shadow[d].below;
	}
	t->depth = d;
}

/*
 * rp_end(@name) whose name is not the top level's (1 <= depth <= scap): pop to the
 * innermost level of that name; the END carries its depth. A name open nowhere
 * leaves the depth as it is (the engine counts the END unmatched and keeps its
 * stack too); a level of unknown name on the way decrements as without a shadow.
 */
uint16_t rp_heal_name(struct rp_thread *t, uint32_t name)
{
	uint16_t d = t->depth;

	for (int i = d - 1; i >= 0; i--) {
		uint32_t n = t->shadow[i].name;

		if (n == RP_SHADOW_UNKNOWN)
			break;
		if (n == name) {
			t->depth = (uint16_t)i;
			t->ftop = t->shadow[i].below;
			return (uint16_t)i;
		}
		if (i == 0)
			return (uint16_t)(d - 1); /* open nowhere: depth kept */
	}
	t->depth = (uint16_t)(d - 1);
	t->ftop = t->shadow[d - 1].below;
	return (uint16_t)(d - 1);
}
