// SPDX-License-Identifier: MIT
/*
 * The engine's run entries (rp_engine_run, rp_engine_run_lanes: what the live
 * sources hand a ring's records to) against the one-event entry they stand for
 * (rp_engine_event_at). A random stream on two producer threads of two sources,
 * async requests, counters and instants, with every irregular record the fast path
 * must leave to the general one (ENDs of the wrong name, with no span open, below
 * the stack, after a drop, with a self time or an error, BEGINs past the depth cap,
 * late records, bad names and kinds, sub-windows rotating), goes once event by
 * event and once in runs of random length; the two snapshots, encoded, are the
 * same bytes. rp_engine_run_ring() (the live sources' records read in place) goes the
 * same way, from ring slots in ticks with producer name ids, slices of random length
 * wrapping round the ring, with random due bounds and names not mapped yet: each
 * record it leaves is handed on as the sources do, converted by hand (it leaves only
 * those, late records and a sub-window's end: the rest, async requests, counters and
 * odd span records included, it dispatches itself).
 */
#include <string.h>

#include "engine.h"
#include "snapshot.h"
#include "support.h"

#define N_EVENTS 40000
#define NAMES 6
#define DEPTH_CAP 5

static uint32_t rng;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 1664525u + 1013904223u;
	return (rng >> 8) % n;
}

struct tev {
	struct rp_event ev;
	uint32_t lane;	/* 0, 1: the producer thread (and source) */
};

static struct tev evs[N_EVENTS];
static uint32_t ids[2][NAMES];

/* A thread's stack as its producer sees it. */
struct model {
	uint32_t name[64];
	uint32_t n;
};

static void span_rec(struct rp_event *ev, uint8_t kind, uint32_t name, uint32_t depth)
{
	ev->kind = kind;
	ev->name = name;
	ev->flags = RP_SPAN_DEPTH;
	ev->depth = (uint16_t)depth;
}

/* One thread record: mostly a well-nested BEGIN or END, sometimes an odd one. */
static void thread_rec(struct model *m, uint32_t lane, struct rp_event *ev)
{
	uint32_t r = rnd(100);

	if (m->n == 0 || (r < 50 && m->n < 60)) {
		uint32_t nm = rnd(NAMES);

		span_rec(ev, RP_EV_BEGIN, ids[lane][nm], m->n);
		m->name[m->n++] = nm;
		return;
	}
	span_rec(ev, RP_EV_END, ids[lane][m->name[m->n - 1]], m->n - 1);
	m->n--;
	switch (rnd(40)) {
	case 0: /* the wrong name */
		ev->name = ids[lane][rnd(NAMES)];
		break;
	case 1: /* below the stack: the producer healed */
		if (m->n > 1) {
			m->n -= 1;
			ev->depth = (uint16_t)m->n;
		}
		break;
	case 2: /* after a drop */
		ev->flags |= RP_SPAN_AFTER_DROP;
		break;
	case 3:
		ev->flags |= RP_SPAN_SELF;
		ev->arg = rnd(500);
		break;
	case 4:
		ev->flags |= RP_SPAN_ERROR;
		break;
	case 5: /* no depth */
		ev->flags = 0;
		break;
	case 6: /* a name the engine does not have */
		ev->name = 1u << 30;
		break;
	}
}

/* Another kind of record, or a thread's. */
static void other_rec(struct model *m, uint32_t lane, struct rp_event *ev, uint64_t *async)
{
	switch (rnd(12)) {
	case 0:
		ev->kind = RP_EV_ASYNC_BEGIN;
		ev->name = ids[lane][rnd(NAMES)];
		ev->track = ++*async;
		ev->arg = 1;
		break;
	case 1:
		ev->kind = RP_EV_ASYNC_END;
		ev->name = ids[lane][0];
		ev->track = *async - rnd(3);
		ev->arg = 1;
		break;
	case 2:
		ev->kind = RP_EV_COUNTER;
		ev->name = ids[lane][rnd(NAMES)];
		ev->arg = rnd(1000);
		break;
	case 3:
		ev->kind = RP_EV_INSTANT;
		ev->name = ids[lane][rnd(NAMES)];
		break;
	case 4:
		ev->kind = 0xee; /* unknown */
		ev->name = ids[lane][0];
		break;
	default:
		thread_rec(m, lane, ev);
	}
}

/* Streams whose times step back now and then by a little, or not quite to the record
 * before's, record after record (ticks that go down within one ns of a coarse clock
 * are still in order). */
static bool jitter;

