// SPDX-License-Identifier: MIT
/*
 * Latency sketches (engine/analyses/sketch.c). The oracle is the data itself, sorted: for each
 * q of qs[] and of a 1001-point grid, the exact order statistic x_r, r = 1 + floor(q
 * (n - 1)) computed in double as sketch.h defines it, and every estimate must satisfy
 * |estimate - x_r| <= alpha |x_r| (no tolerance: the sketch keeps its own slack for
 * rounding). Data sets come from fixed seeds: constants, bimodal 1 us / 1 s, Pareto,
 * lognormal, uniform, log-uniform 1 ns .. 1 h, values on and beside bucket boundaries,
 * the extremes of the double range, mixed-sign counters with zeros, 3M samples.
 *
 * Merging is checked against the sketch of the whole (identical buckets, identical
 * answers) and against the exact order statistics; serialization by a round trip
 * through foreach/add_bucket; memory against the formula in sketch.h. Collapsing (a
 * small cap) is checked against its invariant, recomputed here: the collapsed count is
 * the number of values whose bucket lies below the floor, the bound holds for every
 * other rank, and rp_sketch_quantile_bounded() says exactly which ranks those are.
 *
 * The random generators use test-local log2/exp2 (series), since nothing links libm.
 */
#include "support.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "sketch.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define LN2	      0.69314718055994530942
#define HOUR_NS	      3.6e12
#define GRID	      1000

static const double qs[] = { 0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1 };

/* --- random numbers, log2, exp2 ---------------------------------------------------- */

static uint64_t rng;

static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

/* Uniform in (0, 1]. */
static double unif(void)
{
	return ((double)(rnd() >> 11) + 1.0) * 0x1p-53;
}

static double from_bits(uint64_t b)
{
	double v;

	memcpy(&v, &b, sizeof(v));
	return v;
}

static uint64_t to_bits(double v)
{
	uint64_t b;

	memcpy(&b, &v, sizeof(b));
	return b;
}

/* The next double up or down, for positive finite x. */
static double next_up(double x)
{
	return from_bits(to_bits(x) + 1);
}

static double next_down(double x)
{
	return from_bits(to_bits(x) - 1);
}

/* log2 of a positive normal double: exponent plus 2 atanh((m - 1) / (m + 1)) / ln 2. */
static double tlog2(double x)
{
	uint64_t b = to_bits(x);
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	double m = from_bits((b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1023) << 52));
	double t, t2, term, sum = 0;

	if (m > 1.4142135623730951) {
		m /= 2;
		e++;
	}
	t = (m - 1) / (m + 1);
	t2 = t * t;
	term = t;
	for (int k = 1; k < 61; k += 2) {
		sum += term / k;
		term *= t2;
	}
	return e + 2 * sum / LN2;
}

/* 2^y for |y| < 1000: 2^floor(y) from the bits times a Taylor series. */
static double texp2(double y)
{
	int64_t k = (int64_t)y;
	double f, term = 1, sum = 1;

	if ((double)k > y)
		k--;
	f = (y - (double)k) * LN2;
	for (int i = 1; i < 30; i++) {
		term *= f / i;
		sum += term;
	}
	return sum * from_bits((uint64_t)(k + 1023) << 52);
}

/* Roughly normal: Irwin-Hall with 12 terms. */
static double gauss(void)
{
	double z = -6;

	for (int i = 0; i < 12; i++)
		z += unif();
	return z;
}

static double absd(double x)
{
	return x < 0 ? -x : x;
}

/* --- the oracle ----------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double *sorted_copy(const double *v, size_t n)
{
	double *c = malloc(n * sizeof(*c));

	assert_non_null(c);
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_double);
	return c;
}

/* The rank sketch.h defines, computed here on its own. */
static size_t oracle_rank(size_t n, double q)
{
	size_t r = 1 + (size_t)(q * (double)(n - 1));

	return r > n ? n : r;
}

/* @return whether x_r is a collapsed value: sketch.h's ranks, recomputed from counts. */
static bool rank_collapsed(const struct rp_sketch *s, size_t r)
{
	uint64_t nn = s->neg.total, nz = s->zero;

	if (r <= nn)
		return r > nn - s->neg.collapsed;
	return r > nn + nz && r <= nn + nz + s->pos.collapsed;
}

static void check_one(const struct rp_sketch *s, const double *sorted, size_t n, double q)
{
	size_t r = oracle_rank(n, q);
	double x = sorted[r - 1], est = rp_sketch_quantile(s, q);
	bool bounded = rp_sketch_quantile_bounded(s, q);

	if (bounded == rank_collapsed(s, r))
		fail_msg("q=%.17g rank %zu: bounded=%d but collapsed ranks say %d", q, r, bounded,
			 !rank_collapsed(s, r));
	if (bounded && !(absd(est - x) <= s->alpha * absd(x)))
		fail_msg("q=%.17g rank %zu of %zu: estimate %.17g, exact %.17g, error %.3g > %g", q,
			 r, n, est, x, absd(est - x) / absd(x), s->alpha);
}

/*
 * Checks every q of qs[] and the grid against the sorted data.
 * @return how many of them were not bounded (collapsed ranks).
 */
static size_t check_quantiles(const struct rp_sketch *s, const double *sorted, size_t n)
{
	size_t unbounded = 0;

	assert_int_equal(rp_sketch_count(s), n);
	for (size_t i = 0; i < ARRAY_SIZE(qs); i++) {
		check_one(s, sorted, n, qs[i]);
		unbounded += !rp_sketch_quantile_bounded(s, qs[i]);
	}
	for (int k = 0; k <= GRID; k++) {
		check_one(s, sorted, n, (double)k / GRID);
		unbounded += !rp_sketch_quantile_bounded(s, (double)k / GRID);
	}
	return unbounded;
}

/* min, max exactly; sum to the precision of a compensated sum. */
static void check_side(const struct rp_sketch *s, const double *sorted, size_t n)
{
	long double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += sorted[i];
	assert_true(rp_sketch_min(s) == sorted[0]);
	assert_true(rp_sketch_max(s) == sorted[n - 1]);
	if (absd((double)(rp_sketch_sum(s) - sum)) > 1e-12 * absd((double)sum) + 1e-300)
		fail_msg("sum %.17g, exact %.17Lg", rp_sketch_sum(s), sum);
}

static void sketch_values(struct rp_sketch *s, const double *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rp_sketch_add(s, v[i]);
}

/* Sketches @v at @alpha with the default cap and checks it all; no collapse expected. */
static void check_data_alpha(const double *v, size_t n, double alpha)
{
	struct rp_sketch s;
	double *sorted = sorted_copy(v, n);

	assert_int_equal(rp_sketch_init(&s, alpha), 0);
	sketch_values(&s, v, n);
	assert_int_equal(rp_sketch_collapsed(&s), 0);
	assert_int_equal(rp_sketch_dropped(&s), 0);
	assert_int_equal(check_quantiles(&s, sorted, n), 0);
	check_side(&s, sorted, n);
	rp_sketch_fini(&s);
	free(sorted);
}

static void check_data(const double *v, size_t n)
{
	check_data_alpha(v, n, RP_SKETCH_ALPHA);
}

static double *alloc_values(size_t n)
{
	double *v = malloc(n * sizeof(*v));

	assert_non_null(v);
	return v;
}

/* --- buckets, for comparing sketches ------------------------------------------------- */

struct bucket {
	int sign;
	int32_t index;
	uint64_t count;
};

struct bucket_list {
	struct bucket *b;
	size_t n, cap;
};

