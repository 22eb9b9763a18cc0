/* SPDX-License-Identifier: MIT */
/*
 * Latency sketches: a mergeable log-bucket quantile sketch with relative accuracy
 * alpha (DDSketch: Masson, Rim, Lee, "DDSketch: A Fast and Fully-Mergeable Quantile
 * Sketch with Relative-Error Guarantees", VLDB 2019). One per span name and category
 * for durations in ns, and for counter values; all-time and per sub-window.
 *
 * Buckets. A magnitude a = 2^e (1 + m), m in [0, 1), DBL_MIN <= a <= DBL_MAX, goes to
 * bucket floor(M * (e + P(m))), where P(m) = (6/35 m^2 - 3/5 m + 10/7) m is the cubic
 * stand-in for log2(1 + m) of DDSketch's CubicallyInterpolatedMapping (sketches-java):
 * no libm, a few flops. P(0) = 0, P(1) = 1, and d ln a / d(e + P) <= 7/10, so a bucket
 * spans a ratio of at most exp(0.7 / M) = gamma' = (1 + alpha') / (1 - alpha'), with
 * M = 0.7 / ln gamma' buckets per binade (34.999 at alpha = 1%) and alpha' = alpha (1 -
 * 2^-20): the slack absorbs rounding. A bucket's value is the harmonic mean 2 lo hi /
 * (lo + hi) of its bounds, within alpha' of everything in it. Positive values and
 * negative values (by magnitude) have a store each; |v| < DBL_MIN (0, -0, subnormals)
 * counts in the zero bucket. NaN and infinities are not recorded (rp_sketch_dropped).
 * What an index means is part of the snapshot format (the cubic, M from alpha, the
 * slack): it is the same on every host, and changing it is a major version change.
 *
 * Quantile. With n values sorted x_1 <= ... <= x_n, the q-quantile is the lower rank
 * order statistic x_r, r = rp_sketch_rank(n, q) = 1 + floor(q (n - 1)) computed in
 * double (clamped to n). rp_sketch_quantile() returns the value of the bucket holding
 * rank r (negatives first, by decreasing magnitude, then zeros, then positives), so
 *	|rp_sketch_quantile(s, q) - x_r| <= alpha |x_r|
 * whenever rp_sketch_quantile_bounded(s, q), that is unless x_r is a collapsed value
 * (below) or 0 < |x_r| < DBL_MIN (then 0 is returned: absolute error < DBL_MIN). The
 * estimate depends on the buckets only (not on the exact min and max), so a merged
 * sketch answers exactly as a sketch of the union would (when nothing collapsed), and
 * a sketch rebuilt from its buckets answers identically. The value is clamped to the
 * exact [min, max] (kept through merges and rebuilds), so p50 never reads above max.
 *
 * Memory. A store is a ring of uint64_t counts over the index window [lo, hi] it has
 * seen, allocated on demand (by an eighth or more, in multiples of RP_SKETCH_CHUNK
 * buckets) and capped at max_buckets (default rp_sketch_default_buckets(): every
 * magnitude in [1, 2^64], so every nonzero int64 or uint64 value, fits; 2240 buckets at
 * alpha = 1%). Magnitudes in [a, b] span w <= floor(M (log2(b / a) + 0.0025)) + 2
 * buckets (P strays from log2 by 0.0025 at most). With w_neg, w_pos the widest windows
 * since init (reset keeps the memory):
 *	rp_sketch_bytes(s) = sizeof(struct rp_sketch) + 8 (cap_neg + cap_pos),
 *	cap_x <= min(max_buckets, 64 ceil(9 w_x / 512)) <= max_buckets,
 * e.g. 1 ns .. 1 h at alpha = 1%: w <= 1462, at most 13312 bytes of buckets; the bound
 * at the default cap is sizeof + 35840 bytes, whatever the data.
 *
 * Collapsing. When a window would grow past max_buckets, the buckets of the smallest
 * magnitudes fold into the lowest kept one, the floor (DDSketch's collapsing-lowest
 * store; largest magnitudes, the tail, keep their accuracy). Invariant: the values
 * counted in a store's floor bucket that belong below it are exactly the values whose
 * own bucket is below the floor, and there are st->collapsed of them; so those are the
 * st->collapsed smallest magnitudes of the store, every other value sits in its own
 * bucket, and the order of buckets is the order of values. Hence the bound holds for
 * every rank except the pos.collapsed smallest positive values and the neg.collapsed
 * negative values nearest zero (rp_sketch_quantile_bounded() says which). Merging keeps
 * the invariant, whatever the two caps: the destination's floor is first raised to the
 * source's floor when the source has collapsed values. Merge is exact (buckets add)
 * whenever nothing collapses.
 *
 * Cost. Adding is O(1): bit extraction, a cubic, one ring slot. Growing a window copies
 * it, geometrically (amortized O(1) per bucket); moving the floor up by k costs
 * O(min(k, max_buckets)) and the floor only rises, so that is bounded over a sketch's
 * life too. No allocation once the window stops widening. Not thread-safe.
 */
