// SPDX-License-Identifier: MIT
/*
 * Top-k structures (engine/analyses/topk.c) against brute-force oracles: an exact weight per
 * key in a plain hash table for Space-Saving, a full qsort for rp_topk_select() and
 * for the k slowest spans.
 *
 * Space-Saving is checked for every guarantee topk.h states, after offers and after
 * merges: count - error <= true <= count, error <= F, F <= W/m with
 * m F + sum (count - F) <= W, every key heavier than F present, the i-th largest
 * count within [t_i, t_i + F] of the i-th largest true weight; and exactness while
 * at most m keys were seen. Streams: Zipf (s = 1.1 and 0.8, 100k keys, m = 1000,
 * counts and ns weights), sorted ascending and descending, round robin, all
 * distinct, and random partitions merged in a chain and in a tree. Seeds are fixed.
 * Speeds are printed, never asserted.
 */
#include "support.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "topk.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* --- random numbers, Zipf without libm ----------------------------------------------- */

static uint64_t rng;

static void seed(uint64_t s)
{
	rng = s * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
}

static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static uint64_t rnd_below(uint64_t n)
{
	return rnd() % n;
}

static double rnd_unit(void) /* [0, 1) */
{
	return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0);
}

#define LN2 0.69314718055994530942

static double ln(double x) /* x > 0: x = 2^e f, ln f = 2 atanh((f - 1) / (f + 1)) */
{
	double z, z2, term, sum = 0;
	int e = 0;

	while (x >= 2) {
		x /= 2;
		e++;
	}
	while (x < 1) {
		x *= 2;
		e--;
	}
	z = (x - 1) / (x + 1);
	z2 = z * z;
	term = z;
	for (int k = 1; k < 60; k += 2) {
		sum += term / k;
		term *= z2;
	}
	return e * LN2 + 2 * sum;
}

static double expo(double y) /* y = k ln2 + r, 0 <= r < ln2 */
{
	int k = (int)(y / LN2) - (y < 0);
	double r = y - k * LN2, sum = 1, term = 1;

	for (int i = 1; i < 30; i++) {
		term *= r / i;
		sum += term;
	}
	for (; k > 0; k--)
		sum *= 2;
	for (; k < 0; k++)
		sum /= 2;
	return sum;
}

struct zipf {
	double *cdf;
	uint32_t n;
};

static void zipf_init(struct zipf *z, uint32_t n, double s)
{
	double acc = 0;

	z->cdf = malloc(n * sizeof(*z->cdf));
	assert_non_null(z->cdf);
	z->n = n;
	for (uint32_t i = 0; i < n; i++) {
		acc += expo(-s * ln(i + 1.0));
		z->cdf[i] = acc;
	}
	for (uint32_t i = 0; i < n; i++)
		z->cdf[i] /= acc;
}

