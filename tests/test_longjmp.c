// SPDX-License-Identifier: MIT
/*
 * longjmp out of open spans, then ordinary spans: the thread's nesting heals
 * (producers/shadow.c, engine.c realign), so every later span is counted exactly,
 * the depth cap is never hit, and what the jumps cut is counted as truncated under
 * one end_mismatch per heal.
 *   - scopes: JUMPS times, a recursive function opens DEPTH nested RP_SCOPE_NAMED
 *     scopes and longjmps from the deepest back to the test; the next scope of a
 *     shallower frame (the next round's first, in the same function as the
 *     previous round's) pops them all;
 *   - plain: the same with rp_begin in nested functions, the setjmp inside an open
 *     span "outer" whose rp_end heals by name (the engine always popped by name,
 *     but the producer's depth stayed 21 deeper per jump, and a reader re-aligns
 *     its stack with that depth after a drop: so one record is dropped before the
 *     spans that follow).
 * Then AFTER spans, each counted. The model: per jump DEPTH frames cut, one heal.
 * With the engine's depth cap below DEPTH (CAP), the BEGINs past it are counted
 * under depth_cap when they open, and the cut takes them first: per jump CAP frames
 * truncated, DEPTH - CAP depth_cap, and still every later span counted.
 */
#include <setjmp.h>

#include "sources.h"
#include "support.h"

#define JUMPS	300
#define DEPTH	21
#define AFTER	10000
#define CAP	8

static uint32_t id_nest, id_plain, id_outer, id_after;
static jmp_buf jb;

