// SPDX-License-Identifier: MIT
/*
 * DDSketch (Masson, Rim, Lee, VLDB 2019) with the cubically interpolated index mapping
 * of sketches-java and collapsing-lowest dense stores; the contract, the error bound
 * and the memory bound are in sketch.h.
 *
 * A store's counts are a ring: bucket i lives in slot (i - origin) mod cap, and origin
 * is kept within one cap below lo, so that a slot is one subtraction and at most one
 * correction away. Slots outside the window [lo, hi] are zero, so widening the window
 * (which never makes it wider than cap) finds its new slots empty, and moving the floor
 * up by k touches k slots rather than shifting the array.
 *
 * Widening is planned before anything changes (struct plan): the new window, and new
 * memory if the window no longer fits. Adding falls back to collapsing within the
 * memory it has when allocation fails; merging and add_bucket report -ENOMEM with the
 * sketch unchanged.
 *
 * No libm: the mapping reads the exponent from the bits, the cubic is a polynomial,
 * its inverse is Newton's method, and ln gamma is a series.
 */
#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h> /* isfinite, isnan, NAN, INFINITY: builtins, no libm */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sketch.h"

#define CUBIC_A	  (6.0 / 35.0)
#define CUBIC_B	  (-3.0 / 5.0)
#define CUBIC_C	  (10.0 / 7.0)
#define CUBIC_K	  0.7		  /* max of d ln a / d(e + P(m)), at m = 0 and m = 2/3 */
#define ALPHA_PAD (1.0 - 0x1p-20) /* alpha' = alpha ALPHA_PAD: room for rounding */
#define MANT_MASK ((UINT64_C(1) << 52) - 1)
#define EXP_ONE	  (UINT64_C(1023) << 52)

/* --- the index mapping ------------------------------------------------------------- */

static uint64_t dbits(double v)
{
	uint64_t b;

	memcpy(&b, &v, sizeof(b));
	return b;
}

static double bitsd(uint64_t b)
{
	double v;

	memcpy(&v, &b, sizeof(v));
	return v;
}

static double cubic(double m)
{
	return ((CUBIC_A * m + CUBIC_B) * m + CUBIC_C) * m;
}

static int32_t floor_i32(double x)
{
	int32_t t = (int32_t)x;

	return t - (x < (double)t);
}

/* @b: the bits of a positive normal double. */
static int32_t index_of_bits(const struct rp_sketch *s, uint64_t b)
{
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	double m = bitsd((b & MANT_MASK) | EXP_ONE) - 1.0;

	return floor_i32(((double)e + cubic(m)) * s->multiplier);
}

/* 2^e for a normal exponent. */
static double pow2(int e)
{
	assert(e >= -1022 && e <= 1023);
	return bitsd((uint64_t)(e + 1023) << 52);
}

/*
 * m in [0, 1) with P(m) = f, f in [0, 1). P is increasing and concave on [0, 1] with
 * m <= P(m) <= 10/7 m, so 0.7 f is left of the root and Newton's method climbs to it
 * monotonically and quadratically: six steps from an error of at most 0.3 f.
 */
static double cubic_inverse(double f)
{
	double m = 0.7 * f;

	for (int k = 0; k < 8; k++) {
		double d = (3 * CUBIC_A * m + 2 * CUBIC_B) * m + CUBIC_C;

		m -= (cubic(m) - f) / d;
	}
	return m;
}

/* The lower bound of bucket i, clamped to the normal range. */
static double lower_bound(const struct rp_sketch *s, int64_t i)
{
	double y = (double)i / s->multiplier;
	int e = floor_i32(y);
	double m;

	if (e < -1022)
		return DBL_MIN;
	if (e > 1023)
		return DBL_MAX;
	m = cubic_inverse(y - e);
	if (e == 1023 && m >= 1.0)
		return DBL_MAX;
	return pow2(e) * (1.0 + m);
}

/* The harmonic mean of the bounds: relative error (hi - lo) / (hi + lo) both ways. */
static double bucket_value(const struct rp_sketch *s, int32_t i)
{
	double lo = lower_bound(s, i), hi = lower_bound(s, (int64_t)i + 1);

	if (i == s->index_min)
		lo = DBL_MIN;
	if (i == s->index_max)
		hi = DBL_MAX;
	return lo * (2.0 / (1.0 + lo / hi));
}

/* 2 atanh(x) = ln((1 + x) / (1 - x)), for 0 < x <= 1/2. */
static double ln_gamma(double x)
{
	double x2 = x * x, term = x, sum = 0;

	for (unsigned k = 1; term > 1e-20 * x; k += 2) {
		sum += term / k;
		term *= x2;
	}
	return 2 * sum;
}

