/* SPDX-License-Identifier: MIT */
/*
 * Rolling windows on the event clock: per name calls, self and cum time and a
 * duration sketch, Space-Saving summaries of the names past the table cap, the
 * slowest spans and the time at each concurrency level, kept per sub-window.
 *
 * The clock. Window w has length L_w and S sub-windows of g_w = L_w / S ns; the
 * sub-window of time t is floor(t / g_w). A span counts in the sub-window of its end
 * time (a late span, ending before the current sub-window, counts in the current
 * one). With t_last the newest event time, a report of window w covers the S
 * sub-windows J - S + 1 .. J, J = floor(t_last / g_w): t_from = (J - S + 1) g_w (0
 * if negative), t_to = t_last. The window is exactly the spans with end in
 * [t_from, t_to] and the time at each level over [t_from, t_to] intersected with the
 * sweep's observed range.
 *
 * Exact and cheap. A span touches only the finest window's current sub-window (a
 * tag array by name id: one load and compare). When the finest window's current
 * sub-window is over (an event at or past its end), the whole of it is folded into
 * the sub-window of every coarser window that holds it (each g_w is a multiple of
 * g_0, so one does), and into the all-time sketches (analyses.c). A window's report
 * merges its S sub-windows (plus, for the coarser ones, the finest window's current
 * one, not yet folded). Sketch merges are bucket-exact, so the quantiles keep the
 * sketch's bound: within 1% of the exact order statistic of the window's durations.
 *
 * Caps. Each sub-window's table holds max_window_names names (M); the spans of later
 * names go to the sub-window's three Space-Saving summaries (by cum, self and count,
 * m = M) and are counted as RP_ANOM_WINDOW_CAP (one per span, or per call folded
 * into a coarser table that is full). Concurrency levels above max_level count at
 * max_level (time there in over_cap_ns; the mean stays exact).
 *
 * Eviction. A full table makes room for a new name by evicting an entry called once
 * in that sub-window, or one whose calls were all made at import time (summaries
 * with RP_SUMMARY_IMPORT: an import runs once); the once set holds them, O(1) to find
 * and to leave, taken in turn. So an import burst cannot keep the names that follow
 * it out of the sub-window. The evicted entry goes where an overflowing name goes (the
 * summaries; its calls count as RP_ANOM_WINDOW_CAP, since its exact figures are no
 * longer kept there) and is counted as RP_ANOM_WINDOW_EVICTED; the finest window's
 * victims also go to the all-time figures first (analyses.c). With no candidate, a
 * name folded into a coarser window takes the place of the entry with the fewest
 * calls if that has fewer than it (an LFU: never a busier name for a quieter one).
 * In the finest window a name that keeps overflowing does the same: when its calls
 * that overflowed there reach a power of two (2, 4, 8, ...), it takes the place of the
 * least-called entry if that has fewer (a hot name first seen after the table filled
 * keeps all but its first calls exact); otherwise it overflows.
 *
 * Memory (W windows, S sub-windows, M names, k slowest, N max_names, L max_level):
 *   W S (sizeof slot + M (sizeof entry + 4 + sketch stores) + 3 (sizeof ss + SS_MEMSIZE(M))
 *        + 72 k + 2 (L + 1) 8) + W N 8 (the tags) + N 8 (the finest window's overflows)
 * where a duration sketch store is at most 8 rp_sketch_default_buckets(0.01) bytes;
 * rp_windows_memory_bound() computes it.
 */
#ifndef RP_ENGINE_WINDOW_H
#define RP_ENGINE_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "sketch.h"
#include "topk.h"

#define RP_WINDOW_MAX 8 /* windows besides all-time */

enum { RP_WIN_CUM, RP_WIN_SELF, RP_WIN_COUNT };
enum { RP_WIN_OVERALL, RP_WIN_ROOTS };

/* One name in one sub-window. */
struct rp_wentry {
	uint32_t name;
	uint32_t cat; /* the analyses' category index + 1; 0: none */
	uint32_t once_pos; /* its place in the slot's once set; RP_NONE: not in it */
	uint8_t imp;	   /* every call in it was made at import time (summaries) */
	uint64_t calls, self_ns, cum_ns, total_ns;
	struct rp_sketch dur; /* durations (ns); memory kept across sub-windows */
};

