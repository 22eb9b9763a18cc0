// SPDX-License-Identifier: MIT
/*
 * The calling-context tree's lookups (engine/core/stats.h, stats.c) against a brute-
 * force oracle: a list of every (parent, name) pair made, searched linearly. The
 * inline rp_stats_child() answers from a name's hint (the node its last begin went
 * to), the index's home slot or stats.c; whichever answers, the node must be the one
 * pair the oracle holds, made in the same order, and a lookup past the cap must fold
 * into the parent's "[other]" child exactly as stats.h says. Lookups come in runs
 * that keep the hint right (the same parent again) and that break it (a name under
 * another parent, a name never seen, the root), at a cap the stream passes.
 */
#include "support.h"

#include <string.h>

#include "names.h"
#include "spread.h"
#include "stats.h"

static uint64_t rng;

static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * UINT64_C(2685821657736338717);
}

struct pair {
	uint32_t parent, name;
};

/* The oracle's node for (parent, name), made if new and under the cap; else the
 * fold stats.h describes. */
static uint32_t oracle_child(struct pair *p, uint32_t *n, uint32_t max_nodes, uint32_t parent,
			     uint32_t name, bool *folded)
{
	for (uint32_t i = 0; i < *n; i++)
		if (p[i].parent == parent && p[i].name == name && i > 0) {
			*folded = false;
			return i;
		}
	*folded = false;
	if (*n < max_nodes) {
		p[*n] = (struct pair){ parent, name };
		return (*n)++;
	}
	*folded = true;
	if (parent != 0 && p[parent].name == RP_NAMES_OTHER)
		return parent;
	for (uint32_t i = 1; i < *n; i++)
		if (p[i].parent == parent && p[i].name == RP_NAMES_OTHER)
			return i;
	p[*n] = (struct pair){ parent, RP_NAMES_OTHER };
	return (*n)++;
}

static void test_stats_child_matches_search(void **state)
{
	enum { NAMES = 40, MAX_NODES = 300, LOOKUPS = 200000 };
	static struct pair p[2 * MAX_NODES];
	struct rp_stats s;
	uint32_t n = 1, parent = 0, folds = 0;

	(void)state;
	rng = 0x5ca1ab1e;
	assert_int_equal(rp_stats_init(&s, NAMES, MAX_NODES), 0);
	p[0] = (struct pair){ UINT32_MAX, UINT32_MAX }; /* the root: never a child */
	for (uint32_t i = 0; i < LOOKUPS; i++) {
		uint64_t r = rnd();
		uint32_t name = (uint32_t)(r % 8 == 0 ? r % NAMES : 1 + (r >> 8) % 6);
		bool f_got, f_want;
		uint32_t got, want;

		if (r % 5 == 0) /* another parent: the root or any node made */
			parent = r % 3 == 0 ? 0 : (uint32_t)((r >> 16) % n);
		want = oracle_child(p, &n, MAX_NODES, parent, name, &f_want);
		got = rp_stats_child(&s, parent, name, &f_got);
		assert_int_equal(got, want);
		assert_int_equal(f_got, f_want);
		assert_int_equal(s.n_nodes, n);
		assert_int_equal(s.nodes[got].parent, parent != 0 && f_want &&
					p[parent].name == RP_NAMES_OTHER ? p[parent].parent : parent);
		folds += f_got;
		if (r % 7 == 0 && n > 1) /* deeper: the node just found */
			parent = got;
	}
	assert_true(n > MAX_NODES); /* the cap was passed: folds were checked */
	assert_true(folds > 0);
	rp_stats_free(&s);
}

/*
 * The two hints of a name's row: a name begun under two parents in turn (a recursion)
 * finds each node from the hints, the newer first (they swap), a third parent pushes
 * the older out, and the root (an unset hint) is never taken for a node. Every
 * answer against the oracle, every hint against the nodes it must name.
 */