#ifndef RP_ENGINE_SKETCH_H
#define RP_ENGINE_SKETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RP_SKETCH_ALPHA	    0.01 /* the engine's relative accuracy */
#define RP_SKETCH_ALPHA_MIN 1e-5
#define RP_SKETCH_ALPHA_MAX 0.5
#define RP_SKETCH_CHUNK	    64u /* stores grow in multiples of this many buckets */

/* One sign's buckets, by magnitude index. Empty when lo > hi. */
struct rp_sketch_store {
	uint64_t *counts;   /* ring of cap buckets, owned; slots outside [lo, hi] are 0 */
	uint64_t total;	    /* sum of counts */
	uint64_t collapsed; /* values in bucket lo whose own bucket is below lo */
	uint32_t cap;	    /* buckets allocated */
	int32_t origin;	    /* counts[(i - origin) mod cap]; origin <= lo < origin + cap */
	int32_t lo, hi;	    /* the index window; hi - lo < cap */
};

struct rp_sketch {
	double alpha;
	double multiplier;	      /* M: buckets per binade */
	int32_t index_min, index_max; /* the buckets of DBL_MIN and DBL_MAX */
	uint32_t max_buckets;	      /* per store */
	bool sum_int;		      /* sum is an integer of magnitude below 2^53 and
					 sum_c is +0: kept by every add that keeps it so
					 (rp_sketch_add_ns()'s short path relies on it) */
	bool ix_table;		      /* rp_sketch_add_ns() finds indexes in a table (the
					 engine's alpha; sketch.c) */
	struct rp_sketch_store neg, pos;
	uint64_t zero;	   /* |v| < DBL_MIN */
	uint64_t count;	   /* neg.total + zero + pos.total */
	uint64_t dropped;  /* NaN, infinities, count overflow, out of memory */
	double min, max;   /* exact, over the values recorded */
	double sum, sum_c; /* Neumaier-compensated sum: sum + sum_c */
};

/* What the buckets do not carry: for snapshots, beside the buckets. */
struct rp_sketch_summary {
	uint64_t count;
	uint64_t collapsed_neg, collapsed_pos;
	uint64_t dropped;
	double min, max, sum; /* min, max: NaN when count == 0 */
};

/**
 * rp_sketch_bucket_fn - one non-empty bucket.
 * @sign: -1 (negative store), 0 (zero bucket, @index 0) or 1 (positive store).
 * @return 0 to go on; anything else stops the walk and is returned by it.
 */
typedef int (*rp_sketch_bucket_fn)(void *ctx, int sign, int32_t index, uint64_t count);

/**
 * rp_sketch_rank() - the 1-based rank of the q-quantile of n values: 1 + floor(q (n-1)).
 * @q: in [0, 1]. @n: > 0.
 */
static inline uint64_t rp_sketch_rank(uint64_t n, double q)
{
	uint64_t r = 1 + (uint64_t)(q * (double)(n - 1));

	return r > n ? n : r;
}

/**
 * rp_sketch_default_buckets() - the default cap per store: floor(64 M) + 1, the
 * buckets of [1, 2^64]. @return 0 if @alpha is out of range.
 */
uint32_t rp_sketch_default_buckets(double alpha);

/**
 * rp_sketch_init() - an empty sketch in caller memory, default cap; allocates nothing
 * until the first value.
 * @alpha: relative accuracy, in [RP_SKETCH_ALPHA_MIN, RP_SKETCH_ALPHA_MAX].
 * @return 0 or -EINVAL.
 */
int rp_sketch_init(struct rp_sketch *s, double alpha);

/**
 * rp_sketch_init_bounded() - as rp_sketch_init(), at most @max_buckets per store
 * (>= 1; larger than the whole index range is cut to it). @return 0 or -EINVAL.
 */
int rp_sketch_init_bounded(struct rp_sketch *s, double alpha, uint32_t max_buckets);

/* Frees the stores; @s can be initialised again. NULL is fine. */
void rp_sketch_fini(struct rp_sketch *s);

/* @return a sketch from malloc (rp_sketch_init()), NULL on bad @alpha or no memory. */
struct rp_sketch *rp_sketch_create(double alpha);

/* Finis and frees a sketch from rp_sketch_create(). NULL is fine. */
void rp_sketch_destroy(struct rp_sketch *s);

/* Empties @s and keeps its memory (and its alpha and cap). */
void rp_sketch_reset(struct rp_sketch *s);

/**
 * rp_sketch_add_n() - record @n copies of @v (@n = 0: nothing). NaN, +-inf, a count
 * that would overflow, and allocation failure for a store with no memory yet add @n to
 * rp_sketch_dropped() instead. When a store with memory cannot grow, it collapses
 * within the memory it has, as if that were its cap (counted in rp_sketch_collapsed()).
 */
void rp_sketch_add_n(struct rp_sketch *s, double v, uint64_t n);