struct rp_wslot {
	uint64_t index;	     /* the sub-window (t / g); UINT64_MAX: never used */
	struct rp_wentry *e; /* max_window_names entries */
	uint32_t n;
	uint32_t *once;	     /* eviction candidates: calls <= 1, or import time */
	uint32_t n_once;
	uint32_t hand;	     /* the next candidate to evict: once[hand % n_once] */
	struct rp_spacesaving ss[3]; /* the names past the table: cum, self, count */
	struct rp_slowest slow;
	uint64_t *conc[2]; /* time at each level 0..max_level: overall, roots */
	double excess[2];  /* sum of (level - max_level) x time above the cap */
	uint64_t over_cap_ns[2];
};

struct rp_window {
	uint64_t length, g; /* ns */
	char name[16];
	uint64_t cur;	       /* index of the current sub-window */
	struct rp_wslot *slot; /* S, sub-window i in slot[i % S] */
	struct rp_wslot *cs;   /* the current one */
	uint64_t *tag;	       /* per name id: gen << 32 | its entry's byte offset in
				  cs->e (rp_window_tag()) */
	uint64_t *over;	       /* the finest window's, per name id: gen << 32 | its calls
				  that overflowed cs (saturating); NULL in the others */
	uint32_t gen;	       /* of cs; tags of another gen are stale */
	bool started;
};

struct rp_windows {
	struct rp_window w[RP_WINDOW_MAX];
	uint32_t n; /* windows; 0: none */
	uint32_t S, M, k, max_level, max_names;
	uint64_t cap_hits; /* RP_ANOM_WINDOW_CAP */
	uint64_t evicted;  /* RP_ANOM_WINDOW_EVICTED */
	uint64_t level_cap_hits; /* RP_ANOM_LEVEL_CAP */
};

/* A window's parameters, as configured. */
struct rp_window_cfg {
	uint32_t n;
	uint64_t length[RP_WINDOW_MAX];
	uint32_t subwindows, max_names, topk, max_level, max_window_names;
};

/**
 * rp_window_cfg_check() - lengths increasing, each a multiple of subwindows, each
 * sub-window length a multiple of the finer one's; caps >= 1.
 * @why: room for a message naming the offending value. @return 0 or -EINVAL.
 */
int rp_window_cfg_check(const struct rp_window_cfg *c, char *why, size_t n);

/* Worst-case bytes of rp_windows at these caps (see the top of this file). */
size_t rp_windows_memory_bound(const struct rp_window_cfg *c);

/* @return 0, -EINVAL (a bad config) or -ENOMEM (nothing left allocated). */
int rp_windows_init(struct rp_windows *ws, const struct rp_window_cfg *c);
void rp_windows_fini(struct rp_windows *ws);

/* "10s", "1m", "250ms", ... for a length in ns. */
void rp_window_name(uint64_t ns, char *buf, size_t n);

/* An entry's tag: the current gen << 32 | its byte offset in cs->e, which fits in
 * 32 bits (at most 2^20 entries, rp_windows_init()), so that the entry of a tag is
 * one add (rp_window_tagged(); the close of every span, analyses.h) rather than an
 * index times sizeof(struct rp_wentry). */
_Static_assert((UINT64_C(1) << 20) * sizeof(struct rp_wentry) <= UINT32_MAX,
	       "a window entry's byte offset fits in a tag's low 32 bits");

static inline uint64_t rp_window_tag(const struct rp_window *w, const struct rp_wentry *e)
{
	return (uint64_t)w->gen << 32 | (uint32_t)((const char *)e - (const char *)w->cs->e);
}

/* The entry of a tag of the current gen. */
static inline struct rp_wentry *rp_window_tagged(const struct rp_window *w, uint64_t t)
{
	return (struct rp_wentry *)(void *)((char *)w->cs->e + (uint32_t)t);
}

/* Out of line: a new entry for @name in the current slot; NULL when it is full. */
struct rp_wentry *rp_window_insert(struct rp_windows *ws, struct rp_window *w, uint32_t name);

/* The entry of @name in @w's current sub-window, made if new; NULL past the cap. */
static inline struct rp_wentry *rp_window_entry(struct rp_windows *ws, struct rp_window *w,
						uint32_t name)
{
	uint64_t t = w->tag[name];

	if ((uint32_t)(t >> 32) == w->gen)
		return rp_window_tagged(w, t);
	return rp_window_insert(ws, w, name);
}

/* Calls of @name that overflowed @w's current sub-window (the finest window's). */
static inline uint32_t rp_window_overflowed(const struct rp_window *w, uint32_t name)
{
	uint64_t t = w->over[name];

	return (uint32_t)(t >> 32) == w->gen ? (uint32_t)t : 0;
}

