// SPDX-License-Identifier: MIT
/*
 * sort.h's merge sort against a brute-force reference: every array is also sorted
 * by insertion (stable by construction), and the two must agree element for
 * element, payload included, so that equal keys keep their order. Sizes around
 * the insertion runs and the merge widths, keys with many ties, already sorted,
 * reversed and constant arrays, and doubles as the aiq analysis sorts them. The
 * run-merging variant on arrays of 1 to 300 sorted runs (ties within and across
 * runs, runs of one element) and on random arrays (where it is the plain sort).
 */
#include <stdint.h>
#include <string.h>

#include "sort.h"
#include "support.h"

struct item {
	uint32_t key, pos; /* pos: where the item was, to see the order of ties */
};

#define item_before(x, y) ((x)->key < (y)->key)
RP_SORT_DEFINE(sort_items, struct item, item_before)
RP_SORT_RUNS_DEFINE(sort_items_runs, sort_items, struct item, item_before)
#define double_before(x, y) (*(x) < *(y))
RP_SORT_DEFINE(sort_doubles, double, double_before)

static uint32_t rng = 12345;

static uint32_t rnd(void)
{
	rng = rng * 1664525u + 1013904223u;
	return rng >> 8;
}

/* The reference: insertion sort, stable (only a strictly smaller key moves left). */
static void reference(struct item *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct item x = a[i];
		size_t j = i;
		for (; j > 0 && x.key < a[j - 1].key; j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
}

enum shape { RANDOM, FEW_KEYS, SORTED, REVERSED, CONSTANT, N_SHAPES };

static void fill(struct item *a, size_t n, enum shape s)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t k = s == RANDOM	  ? rnd()
			     : s == FEW_KEYS ? rnd() % 5
			     : s == SORTED   ? (uint32_t)i
			     : s == REVERSED ? (uint32_t)(n - i)
					     : 7;
		a[i] = (struct item){ k, (uint32_t)i };
	}
}

static void test_sort_matches_a_stable_reference(void **state)
{
	static const size_t sizes[] = { 0,  1,  2,  3,  15, 16, 17,  31,  32,  33,
					63, 64, 65, 100, 255, 256, 257, 1000, 4097, 20000 };
	static struct item a[20000], want[20000];

	(void)state;
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
		for (int s = 0; s < N_SHAPES; s++) {
			size_t n = sizes[z];

			fill(a, n, (enum shape)s);
			memcpy(want, a, n * sizeof(*a));
			reference(want, n);
			assert_true(sort_items(a, n));
			for (size_t i = 0; i < n; i++) {
				assert_int_equal(a[i].key, want[i].key);
				assert_int_equal(a[i].pos, want[i].pos);
			}
		}
}

/* @runs ascending runs of random lengths (some of one element), keys with ties
 * inside a run and between runs. */
static void fill_runs(struct item *a, size_t n, size_t runs)
{
	uint32_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (i > 0 && rnd() % n < runs)
			k = rnd() % 64; /* a new run starts, mostly below the last key */
		else
			k += rnd() % 3; /* 0: a tie within the run */
		a[i] = (struct item){ k, (uint32_t)i };
	}
}

static void test_sort_runs_matches_a_stable_reference(void **state)
{
	static const size_t sizes[] = { 0, 1, 2, 17, 100, 1000, 4097, 20000 };
	static const size_t runs[] = { 0, 1, 2, 3, 7, 40, 300 };
	static struct item a[20000], want[20000];

	(void)state;
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
		for (size_t r = 0; r <= sizeof(runs) / sizeof(runs[0]); r++) {
			size_t n = sizes[z];

			if (r < sizeof(runs) / sizeof(runs[0]))
				fill_runs(a, n, runs[r]);
			else
				fill(a, n, RANDOM);
			memcpy(want, a, n * sizeof(*a));
			reference(want, n);
			assert_true(sort_items_runs(a, n));
			for (size_t i = 0; i < n; i++) {
				assert_int_equal(a[i].key, want[i].key);
				assert_int_equal(a[i].pos, want[i].pos);
			}
		}
}

/* Doubles with ties and signed zeros: the same order as qsort's stable merge. */
static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static void test_sort_doubles_like_qsort(void **state)
{
	static double a[5000], want[5000];

	(void)state;
	for (size_t n = 0; n <= 5000; n = n * 3 + 1) {
		for (size_t i = 0; i < n; i++) {
			a[i] = (double)(rnd() % 50) / 4.0 - 6.0 + (rnd() % 7 == 0 ? 1e-300 : 0.0);
			if (a[i] == 0.0 && rnd() % 2)
				a[i] = -0.0; /* equal to 0.0: their order shows stability */
		}
		memcpy(want, a, n * sizeof(*a));
		qsort(want, n, sizeof(*want), cmp_double);
		assert_true(sort_doubles(a, n));
		assert_memory_equal(a, want, n * sizeof(*a));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sort_matches_a_stable_reference),
		cmocka_unit_test(test_sort_doubles_like_qsort),
		cmocka_unit_test(test_sort_runs_matches_a_stable_reference),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
