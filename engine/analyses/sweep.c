// SPDX-License-Identifier: MIT
/*
 * The sweep line of a concurrency profile (the plane sweep of Shamos and Hoey,
 * "Geometric intersection problems", FOCS 1976, in one dimension), streamed: no
 * event is stored, only the running level, the time at each level and the last few
 * change points. Every figure is exact: there is no error bound to state.
 *
 * Invariants, with last_t the latest time fed:
 *  - Every event before last_t is in, those at last_t may still come. So the level
 *    of [last_t, next time) is not known until the time moves on; then settle()
 *    closes the timestamp: a negative level (closes without opens) is counted and
 *    reset to 0, and if the level differs from the one before last_t, (last_t,
 *    level) becomes a change point. Nothing else looks at the level between events
 *    of one timestamp, which is why their order does not matter.
 *  - Once opened, the completed level array (rp_sweep_ns()) sums to last_t - first_t:
 *    each advance of last_t adds its span at the level settled for it. Time above the
 *    cap also adds (level - cap) x dt to excess_hi:excess_lo (128 bits), so that the
 *    mean stays exact; the hot path below the cap is two array adds.
 *  - ns[] holds "exit minus entry" sums (sweep.h): while opened and 0 <= level <
 *    n_alloc, ns[level] is the time at that level minus last_t (the entry of the
 *    segment still open; a change at last_t within the timestamp moves it, and the
 *    ones that cancel out add nothing), every other entry its time. The steps here
 *    complete that entry (plain()), step the plain array, and open it again
 *    (unplain()), so every slow case (negative levels, the array's end, the cap,
 *    growth, times going back) is what it was with a plain array.
 *  - The history ring holds the last hist_cap change points before last_t, in time
 *    order with distinct times and consecutive levels distinct; level_before is the
 *    level from the newest of them (or 0 if none was ever made) to last_t. If one
 *    ever fell out, times before the oldest left are unknown (-ENOENT). Its slots
 *    are a power of two, at least hist_cap: the q-th point pushed goes to slot
 *    q & hist_mask, and the points kept are those numbered hist_seq - hist_n ..
 *    hist_seq - 1 (hist_n = min(hist_seq, hist_cap)), so no slot is reused while
 *    its point is kept.
 *
 * Percentiles compare cum x 10000 >= p_times_100 x total in 128-bit integers, so
 * they are exact (the toolkit does it in floating point and may differ from the
 * exact answer only when a cumulative time is within rounding of a threshold).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

#define LEVELS_FIRST 16u /* entries of ns[] allocated by init */

struct u128 {
	uint64_t hi, lo;
};

static struct u128 mul64(uint64_t a, uint64_t b)
{
	uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
	uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
	uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
	struct u128 r;

	r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
	r.lo = (mid << 32) | (uint32_t)p00;
	return r;
}

static void add128(struct u128 *a, struct u128 b)
{
	a->lo += b.lo;
	a->hi += b.hi + (a->lo < b.lo);
}

static bool ge128(struct u128 a, struct u128 b)
{
	return a.hi != b.hi ? a.hi > b.hi : a.lo >= b.lo;
}