static void test_stats_child_hints_in_turn(void **state)
{
	enum { NAMES = 8, MAX_NODES = 64 };
	static struct pair p[2 * MAX_NODES];
	struct rp_stats s;
	uint32_t n = 1, a, b, c, x;
	bool f_got, f_want;

	(void)state;
	assert_int_equal(rp_stats_init(&s, NAMES, MAX_NODES), 0);
	p[0] = (struct pair){ UINT32_MAX, UINT32_MAX };
	/* an unset hint (0, the root) under the root: made, not the root */
	a = rp_stats_child(&s, 0, 1, &f_got);
	assert_int_equal(a, oracle_child(p, &n, MAX_NODES, 0, 1, &f_want));
	assert_int_equal(a, 1);
	assert_int_equal(s.fn[1].node_hint, a);
	assert_int_equal(s.fn[1].node_hint2, 0);
	b = rp_stats_child(&s, a, 1, &f_got); /* 1 > 1 */
	assert_int_equal(b, oracle_child(p, &n, MAX_NODES, a, 1, &f_want));
	assert_int_equal(s.fn[1].node_hint, b);
	assert_int_equal(s.fn[1].node_hint2, a);
	for (int i = 0; i < 6; i++) { /* in turn: each from a hint, the newest first */
		uint32_t parent = i % 2 ? a : 0, want = i % 2 ? b : a;

		x = rp_stats_child(&s, parent, 1, &f_got);
		assert_int_equal(x, oracle_child(p, &n, MAX_NODES, parent, 1, &f_want));
		assert_int_equal(x, want);
		assert_false(f_got);
		assert_int_equal(s.fn[1].node_hint, want);
		assert_int_equal(s.fn[1].node_hint2, i % 2 ? a : b);
	}
	assert_int_equal(s.n_nodes, 3);
	c = rp_stats_child(&s, 0, 2, &f_got); /* a third parent for name 1 */
	assert_int_equal(c, oracle_child(p, &n, MAX_NODES, 0, 2, &f_want));
	x = rp_stats_child(&s, c, 1, &f_got);
	assert_int_equal(x, oracle_child(p, &n, MAX_NODES, c, 1, &f_want));
	assert_int_equal(s.fn[1].node_hint, x);
	assert_int_equal(s.fn[1].node_hint2, b);
	x = rp_stats_child(&s, 0, 1, &f_got); /* pushed out: found by the index */
	assert_int_equal(x, a);
	assert_int_equal(s.fn[1].node_hint, a);
	assert_int_equal(s.n_nodes, n);
	rp_stats_free(&s);
}

/*
 * A row keeps its shortest call as a complement (stats.h: rp_fn_min_add(),
 * rp_fn_min_ns()): calls and summaries of random lengths, 0 and UINT64_MAX among
 * them, into rows that start empty, against the plain minimum; a row with no call
 * reads 0 (as the report always said), one whose only call lasted UINT64_MAX reads
 * UINT64_MAX.
 */
