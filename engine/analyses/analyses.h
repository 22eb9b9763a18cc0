/* SPDX-License-Identifier: MIT */
/*
 * The streaming analyses fed by every span the stack machine opens and closes:
 * concurrency sweeps (overall; roots: spans open at depth 0 on any track, requests
 * and a batching loop's spans alike; requests: request spans only (rp_is_request(),
 * the roots of async tracks), exactly the requests in flight; per category),
 * per-name and per-category duration sketches, each call's concurrency at its
 * midpoint, rolling windows (window.h), the slowest spans, and counters.
 *
 * A closed span goes to the finest window's current sub-window (window.h); when that
 * sub-window ends, its entries' sketches are merged into the all-time per-name and
 * per-category sketches and its slowest spans into the all-time ones (bucket-exact,
 * so the same as adding each duration). Spans whose name has no room in the
 * sub-window, and every span when no window is configured, are added directly.
 * Reports merge the current sub-window in.
 *
 * Bounded: at most RP_ANALYSES_MAX_CATEGORIES category sweeps (later categories
 * share "[other]"); max_sketch_names all-time duration sketches, given to the names
 * that are active (below); max_counters counter names
 * (later ones counted as RP_ANOM_COUNTER_CAP); sweep levels capped at 65535; the
 * overall sweep keeps the last 65536 change points for midpoints (older ones are
 * unknown). rp_analyses_memory_bound() gives the worst case.
 *
 * Sketch slots go to what is active (a segmented LRU, scan-resistant): a name gets a
 * sketch when its first spans reach the all-time figures; with all max_sketch_names
 * in use, it takes the sketch of the least recently active name among those seen in
 * one batch only (probation: a finest sub-window, or one span without windows), else
 * among the rest (protected: seen again, or with several calls in its first batch).
 * So an import burst of names called once churns probation and the hot names that
 * follow it keep complete sketches. An evicted name reports no quantiles from then on
 * (its sketch lost values: a partial one would be a wrong number) and is counted
 * (RP_ANOM_SKETCH_EVICTED); its calls and times stay exact. A full sub-window table
 * evicts too (window.h); the finest one's victims reach the all-time figures first.
 */
#ifndef RP_ENGINE_ANALYSES_H
#define RP_ENGINE_ANALYSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "report.h"
#include "sketch.h"
#include "stacks.h"
#include "sweep.h"
#include "topk.h"
#include "window.h"

#define RP_ANALYSES_MAX_CATEGORIES 64
#define RP_ANALYSES_MAX_LEVEL 65535
#define RP_ANALYSES_HISTORY 65536

/* Per category: its spans' durations. */
struct rp_cat_stats {
	uint64_t calls, self_ns, total_ns;
	struct rp_sketch dur;
};

/* Per name: the overall level at its spans' midpoints, summed, and how many were
 * known; side by side, so a close touches one line. */
struct rp_mid {
	uint64_t sum, count;
};

/* Per counter name (RP_EV_COUNTER): its values. */
struct rp_counter_stats {
	uint32_t name;
	uint64_t samples, last_ts;
	int64_t last, min, max;
	struct rp_sketch values;
};

struct rp_analyses {
	const struct rp_names *names;
	struct rp_sweep overall, roots, requests;
	struct rp_sweep cat[RP_ANALYSES_MAX_CATEGORIES];
	const char *cat_name[RP_ANALYSES_MAX_CATEGORIES];
	struct rp_cat_stats cats[RP_ANALYSES_MAX_CATEGORIES];
	uint32_t n_cat;
	uint8_t *cat_of;		/* per name: category index + 1; 0 = not yet seen */
	struct rp_sketch **sketch;	/* per name, made at its first completed call */
	uint32_t n_sketch, max_sketch;
	uint32_t *lru_prev, *lru_next;	/* per name: its sketch's place in its list */
	uint8_t *lru_list;		/* per name: enum rp_lru_state */
	uint32_t lru_head[2], lru_tail[2]; /* probation, protected: newest .. oldest */
	uint64_t sketch_evicted;	/* RP_ANOM_SKETCH_EVICTED */
	struct rp_mid *mid;		/* per name */
	uint32_t max_names;