static inline void rp_window_overflow_count(struct rp_window *w, uint32_t name, uint64_t calls)
{
	uint64_t c = rp_window_overflowed(w, name) + calls;

	w->over[name] = (uint64_t)w->gen << 32 | (c > UINT32_MAX ? UINT32_MAX : c);
}

/* @e (in @s) has been called more than once, not all at import time: no longer an
 * eviction candidate. */
static inline void rp_wslot_settle(struct rp_wslot *s, struct rp_wentry *e)
{
	uint32_t p = e->once_pos, last;

	e->imp = 0;
	if (p == RP_NONE)
		return;
	last = s->once[--s->n_once];
	s->once[p] = last;
	s->e[last].once_pos = p;
	e->once_pos = RP_NONE;
}

/* An eviction candidate of @w's current sub-window (the victim), or NULL. The caller
 * spills it (rp_wslot_spill) before rp_window_replace(), which leaves the new name in
 * the victim's place in the set: the hand moves on, so the candidates go in turn and a
 * new name is the last one the hand comes back to (taking the set's last, each new
 * name would evict the one before it and none would stay). */
static inline struct rp_wentry *rp_window_victim(struct rp_window *w)
{
	struct rp_wslot *s = w->cs;

	if (s->n_once == 0)
		return NULL;
	if (s->hand >= s->n_once)
		s->hand = 0;
	return &s->e[s->once[s->hand++]];
}

/* @v's figures into @s's summaries (an evicted entry, as if it had overflowed). */
void rp_wslot_spill(struct rp_windows *ws, struct rp_wslot *s, const struct rp_wentry *v);

/* Victim @v of @w's current sub-window becomes an empty entry of @name. */
struct rp_wentry *rp_window_replace(struct rp_windows *ws, struct rp_window *w,
				    struct rp_wentry *v, uint32_t name);

/* The entry of @name in @w's current sub-window, or NULL (nothing is made). */
const struct rp_wentry *rp_window_find(const struct rp_window *w, uint32_t name);

/**
 * rp_window_at() - the slot of sub-window @idx of @w, moving the current sub-window
 * forward to it (emptying the slot it reuses) when @idx is later. NULL when @idx has
 * expired (older than every slot).
 */
struct rp_wslot *rp_window_at(struct rp_windows *ws, struct rp_window *w, uint64_t idx);

/* A name of a span past the table cap: into @s's summaries. */
void rp_wslot_overflow(struct rp_wslot *s, uint32_t name, uint64_t cum, uint64_t self);

/* @dt ns at @level (overall or roots) in @s. */
void rp_wslot_add_time(struct rp_windows *ws, struct rp_wslot *s, int which, uint64_t level,
		       uint64_t dt);

/* Fold sub-window @src into @dst, the current slot of @w (entries, summaries, slowest;
 * not the concurrency, which analyses.c adds to each window itself). */
void rp_wslot_fold(struct rp_windows *ws, struct rp_window *w, const struct rp_wslot *src);

/**
 * rp_windows_const() - [a, b) at constant levels (@lv[overall], @lv[roots]; @have
 * says which sweep has started) added to every window: only the last S sub-windows
 * of each before b are touched, so an idle gap of any length costs O(W S).
 */
void rp_windows_const(struct rp_windows *ws, uint64_t a, uint64_t b, const uint64_t lv[2],
		      const bool have[2]);

/**
 * rp_windows_report() - fill r->windows (and add cap hits to r->anomalies).
 * @t_last: the newest event time. @pending: time at each level since the last
 * rotation (overall, roots), @n_pending levels each; it belongs to the current
 * sub-window of every window. @map: name id -> fns row. @return 0 or -ENOMEM.
 */
int rp_windows_report(const struct rp_windows *ws, uint64_t t_last, const uint64_t *pending[2],
		      const uint32_t n_pending[2], const uint32_t *map, uint32_t n_names,
		      struct rp_report *r);

/* Top-k of @ss (in order) into a bottleneck list; @map: name id -> fns row. */
int rp_window_top(const struct rp_spacesaving *ss, uint32_t k, const uint32_t *map,
		  struct rp_report_top **out, uint32_t *n, uint64_t *bound);

/* The kept exemplars of @sl, slowest first, as report spans. */
int rp_window_spans(const struct rp_slowest *sl, const uint32_t *map, struct rp_report_span **out,
		    uint32_t *n);

#endif
