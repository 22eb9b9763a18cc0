/* SPDX-License-Identifier: MIT */
/*
 * Streaming concurrency sweep: the number of open spans over time, fed span opens
 * and closes in non-decreasing time order. It keeps, exactly, the time spent at each
 * level over the observed range, from which come the time-weighted percentiles, the
 * maximum and the mean; and a bounded history of recent change points that answers
 * "the level at time t" for a finished span's midpoint.
 *
 * Semantics (those of the agent toolkit's concurrency analysis, tests/data/README.md,
 * nat/ items 5 and 6):
 *  - The level is a step function of time. Events sharing a timestamp act together:
 *    only the level after the last of them holds over a positive duration, so their
 *    order within the timestamp never matters and a level reached and left at the
 *    same instant counts nowhere (zero-length segments are dropped). A zero-length
 *    span may even be fed close first.
 *  - The observed range runs from the first open to the latest time fed (the last
 *    close, or a later rp_sweep_accrue()); time at level 0 inside it counts.
 *  - pXX is the smallest level c, among the levels held for a positive time, such
 *    that the time at levels <= c reaches XX% of the observed time.
 *  - The level at t is that of the segment [start, end) with start <= t < end; 0
 *    before the first open and after the last close.
 *
 * Memory: the struct (144 bytes), (max_level + 1) x 8 bytes at most for the level
 * array (grown on demand, 16 entries at first) and history (rounded up to a power
 * of two) x 12 bytes for the change points, allocated by the sweep; after init,
 * memory is allocated only when the level array grows, never per event.
 *
 * Cost: open and close are inline; an event inside the level array is two array adds
 * ("exit minus entry" sums, below) and, at a new time when the level changed, a
 * history push (none for a sweep made by rp_sweep_init_levels()); the _hist and
 * _levels entry points do not test which kind the sweep is. Sweeps fed as a group
 * (below) test the time once for all.
 */
#ifndef RP_ENGINE_SWEEP_H
#define RP_ENGINE_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

/* Fields are read-only outside sweep.c; counters may be read directly. */
struct rp_sweep {
	uint64_t *ns;		       /* time at level c, as "exit minus entry" sums: read
					  through rp_sweep_ns(); levels past max_level
					  count at max_level */
	uint32_t n_alloc;	       /* entries of ns allocated, <= max_level + 1 */
	uint32_t max_level;	       /* the cap (lowered to n_alloc - 1 if growth fails) */
	int64_t level;		       /* open spans; < 0 only within one timestamp */
	int64_t level_before;	       /* the level of the segment that ends at last_t */
	uint64_t first_t;	       /* start of the observed range (once opened) */
	uint64_t last_t;	       /* latest time fed; events before it are complete */
	uint64_t excess_hi, excess_lo; /* sum of (level - max_level) x ns above the cap */

	/* History: the last hist_cap change points before last_t; the q-th ever pushed
	   (q from 0) is in slot q & hist_mask (a power of two >= hist_cap slots), so a
	   push is two stores and an increment. From hist_t[i] on, the level was
	   hist_level[i]. */
	uint64_t *hist_t;
	uint32_t *hist_level;
	uint64_t hist_seq;  /* change points ever pushed (0 without a history) */
	uint32_t hist_cap;  /* 0: no history (rp_sweep_init_levels()) */
	uint32_t hist_mask; /* slots - 1 */
	uint32_t n_fast;    /* n_alloc - 1 once opened, else 0: the levels the
			       inline steps take (sweep.c keeps it up to date) */
	bool opened; /* an open was fed: the observed range has started */

	uint64_t over_cap_ns;  /* time at levels > max_level (inside ns[max_level]) */
	uint64_t unmatched;    /* closes with no open span (settled timestamps only;
				  rp_sweep_unmatched() adds the pending ones) */
	uint64_t backwards;    /* events or accruals earlier than last_t, taken at it */
	uint64_t hist_misses;  /* rp_sweep_level_at() answers of -ENOENT */
	uint64_t nomem;	       /* failed level-array growths (the cap was lowered) */
};

/**
 * rp_sweep_init() - an empty sweep.
 * @max_level: levels above it are counted at it (and in over_cap_ns); >= 1.
 * @history: change points the history keeps (the last @history before the latest
 *	time fed); >= 1.
 * @return 0, -EINVAL or -ENOMEM (then nothing is left allocated).
 */
int rp_sweep_init(struct rp_sweep *s, uint32_t max_level, uint32_t history);

/*
 * rp_sweep_init_levels() - a sweep that keeps no history: the same levels, but
 * rp_sweep_level_at() answers only at or after last_t (-ENOENT before, counted in
 * hist_misses). For sweeps that are never asked for a midpoint. 0, -EINVAL, -ENOMEM.
 */
