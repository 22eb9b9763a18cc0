// SPDX-License-Identifier: MIT
/*
 * Clock selection and calibration.
 *
 * Events carry raw ticks; the header says how to turn them into CLOCK_MONOTONIC
 * nanoseconds (wire.h). The reference pair (ticks, ns) is the tightest of a few
 * back-to-back reads: ns is the midpoint of two clock_gettime calls that bracket one
 * rdtsc, so its error is half the bracket (about 15 ns here). The rate comes from a
 * second such pair taken calib_us later: its relative error is about
 * 2 x bracket / window, 1.5e-5 for the default 2 ms. That error scales durations
 * (15 us on a 1 s span); a consumer that wants better can measure the machine-wide
 * TSC rate itself over a longer time and keep the producer's reference pair.
 */
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include <ringprof/ringprof.h>

#include "clock.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t rp_clock_monotonic(void)
{
	return mono_ns();
}

uint64_t rp_clock_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#else
	return mono_ns(); /* never the library's clock here: see rp_clock_calibrate() */
#endif
}

bool rp_clock_tsc_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;

	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return false;
	__get_cpuid(0x80000007u, &a, &b, &c, &d);
	return (d >> 8) & 1u;
#else
	return false;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
/* The tightest of 7 (mono, tsc, mono) brackets. */
static void ref_pair(uint64_t *ticks, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	*ticks = 0;
	*ns = 0;
	for (int i = 0; i < 7; i++) {
		uint64_t a = mono_ns();
		uint64_t t = __rdtsc();
		uint64_t b = mono_ns();

		if (b - a < best) {
			best = b - a;
			*ticks = t;
			*ns = a + (b - a) / 2;
		}
	}
}

static void calibrate_tsc(uint32_t calib_us, struct rp_wire_clock *out)
{
	uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0;

	ref_pair(&t0, &n0);
	while (mono_ns() - n0 < (uint64_t)calib_us * 1000u)
		;
	ref_pair(&t1, &n1);
	out->source = RP_CLOCK_TSC;
	out->shift = 32;
	/* ns per tick in 32.32 fixed point. */
	out->mult = (uint64_t)((__extension__(unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
	out->ref_ticks = t0;
	out->ref_ns = n0;
	out->ticks_per_sec =
		(uint64_t)(__extension__(unsigned __int128)(t1 - t0) * 1000000000u / (n1 - n0));
	out->calib_ns = n1 - n0;
}
#endif

void rp_clock_calibrate(const struct rp_clock_cfg *cfg, struct rp_wire_clock *out)
{
	*out = (struct rp_wire_clock){ 0 };
#if defined(__x86_64__) || defined(__i386__)
	if (cfg->want_tsc && rp_clock_tsc_invariant()) {
		calibrate_tsc(cfg->calib_us, out);
		return;
	}
#else
	(void)cfg;
#endif
	out->source = RP_CLOCK_MONOTONIC;
	out->shift = 0;
	out->mult = 1;
	out->ref_ticks = 0;
	out->ref_ns = 0;
	out->ticks_per_sec = 1000000000u;
}