	/* Rolling windows (window.h); the finest one's sub-window boundary. */
	struct rp_windows win;
	uint64_t next;			/* end of the finest current sub-window; UINT64_MAX */
	uint64_t *prev[2];		/* overall, roots sweep levels at the last rotation */
	uint32_t n_prev[2];
	uint64_t t_hi;			/* the latest time tracks were closed at */
	struct rp_slowest slow;		/* all time (the finest window folds into it) */

	/* Counters: per name id the row + 1, rows up to max_counters. */
	uint32_t *counter_of;
	struct rp_counter_stats *counters;
	uint32_t n_counters, max_counters;
};

/* A name's sketch slot: none yet, in a list, or evicted for good. */
enum rp_lru_state { RP_LRU_NONE, RP_LRU_PROBATION, RP_LRU_PROTECTED, RP_LRU_EVICTED };

/* What rp_analyses_init needs beyond the names. */
struct rp_analyses_cfg {
	uint32_t max_names, max_sketch_names, max_counters;
	struct rp_window_cfg win;
};

/* Worst-case bytes of the analyses at these caps (without the windows' share:
 * rp_windows_memory_bound()). */
size_t rp_analyses_memory_bound(const struct rp_analyses_cfg *c);

/* @return 0, -EINVAL (bad window config) or -ENOMEM. */
int rp_analyses_init(struct rp_analyses *a, const struct rp_names *names,
		     const struct rp_analyses_cfg *c);
void rp_analyses_fini(struct rp_analyses *a);

struct rp_sweep *rp_analyses_cat_new(struct rp_analyses *a, uint32_t name);

/*
 * The category of a name: its index in cat[] + 1, looked up once per name (0: no sweep
 * could be made). A caller that keeps it from a span's open to its close (the stack
 * machine's frame) passes it to the _cat variants below instead of a lookup at each.
 */
static inline uint32_t rp_analyses_cat_index(struct rp_analyses *a, uint32_t name)
{
	uint32_t c = a->cat_of[name];

	if (__builtin_expect(c == 0, 0) && rp_analyses_cat_new(a, name) != NULL)
		c = a->cat_of[name];
	return c;
}

/* The sweep of category @ci != 0 (cat[ci - 1]), from the analyses' address in one
 * multiply-add: cat[] is not the first member, so the bias stays inside the struct. */
static inline struct rp_sweep *rp_analyses_cat_at(struct rp_analyses *a, uint32_t ci)
{
	return (struct rp_sweep *)(void *)((char *)a + offsetof(struct rp_analyses, cat) -
					   sizeof(struct rp_sweep) +
					   (size_t)ci * sizeof(struct rp_sweep));
}

/* The category sweep of a name (looked up once per name); NULL if none. */
static inline struct rp_sweep *rp_analyses_cat_sweep(struct rp_analyses *a, uint32_t name)
{
	uint32_t c = a->cat_of[name];

	return c != 0 ? &a->cat[c - 1] : rp_analyses_cat_new(a, name);
}

/* rp_analyses_open() and rp_analyses_close_sweeps() at a time not after the overall
 * sweep's latest (equal, or a late record's): the span's sweeps by their general
 * steps, and for a close the midpoint's level (analyses.c), as the inline paths. */
__attribute__((noinline)) void rp_analyses_open_late(struct rp_analyses *a, struct rp_sweep *c,
						     uint32_t depth, uint64_t t, bool request);
__attribute__((noinline)) bool rp_analyses_close_late(struct rp_analyses *a, uint32_t ci,
						      const struct rp_span_info *sp,
						      uint32_t *level);