static void test_stats_min_complement(void **state)
{
	enum { NAMES = 16, CALLS = 20000 };
	uint64_t lo[NAMES] = { 0 }, calls[NAMES] = { 0 };
	struct rp_stats s;

	(void)state;
	rng = 0x5eed5eedu;
	assert_int_equal(rp_stats_init(&s, NAMES, 64), 0);
	for (uint32_t i = 0; i < NAMES; i++)
		assert_int_equal(rp_fn_min_ns(&s.fn[i]), 0);
	for (int k = 0; k < CALLS; k++) {
		/* names NAMES - 2 and NAMES - 1 are never called here */
		uint32_t name = (uint32_t)(rnd() % (NAMES - 2));
		uint64_t r = rnd(), dur = r % 7 == 0 ? 0 : r % 7 == 1 ? UINT64_MAX : r >> (r % 64);

		if (rnd() % 4 == 0) { /* a summary of calls whose shortest is dur */
			struct rp_sum_call c = { .name = name, .caller = RP_NONE, .node = 0,
						 .calls = 1 + rnd() % 5, .min_ns = dur,
						 .max_ns = dur };

			assert_true(rp_stats_add_sum(&s, &c));
			lo[name] = calls[name] == 0 || dur < lo[name] ? dur : lo[name];
			calls[name] += c.calls;
		} else {
			struct rp_call c = { .name = name, .caller = RP_NONE, .node = 0,
					     .dur_ns = dur, .primitive = true };

			assert_true(rp_stats_add(&s, &c));
			lo[name] = calls[name] == 0 || dur < lo[name] ? dur : lo[name];
			calls[name]++;
		}
		assert_int_equal(s.fn[name].calls, calls[name]);
		assert_true(rp_fn_min_ns(&s.fn[name]) == lo[name]);
	}
	for (uint32_t i = 0; i < NAMES; i++) {
		assert_int_equal(s.fn[i].calls, calls[i]);
		assert_true(rp_fn_min_ns(&s.fn[i]) == (calls[i] ? lo[i] : 0));
	}
	/* a row whose only call lasted UINT64_MAX keeps the 0 of none, read as that */
	struct rp_call c = { .name = NAMES - 1, .caller = RP_NONE, .dur_ns = UINT64_MAX };

	assert_true(rp_stats_add(&s, &c));
	assert_true(rp_fn_min_ns(&s.fn[NAMES - 1]) == UINT64_MAX);
	c.dur_ns = 3;
	assert_true(rp_stats_add(&s, &c));
	assert_int_equal(rp_fn_min_ns(&s.fn[NAMES - 1]), 3);
	assert_int_equal(rp_fn_min_ns(&s.fn[NAMES - 2]), 0);
	rp_stats_free(&s);
}

/*
 * The statistics' arrays start at their own lines of a page (spread.h), zeroed and
 * aligned as calloc()'s, whatever the size (one entry, a small array, a large one that
 * malloc maps); rp_stats_free() gives them back (ASan: no leak, no bad free). Each
 * size also through rp_spread_calloc() directly, at every line, and an overflowing
 * size refused.
 */
static void test_stats_arrays_spread(void **state)
{
	static const uint32_t sizes[] = { 1, 7, 1000, 65536 };

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct rp_stats s;
		const unsigned char *z;

		assert_int_equal(rp_stats_init(&s, sizes[k], sizes[k]), 0);
		assert_int_equal((uintptr_t)s.fn % 4096, RP_SPREAD_FN * 64);
		assert_int_equal((uintptr_t)s.nodes % 4096, RP_SPREAD_NODES * 64);
		assert_int_equal((uintptr_t)s.edges % 4096, RP_SPREAD_EDGES * 64);
		z = (const unsigned char *)s.fn;
		for (size_t i = 0; i < (size_t)sizes[k] * sizeof(*s.fn); i++)
			assert_int_equal(z[i], 0);
		z = (const unsigned char *)s.edges;
		for (size_t i = 0; i < (size_t)sizes[k] * sizeof(*s.edges); i++)
			assert_int_equal(z[i], 0);
		rp_stats_free(&s);
		for (unsigned at = 0; at < 64; at++) {
			uint64_t *p = rp_spread_calloc(sizes[k], sizeof(*p), (enum rp_spread_at)at);

			assert_non_null(p);
			assert_int_equal((uintptr_t)p % 4096, at * 64);
			for (uint32_t i = 0; i < sizes[k]; i++)
				assert_int_equal(p[i], 0);
			p[sizes[k] - 1] = 1; /* the last entry is the array's */
			rp_spread_free(p);
		}
	}
	assert_null(rp_spread_calloc(SIZE_MAX / 8, 16, RP_SPREAD_FN));
	rp_spread_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_child_matches_search),
		cmocka_unit_test(test_stats_child_hints_in_turn),
		cmocka_unit_test(test_stats_min_complement),
		cmocka_unit_test(test_stats_arrays_spread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