static int collect(void *ctx, int sign, int32_t index, uint64_t count)
{
	struct bucket_list *l = ctx;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->b = realloc(l->b, l->cap * sizeof(*l->b));
		assert_non_null(l->b);
	}
	l->b[l->n++] = (struct bucket){ sign, index, count };
	return 0;
}

static struct bucket_list buckets_of(const struct rp_sketch *s)
{
	struct bucket_list l = { 0 };

	assert_int_equal(rp_sketch_foreach_bucket(s, collect, &l), 0);
	return l;
}

static void assert_same_buckets(const struct rp_sketch *a, const struct rp_sketch *b)
{
	struct bucket_list la = buckets_of(a), lb = buckets_of(b);

	assert_int_equal(la.n, lb.n);
	for (size_t i = 0; i < la.n; i++) {
		assert_int_equal(la.b[i].sign, lb.b[i].sign);
		assert_int_equal(la.b[i].index, lb.b[i].index);
		assert_int_equal(la.b[i].count, lb.b[i].count);
	}
	free(la.b);
	free(lb.b);
}

/* Bitwise-identical answers on the grid. */
static void assert_same_answers(const struct rp_sketch *a, const struct rp_sketch *b)
{
	for (int k = 0; k <= GRID; k++) {
		double q = (double)k / GRID, x = rp_sketch_quantile(a, q);
		double y = rp_sketch_quantile(b, q);

		if (to_bits(x) != to_bits(y))
			fail_msg("q=%g: %.17g vs %.17g", q, x, y);
		assert_int_equal(rp_sketch_quantile_bounded(a, q),
				 rp_sketch_quantile_bounded(b, q));
	}
}

/* Values whose own bucket lies below @floor_index, in the store of @sign. */
static uint64_t below_floor(const struct rp_sketch *s, const double *v, size_t n, int sign,
			    int32_t floor_index)
{
	uint64_t c = 0;

	for (size_t i = 0; i < n; i++) {
		double a = absd(v[i]);

		if ((sign > 0) != (v[i] > 0) || a < DBL_MIN)
			continue;
		c += rp_sketch_index(s, a) < floor_index;
	}
	return c;
}

/* The collapsing invariant of sketch.h, recomputed from the data. */
static void check_collapse_invariant(const struct rp_sketch *s, const double *v, size_t n)
{
	uint64_t cp = s->pos.total ? below_floor(s, v, n, 1, s->pos.lo) : 0;
	uint64_t cn = s->neg.total ? below_floor(s, v, n, -1, s->neg.lo) : 0;

	assert_int_equal(s->pos.collapsed, cp);
	assert_int_equal(s->neg.collapsed, cn);
	assert_true(rp_sketch_bytes(s) <= sizeof(*s) + 2 * (size_t)s->max_buckets * 8);
	assert_true(s->pos.hi - s->pos.lo < (int32_t)s->max_buckets || !s->pos.total);
}

/* --- generators ------------------------------------------------------------------------ */

static double log_uniform_ns(void)
{
	double v = texp2(unif() * tlog2(HOUR_NS));

	v = (double)(int64_t)(v + 0.5);
	return v < 1 ? 1 : v > HOUR_NS ? HOUR_NS : v;
}

static double lognormal(double median, double sigma)
{
	return texp2(tlog2(median) + sigma * gauss() / LN2);
}

static double pareto(double xm, double a)
{
	return xm * texp2(-tlog2(unif()) / a);
}

/* Counter values: every scale of int64, both signs, 10% zeros, as doubles. */
static double counter_value(void)
{
	uint64_t u = rnd();
	int64_t m = (int64_t)(rnd() >> (1 + u % 63));

	if (u % 10 == 0)
		return 0.0;
	return (double)((u >> 8) & 1 ? -m : m);
}

/*
 * Allocation failure: calloc (all the sketch allocates with) fails while calloc_fail is
 * set. Not under the sanitizers, which own the allocator.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CAN_FAIL_CALLOC 0
static bool calloc_fail;
#else
#define CAN_FAIL_CALLOC 1
static bool calloc_fail;
extern void *__libc_calloc(size_t n, size_t size);

void *calloc(size_t n, size_t size)
{
	return calloc_fail ? NULL : __libc_calloc(n, size);
}
#endif

/* --- tests ----------------------------------------------------------------------------- */

static void test_sketch_empty(void **state)
{
	struct rp_sketch s;

	(void)state;
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_count(&s), 0);
	assert_true(isnan(rp_sketch_quantile(&s, 0.5)));
	assert_false(rp_sketch_quantile_bounded(&s, 0.5));
	assert_true(isnan(rp_sketch_min(&s)));
	assert_true(isnan(rp_sketch_max(&s)));
	assert_true(rp_sketch_sum(&s) == 0);
	assert_int_equal(rp_sketch_bytes(&s), sizeof(s)); /* nothing allocated yet */
	rp_sketch_add(&s, 5);
	assert_true(isnan(rp_sketch_quantile(&s, -0.01)));
	assert_true(isnan(rp_sketch_quantile(&s, 1.01)));
	assert_true(isnan(rp_sketch_quantile(&s, NAN)));
	rp_sketch_fini(&s);
	rp_sketch_fini(NULL);
	rp_sketch_destroy(NULL);
}

/* A bucket's value can lie past every value in it: the p50 of 178.114 us
 * over a maximum of 177.576 us. Quantiles are clamped to the exact [min, max]. */
static void test_sketch_quantile_within_min_max(void **state)
{
	static const double probs[] = { 0, 0.5, 0.9, 0.99, 1 };
	struct rp_sketch s;
	uint64_t x = 1;

	(void)state;
	for (int i = 0; i < 2000; i++) {
		double v = (double)(x % 1000000) + 1, w = v * 1.004;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
		rp_sketch_add(&s, v);
		if (i % 2)
			rp_sketch_add(&s, w); /* likely the same bucket */
		for (size_t k = 0; k < sizeof(probs) / sizeof(probs[0]); k++) {
			double e = rp_sketch_quantile(&s, probs[k]);

			assert_true(e >= v && e <= (i % 2 ? w : v));
		}
		if (i % 2 == 0)
			assert_true(rp_sketch_quantile(&s, 0.5) == v); /* one value: itself */
		rp_sketch_fini(&s);
	}
}

static void test_sketch_bad_alpha_rejected(void **state)
{
	static const double bad[] = { 0, -0.01, 1e-6, 0.51, 1, NAN, INFINITY };
	struct rp_sketch s;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(rp_sketch_init(&s, bad[i]), -EINVAL);
		assert_null(rp_sketch_create(bad[i]));
		assert_int_equal(rp_sketch_default_buckets(bad[i]), 0);
	}
	assert_int_equal(rp_sketch_init_bounded(&s, RP_SKETCH_ALPHA, 0), -EINVAL);
	/* The default cap is the buckets of [1, 2^64]: 2240 at 1%. */
	assert_int_equal(rp_sketch_default_buckets(RP_SKETCH_ALPHA), 2240);
}

static void test_sketch_constant(void **state)
{
	static const double consts[] = { 1, 12345.678, HOUR_NS, 1e-300, 1e300, -42, 0 };
	const size_t n = 100000;
	double *v = alloc_values(n);

	(void)state;
	for (size_t c = 0; c < ARRAY_SIZE(consts); c++) {
		struct rp_sketch *s = rp_sketch_create(RP_SKETCH_ALPHA);

		assert_non_null(s);
		for (size_t i = 0; i < n; i++)
			v[i] = consts[c];
		check_data(v, n);
		sketch_values(s, v, n);
		/* Narrow data, small sketch: one chunk. */
		assert_true(rp_sketch_bytes(s) <= sizeof(*s) + RP_SKETCH_CHUNK * 8);
		rp_sketch_destroy(s);
	}
	free(v);
}