static double multiplier_for(double alpha)
{
	return CUBIC_K / ln_gamma(alpha * ALPHA_PAD);
}

/*
 * --- the index by table, at the engine's alpha ---------------------------------------
 *
 * A bucket spans at least 1/50 of a binade's m (1/M of P, P' <= 10/7, M < 35), more
 * than 2^-IX_SUB, so the doubles sharing their exponent and top IX_SUB mantissa bits
 * (a key: the bits >> (52 - IX_SUB)) meet at most one bucket boundary: their index is
 * base, or base + 1 from the first of them whose index_of_bits() is base + 1 on (thr;
 * positive doubles order as their bits do). The table holds (thr, base) per key for
 * the magnitudes [1, 2^64) at RP_SKETCH_ALPHA, made once from index_of_bits() itself.
 * It gives index_of_bits() exactly if that is monotonic around each boundary: the
 * computed argument (e + P(m)) M, below 2300, is within 1e-12 of the exact one, which
 * grows by at least 25 per unit of m, so outside about 200 ulps of m of a boundary
 * both floor alike. The table is checked over 64 ulps either side of every thr when
 * made (else it is not used), and test_sketch_index_table checks 1024 either side.
 */
#define IX_SUB	  6
#define IX_SHIFT  (52 - IX_SUB)
#define IX_E0	  1023 /* the biased exponent of 1 */
#define IX_KEY0	  ((uint64_t)IX_E0 << IX_SUB)
#define IX_N	  (64u << IX_SUB) /* keys of [1, 2^64) */
#define IX_CHECK  64

struct ix_entry {
	uint64_t thr;
	int32_t base;
};

static struct ix_entry ix_tab[IX_N];
static bool ix_ok;
static pthread_once_t ix_once = PTHREAD_ONCE_INIT;

static int32_t index_of_bits(const struct rp_sketch *s, uint64_t b);

/* Key @key's entry: @return false if its doubles meet more than one boundary, or
 * the index is not monotonic within IX_CHECK of the one they meet. */
static bool ix_make(const struct rp_sketch *s, uint32_t key, struct ix_entry *t)
{
	uint64_t lo = (IX_KEY0 + key) << IX_SHIFT, hi = lo + (UINT64_C(1) << IX_SHIFT) - 1;
	int32_t base = index_of_bits(s, lo), top = index_of_bits(s, hi);
	uint64_t a = lo, b = hi; /* index(a) == base, index(b) > base */

	t->base = base;
	if (top == base) {
		t->thr = hi + 1; /* no boundary: never reached by a key's double */
		return true;
	}
	if (top != base + 1)
		return false;
	while (b - a > 1) {
		uint64_t m = a + (b - a) / 2;

		if (index_of_bits(s, m) > base)
			b = m;
		else
			a = m;
	}
	t->thr = b;
	for (uint64_t x = b - IX_CHECK; x < b + IX_CHECK; x++)
		if (x >= lo && x <= hi && index_of_bits(s, x) != base + (x >= b))
			return false;
	return true;
}

static void ix_build(void)
{
	struct rp_sketch s = { .multiplier = multiplier_for(RP_SKETCH_ALPHA) };
	bool ok = true;

	for (uint32_t k = 0; k < IX_N && ok; k++)
		ok = ix_make(&s, k, &ix_tab[k]);
	ix_ok = ok;
}

/* Whether the table holds @s's indexes (made on first use). */
static bool ix_for(const struct rp_sketch *s)
{
	if (s->alpha != RP_SKETCH_ALPHA)
		return false;
	pthread_once(&ix_once, ix_build);
	return ix_ok;
}

/* The index of the bits @b of a double in [1, 2^64), for a sketch with ix_table: its
 * key is IX_KEY0 .. IX_KEY0 + IX_N - 1, an entry of the table. The address is the
 * table's less IX_KEY0 entries (one constant, which a lea gives) plus the key's
 * bytes: &ix_tab[key - IX_KEY0] subtracted first, one instruction more per add. */
static inline int32_t ix_index(uint64_t b)
{
	const struct ix_entry *t = (const struct ix_entry *)(const void *)
		((uintptr_t)ix_tab - IX_KEY0 * sizeof(struct ix_entry) +
		 (uintptr_t)(b >> IX_SHIFT) * sizeof(struct ix_entry));

	return t->base + (b >= t->thr);
}

/* --- stores ------------------------------------------------------------------------- */

