// SPDX-License-Identifier: MIT
/*
 * The number formatting of the aiq renderer (tools/render/render_aiq.c,
 * rp_render_repr_double) against a brute-force oracle written here from its
 * definition: the fewest decimals d (0..22) whose "%.*f" text (glibc prints the
 * exact binary value correctly rounded) reads back through strtod as the same
 * double, ".0" after an integer; "%.17g" past that. The doubles: timestamps as
 * the toolkit's traces hold them (1.75e9 s plus 0-7 decimals, and their
 * differences), durations of every magnitude from 1e-4 to 1e9, random bit
 * patterns over the exponents the fast path takes (2^-80 to 2^50), powers of two and their
 * neighbours (the narrower interval below), exact halfway values, negatives.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "support.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next64(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

/* The oracle, slow and plain. Only for |v| in [2^-80, 2^50]: far from the 2^62
 * limit on n (from 1e-5 up, the answer's at most 17 significant digits fit in
 * 22 decimals; below, few or none do, and then it is %.17g). */
static void oracle(char *buf, size_t cap, double v)
{
	for (int d = 0; d <= 22; d++) {
		snprintf(buf, cap, "%.*f", d, v);
		if (strtod(buf, NULL) == v) {
			if (d == 0)
				strcat(buf, ".0");
			return;
		}
	}
	snprintf(buf, cap, "%.17g", v);
}

static unsigned long long checked;

static void check(double v)
{
	char want[400], got[64];
	size_t n;

	if (!(fabs(v) >= 0x1p-80 && fabs(v) <= 0x1p50))
		return;
	oracle(want, sizeof(want), v);
	n = rp_render_repr_double(got, v);
	got[n] = '\0';
	if (strcmp(want, got) != 0)
		fail_msg("%a: want %s, got %s", v, want, got);
	checked++;
}

static void test_repr_timestamps_match_oracle(void **state)
{
	(void)state;
	checked = 0;
	for (int i = 0; i < 200000; i++) {
		/* a decimal with 0-7 places, as the toolkit's clocks write them */
		int places = (int)(next64() % 8);
		uint64_t frac = next64() % 10000000;
		double t = 1750000000.0 + (double)(next64() % 100000) +
			   (double)frac / 1e7 * (places == 7 ? 1 : 1); /* the double nearest */
		char txt[64];

		snprintf(txt, sizeof(txt), "%.*f", places, t);
		t = strtod(txt, NULL);
		check(t);
		check(-t);
		/* durations: differences of two such stamps */
		double u = strtod(txt, NULL) + (double)(next64() % 100000) / 1e4;
		check(u - t);
		check(nextafter(t, 0));
		check(nextafter(t, INFINITY));
	}
	assert_true(checked > 900000);
}

static void test_repr_magnitudes_match_oracle(void **state)
{
	(void)state;
	checked = 0;
	for (int i = 0; i < 300000; i++) {
		/* random mantissa, |v| between 2^-80 and 2^50 */
		uint64_t e = 1023 - 80 + next64() % 130;
		uint64_t bits = (e << 52) | (next64() & ((1ull << 52) - 1));
		double v;

		memcpy(&v, &bits, sizeof(v));
		check(v);
		check(-v);
		/* short decimals of every magnitude: the usual durations */
		double w = (double)(next64() % 100000) * pow(10, -(int)(next64() % 10));
		check(w);
	}
	for (int e = -80; e <= 49; e++) { /* powers of two and their neighbours */
		double p = ldexp(1, e);

		check(p);
		check(nextafter(p, 0));
		check(nextafter(p, INFINITY));
		check(nextafter(nextafter(p, 0), 0));
		check(p * 3);
		check(-p);
	}
	for (int i = 0; i < 100000; i++) { /* exact binary halves: m / 2^j, ties in %.*f */
		int j = 1 + (int)(next64() % 30);
		double v = ldexp((double)(next64() % (1ull << 40) | 1), -j);

		check(v);
	}
	assert_true(checked > 900000);
}

/* Outside the fast path's range it hands over: the texts still parse back. */
static void test_repr_edges_read_back(void **state)
{
	static const double v[] = { 0.0, 1e-300, 4.9e-324, 1e300, DBL_MAX, 0x1p62, 0x1p63, 1e17,
				    123456789012345678.0, 1e-7, 2.5e-6 };
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		for (int s = 0; s < 2; s++) {
			double x = s ? -v[i] : v[i];
			size_t n = rp_render_repr_double(buf, x);

			buf[n] = '\0';
			assert_true(strtod(buf, NULL) == x);
		}
	}
	assert_int_equal(rp_render_repr_double(buf, NAN), 3);
	assert_memory_equal(buf, "NaN", 3);
	assert_int_equal(rp_render_repr_double(buf, -INFINITY), 9);
	assert_memory_equal(buf, "-Infinity", 9);
	assert_int_equal(rp_render_repr_double(buf, 0.0), 3);
	assert_memory_equal(buf, "0.0", 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repr_timestamps_match_oracle),
		cmocka_unit_test(test_repr_magnitudes_match_oracle),
		cmocka_unit_test(test_repr_edges_read_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