static void test_sketch_bimodal(void **state)
{
	static const double p_fast[] = { 0.5, 0.99, 0.999 };
	const size_t n = 400000;
	double *v = alloc_values(n);

	(void)state;
	rng = 0x1b1d0da1;
	for (size_t k = 0; k < ARRAY_SIZE(p_fast); k++) {
		for (size_t i = 0; i < n; i++)
			v[i] = unif() <= p_fast[k] ? 1e3 : 1e9; /* 1 us, 1 s */
		check_data(v, n);
	}
	free(v);
}

static void test_sketch_pareto(void **state)
{
	const size_t n = 500000;
	double *v = alloc_values(n);

	(void)state;
	rng = 0x9a2e70;
	for (size_t i = 0; i < n; i++)
		v[i] = pareto(1000, 1.1);
	check_data(v, n);
	free(v);
}

static void test_sketch_lognormal(void **state)
{
	const size_t n = 500000;
	double *v = alloc_values(n);

	(void)state;
	rng = 0x10c0a1;
	for (size_t i = 0; i < n; i++)
		v[i] = lognormal(1e5, 2.0);
	check_data(v, n);
	free(v);
}

static void test_sketch_uniform(void **state)
{
	const size_t n = 500000;
	double *v = alloc_values(n);

	(void)state;
	rng = 0x0a1f0e;
	for (size_t i = 0; i < n; i++)
		v[i] = unif() * 1e6;
	check_data(v, n);
	free(v);
}

/* 1 ns .. 1 h, and the memory bound of sketch.h for it. */
static void test_sketch_span_1ns_1h_memory_bound(void **state)
{
	const size_t n = 500000;
	double *v = alloc_values(n);
	struct rp_sketch s;
	double w;
	size_t bound;

	(void)state;
	rng = 0x5ba9;
	for (size_t i = 0; i < n; i++)
		v[i] = log_uniform_ns();
	v[0] = 1;
	v[1] = HOUR_NS;
	check_data(v, n);
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	sketch_values(&s, v, n);
	/* w <= floor(M (log2(b / a) + 0.0025)) + 2; cap <= 64 ceil(9 w / 512). */
	w = (double)(int64_t)(s.multiplier * (tlog2(HOUR_NS) + 0.0025)) + 2;
	bound = sizeof(s) + 8 * 64 * (size_t)((9 * w + 511) / 512);
	print_message("1 ns .. 1 h: window %d buckets (bound %.0f), %zu bytes (bound %zu)\n",
		      s.pos.hi - s.pos.lo + 1, w, rp_sketch_bytes(&s), bound);
	assert_true(s.pos.hi - s.pos.lo + 1 <= w);
	assert_true(rp_sketch_bytes(&s) <= bound);
	assert_true(rp_sketch_bytes(&s) <= sizeof(s) + 13312);
	assert_int_equal(s.neg.cap, 0);
	rp_sketch_fini(&s);
	free(v);
}

/* Values on bucket boundaries, a double either side, and a bit further. */
static void test_sketch_bucket_boundaries(void **state)
{
	struct rp_sketch s;
	double *v;
	size_t n = 0;
	int32_t lo, hi;

	(void)state;
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	lo = rp_sketch_index(&s, 1.0);
	hi = rp_sketch_index(&s, 1e9);
	v = alloc_values(5 * (size_t)(hi - lo + 2) + 2000);
	for (int32_t i = lo + 1; i <= hi; i++) {
		double b = rp_sketch_bucket_lower(&s, i);

		/* The computed bound is the boundary to within rounding. */
		assert_true(rp_sketch_index(&s, b * (1 + 1e-12)) == i);
		assert_true(rp_sketch_index(&s, b * (1 - 1e-12)) == i - 1);
		v[n++] = b;
		v[n++] = next_up(b);
		v[n++] = next_down(b);
		v[n++] = b * (1 + 1e-9);
		v[n++] = b * (1 - 1e-9);
	}
	for (int i = 1; i <= 1000; i++)
		v[n++] = i; /* integers, powers of two among them */
	check_data(v, n);
	rp_sketch_fini(&s);
	free(v);
}

/* Powers of two and boundaries over the whole double range: a cap that fits it all. */
static void test_sketch_double_range(void **state)
{
	struct rp_sketch s;
	double *sorted, *v = alloc_values(8000);
	size_t n = 0;

	(void)state;
	assert_int_equal(rp_sketch_init_bounded(&s, RP_SKETCH_ALPHA, UINT32_MAX), 0);
	assert_int_equal(s.max_buckets, s.index_max - s.index_min + 1);
	for (int e = -1022; e <= 1023; e++) {
		double p = from_bits((uint64_t)(e + 1023) << 52);

		v[n++] = p;
		v[n++] = e > -1022 ? next_down(p) : p;
		v[n++] = -next_up(p);
	}
	v[n++] = DBL_MIN;
	v[n++] = DBL_MAX;
	v[n++] = -DBL_MAX;
	v[n++] = -DBL_MIN;
	v[n++] = rp_sketch_bucket_lower(&s, s.index_max);
	v[n++] = rp_sketch_bucket_lower(&s, s.index_min + 1);
	sketch_values(&s, v, n);
	sorted = sorted_copy(v, n);
	assert_int_equal(check_quantiles(&s, sorted, n), 0);
	assert_int_equal(s.pos.lo, s.index_min);
	assert_int_equal(s.pos.hi, s.index_max);
	/* Every bucket's value, including the clamped end ones, is within its bounds. */
	for (int32_t i = s.index_min; i <= s.index_max; i++) {
		double b = rp_sketch_bucket_value(&s, i);

		assert_true(b >= rp_sketch_bucket_lower(&s, i) && b <= DBL_MAX);
	}
	rp_sketch_fini(&s);
	free(sorted);
	free(v);
}

static void test_sketch_counters_mixed_sign(void **state)
{
	static const double edges[] = { (double)INT64_MIN, (double)INT64_MAX, -1, 1, 0, -0.0 };
	const size_t n = 300000;
	double *v = alloc_values(n);
	size_t i;

	(void)state;
	rng = 0xc0ffee;
	for (i = 0; i < ARRAY_SIZE(edges); i++)
		v[i] = edges[i];
	for (; i < n; i++)
		v[i] = counter_value();
	check_data(v, n);
	/* All negative, and mostly zeros. */
	for (i = 0; i < n; i++)
		v[i] = -absd(counter_value());
	check_data(v, n);
	for (i = 0; i < n; i++)
		v[i] = rnd() % 100 ? 0.0 : counter_value();
	check_data(v, n);
	free(v);
}

/*
 * Every rank of a small set (q = k / 1000, n = 1001), each alpha in range: the other
 * alphas keep their bound too. Magnitudes in [1, 2^64] or zero, so nothing collapses.
 */
static void test_sketch_every_rank_every_alpha(void **state)
{
	static const double alphas[] = { RP_SKETCH_ALPHA_MIN, 0.001, 0.02, 0.1,
					 RP_SKETCH_ALPHA_MAX };
	const size_t n = GRID + 1;
	double *v = alloc_values(n);

	(void)state;
	rng = 0xa1fa;
	for (size_t a = 0; a < ARRAY_SIZE(alphas); a++) {
		for (size_t i = 0; i < n; i++) {
			double x = lognormal(1e4, 2);

			v[i] = i % 3 ? (x < 1 ? 1 : x)
				     : (double)((int64_t)(rnd() % 2000001) - 1000000);
		}
		check_data_alpha(v, n, alphas[a]);
	}
	free(v);
}