static bool store_empty(const struct rp_sketch_store *st)
{
	return st->lo > st->hi;
}

static void store_clear(struct rp_sketch_store *st)
{
	if (st->counts != NULL && !store_empty(st))
		memset(st->counts, 0, (size_t)st->cap * sizeof(*st->counts));
	st->total = 0;
	st->collapsed = 0;
	st->lo = 1;
	st->hi = 0;
	st->origin = 0;
}

static uint32_t slot_of(const struct rp_sketch_store *st, int32_t i)
{
	uint32_t d = (uint32_t)((int64_t)i - st->origin);

	return d < st->cap ? d : d - st->cap;
}

/* Moves origin by whole caps (slots do not change) to within one cap below lo. */
static void rebase(struct rp_sketch_store *st)
{
	int64_t d = (int64_t)st->lo - st->origin;
	int64_t k = d >= 0 ? d / st->cap : -((-d + st->cap - 1) / st->cap);

	st->origin = (int32_t)(st->origin + k * st->cap);
}

/* A window change worked out before anything moves. */
struct plan {
	int32_t lo, hi;
	uint32_t cap; /* > st->cap: grow into mem */
	uint64_t *mem;
};

/*
 * The window after admitting [lo, hi]: never lower than a collapsed floor, raised to
 * @floor_at (a merged store's collapsed floor, or INT32_MIN), never wider than @max.
 */
static void plan_window(const struct rp_sketch_store *st, int32_t lo, int32_t hi, int32_t floor_at,
			uint32_t max, struct plan *p)
{
	int64_t nlo = lo, nhi = hi;

	if (!store_empty(st)) {
		nhi = hi > st->hi ? hi : st->hi;
		nlo = st->collapsed != 0 || lo > st->lo ? st->lo : lo;
	}
	if (nlo < floor_at)
		nlo = floor_at;
	if (nhi - nlo + 1 > max)
		nlo = nhi - max + 1;
	p->lo = (int32_t)nlo;
	p->hi = (int32_t)nhi;
	p->cap = st->cap;
	p->mem = NULL;
}

static uint32_t round_chunk(uint32_t n, uint32_t max)
{
	uint64_t r = ((uint64_t)n + RP_SKETCH_CHUNK - 1) / RP_SKETCH_CHUNK * RP_SKETCH_CHUNK;

	return r > max ? max : (uint32_t)r;
}

/*
 * Allocates what the plan needs: at least an eighth more than before, so that copying
 * is amortized O(1) per bucket, and a cap <= 64 ceil(9 w / 512) for a window of w.
 * @return 0 or -ENOMEM (p->mem stays NULL).
 */
static int plan_alloc(struct plan *p, uint32_t max)
{
	uint32_t need = (uint32_t)((int64_t)p->hi - p->lo + 1);
	uint32_t more = p->cap + p->cap / 8;

	if (need <= p->cap)
		return 0;
	p->cap = round_chunk(need > more ? need : more, max);
	p->mem = calloc(p->cap, sizeof(*p->mem));
	return p->mem != NULL ? 0 : -ENOMEM;
}

/* Folds every bucket below @floor_at into it; the values moved are the collapsed ones. */
static void raise_floor(struct rp_sketch_store *st, int32_t floor_at)
{
	uint64_t moved = 0;
	int32_t end = st->hi < floor_at ? st->hi : floor_at - 1;

	for (int32_t i = st->lo; i <= end; i++) {
		uint32_t k = slot_of(st, i);

		moved += st->counts[k];
		st->counts[k] = 0;
	}
	st->collapsed = moved;
	st->lo = floor_at;
	if (st->hi < floor_at)
		st->hi = floor_at;
	rebase(st);
	st->counts[slot_of(st, floor_at)] += moved;
}

/* Moves the window into the plan's larger ring, with origin at its new lo. */
static void regrow(struct rp_sketch_store *st, const struct plan *p)
{
	if (!store_empty(st)) {
		for (int32_t i = st->lo; i <= st->hi; i++)
			p->mem[i - p->lo] = st->counts[slot_of(st, i)];
	}
	free(st->counts);
	st->counts = p->mem;
	st->cap = p->cap;
	st->origin = p->lo;
}

/* Carries out a plan (its memory allocated, if it needed any). */
static void plan_apply(struct rp_sketch_store *st, const struct plan *p)
{
	if (!store_empty(st) && p->lo > st->lo)
		raise_floor(st, p->lo);
	if (p->mem != NULL)
		regrow(st, p);
	if (store_empty(st)) {
		st->lo = p->lo;
		st->hi = p->hi;
		st->origin = p->lo;
		return;
	}
	if (p->lo < st->lo)
		st->lo = p->lo;
	if (p->hi > st->hi)
		st->hi = p->hi;
	rebase(st);
}