static uint32_t sat32(int64_t v)
{
	if (v < 0)
		return 0;
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

int rp_sweep_init(struct rp_sweep *s, uint32_t max_level, uint32_t history)
{
	memset(s, 0, sizeof(*s));
	if (max_level < 1 || max_level == UINT32_MAX || history < 1)
		return -EINVAL;
	s->max_level = max_level;
	s->n_alloc = max_level + 1 < LEVELS_FIRST ? max_level + 1 : LEVELS_FIRST;
	s->ns = calloc(s->n_alloc, sizeof(*s->ns));
	s->hist_cap = history;
	while ((uint64_t)s->hist_mask + 1 < history)
		s->hist_mask = s->hist_mask * 2 + 1;
	if (history > 0) {
		size_t slots = (size_t)s->hist_mask + 1;

		s->hist_t = malloc(slots * sizeof(*s->hist_t));
		s->hist_level = malloc(slots * sizeof(*s->hist_level));
	}
	if (!s->ns || (history > 0 && (!s->hist_t || !s->hist_level))) {
		rp_sweep_fini(s);
		return -ENOMEM;
	}
	return 0;
}

int rp_sweep_init_levels(struct rp_sweep *s, uint32_t max_level)
{
	int err = rp_sweep_init(s, max_level, 1);

	if (err == 0) { /* no change point is ever pushed nor looked up */
		free(s->hist_t);
		free(s->hist_level);
		s->hist_t = NULL;
		s->hist_level = NULL;
		s->hist_cap = 0;
		s->hist_mask = 0;
	}
	return err;
}

void rp_sweep_fini(struct rp_sweep *s)
{
	free(s->ns);
	free(s->hist_t);
	free(s->hist_level);
	memset(s, 0, sizeof(*s));
}

/* Room for ns[level]; on failure the cap comes down to what is allocated. */
static void grow_levels(struct rp_sweep *s, uint32_t level)
{
	uint64_t want = (uint64_t)s->n_alloc * 2;
	uint64_t *ns;

	if (want < (uint64_t)level + 1)
		want = (uint64_t)level + 1;
	if (want > (uint64_t)s->max_level + 1)
		want = (uint64_t)s->max_level + 1;
	ns = realloc(s->ns, want * sizeof(*ns));
	if (ns == NULL) {
		s->nomem++;
		s->max_level = s->n_alloc - 1;
		return;
	}
	memset(ns + s->n_alloc, 0, (want - s->n_alloc) * sizeof(*ns));
	s->ns = ns;
	s->n_alloc = (uint32_t)want;
}

/* @dt ns at a level with no ns[] entry yet, or past the cap: out of the hot path. */
__attribute__((cold, noinline)) static void add_time_slow(struct rp_sweep *s, uint64_t level,
							  uint64_t dt)
{
	uint32_t slot = level > s->max_level ? s->max_level : (uint32_t)level;
	struct u128 excess = { s->excess_hi, s->excess_lo };

	if (slot >= s->n_alloc)
		grow_levels(s, slot); /* on failure max_level comes down below slot */
	if (level > s->max_level) {
		add128(&excess, mul64(level - s->max_level, dt));
		s->excess_hi = excess.hi;
		s->excess_lo = excess.lo;
		s->over_cap_ns += dt;
		slot = s->max_level;
	}
	s->ns[slot] += dt;
}

/* @dt ns at the current (settled, non-negative) level. */
static inline void add_time(struct rp_sweep *s, uint64_t dt)
{
	uint64_t level = (uint64_t)s->level;

	if (level < s->n_alloc) /* n_alloc <= max_level + 1 */
		s->ns[level] += dt;
	else
		add_time_slow(s, level, dt);
}

/* Slot of the change point @k places after the oldest kept (k < hist_n). */
static inline uint32_t hist_index(const struct rp_sweep *s, uint64_t k)
{
	return (uint32_t)(s->hist_seq - rp_sweep_hist_n(s) + k) & s->hist_mask;
}

/* The same push as rp_sweep_push_()'s; none without a history. */
static void hist_push(struct rp_sweep *s, uint64_t t, uint32_t level)
{
	uint32_t i = (uint32_t)s->hist_seq & s->hist_mask;

	if (s->hist_cap == 0)
		return;
	s->hist_t[i] = t;
	s->hist_level[i] = level;
	s->hist_seq++;
}

/* Every event at last_t is in: fix the level of [last_t, ...) and record it. */
static void settle(struct rp_sweep *s)
{
	if (s->level < 0) {
		s->unmatched += (uint64_t)-s->level;
		s->level = 0;
	}
	if (s->level != s->level_before) {
		hist_push(s, s->last_t, sat32(s->level));
		s->level_before = s->level;
	}
}

/* The pending entry of the current level, completed: ns[] is the plain array. */
static void plain(struct rp_sweep *s)
{
	if (s->opened && (uint64_t)s->level < s->n_alloc)
		s->ns[s->level] += s->last_t;
}

/* Back to "exit minus entry" form, and the inline steps' range. */
static void unplain(struct rp_sweep *s)
{
	if (s->opened && (uint64_t)s->level < s->n_alloc)
		s->ns[s->level] -= s->last_t;
	s->n_fast = s->opened ? s->n_alloc - 1 : 0; /* opened or grown since */
}

/* Move the plain array to @t; an earlier @t is taken as last_t. */
static void advance(struct rp_sweep *s, uint64_t t)
{
	if (t < s->last_t) {
		s->backwards++;
		return;
	}
	if (t == s->last_t)
		return;
	settle(s);
	if (s->opened)
		add_time(s, t - s->last_t);
	else
		s->first_t = t; /* only stray closes so far: nothing observed yet */
	s->last_t = t;
}

void rp_sweep_open_slow(struct rp_sweep *s, uint64_t t)
{
	plain(s);
	advance(s, t);
	s->opened = true;
	s->level++;
	unplain(s);
}

void rp_sweep_close_slow(struct rp_sweep *s, uint64_t t)
{
	plain(s);
	advance(s, t);
	s->level--;
	unplain(s);
}

void rp_sweep_accrue(struct rp_sweep *s, uint64_t t)
{
	plain(s);
	advance(s, t);
	unplain(s);
}

uint32_t rp_sweep_level(const struct rp_sweep *s)
{
	return sat32(s->level);
}

uint64_t rp_sweep_observed_ns(const struct rp_sweep *s)
{
	return s->opened ? s->last_t - s->first_t : 0;
}

uint64_t rp_sweep_unmatched(const struct rp_sweep *s)
{
	return s->unmatched + (s->level < 0 ? (uint64_t)-s->level : 0);
}

/*
 * A level array as the readers see it: ns[c] for c < n, plus @add at level @k (a
 * sweep's pending entry completed, rp_sweep_ns(); k = UINT32_MAX for a plain array).
 */
struct view {
	const uint64_t *ns;
	uint32_t n, k;
	uint64_t add;
};

static inline uint64_t at(const struct view *v, uint32_t c)
{
	return v->ns[c] + (c == v->k ? v->add : 0);
}

static struct view array_view(const uint64_t *ns, uint32_t n)
{
	return (struct view){ ns, n, UINT32_MAX, 0 };
}

static struct view sweep_view(const struct rp_sweep *s)
{
	bool pend = s->opened && (uint64_t)s->level < s->n_alloc;

	return (struct view){ s->ns, s->n_alloc, pend ? (uint32_t)s->level : UINT32_MAX,
			      s->last_t };
}

static uint32_t view_max(const struct view *v)
{
	uint32_t n = v->n;

	while (n > 0 && at(v, n - 1) == 0)
		n--;
	return n > 0 ? n - 1 : 0;
}

static uint32_t view_percentile(const struct view *v, unsigned p_times_100)
{
	uint64_t total = 0, cum = 0;
	struct u128 need;
	uint32_t c;

	if (p_times_100 > 10000)
		p_times_100 = 10000;
	for (c = 0; c < v->n; c++)
		total += at(v, c);
	if (total == 0)
		return 0;
	need = mul64(total, p_times_100);
	for (c = 0; c < v->n; c++) {
		uint64_t x = at(v, c);

		cum += x;
		if (x > 0 && ge128(mul64(cum, 10000), need))
			return c;
	}
	assert(0 && "cum reaches total at the last level held");
	return view_max(v);
}

uint32_t rp_sweep_levels_max(const uint64_t *ns, uint32_t n)
{
	struct view v = array_view(ns, n);

	return view_max(&v);
}

uint32_t rp_sweep_levels_percentile(const uint64_t *ns, uint32_t n, unsigned p_times_100)
{
	struct view v = array_view(ns, n);

	return view_percentile(&v, p_times_100);
}

/*
 * rp_sweep_levels_quantiles() where total * 10000 fits in 64 bits (an observed time
 * under 21 days): the rule cum * 10000 >= total * p is cum >= ceil(total * p / 10000),
 * one comparison a level instead of two 128-bit products. Every threshold is >= 1, so
 * it is only crossed where cum grows (a level held), as the rule asks; a report walks
 * every level of every sweep and window this way (most of its CPU before).
 */
static void quantiles64(const struct view *v, uint32_t top, uint64_t total, const unsigned p[4],
			uint32_t q[4])
{
	uint64_t th[4], cum = 0;
	unsigned k = 0;

	for (int i = 0; i < 4; i++) {
		q[i] = 0;
		th[i] = (total * p[i] + 9999) / 10000;
	}
	for (uint32_t c = 0; c < v->n && c <= top && k < 4; c++) {
		cum += at(v, c);
		while (k < 4 && cum >= th[k])
			q[k++] = c;
	}
}

static void view_quantiles(const struct view *v, uint32_t q[4], uint32_t *max)
{
	static const unsigned p[4] = { 5000, 9000, 9500, 9900 };
	uint32_t top = view_max(v), k = 0;
	uint64_t total = 0, cum = 0;
	struct u128 need[4];

	*max = top;
	for (uint32_t c = 0; c < v->n && c <= top; c++)
		total += at(v, c);
	if (total > 0 && total <= UINT64_MAX / 10000) {
		quantiles64(v, top, total, p, q);
		return;
	}
	for (int i = 0; i < 4; i++) {
		q[i] = 0;
		need[i] = mul64(total, p[i]);
	}
	for (uint32_t c = 0; total > 0 && c < v->n && c <= top && k < 4; c++) {
		uint64_t x = at(v, c);
		struct u128 have;

		cum += x;
		if (x == 0)
			continue;
		have = mul64(cum, 10000);
		while (k < 4 && ge128(have, need[k]))
			q[k++] = c;
	}
}

void rp_sweep_levels_quantiles(const uint64_t *ns, uint32_t n, uint32_t q[4], uint32_t *max)
{
	struct view v = array_view(ns, n);

	view_quantiles(&v, q, max);
}

void rp_sweep_quantiles(const struct rp_sweep *s, uint32_t q[4], uint32_t *max)
{
	struct view v = sweep_view(s);

	view_quantiles(&v, q, max);
}

uint32_t rp_sweep_percentile(const struct rp_sweep *s, unsigned p_times_100)
{
	struct view v = sweep_view(s);

	return view_percentile(&v, p_times_100);
}

uint32_t rp_sweep_max(const struct rp_sweep *s)
{
	struct view v = sweep_view(s);

	return view_max(&v);
}

double rp_sweep_mean(const struct rp_sweep *s)
{
	uint64_t total = rp_sweep_observed_ns(s);
	struct u128 area = { s->excess_hi, s->excess_lo };
	struct view v = sweep_view(s);
	uint32_t top = view_max(&v); /* levels above it add nothing */

	if (total == 0)
		return 0.0;
	/* In 64 bits while the sum fits (the same double: area.hi stays 0), which it
	 * does below days of observed time; else again with 128-bit products. */
	if (area.hi == 0) {
		uint64_t sum = area.lo, x;
		bool over = false;

		for (uint32_t c = 1; c <= top && c < v.n && !over; c++)
			over = __builtin_mul_overflow((uint64_t)c, at(&v, c), &x) ||
			       __builtin_add_overflow(sum, x, &sum);
		if (!over)
			return (double)sum / (double)total;
	}
	for (uint32_t c = 1; c <= top && c < v.n; c++)
		add128(&area, mul64(c, at(&v, c)));
	return ((double)area.hi * 0x1p64 + (double)area.lo) / (double)total;
}

uint32_t rp_sweep_levels(const struct rp_sweep *s, uint64_t *out)
{
	struct view v = sweep_view(s);
	uint32_t max = view_max(&v);

	for (uint32_t c = 0; c < v.n; c++)
		out[c] = at(&v, c);
	return max > 0 || out[0] > 0 ? max + 1 : 0;
}

static inline uint64_t hist_time(const struct rp_sweep *s, int64_t k)
{
	return s->hist_t[hist_index(s, (uint64_t)k)];
}

/*
 * The number (hist_seq's count) of the newest change point at or before @t, which is
 * before the newest HIST_WIN - 1 (rp_sweep_level_at_slow() looks among those); -1
 * if none is kept. Gallop back from there (O(log distance)), then bisect.
 */
#define HIST_WIN 16 /* the halvings below assume 16 */

static int64_t hist_find_far(const struct rp_sweep *s, uint64_t t)
{
	uint32_t n = rp_sweep_hist_n(s);
	uint64_t first = s->hist_seq - n;
	int64_t hi = n, lo, step = 1; /* hist_time(hi) > t; n is +infinity */

	if (n >= HIST_WIN)
		hi = (int64_t)(s->hist_seq - HIST_WIN - first);
	for (;;) {
		lo = hi - step;
		if (lo < 0) {
			lo = -1;
			break;
		}
		if (hist_time(s, lo) <= t)
			break;
		hi = lo;
		step *= 2;
	}
	while (hi - lo > 1) { /* hist_time(lo) <= t < hist_time(hi); -1 is -infinity */
		int64_t mid = lo + (hi - lo) / 2;

		if (hist_time(s, mid) <= t)
			lo = mid;
		else
			hi = mid;
	}
	return lo < 0 ? -1 : (int64_t)(first + (uint64_t)lo);
}

/* rp_sweep_level_at_slow() past the newest HIST_WIN change points. */
__attribute__((noinline)) static int level_at_far(struct rp_sweep *s, uint64_t t, uint32_t *level)
{
	int64_t f = hist_find_far(s, t);

	if (f < 0 && (s->hist_seq > s->hist_cap || s->hist_cap == 0)) {
		s->hist_misses++;
		return -ENOENT;
	}
	*level = f < 0 ? 0 : s->hist_level[(uint32_t)f & s->hist_mask];
	return 0;
}

/*
 * Midpoints of spans just closed are recent: most lie a few change points back (a
 * parent's, past its children's opens and closes). So when the point HIST_WIN back
 * is at or before @t, the answer is among the newest HIST_WIN and four halvings
 * without a branch find it, in few enough registers to need no saves; past them,
 * hist_find_far().
 */
int rp_sweep_level_at_slow(struct rp_sweep *s, uint64_t t, uint32_t *level)
{
	uint32_t mask = s->hist_mask;
	const uint64_t *ht = s->hist_t;
	uint64_t k;

	if (t >= s->last_t) {
		*level = rp_sweep_level(s);
		return 1;
	}
	if (rp_sweep_hist_n(s) >= HIST_WIN) {
		k = s->hist_seq - HIST_WIN;
		if (ht[(uint32_t)k & mask] <= t) { /* the answer is in k .. k + 15 */
			k = ht[(uint32_t)(k + 8) & mask] <= t ? k + 8 : k;
			k = ht[(uint32_t)(k + 4) & mask] <= t ? k + 4 : k;
			k = ht[(uint32_t)(k + 2) & mask] <= t ? k + 2 : k;
			k = ht[(uint32_t)(k + 1) & mask] <= t ? k + 1 : k;
			*level = s->hist_level[(uint32_t)k & mask];
			return 0;
		}
	}
	return level_at_far(s, t, level); /* a tail call: nothing to save here */
}