/* NaN and infinities are dropped; |v| < DBL_MIN counts as zero (sketch.h's exception). */
static void test_sketch_non_finite_and_tiny(void **state)
{
	struct rp_sketch s;

	(void)state;
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	rp_sketch_add(&s, NAN);
	rp_sketch_add(&s, INFINITY);
	rp_sketch_add_n(&s, -INFINITY, 3);
	assert_int_equal(rp_sketch_dropped(&s), 5);
	assert_int_equal(rp_sketch_count(&s), 0);
	rp_sketch_add(&s, 4.9e-324);
	rp_sketch_add(&s, -1e-310);
	rp_sketch_add(&s, -0.0);
	assert_int_equal(s.zero, 3);
	assert_true(rp_sketch_quantile(&s, 0) == 0 && rp_sketch_quantile(&s, 1) == 0);
	assert_true(rp_sketch_quantile_bounded(&s, 0.5));
	assert_true(rp_sketch_min(&s) == -1e-310 && rp_sketch_max(&s) == 4.9e-324);
	rp_sketch_add_n(&s, 1, UINT64_MAX); /* would overflow the count */
	assert_int_equal(rp_sketch_count(&s), 3);
	assert_int_equal(rp_sketch_dropped(&s), UINT64_MAX);
	rp_sketch_fini(&s);
}

static void test_sketch_add_n_equals_repeated_add(void **state)
{
	struct rp_sketch a, b;

	(void)state;
	rng = 0xadd;
	assert_int_equal(rp_sketch_init(&a, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&b, RP_SKETCH_ALPHA), 0);
	for (int i = 0; i < 2000; i++) {
		double x = counter_value();
		uint64_t k = rnd() % 5;

		rp_sketch_add_n(&a, x, k);
		for (uint64_t j = 0; j < k; j++)
			rp_sketch_add(&b, x);
	}
	assert_same_buckets(&a, &b);
	assert_same_answers(&a, &b);
	assert_int_equal(rp_sketch_count(&a), rp_sketch_count(&b));
	assert_true(rp_sketch_min(&a) == rp_sketch_min(&b));
	assert_true(rp_sketch_max(&a) == rp_sketch_max(&b));
	rp_sketch_fini(&a);
	rp_sketch_fini(&b);
}

/* Every field of two sketches, bit for bit where they are doubles. */
static void assert_same_sketch(const struct rp_sketch *a, const struct rp_sketch *b)
{
	assert_same_buckets(a, b);
	assert_same_answers(a, b);
	assert_int_equal(a->count, b->count);
	assert_int_equal(a->zero, b->zero);
	assert_int_equal(a->dropped, b->dropped);
	assert_int_equal(a->pos.total, b->pos.total);
	assert_int_equal(a->pos.collapsed, b->pos.collapsed);
	assert_int_equal(a->neg.total, b->neg.total);
	assert_int_equal(to_bits(a->min), to_bits(b->min));
	assert_int_equal(to_bits(a->max), to_bits(b->max));
	assert_int_equal(to_bits(a->sum), to_bits(b->sum));
	assert_int_equal(to_bits(a->sum_c), to_bits(b->sum_c));
}

/* rp_sketch_add_ns(s, ns) is rp_sketch_add(s, (double)ns): durations of every bit
 * length (past 2^53 too), 0 and UINT64_MAX, at every alpha, with a small bucket cap
 * (collapses), and among other values (negative, huge, infinite) that take the
 * sum through its other branches. */
static void test_sketch_add_ns_equals_add(void **state)
{
	static const double alphas[] = { RP_SKETCH_ALPHA_MIN, RP_SKETCH_ALPHA, 0.05,
					 RP_SKETCH_ALPHA_MAX };
	static const double other[] = { -1.5, 1e300, -1e308, 1e308, INFINITY, 0.25 };

	(void)state;
	rng = 0xd0a;
	for (size_t k = 0; k < sizeof(alphas) / sizeof(alphas[0]); k++) {
		for (int bounded = 0; bounded < 2; bounded++) {
			struct rp_sketch a, b;
			uint32_t cap = bounded ? 24 : rp_sketch_default_buckets(alphas[k]);

			assert_int_equal(rp_sketch_init_bounded(&a, alphas[k], cap), 0);
			assert_int_equal(rp_sketch_init_bounded(&b, alphas[k], cap), 0);
			for (int i = 0; i < 20000; i++) {
				uint64_t r = rnd(), ns = rnd() >> (r % 64);

				if (r % 97 == 0)
					ns = r % 2 ? UINT64_MAX : 0;
				if (r % 1009 == 0 && i > 10000) {
					double x = other[(r >> 8) % 6];

					rp_sketch_add(&a, x);
					rp_sketch_add(&b, x);
				}
				rp_sketch_add_ns(&a, ns);
				rp_sketch_add(&b, (double)ns);
			}
			assert_same_sketch(&a, &b);
			rp_sketch_fini(&a);
			rp_sketch_fini(&b);
		}
	}
}

/* Doubles x in [1, 2^64) with index(x) == index(@lo) and index(next up) > it, by
 * bisection on the bits (positive doubles order as their bits): the boundary after
 * @lo, when one lies in [@lo, @hi]. */
static uint64_t boundary_in(const struct rp_sketch *s, uint64_t lo, uint64_t hi)
{
	int32_t base = rp_sketch_index(s, from_bits(lo));

	while (hi - lo > 1) {
		uint64_t m = lo + (hi - lo) / 2;

		if (rp_sketch_index(s, from_bits(m)) > base)
			hi = m;
		else
			lo = m;
	}
	return hi;
}

/* Every double within @w of bits @c: rp_sketch_index_ns() (the table) == rp_sketch_index()
 * (the cubic); @return the doubles compared. */
static uint64_t same_index_around(const struct rp_sketch *s, uint64_t c, uint64_t w)
{
	uint64_t lo = to_bits(1.0), hi = to_bits(0x1p64), n = 0;

	for (uint64_t b = c > lo + w ? c - w : lo; b < c + w && b < hi; b++, n++)
		if (rp_sketch_index_ns(s, from_bits(b)) != rp_sketch_index(s, from_bits(b)))
			fail_msg("double %a: index %d by table, %d by the cubic", from_bits(b),
				 rp_sketch_index_ns(s, from_bits(b)), rp_sketch_index(s, from_bits(b)));
	return n;
}

/* rp_sketch_add_ns() finds a duration's bucket in a table at the engine's alpha: the
 * same index as the cubic for every double in [1, 2^64). Checked exhaustively over
 * 1024 doubles either side of every bucket boundary there (found by bisection of the
 * cubic itself, independently of the table) and of every power of two, where the
 * table's keys change, over every integer up to 2^20, and at random; the boundaries
 * found are the buckets of the range, one by one. Other alphas use the cubic. */
static void test_sketch_index_table(void **state)
{
	const uint64_t w = 1024, key = UINT64_C(1) << 46; /* the table's key: 6 bits of m */
	struct rp_sketch s, o;
	uint64_t n = 0;
	int32_t last;

	(void)state;
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	assert_true(s.ix_table);
	last = rp_sketch_index(&s, 1.0);
	for (uint64_t lo = to_bits(1.0); lo < to_bits(0x1p64); lo += key) {
		uint64_t hi = lo + key - 1;
		int32_t a = rp_sketch_index(&s, from_bits(lo)), b = rp_sketch_index(&s, from_bits(hi));

		assert_true(a == last || a == last + 1); /* no bucket skipped */
		assert_true(b == a || b == a + 1);	  /* at most one boundary per key */
		if (lo % (UINT64_C(1) << 52) == 0)
			n += same_index_around(&s, lo, w); /* a power of two */
		if (b > a)
			n += same_index_around(&s, boundary_in(&s, lo, hi), w);
		last = b;
	}
	for (uint64_t v = 1; v <= (1u << 20); v++, n++)
		assert_int_equal(rp_sketch_index_ns(&s, (double)v), rp_sketch_index(&s, (double)v));
	rng = 0x1d5;
	for (int i = 0; i < 200000; i++, n++) {
		double x = from_bits(to_bits(1.0) + rnd() % (to_bits(0x1p64) - to_bits(1.0)));

		assert_int_equal(rp_sketch_index_ns(&s, x), rp_sketch_index(&s, x));
	}
	assert_true(n > 4000000);
	assert_int_equal(rp_sketch_init(&o, 0.05), 0);
	assert_false(o.ix_table);
	rp_sketch_fini(&s);
	rp_sketch_fini(&o);
}