static uint32_t zipf_draw(const struct zipf *z) /* a rank, 0 the most frequent */
{
	double u = rnd_unit();
	uint32_t lo = 0, hi = z->n - 1;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (z->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Ranks to scattered keys, bijectively (odd multiplier mod 2^32). */
static uint32_t key_of(uint32_t rank)
{
	return rank * 2654435761u + 12345u;
}

/* --- the oracle: exact weights in a plain hash table ---------------------------------- */

struct oracle {
	uint32_t *key;
	uint64_t *w;
	uint8_t *used;
	uint32_t mask, n;
	uint64_t total;
};

static void oracle_init(struct oracle *o, uint32_t max_keys)
{
	uint32_t slots = 16;

	while (slots < 4 * max_keys)
		slots <<= 1;
	o->key = calloc(slots, sizeof(*o->key));
	o->w = calloc(slots, sizeof(*o->w));
	o->used = calloc(slots, 1);
	assert_true(o->key && o->w && o->used);
	o->mask = slots - 1;
	o->n = 0;
	o->total = 0;
}

static void oracle_fini(struct oracle *o)
{
	free(o->key);
	free(o->w);
	free(o->used);
}

static uint32_t oracle_slot(const struct oracle *o, uint32_t key)
{
	uint32_t i = (key * 0x85ebca6bu) & o->mask;

	while (o->used[i] && o->key[i] != key)
		i = (i + 1) & o->mask;
	return i;
}

static void oracle_add(struct oracle *o, uint32_t key, uint64_t w)
{
	uint32_t i = oracle_slot(o, key);

	if (!o->used[i]) {
		assert_true(2 * (o->n + 1) <= o->mask + 1);
		o->used[i] = 1;
		o->key[i] = key;
		o->n++;
	}
	o->w[i] += w;
	o->total += w;
}

static uint64_t oracle_get(const struct oracle *o, uint32_t key)
{
	uint32_t i = oracle_slot(o, key);

	return o->used[i] ? o->w[i] : 0;
}

static int cmp_entry(const void *pa, const void *pb) /* count desc, key asc */
{
	const struct rp_topk_entry *a = pa, *b = pb;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return (a->key > b->key) - (a->key < b->key);
}

/* Every key with its exact weight, sorted like rp_spacesaving_top(). Caller frees. */
static struct rp_topk_entry *oracle_sorted(const struct oracle *o, uint32_t *n)
{
	struct rp_topk_entry *e = calloc(o->n + 1, sizeof(*e));
	uint32_t j = 0;

	assert_non_null(e);
	for (uint32_t i = 0; i <= o->mask; i++)
		if (o->used[i] && o->w[i] > 0)
			e[j++] = (struct rp_topk_entry){ o->w[i], 0, o->key[i] };
	qsort(e, j, sizeof(*e), cmp_entry);
	*n = j;
	return e;
}

static void feed(struct rp_spacesaving *s, struct oracle *o, uint32_t key, uint64_t w)
{
	rp_spacesaving_offer(s, key, w);
	oracle_add(o, key, w);
}

/* --- Space-Saving checks ---------------------------------------------------------------- */

/* Guarantees (1), (2) and (4) for each counter; the index agrees with the counters. */
static void check_counters(const struct rp_spacesaving *s, const struct oracle *o,
			   const struct rp_topk_entry *all, uint32_t n)
{
	uint64_t m = s->m, W = rp_spacesaving_total(s), F = rp_spacesaving_floor(s), excess = 0;

	if (F > 0 && n != s->m)
		fail_msg("floor %" PRIu64 " with %u of %u counters", F, n, s->m);
	if (F > W / m)
		fail_msg("floor %" PRIu64 " > W/m = %" PRIu64, F, W / m);
	for (uint32_t i = 0; i < n; i++) {
		const struct rp_topk_entry *e = &all[i];
		uint64_t t = oracle_get(o, e->key);
		struct rp_topk_entry g;

		if (!rp_spacesaving_get(s, e->key, &g) || g.count != e->count ||
		    g.error != e->error)
			fail_msg("key %u: the index disagrees with its counter", e->key);
		if (e->error > F || e->count < F || e->count - e->error > t || t > e->count)
			fail_msg("key %u: count %" PRIu64 " error %" PRIu64 " true %" PRIu64
				 " floor %" PRIu64,
				 e->key, e->count, e->error, t, F);
		if ((e->count - t) > W / m)
			fail_msg("key %u: over by %" PRIu64 " > W/m", e->key, e->count - t);
		if (i > 0 && cmp_entry(&all[i - 1], e) >= 0)
			fail_msg("top() out of order at %u", i);
		excess += e->count - F;
	}
	if (excess > W || m * F > W - excess)
		fail_msg("m F + sum(count - F) = %" PRIu64 "*%" PRIu64 " + %" PRIu64
			 " > W = %" PRIu64,
			 m, F, excess, W);
}

/* Guarantee (3), and the rank bound t_i <= c_i <= t_i + F on the top 10. */
static void check_recall(const struct rp_spacesaving *s, const struct oracle *o,
			 const struct rp_topk_entry *all, uint32_t n,
			 const struct rp_topk_entry *exact, uint32_t ne)
{
	uint64_t F = rp_spacesaving_floor(s), W = rp_spacesaving_total(s);
	struct rp_topk_entry g;

	for (uint32_t i = 0; i < ne; i++) {
		bool in = rp_spacesaving_get(s, exact[i].key, &g);

		if (!in && exact[i].count > F)
			fail_msg("key %u of weight %" PRIu64 " > F = %" PRIu64 " missing",
				 exact[i].key, exact[i].count, F);
		if (!in && exact[i].count > W / s->m)
			fail_msg("key %u of weight > W/m missing", exact[i].key);
	}
	for (uint32_t i = 0; i < 10 && i < n; i++) {
		uint64_t t = i < ne ? exact[i].count : 0;
		uint64_t t10 = ne >= 10 ? exact[9].count : 0;

		if (all[i].count < t || all[i].count - t > F)
			fail_msg("rank %u: count %" PRIu64 ", true %" PRIu64 ", F %" PRIu64, i,
				 all[i].count, t, F);
		if (oracle_get(o, all[i].key) + F < t10) /* a reported top 10 is near the top 10 */
			fail_msg("rank %u: key %u weighs %" PRIu64 ", the 10th %" PRIu64, i,
				 all[i].key, oracle_get(o, all[i].key), t10);
	}
}

/* Everything topk.h promises, against the oracle. @offers_only: no merges, so (I) is tight. */
static void check_ss(const struct rp_spacesaving *s, const struct oracle *o, bool offers_only)
{
	uint32_t n, ne;
	struct rp_topk_entry *all = calloc(s->m, sizeof(*all));
	struct rp_topk_entry *exact = oracle_sorted(o, &ne);
	uint64_t sum = 0;

	assert_non_null(all);
	assert_int_equal(rp_spacesaving_total(s), o->total);
	n = rp_spacesaving_top(s, all, s->m);
	assert_int_equal(n, rp_spacesaving_size(s));
	assert_int_equal(n, ne < s->m ? ne : s->m);
	check_counters(s, o, all, n);
	check_recall(s, o, all, n, exact, ne);
	for (uint32_t i = 0; i < n; i++)
		sum += all[i].count;
	if (offers_only)
		assert_int_equal(sum, o->total); /* (I) with equality */
	free(all);
	free(exact);
}

/* Below capacity: every count exact, no error, top-k equal to the exact top-k. */
static void check_exact(const struct rp_spacesaving *s, const struct oracle *o)
{
	uint32_t ne, n, ks[] = { 0, 1, 5, o->n, s->m + 3 };
	struct rp_topk_entry *exact = oracle_sorted(o, &ne);
	struct rp_topk_entry *top = calloc(s->m + 3, sizeof(*top));

	assert_non_null(top);
	assert_int_equal(rp_spacesaving_floor(s), 0);
	for (uint32_t j = 0; j < ARRAY_SIZE(ks); j++) {
		n = rp_spacesaving_top(s, top, ks[j]);
		assert_int_equal(n, ks[j] < ne ? ks[j] : ne);
		for (uint32_t i = 0; i < n; i++) {
			assert_int_equal(top[i].key, exact[i].key);
			assert_int_equal(top[i].count, exact[i].count);
			assert_int_equal(top[i].error, 0);
		}
	}
	free(top);
	free(exact);
}

/* --- Space-Saving tests ------------------------------------------------------------------ */

static void test_topk_spacesaving_init_args(void **state)
{
	struct rp_spacesaving s;
	static uint64_t mem[RP_SPACESAVING_MEMSIZE(64) / 8 + 1];
	struct rp_topk_entry e;

	(void)state;
	assert_int_equal(RP_SPACESAVING_MEMSIZE(1000), 32192);
	assert_int_equal(RP_SPACESAVING_SLOTS(1), 2);
	assert_int_equal(RP_SPACESAVING_SLOTS(1024), 2048);
	assert_int_equal(rp_spacesaving_init(&s, 0), -EINVAL);
	assert_int_equal(rp_spacesaving_init(&s, RP_SPACESAVING_MAX + 1), -EINVAL);
	assert_int_equal(rp_spacesaving_init_mem(&s, 64, mem, RP_SPACESAVING_MEMSIZE(64) - 1),
			 -EINVAL);
	assert_int_equal(rp_spacesaving_init_mem(&s, 64, (char *)mem + 4, sizeof(mem) - 8),
			 -EINVAL); /* misaligned */
	assert_int_equal(rp_spacesaving_init_mem(&s, 64, mem, sizeof(mem)), 0);
	rp_spacesaving_offer(&s, 7, 3);
	rp_spacesaving_offer(&s, 7, 0);
	rp_spacesaving_offer(&s, 8, 0); /* nothing: no counter for a zero weight */
	assert_int_equal(rp_spacesaving_size(&s), 1);
	assert_true(rp_spacesaving_get(&s, 7, &e));
	assert_int_equal(e.count, 3);
	assert_false(rp_spacesaving_get(&s, 8, &e));
	assert_int_equal(e.count, 0);
	rp_spacesaving_fini(&s); /* caller memory: nothing to free */
	rp_spacesaving_fini(NULL);
	rp_spacesaving_fini(&s);
}

static void test_topk_spacesaving_exact_below_capacity(void **state)
{
	static const uint32_t ms[] = { 1, 7, 64, 1000 };

	(void)state;
	for (uint32_t j = 0; j < ARRAY_SIZE(ms); j++) {
		struct rp_spacesaving s;
		struct oracle o;
		uint32_t m = ms[j], keys[1000];

		seed(100 + j);
		assert_int_equal(rp_spacesaving_init(&s, m), 0);
		for (int round = 0; round < 2; round++) {
			oracle_init(&o, m);
			for (uint32_t i = 0; i < m; i++) /* the edges, then random keys */
				keys[i] = i == 0 ? 0 : i == 1 ? UINT32_MAX : (uint32_t)rnd();
			for (uint32_t i = 0; i < 50 * m; i++) {
				uint32_t key = keys[rnd_below(m)];
				uint64_t w = rnd_below(4) ? rnd_below(1000) : 5; /* 0 too */

				feed(&s, &o, key, w);
			}
			check_exact(&s, &o);
			check_ss(&s, &o, true);
			oracle_fini(&o);
			rp_spacesaving_reset(&s);
			assert_int_equal(rp_spacesaving_size(&s), 0);
			assert_int_equal(rp_spacesaving_total(&s), 0);
		}
		rp_spacesaving_fini(&s);
	}
}

#define ZIPF_KEYS   100000u
#define ZIPF_M	    1000u
#define ZIPF_OFFERS 1000000u

static uint64_t ns_weight(void) /* log-uniform-ish span times, 1 ns to ~1 s */
{
	uint64_t shift = 34 + rnd_below(30); /* sequenced: the same stream everywhere */

	return 1 + (rnd() >> shift);
}

static void run_zipf(double sexp, bool weighted, uint64_t sd)
{
	struct rp_spacesaving s;
	struct oracle o;
	struct zipf z;

	seed(sd);
	zipf_init(&z, ZIPF_KEYS, sexp);
	oracle_init(&o, ZIPF_KEYS);
	assert_int_equal(rp_spacesaving_init(&s, ZIPF_M), 0);
	for (uint32_t i = 0; i < ZIPF_OFFERS; i++) {
		feed(&s, &o, key_of(zipf_draw(&z)), weighted ? ns_weight() : 1);
		if (i == ZIPF_OFFERS / 3)
			check_ss(&s, &o, true);
	}
	check_ss(&s, &o, true);
	printf("# zipf s=%.1f %s: %u keys seen, W/m %" PRIu64 ", floor %" PRIu64 "\n", sexp,
	       weighted ? "ns" : "counts", o.n, o.total / ZIPF_M, rp_spacesaving_floor(&s));
	rp_spacesaving_fini(&s);
	oracle_fini(&o);
	free(z.cdf);
}

static void test_topk_spacesaving_zipf_within_bound(void **state)
{
	(void)state;
	run_zipf(1.1, false, 1);
	run_zipf(0.8, false, 2);
	run_zipf(1.1, true, 3);
	run_zipf(0.8, true, 4);
}

/* Adversarial orders, each on a fresh summary of @m counters. */
static void run_adversarial(uint32_t m, int order)
{
	struct rp_spacesaving s;
	struct oracle o;

	oracle_init(&o, 200000);
	assert_int_equal(rp_spacesaving_init(&s, m), 0);
	switch (order) {
	case 0: /* weights ascending: the heaviest come last */
		for (uint32_t i = 0; i < 20000; i++)
			feed(&s, &o, i, i + 1);
		break;
	case 1: /* sorted keys, key i repeated i times */
		for (uint32_t i = 0; i < 400; i++)
			for (uint32_t r = 0; r < i; r++)
				feed(&s, &o, i, 1);
		break;
	case 2: /* weights descending */
		for (uint32_t i = 20000; i > 0; i--)
			feed(&s, &o, i, i);
		break;
	case 3: /* round robin over 2m + 1 keys, a heavy key every 8th offer */
		for (uint32_t i = 0; i < 200000; i++)
			feed(&s, &o, i % 8 == 0 ? 0xdeadbeefu : i % (2 * m + 1), 1);
		if (m > 8) /* 1/8 of W > W/m: guaranteed present */
			assert_true(
				rp_spacesaving_get(&s, 0xdeadbeefu, &(struct rp_topk_entry){ 0 }));
		break;
	default: /* all distinct */
		seed(m);
		for (uint32_t i = 0; i < 100000; i++)
			feed(&s, &o, key_of(i), ns_weight());
		break;
	}
	check_ss(&s, &o, true);
	rp_spacesaving_fini(&s);
	oracle_fini(&o);
}

static void test_topk_spacesaving_adversarial_orders(void **state)
{
	static const uint32_t ms[] = { 1, 2, 100, 1000 };

	(void)state;
	for (uint32_t j = 0; j < ARRAY_SIZE(ms); j++)
		for (int order = 0; order < 5; order++)
			run_adversarial(ms[j], order);
}

#define PARTS 8

/* A Zipf stream split at random over PARTS summaries (and their oracles). */
static void make_parts(struct rp_spacesaving *p, const uint32_t *m, struct oracle *all, double sexp,
		       bool weighted)
{
	struct zipf z;

	zipf_init(&z, ZIPF_KEYS, sexp);
	for (int i = 0; i < PARTS; i++)
		assert_int_equal(rp_spacesaving_init(&p[i], m[i]), 0);
	for (uint32_t i = 0; i < ZIPF_OFFERS / 2; i++) {
		uint32_t key = key_of(zipf_draw(&z)), part = (uint32_t)rnd_below(PARTS);
		uint64_t w = weighted ? ns_weight() : 1;

		part = part < 2 ? 0 : part; /* uneven sizes; part 1 stays empty */
		rp_spacesaving_offer(&p[part], key, w);
		oracle_add(all, key, w);
	}
	free(z.cdf);
}

static void run_merge(double sexp, bool weighted, bool tree, uint64_t sd)
{
	struct rp_spacesaving p[PARTS];
	uint32_t m[PARTS] = { 500, 500, 500, 500, 500, 800, 500, 2000 };
	struct oracle all;

	seed(sd);
	oracle_init(&all, ZIPF_KEYS);
	make_parts(p, m, &all, sexp, weighted);
	if (tree) { /* ((0 1)(2 3))((4 5)(6 7)) */
		for (int step = 1; step < PARTS; step *= 2)
			for (int i = 0; i + step < PARTS; i += 2 * step)
				assert_int_equal(rp_spacesaving_merge(&p[i], &p[i + step]), 0);
	} else {
		for (int i = 1; i < PARTS; i++)
			assert_int_equal(rp_spacesaving_merge(&p[0], &p[i]), 0);
	}
	check_ss(&p[0], &all, false);
	printf("# merge s=%.1f %s %s: W/m %" PRIu64 ", floor %" PRIu64 "\n", sexp,
	       weighted ? "ns" : "counts", tree ? "tree" : "chain", all.total / p[0].m,
	       rp_spacesaving_floor(&p[0]));
	for (int i = 0; i < PARTS; i++)
		rp_spacesaving_fini(&p[i]);
	oracle_fini(&all);
}

static void test_topk_spacesaving_merge_within_bound(void **state)
{
	(void)state;
	run_merge(1.1, false, false, 11);
	run_merge(0.8, false, true, 12);
	run_merge(1.1, true, true, 13);
	run_merge(0.8, true, false, 14);
}

/* Small merges: exact while the union fits, a copy into an empty one, m rules. */
static void test_topk_spacesaving_merge_edges(void **state)
{
	struct rp_spacesaving a, b, c;
	struct oracle oa, ob, o;

	(void)state;
	seed(21);
	oracle_init(&oa, 1000);
	oracle_init(&ob, 1000);
	oracle_init(&o, 1000);
	assert_int_equal(rp_spacesaving_init(&a, 100), 0);
	assert_int_equal(rp_spacesaving_init(&b, 100), 0);
	assert_int_equal(rp_spacesaving_init(&c, 50), 0);
	for (uint32_t i = 0; i < 5000; i++) { /* 100 keys in all, overlapping */
		uint32_t key = (uint32_t)rnd_below(100) * 7;
		uint64_t w = rnd_below(100);

		feed(i & 1 ? &a : &b, i & 1 ? &oa : &ob, key, w);
		oracle_add(&o, key, w);
	}
	assert_int_equal(rp_spacesaving_merge(&a, &c), -EINVAL); /* src m < dst m */
	assert_int_equal(rp_spacesaving_merge(&c, &a), 0);	 /* src m >= dst m is fine */
	check_ss(&c, &oa, false);
	assert_int_equal(rp_spacesaving_merge(&c, &b), 0); /* 100 keys into 50 counters */
	check_ss(&c, &o, false);
	assert_int_equal(rp_spacesaving_merge(&a, &b), 0); /* the union fits: exact */
	check_exact(&a, &o);
	check_ss(&a, &o, false);
	rp_spacesaving_reset(&b);
	assert_int_equal(rp_spacesaving_merge(&b, &a), 0); /* into an empty one: a copy */
	check_exact(&b, &o);
	rp_spacesaving_reset(&b);
	assert_int_equal(rp_spacesaving_merge(&a, &b), 0); /* an empty src: no change */
	check_exact(&a, &o);
	rp_spacesaving_fini(&a);
	rp_spacesaving_fini(&b);
	rp_spacesaving_fini(&c);
	oracle_fini(&oa);
	oracle_fini(&ob);
	oracle_fini(&o);
}

/* --- exact selection ------------------------------------------------------------------------ */

static void test_topk_select_matches_sort(void **state)
{
	(void)state;
	seed(31);
	for (int trial = 0; trial < 300; trial++) {
		uint32_t n = trial < 5 ? (uint32_t)trial : (uint32_t)rnd_below(3000);
		uint64_t range = trial % 3 == 0 ? 4 : trial % 3 == 1 ? 1000 : UINT64_MAX;
		uint64_t *v = malloc((n + 1) * sizeof(*v));
		struct rp_topk_entry *ref = malloc((n + 1) * sizeof(*ref));
		struct rp_topk_entry *out = malloc((n + 8) * sizeof(*out));
		uint32_t ks[] = { 0, 1, 3, n / 2, n, n + 7 };

		assert_true(v && ref && out);
		for (uint32_t i = 0; i < n; i++) {
			v[i] = range == UINT64_MAX ? rnd() : rnd_below(range);
			ref[i] = (struct rp_topk_entry){ v[i], 0, i };
		}
		qsort(ref, n, sizeof(*ref), cmp_entry);
		for (uint32_t j = 0; j < ARRAY_SIZE(ks); j++) {
			uint32_t got = rp_topk_select(v, n, ks[j], out);

			assert_int_equal(got, ks[j] < n ? ks[j] : n);
			for (uint32_t i = 0; i < got; i++) {
				assert_int_equal(out[i].key, ref[i].key);
				assert_int_equal(out[i].count, ref[i].count);
				assert_int_equal(out[i].error, 0);
			}
		}
		free(v);
		free(ref);
		free(out);
	}
}

/* --- the k slowest spans --------------------------------------------------------------------- */

static int cmp_slow(const void *pa, const void *pb) /* the order in topk.h, slowest first */
{
	const struct rp_span_exemplar *a = pa, *b = pb;

	if (a->dur_ns != b->dur_ns)
		return a->dur_ns > b->dur_ns ? -1 : 1;
	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	if (a->span_id != b->span_id)
		return a->span_id < b->span_id ? -1 : 1;
	return (a->track_id > b->track_id) - (a->track_id < b->track_id);
}

/* Many ties on every level; (span, track) unique, so the order is total. */
static void random_spans(struct rp_span_exemplar *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		e[i].dur_ns = rnd_below(40);
		e[i].start_ns = rnd_below(8);
		e[i].span_id = rnd_below(4);
		e[i].track_id = i;
		e[i].self_ns = rnd();
		e[i].subtree_ns = e[i].dur_ns;
		e[i].name_id = (uint32_t)rnd();
		e[i].category_id = (uint32_t)rnd_below(5);
		e[i].concurrency = (uint32_t)rnd_below(100);
		e[i].concurrency_known = rnd() & 1;
	}
	for (uint32_t i = n; i > 1; i--) { /* shuffle */
		uint32_t j = (uint32_t)rnd_below(i);
		struct rp_span_exemplar t = e[i - 1];

		e[i - 1] = e[j];
		e[j] = t;
	}
}

static void assert_same_exemplar(const struct rp_span_exemplar *a, const struct rp_span_exemplar *b)
{
	assert_int_equal(a->track_id, b->track_id);
	assert_int_equal(a->span_id, b->span_id);
	assert_int_equal(a->start_ns, b->start_ns);
	assert_int_equal(a->dur_ns, b->dur_ns);
	assert_int_equal(a->self_ns, b->self_ns);
	assert_int_equal(a->subtree_ns, b->subtree_ns);
	assert_int_equal(a->name_id, b->name_id);
	assert_int_equal(a->category_id, b->category_id);
	assert_int_equal(a->concurrency, b->concurrency);
	assert_int_equal(a->concurrency_known, b->concurrency_known);
}

/* @s holds exactly the k slowest of @sorted[0..n) (already in cmp_slow order). */
static void check_slowest(const struct rp_slowest *s, const struct rp_span_exemplar *sorted,
			  uint32_t n)
{
	struct rp_span_exemplar *out = malloc((s->k + 1) * sizeof(*out));
	uint32_t got, want = s->k < n ? s->k : n;

	assert_non_null(out);
	got = rp_slowest_sorted(s, out);
	assert_int_equal(got, want);
	for (uint32_t i = 0; i < got; i++)
		assert_same_exemplar(&out[i], &sorted[i]);
	free(out);
}

/* The k slowest are a sort's first k; floor_ns, the close's one test, is 0 until k are
 * kept, then the shortest kept, and an offer shorter than it is refused. */
static void test_topk_slowest_matches_sort(void **state)
{
	static const uint32_t ks[] = { 1, 2, 5, 64, 500, 5000 };
	uint32_t n = 3000;
	struct rp_span_exemplar *e = malloc(n * sizeof(*e)), *ref = malloc(n * sizeof(*e));

	(void)state;
	assert_true(e && ref);
	seed(41);
	for (uint32_t j = 0; j < ARRAY_SIZE(ks); j++) {
		struct rp_slowest s;

		random_spans(e, n);
		memcpy(ref, e, n * sizeof(*e));
		qsort(ref, n, sizeof(*ref), cmp_slow);
		assert_int_equal(rp_slowest_init(&s, ks[j]), 0);
		for (uint32_t i = 0; i < n; i++) {
			uint64_t floor = s.floor_ns, least = UINT64_MAX;
			bool kept = rp_slowest_offer(&s, &e[i]);

			if (i < ks[j])
				assert_true(kept);
			if (e[i].dur_ns < floor) /* what the close's one test skips */
				assert_false(kept);
			for (uint32_t h = 0; h < s.n; h++) /* floor_ns: the shortest kept */
				least = s.heap[h].dur_ns < least ? s.heap[h].dur_ns : least;
			assert_int_equal(s.floor_ns, s.n < s.k ? 0 : least);
		}
		check_slowest(&s, ref, n);
		rp_slowest_reset(&s);
		assert_int_equal(s.floor_ns, 0);
		assert_int_equal(rp_slowest_sorted(&s, ref), 0);
		rp_slowest_fini(&s);
	}
	free(e);
	free(ref);
}

static void test_topk_slowest_merge_partitions(void **state)
{
	uint32_t n = 4000, k = 50, parts = 5;
	struct rp_span_exemplar *e = malloc(n * sizeof(*e));
	struct rp_slowest p[5], dst;
	static uint64_t mem[RP_SLOWEST_MEMSIZE(50) / 8];

	(void)state;
	assert_non_null(e);
	seed(51);
	random_spans(e, n);
	for (uint32_t i = 0; i < parts; i++)
		assert_int_equal(rp_slowest_init(&p[i], k + 10 * i), 0);
	for (uint32_t i = 0; i < n; i++)
		rp_slowest_offer(&p[rnd_below(parts)], &e[i]);
	assert_int_equal(rp_slowest_init_mem(&dst, k, mem, sizeof(mem)), 0);
	for (uint32_t i = parts; i-- > 0;)
		rp_slowest_merge(&dst, &p[i]);
	qsort(e, n, sizeof(*e), cmp_slow);
	check_slowest(&dst, e, n);
	for (uint32_t i = 0; i < parts; i++)
		rp_slowest_fini(&p[i]);
	rp_slowest_fini(&dst);
	free(e);
}

static void test_topk_slowest_init_args(void **state)
{
	struct rp_slowest s;
	static uint64_t mem[RP_SLOWEST_MEMSIZE(4) / 8 + 1];

	(void)state;
	assert_int_equal(sizeof(struct rp_span_exemplar), 72); /* charged_ns (1.6) */
	assert_int_equal(rp_slowest_init(&s, 0), -EINVAL);
	assert_int_equal(rp_slowest_init_mem(&s, 4, mem, RP_SLOWEST_MEMSIZE(4) - 1), -EINVAL);
	assert_int_equal(rp_slowest_init_mem(&s, 4, (char *)mem + 1, sizeof(mem) - 8), -EINVAL);
	assert_int_equal(rp_slowest_init_mem(&s, 4, mem, sizeof(mem)), 0);
	rp_slowest_fini(&s);
	rp_slowest_fini(NULL);
}

/* --- speed (printed, never asserted) ------------------------------------------------------- */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void speed_ss(const uint32_t *keys, const uint64_t *w, uint32_t n, const char *what)
{
	struct rp_spacesaving s;
	double t0, t1;

	assert_int_equal(rp_spacesaving_init(&s, ZIPF_M), 0);
	t0 = now_ns();
	for (uint32_t i = 0; i < n; i++)
		rp_spacesaving_offer(&s, keys[i], w[i]);
	t1 = now_ns();
	printf("# spacesaving m=%u %-22s %6.1f ns/offer (floor %" PRIu64 ")\n", ZIPF_M, what,
	       (t1 - t0) / n, rp_spacesaving_floor(&s));
	rp_spacesaving_fini(&s);
}

static void test_topk_offer_speed(void **state)
{
	uint32_t n = 4000000, *keys = malloc(n * sizeof(*keys));
	uint64_t *w = malloc(n * sizeof(*w)), *ones = malloc(n * sizeof(*ones));
	struct rp_span_exemplar *e = malloc(1000000 * sizeof(*e));
	struct rp_topk_entry top[10];
	struct rp_slowest sl;
	struct zipf z;
	double t0, t1;

	(void)state;
	assert_true(keys && w && ones && e);
	seed(61);
	zipf_init(&z, ZIPF_KEYS, 1.1);
	for (uint32_t i = 0; i < n; i++) {
		keys[i] = key_of(zipf_draw(&z));
		w[i] = ns_weight();
		ones[i] = 1;
	}
	speed_ss(keys, ones, n, "zipf 1.1 counts");
	speed_ss(keys, w, n, "zipf 1.1 ns weights");
	for (uint32_t i = 0; i < n; i++)
		keys[i] = key_of(i);
	speed_ss(keys, w, n, "all distinct (evicts)");
	random_spans(e, 1000000);
	for (uint32_t i = 0; i < 1000000; i++)
		e[i].dur_ns = rnd();
	assert_int_equal(rp_slowest_init(&sl, 32), 0);
	t0 = now_ns();
	for (uint32_t i = 0; i < 1000000; i++)
		rp_slowest_offer(&sl, &e[i]);
	t1 = now_ns();
	printf("# slowest k=32 random durations          %6.1f ns/offer\n", (t1 - t0) / 1e6);
	t0 = now_ns();
	rp_topk_select(w, ZIPF_KEYS, 10, top);
	t1 = now_ns();
	printf("# select k=10 of %u                  %6.1f ns/value\n", ZIPF_KEYS,
	       (t1 - t0) / ZIPF_KEYS);
	rp_slowest_fini(&sl);
	free(z.cdf);
	free(keys);
	free(w);
	free(ones);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topk_spacesaving_init_args),
		cmocka_unit_test(test_topk_spacesaving_exact_below_capacity),
		cmocka_unit_test(test_topk_spacesaving_zipf_within_bound),
		cmocka_unit_test(test_topk_spacesaving_adversarial_orders),
		cmocka_unit_test(test_topk_spacesaving_merge_within_bound),
		cmocka_unit_test(test_topk_spacesaving_merge_edges),
		cmocka_unit_test(test_topk_select_matches_sort),
		cmocka_unit_test(test_topk_slowest_matches_sort),
		cmocka_unit_test(test_topk_slowest_merge_partitions),
		cmocka_unit_test(test_topk_slowest_init_args),
		cmocka_unit_test(test_topk_offer_speed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