int rp_sweep_init_levels(struct rp_sweep *s, uint32_t max_level);

/* Frees what init allocated; accepts a zeroed or already finished sweep. */
void rp_sweep_fini(struct rp_sweep *s);

/*
 * The level array is kept as "exit minus entry" sums: when the level moves from l to
 * l' at t, ns[l] += t and ns[l'] -= t (unsigned, modular: exact once both ends are
 * in), so a step needs neither the time since the last change nor a load of last_t.
 * The current level's segment has its entry subtracted and no exit yet: while the
 * sweep is opened and 0 <= level < n_alloc, the time at that level up to last_t is
 * ns[level] + last_t, and every other entry is its time. Readers go through
 * rp_sweep_ns() (or the functions below that use it), never ns[] itself. Levels out of
 * that range (negative within a timestamp, at the array's end or past the cap) and
 * times going back take sweep.c's steps, which complete the pending entry, step as a
 * plain array would, and open it again.
 */

/* The time at level @c (< n_alloc) up to last_t. */
static inline uint64_t rp_sweep_ns(const struct rp_sweep *s, uint32_t c)
{
	return s->ns[c] + (s->opened && (uint64_t)s->level == c ? s->last_t : 0);
}

/* The steps out of the common case (sweep.c). */
void rp_sweep_open_slow(struct rp_sweep *s, uint64_t t);
void rp_sweep_close_slow(struct rp_sweep *s, uint64_t t);

/* The time moves on from @lt: the level @l of [lt, ...) is settled, a change point if it
 * differs from the one before (a sweep with a history). */
static inline void rp_sweep_push_(struct rp_sweep *s, uint64_t lt, int64_t l)
{
	if (l != s->level_before) {
		uint32_t i = (uint32_t)s->hist_seq++ & s->hist_mask;

		s->level_before = l;
		s->hist_t[i] = lt;
		s->hist_level[i] = (uint32_t)l; /* 0 <= l < n_alloc fits */
	}
}

/*
 * A step from level @l to @l + @d (+1 or -1) at @t, its exact inline form: the level
 * left is credited its exit time, the one entered debited its entry time (the pending
 * entry rp_sweep_ns() completes); the caller has tested that both are in the array.
 */
static inline __attribute__((always_inline)) void rp_sweep_step_(struct rp_sweep *s, int64_t l,
								 int64_t d, uint64_t t)
{
	s->ns[l] += t;
	s->ns[l + d] -= t;
	s->last_t = t;
	s->level = l + d; /* one per event: 2^63 of them cannot come */
}

/*
 * The common case inline: an opened sweep, a time not before last_t, a level whose
 * step stays inside the array (n_fast is n_alloc - 1 once opened, else 0): open from
 * 0 <= l < n_alloc - 1, close from 1 <= l < n_alloc. At a later time a sweep with a
 * history (@hist: a constant where the caller knows it) first records the level it
 * leaves. false: nothing done, sweep.c's step is the caller's.
 */
static inline bool rp_sweep_open_fast_(struct rp_sweep *s, uint64_t t, bool hist)
{
	int64_t l = s->level;
	uint64_t lt = s->last_t;

	if (__builtin_expect(t >= lt && (uint64_t)l < s->n_fast, 1)) {
		if (hist && t > lt)
			rp_sweep_push_(s, lt, l);
		rp_sweep_step_(s, l, 1, t);
		return true;
	}
	return false;
}

static inline bool rp_sweep_close_fast_(struct rp_sweep *s, uint64_t t, bool hist)
{
	int64_t l = s->level;
	uint64_t lt = s->last_t;

	if (__builtin_expect(t >= lt && (uint64_t)(l - 1) < s->n_fast, 1)) {
		if (hist && t > lt)
			rp_sweep_push_(s, lt, l);
		rp_sweep_step_(s, l, -1, t);
		return true;
	}
	return false;
}

/*
 * A span opens or closes at @t (ns). Times must not decrease: an earlier @t is taken
 * at last_t and counted in backwards. A close that leaves the level negative once
 * every event of its timestamp is in is counted in unmatched and ignored.
 */
static inline void rp_sweep_open(struct rp_sweep *s, uint64_t t)
{
	if (!rp_sweep_open_fast_(s, t, s->hist_cap != 0))
		rp_sweep_open_slow(s, t);
}

static inline void rp_sweep_close(struct rp_sweep *s, uint64_t t)
{
	if (!rp_sweep_close_fast_(s, t, s->hist_cap != 0))
		rp_sweep_close_slow(s, t);
}