/* rp_sketch_add_ns2(a, b, ns) leaves a and b as rp_sketch_add_ns(a, ns) then
 * rp_sketch_add_ns(b, ns) do: the same alpha (one index for both) and different
 * ones, small caps so that stores widen, collapse and drop, and 0, 2^64 - 1 and
 * fractional values (rp_sketch_add()) in between. */
static void test_sketch_add_ns2_equals_add_ns(void **state)
{
	static const double alphas[][2] = {
		{ RP_SKETCH_ALPHA, RP_SKETCH_ALPHA }, { RP_SKETCH_ALPHA_MIN, RP_SKETCH_ALPHA_MIN },
		{ RP_SKETCH_ALPHA, 0.05 }, { RP_SKETCH_ALPHA_MAX, RP_SKETCH_ALPHA },
	};

	(void)state;
	rng = 0xadd2;
	for (size_t k = 0; k < sizeof(alphas) / sizeof(alphas[0]); k++) {
		for (int bounded = 0; bounded < 2; bounded++) {
			struct rp_sketch a, b, a1, b1;
			uint32_t ca = bounded ? 24 : rp_sketch_default_buckets(alphas[k][0]);
			uint32_t cb = bounded ? 40 : rp_sketch_default_buckets(alphas[k][1]);

			assert_int_equal(rp_sketch_init_bounded(&a, alphas[k][0], ca), 0);
			assert_int_equal(rp_sketch_init_bounded(&a1, alphas[k][0], ca), 0);
			assert_int_equal(rp_sketch_init_bounded(&b, alphas[k][1], cb), 0);
			assert_int_equal(rp_sketch_init_bounded(&b1, alphas[k][1], cb), 0);
			for (int i = 0; i < 20000; i++) {
				uint64_t r = rnd(), ns = rnd() >> (r % 64);

				if (r % 97 == 0)
					ns = r % 2 ? UINT64_MAX : 0;
				if (r % 1009 == 0) { /* one of them only: their sums part */
					rp_sketch_add(r % 2 ? &a : &b, 0.25);
					rp_sketch_add(r % 2 ? &a1 : &b1, 0.25);
				}
				rp_sketch_add_ns2(&a, &b, ns);
				rp_sketch_add_ns(&a1, ns);
				rp_sketch_add_ns(&b1, ns);
			}
			assert_same_sketch(&a, &a1);
			assert_same_sketch(&b, &b1);
			rp_sketch_fini(&a);
			rp_sketch_fini(&b);
			rp_sketch_fini(&a1);
			rp_sketch_fini(&b1);
		}
	}
}

/* rp_sketch_add_ns()'s integer sum (sum_int) against rp_sketch_add(), compared after
 * every add: sums that climb towards 2^53 and cross it (2^53 - 1 then 2:
 * 2^53 + 1, which rounds to 2^53, then 1, 3 and 1 past it), a widening store
 * (new buckets keep the integer sum), resets, merges and a fractional value in between. */
static void test_sketch_add_ns_integer_sum(void **state)
{
	static const uint64_t edge[] = { (UINT64_C(1) << 53) - 1, 2, 1, 3, 1 };
	struct rp_sketch a, b, m;

	(void)state;
	rng = 0x53;
	assert_int_equal(rp_sketch_init(&a, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&b, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&m, RP_SKETCH_ALPHA), 0);
	for (int round = 0; round < 8; round++) {
		for (int i = 0; i < 4000; i++) {
			uint64_t r = rnd(), ns = (r >> 20) >> (r % (round < 4 ? 24 : 64));

			if (round == 2 && i < 5)
				ns = edge[i];
			if (round == 5 && i == 100) { /* a fractional sum: the long way */
				rp_sketch_add(&a, 0.5);
				rp_sketch_add(&b, 0.5);
			}
			rp_sketch_add_ns(&a, ns);
			rp_sketch_add(&b, (double)ns);
			assert_int_equal(to_bits(a.sum), to_bits(b.sum));
			assert_int_equal(to_bits(a.sum_c), to_bits(b.sum_c));
		}
		assert_same_sketch(&a, &b);
		if (round % 3 == 1) { /* merged sums: the long way until a reset */
			assert_int_equal(rp_sketch_merge(&a, &m), 0);
			assert_int_equal(rp_sketch_merge(&b, &m), 0);
			rp_sketch_add_ns(&m, 12345);
		}
		if (round % 2 == 1) {
			rp_sketch_reset(&a);
			rp_sketch_reset(&b);
		}
	}
	assert_same_sketch(&a, &b);
	rp_sketch_fini(&a);
	rp_sketch_fini(&b);
	rp_sketch_fini(&m);
}

/*
 * The integer sum survives every add that keeps it exact (sum_add()): a counter's
 * first sample of 0 leaves rp_sketch_add_ns() its short path. Checked against a twin
 * whose sum_int is cleared before each add, so that every add of it takes the long,
 * compensated way: sums and corrections equal bit for bit after integers of both signs
 * (0 and -0 among them), values and sums at and past 2^53, add_n, merges and
 * fractions, in random order.
 */
static void test_sketch_integer_sum_kept_by_integer_adds(void **state)
{
	struct rp_sketch a, b, m;
	bool kept = false;

	(void)state;
	rng = 0x1a7;
	assert_int_equal(rp_sketch_init(&a, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&b, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&m, RP_SKETCH_ALPHA), 0);
	rp_sketch_add(&a, 0.0);
	rp_sketch_add_ns(&a, 5);
	assert_true(a.sum_int);
	rp_sketch_add(&a, -7.0);
	assert_true(a.sum_int);
	rp_sketch_add(&a, 0x1p53); /* an integer, but at 2^53 */
	assert_false(a.sum_int);
	rp_sketch_reset(&a);
	rp_sketch_add_ns(&m, 1000);
	for (int i = 0; i < 200000; i++) {
		uint64_t r = rnd(), op = r % 16, r2 = rnd();
		double v = (double)(int64_t)((r2 >> 8) >> (r2 % 50)) * (r2 & 1 << 7 ? -1 : 1);

		b.sum_int = false;
		if (op < 6) {
			rp_sketch_add(&a, v);
			rp_sketch_add(&b, v);
		} else if (op < 11) {
			rp_sketch_add_ns(&a, (r2 >> 4) >> (r2 % 62));
			rp_sketch_add_ns(&b, (r2 >> 4) >> (r2 % 62));
		} else if (op == 11) { /* a sum climbing to +-2^53 and past it */
			rp_sketch_add(&a, r2 & 1 ? 0x1p52 - 3 : 3 - 0x1p52);
			rp_sketch_add(&b, r2 & 1 ? 0x1p52 - 3 : 3 - 0x1p52);
		} else if (op == 12) {
			rp_sketch_add_n(&a, v, 3);
			rp_sketch_add_n(&b, v, 3);
		} else if (op == 13) {
			assert_int_equal(rp_sketch_merge(&a, &m), 0);
			assert_int_equal(rp_sketch_merge(&b, &m), 0);
		} else if (op == 14 && r2 % 32 < 2) { /* fractions, one that later sums round */
			rp_sketch_add(&a, r2 % 32 ? 0x1p51 + 0.5 : 0.25);
			rp_sketch_add(&b, r2 % 32 ? 0x1p51 + 0.5 : 0.25);
		} else if (op == 15 && r2 % 8 == 0) {
			rp_sketch_reset(&a);
			rp_sketch_reset(&b);
		} else {
			rp_sketch_add(&a, i % 2 ? 0.0 : -0.0);
			rp_sketch_add(&b, i % 2 ? 0.0 : -0.0);
		}
		kept |= a.sum_int && a.sum != 0;
		assert_int_equal(to_bits(a.sum), to_bits(b.sum));
		assert_int_equal(to_bits(a.sum_c), to_bits(b.sum_c));
	}
	assert_true(kept);
	assert_same_sketch(&a, &b);
	rp_sketch_fini(&a);
	rp_sketch_fini(&b);
	rp_sketch_fini(&m);
}