/*
 * Makes room for bucket @i (or collapses so that it lands on the floor). @degrade: on
 * no memory, collapse within the memory there is rather than fail.
 */
static int store_reserve(struct rp_sketch_store *st, int32_t i, uint32_t max, bool degrade)
{
	struct plan p;

	plan_window(st, i, i, INT32_MIN, max, &p);
	if (plan_alloc(&p, max) != 0) {
		if (!degrade || st->cap == 0)
			return -ENOMEM;
		plan_window(st, i, i, INT32_MIN, st->cap, &p);
	}
	plan_apply(st, &p);
	return 0;
}

/* Adds to a bucket inside the window, or to the floor when it lies below. */
static void store_put(struct rp_sketch_store *st, int32_t i, uint64_t n)
{
	if (i < st->lo) {
		i = st->lo;
		st->collapsed += n;
	}
	st->counts[slot_of(st, i)] += n;
	st->total += n;
}

static bool store_add_slow(struct rp_sketch *s, struct rp_sketch_store *st, int32_t i, uint64_t n)
{
	if (store_reserve(st, i, s->max_buckets, true) != 0)
		return false;
	store_put(st, i, n);
	return true;
}

static bool store_add(struct rp_sketch *s, struct rp_sketch_store *st, int32_t i, uint64_t n)
{
	if (i >= st->lo && i <= st->hi) {
		st->counts[slot_of(st, i)] += n;
		st->total += n;
		return true;
	}
	return store_add_slow(s, st, i, n);
}

/* The index of the bucket holding the k-th smallest index, 1 <= k <= total. */
static int32_t store_find(const struct rp_sketch_store *st, uint64_t k)
{
	uint64_t cum = 0;

	assert(k >= 1 && k <= st->total);
	if (k <= st->total / 2) {
		for (int32_t i = st->lo;; i++) {
			cum += st->counts[slot_of(st, i)];
			if (cum >= k)
				return i;
		}
	}
	k = st->total - k + 1;
	for (int32_t i = st->hi;; i--) {
		cum += st->counts[slot_of(st, i)];
		if (cum >= k)
			return i;
	}
}

static uint64_t floor_count(const struct rp_sketch_store *st)
{
	return store_empty(st) ? 0 : st->counts[slot_of(st, st->lo)];
}

static void store_fini(struct rp_sketch_store *st)
{
	free(st->counts);
	memset(st, 0, sizeof(*st));
	st->lo = 1;
}

/* --- side statistics ----------------------------------------------------------------- */

/* |x| by clearing the sign bit (a builtin: one and, no libm). It only feeds the
 * comparison in sum_add(), where -0.0 and +0.0 compare equal. */
static double absd(double x)
{
	return __builtin_fabs(x);
}

static void sum_add(struct rp_sketch *s, double x)
{
	double t = s->sum + x;

	/* An integer sum stays one (rp_sketch_add_ns()'s short path) when x is an integer
	 * and both x and t are below 2^53 in magnitude: then t = S + x exactly, and the
	 * correction below adds (S - t) + x = -x + x, or (x - t) + S = -S + S, exactly +0
	 * to sum_c's +0. A counter's first sample of 0, a merge of an integer sum (its
	 * sum_c +0 adds +0) and a summary's len x calls no longer send every later add
	 * the long way. The conversion is tested only once |x| < 2^53 (in range). */
	s->sum_int = s->sum_int && absd(x) < 0x1p53 && (double)(int64_t)x == x &&
		     absd(t) < 0x1p53;
	if (!isfinite(t)) {
		s->sum_c = 0;
	} else if (absd(s->sum) >= absd(x)) {
		s->sum_c += (s->sum - t) + x;
	} else {
		s->sum_c += (x - t) + s->sum;
	}
	s->sum = t;
}