/* rp_sketch_add_n(s, v, 1). */
void rp_sketch_add(struct rp_sketch *s, double v);

/* rp_sketch_add(s, (double)ns) for a duration, with the same result: a value that
 * cannot be negative, NaN nor infinite skips those tests (one per closed span). */
void rp_sketch_add_ns(struct rp_sketch *s, uint64_t ns);

/* rp_sketch_add_ns(a, ns) then rp_sketch_add_ns(b, ns): a duration into two sketches
 * (a name's and its category's), its bucket index computed once when their alphas
 * are the same (the index depends only on the value and the alpha). */
void rp_sketch_add_ns2(struct rp_sketch *a, struct rp_sketch *b, uint64_t ns);

/**
 * rp_sketch_quantile() - the q-quantile estimate (see the top of this file).
 * @return NaN when @s is empty or @q is not in [0, 1].
 */
double rp_sketch_quantile(const struct rp_sketch *s, double q);

/* @return whether the alpha bound holds for rp_sketch_quantile(s, q); false if empty. */
bool rp_sketch_quantile_bounded(const struct rp_sketch *s, double q);

uint64_t rp_sketch_count(const struct rp_sketch *s);
/*
 * Over the recorded values: min and max exact (NaN when empty); sum compensated
 * (Neumaier), so exact for integers while it stays below 2^53 (104 days in ns).
 */
double rp_sketch_min(const struct rp_sketch *s);
double rp_sketch_max(const struct rp_sketch *s);
double rp_sketch_sum(const struct rp_sketch *s);
/* Values counted in a floor bucket below their own (both stores). */
uint64_t rp_sketch_collapsed(const struct rp_sketch *s);
uint64_t rp_sketch_dropped(const struct rp_sketch *s);

/**
 * rp_sketch_merge() - add every value of @src to @dst (@src may be @dst).
 * @return 0; -EINVAL if the alphas differ; -EOVERFLOW if the count would overflow;
 * -ENOMEM. On error @dst is unchanged.
 */
int rp_sketch_merge(struct rp_sketch *dst, const struct rp_sketch *src);

/**
 * rp_sketch_foreach_bucket() - call @fn for each non-empty bucket: the negative store by
 * increasing index, the zero bucket, the positive store by increasing index.
 * @return 0, or the first non-zero return of @fn.
 */
int rp_sketch_foreach_bucket(const struct rp_sketch *s, rp_sketch_bucket_fn fn, void *ctx);

/**
 * rp_sketch_add_bucket() - add @count values to a bucket, as rp_sketch_foreach_bucket()
 * gave it; for rebuilding a sketch from untrusted input. min, max and sum move by the
 * bucket's value until rp_sketch_set_summary() sets them. Collapses like adding.
 * @return 0; -EINVAL for a @sign not in {-1, 0, 1}, an index outside [index_min,
 * index_max] (0 for the zero bucket); -EOVERFLOW if the count would overflow; -ENOMEM.
 */
int rp_sketch_add_bucket(struct rp_sketch *s, int sign, int32_t index, uint64_t count);

/**
 * rp_sketch_add_bucket_count() - rp_sketch_add_bucket() for a rebuild that ends with
 * rp_sketch_set_summary(): the counts only, min, max and sum untouched (computing each
 * bucket's value was most of the cost of reading a snapshot). Same checks and returns.
 */
int rp_sketch_add_bucket_count(struct rp_sketch *s, int sign, int32_t index, uint64_t count);

void rp_sketch_get_summary(const struct rp_sketch *s, struct rp_sketch_summary *out);

/**
 * rp_sketch_set_summary() - after rebuilding @s from buckets (starting empty), restore
 * what the buckets do not carry. Untrusted input is checked: @in->count must equal the
 * buckets' count, min <= max finite and sum not NaN when non-empty, and a collapsed
 * count can be no more than the store's floor bucket holds (or than the rebuild itself
 * collapsed, if it did). @return 0 or -EINVAL (then @s is unchanged).
 */
int rp_sketch_set_summary(struct rp_sketch *s, const struct rp_sketch_summary *in);

/* @return bytes in use: the struct and both stores' buckets (not malloc's overhead). */
size_t rp_sketch_bytes(const struct rp_sketch *s);

/* The bucket of a magnitude @a, DBL_MIN <= a <= DBL_MAX. */
int32_t rp_sketch_index(const struct rp_sketch *s, double a);

/* rp_sketch_index() as rp_sketch_add_ns() finds it for 1 <= @a < 2^64 (by table at
 * the engine's alpha): the same, which test_sketch checks. */
int32_t rp_sketch_index_ns(const struct rp_sketch *s, double a);

/* The lower bound of bucket @index (clamped to [DBL_MIN, DBL_MAX]). */
double rp_sketch_bucket_lower(const struct rp_sketch *s, int32_t index);

/* The value a quantile in bucket @index reports (a magnitude). */
double rp_sketch_bucket_value(const struct rp_sketch *s, int32_t index);

#endif