static void test_sketch_reset_keeps_memory(void **state)
{
	const size_t n = 100000;
	double *sorted, *v = alloc_values(n);
	struct rp_sketch s, fresh;
	size_t bytes;

	(void)state;
	rng = 0x4e5e7;
	for (size_t i = 0; i < n; i++)
		v[i] = i % 2 ? log_uniform_ns() : -lognormal(100, 1);
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&fresh, RP_SKETCH_ALPHA), 0);
	sketch_values(&s, v, n);
	bytes = rp_sketch_bytes(&s);
	rp_sketch_reset(&s);
	assert_int_equal(rp_sketch_bytes(&s), bytes);
	assert_int_equal(rp_sketch_count(&s), 0);
	assert_true(isnan(rp_sketch_quantile(&s, 0.5)));
	assert_int_equal(buckets_of(&s).n, 0);
	/* Refilled in another order: same answers as a fresh sketch, no new memory. */
	for (size_t i = n; i-- > 0;)
		rp_sketch_add(&s, v[i]);
	sketch_values(&fresh, v, n);
	assert_int_equal(rp_sketch_bytes(&s), bytes);
	assert_same_buckets(&s, &fresh);
	sorted = sorted_copy(v, n);
	assert_int_equal(check_quantiles(&s, sorted, n), 0);
	check_side(&s, sorted, n);
	rp_sketch_fini(&s);
	rp_sketch_fini(&fresh);
	free(sorted);
	free(v);
}

/* 3M samples once; prints ns per add beside a plain loop over the same values. */
static void test_sketch_3m_samples_speed(void **state)
{
	const size_t n = 3000000;
	double *sorted, *v = alloc_values(n);
	volatile double sink;
	struct timespec t0, t1, t2;
	struct rp_sketch s;
	double acc = 0;

	(void)state;
	rng = 0x3333;
	for (size_t i = 0; i < n; i++)
		v[i] = i % 4 ? lognormal(2e4, 1.5) : (double)(int64_t)log_uniform_ns();
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0; i < n; i++)
		acc += v[i] * 0.5;
	sink = acc;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	sketch_values(&s, v, n);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	(void)sink;
	print_message("rp_sketch_add: %.2f ns/add (baseline loop %.2f ns/value), n=%zu, "
		      "%zu bytes\n",
		      ((t2.tv_sec - t1.tv_sec) * 1e9 + (t2.tv_nsec - t1.tv_nsec)) / (double)n,
		      ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)n, n,
		      rp_sketch_bytes(&s));
	sorted = sorted_copy(v, n);
	assert_int_equal(check_quantiles(&s, sorted, n), 0);
	check_side(&s, sorted, n);
	rp_sketch_fini(&s);
	free(sorted);
	free(v);
}

/* Mixed data split into k random parts: merged = whole, bucket for bucket. */
static void test_sketch_merge_equals_whole(void **state)
{
	static const unsigned ks[] = { 2, 3, 7, 16 };
	const size_t n = 300000;
	double *sorted, *v = alloc_values(n);
	struct rp_sketch whole, parts[16], merged, tree;

	(void)state;
	rng = 0x3e26e;
	for (size_t i = 0; i < n; i++)
		v[i] = i % 3 == 0   ? counter_value()
		       : i % 3 == 1 ? pareto(50, 1.3)
				    : lognormal(1e6, 2);
	sorted = sorted_copy(v, n);
	assert_int_equal(rp_sketch_init(&whole, RP_SKETCH_ALPHA), 0);
	sketch_values(&whole, v, n);
	for (size_t t = 0; t < ARRAY_SIZE(ks); t++) {
		unsigned k = ks[t];

		for (unsigned j = 0; j < k; j++)
			assert_int_equal(rp_sketch_init(&parts[j], RP_SKETCH_ALPHA), 0);
		for (size_t i = 0; i < n; i++)
			rp_sketch_add(&parts[rnd() % k], v[i]);
		/* One after another into an empty sketch... */
		assert_int_equal(rp_sketch_init(&merged, RP_SKETCH_ALPHA), 0);
		for (unsigned j = 0; j < k; j++)
			assert_int_equal(rp_sketch_merge(&merged, &parts[j]), 0);
		/* ...and pairwise, in a tree, into the parts themselves. */
		for (unsigned step = 1; step < k; step *= 2)
			for (unsigned j = 0; j + step < k; j += 2 * step)
				assert_int_equal(rp_sketch_merge(&parts[j], &parts[j + step]), 0);
		tree = parts[0];
		assert_same_buckets(&merged, &whole);
		assert_same_buckets(&tree, &whole);
		assert_same_answers(&merged, &whole);
		assert_same_answers(&tree, &whole);
		assert_int_equal(check_quantiles(&merged, sorted, n), 0);
		check_side(&merged, sorted, n);
		check_side(&tree, sorted, n);
		rp_sketch_fini(&merged);
		for (unsigned j = 0; j < k; j++)
			rp_sketch_fini(&parts[j]);
	}
	rp_sketch_fini(&whole);
	free(sorted);
	free(v);
}