static void side_add(struct rp_sketch *s, double v, uint64_t n)
{
	s->count += n;
	if (v < s->min)
		s->min = v;
	if (v > s->max)
		s->max = v;
	sum_add(s, n == 1 ? v : v * (double)n);
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* --- life cycle ------------------------------------------------------------------------ */

static bool alpha_ok(double alpha)
{
	return alpha >= RP_SKETCH_ALPHA_MIN && alpha <= RP_SKETCH_ALPHA_MAX;
}

uint32_t rp_sketch_default_buckets(double alpha)
{
	if (!alpha_ok(alpha))
		return 0;
	return (uint32_t)floor_i32(64.0 * multiplier_for(alpha)) + 1;
}

int rp_sketch_init_bounded(struct rp_sketch *s, double alpha, uint32_t max_buckets)
{
	uint32_t range;

	if (!alpha_ok(alpha) || max_buckets == 0)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->alpha = alpha;
	s->multiplier = multiplier_for(alpha);
	s->index_min = index_of_bits(s, dbits(DBL_MIN));
	s->index_max = index_of_bits(s, dbits(DBL_MAX));
	range = (uint32_t)((int64_t)s->index_max - s->index_min + 1);
	s->max_buckets = max_buckets < range ? max_buckets : range;
	store_clear(&s->neg);
	store_clear(&s->pos);
	s->min = INFINITY;
	s->max = -INFINITY;
	s->sum_int = true; /* 0, and sum_c +0 */
	s->ix_table = ix_for(s);
	return 0;
}

int rp_sketch_init(struct rp_sketch *s, double alpha)
{
	return rp_sketch_init_bounded(s, alpha, rp_sketch_default_buckets(alpha));
}

void rp_sketch_fini(struct rp_sketch *s)
{
	if (s == NULL)
		return;
	store_fini(&s->neg);
	store_fini(&s->pos);
}

struct rp_sketch *rp_sketch_create(double alpha)
{
	struct rp_sketch *s = malloc(sizeof(*s));

	if (s != NULL && rp_sketch_init(s, alpha) != 0) {
		free(s);
		s = NULL;
	}
	return s;
}

void rp_sketch_destroy(struct rp_sketch *s)
{
	rp_sketch_fini(s);
	free(s);
}

void rp_sketch_reset(struct rp_sketch *s)
{
	store_clear(&s->neg);
	store_clear(&s->pos);
	s->zero = 0;
	s->count = 0;
	s->dropped = 0;
	s->min = INFINITY;
	s->max = -INFINITY;
	s->sum = 0;
	s->sum_c = 0;
	s->sum_int = true;
}

/* --- adding ---------------------------------------------------------------------------- */

void rp_sketch_add_n(struct rp_sketch *s, double v, uint64_t n)
{
	uint64_t b = dbits(v);
	uint32_t ex = (uint32_t)(b >> 52) & 0x7ff;

	if (n == 0)
		return;
	if (ex == 0x7ff || n > UINT64_MAX - s->count) {
		s->dropped = sat_add(s->dropped, n);
		return;
	}
	if (ex == 0) {
		s->zero += n;
	} else if (!store_add(s, b >> 63 ? &s->neg : &s->pos, index_of_bits(s, b), n)) {
		s->dropped = sat_add(s->dropped, n);
		return;
	}
	side_add(s, v, n);
}

/* rp_sketch_add()'s rare cases: kept out of line so that the common add, one per
 * closed span, saves no registers. */
__attribute__((noinline, cold)) static void add_one_slow(struct rp_sketch *s, double v)
{
	rp_sketch_add_n(s, v, 1);
}

/* rp_sketch_add_n(s, v, 1), with the common case (a normal value whose bucket the
 * store already spans) first. */
void rp_sketch_add(struct rp_sketch *s, double v)
{
	uint64_t b = dbits(v);
	uint32_t ex = (uint32_t)(b >> 52) & 0x7ff;
	struct rp_sketch_store *st = b >> 63 ? &s->neg : &s->pos;
	int32_t i;

	if (ex == 0 || ex == 0x7ff || s->count == UINT64_MAX) {
		add_one_slow(s, v);
		return;
	}
	i = index_of_bits(s, b);
	if (i < st->lo || i > st->hi) {
		add_one_slow(s, v);
		return;
	}
	st->counts[slot_of(st, i)]++;
	st->total++;
	side_add(s, v, 1);
}

/*
 * rp_sketch_add() of (double)@ns. A positive integer converts to a normal double
 * >= 1 (0 goes to the zero bucket, the slow way), so: the positive store, no NaN
 * or infinity; its exponent e >= 0 and 0 <= cubic(m) < 1 make the index's
 * argument >= 0, where floor is the truncation; and |x| is x in the sum.
 * Below 2^63 the conversion is the signed one (one instruction); 0 and larger
 * values take the slow way.
 *
 * The sum: while sum_int holds, sum S is an integer with |S| < 2^53 and v an
 * integer (every double >= 2^53 is one). Rounding is monotonic and 2^53 is a double,
 * so t = fl(S + v) < 2^53 means S + v < 2^53, and S + v > S > -2^53 (v > 0): an
 * integer a double holds, t = S + v exactly. Then sum_add()'s correction is exactly
 * 0 ((S - t) + v = -v + v, or (v - t) + S = -S + S) and t is finite: it would leave
 * sum_c +0 and set sum = t, which is all this path does; and the new sum is again
 * an integer below 2^53 in magnitude.
 *
 * add_ns_side() is the part past the buckets: @v = (double)ns > 0 counted,
 * s->count < UINT64_MAX.
 */
static inline void add_ns_side(struct rp_sketch *s, double v)
{
	double t;

	s->count++;
	if (v < s->min)
		s->min = v;
	if (v > s->max)
		s->max = v;
	t = s->sum + v;
	if (__builtin_expect(!s->sum_int || !(t < 0x1p53), 0)) { /* sum_add(), |v| = v */
		s->sum_int = false;
		if (!isfinite(t))
			s->sum_c = 0;
		else if (absd(s->sum) >= v)
			s->sum_c += (s->sum - t) + v;
		else
			s->sum_c += (v - t) + s->sum;
	}
	s->sum = t; /* else exact: see above */
}

/* rp_sketch_add_ns()'s value outside the positive store's window: store_add() as
 * rp_sketch_add_n() does it, then the side statistics; on failure the value is
 * dropped, as rp_sketch_add_n() drops it. The sum is add_ns_side()'s, so a widening
 * keeps sum_int. Out of line and reached last, as a tail call: the common add calls
 * nothing, so it needs no stack frame. */
__attribute__((noinline, cold)) static void add_ns_far(struct rp_sketch *s, double v, int32_t i)
{
	if (!store_add_slow(s, &s->pos, i, 1)) {
		s->dropped = sat_add(s->dropped, 1);
		return;
	}
	add_ns_side(s, v);
}

/* The path past the index: @v = (double)ns > 0, @i its bucket's index for
 * s->multiplier, s->count < UINT64_MAX. */
static inline void add_ns_at(struct rp_sketch *s, double v, int32_t i)
{
	struct rp_sketch_store *st = &s->pos;

	if (__builtin_expect(i < st->lo || i > st->hi, 0)) {
		add_ns_far(s, v, i);
		return;
	}
	st->counts[slot_of(st, i)]++;
	st->total++;
	add_ns_side(s, v);
}

/* The bucket index of a positive ns for @multiplier (index_of_bits(), truncating: the
 * argument is >= 0). @b: the bits of (double)ns. */
static inline int32_t ns_index(uint64_t b, double multiplier)
{
	double x = bitsd((b & MANT_MASK) | EXP_ONE) - 1.0;

	return (int32_t)(((double)(int)((b >> 52) - 1023) + cubic(x)) * multiplier);
}

/* The bucket index of a positive ns whose double has bits @b, for @s. */
static inline int32_t ns_index_of(const struct rp_sketch *s, uint64_t b)
{
	return s->ix_table ? ix_index(b) : ns_index(b, s->multiplier);
}

void rp_sketch_add_ns(struct rp_sketch *s, uint64_t ns)
{
	double v;

	if ((int64_t)ns <= 0 || s->count == UINT64_MAX) {
		add_one_slow(s, (double)ns);
		return;
	}
	v = (double)(int64_t)ns;
	add_ns_at(s, v, ns_index_of(s, dbits(v)));
}

void rp_sketch_add_ns2(struct rp_sketch *a, struct rp_sketch *b, uint64_t ns)
{
	double v;
	int32_t i;

	if ((int64_t)ns <= 0 || a->count == UINT64_MAX || b->count == UINT64_MAX ||
	    a->multiplier != b->multiplier) {
		rp_sketch_add_ns(a, ns);
		rp_sketch_add_ns(b, ns);
		return;
	}
	v = (double)(int64_t)ns;
	i = ns_index_of(a, dbits(v)); /* b's too: the index is v's and M's */
	add_ns_at(a, v, i);
	add_ns_at(b, v, i);
}

/* --- queries ----------------------------------------------------------------------------- */

/* The bucket's value, clamped to the exact [min, max]: x_r lies there, so the
 * clamp only lowers the error, and no quantile reads above the maximum (a bucket's
 * value is its midpoint, which can be past the largest value in it). */
static double clamp_exact(const struct rp_sketch *s, double v)
{
	if (v > s->max)
		return s->max;
	return v < s->min ? s->min : v;
}

double rp_sketch_quantile(const struct rp_sketch *s, double q)
{
	uint64_t r;

	if (!(q >= 0 && q <= 1) || s->count == 0)
		return NAN;
	r = rp_sketch_rank(s->count, q);
	if (r <= s->neg.total)
		return clamp_exact(s, -bucket_value(s, store_find(&s->neg, s->neg.total - r + 1)));
	r -= s->neg.total;
	if (r <= s->zero)
		return clamp_exact(s, 0.0);
	return clamp_exact(s, bucket_value(s, store_find(&s->pos, r - s->zero)));
}

bool rp_sketch_quantile_bounded(const struct rp_sketch *s, double q)
{
	uint64_t r;

	if (!(q >= 0 && q <= 1) || s->count == 0)
		return false;
	r = rp_sketch_rank(s->count, q);
	if (r <= s->neg.total)
		return r <= s->neg.total - s->neg.collapsed;
	r -= s->neg.total;
	if (r <= s->zero)
		return true;
	return r - s->zero > s->pos.collapsed;
}

uint64_t rp_sketch_count(const struct rp_sketch *s)
{
	return s->count;
}

double rp_sketch_min(const struct rp_sketch *s)
{
	return s->count != 0 ? s->min : NAN;
}

double rp_sketch_max(const struct rp_sketch *s)
{
	return s->count != 0 ? s->max : NAN;
}

double rp_sketch_sum(const struct rp_sketch *s)
{
	return s->sum + s->sum_c;
}

uint64_t rp_sketch_collapsed(const struct rp_sketch *s)
{
	return s->neg.collapsed + s->pos.collapsed;
}

uint64_t rp_sketch_dropped(const struct rp_sketch *s)
{
	return s->dropped;
}

size_t rp_sketch_bytes(const struct rp_sketch *s)
{
	return sizeof(*s) + ((size_t)s->neg.cap + s->pos.cap) * sizeof(uint64_t);
}

int32_t rp_sketch_index_ns(const struct rp_sketch *s, double a)
{
	uint64_t b = dbits(a);

	return s->ix_table && a >= 1.0 && a < 0x1p64 ? ix_index(b) : index_of_bits(s, b);
}

int32_t rp_sketch_index(const struct rp_sketch *s, double a)
{
	assert(a >= DBL_MIN && a <= DBL_MAX);
	return index_of_bits(s, dbits(a));
}

double rp_sketch_bucket_lower(const struct rp_sketch *s, int32_t index)
{
	return lower_bound(s, index);
}

double rp_sketch_bucket_value(const struct rp_sketch *s, int32_t index)
{
	assert(index >= s->index_min && index <= s->index_max);
	return bucket_value(s, index);
}

/* --- merging ----------------------------------------------------------------------------- */

/* The window @dst needs for @src: its floor raised to a collapsed source's floor. */
static void plan_merge(const struct rp_sketch_store *dst, const struct rp_sketch_store *src,
		       uint32_t max, struct plan *p)
{
	int32_t floor_at = src->collapsed != 0 ? src->lo : INT32_MIN;

	plan_window(dst, src->lo, src->hi, floor_at, max, p);
}

/* Adds @src's buckets into @dst's planned window (@src may be @dst). */
static void store_merge(struct rp_sketch_store *dst, const struct rp_sketch_store *src,
			const struct plan *p)
{
	int32_t slo = src->lo, shi = src->hi;
	uint64_t scollapsed = src->collapsed;

	plan_apply(dst, p);
	for (int32_t i = slo; i <= shi; i++) {
		uint64_t c = src->counts[slot_of(src, i)];

		if (c != 0)
			store_put(dst, i, c);
	}
	/* Moved values still at the source floor, now the floor: still moved. */
	if (scollapsed != 0 && dst->lo == slo)
		dst->collapsed += scollapsed;
}

static int merge_stores(struct rp_sketch *dst, const struct rp_sketch *src)
{
	struct plan pn = { 0 }, pp = { 0 };
	bool n = !store_empty(&src->neg), p = !store_empty(&src->pos);

	if (n)
		plan_merge(&dst->neg, &src->neg, dst->max_buckets, &pn);
	if (p)
		plan_merge(&dst->pos, &src->pos, dst->max_buckets, &pp);
	if ((n && plan_alloc(&pn, dst->max_buckets) != 0) ||
	    (p && plan_alloc(&pp, dst->max_buckets) != 0)) {
		free(pn.mem);
		free(pp.mem);
		return -ENOMEM;
	}
	if (n)
		store_merge(&dst->neg, &src->neg, &pn);
	if (p)
		store_merge(&dst->pos, &src->pos, &pp);
	return 0;
}

int rp_sketch_merge(struct rp_sketch *dst, const struct rp_sketch *src)
{
	double ssum = src->sum, ssum_c = src->sum_c;
	int err;

	if (dst->alpha != src->alpha)
		return -EINVAL;
	if (src->count > UINT64_MAX - dst->count)
		return -EOVERFLOW;
	err = merge_stores(dst, src);
	if (err != 0)
		return err;
	dst->zero += src->zero;
	dst->count += src->count;
	dst->dropped = sat_add(dst->dropped, src->dropped);
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	sum_add(dst, ssum);
	sum_add(dst, ssum_c);
	return 0;
}

/* --- serialization ----------------------------------------------------------------------- */

static int store_foreach(const struct rp_sketch_store *st, int sign, rp_sketch_bucket_fn fn,
			 void *ctx)
{
	if (store_empty(st))
		return 0;
	for (int32_t i = st->lo; i <= st->hi; i++) {
		uint64_t c = st->counts[slot_of(st, i)];
		int ret = c != 0 ? fn(ctx, sign, i, c) : 0;

		if (ret != 0)
			return ret;
	}
	return 0;
}

int rp_sketch_foreach_bucket(const struct rp_sketch *s, rp_sketch_bucket_fn fn, void *ctx)
{
	int ret = store_foreach(&s->neg, -1, fn, ctx);

	if (ret == 0 && s->zero != 0)
		ret = fn(ctx, 0, 0, s->zero);
	if (ret == 0)
		ret = store_foreach(&s->pos, 1, fn, ctx);
	return ret;
}

/* A bucket's count from untrusted input; @values: move min, max and sum by its value. */
static int add_bucket(struct rp_sketch *s, int sign, int32_t index, uint64_t count, bool values)
{
	struct rp_sketch_store *st = sign < 0 ? &s->neg : &s->pos;

	if (sign < -1 || sign > 1 || (sign == 0 && index != 0))
		return -EINVAL;
	if (sign != 0 && (index < s->index_min || index > s->index_max))
		return -EINVAL;
	if (count > UINT64_MAX - s->count)
		return -EOVERFLOW;
	if (count == 0)
		return 0;
	if (sign == 0)
		s->zero += count;
	else if ((index < st->lo || index > st->hi) &&
		 store_reserve(st, index, s->max_buckets, false) != 0)
		return -ENOMEM;
	else
		store_put(st, index, count);
	if (!values)
		s->count += count;
	else if (sign == 0)
		side_add(s, 0.0, count);
	else
		side_add(s, sign < 0 ? -bucket_value(s, index) : bucket_value(s, index), count);
	return 0;
}

int rp_sketch_add_bucket(struct rp_sketch *s, int sign, int32_t index, uint64_t count)
{
	return add_bucket(s, sign, index, count, true);
}

int rp_sketch_add_bucket_count(struct rp_sketch *s, int sign, int32_t index, uint64_t count)
{
	return add_bucket(s, sign, index, count, false);
}

void rp_sketch_get_summary(const struct rp_sketch *s, struct rp_sketch_summary *out)
{
	out->count = s->count;
	out->collapsed_neg = s->neg.collapsed;
	out->collapsed_pos = s->pos.collapsed;
	out->dropped = s->dropped;
	out->min = rp_sketch_min(s);
	out->max = rp_sketch_max(s);
	out->sum = rp_sketch_sum(s);
}

/* A restored collapsed count: within what the rebuild collapsed, or the floor bucket. */
static bool collapsed_ok(const struct rp_sketch_store *st, uint64_t c)
{
	return c <= (st->collapsed != 0 ? st->collapsed : floor_count(st));
}

int rp_sketch_set_summary(struct rp_sketch *s, const struct rp_sketch_summary *in)
{
	if (in->count != s->count || !collapsed_ok(&s->neg, in->collapsed_neg) ||
	    !collapsed_ok(&s->pos, in->collapsed_pos))
		return -EINVAL;
	if (s->count != 0 &&
	    (!isfinite(in->min) || !isfinite(in->max) || in->min > in->max || isnan(in->sum)))
		return -EINVAL;
	if (in->collapsed_neg > s->neg.collapsed)
		s->neg.collapsed = in->collapsed_neg;
	if (in->collapsed_pos > s->pos.collapsed)
		s->pos.collapsed = in->collapsed_pos;
	s->dropped = in->dropped;
	if (s->count != 0) {
		s->min = in->min;
		s->max = in->max;
		s->sum = in->sum;
		s->sum_c = 0;
		s->sum_int = false; /* whatever the file said */
	}
	return 0;
}
