// SPDX-License-Identifier: MIT
/*
 * The concurrency sweep against a brute-force oracle built in the test from the
 * list of intervals: the distinct boundary times t_0 < ... < t_k cut the range into
 * elementary segments [t_i, t_i+1); an interval [s, e) covers segment i when
 * s <= t_i and t_i+1 <= e (a zero-length interval covers none). Counted by a
 * difference array over boundary indices and, for small inputs, also by checking
 * every interval against every segment. From the segments: time per level over
 * [min start, max end]; percentiles by walking the segments in level order until
 * the time walked reaches p% of the total (128-bit integers); max; mean; the level
 * at a time t by finding the segment with t_i <= t < t_i+1 (0 if none, the toolkit's
 * rule 6); the change points (the times where the level differs from the segment
 * before), which tell which midpoints a history of H points still covers.
 *
 * Traces: hand-written cases; fixed-seed generated ones (nested spans on several
 * tracks, async overlapping spans, shared and zero-length times, bursts hundreds
 * deep, long idle gaps), fed with the events of one timestamp in three orders
 * (closes first, opens first, shuffled); a live feed with accruals in between; and
 * the agent toolkit's own result for tests/data/nat/small.json.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include <yajl/yajl_tree.h>

#include "support.h"
#include "sweep.h"
#include "sweepcheck.h"

__extension__ typedef unsigned __int128 u128;

struct ival {
	uint64_t s, e;
};

static const unsigned pcts[] = { 0,    1,    100,  2500, 3333, 5000,  5001, 7500,
				 9000, 9500, 9900, 9990, 9999, 10000, 20000 };

/* ---------------------------------------------------------------- oracle */

struct oracle {
	uint64_t *bt; /* distinct boundary times, ascending */
	size_t nb;
	uint32_t *lv;	    /* lv[i]: intervals covering [bt[i], bt[i + 1]) */
	uint32_t *by_level; /* segment indices in level order */
	uint64_t *ns;	    /* time per level, nlev entries */
	uint32_t nlev;	    /* max level + 1; 0 when no time */
	uint64_t total;
	u128 area;
	uint64_t *cp_t; /* change points: from cp_t[k] the level is cp_lv[k] */
	uint32_t *cp_lv;
	size_t ncp;
};

#define NAIVE_MAX 4000