static void test_sketch_merge_self_and_errors(void **state)
{
	struct rp_sketch a, twice, other, empty;

	(void)state;
	rng = 0x5e1f;
	assert_int_equal(rp_sketch_init(&a, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&twice, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_init(&other, 0.02), 0);
	assert_int_equal(rp_sketch_init(&empty, RP_SKETCH_ALPHA), 0);
	for (int i = 0; i < 5000; i++) {
		double x = counter_value();

		rp_sketch_add(&a, x);
		rp_sketch_add_n(&twice, x, 2);
	}
	rp_sketch_add(&other, 1);
	assert_int_equal(rp_sketch_merge(&a, &other), -EINVAL);
	assert_int_equal(rp_sketch_merge(&other, &a), -EINVAL);
	assert_int_equal(rp_sketch_count(&other), 1);
	assert_int_equal(rp_sketch_merge(&a, &empty), 0);
	assert_int_equal(rp_sketch_merge(&a, &a), 0);
	assert_same_buckets(&a, &twice);
	assert_same_answers(&a, &twice);
	assert_int_equal(rp_sketch_count(&a), 10000);
	assert_true(absd(rp_sketch_sum(&a) - rp_sketch_sum(&twice)) <=
		    1e-12 * absd(rp_sketch_sum(&twice)));
	/* A count that would overflow is refused, the sketch unchanged. */
	twice.count = UINT64_MAX - 5;
	assert_int_equal(rp_sketch_merge(&twice, &a), -EOVERFLOW);
	assert_int_equal(twice.count, UINT64_MAX - 5);
	rp_sketch_fini(&a);
	rp_sketch_fini(&twice);
	rp_sketch_fini(&other);
	rp_sketch_fini(&empty);
}

/* Rebuild @s from its buckets (and optionally its summary) into @out; @counts_only:
 * through rp_sketch_add_bucket_count(), which needs the summary after it. */
static void rebuild_as(const struct rp_sketch *s, struct rp_sketch *out, uint32_t cap,
		       bool summary, bool counts_only)
{
	struct bucket_list l = buckets_of(s);
	struct rp_sketch_summary sum;

	assert_int_equal(rp_sketch_init_bounded(out, s->alpha, cap), 0);
	for (size_t i = 0; i < l.n; i++)
		assert_int_equal((counts_only ? rp_sketch_add_bucket_count : rp_sketch_add_bucket)(
					 out, l.b[i].sign, l.b[i].index, l.b[i].count),
				 0);
	free(l.b);
	if (summary) {
		rp_sketch_get_summary(s, &sum);
		assert_int_equal(rp_sketch_set_summary(out, &sum), 0);
	}
}

static void rebuild(const struct rp_sketch *s, struct rp_sketch *out, uint32_t cap, bool summary)
{
	rebuild_as(s, out, cap, summary, false);
}

static void test_sketch_round_trip(void **state)
{
	const size_t n = 200000;
	double *v = alloc_values(n);
	struct rp_sketch s, r, small, rs;

	(void)state;
	rng = 0x7217;
	for (size_t i = 0; i < n; i++)
		v[i] = i % 2 ? counter_value() : log_uniform_ns();
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	sketch_values(&s, v, n);
	rebuild(&s, &r, s.max_buckets, false);
	assert_same_buckets(&s, &r);
	assert_same_answers(&s, &r);
	assert_int_equal(rp_sketch_count(&r), n);
	rp_sketch_fini(&r);
	rebuild(&s, &r, s.max_buckets, true);
	assert_true(rp_sketch_min(&r) == rp_sketch_min(&s));
	assert_true(rp_sketch_max(&r) == rp_sketch_max(&s));
	assert_true(rp_sketch_sum(&r) == rp_sketch_sum(&s));
	rp_sketch_fini(&r);
	/* Counts only, then the summary: the same sketch as the full rebuild. */
	rebuild_as(&s, &r, s.max_buckets, true, true);
	assert_same_buckets(&s, &r);
	assert_same_answers(&s, &r);
	assert_int_equal(rp_sketch_count(&r), n);
	assert_true(rp_sketch_min(&r) == rp_sketch_min(&s));
	assert_true(rp_sketch_max(&r) == rp_sketch_max(&s));
	assert_true(rp_sketch_sum(&r) == rp_sketch_sum(&s));
	/* A collapsed sketch: the summary carries its collapsed counts. */
	assert_int_equal(rp_sketch_init_bounded(&small, RP_SKETCH_ALPHA, 300), 0);
	sketch_values(&small, v, n);
	assert_true(small.pos.collapsed > 0 && small.neg.collapsed > 0);
	for (int counts_only = 0; counts_only < 2; counts_only++) {
		rebuild_as(&small, &rs, 300, true, counts_only);
		assert_same_buckets(&small, &rs);
		assert_same_answers(&small, &rs);
		assert_int_equal(rs.pos.collapsed, small.pos.collapsed);
		assert_int_equal(rs.neg.collapsed, small.neg.collapsed);
		rp_sketch_fini(&rs);
	}
	/* Rebuilt under a smaller cap: collapses again, and says so. */
	rebuild(&small, &rs, 100, true);
	check_collapse_invariant(&rs, v, n);
	rp_sketch_fini(&rs);
	rp_sketch_fini(&s);
	rp_sketch_fini(&r);
	rp_sketch_fini(&small);
	free(v);
}

/* Untrusted buckets and summaries: refused cleanly, memory stays bounded. */
static void test_sketch_untrusted_input_rejected(void **state)
{
	struct rp_sketch s;
	struct rp_sketch_summary sum;
	uint64_t total = 0;

	(void)state;
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	assert_int_equal(rp_sketch_add_bucket(&s, 2, 0, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket(&s, -2, 0, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket(&s, 0, 5, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket(&s, 1, s.index_max + 1, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket(&s, -1, s.index_min - 1, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket(&s, 1, INT32_MIN, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket_count(&s, 2, 0, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket_count(&s, 0, 5, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket_count(&s, 1, s.index_max + 1, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket_count(&s, -1, s.index_min - 1, 1), -EINVAL);
	assert_int_equal(rp_sketch_add_bucket(&s, 1, 7, 0), 0);
	assert_int_equal(rp_sketch_count(&s), 0);
	assert_int_equal(rp_sketch_bytes(&s), sizeof(s));
	assert_int_equal(rp_sketch_add_bucket(&s, 1, 7, UINT64_MAX - 1), 0);
	assert_int_equal(rp_sketch_add_bucket(&s, -1, 7, 2), -EOVERFLOW);
	rp_sketch_reset(&s);
	/* Garbage over the whole index range: the cap holds, the counts add up. */
	rng = 0x6a26a6e;
	for (int i = 0; i < 100000; i++) {
		int sign = (int)(rnd() % 3) - 1;
		int32_t idx =
			sign ? s.index_min +
					(int32_t)(rnd() % (uint64_t)(s.index_max - s.index_min + 1))
			     : 0;
		uint64_t c = rnd() % (1u << 20);

		assert_int_equal(rp_sketch_add_bucket(&s, sign, idx, c), 0);
		total += c;
	}
	assert_int_equal(rp_sketch_count(&s), total);
	assert_true(rp_sketch_bytes(&s) <= sizeof(s) + 2 * (size_t)s.max_buckets * 8);
	assert_int_equal(s.neg.total + s.zero + s.pos.total, total);
	/* Summaries that do not fit the buckets. */
	rp_sketch_get_summary(&s, &sum);
	sum.count++;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), -EINVAL);
	sum.count--;
	sum.min = 2;
	sum.max = 1;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), -EINVAL);
	sum.max = INFINITY;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), -EINVAL);
	sum.max = 3;
	sum.sum = NAN;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), -EINVAL);
	sum.sum = 0;
	sum.collapsed_pos = s.pos.collapsed + 1;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), -EINVAL);
	sum.collapsed_pos = s.pos.collapsed;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), 0);
	assert_true(rp_sketch_min(&s) == 2 && rp_sketch_max(&s) == 3);
	/* Collapsed counts beyond the floor bucket of a store that did not collapse. */
	rp_sketch_reset(&s);
	assert_int_equal(rp_sketch_add_bucket(&s, 1, 100, 5), 0);
	assert_int_equal(rp_sketch_add_bucket(&s, 1, 200, 5), 0);
	rp_sketch_get_summary(&s, &sum);
	sum.collapsed_pos = 6;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), -EINVAL);
	sum.collapsed_neg = 1;
	sum.collapsed_pos = 0;
	assert_int_equal(rp_sketch_set_summary(&s, &sum), -EINVAL);
	rp_sketch_fini(&s);
}