static void make_stream(uint32_t seed)
{
	struct model m[2] = { 0 };
	uint64_t t = 1000000, async = 0;

	rng = seed;
	for (uint32_t i = 0; i < N_EVENTS; i++) {
		struct tev *x = &evs[i];
		uint32_t lane = rnd(8) == 0 ? 1 - (i ? evs[i - 1].lane : 0) : (i ? evs[i - 1].lane : 0);

		memset(x, 0, sizeof(*x));
		x->lane = lane;
		t += rnd(4000); /* sub-windows of 100 us: many rotations */
		x->ev.ts = rnd(50) == 0 ? t - rnd(20000) : t; /* late, now and then */
		if (jitter && i > 0 && rnd(4) == 0) /* about the record before's */
			x->ev.ts = evs[i - 1].ev.ts - rnd(3000) + rnd(2000);
		if (rnd(10) == 0)
			other_rec(&m[lane], lane, &x->ev, &async);
		else
			thread_rec(&m[lane], lane, &x->ev);
	}
}

static struct rp_engine *open_engine(void)
{
	static const char *nm[NAMES] = { "a", "b", "c", "d", "e", "f" };
	struct rp_engine_cfg cfg;
	struct rp_engine *e;

	rp_engine_cfg_default(&cfg);
	cfg.max_depth = DEPTH_CAP;
	cfg.n_windows = 1;
	cfg.window_ns[0] = 1000000; /* 1 ms of 10 sub-windows */
	cfg.recorder_spans = 1u << 16;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	for (uint32_t s = 0; s < 2; s++) {
		assert_int_equal(rp_engine_add_source(e, s ? "p1" : "p0", (int32_t)(100 + s), 0),
				 (int)s);
		for (uint32_t k = 0; k < NAMES; k++)
			ids[s][k] = rp_engine_name(e, s, nm[k], s ? "cat1" : "cat0", "f.c", k);
	}
	return e;
}

/* The snapshot's bytes, with the wall-clock readings a report takes zeroed. */
static void encode(struct rp_engine *e, struct rp_membuf *out)
{
	struct rp_report r;

	assert_int_equal(rp_engine_report(e, &r), 0);
	r.created_realtime_ns = 0;
	for (uint32_t i = 0; i < r.n_sources; i++)
		r.sources[i].anchor_realtime_ns = r.sources[i].anchor_monotonic_ns = 0;
	memset(out, 0, sizeof(*out));
	assert_int_equal(rp_snapshot_encode(&r, rp_membuf_sink, out), 0);
	rp_report_free(&r);
}

/* Both engines' snapshots are the same bytes; both are closed. */
static void assert_same_and_close(struct rp_engine *ea, struct rp_engine *eb)
{
	struct rp_membuf a, b;

	encode(ea, &a);
	encode(eb, &b);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	rp_membuf_free(&a);
	rp_membuf_free(&b);
	rp_engine_close(ea);
	rp_engine_close(eb);
}

/* Event by event, as the oracle. */
static struct rp_engine *one_by_one(void)
{
	struct rp_engine *e = open_engine();
	uint32_t hint[2] = { 0, 0 };

	for (uint32_t i = 0; i < N_EVENTS; i++)
		rp_engine_event_at(e, evs[i].lane, evs[i].lane + 1, &evs[i].ev, &hint[evs[i].lane]);
	return e;
}

/* In runs: of one thread (@lanes false), or of both interleaved. */
static struct rp_engine *in_runs(bool lanes)
{
	struct rp_engine *e = open_engine();
	uint32_t hint[2] = { 0, 0 }, i = 0;
	struct rp_event run[64];
	uint8_t which[64];

	while (i < N_EVENTS) {
		uint32_t max = 1 + rnd(64), n = 0;

		while (i + n < N_EVENTS && n < max && (lanes || evs[i + n].lane == evs[i].lane)) {
			run[n] = evs[i + n].ev;
			which[n] = (uint8_t)evs[i + n].lane;
			n++;
		}
		if (lanes) {
			struct rp_run_lane l[RP_RUN_LANES] = {
				{ .src = 0, .thread = 1, .hint = &hint[0] },
				{ .src = 1, .thread = 2, .hint = &hint[1] },
			};

			rp_engine_run_lanes(e, l, run, which, n);
		} else {
			rp_engine_run(e, evs[i].lane, evs[i].lane + 1, run, n, &hint[evs[i].lane]);
		}
		i += n;
	}
	return e;
}

/* The slices' clock: by default ns = ticks * 3 / 2 (a 32.32 multiplier of 1.5). */
static const struct rp_wire_clock clock_1_5 = { .source = RP_CLOCK_TSC, .shift = 32,
						.mult = 3ull << 31 };
static struct rp_wire_clock ring_clock;