/* The same for a sweep made by rp_sweep_init() with a history (_hist) or by
 * rp_sweep_init_levels() (_levels): the kind is not tested on every event. */
static inline void rp_sweep_open_hist(struct rp_sweep *s, uint64_t t)
{
	if (!rp_sweep_open_fast_(s, t, true))
		rp_sweep_open_slow(s, t);
}

static inline void rp_sweep_close_hist(struct rp_sweep *s, uint64_t t)
{
	if (!rp_sweep_close_fast_(s, t, true))
		rp_sweep_close_slow(s, t);
}

static inline void rp_sweep_open_levels(struct rp_sweep *s, uint64_t t)
{
	if (!rp_sweep_open_fast_(s, t, false))
		rp_sweep_open_slow(s, t);
}

static inline void rp_sweep_close_levels(struct rp_sweep *s, uint64_t t)
{
	if (!rp_sweep_close_fast_(s, t, false))
		rp_sweep_close_slow(s, t);
}

/* Change points the history holds now, and those that fell out of it. */
static inline uint32_t rp_sweep_hist_n(const struct rp_sweep *s)
{
	return s->hist_seq < s->hist_cap ? (uint32_t)s->hist_seq : s->hist_cap;
}

static inline uint64_t rp_sweep_hist_evicted(const struct rp_sweep *s)
{
	return s->hist_seq - rp_sweep_hist_n(s);
}

/*
 * rp_sweep_accrue() - account the time up to @t at the current level, for reports
 * while spans are open; it extends the observed range (at level 0 too, so an offline
 * analysis that must end at the last close does not accrue past it). Repeated calls
 * count each nanosecond once. Before the first open it only records @t as seen.
 */
void rp_sweep_accrue(struct rp_sweep *s, uint64_t t);

/* The open spans now (0 while a timestamp's closes outnumber its opens so far). */
uint32_t rp_sweep_level(const struct rp_sweep *s);

/* Length of the observed range, = the sum of the level array; 0 before an open. */
uint64_t rp_sweep_observed_ns(const struct rp_sweep *s);

/**
 * rp_sweep_percentile() - the time-weighted percentile, exactly.
 * @p_times_100: the percentile in hundredths (5000 = p50, 9990 = p99.9); values
 *	above 10000 are taken as 10000. Fractional percentiles are only those that
 *	hundredths express: the rule is cum(c) x 10000 >= p_times_100 x total, in
 *	integers, so that p50 is exactly "half of the time".
 * @return the level (capped at max_level); 0 when no time was observed. p0 is
 *	the lowest level held, p100 the highest.
 */
uint32_t rp_sweep_percentile(const struct rp_sweep *s, unsigned p_times_100);

/* The highest level held for a positive time (capped at max_level); 0 if none. */
uint32_t rp_sweep_max(const struct rp_sweep *s);

/* The time-weighted mean level over the observed range (exact past the cap); 0 if none. */
double rp_sweep_mean(const struct rp_sweep *s);

/*
 * The level array, completed (rp_sweep_ns() of each level): into @out (n_alloc
 * entries), @return one more than rp_sweep_max() (0 when no time was observed); the
 * entries from there on are 0.
 */
uint32_t rp_sweep_levels(const struct rp_sweep *s, uint64_t *out);

/* rp_sweep_levels_quantiles() of the sweep's completed level array. */
void rp_sweep_quantiles(const struct rp_sweep *s, uint32_t q[4], uint32_t *max);

/* Closes ignored so far, including those of the latest timestamp not yet settled. */
uint64_t rp_sweep_unmatched(const struct rp_sweep *s);

/**
 * rp_sweep_level_at() - the level at time @t, from the history.
 * Call it after feeding the close of the span whose midpoint @t is.
 * @return 0 with *@level set: final.
 *	1 with *@level set: @t >= last_t, so events still to come at last_t (or a
 *	later time) may change it; the answer is final once a later time is fed, or
 *	at the end of the stream. For a span of positive length that has been closed
 *	this never happens; for a zero-length span closed at last_t it does.
 *	-ENOENT: @t is before the oldest change point kept and older ones were
 *	dropped, or the sweep keeps no history (counted in hist_misses).
 */
int rp_sweep_level_at_slow(struct rp_sweep *s, uint64_t t, uint32_t *level);

static inline int rp_sweep_level_at(struct rp_sweep *s, uint64_t t, uint32_t *level)
{
	/* A span just closed has its midpoint mostly after the newest change point
	   (a leaf: the point its open made): answered here, the rest in sweep.c. */
	if (t < s->last_t && s->hist_seq > 0) {
		uint32_t i = (uint32_t)(s->hist_seq - 1) & s->hist_mask;

		if (s->hist_t[i] <= t) {
			*level = s->hist_level[i];
			return 0;
		}
	}
	return rp_sweep_level_at_slow(s, t, level);
}