/*
 * A span of category @ci (rp_analyses_cat_index()) opened at depth @depth (0: a root)
 * at time @t. Inline: one call per span less on the hot path. The sweeps are a group
 * (sweep.h) led by the overall one: it sees every event the others see, at the same
 * times, and the rotation accrues it with the roots, so no sweep's last_t passes its;
 * a time after it is after every sweep's, and none tests its own.
 */
static inline void rp_analyses_open_cat(struct rp_analyses *a, uint32_t ci, uint32_t depth,
					uint64_t t, bool request)
{
	if (__builtin_expect(t > a->overall.last_t, 1)) { /* after every sweep's last_t */
		if (__builtin_expect(ci != 0, 1))
			rp_sweep_open_member(rp_analyses_cat_at(a, ci), t);
		if (depth == 0)
			rp_sweep_open_member(&a->roots, t);
		if (request)
			rp_sweep_open_member(&a->requests, t);
		rp_sweep_open_lead(&a->overall, t);
	} else {
		rp_analyses_open_late(a, ci != 0 ? &a->cat[ci - 1] : NULL, depth, t, request);
	}
}

/* The same for a span of @name; @return its category for the _cat variants. */
static inline uint32_t rp_analyses_open(struct rp_analyses *a, uint32_t name, uint32_t depth,
					uint64_t t, bool request)
{
	uint32_t ci = rp_analyses_cat_index(a, name);

	rp_analyses_open_cat(a, ci, depth, t, request);
	return ci;
}

/* A span opened here that will never close (a drop cut it): it leaves the sweeps at
 * @t and goes nowhere else, so no window, sketch or slowest list sees a guess. */
static inline void rp_analyses_abandon_cat(struct rp_analyses *a, uint32_t ci, uint32_t depth,
					   uint64_t t, bool request)
{
	rp_sweep_close_hist(&a->overall, t);
	if (ci != 0)
		rp_sweep_close_levels(&a->cat[ci - 1], t);
	if (depth == 0)
		rp_sweep_close_levels(&a->roots, t);
	if (request)
		rp_sweep_close_levels(&a->requests, t);
}

static inline void rp_analyses_abandon(struct rp_analyses *a, uint32_t name, uint32_t depth,
				       uint64_t t, bool request)
{
	rp_analyses_abandon_cat(a, rp_analyses_cat_index(a, name), depth, t, request);
}

/* rp_analyses_close()'s out-of-line parts (analyses.c): a span among the slowest
 * so far into @sl; a close without windows but its slowest list (its name's sketch
 * and category: a span of @dur ns, @self_ns its own); a name with no room in the
 * finest sub-window. */
__attribute__((noinline)) void rp_analyses_keep_slow(struct rp_slowest *sl,
						     const struct rp_span_info *sp, uint32_t ci,
						     uint32_t level, bool known);
__attribute__((noinline)) void rp_analyses_close_direct(struct rp_analyses *a, uint32_t name,
							uint32_t ci, uint64_t self_ns,
							uint64_t dur);
__attribute__((noinline)) void
rp_analyses_close_overflow(struct rp_analyses *a, const struct rp_span_info *sp, uint32_t ci);
/* A full finest sub-window: an entry for @name in place of a candidate (called once,
 * or at import time) or of a quieter entry (window.h), its figures to the all-time
 * ones and the summaries first; or NULL. */
__attribute__((noinline)) struct rp_wentry *rp_analyses_evict(struct rp_analyses *a,
							      uint32_t name);

/* The out-of-line calls below take a copy of the span made on their own path, so
 * that the span a close is given need not live in memory on the common path. */
static inline void rp_analyses_offer_slow(struct rp_slowest *sl, const struct rp_span_info *sp,
					  uint32_t ci, uint32_t level, bool known)
{
	if (sp->end - sp->start >= sl->floor_ns) {
		struct rp_span_info c = *sp;

		rp_analyses_keep_slow(sl, &c, ci, level, known); /* else: not among them */
	}
}