/* The reference conversion (test_clock checks it against the 128-bit definition). */
static uint64_t ticks_ns(uint64_t ticks)
{
	return rp_ticks_to_ns(&ring_clock, ticks);
}

/* The stream as the oracle sees it: times (and self times) in ns. */
static struct rp_engine *one_by_one_ns(void)
{
	struct rp_engine *e = open_engine();
	uint32_t hint[2] = { 0, 0 };

	for (uint32_t i = 0; i < N_EVENTS; i++) {
		struct rp_event ev = evs[i].ev;

		ev.ts = ticks_ns(ev.ts);
		if (ev.kind == RP_EV_END && (ev.flags & RP_SPAN_SELF))
			ev.arg = rp_ticks_len_ns(&ring_clock, ev.arg);
		rp_engine_event_at(e, evs[i].lane, evs[i].lane + 1, &ev, &hint[evs[i].lane]);
	}
	return e;
}

/* The producer's id of engine name @name of @lane: its index + 1 (0 stays
 * unresolved), or itself when the engine has no such name. */
static uint32_t producer_id(uint32_t lane, uint32_t name)
{
	for (uint32_t k = 0; k < NAMES; k++)
		if (ids[lane][k] == name)
			return k + 1;
	return name;
}

/* Records rp_engine_run_ring() processed, and those it left to the caller; of those
 * it processed, the ones that were not a thread's BEGIN or END, and the calls whose
 * records ran past the ring's last slot. */
static uint32_t ring_done, ring_left, ring_other, ring_wrapped;

/* One thread's records from @i on, through ring slices; @return how many. */
static uint32_t ring_slice(struct rp_engine *e, uint32_t i, uint32_t *hint,
			   struct rp_event *slots, uint64_t *last)
{
	const uint32_t lane = evs[i].lane, mask = 127;
	uint32_t map[NAMES + 1], n = 0, max = 1 + rnd(100), h = rnd(1u << 20), done = 0, got;
	struct rp_ring_slice sl;

	map[0] = RP_NONE;
	for (uint32_t k = 0; k < NAMES; k++) /* now and then one not mapped yet */
		map[k + 1] = rnd(20) == 0 ? RP_NONE : ids[lane][k];
	while (i + n < N_EVENTS && n < max && evs[i + n].lane == lane) {
		slots[(h + n) & mask] = evs[i + n].ev;
		slots[(h + n) & mask].name = producer_id(lane, evs[i + n].ev.name);
		n++;
	}
	while (done < n) {
		const struct rp_event *x = &evs[i + done].ev;
		struct rp_event ev = *x;
		uint64_t lim = UINT64_MAX;

		if (rnd(4) == 0) /* due up to past the first, or to about a later one's */
			lim = ticks_ns(x->ts) + rnd(8000);
		else if (rnd(3) == 0)
			lim = ticks_ns(evs[i + done + rnd(n - done)].ev.ts) - rnd(2);
		sl = (struct rp_ring_slice){
			.slots = slots, .mask = mask, .h = h + done, .n = n - done,
			.clock = &ring_clock, .names = map, .n_names = NAMES + 1,
			.lim = lim, .last_ts = *last,
		};
		got = rp_engine_run_ring(e, lane, lane + 1, &sl, hint);
		ring_done += got;
		for (uint32_t k = done; k < done + got; k++) {
			ring_other += evs[i + k].ev.kind != RP_EV_BEGIN &&
				      evs[i + k].ev.kind != RP_EV_END;
			/* none taken that is not due */
			assert_true(ticks_ns(evs[i + k].ev.ts) <= lim);
		}
		ring_wrapped += got > 0 && ((h + done) & mask) + got > mask + 1;
		done += got;
		*last = sl.last_ts;
		if (done == n)
			break;
		/* it stopped before one the sources must see */
		x = &evs[i + done].ev;
		assert_true(ticks_ns(x->ts) > lim || x->kind == RP_EV_THREAD ||
			    x->kind == RP_EV_SUMMARY_DATA || producer_id(lane, x->name) > NAMES ||
			    map[producer_id(lane, x->name)] == RP_NONE);
		ring_left++;
		/* the record it left, as the sources hand it on */
		ev = evs[i + done].ev;
		ev.ts = ticks_ns(ev.ts);
		if (ev.kind == RP_EV_END && (ev.flags & RP_SPAN_SELF))
			ev.arg = rp_ticks_len_ns(&ring_clock, ev.arg);
		*last = ev.ts > *last ? ev.ts : *last;
		rp_engine_event_at(e, lane, lane + 1, &ev, hint);
		done++;
	}
	return n;
}

