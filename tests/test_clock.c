// SPDX-License-Identifier: MIT
/*
 * The clock: TSC exactly when the CPU says it is invariant (checked here through
 * /proc/cpuinfo, independently of the library's cpuid check); ticks converted with
 * the header's description land inside a CLOCK_MONOTONIC bracket taken around the
 * read; the conversion equals an exact reference computed another way;
 * RINGPROF_CLOCK=monotonic gives nanosecond ticks.
 */
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "support.h"

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool cpuinfo_has(const char *flag)
{
	char line[8192], pat[64];
	FILE *f = fopen("/proc/cpuinfo", "r");
	bool found = false;

	if (f == NULL)
		return false;
	snprintf(pat, sizeof(pat), " %s", flag);
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, "flags", 5) == 0) {
			size_t n = strlen(pat);
			for (char *p = strstr(line, pat); p && !found; p = strstr(p + 1, pat))
				found = p[n] == ' ' || p[n] == '\n';
			break;
		}
	fclose(f);
	return found;
}

/* First, before this process initialises: a child with RINGPROF_CLOCK=monotonic. */
static void test_clock_monotonic_when_asked(void **state)
{
	int status;
	pid_t pid = fork();

	(void)state;
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("RINGPROF_CLOCK", "monotonic", 1);
		int rc = rp_init() != 0 ? 1 : 0;
		const struct rp_wire_clock *c = rp_clock();
		if (rc == 0 && (c->source != RP_CLOCK_MONOTONIC || c->mult != 1 || c->shift))
			rc = 2;
		uint64_t a = mono(), t = rp_now(), b = mono();
		if (rc == 0 && (t < a || t > b || rp_ticks_to_ns(c, t) != t))
			rc = 3;
		rp_shutdown();
		_exit(rc);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_clock_tsc_iff_invariant(void **state)
{
	bool invariant = cpuinfo_has("constant_tsc") && cpuinfo_has("nonstop_tsc");

	(void)state;
	assert_int_equal(rp_init(), 0);
	assert_int_equal(rp_clock()->source, invariant ? RP_CLOCK_TSC : RP_CLOCK_MONOTONIC);
	assert_int_equal(rp_clock_source, rp_clock()->source);
	print_message("    clock: %s, %.3f MHz, calibrated over %.2f ms\n",
		      invariant ? "tsc" : "monotonic",
		      (double)rp_clock()->ticks_per_sec / 1e6, (double)rp_clock()->calib_ns / 1e6);
}

/* floor(d * mult / 2^32) by 32-bit halves: no 128-bit arithmetic involved. */
static int64_t scaled_ref(int64_t d, uint64_t mult)
{
	uint64_t u = d < 0 ? (uint64_t)-d : (uint64_t)d;
	uint64_t hi = (u >> 32) * mult;			/* < 2^63 for the values below */
	uint64_t lo = (u & 0xffffffffu) * mult;		/* < 2^64 */
	uint64_t q = hi + (lo >> 32);
	bool exact = (lo & 0xffffffffu) == 0;

	return d >= 0 ? (int64_t)q : -(int64_t)q - (exact ? 0 : 1);
}

static void test_clock_conversion_exact(void **state)
{
	struct rp_wire_clock c = { .source = RP_CLOCK_TSC, .shift = 32,
				   .ref_ticks = UINT64_C(5000000000000), .ref_ns = 123456789 };
	const uint64_t mults[] = { 1u, 1867296287u, 4294967295u, 2147483648u };
	const int64_t deltas[] = { 0, 1, -1, 2300000000, -2300000000, INT64_C(1) << 40,
				   -(INT64_C(1) << 40), INT64_C(8280000000000000), 7, -7 };

	(void)state;
	for (size_t m = 0; m < sizeof(mults) / sizeof(mults[0]); m++)
		for (size_t k = 0; k < sizeof(deltas) / sizeof(deltas[0]); k++) {
			c.mult = mults[m];
			uint64_t t = c.ref_ticks + (uint64_t)deltas[k];
			uint64_t want = c.ref_ns + (uint64_t)scaled_ref(deltas[k], c.mult);
			assert_int_equal(rp_ticks_to_ns(&c, t), want);
		}
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* rp_ticks_to_ns() and rp_ticks_len_ns() of ticks @dl from @c's reference against
 * their definition: the signed (resp. unsigned) 128-bit product, shifted right. */
static void check_conversion(const struct rp_wire_clock *c, int64_t dl)
{
	uint64_t t = c->ref_ticks + (uint64_t)dl;
	__extension__ __int128 p = (__extension__(__int128)dl) * (__extension__(__int128)c->mult);
	__extension__ unsigned __int128 u = (__extension__(unsigned __int128)t) * c->mult;

	assert_int_equal(rp_ticks_to_ns(c, t), c->ref_ns + (uint64_t)(p >> c->shift));
	assert_int_equal(rp_ticks_len_ns(c, t), (uint64_t)(u >> c->shift));
}

/* For every shift the wire allows (0-63), any mult (up to 2^64 - 1, past the signed
 * range) and ticks on both sides of the reference, the extremes included. */
static void test_clock_conversion_any_shift(void **state)
{
	const uint64_t mults[] = { 1u, 3u, 1867296287u, UINT32_MAX, UINT64_C(1) << 32,
				   INT64_MAX, UINT64_C(1) << 63, UINT64_MAX };
	const int64_t deltas[] = { 0, 1, -1, 7, -7, INT64_C(1) << 40, -(INT64_C(1) << 40),
				   INT64_MAX, INT64_MIN, INT64_MIN + 1 };
	uint64_t x = UINT64_C(0x9e3779b97f4a7c15);

	(void)state;
	for (uint32_t shift = 0; shift <= 63; shift++) {
		struct rp_wire_clock c = { .source = RP_CLOCK_TSC, .shift = shift,
					   .ref_ticks = xorshift(&x), .ref_ns = xorshift(&x) };

		for (size_t m = 0; m < sizeof(mults) / sizeof(mults[0]); m++)
			for (size_t k = 0; k < sizeof(deltas) / sizeof(deltas[0]); k++) {
				c.mult = mults[m];
				check_conversion(&c, deltas[k]);
			}
		for (int i = 0; i < 200; i++) {
			c.mult = xorshift(&x) >> (x % 61);
			check_conversion(&c, (int64_t)xorshift(&x) >> (x & 63));
		}
	}
}

/* Converted reads fall inside a CLOCK_MONOTONIC bracket, up to the calibration
 * error (2 us plus 1e-4 of the time since the reference, far above the ~1.5e-5
 * expected) over 200 ms of samples. */
static void test_clock_tracks_monotonic(void **state)
{
	const struct rp_wire_clock *c;
	uint64_t start = mono(), worst = 0;

	(void)state;
	assert_int_equal(rp_init(), 0);
	c = rp_clock();
	while (mono() - start < 200000000u) {
		uint64_t a = mono(), t = rp_now(), b = mono();
		uint64_t ns = rp_ticks_to_ns(c, t);
		uint64_t slack = 2000 + (b - c->ref_ns) / 10000;
		uint64_t off = ns < a ? a - ns : (ns > b ? ns - b : 0);

		assert_true(off <= slack);
		worst = off > worst ? off : worst;
	}
	print_message("    worst distance outside the bracket: %llu ns\n",
		      (unsigned long long)worst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_monotonic_when_asked),
		cmocka_unit_test(test_clock_tsc_iff_invariant),
		cmocka_unit_test(test_clock_conversion_exact),
		cmocka_unit_test(test_clock_conversion_any_shift),
		cmocka_unit_test(test_clock_tracks_monotonic),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