/*
 * A span closed (its open was fed), its first part: to the overall sweep, its
 * category's (@ci, as rp_analyses_cat_index() gives it), for a root the roots sweep
 * and for a request the requests sweep; the overall level at its midpoint (after the
 * close is fed, as sweep.h requires) into its name's midpoint sum. Sets *@level to the
 * midpoint's level (0 if unknown); @return whether that level is known.
 */
static inline bool rp_analyses_close_sweeps_cat(struct rp_analyses *a,
						const struct rp_span_info *sp, uint32_t ci,
						uint32_t *level)
{
	uint64_t t = sp->end;
	uint32_t lv;
	bool known;

	if (__builtin_expect(t > a->overall.last_t, 1)) { /* as rp_analyses_open() */
		if (__builtin_expect(ci != 0, 1))
			rp_sweep_close_member(rp_analyses_cat_at(a, ci), t);
		if (sp->depth == 0)
			rp_sweep_close_member(&a->roots, t);
		if (sp->request)
			rp_sweep_close_member(&a->requests, t);
		known = rp_sweep_close_lead_mid(&a->overall, t, sp->start, &lv) >= 0;
	} else {
		struct rp_span_info cp = *sp; /* a copy: sp itself never leaves the close */

		known = rp_analyses_close_late(a, ci, &cp, &lv);
	}
	if (__builtin_expect(known, 1)) {
		struct rp_mid *m = &a->mid[sp->name];

		m->sum += lv;
		/* two scalar adds: without this the compiler builds {lv, 1} in a vector
		 * register for one 16-byte add (twice the instructions) */
		__asm__("" : "+r"(m));
		m->count++;
	} else {
		lv = 0;
	}
	*level = lv;
	return known;
}

/* The same, the category looked up: *@ci set to it. */
static inline bool rp_analyses_close_sweeps(struct rp_analyses *a, const struct rp_span_info *sp,
					    uint32_t *ci, uint32_t *level)
{
	*ci = rp_analyses_cat_index(a, sp->name);
	return rp_analyses_close_sweeps_cat(a, sp, *ci, level);
}

/* A span of category @ci into its name's entry @e of the finest sub-window @cs. */
static inline void rp_analyses_entry_add(struct rp_wslot *cs, struct rp_wentry *e,
					 const struct rp_span_info *sp, uint32_t ci)
{
	uint64_t dur = sp->end - sp->start;

	e->cat = ci;
	if (++e->calls == 2 || e->imp) /* no longer an eviction candidate */
		rp_wslot_settle(cs, e);
	e->self_ns += sp->self_ns;
	e->cum_ns += dur & -(uint64_t)sp->primitive; /* dur if primitive, no branch */
	e->total_ns += dur;
	rp_sketch_add_ns(&e->dur, dur);
}

/* A name with no entry in the finest sub-window yet (analyses.c): one made, one
 * evicted for it, or its span to the overflow. */
__attribute__((noinline)) void rp_analyses_close_new(struct rp_analyses *a,
						     const struct rp_span_info *sp, uint32_t ci);

/*
 * Its second part: its duration into its name's entry of the finest sub-window (or
 * the all-time figures without windows), and the slowest list; @ci, @level and
 * @known as rp_analyses_close_sweeps() gave them. A name's entry already made (its
 * tag of this sub-window's generation, as rp_window_entry() finds it) is the path
 * kept in line.
 */