/* The stream through rp_engine_run_ring(), one thread's slice at a time. */
static struct rp_engine *in_ring_slices(uint64_t *last)
{
	struct rp_engine *e = open_engine();
	struct rp_event slots[128];
	uint32_t hint[2] = { 0, 0 }, i = 0;

	*last = 0;
	while (i < N_EVENTS)
		i += ring_slice(e, i, &hint[evs[i].lane], slots, last);
	return e;
}

/* Stream @seed through ring slices under ring_clock against it event by event. */
static void check_ring(uint32_t seed)
{
	struct rp_engine *ea, *eb;
	uint64_t last, newest = 0;

	make_stream(seed);
	for (uint32_t i = 0; i < N_EVENTS; i++) /* an independent newest time */
		newest = ticks_ns(evs[i].ev.ts) > newest ? ticks_ns(evs[i].ev.ts) : newest;
	ea = one_by_one_ns();
	rng = seed * 7919u;
	ring_done = ring_left = ring_other = ring_wrapped = 0;
	eb = in_ring_slices(&last);
	assert_int_equal(last, newest);
	/* not vacuous: the loop took records, other kinds among them, and slices ran
	 * round the ring's end */
	assert_true(ring_done > N_EVENTS / 2 && ring_other > 1000 && ring_wrapped > 50);
	assert_same_and_close(ea, eb);
}

static void test_run_ring_same_as_events(void **state)
{
	(void)state;
	ring_clock = clock_1_5;
	for (uint32_t seed = 1; seed <= 4; seed++) {
		check_ring(seed);
		/* and it stopped before records, as the sources' */
		assert_true(ring_left > 100);
	}
}

/*
 * The loop converts ticks near a slice's first with one 64-bit multiply (engine.c's
 * ring_clock): the same times as rp_ticks_to_ns() under any clock. Ticks before the
 * reference (negative differences, floored), a reference past 2^63 (the difference
 * wraps), odd multipliers (the product's low bits carried), a multiplier so large that
 * only a few ticks fit in 64 bits (the loop moves its base time and again), many ticks
 * to one ns (late records whose time equals the last one's: in order), a clock in ns.
 */
static void test_run_ring_any_clock(void **state)
{
	static const struct rp_wire_clock clocks[] = {
		{ .shift = 32, .mult = (3ull << 30) + 12345, .ref_ticks = 3000000,
		  .ref_ns = 1000000007 },
		{ .shift = 63, .mult = UINT64_MAX, .ref_ticks = UINT64_MAX - 2000000, .ref_ns = 5 },
		{ .shift = 62, .mult = 3ull << 61, .ref_ticks = 77, .ref_ns = 1u << 30 },
		{ .shift = 16, .mult = 3, .ref_ticks = 1000000, .ref_ns = 999 },
		{ .shift = 33, .mult = (5ull << 32) + 1, .ref_ticks = 50000000, .ref_ns = 1ull << 40 },
		{ .shift = 0, .mult = 1 },
	};

	(void)state;
	for (uint32_t c = 0; c < sizeof(clocks) / sizeof(clocks[0]); c++) {
		ring_clock = clocks[c];
		ring_clock.source = RP_CLOCK_TSC;
		check_ring(11 + c);
		jitter = true;
		check_ring(31 + c);
		jitter = false;
	}
}

static void check_same(bool lanes)
{
	for (uint32_t seed = 1; seed <= 4; seed++) {
		struct rp_engine *ea, *eb;
		struct rp_report r;

		make_stream(seed);
		ea = one_by_one();
		rng = seed * 7919u;
		eb = in_runs(lanes);
		/* not vacuous: the odd records happened */
		assert_int_equal(rp_engine_report(ea, &r), 0);
		assert_true(r.anomalies[RP_ANOM_END_MISMATCH] > 0);
		assert_true(r.anomalies[RP_ANOM_DROP_LOST] > 0);
		assert_true(r.anomalies[RP_ANOM_DEPTH_CAP] > 0);
		assert_true(r.anomalies[RP_ANOM_BAD_EVENT] > 0);
		assert_true(r.late > 0);
		assert_true(r.n_fns > 0 && r.events == N_EVENTS);
		rp_report_free(&r);
		assert_same_and_close(ea, eb);
	}
}

static void test_run_one_thread_same_as_events(void **state)
{
	(void)state;
	check_same(false);
}

static void test_run_lanes_same_as_events(void **state)
{
	(void)state;
	check_same(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_one_thread_same_as_events),
		cmocka_unit_test(test_run_lanes_same_as_events),
		cmocka_unit_test(test_run_ring_same_as_events),
		cmocka_unit_test(test_run_ring_any_clock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