static const struct rp_report_fn *fn_of(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

static __attribute__((noinline)) void nest_scopes(int level)
{
	RP_SCOPE_NAMED("nest", "T");

	if (level == DEPTH)
		longjmp(jb, 1);
	if (level < DEPTH) /* always: a way out, for the compiler */
		nest_scopes(level + 1);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

static __attribute__((noinline)) void nest_plain(int level)
{
	rp_begin(id_plain);
	if (level == DEPTH)
		longjmp(jb, 1);
	if (level < DEPTH)
		nest_plain(level + 1);
	rp_end(id_plain);
}

/* In the test function itself: its frame is shallower than every level cut (a
 * function called from there would have the frame of nest_scopes(1) and leave that
 * level open: not the same call, but nothing says it is gone). */
#define AFTER_SPANS()                                                                  \
	for (int i_ = 0; i_ < AFTER; i_++) {                                           \
		RP_SCOPE_NAMED("after", "T");                                          \
		__asm__ volatile("" ::: "memory");                                     \
	}

struct run {
	struct rp_engine *eng;
	struct rp_sources ss;
	struct rp_report r;
};

static void open_engine_cfg(struct run *x, const struct rp_engine_cfg *cfg)
{
	assert_int_equal(rp_engine_open(cfg, &x->eng), 0);
	assert_int_equal(rp_sources_init(&x->ss, x->eng, getenv("RINGPROF_SESSION")), 0);
	assert_int_equal(rp_sources_scan(&x->ss), 1);
	rp_sources_drain(&x->ss, UINT64_MAX);
}

static void open_engine(struct run *x)
{
	open_engine_cfg(x, NULL);
}

static void read_report(struct run *x)
{
	rp_sources_drain(&x->ss, UINT64_MAX);
	rp_sources_update(&x->ss);
	assert_int_equal(rp_engine_report(x->eng, &x->r), 0);
	print_message("    after %llu calls, depth_cap %llu, end_mismatch %llu, truncated %llu, "
		      "end_unmatched %llu\n",
		      (unsigned long long)(fn_of(&x->r, "after") ? fn_of(&x->r, "after")->calls : 0),
		      (unsigned long long)x->r.anomalies[RP_ANOM_DEPTH_CAP],
		      (unsigned long long)x->r.anomalies[RP_ANOM_END_MISMATCH],
		      (unsigned long long)x->r.truncated,
		      (unsigned long long)x->r.anomalies[RP_ANOM_END_UNMATCHED]);
}

static void close_engine(struct run *x)
{
	rp_report_free(&x->r);
	rp_sources_free(&x->ss);
	rp_engine_close(x->eng);
}

static void expect(const struct run *x, const char *cut, uint64_t cut_calls)
{
	const struct rp_report_fn *a = fn_of(&x->r, "after"), *c = fn_of(&x->r, cut);

	assert_int_equal(x->r.anomalies[RP_ANOM_BAD_EVENT], 0);
	assert_int_equal(x->r.anomalies[RP_ANOM_DEPTH_CAP], 0);
	assert_int_equal(x->r.anomalies[RP_ANOM_END_UNMATCHED], 0);
	assert_int_equal(x->r.anomalies[RP_ANOM_END_MISMATCH], JUMPS);
	assert_int_equal(x->r.truncated, (uint64_t)JUMPS * DEPTH);
	assert_non_null(a);
	assert_int_equal(a->calls, AFTER);
	assert_non_null(c); /* truncated spans are closed where they were cut */
	assert_int_equal(c->calls, cut_calls);
}

/* Has the producer drop one record (counted, and the next span record carries the
 * after-drop mark with its depth): the ring looks full for that record only. */
static void drop_one(void)
{
	struct rp_thread *t = &rp_thread_state;
	struct rp_wire_ring *r = t->ring;
	uint32_t head = __atomic_load_n(&r->ring.c_head, __ATOMIC_RELAXED);

	__atomic_store_n(&r->ring.c_head, t->tail - t->mask, __ATOMIC_RELAXED);
	t->head = t->tail - t->mask;
	rp_fast_off(t); /* the fast path's limits count on the old head */
	rp_instant(id_outer);
	__atomic_store_n(&r->ring.c_head, head, __ATOMIC_RELAXED);
	t->head = head;
}

static void test_longjmp_scopes_heal_by_frame(void **state)
{
	volatile int jumps = 0;
	struct run x;

	(void)state;
	open_engine(&x);
	if (setjmp(jb) != 0)
		jumps++;
	if (jumps < JUMPS)
		nest_scopes(1);
	AFTER_SPANS();
	read_report(&x);
	expect(&x, "nest", (uint64_t)JUMPS * DEPTH);
	assert_int_equal(rp_dropped(), 0);
	close_engine(&x);
}

static void test_longjmp_plain_heals_by_name(void **state)
{
	volatile int jumps = 0;
	uint64_t drops;
	struct run x;

	(void)state;
	open_engine(&x);
	for (jumps = 0; jumps < JUMPS; jumps++) {
		rp_begin(id_outer);
		if (setjmp(jb) == 0)
			nest_plain(1);
		rp_end(id_outer); /* 21 "plain" open above it */
		rp_sources_drain(&x.ss, UINT64_MAX);
	}
	drops = rp_dropped();
	drop_one();
	assert_int_equal(rp_dropped(), drops + 1);
	AFTER_SPANS();
	read_report(&x);
	expect(&x, "plain", (uint64_t)JUMPS * DEPTH);
	assert_int_equal(fn_of(&x.r, "outer")->calls, JUMPS);
	close_engine(&x);
}

static void test_longjmp_cut_past_the_depth_cap(void **state)
{
	volatile int jumps = 0;
	struct rp_engine_cfg cfg;
	const struct rp_report_fn *a, *n;
	struct run x;

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.max_depth = CAP;
	open_engine_cfg(&x, &cfg);
	if (setjmp(jb) != 0)
		jumps++;
	if (jumps < JUMPS)
		nest_scopes(1);
	AFTER_SPANS();
	read_report(&x);
	a = fn_of(&x.r, "after");
	n = fn_of(&x.r, "nest");
	assert_int_equal(x.r.anomalies[RP_ANOM_BAD_EVENT], 0);
	assert_int_equal(x.r.anomalies[RP_ANOM_DEPTH_CAP], (uint64_t)JUMPS * (DEPTH - CAP));
	assert_int_equal(x.r.anomalies[RP_ANOM_END_UNMATCHED], 0);
	assert_int_equal(x.r.anomalies[RP_ANOM_END_MISMATCH], JUMPS);
	assert_int_equal(x.r.truncated, (uint64_t)JUMPS * CAP);
	assert_non_null(a);
	assert_int_equal(a->calls, AFTER);
	assert_non_null(n);
	assert_int_equal(n->calls, (uint64_t)JUMPS * CAP);
	close_engine(&x);
}

static int setup(void **state)
{
	(void)state;
	id_plain = rp_intern("plain", "T", NULL, 0);
	id_outer = rp_intern("outer", "T", NULL, 0);
	rp_instant(id_plain); /* claims this thread's ring */
	return id_plain == 0 || id_outer == 0 ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_longjmp_scopes_heal_by_frame),
		cmocka_unit_test(test_longjmp_plain_heals_by_name),
		cmocka_unit_test(test_longjmp_cut_past_the_depth_cap),
	};

	(void)id_nest;
	(void)id_after;
	return cmocka_run_group_tests(tests, setup, NULL);
}