/* A small cap over 1 ns .. 1 h, in random, rising and falling order; mixed signs. */
static void test_sketch_collapse_counted(void **state)
{
	const size_t n = 200000;
	double *sorted, *v = alloc_values(n);
	struct rp_sketch s;

	(void)state;
	rng = 0xc011a95e;
	for (size_t i = 0; i < n; i++)
		v[i] = log_uniform_ns();
	sorted = sorted_copy(v, n);
	for (int order = 0; order < 3; order++) {
		const double *in = order == 0 ? v : sorted;
		size_t unbounded;

		assert_int_equal(rp_sketch_init_bounded(&s, RP_SKETCH_ALPHA, 1024), 0);
		for (size_t i = 0; i < n; i++)
			rp_sketch_add(&s, in[order == 2 ? n - 1 - i : i]);
		check_collapse_invariant(&s, v, n);
		assert_true(s.pos.collapsed > 0);
		assert_true(rp_sketch_bytes(&s) <= sizeof(s) + 1024 * 8);
		unbounded = check_quantiles(&s, sorted, n);
		/* The tail keeps its bound: p50 and up (1024 buckets ~ 29 of 41.7 binades). */
		assert_true(unbounded > 0);
		for (size_t i = 5; i < ARRAY_SIZE(qs); i++)
			assert_true(rp_sketch_quantile_bounded(&s, qs[i]));
		rp_sketch_fini(&s);
	}
	for (size_t i = 0; i < n; i++)
		v[i] = i % 2 ? -log_uniform_ns() : i % 5 ? log_uniform_ns() : 0;
	free(sorted);
	sorted = sorted_copy(v, n);
	assert_int_equal(rp_sketch_init_bounded(&s, RP_SKETCH_ALPHA, 128), 0);
	sketch_values(&s, v, n);
	check_collapse_invariant(&s, v, n);
	assert_true(s.pos.collapsed > 0 && s.neg.collapsed > 0);
	check_quantiles(&s, sorted, n);
	rp_sketch_fini(&s);
	free(sorted);
	free(v);
}

/* Collapsed sketches with different caps merged: the invariant and the bound hold. */
static void test_sketch_collapse_merge(void **state)
{
	static const uint32_t caps[] = { 64, 128, 200, 256, 512, 3000 };
	const size_t n = 200000;
	double *sorted, *v = alloc_values(n);
	struct rp_sketch parts[8], dst;
	unsigned *owner = malloc(n * sizeof(*owner));

	(void)state;
	assert_non_null(owner);
	rng = 0x3e26ec01;
	for (int round = 0; round < 6; round++) {
		for (size_t i = 0; i < n; i++) {
			v[i] = i % 3 ? log_uniform_ns() : -pareto(10, 0.3);
			owner[i] = (unsigned)(rnd() % 8);
		}
		sorted = sorted_copy(v, n);
		for (unsigned j = 0; j < 8; j++)
			assert_int_equal(rp_sketch_init_bounded(&parts[j], RP_SKETCH_ALPHA,
								caps[rnd() % ARRAY_SIZE(caps)]),
					 0);
		for (size_t i = 0; i < n; i++)
			rp_sketch_add(&parts[owner[i]], v[i]);
		assert_int_equal(rp_sketch_init_bounded(&dst, RP_SKETCH_ALPHA,
							caps[round % ARRAY_SIZE(caps)]),
				 0);
		for (unsigned j = 0; j < 8; j++) {
			assert_int_equal(rp_sketch_merge(&dst, &parts[j]), 0);
			rp_sketch_fini(&parts[j]);
		}
		check_collapse_invariant(&dst, v, n);
		check_quantiles(&dst, sorted, n);
		check_side(&dst, sorted, n);
		rp_sketch_fini(&dst);
		free(sorted);
	}
	free(owner);
	free(v);
}

/* No memory: adding drops or collapses in place (counted); merge and add_bucket refuse. */
static void test_sketch_out_of_memory(void **state)
{
	const size_t n = 20000;
	double *v;
	struct rp_sketch s, wide, before;
	struct bucket_list l0, l1;
	int err[2];

	(void)state;
	if (!CAN_FAIL_CALLOC)
		skip();
	v = alloc_values(n);
	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	calloc_fail = true;
	rp_sketch_add(&s, 1000);
	calloc_fail = false;
	assert_int_equal(rp_sketch_count(&s), 0);
	assert_int_equal(rp_sketch_dropped(&s), 1);
	/* 64 buckets in hand, then values over 1 ns .. 1 h: collapses within them. */
	rp_sketch_add(&s, 1000);
	assert_int_equal(s.pos.cap, RP_SKETCH_CHUNK);
	rng = 0x00e;
	for (size_t i = 0; i < n; i++)
		v[i] = i ? log_uniform_ns() : 1000;
	calloc_fail = true;
	for (size_t i = 1; i < n; i++)
		rp_sketch_add(&s, v[i]);
	calloc_fail = false;
	assert_int_equal(rp_sketch_count(&s), n);
	assert_int_equal(s.pos.cap, RP_SKETCH_CHUNK);
	assert_true(s.pos.collapsed > 0);
	check_collapse_invariant(&s, v, n);
	/* Merging or rebuilding into a wider window refuses, the sketch unchanged. */
	assert_int_equal(rp_sketch_init(&wide, RP_SKETCH_ALPHA), 0);
	rp_sketch_add(&wide, -1e-9);
	rp_sketch_add(&wide, 2 * HOUR_NS);
	rp_sketch_add(&wide, 1000 * HOUR_NS);
	before = wide;
	l0 = buckets_of(&wide);
	calloc_fail = true;
	err[0] = rp_sketch_merge(&wide, &s);
	err[1] = rp_sketch_add_bucket(&wide, 1, s.pos.lo, 1);
	calloc_fail = false;
	assert_int_equal(err[0], -ENOMEM);
	assert_int_equal(err[1], -ENOMEM);
	l1 = buckets_of(&wide);
	assert_int_equal(l0.n, l1.n);
	assert_memory_equal(l0.b, l1.b, l0.n * sizeof(*l0.b));
	assert_memory_equal(&before, &wide, sizeof(wide));
	assert_int_equal(rp_sketch_merge(&wide, &s), 0);
	assert_int_equal(rp_sketch_count(&wide), n + 3);
	free(l0.b);
	free(l1.b);
	rp_sketch_fini(&wide);
	rp_sketch_fini(&s);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sketch_empty),
		cmocka_unit_test(test_sketch_quantile_within_min_max),
		cmocka_unit_test(test_sketch_bad_alpha_rejected),
		cmocka_unit_test(test_sketch_constant),
		cmocka_unit_test(test_sketch_bimodal),
		cmocka_unit_test(test_sketch_pareto),
		cmocka_unit_test(test_sketch_lognormal),
		cmocka_unit_test(test_sketch_uniform),
		cmocka_unit_test(test_sketch_span_1ns_1h_memory_bound),
		cmocka_unit_test(test_sketch_bucket_boundaries),
		cmocka_unit_test(test_sketch_double_range),
		cmocka_unit_test(test_sketch_counters_mixed_sign),
		cmocka_unit_test(test_sketch_every_rank_every_alpha),
		cmocka_unit_test(test_sketch_non_finite_and_tiny),
		cmocka_unit_test(test_sketch_add_n_equals_repeated_add),
		cmocka_unit_test(test_sketch_add_ns_equals_add),
		cmocka_unit_test(test_sketch_index_table),
		cmocka_unit_test(test_sketch_add_ns2_equals_add_ns),
		cmocka_unit_test(test_sketch_add_ns_integer_sum),
		cmocka_unit_test(test_sketch_integer_sum_kept_by_integer_adds),
		cmocka_unit_test(test_sketch_reset_keeps_memory),
		cmocka_unit_test(test_sketch_3m_samples_speed),
		cmocka_unit_test(test_sketch_merge_equals_whole),
		cmocka_unit_test(test_sketch_merge_self_and_errors),
		cmocka_unit_test(test_sketch_round_trip),
		cmocka_unit_test(test_sketch_untrusted_input_rejected),
		cmocka_unit_test(test_sketch_collapse_counted),
		cmocka_unit_test(test_sketch_collapse_merge),
		cmocka_unit_test(test_sketch_out_of_memory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