/*
 * Percentile and maximum of a level array as rp_sweep_levels() gives it, by the same
 * rules. The element-wise sum of the arrays of disjoint time ranges (windows of one
 * sweep) is the array of their union; arrays of sweeps that ran over the same time
 * (two processes) do not add up that way: their levels would have to.
 */
uint32_t rp_sweep_levels_percentile(const uint64_t *ns, uint32_t n, unsigned p_times_100);
uint32_t rp_sweep_levels_max(const uint64_t *ns, uint32_t n);

/* The report's p50, p90, p95 and p99 (@q) and maximum of a level array, as the two above
 * give them one by one, in two passes up to the highest level held: a report asks for
 * them per sweep and window, and a sweep's array can be 65,536 levels long. */
void rp_sweep_levels_quantiles(const uint64_t *ns, uint32_t n, uint32_t q[4], uint32_t *max);

/*
 * The midpoint the toolkit queries: start + (end - start) / 2, rounded down; a
 * zero-length span's (or a reversed one's) is its start.
 */
static inline uint64_t rp_sweep_midpoint(uint64_t start, uint64_t end)
{
	return end > start ? start + (end - start) / 2 : start;
}

/*
 * rp_sweep_close_hist() of a span opened at @start, then rp_sweep_level_at() of its
 * midpoint (the same return). A span with no change point inside it (a leaf) opened
 * at or after last_t: its midpoint is in [last_t, @t), whose level is the step's own,
 * so neither the midpoint nor a history lookup is needed.
 */
static inline int rp_sweep_close_hist_mid(struct rp_sweep *s, uint64_t t, uint64_t start,
					  uint32_t *level)
{
	int64_t l = s->level;
	uint64_t lt = s->last_t;

	if (__builtin_expect(rp_sweep_close_fast_(s, t, true), 1)) {
		if (start - lt < t - lt) { /* lt <= start < t: the midpoint too */
			*level = (uint32_t)l;
			return 0;
		}
	} else {
		rp_sweep_close_slow(s, t);
	}
	return rp_sweep_level_at(s, rp_sweep_midpoint(start, t), level);
}

/*
 * A group of sweeps fed by one stream (the analyses' overall sweep, which sees every
 * event, and its category, roots and requests sweeps, which see some of them at the
 * same times): every member's last_t is at most the leader's. Once the caller has
 * seen @t > the leader's last_t, @t is at or after every member's last_t, so no step
 * tests the time (one test per event instead of one per sweep), and a member's step is
 * two array adds and two stores. A level out of the fast range (not opened, negative,
 * at the array's end) still goes to sweep.c.
 */

/* The leader (a sweep with a history); @t > s->last_t. */
static inline void rp_sweep_open_lead(struct rp_sweep *s, uint64_t t)
{
	int64_t l = s->level;

	if (__builtin_expect((uint64_t)l < s->n_fast, 1)) {
		rp_sweep_push_(s, s->last_t, l);
		rp_sweep_step_(s, l, 1, t);
	} else {
		rp_sweep_open_slow(s, t);
	}
}

/* rp_sweep_close_hist_mid() for the leader; @t > s->last_t. */
static inline int rp_sweep_close_lead_mid(struct rp_sweep *s, uint64_t t, uint64_t start,
					  uint32_t *level)
{
	int64_t l = s->level;
	uint64_t lt = s->last_t;

	if (__builtin_expect((uint64_t)(l - 1) < s->n_fast, 1)) {
		rp_sweep_push_(s, lt, l);
		rp_sweep_step_(s, l, -1, t);
		if (start >= lt && start < t) { /* the midpoint too */
			*level = (uint32_t)l;
			return 0;
		}
	} else {
		rp_sweep_close_slow(s, t);
	}
	return rp_sweep_level_at(s, rp_sweep_midpoint(start, t), level);
}

/* A member without history; @t >= s->last_t. */
static inline void rp_sweep_open_member(struct rp_sweep *s, uint64_t t)
{
	int64_t l = s->level;

	if (__builtin_expect((uint64_t)l < s->n_fast, 1)) {
		rp_sweep_step_(s, l, 1, t);
	} else {
		rp_sweep_open_slow(s, t);
	}
}

static inline void rp_sweep_close_member(struct rp_sweep *s, uint64_t t)
{
	int64_t l = s->level;

	if (__builtin_expect((uint64_t)(l - 1) < s->n_fast, 1)) {
		rp_sweep_step_(s, l, -1, t);
	} else {
		rp_sweep_close_slow(s, t); /* at level 0: -1, settled at the next time */
	}
}

#endif