static const uint32_t *sort_lv;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_by_level(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (sort_lv[x] != sort_lv[y])
		return sort_lv[x] < sort_lv[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Number of elements of a[0..n) that are < x. */
static size_t count_below(const uint64_t *a, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void oracle_boundaries(struct oracle *o, const struct ival *iv, size_t n)
{
	uint64_t *t = malloc((2 * n + 1) * sizeof(*t));

	assert_non_null(t);
	for (size_t i = 0; i < n; i++) {
		t[2 * i] = iv[i].s;
		t[2 * i + 1] = iv[i].e;
	}
	qsort(t, 2 * n, sizeof(*t), cmp_u64);
	o->nb = 0;
	for (size_t i = 0; i < 2 * n; i++)
		if (o->nb == 0 || t[i] != t[o->nb - 1])
			t[o->nb++] = t[i];
	o->bt = t;
}

static void oracle_cover(struct oracle *o, const struct ival *iv, size_t n)
{
	size_t nseg = o->nb > 0 ? o->nb - 1 : 0;
	int64_t *d = calloc(o->nb + 1, sizeof(*d));
	int64_t run = 0;

	o->lv = calloc(nseg + 1, sizeof(*o->lv));
	assert_true(d && o->lv);
	for (size_t i = 0; i < n; i++) {
		assert_true(iv[i].s <= iv[i].e);
		d[count_below(o->bt, o->nb, iv[i].s)]++;
		d[count_below(o->bt, o->nb, iv[i].e)]--;
	}
	for (size_t i = 0; i < nseg; i++) {
		run += d[i];
		assert_true(run >= 0);
		o->lv[i] = (uint32_t)run;
	}
	free(d);
	if (n > NAIVE_MAX)
		return;
	for (size_t i = 0; i < nseg; i++) {
		uint32_t c = 0;

		for (size_t j = 0; j < n; j++)
			c += iv[j].s <= o->bt[i] && o->bt[i + 1] <= iv[j].e;
		assert_int_equal(c, o->lv[i]);
	}
}

static void oracle_levels(struct oracle *o)
{
	size_t nseg = o->nb > 0 ? o->nb - 1 : 0;
	uint32_t max = 0;

	for (size_t i = 0; i < nseg; i++)
		max = o->lv[i] > max ? o->lv[i] : max;
	o->ns = calloc(max + 1, sizeof(*o->ns));
	o->by_level = malloc((nseg + 1) * sizeof(*o->by_level));
	assert_true(o->ns && o->by_level);
	o->total = 0;
	o->area = 0;
	for (size_t i = 0; i < nseg; i++) {
		uint64_t len = o->bt[i + 1] - o->bt[i];

		o->ns[o->lv[i]] += len;
		o->total += len;
		o->area += (u128)len * o->lv[i];
		o->by_level[i] = (uint32_t)i;
	}
	assert_int_equal(o->total, nseg > 0 ? o->bt[nseg] - o->bt[0] : 0);
	o->nlev = o->total > 0 ? max + 1 : 0;
	sort_lv = o->lv;
	qsort(o->by_level, nseg, sizeof(*o->by_level), cmp_by_level);
}

static void oracle_changes(struct oracle *o)
{
	uint32_t prev = 0;

	o->cp_t = malloc((o->nb + 1) * sizeof(*o->cp_t));
	o->cp_lv = malloc((o->nb + 1) * sizeof(*o->cp_lv));
	assert_true(o->cp_t && o->cp_lv);
	o->ncp = 0;
	for (size_t i = 0; i < o->nb; i++) {
		uint32_t l = i + 1 < o->nb ? o->lv[i] : 0;

		if (l == prev)
			continue;
		o->cp_t[o->ncp] = o->bt[i];
		o->cp_lv[o->ncp++] = l;
		prev = l;
	}
}

static void oracle_build(struct oracle *o, const struct ival *iv, size_t n)
{
	memset(o, 0, sizeof(*o));
	oracle_boundaries(o, iv, n);
	oracle_cover(o, iv, n);
	oracle_levels(o);
	oracle_changes(o);
}

static void oracle_free(struct oracle *o)
{
	free(o->bt);
	free(o->lv);
	free(o->by_level);
	free(o->ns);
	free(o->cp_t);
	free(o->cp_lv);
}

/* The segment with bt[i] <= t < bt[i + 1]; 0 when none. */
static uint32_t oracle_level_at(const struct oracle *o, uint64_t t)
{
	size_t i = count_below(o->bt, o->nb, t + 1); /* boundaries <= t */

	if (t == UINT64_MAX || i == 0 || i >= o->nb)
		return 0;
	return o->lv[i - 1];
}

static uint32_t oracle_percentile(const struct oracle *o, unsigned p, uint32_t cap)
{
	u128 cum = 0;

	p = p > 10000 ? 10000 : p;
	for (size_t k = 0; k + 1 < o->nb; k++) {
		uint32_t i = o->by_level[k];

		cum += o->bt[i + 1] - o->bt[i];
		if (cum * 10000 >= (u128)o->total * p)
			return o->lv[i] < cap ? o->lv[i] : cap;
	}
	return 0;
}

/* ---------------------------------------------------------------- checks */

static void assert_levels(const struct rp_sweep *sw, const uint64_t *exp, uint32_t nexp)
{
	uint64_t *got = calloc(sw->n_alloc, sizeof(*got));
	uint32_t n;

	assert_non_null(got);
	n = rp_sweep_levels(sw, got);
	while (nexp > 0 && exp[nexp - 1] == 0)
		nexp--;
	assert_int_equal(n, nexp);
	for (uint32_t c = 0; c < sw->n_alloc; c++) {
		assert_int_equal(got[c], c < n ? exp[c] : 0);
		assert_int_equal(rp_sweep_ns(sw, c), got[c]);
	}
	free(got);
}

static void assert_mean(const struct rp_sweep *sw, long double exp)
{
	long double d = (long double)rp_sweep_mean(sw) - exp;

	if (d < 0)
		d = -d;
	if (d > 1e-12L * exp) {
		print_error("mean %.17g, expected %.17Lg\n", rp_sweep_mean(sw), exp);
		fail();
	}
}

/* Everything the sweep reports, against the oracle with levels capped at @cap. */
static void check_against(const struct rp_sweep *sw, const struct oracle *o, uint32_t cap)
{
	uint64_t *exp = calloc(cap + 1, sizeof(*exp));
	uint64_t over = 0;
	uint32_t max = o->nlev > 0 ? o->nlev - 1 : 0;

	assert_non_null(exp);
	for (uint32_t c = 0; c < o->nlev; c++) {
		exp[c < cap ? c : cap] += o->ns[c];
		over += c > cap ? o->ns[c] : 0;
	}
	assert_int_equal(rp_sweep_observed_ns(sw), o->total);
	assert_levels(sw, exp, cap + 1);
	assert_int_equal(sw->over_cap_ns, over);
	assert_int_equal(rp_sweep_max(sw), max < cap ? max : cap);
	for (size_t k = 0; k < sizeof(pcts) / sizeof(pcts[0]); k++)
		assert_int_equal(rp_sweep_percentile(sw, pcts[k]),
				 oracle_percentile(o, pcts[k], cap));
	assert_mean(sw, o->total ? (long double)o->area / (long double)o->total : 0);
	assert_int_equal(rp_sweep_unmatched(sw), 0);
	assert_int_equal(sw->backwards, 0);
	assert_int_equal(sw->nomem, 0);
	free(exp);
}

struct qstat {
	uint64_t answered, misses, provisional;
};

/*
 * Query the level at @m with @T the latest time fed and @h the history size: the
 * history holds the last h change points before T. @return the sweep's answer;
 * a provisional one (m >= T) is only checked when @final_stream.
 */
static int check_query(struct rp_sweep *sw, const struct oracle *o, uint64_t m, uint64_t T,
		       uint32_t h, bool final_stream, struct qstat *q)
{
	uint32_t level = 12345;
	int ret = rp_sweep_level_at(sw, m, &level);
	size_t c = count_below(o->cp_t, o->ncp, T);

	if (m >= T) {
		assert_int_equal(ret, 1);
		if (!final_stream) {
			q->provisional++;
			return ret;
		}
		assert_int_equal(level, oracle_level_at(o, m));
		q->answered++;
		return ret;
	}
	if (c > h && m < o->cp_t[c - h]) {
		assert_int_equal(ret, -ENOENT);
		q->misses++;
		return ret;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(level, oracle_level_at(o, m));
	q->answered++;
	return ret;
}

/* ---------------------------------------------------------------- traces */

static uint64_t rng;

static uint64_t rnd(void)
{
	uint64_t z = (rng += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* Mostly whole microseconds, so that tracks share times; sometimes a stray ns. */
static uint64_t step(void)
{
	uint64_t r = below(10);

	if (r < 3)
		return 0;
	return r < 9 ? 1000 * (1 + below(5)) : 1 + below(999);
}

static size_t gen_track(struct ival *iv, size_t n, size_t max, uint64_t w0, uint64_t w1)
{
	uint64_t stack[16], t = w0 + 1000 * below((w1 - w0) / 2000 + 1);
	unsigned depth = 0, maxdepth = 1 + (unsigned)below(12);

	while (t < w1 && n < max) {
		uint64_t r = below(100);

		if (r < 6)
			iv[n++] = (struct ival){ t, t };
		else if (depth < maxdepth && r < 56)
			stack[depth++] = t;
		else if (depth > 0)
			iv[n++] = (struct ival){ stack[--depth], t };
		t += step();
	}
	while (depth > 0 && n < max)
		iv[n++] = (struct ival){ stack[--depth], t };
	return n;
}

/* @count spans starting within @spread of @w0, up to @len long (some zero-length). */
static size_t gen_async(struct ival *iv, size_t n, size_t max, uint64_t w0, uint64_t spread,
			uint64_t len, uint64_t count)
{
	for (uint64_t k = 0; k < count && n < max; k++) {
		uint64_t s = w0 + below(spread), e = s + (below(8) ? below(len + 1) : 0);

		if (below(10) < 7) {
			s -= s % 1000;
			e -= e % 1000;
		}
		iv[n++] = (struct ival){ s, e < s ? s : e };
	}
	return n;
}

static uint64_t gen_gap(void)
{
	uint64_t r = below(10);

	if (r == 0)
		return 0;
	return r < 7 ? below(1000000) : 1000000000 + below(10000000000);
}

/* Epochs of activity separated by idle gaps, until @max intervals. */
static size_t gen_trace(struct ival *iv, size_t max, uint64_t seed)
{
	uint64_t t = 1000000000;
	size_t n = 0;

	rng = seed;
	while (n < max) {
		uint64_t len = 10000 * (1 + below(1000)), tracks = 1 + below(8);
		uint64_t burst = below(20) == 0 ? 300 + below(300) : below(30);

		for (uint64_t k = 0; k < tracks; k++)
			n = gen_track(iv, n, max, t, t + len);
		n = gen_async(iv, n, max, t, burst > 100 ? len / 100 + 1 : len, len / 2, burst);
		t += len + gen_gap();
	}
	return n;
}

/* ---------------------------------------------------------------- feeding */

struct ev {
	uint64_t t;
	uint32_t key; /* order within a timestamp */
	uint32_t iv;
	bool open;
};

enum order { CLOSES_FIRST, OPENS_FIRST, SHUFFLED, N_ORDERS };

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->iv != y->iv)
		return x->iv < y->iv ? -1 : 1;
	return (int)x->open - (int)y->open;
}

static struct ev *make_events(const struct ival *iv, size_t n, enum order ord, uint64_t seed)
{
	struct ev *ev = malloc((2 * n + 1) * sizeof(*ev));

	assert_non_null(ev);
	rng = seed;
	for (size_t i = 0; i < 2 * n; i++) {
		bool open = i % 2 == 0;
		uint32_t r = (uint32_t)rnd() >> 1;

		ev[i].t = open ? iv[i / 2].s : iv[i / 2].e;
		ev[i].iv = (uint32_t)(i / 2);
		ev[i].open = open;
		if (ord == CLOSES_FIRST)
			ev[i].key = ((uint32_t)open << 31) | r;
		else if (ord == OPENS_FIRST)
			ev[i].key = ((uint32_t)!open << 31) | r;
		else
			ev[i].key = r << 1;
	}
	qsort(ev, 2 * n, sizeof(*ev), cmp_ev);
	return ev;
}

static void feed_one(struct rp_sweep *sw, const struct ev *e)
{
	if (e->open)
		rp_sweep_open(sw, e->t);
	else
		rp_sweep_close(sw, e->t);
}

/*
 * Feed every event, asking for each closed span's midpoint right after its close as
 * the engine does; provisional answers are asked again once the time has moved on
 * (or at the end of the stream).
 */
static void feed_and_query(struct rp_sweep *sw, const struct oracle *o, const struct ev *ev,
			   size_t nev, const struct ival *iv, uint32_t h, struct qstat *q)
{
	uint64_t *later = malloc((nev + 1) * sizeof(*later));
	size_t nlater = 0;

	assert_non_null(later);
	for (size_t i = 0; i < nev; i++) {
		uint64_t m;

		feed_one(sw, &ev[i]);
		if (nlater > 0 && ev[i].t > later[0]) {
			for (size_t k = 0; k < nlater; k++)
				assert_int_equal(check_query(sw, o, later[k], ev[i].t, h, false, q),
						 0);
			nlater = 0;
		}
		if (ev[i].open)
			continue;
		m = rp_sweep_midpoint(iv[ev[i].iv].s, iv[ev[i].iv].e);
		if (check_query(sw, o, m, ev[i].t, h, false, q) == 1)
			later[nlater++] = m;
	}
	for (size_t k = 0; k < nlater; k++)
		check_query(sw, o, later[k], ev[nev - 1].t, h, true, q);
	free(later);
}

/* The trace in every order, capped at @cap with a history of @h; @return misses. */
static uint64_t run_trace(const struct ival *iv, size_t n, uint32_t cap, uint32_t h, uint64_t seed)
{
	struct oracle o;
	uint64_t misses[N_ORDERS];

	oracle_build(&o, iv, n);
	if (h == 0)
		h = (uint32_t)o.ncp + 1;
	for (int ord = 0; ord < N_ORDERS; ord++) {
		struct ev *ev = make_events(iv, n, (enum order)ord, seed + (uint64_t)ord);
		struct rp_sweep sw;
		struct qstat q = { 0 }, qend = { 0 };

		assert_int_equal(rp_sweep_init(&sw, cap, h), 0);
		feed_and_query(&sw, &o, ev, 2 * n, iv, h, &q);
		check_against(&sw, &o, cap);
		assert_int_equal(sw.hist_misses, q.misses);
		assert_int_equal(q.answered + q.misses, n); /* each close, once final */
		for (size_t i = 0; i < n; i++)
			check_query(&sw, &o, rp_sweep_midpoint(iv[i].s, iv[i].e), ev[2 * n - 1].t,
				    h, true, &qend);
		assert_int_equal(sw.hist_misses, q.misses + qend.misses);
		assert_int_equal(qend.answered + qend.misses, n);
		misses[ord] = q.misses;
		if (h > o.ncp)
			assert_int_equal(q.misses + qend.misses, 0);
		rp_sweep_fini(&sw);
		free(ev);
	}
	assert_int_equal(misses[0], misses[1]);
	assert_int_equal(misses[0], misses[2]);
	oracle_free(&o);
	return misses[0];
}

/* ---------------------------------------------------------------- hand-written */

static void feed_list(struct rp_sweep *sw, const struct ival *iv, size_t n, enum order ord)
{
	struct ev *ev = make_events(iv, n, ord, 7);

	for (size_t i = 0; i < 2 * n; i++)
		feed_one(sw, &ev[i]);
	free(ev);
}

static void check_list(const struct ival *iv, size_t n)
{
	run_trace(iv, n, 64, 0, 11);
	run_trace(iv, n, 1, 1, 12);
}

static void test_sweep_single_span(void **state)
{
	static const struct ival iv[] = { { 100, 300 } };
	struct rp_sweep sw;
	uint32_t l;

	(void)state;
	assert_int_equal(rp_sweep_init(&sw, 8, 4), 0);
	feed_list(&sw, iv, 1, OPENS_FIRST);
	assert_int_equal(rp_sweep_observed_ns(&sw), 200);
	assert_int_equal(rp_sweep_ns(&sw, 0), 0);
	assert_int_equal(rp_sweep_ns(&sw, 1), 200);
	assert_int_equal(rp_sweep_percentile(&sw, 5000), 1);
	assert_int_equal(rp_sweep_percentile(&sw, 0), 1);
	assert_int_equal(rp_sweep_max(&sw), 1);
	assert_true(rp_sweep_mean(&sw) == 1.0);
	assert_int_equal(rp_sweep_level_at(&sw, 200, &l), 0);
	assert_int_equal(l, 1);
	assert_int_equal(rp_sweep_level_at(&sw, 299, &l), 0);
	assert_int_equal(l, 1);
	assert_int_equal(rp_sweep_level_at(&sw, 99, &l), 0);
	assert_int_equal(l, 0);
	assert_int_equal(rp_sweep_level_at(&sw, 300, &l), 1);
	assert_int_equal(l, 0);
	rp_sweep_fini(&sw);
	rp_sweep_fini(&sw); /* a finished sweep is zeroed */
	check_list(iv, 1);
}

static void test_sweep_two_disjoint_spans(void **state)
{
	static const struct ival iv[] = { { 100, 200 }, { 300, 500 } };
	struct rp_sweep sw;
	uint32_t l;

	(void)state;
	assert_int_equal(rp_sweep_init(&sw, 8, 4), 0);
	feed_list(&sw, iv, 2, CLOSES_FIRST);
	assert_int_equal(rp_sweep_observed_ns(&sw), 400);
	assert_int_equal(rp_sweep_ns(&sw, 0), 100);
	assert_int_equal(rp_sweep_ns(&sw, 1), 300);
	assert_int_equal(rp_sweep_percentile(&sw, 2500), 0); /* exactly 25% at level 0 */
	assert_int_equal(rp_sweep_percentile(&sw, 2501), 1);
	assert_int_equal(rp_sweep_percentile(&sw, 0), 0);
	assert_true(rp_sweep_mean(&sw) == 0.75);
	assert_int_equal(rp_sweep_level_at(&sw, 250, &l), 0);
	assert_int_equal(l, 0);
	assert_int_equal(rp_sweep_level_at(&sw, 150, &l), 0);
	assert_int_equal(l, 1);
	assert_int_equal(rp_sweep_hist_n(&sw), 3); /* 100 -> 1, 200 -> 0, 300 -> 1; 500 pending */
	rp_sweep_fini(&sw);
	check_list(iv, 2);
}

static void test_sweep_zero_length_span_alone(void **state)
{
	static const struct ival iv[] = { { 100, 100 } };
	struct rp_sweep sw;
	uint64_t lv[16];
	uint32_t l, n;

	(void)state;
	for (int ord = 0; ord < N_ORDERS; ord++) {
		assert_int_equal(rp_sweep_init(&sw, 8, 4), 0);
		feed_list(&sw, iv, 1, (enum order)ord);
		assert_int_equal(rp_sweep_observed_ns(&sw), 0);
		assert_int_equal(rp_sweep_percentile(&sw, 9900), 0);
		assert_int_equal(rp_sweep_max(&sw), 0);
		assert_true(rp_sweep_mean(&sw) == 0.0);
		n = rp_sweep_levels(&sw, lv);
		assert_int_equal(n, 0);
		assert_int_equal(rp_sweep_level_at(&sw, 100, &l), 1);
		assert_int_equal(l, 0);
		assert_int_equal(rp_sweep_unmatched(&sw), 0);
		rp_sweep_accrue(&sw, 101); /* settles: no anomaly, no change point */
		assert_int_equal(rp_sweep_unmatched(&sw), 0);
		assert_int_equal(rp_sweep_hist_n(&sw), 0);
		assert_int_equal(rp_sweep_ns(&sw, 0), 1);
		rp_sweep_fini(&sw);
	}
	check_list(iv, 1);
}

/* Spans meeting at one instant: the level is never 0 or 2 for a positive time. */
static void test_sweep_open_and_close_at_same_time(void **state)
{
	static const struct ival iv[] = {
		{ 100, 200 }, { 200, 300 }, { 200, 200 }, { 300, 300 }, { 50, 50 }
	};
	struct rp_sweep sw;
	uint32_t l;

	(void)state;
	for (int ord = 0; ord < N_ORDERS; ord++) {
		assert_int_equal(rp_sweep_init(&sw, 8, 8), 0);
		feed_list(&sw, iv, 5, (enum order)ord);
		rp_sweep_accrue(&sw, 400);
		assert_int_equal(rp_sweep_observed_ns(&sw), 350);
		assert_int_equal(rp_sweep_ns(&sw, 0), 150);
		assert_int_equal(rp_sweep_ns(&sw, 1), 200);
		assert_int_equal(rp_sweep_max(&sw), 1);
		assert_int_equal(rp_sweep_hist_n(&sw), 2); /* 100 -> 1, 300 -> 0 */
		assert_int_equal(rp_sweep_level_at(&sw, 200, &l), 0);
		assert_int_equal(l, 1);
		assert_int_equal(rp_sweep_level_at(&sw, 300, &l), 0);
		assert_int_equal(l, 0);
		assert_int_equal(rp_sweep_unmatched(&sw), 0);
		rp_sweep_fini(&sw);
	}
	check_list(iv, 5);
}

static void test_sweep_unmatched_and_backwards(void **state)
{
	struct rp_sweep sw;

	(void)state;
	assert_int_equal(rp_sweep_init(&sw, 8, 8), 0);
	rp_sweep_close(&sw, 10); /* before any open */
	assert_int_equal(rp_sweep_unmatched(&sw), 1);
	rp_sweep_open(&sw, 20); /* the observed range starts here */
	assert_int_equal(sw.unmatched, 1);
	rp_sweep_close(&sw, 30);
	rp_sweep_close(&sw, 40); /* stray */
	rp_sweep_close(&sw, 40); /* stray */
	assert_int_equal(rp_sweep_unmatched(&sw), 3);
	rp_sweep_open(&sw, 50);
	rp_sweep_open(&sw, 45); /* late: taken at 50 */
	assert_int_equal(sw.backwards, 1);
	rp_sweep_close(&sw, 60);
	rp_sweep_close(&sw, 60);
	rp_sweep_accrue(&sw, 60);
	assert_int_equal(rp_sweep_observed_ns(&sw), 40);
	assert_int_equal(rp_sweep_ns(&sw, 0), 20);
	assert_int_equal(rp_sweep_ns(&sw, 1), 10);
	assert_int_equal(rp_sweep_ns(&sw, 2), 10);
	assert_int_equal(rp_sweep_level(&sw), 0);
	assert_int_equal(rp_sweep_unmatched(&sw), 3);
	rp_sweep_fini(&sw);

	assert_int_equal(rp_sweep_init(&sw, 0, 8), -EINVAL);
	assert_int_equal(rp_sweep_init(&sw, 8, 0), -EINVAL);
	rp_sweep_fini(&sw);
}

/* A sweep without history keeps the same levels and counters as one with, fed
 * through either entry points (one with history fed through _hist keeps the same
 * history too); it answers midpoints only at or after last_t. Random opens, closes
 * (some stray), equal and backward times, levels past the cap. */
static void test_sweep_levels_only_matches(void **state)
{
	(void)state;
	rng = 7;
	for (int round = 0; round < 200; round++) {
		struct rp_sweep h, o, v, g; /* v, g: through the _levels, _hist entry points */
		uint64_t t = below(3);
		uint32_t cap = 1 + (uint32_t)below(40), la, lb, hist = 1 + (uint32_t)below(4);

		assert_int_equal(rp_sweep_init(&h, cap, hist), 0);
		assert_int_equal(rp_sweep_init(&g, cap, hist), 0);
		assert_int_equal(rp_sweep_init_levels(&o, cap), 0);
		assert_int_equal(rp_sweep_init_levels(&v, cap), 0);
		assert_int_equal(o.hist_cap, 0);
		for (int i = 0; i < 400; i++) {
			uint64_t r = below(100);

			t += r < 30 ? 0 : r < 95 ? below(50) : 0;
			if (r >= 95 && t > 10)
				t -= below(10); /* backwards */
			if (below(2)) {
				rp_sweep_open(&h, t);
				rp_sweep_open(&o, t);
				rp_sweep_open_levels(&v, t);
				rp_sweep_open_hist(&g, t);
			} else {
				rp_sweep_close(&h, t);
				rp_sweep_close(&o, t);
				rp_sweep_close_levels(&v, t);
				rp_sweep_close_hist(&g, t);
			}
			if (below(10) == 0) {
				rp_sweep_accrue(&h, t + 5);
				rp_sweep_accrue(&o, t + 5);
				rp_sweep_accrue(&v, t + 5);
				rp_sweep_accrue(&g, t + 5);
			}
			assert_int_equal(rp_sweep_level_at(&o, o.last_t, &la), 1);
			assert_int_equal(rp_sweep_level_at(&h, h.last_t, &lb), 1);
			assert_int_equal(la, lb);
			for (uint64_t m = t > 60 ? t - 60 : 0; m <= t; m += 7) {
				int ra = rp_sweep_level_at(&g, m, &la);
				int rb = rp_sweep_level_at(&h, m, &lb);

				assert_int_equal(ra, rb);
				if (ra >= 0)
					assert_int_equal(la, lb);
			}
			if (o.last_t > 0)
				assert_int_equal(rp_sweep_level_at(&o, o.last_t - 1, &la), -ENOENT);
		}
		assert_int_equal(o.n_alloc, h.n_alloc);
		assert_int_equal(v.n_alloc, h.n_alloc);
		for (uint32_t c = 0; c < o.n_alloc; c++) {
			assert_int_equal(rp_sweep_ns(&o, c), rp_sweep_ns(&h, c));
			assert_int_equal(rp_sweep_ns(&v, c), rp_sweep_ns(&h, c));
		}
		assert_int_equal(v.level, h.level);
		assert_int_equal(v.first_t, h.first_t);
		assert_int_equal(v.last_t, h.last_t);
		assert_int_equal(v.over_cap_ns, h.over_cap_ns);
		assert_int_equal(v.unmatched, h.unmatched);
		assert_int_equal(v.backwards, h.backwards);
		assert_int_equal(v.hist_seq, 0);
		assert_int_equal(g.hist_seq, h.hist_seq);
		assert_int_equal(g.hist_misses, h.hist_misses);
		assert_memory_equal(g.ns, h.ns, h.n_alloc * sizeof(*h.ns));
		assert_int_equal(o.level, h.level);
		assert_int_equal(o.first_t, h.first_t);
		assert_int_equal(o.last_t, h.last_t);
		assert_int_equal(o.over_cap_ns, h.over_cap_ns);
		assert_int_equal(o.excess_hi, h.excess_hi);
		assert_int_equal(o.excess_lo, h.excess_lo);
		assert_int_equal(o.unmatched, h.unmatched);
		assert_int_equal(o.backwards, h.backwards);
		assert_true(rp_sweep_mean(&o) == rp_sweep_mean(&h));
		assert_int_equal(rp_sweep_hist_n(&o), 0);
		assert_int_equal(rp_sweep_hist_evicted(&o), 0);
		rp_sweep_fini(&h);
		rp_sweep_fini(&o);
		rp_sweep_fini(&v);
		rp_sweep_fini(&g);
	}
}

/*
 * A group as the analyses feed it (sweep.h): a leader with a history sees every
 * event, three members without one see some of them; when the time is after the
 * leader's latest the members step without their time test and the leader's close
 * answers its span's midpoint (rp_sweep_close_hist_mid()), else every sweep takes
 * its general step. Against the same streams through the general entry points and
 * rp_sweep_level_at(), every field after every event: equal times, closes first
 * (negative levels), levels past a small cap, the array's growth, times going
 * back, midpoints before, inside and after the history kept, reversed spans, and
 * the leader accrued with one member as the rotation does.
 */
static void test_sweep_group_steps_match_general(void **state)
{
	enum { NM = 3 };

	(void)state;
	rng = 11;
	for (int round = 0; round < 300; round++) {
		struct rp_sweep g, gr, m[NM], mr[NM];
		uint32_t cap = 1 + (uint32_t)below(round % 2 ? 40 : 4);
		uint32_t hist = 1 + (uint32_t)below(20);
		uint64_t t = below(3), fast = 0;

		assert_int_equal(rp_sweep_init(&g, cap, hist), 0);
		assert_int_equal(rp_sweep_init(&gr, cap, hist), 0);
		for (int k = 0; k < NM; k++) {
			assert_int_equal(rp_sweep_init_levels(&m[k], cap), 0);
			assert_int_equal(rp_sweep_init_levels(&mr[k], cap), 0);
		}
		for (int i = 0; i < 600; i++) {
			uint64_t r = below(100), start;
			bool in[NM] = { below(4) != 0, below(2) != 0, below(8) == 0 };
			bool later;

			t += r < 30 ? 0 : r < 96 ? below(50) : 0;
			if (r >= 96 && t > 10)
				t -= below(10); /* late */
			later = t > g.last_t;
			if (below(2)) {
				rp_sweep_open_hist(&g, t);
				rp_sweep_open_hist(&gr, t);
				for (int k = 0; k < NM; k++) {
					if (!in[k])
						continue;
					if (later)
						rp_sweep_open_member(&m[k], t);
					else
						rp_sweep_open_levels(&m[k], t);
					rp_sweep_open_levels(&mr[k], t);
				}
			} else {
				uint32_t la = 0, lb = 0;
				int ra, rb;

				start = below(8) ? t - (t > 0 ? below(t < 200 ? t : 200) : 0) : t + below(5);
				if (later) {
					ra = rp_sweep_close_hist_mid(&g, t, start, &la);
					fast++;
				} else {
					rp_sweep_close_hist(&g, t);
					ra = rp_sweep_level_at(&g, rp_sweep_midpoint(start, t), &la);
				}
				rp_sweep_close_hist(&gr, t);
				rb = rp_sweep_level_at(&gr, rp_sweep_midpoint(start, t), &lb);
				assert_int_equal(ra, rb);
				assert_int_equal(la, lb);
				for (int k = 0; k < NM; k++) {
					if (!in[k])
						continue;
					if (later)
						rp_sweep_close_member(&m[k], t);
					else
						rp_sweep_close_levels(&m[k], t);
					rp_sweep_close_levels(&mr[k], t);
				}
			}
			if (below(20) == 0) { /* the rotation: the leader and one member */
				rp_sweep_accrue(&g, t + 7);
				rp_sweep_accrue(&gr, t + 7);
				rp_sweep_accrue(&m[0], t + 7);
				rp_sweep_accrue(&mr[0], t + 7);
			}
			assert_sweep_state_equal(&g, &gr);
			for (int k = 0; k < NM; k++) {
				assert_true(m[k].last_t <= g.last_t); /* the group's invariant */
				assert_sweep_state_equal(&m[k], &mr[k]);
			}
		}
		assert_true(fast > 100);
		rp_sweep_fini(&g);
		rp_sweep_fini(&gr);
		for (int k = 0; k < NM; k++) {
			rp_sweep_fini(&m[k]);
			rp_sweep_fini(&mr[k]);
		}
	}
}

/*
 * A plain model of one sweep, written here from the semantics (sweep.h): the level,
 * the time at each level up to the latest time fed as a plain array (levels past the
 * cap at the cap), the excess area, the counters and every change point ever made.
 * The sweep keeps its levels as "exit minus entry" sums; the model does not.
 */
struct model {
	int64_t level, before;
	uint64_t first_t, last_t, ns[64], over, unmatched, backwards, misses;
	u128 excess;
	bool opened;
	uint32_t cap, hist, ncp;
	uint64_t cp_t[4096];
	uint32_t cp_lv[4096];
};

static void model_event(struct model *m, uint64_t t, int delta)
{
	if (t < m->last_t) {
		m->backwards++;
		t = m->last_t;
	}
	if (t > m->last_t) {
		if (m->level < 0) {
			m->unmatched += (uint64_t)-m->level;
			m->level = 0;
		}
		if (m->level != m->before) {
			assert_true(m->ncp < 4096);
			m->cp_t[m->ncp] = m->last_t;
			m->cp_lv[m->ncp++] = (uint32_t)m->level;
			m->before = m->level;
		}
		if (m->opened) {
			uint64_t dt = t - m->last_t;

			m->ns[(uint64_t)m->level < m->cap ? (uint64_t)m->level : m->cap] += dt;
			if ((uint64_t)m->level > m->cap) {
				m->over += dt;
				m->excess += (u128)((uint64_t)m->level - m->cap) * dt;
			}
		} else {
			m->first_t = t;
		}
		m->last_t = t;
	}
	if (delta > 0)
		m->opened = true;
	m->level += delta;
}

/* The sweep's level at @t as its history of m->hist points answers it. */
static int model_level_at(struct model *m, uint64_t t, uint32_t *level)
{
	uint32_t kept = m->ncp < m->hist ? m->ncp : m->hist, first = m->ncp - kept;
	int64_t k = (int64_t)m->ncp - 1;

	if (t >= m->last_t) {
		*level = m->level > 0 ? (uint32_t)m->level : 0;
		return 1;
	}
	while (k >= 0 && m->cp_t[k] > t)
		k--;
	if (k < (int64_t)first && (first > 0 || m->hist == 0)) {
		m->misses++;
		return -ENOENT;
	}
	*level = k < (int64_t)first ? 0 : m->cp_lv[k];
	return 0;
}

/* Every reader of @sw against the model: the levels one by one and as an array, the
 * percentiles, quantiles, maximum and mean, the counters, and the level at every time
 * from 300 ns before the latest to after it. */
static void check_model(struct rp_sweep *sw, struct model *m)
{
	uint64_t got[64], total = 0;
	uint32_t n, q[4], max, qm[4], maxm, l1, l2;
	long double area = 0;

	assert_true(sw->n_alloc <= 64);
	n = rp_sweep_levels_max(m->ns, m->cap + 1);
	assert_int_equal(rp_sweep_levels(sw, got), n > 0 || m->ns[0] > 0 ? n + 1 : 0);
	for (uint32_t c = 0; c <= m->cap; c++) {
		uint64_t x = c < sw->n_alloc ? rp_sweep_ns(sw, c) : 0;

		assert_int_equal(x, m->ns[c]);
		if (c < sw->n_alloc)
			assert_int_equal(got[c], x);
		total += m->ns[c];
		area += (long double)c * (long double)m->ns[c];
	}
	area += (long double)m->excess;
	assert_int_equal(rp_sweep_observed_ns(sw), m->opened ? m->last_t - m->first_t : 0);
	assert_int_equal(total, rp_sweep_observed_ns(sw));
	for (size_t k = 0; k < sizeof(pcts) / sizeof(pcts[0]); k++)
		assert_int_equal(rp_sweep_percentile(sw, pcts[k]),
				 rp_sweep_levels_percentile(m->ns, m->cap + 1, pcts[k]));
	assert_int_equal(rp_sweep_max(sw), rp_sweep_levels_max(m->ns, m->cap + 1));
	rp_sweep_quantiles(sw, q, &max);
	rp_sweep_levels_quantiles(m->ns, m->cap + 1, qm, &maxm);
	assert_memory_equal(q, qm, sizeof(q));
	assert_int_equal(max, maxm);
	assert_mean(sw, total ? area / (long double)total : 0);
	assert_int_equal(sw->over_cap_ns, m->over);
	assert_int_equal(sw->excess_lo, (uint64_t)m->excess);
	assert_int_equal(sw->excess_hi, (uint64_t)(m->excess >> 64));
	assert_int_equal(rp_sweep_unmatched(sw), m->unmatched + (m->level < 0 ? -m->level : 0));
	assert_int_equal(sw->backwards, m->backwards);
	assert_int_equal(rp_sweep_level(sw), m->level > 0 ? m->level : 0);
	assert_int_equal(sw->hist_seq, sw->hist_cap ? m->ncp : 0);
	assert_int_equal(rp_sweep_hist_n(sw), m->ncp < sw->hist_cap ? m->ncp : sw->hist_cap);
	assert_int_equal(rp_sweep_hist_evicted(sw), sw->hist_seq - rp_sweep_hist_n(sw));
	for (uint64_t t = m->last_t > 300 ? m->last_t - 300 : 0; t <= m->last_t + 2; t++) {
		int ra = rp_sweep_level_at(sw, t, &l1), rb = model_level_at(m, t, &l2);

		assert_int_equal(ra, rb);
		if (ra >= 0)
			assert_int_equal(l1, l2);
	}
	assert_int_equal(sw->hist_misses, m->misses);
}

/*
 * The "exit minus entry" levels against the plain model after every event: random
 * opens and closes at equal and later times, closes before opens (negative levels
 * within a timestamp, stray closes), times going back, accruals, levels past a small
 * cap and the array's growth (caps above its first 16 entries); fed through the
 * general steps (with a history of 1 to 8 points, or none) and as a group's leader
 * (rp_sweep_open_lead(), rp_sweep_close_lead_mid() when the time is later). A reader
 * that read the raw array would see the pending level's entry subtracted.
 */
static void test_sweep_levels_match_plain_model(void **state)
{
	static struct model m[3];

	(void)state;
	rng = 23;
	for (int round = 0; round < 60; round++) {
		struct rp_sweep sw[3];
		uint32_t cap = 1 + (uint32_t)below(round % 3 == 0 ? 3 : 60);
		uint32_t hist = 1 + (uint32_t)below(8);
		uint64_t t = below(3);

		assert_int_equal(rp_sweep_init(&sw[0], cap, hist), 0);
		assert_int_equal(rp_sweep_init_levels(&sw[1], cap), 0);
		assert_int_equal(rp_sweep_init(&sw[2], cap, hist), 0);
		for (int k = 0; k < 3; k++) {
			memset(&m[k], 0, sizeof(m[k]));
			m[k].cap = cap;
			m[k].hist = k == 1 ? 0 : hist;
		}
		for (int i = 0; i < 400; i++) {
			uint64_t r = below(100), start;
			int open = below(100) < (i < 200 ? 60 : 40);

			t += r < 35 ? 0 : r < 95 ? below(40) : 0;
			if (r >= 95 && t > 10)
				t -= below(10); /* backwards */
			start = t - (t > 0 ? below(t < 100 ? t : 100) : 0);
			if (below(20) == 0)
				start = t + below(3); /* zero-length or reversed */
			if (open) {
				rp_sweep_open(&sw[0], t);
				rp_sweep_open_levels(&sw[1], t);
				if (t > sw[2].last_t)
					rp_sweep_open_lead(&sw[2], t);
				else
					rp_sweep_open_hist(&sw[2], t);
			} else {
				uint32_t la = 0, lb = 0;
				int ra, rb;

				rp_sweep_close(&sw[0], t);
				rp_sweep_close_levels(&sw[1], t);
				if (t > sw[2].last_t)
					ra = rp_sweep_close_lead_mid(&sw[2], t, start, &la);
				else
					ra = rp_sweep_close_hist_mid(&sw[2], t, start, &la);
				model_event(&m[2], t, -1);
				rb = model_level_at(&m[2], rp_sweep_midpoint(start, t), &lb);
				assert_int_equal(ra, rb);
				if (ra >= 0)
					assert_int_equal(la, lb);
			}
			for (int k = 0; k < 2 + open; k++)
				model_event(&m[k], t, open ? 1 : -1);
			if (below(15) == 0) {
				uint64_t a = t + below(20);

				for (int k = 0; k < 3; k++) {
					rp_sweep_accrue(&sw[k], a);
					model_event(&m[k], a, 0);
				}
			}
			for (int k = 0; k < 3; k++)
				check_model(&sw[k], &m[k]);
		}
		for (int k = 0; k < 3; k++) {
			assert_int_equal(sw[k].nomem, 0);
			rp_sweep_fini(&sw[k]);
		}
	}
}

/*
 * A failed growth of the level array lowers the cap to what is allocated, then
 * counts there: the same figures as a sweep made with that cap (its 16 first
 * entries: cap 15), nomem aside. realloc fails while realloc_fail is set (not under
 * the sanitizers, which own the allocator).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CAN_FAIL_REALLOC 0
static bool realloc_fail;
#else
#define CAN_FAIL_REALLOC 1
static bool realloc_fail;
extern void *__libc_realloc(void *p, size_t size);

void *realloc(void *p, size_t size)
{
	return realloc_fail ? NULL : __libc_realloc(p, size);
}
#endif

static void test_sweep_growth_failure_lowers_cap(void **state)
{
	struct rp_sweep a, b;
	struct model m;
	uint64_t t = 100;

	(void)state;
	if (!CAN_FAIL_REALLOC)
		skip();
	memset(&m, 0, sizeof(m));
	m.cap = 15;
	m.hist = 4;
	assert_int_equal(rp_sweep_init(&a, 1000, 4), 0);
	assert_int_equal(rp_sweep_init(&b, 15, 4), 0);
	rng = 5;
	for (int i = 0; i < 300; i++) {
		int open = i < 40 || (i < 150 ? below(3) != 0 : below(3) == 0);

		t += below(3) ? below(30) : 0;
		realloc_fail = true;
		if (open) {
			rp_sweep_open(&a, t);
			rp_sweep_open(&b, t);
		} else {
			rp_sweep_close(&a, t);
			rp_sweep_close(&b, t);
		}
		realloc_fail = false;
		model_event(&m, t, open ? 1 : -1);
		check_model(&a, &m);
		m.misses = 0;
		a.hist_misses = 0;
	}
	assert_int_equal(a.nomem, 1);
	assert_int_equal(a.max_level, 15);
	assert_int_equal(a.n_alloc, 16);
	a.nomem = 0;
	a.hist_misses = b.hist_misses;
	assert_sweep_state_equal(&a, &b);
	rp_sweep_fini(&a);
	rp_sweep_fini(&b);
}

/* Levels past the cap count at it; the mean stays exact, with a 128-bit area. */
static void test_sweep_cap_and_large_times(void **state)
{
	struct rp_sweep sw;
	const uint64_t big = UINT64_C(1) << 60;
	uint32_t l;

	(void)state;
	assert_int_equal(rp_sweep_init(&sw, 100, 4), 0);
	for (int i = 0; i < 1000; i++)
		rp_sweep_open(&sw, 0);
	rp_sweep_accrue(&sw, big);
	rp_sweep_accrue(&sw, big);
	assert_int_equal(rp_sweep_observed_ns(&sw), big);
	assert_int_equal(rp_sweep_ns(&sw, 100), big);
	assert_int_equal(sw.over_cap_ns, big);
	assert_int_equal(rp_sweep_max(&sw), 100);
	assert_int_equal(rp_sweep_percentile(&sw, 5000), 100);
	assert_true(rp_sweep_mean(&sw) == 1000.0);
	assert_int_equal(rp_sweep_level_at(&sw, big / 2, &l), 0);
	assert_int_equal(l, 1000);
	for (int i = 0; i < 1000; i++)
		rp_sweep_close(&sw, 3 * big);
	assert_int_equal(rp_sweep_ns(&sw, 100), 3 * big);
	assert_true(rp_sweep_mean(&sw) == 1000.0);
	rp_sweep_fini(&sw);
}

/* The mean's 64-bit sum either side of overflowing: level 1 for 10 ns, then level
 * 1000 for about 2^64 / 1000 ns (the sum 1000 * dt + 10 just fits, or not: then the
 * 128-bit area), against the mean computed here in long double. */
static void test_sweep_mean_64bit_bound(void **state)
{
	(void)state;
	for (uint64_t d = 0; d <= 30; d++) {
		uint64_t dt = (UINT64_MAX - 10) / 1000 - 15 + d;
		struct rp_sweep sw;

		assert_int_equal(rp_sweep_init(&sw, 2000, 4), 0);
		rp_sweep_open(&sw, 0);
		for (int i = 1; i < 1000; i++)
			rp_sweep_open(&sw, 10);
		rp_sweep_accrue(&sw, 10 + dt);
		assert_int_equal(rp_sweep_observed_ns(&sw), 10 + dt);
		assert_int_equal(rp_sweep_ns(&sw, 1000), dt);
		assert_mean(&sw, (10.0L + 1000.0L * (long double)dt) / (10.0L + (long double)dt));
		rp_sweep_fini(&sw);
	}
}

/* rp_sweep_levels_quantiles() equals the four percentiles and the maximum asked one by
 * one, on level arrays with runs of zeros, long zero tails, one level, none, and
 * totals near 2^64 (the rule's products need 128 bits). */
static void test_sweep_levels_quantiles_match(void **state)
{
	static const unsigned p[4] = { 5000, 9000, 9500, 9900 };
	static uint64_t ns[70000];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	(void)state;
	for (int round = 0; round < 3000; round++) {
		uint32_t n = 1 + (uint32_t)(round % 7 == 0 ? 65536 : (x >> 40) % 300), q[4], max;
		uint32_t held = (uint32_t)(x % (n + 1));
		uint64_t scale = round % 5 == 0 ? UINT64_MAX / ((uint64_t)held + 1) : 1000;

		memset(ns, 0, sizeof(ns));
		for (uint32_t c = 0; c < held; c++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			ns[c] = x % 3 == 0 ? 0 : x % scale;
		}
		rp_sweep_levels_quantiles(ns, n, q, &max);
		for (int i = 0; i < 4; i++)
			assert_int_equal(q[i], rp_sweep_levels_percentile(ns, n, p[i]));
		assert_int_equal(max, rp_sweep_levels_max(ns, n));
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	}
}

/* Either side of the 64-bit path's bound (total * 10000 fits in 64 bits), where
 * rounding the thresholds up must give what the 128-bit rule gives: the same answers
 * as the percentiles asked one by one, totals from 2^64 / 10000 - 3 to + 3. */
static void test_sweep_levels_quantiles_bound(void **state)
{
	static const unsigned p[4] = { 5000, 9000, 9500, 9900 };
	const uint64_t bound = UINT64_MAX / 10000;

	(void)state;
	for (uint64_t d = 0; d <= 6; d++)
		for (uint64_t split = 1; split < 200; split += 7) {
			uint64_t total = bound - 3 + d, ns[4];
			uint32_t q[4], max;

			/* thresholds fall right at, just before and just after a level */
			ns[0] = total / 2 - split;
			ns[1] = total / 100 * 40 + split;
			ns[2] = total / 100 * 5;
			ns[3] = total - ns[0] - ns[1] - ns[2];
			rp_sweep_levels_quantiles(ns, 4, q, &max);
			for (int i = 0; i < 4; i++)
				assert_int_equal(q[i], rp_sweep_levels_percentile(ns, 4, p[i]));
			assert_int_equal(max, 3);
		}
	/* exactly at a threshold: 50% of 10000 is reached at level 0 */
	{
		const uint64_t ns[] = { 5000, 0, 4000, 500, 400, 100 };
		uint32_t q[4], max;

		rp_sweep_levels_quantiles(ns, 6, q, &max);
		assert_int_equal(q[0], 0);
		assert_int_equal(q[1], 2);
		assert_int_equal(q[2], 3);
		assert_int_equal(q[3], 4);
		assert_int_equal(max, 5);
	}
}

static void test_sweep_percentile_rule_exact(void **state)
{
	const uint64_t q = UINT64_C(1) << 62; /* total 3q: products need 128 bits */
	const uint64_t third[] = { q, q, q };
	const uint64_t small[] = { 1, 2 };
	const uint64_t gaps[] = { 0, 5, 0, 0, 5, 0 };

	(void)state;
	assert_int_equal(rp_sweep_levels_percentile(third, 3, 3333), 0);
	assert_int_equal(rp_sweep_levels_percentile(third, 3, 3334), 1);
	assert_int_equal(rp_sweep_levels_percentile(third, 3, 6666), 1);
	assert_int_equal(rp_sweep_levels_percentile(third, 3, 6667), 2);
	assert_int_equal(rp_sweep_levels_percentile(third, 3, 10000), 2);
	assert_int_equal(rp_sweep_levels_percentile(small, 2, 3333), 0);
	assert_int_equal(rp_sweep_levels_percentile(small, 2, 3334), 1);
	assert_int_equal(rp_sweep_levels_percentile(gaps, 6, 0), 1);
	assert_int_equal(rp_sweep_levels_percentile(gaps, 6, 5000), 1);
	assert_int_equal(rp_sweep_levels_percentile(gaps, 6, 5001), 4);
	assert_int_equal(rp_sweep_levels_max(gaps, 6), 4);
	assert_int_equal(rp_sweep_levels_percentile(gaps, 0, 5000), 0);
	assert_int_equal(rp_sweep_midpoint(10, 13), 11);
	assert_int_equal(rp_sweep_midpoint(10, 10), 10);
	assert_int_equal(rp_sweep_midpoint(UINT64_MAX - 1, UINT64_MAX), UINT64_MAX - 1);
}

/* ---------------------------------------------------------------- generated */

static void test_sweep_random_small_traces_match_oracle(void **state)
{
	struct ival *iv = malloc(NAIVE_MAX * sizeof(*iv));

	(void)state;
	assert_non_null(iv);
	for (uint64_t seed = 1; seed <= 12; seed++) {
		size_t n = gen_trace(iv, 50 + below(NAIVE_MAX - 50), seed);

		run_trace(iv, n, 1000, 0, seed); /* history holds everything */
		run_trace(iv, n, 3, 16, seed);	 /* cap 3, 16 change points */
		run_trace(iv, n, 1, 1, seed);
	}
	free(iv);
}

static void test_sweep_large_trace_matches_oracle(void **state)
{
	const size_t max = 300000;
	struct ival *iv = malloc(max * sizeof(*iv));
	struct oracle o;
	size_t n;

	(void)state;
	assert_non_null(iv);
	n = gen_trace(iv, max, 2024);
	oracle_build(&o, iv, n);
	assert_true(o.nlev > 300);	    /* bursts grew the level array */
	assert_true(o.ns[0] > o.total / 2); /* long idle gaps */
	oracle_free(&o);
	assert_int_equal(run_trace(iv, n, 100000, 0, 5), 0);
	assert_true(run_trace(iv, n, 8, 64, 6) > 0);
	free(iv);
}

/* Accruals in between events: live figures exact at every point, nothing twice. */
static void test_sweep_accrue_live_reports(void **state)
{
	const size_t max = 40000;
	struct ival *iv = malloc(max * sizeof(*iv));
	struct oracle o;
	struct rp_sweep sw;
	struct ev *ev;
	uint64_t *exp, last = 0;
	size_t n;

	(void)state;
	assert_non_null(iv);
	n = gen_trace(iv, max, 99);
	oracle_build(&o, iv, n);
	ev = make_events(iv, n, SHUFFLED, 3);
	exp = calloc(o.nlev + 1, sizeof(*exp));
	assert_int_equal(rp_sweep_init(&sw, 1u << 20, 8), 0);
	rng = 77;
	for (size_t i = 0; i < 2 * n; i++) {
		if (below(3) == 0) {
			uint64_t a = last + below(ev[i].t - last + 1);

			rp_sweep_accrue(&sw, a);
			rp_sweep_accrue(&sw, a);
			if (below(2))
				rp_sweep_accrue(&sw, ev[i].t);
		}
		feed_one(&sw, &ev[i]);
		last = ev[i].t;
		if (i % 4000 != 0 && i + 1 != 2 * n)
			continue;
		memset(exp, 0, (o.nlev + 1) * sizeof(*exp));
		for (size_t k = 0; k + 1 < o.nb && o.bt[k] < last; k++)
			exp[o.lv[k]] += (o.bt[k + 1] < last ? o.bt[k + 1] : last) - o.bt[k];
		assert_int_equal(rp_sweep_observed_ns(&sw), last - o.bt[0]);
		assert_levels(&sw, exp, o.nlev);
	}
	check_against(&sw, &o, 1u << 20);
	rp_sweep_accrue(&sw, last + 1000); /* idle after the last close: level 0 */
	rp_sweep_accrue(&sw, last + 1000);
	rp_sweep_accrue(&sw, last + 995); /* late */
	assert_int_equal(sw.backwards, 1);
	assert_int_equal(rp_sweep_observed_ns(&sw), o.total + 1000);
	assert_int_equal(rp_sweep_ns(&sw, 0), o.ns[0] + 1000);
	assert_mean(&sw, (long double)o.area / (long double)(o.total + 1000));
	rp_sweep_fini(&sw);
	free(exp);
	free(ev);
	oracle_free(&o);
	free(iv);
}

/* ---------------------------------------------------------------- toolkit data */

/* "1750000000.0022092" -> ns, exactly (no exponent in the toolkit's floats). */
static uint64_t parse_ns(const char *r)
{
	uint64_t sec = 0, frac = 0;
	int nd = 0;

	while (*r >= '0' && *r <= '9')
		sec = sec * 10 + (uint64_t)(*r++ - '0');
	if (*r == '.')
		for (r++; *r >= '0' && *r <= '9'; r++, nd++) {
			assert_true(nd < 9);
			frac = frac * 10 + (uint64_t)(*r - '0');
		}
	assert_int_equal(*r, '\0');
	for (; nd < 9; nd++)
		frac *= 10;
	return sec * 1000000000 + frac;
}

static uint64_t number_ns(yajl_val v)
{
	assert_true(YAJL_IS_NUMBER(v));
	return parse_ns(YAJL_GET_NUMBER(v));
}

struct step {
	uint64_t t;
	size_t seq;
	int kind; /* +1 START, -1 END */
	const char *uuid;
};

struct call {
	uint64_t s, e;
	const char *uuid;
	bool ended;
};

static int cmp_step(const void *a, const void *b)
{
	const struct step *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Rule 2: LLM, TOOL, FUNCTION and SPAN starts and ends; 0 for everything else. */
static int step_kind(const char *type)
{
	static const char *const ops[] = { "LLM_", "TOOL_", "FUNCTION_", "SPAN_" };
	size_t len = strlen(type);

	for (size_t i = 0; i < 4; i++) {
		if (strncasecmp(type, ops[i], strlen(ops[i])) != 0)
			continue;
		if (len >= 6 && strcasecmp(type + len - 6, "_START") == 0)
			return 1;
		if (len >= 4 && strcasecmp(type + len - 4, "_END") == 0)
			return -1;
	}
	return 0;
}

/* Rules 1 and 3 for one request: its calls, appended to @calls. */
static size_t request_calls(yajl_val req, struct call *calls, size_t nc, size_t max)
{
	static const char *steps_path[] = { "intermediate_steps", NULL };
	static const char *type_path[] = { "payload", "event_type", NULL };
	static const char *ts_path[] = { "payload", "event_timestamp", NULL };
	static const char *uuid_path[] = { "payload", "UUID", NULL };
	yajl_val steps = yajl_tree_get(req, steps_path, yajl_t_array);
	struct step *st;
	size_t ns = 0, first = nc;

	assert_non_null(steps);
	st = malloc((YAJL_GET_ARRAY(steps)->len + 1) * sizeof(*st));
	assert_non_null(st);
	for (size_t i = 0; i < YAJL_GET_ARRAY(steps)->len; i++) {
		yajl_val s = YAJL_GET_ARRAY(steps)->values[i];
		const char *type = YAJL_GET_STRING(yajl_tree_get(s, type_path, yajl_t_string));
		int kind = type ? step_kind(type) : 0;

		if (kind == 0)
			continue;
		st[ns].t = number_ns(yajl_tree_get(s, ts_path, yajl_t_number));
		st[ns].uuid = YAJL_GET_STRING(yajl_tree_get(s, uuid_path, yajl_t_string));
		assert_non_null(st[ns].uuid);
		st[ns].kind = kind;
		st[ns].seq = ns;
		ns++;
	}
	qsort(st, ns, sizeof(*st), cmp_step);
	for (size_t i = 0; i < ns; i++) {
		size_t k = nc;

		if (st[i].kind > 0) {
			assert_true(nc < max);
			calls[nc++] = (struct call){ st[i].t, st[i].t, st[i].uuid, false };
			continue;
		}
		while (k > first && strcmp(calls[k - 1].uuid, st[i].uuid) != 0)
			k--;
		if (k > first && !calls[k - 1].ended) {
			calls[k - 1].e = st[i].t;
			calls[k - 1].ended = true;
		}
	}
	free(st);
	return nc;
}

static yajl_val load_json(const char *dir, const char *name)
{
	char path[4096], err[256];
	yajl_val v;
	FILE *f;
	char *buf;
	long len;

	snprintf(path, sizeof(path), "%s/nat/%s", dir, name);
	f = fopen(path, "rb");
	if (f == NULL)
		fail_msg("%s: %s", path, strerror(errno));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	v = yajl_tree_parse(buf, err, sizeof(err));
	if (v == NULL)
		fail_msg("%s: %s", path, err);
	free(buf);
	return v;
}

static double expected_number(yajl_val root, const char *a, const char *b, const char *c)
{
	const char *path[] = { a, b, c, NULL };
	yajl_val v = yajl_tree_get(root, path, yajl_t_number);

	assert_true(YAJL_IS_DOUBLE(v));
	return YAJL_GET_DOUBLE(v);
}

/* The toolkit's concurrency figures for small.json: percentiles, midpoints, timeline. */
static void check_toolkit(struct rp_sweep *sw, yajl_val exp, const struct call *calls, size_t nc)
{
	static const char *seg_path[] = { "concurrency", "timeline_segments", NULL };
	static const char *const pname[] = { "p50", "p90", "p95", "p99" };
	static const unsigned pval[] = { 5000, 9000, 9500, 9900 };
	yajl_val segs = yajl_tree_get(exp, seg_path, yajl_t_array);
	uint32_t l;

	for (int k = 0; k < 4; k++)
		assert_true((double)rp_sweep_percentile(sw, pval[k]) ==
			    expected_number(exp, "concurrency", pname[k], NULL));
	for (size_t i = 0; i < nc; i++) {
		uint64_t m = rp_sweep_midpoint(calls[i].s, calls[i].e);

		assert_true(rp_sweep_level_at(sw, m, &l) >= 0);
		assert_true((double)l == expected_number(exp, "node_metrics", calls[i].uuid,
							 "concurrency_midpoint"));
	}
	assert_non_null(segs);
	for (size_t i = 0; i < YAJL_GET_ARRAY(segs)->len; i++) {
		yajl_val *seg = YAJL_GET_ARRAY(YAJL_GET_ARRAY(segs)->values[i])->values;

		assert_true(YAJL_IS_INTEGER(seg[2]));
		assert_int_equal(rp_sweep_level_at(sw, number_ns(seg[0]), &l), 0);
		assert_int_equal(l, (uint32_t)YAJL_GET_INTEGER(seg[2]));
	}
}

static void test_sweep_toolkit_small_json(void **state)
{
	static const char *nm_path[] = { "node_metrics", NULL };
	const char *dir = getenv("RP_TESTDATA");
	struct call calls[2000];
	struct ival iv[2000];
	yajl_val in, exp;
	size_t nc = 0;

	(void)state;
	if (dir == NULL)
		skip();
	in = load_json(dir, "small.json");
	exp = load_json(dir, "small.expected.json");
	assert_true(YAJL_IS_ARRAY(in));
	for (size_t r = 0; r < YAJL_GET_ARRAY(in)->len; r++)
		nc = request_calls(YAJL_GET_ARRAY(in)->values[r], calls, nc, 2000);
	assert_int_equal(nc, YAJL_GET_OBJECT(yajl_tree_get(exp, nm_path, yajl_t_object))->len);
	for (size_t i = 0; i < nc; i++)
		iv[i] = (struct ival){ calls[i].s, calls[i].e };
	run_trace(iv, nc, 64, 0, 21);
	for (int ord = 0; ord < N_ORDERS; ord++) {
		struct rp_sweep sw;

		assert_int_equal(rp_sweep_init(&sw, 64, 4096), 0);
		feed_list(&sw, iv, nc, (enum order)ord);
		check_toolkit(&sw, exp, calls, nc);
		rp_sweep_fini(&sw);
	}
	yajl_tree_free(in);
	yajl_tree_free(exp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sweep_single_span),
		cmocka_unit_test(test_sweep_levels_match_plain_model),
		cmocka_unit_test(test_sweep_growth_failure_lowers_cap),
		cmocka_unit_test(test_sweep_two_disjoint_spans),
		cmocka_unit_test(test_sweep_zero_length_span_alone),
		cmocka_unit_test(test_sweep_open_and_close_at_same_time),
		cmocka_unit_test(test_sweep_unmatched_and_backwards),
		cmocka_unit_test(test_sweep_cap_and_large_times),
		cmocka_unit_test(test_sweep_levels_only_matches),
		cmocka_unit_test(test_sweep_group_steps_match_general),
		cmocka_unit_test(test_sweep_percentile_rule_exact),
		cmocka_unit_test(test_sweep_levels_quantiles_match),
		cmocka_unit_test(test_sweep_levels_quantiles_bound),
		cmocka_unit_test(test_sweep_mean_64bit_bound),
		cmocka_unit_test(test_sweep_random_small_traces_match_oracle),
		cmocka_unit_test(test_sweep_large_trace_matches_oracle),
		cmocka_unit_test(test_sweep_accrue_live_reports),
		cmocka_unit_test(test_sweep_toolkit_small_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
