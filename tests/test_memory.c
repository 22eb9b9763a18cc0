// SPDX-License-Identifier: MIT
/*
 * The engine's memory bound (rp_engine_memory_bound) against the bytes it really
 * holds, counted by malloc (mallinfo2: in-use chunk bytes plus mmapped blocks), while
 * an adversarial load drives every table to its cap: names, tracks and depths past
 * their caps, durations and counter values from 1 to 2^62 (wide sketches), sub-windows
 * rotating thousands of times with more names than a sub-window holds. Every cap hit
 * must be counted.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define NAMES	 3000 /* distinct names offered; the cap is below */
#define TRACKS	 100
#define COUNTERS 80
#define DEPTH	 48

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t m)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % m;
}

static size_t held(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

static uint32_t ids[NAMES], cids[COUNTERS];
static uint32_t depth[TRACKS], stack[TRACKS][DEPTH + 8];
static bool track_made[TRACKS];
static bool counter_made[COUNTERS];

static void test_memory_bound_holds_at_the_caps(void **state)
{
	struct rp_engine_cfg c;
	struct rp_engine *e;
	struct rp_report r;
	size_t base, bound, worst = 0;
	uint64_t t = 1000000000ull, want_counter_cap = 0, want_track_cap = 0;
	uint32_t src, n_tracks = 0, n_counters = 0;
	char name[256];

	(void)state;
	rp_engine_cfg_default(&c);
	c.max_names = 2000;
	c.max_tracks = 64;
	c.max_depth = 32;
	c.max_cct_nodes = 4096;
	c.max_sources = 4;
	c.max_sketch_names = 300;
	c.max_window_names = 16;
	c.max_counters = 50;
	c.topk = 5;
	c.max_window_level = 8;
	c.subwindows = 5;
	c.window_ns[0] = 10000000;
	c.window_ns[1] = 40000000;
	c.window_ns[2] = 160000000;
	bound = rp_engine_memory_bound(&c);
	base = held();
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "adversary", 1, 0);
	for (uint32_t i = 0; i < COUNTERS; i++) {
		snprintf(name, sizeof(name), "counter-%u", i);
		cids[i] = rp_engine_name(e, src, name, "", "", 0);
	}
	for (uint32_t i = 0; i < NAMES; i++) {
		snprintf(name, sizeof(name), "name-%u-%0*u", i, (int)(i % 200), i);
		ids[i] = rp_engine_name(e, src, name, i % 7 ? "cat" : "other", "file.c", i);
	}
	for (uint64_t n = 0; n < 3000000; n++) {
		uint32_t tr = (uint32_t)rnd(TRACKS);
		struct rp_event ev = { 0 };

		/* mostly short steps, some jumps of up to 2^40 ns: wide durations */
		t += rnd(50) == 0 ? (1ull << rnd(41)) : rnd(20000);
		ev.ts = t;
		if (rnd(10) == 0) {
			uint32_t k = (uint32_t)rnd(COUNTERS);
			int64_t v = (int64_t)(1ull << rnd(62)) * (rnd(2) ? 1 : -1);

			if (!counter_made[k]) {
				counter_made[k] = n_counters < c.max_counters;
				n_counters += counter_made[k];
			}
			want_counter_cap += !counter_made[k];
			ev = (struct rp_event){
				.ts = t, .name = cids[k], .kind = RP_EV_COUNTER, .arg = (uint64_t)v
			};
		} else if (depth[tr] == 0 || (depth[tr] < DEPTH && rnd(2))) {
			uint32_t nm = ids[rnd(NAMES)];

			if (!track_made[tr]) {
				track_made[tr] = n_tracks < c.max_tracks;
				n_tracks += track_made[tr];
			}
			want_track_cap += !track_made[tr];
			if (track_made[tr])
				stack[tr][depth[tr]++] = nm;
			ev.name = nm;
			ev.kind = RP_EV_BEGIN;
		} else {
			ev.name = stack[tr][--depth[tr]];
			ev.kind = RP_EV_END;
		}
		rp_engine_event(e, src, tr, &ev);
		if (n % 100000 == 0 && held() - base > worst)
			worst = held() - base;
	}
	if (held() - base > worst)
		worst = held() - base;
	print_message("memory: %zu bytes held at most, bound %zu (%.1f%%)\n", worst, bound,
		      100.0 * (double)worst / (double)bound);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	assert_true(worst <= bound); /* a sanitizer's malloc is not glibc's: no mallinfo2 */
#endif
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.caps.memory_bound, bound);
	assert_int_equal(r.anomalies[RP_ANOM_COUNTER_CAP], want_counter_cap);
	assert_int_equal(r.anomalies[RP_ANOM_TRACK_CAP], want_track_cap);
	assert_true(want_counter_cap > 0 && want_track_cap > 0);
	assert_int_equal(r.anomalies[RP_ANOM_NAME_CAP], NAMES + COUNTERS - (c.max_names - 1));
	assert_true(r.anomalies[RP_ANOM_DEPTH_CAP] > 0);
	assert_true(r.anomalies[RP_ANOM_WINDOW_CAP] > 0);
	assert_true(r.anomalies[RP_ANOM_CCT_CAP] > 0);
	assert_int_equal(r.n_counters, c.max_counters);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* The bound at the defaults, printed for docs/memory.md, and monotone in the caps. */
static void test_memory_bound_grows_with_caps(void **state)
{
	struct rp_engine_cfg c, d;

	(void)state;
	rp_engine_cfg_default(&c);
	print_message("bound at the defaults: %zu bytes\n", rp_engine_memory_bound(&c));
	d = c;
	d.max_window_names *= 2;
	assert_true(rp_engine_memory_bound(&d) > rp_engine_memory_bound(&c));
	d = c;
	d.n_windows = 0;
	assert_true(rp_engine_memory_bound(&d) < rp_engine_memory_bound(&c));
	d = c;
	d.max_counters *= 2;
	assert_true(rp_engine_memory_bound(&d) > rp_engine_memory_bound(&c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory_bound_holds_at_the_caps),
		cmocka_unit_test(test_memory_bound_grows_with_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
