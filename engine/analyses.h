/* SPDX-License-Identifier: MIT */
/*
 * The streaming analyses fed by every span the stack machine opens and closes:
 * concurrency sweeps (overall, roots = requests in flight, and per category),
 * per-name duration sketches, and each call's concurrency at its midpoint.
 *
 * Bounded: at most RP_ANALYSES_MAX_CATEGORIES category sweeps (later categories
 * share "[other]"); sketches for the first max_sketch_names names that complete a
 * call (later names report no quantiles); sweep levels capped at 65535; the overall
 * sweep keeps the last 65536 change points for midpoints (older ones are unknown).
 * Worst case: max_sketch_names x 36 KB of sketches, 24 B per name, and per sweep
 * 512 KB of levels plus 768 KB of history for the overall one.
 */
#ifndef RP_ENGINE_ANALYSES_H
#define RP_ENGINE_ANALYSES_H

#include <stdint.h>

#include "names.h"
#include "report.h"
#include "sketch.h"
#include "sweep.h"

#define RP_ANALYSES_MAX_CATEGORIES 64
#define RP_ANALYSES_MAX_LEVEL 65535
#define RP_ANALYSES_HISTORY 65536

struct rp_analyses {
	const struct rp_names *names;
	struct rp_sweep overall, roots;
	struct rp_sweep cat[RP_ANALYSES_MAX_CATEGORIES];
	const char *cat_name[RP_ANALYSES_MAX_CATEGORIES];
	uint32_t n_cat;
	uint8_t *cat_of;		/* per name: category index + 1; 0 = not yet seen */
	struct rp_sketch **sketch;	/* per name, made at its first completed call */
	uint32_t n_sketch, max_sketch;
	uint64_t *mid_sum, *mid_count;	/* per name */
	uint32_t max_names;
};

int rp_analyses_init(struct rp_analyses *a, const struct rp_names *names, uint32_t max_names,
		     uint32_t max_sketch_names);
void rp_analyses_fini(struct rp_analyses *a);

/* A span of @name opened at depth @depth (0: a root) at time @t. */
void rp_analyses_open(struct rp_analyses *a, uint32_t name, uint32_t depth, uint64_t t);

/* The span closed at @end (its open was fed at @start). */
void rp_analyses_close(struct rp_analyses *a, uint32_t name, uint32_t depth, uint64_t start,
		       uint64_t end);

/* Fills the report's per-function quantiles and midpoints (@map: name id -> row, or
 * RP_NONE) and its concurrency distributions. @return 0 or -ENOMEM. */
int rp_analyses_report(const struct rp_analyses *a, const uint32_t *map, struct rp_report *r);

#endif