static inline void rp_analyses_close_entry(struct rp_analyses *a, const struct rp_span_info *sp,
					   uint32_t ci, uint32_t level, bool known)
{
	struct rp_window *w0 = &a->win.w[0];
	uint64_t tag;

	if (__builtin_expect(a->win.n == 0, 0)) {
		/* the span's scalars, not the span: built in memory for the call, it was
		 * either copied (field by field: an aggregate copy reloaded GCC's 8-byte
		 * stores with 16-byte loads, a stall at every close) or, passed as it is,
		 * made to live in memory on the windowed path too */
		rp_analyses_close_direct(a, sp->name, ci, sp->self_ns, sp->end - sp->start);
		rp_analyses_offer_slow(&a->slow, sp, ci, level, known);
		return;
	}
	tag = w0->tag[sp->name];
	if (__builtin_expect((uint32_t)(tag >> 32) == w0->gen, 1)) {
		rp_analyses_entry_add(w0->cs, rp_window_tagged(w0, tag), sp, ci);
	} else {
		struct rp_span_info c = *sp;

		rp_analyses_close_new(a, &c, ci);
	}
	rp_analyses_offer_slow(&w0->cs->slow, sp, ci, level, known);
}

/*
 * A span closed: rp_analyses_close_sweeps(), then rp_analyses_close_entry(). Inline:
 * it runs once per span, inside the stack machine's close callback.
 */
static inline void rp_analyses_close(struct rp_analyses *a, const struct rp_span_info *sp)
{
	uint32_t ci, level;
	bool known = rp_analyses_close_sweeps(a, sp, &ci, &level);

	rp_analyses_close_entry(a, sp, ci, level, known);
}

/* The same for a span of category @ci (rp_analyses_cat_index()) */
static inline void rp_analyses_close_cat(struct rp_analyses *a, const struct rp_span_info *sp,
					 uint32_t ci)
{
	uint32_t level;
	bool known = rp_analyses_close_sweeps_cat(a, sp, ci, &level);

	rp_analyses_close_entry(a, sp, ci, level, known);
}

/*
 * rp_analyses_close_batch() - @n spans closed at non-decreasing times with no open
 * between them and no sub-window boundary (a->next) among them, the caller having
 * run rp_analyses_clock() as for one close: the same as rp_analyses_close() on each
 * in order (test_analyses). For a caller that collects a slice's closes.
 */
void rp_analyses_close_batch(struct rp_analyses *a, const struct rp_span_info *sp, uint32_t n);

/*
 * A producer's summary whose histogram holds all its calls (docs/summaries.md): @n
 * buckets of @calls[i] calls @len[i] ns long. Its calls, self and cumulative times
 * and durations go where a span's do (its name's entry of the finest sub-window, or
 * the all-time sketches and categories); not to the sweeps nor the slowest lists,
 * which are spans'.
 */
void rp_analyses_summary(struct rp_analyses *a, const struct rp_sum_call *c, const uint64_t *len,
			 const uint64_t *calls, uint32_t n);

/*
 * A request milestone of @dur ns (marks.h): one call of @name into its entry of the
 * finest sub-window (calls, total_ns and the sketch; no self or cumulative time), or
 * its all-time sketch; never to the sweeps, the categories nor the slowest lists.
 */
void rp_analyses_mark(struct rp_analyses *a, uint32_t name, uint64_t dur);

/* The event clock reached @t >= a->next: the finest sub-window is over. */
void rp_analyses_rotate(struct rp_analyses *a, uint64_t t);

static inline void rp_analyses_clock(struct rp_analyses *a, uint64_t t)
{
	if (t >= a->next)
		rp_analyses_rotate(a, t);
}

/* A counter sample. @return false if the counter cap refused a new name. */
bool rp_analyses_counter(struct rp_analyses *a, uint32_t name, uint64_t t, int64_t v);

/**
 * rp_analyses_report() - per-function quantiles, sketches and midpoints (@map: name
 * id -> row, or RP_NONE), concurrency distributions, categories, counters, windows
 * and the all-time slowest spans. @t_last: the newest event time. 0 or -ENOMEM.
 */
int rp_analyses_report(const struct rp_analyses *a, const uint32_t *map, uint64_t t_last,
		       struct rp_report *r);

#endif
