// SPDX-License-Identifier: MIT
/*
 * One thread, one ring, a 64-slot ring: a full ring drops exactly what does not fit
 * and counts it; records come out in order, whole, across many wrap-arounds of the
 * slot index and across the 32-bit wrap of the free-running indices. Span records too,
 * with the depths a stack of the test's own gives, at every slot of a lap (the fast
 * path addresses a slot from the lap's base: ringprof.h, rp_emit_full), and ENDs
 * that heal the nesting by name.
 *
 * Registered twice: as is (the TSC where the machine has an invariant one) and with
 * the argument "mono" (RINGPROF_CLOCK=monotonic: on x86 every record then takes the
 * inline path's second test, t->mstop).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ring_ck.h"
#include "support.h"

#define CAP 64u

static struct rp_segment *seg;
static uint32_t cid; /* a counter name */
static uint32_t sid[3]; /* span names */
static uint64_t next_seq;
static bool mono; /* argv[1] "mono": RINGPROF_CLOCK=monotonic */

/* Emits n counter events carrying consecutive sequence numbers. */
static void emit(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		rp_counter(cid, (int64_t)next_seq++);
}

/* Drains ring `ring` completely, checks each record against the expected sequence
 * starting at *expect, returns how many came out. */
static unsigned drain_check(uint32_t ring, uint64_t *expect)
{
	struct rp_event ev[CAP];
	struct rp_ring_info info;
	unsigned n, total = 0;
	uint64_t last_ts = 0;

	while ((n = rp_segment_drain(seg, ring, ev, CAP, &info)) > 0) {
		for (unsigned k = 0; k < n; k++) {
			assert_int_equal(ev[k].kind, RP_EV_COUNTER);
			assert_int_equal(ev[k].name, cid);
			assert_int_equal(ev[k].flags, 0);
			assert_int_equal(ev[k].depth, 0);
			assert_int_equal(ev[k].track, 0);
			assert_int_equal(ev[k].arg, *expect);
			assert_true(ev[k].ts >= last_ts);
			last_ts = ev[k].ts;
			(*expect)++;
		}
		total += n;
	}
	return total;
}

static int setup(void **state)
{
	(void)state;
	seg = rp_test_open_self();
	cid = rp_intern("tokens", "COUNTER", NULL, 0);
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "span%d", i);
		sid[i] = rp_intern(name, "FUNCTION", NULL, 0);
		if (sid[i] == 0)
			return -1;
	}
	return cid == 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	rp_segment_close(seg);
	return 0;
}

static void test_ring_full_drops_exact(void **state)
{
	struct rp_wire_ring *r;
	uint64_t expect = next_seq;
	unsigned got;

	(void)state;
	assert_int_equal(seg->v.ring_capacity, CAP);
	emit(1); /* claims ring 0 for this thread */
	r = rp_test_ring(seg, 0);
	assert_int_equal(r->state, RP_RING_ACTIVE);
	assert_int_equal(r->tid, rp_test_gettid());
	emit(CAP + 36);
	/* capacity - 1 fit (ck_ring keeps one slot free); the rest are dropped. */
	assert_int_equal(r->dropped, CAP + 37 - (CAP - 1));
	got = drain_check(0, &expect);
	assert_int_equal(got, CAP - 1);
	/* A drained ring accepts again, and the drop count stays. */
	expect = next_seq;
	emit(10);
	assert_int_equal(drain_check(0, &expect), 10);
	assert_int_equal(r->dropped, 38);
}

/* Random-sized bursts and partial drains, many laps: nothing lost or duplicated. */
static void test_ring_wraparound_in_order(void **state)
{
	struct rp_wire_ring *r = rp_test_ring(seg, 0);
	struct rp_event ev[CAP];
	uint64_t expect = next_seq, dropped0 = r->dropped;
	uint64_t written = 0, received = 0;
	uint32_t rng = 12345, backlog = 0;

	(void)state;
	for (int round = 0; round < 20000; round++) {
		rng = rng * 1103515245u + 12345u;
		unsigned burst = (rng >> 16) % (CAP - 1 - backlog + 1);
		emit(burst);
		written += burst;
		backlog += burst;
		unsigned take = (rng >> 8) % (backlog + 1);
		unsigned n = rp_segment_drain(seg, 0, ev, take, NULL);
		assert_int_equal(n, take);
		for (unsigned k = 0; k < n; k++)
			assert_int_equal(ev[k].arg, expect++);
		backlog -= n;
		received += n;
	}
	received += drain_check(0, &expect);
	assert_int_equal(received, written);
	assert_int_equal(r->dropped, dropped0);
	assert_true(written > 100 * CAP); /* many laps of the slot index */
}

/* What one record must be: the test's own stack says a span record's depth. */
struct want {
	uint8_t kind, flags;
	uint16_t depth;
	uint32_t name;
	uint64_t arg;
};

/* A random walk of BEGINs and ENDs (up to 5 open), with counters between, in bursts
 * that fit, drained by random amounts: > 100 laps of the 64-slot ring, every record
 * whole and in order with its depth, nothing dropped, and the clock never going back. */
static void test_ring_spans_across_laps(void **state)
{
	struct rp_wire_ring *r = rp_test_ring(seg, 0);
	struct rp_event ev[CAP];
	struct want q[CAP]; /* expected records not drained yet, FIFO */
	uint32_t stack[5], depth = 0, qhead = 0, qn = 0, rng = 777;
	uint64_t dropped0 = r->dropped, written = 0, last_ts = 0;
	/* The drops of test_ring_full_drops_exact: the first span record says so. */
	uint8_t mark = dropped0 > 0 ? RP_SPAN_AFTER_DROP : 0;

	(void)state;
	if (mono)
		assert_int_equal(rp_clock()->source, RP_CLOCK_MONOTONIC);
	for (int round = 0; round < 20000; round++) {
		rng = rng * 1103515245u + 12345u;
		unsigned burst = (rng >> 16) % (CAP - 1 - qn + 1);

		for (unsigned i = 0; i < burst; i++) {
			struct want *w = &q[(qhead + qn++) % CAP];

			rng = rng * 1103515245u + 12345u;
			if ((rng >> 28) == 0) {
				rp_counter(cid, (int64_t)written);
				*w = (struct want){ RP_EV_COUNTER, 0, 0, cid, written };
			} else if (depth < 5 && (depth == 0 || (rng >> 20) % 2 == 0)) {
				uint32_t name = sid[(rng >> 12) % 3];

				rp_begin(name);
				*w = (struct want){ RP_EV_BEGIN, (uint8_t)(RP_SPAN_DEPTH | mark),
						    (uint16_t)depth, name, 0 };
				mark = 0;
				stack[depth++] = name;
			} else {
				uint32_t name = stack[--depth];

				rp_end(name);
				*w = (struct want){ RP_EV_END, RP_SPAN_DEPTH, (uint16_t)depth, name,
						    0 };
			}
			written++;
		}
		/* The last round drains all: the ENDs below then fit. */
		unsigned take = round == 19999 ? qn : (rng >> 8) % (qn + 1);
		unsigned n = rp_segment_drain(seg, 0, ev, take, NULL);

		assert_int_equal(n, take);
		for (unsigned k = 0; k < n; k++) {
			struct want *w = &q[qhead];

			assert_int_equal(ev[k].kind, w->kind);
			assert_int_equal(ev[k].flags, w->flags);
			assert_int_equal(ev[k].depth, w->depth);
			assert_int_equal(ev[k].name, w->name);
			assert_int_equal(ev[k].track, 0);
			assert_int_equal(ev[k].arg, w->arg);
			assert_true(ev[k].ts >= last_ts);
			last_ts = ev[k].ts;
			qhead = (qhead + 1) % CAP;
			qn--;
		}
	}
	assert_int_equal(qn, 0);
	while (depth > 0) /* leave the thread's stack empty for the tests after */
		rp_end(stack[--depth]);
	rp_segment_drain(seg, 0, ev, CAP, NULL);
	assert_int_equal(r->dropped, dropped0);
	assert_true(written > 100 * CAP);
}

/*
 * An END whose name is not the top level's heals by name on the fast path too: it pops
 * to the innermost open level of that name and carries that level's depth; a name open
 * nowhere leaves the thread's depth as it is and its END carries one less
 * (producers/shadow.c, rp_heal_name). Each record checked against a stack of the
 * test's own as it is written.
 */
static void test_ring_end_heals_by_name(void **state)
{
	struct rp_wire_ring *r = rp_test_ring(seg, 0);
	uint32_t stack[8], depth = 0, rng = 4242, healed = 0, nowhere = 0;
	uint64_t dropped0 = r->dropped;
	struct rp_event ev[CAP];

	(void)state;
	while (rp_segment_drain(seg, 0, ev, CAP, NULL) > 0)
		;
	for (int round = 0; round < 20000; round++) {
		uint32_t name;
		struct want w;

		rng = rng * 1103515245u + 12345u;
		name = sid[(rng >> 12) % 3];
		if (depth < 8 && (depth == 0 || (rng >> 20) % 2 == 0)) {
			rp_begin(name);
			w = (struct want){ RP_EV_BEGIN, RP_SPAN_DEPTH, (uint16_t)depth, name, 0 };
			stack[depth++] = name;
		} else { /* any of the three names, open or not */
			int i = (int)depth - 1;

			while (i >= 0 && stack[i] != name)
				i--;
			rp_end(name);
			if (i >= 0) {
				healed += i < (int)depth - 1;
				w = (struct want){ RP_EV_END, RP_SPAN_DEPTH, (uint16_t)i, name, 0 };
				depth = (uint32_t)i;
			} else {
				nowhere++;
				w = (struct want){ RP_EV_END, RP_SPAN_DEPTH, (uint16_t)(depth - 1),
						   name, 0 };
			}
		}
		assert_int_equal(rp_segment_drain(seg, 0, ev, CAP, NULL), 1);
		assert_int_equal(ev[0].kind, w.kind);
		assert_int_equal(ev[0].flags, w.flags);
		assert_int_equal(ev[0].depth, w.depth);
		assert_int_equal(ev[0].name, w.name);
		assert_int_equal(ev[0].track, 0);
		assert_int_equal(ev[0].arg, 0);
	}
	assert_true(healed > 100 && nowhere > 100);
	while (depth > 0) /* leave the thread's stack empty for the tests after */
		rp_end(stack[--depth]);
	while (rp_segment_drain(seg, 0, ev, CAP, NULL) > 0)
		;
	assert_int_equal(r->dropped, dropped0);
}

static void *wrap_thread(void *arg)
{
	uint64_t *n = arg;

	for (uint64_t i = 0; i < *n; i++)
		rp_counter(cid, (int64_t)i);
	return NULL;
}

/* The free-running 32-bit indices wrap: start a ring just below 2^32. */
static void test_ring_index_wrap_32bit(void **state)
{
	struct rp_wire_ring *r = rp_test_ring(seg, 1);
	uint64_t n = 3 * CAP / 4, expect = 0, got = 0;
	struct rp_event ev[CAP];
	pthread_t th;
	uint32_t start = UINT32_MAX - 20;

	(void)state;
	assert_int_equal(r->state, RP_RING_FREE);
	r->ring.c_head = start;
	r->ring.p_tail = start;
	seg->rings[1].head = start;
	for (int lap = 0; lap < 3; lap++) {
		expect = 0;
		assert_int_equal(pthread_create(&th, NULL, wrap_thread, &n), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		got = rp_segment_drain(seg, 1, ev, CAP, NULL);
		assert_int_equal(got, n);
		for (unsigned k = 0; k < got; k++)
			assert_int_equal(ev[k].arg, expect++);
		/* The thread exited: its ring is retired, drained, and reused next lap. */
		assert_int_equal(r->state, RP_RING_RETIRED);
		assert_int_equal(r->gen, (uint32_t)lap + 1);
	}
	assert_true(r->ring.p_tail < start); /* it wrapped */
	assert_int_equal(r->dropped, 0);
}

CK_RING_PROTOTYPE(rp_event, rp_event)

/* The rings are Concurrency Kit rings: ck's own SPSC dequeue, given the ring
 * descriptor and its slots, reads exactly what the producer wrote. */
static void test_ring_is_a_ck_ring(void **state)
{
	struct rp_wire_ring *r = rp_test_ring(seg, 0);
	struct rp_event *slots = (struct rp_event *)((char *)seg->base + seg->v.ring_data_offset);
	struct rp_event e;
	uint64_t first = next_seq;
	unsigned n = 0;

	(void)state;
	assert_int_equal(ck_ring_capacity(rp_ring_ck(r)), CAP);
	emit(CAP / 2);
	assert_int_equal(ck_ring_size(rp_ring_ck(r)), CAP / 2);
	while (ck_ring_dequeue_spsc_rp_event(rp_ring_ck(r), slots, &e)) {
		assert_int_equal(e.arg, first + n);
		n++;
	}
	assert_int_equal(n, CAP / 2);
	seg->rings[0].head = r->ring.c_head; /* our reader's cursor follows */
	assert_int_equal(rp_segment_ring_pending(seg, 0), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_full_drops_exact),
		cmocka_unit_test(test_ring_wraparound_in_order),
		cmocka_unit_test(test_ring_spans_across_laps),
		cmocka_unit_test(test_ring_end_heals_by_name),
		cmocka_unit_test(test_ring_index_wrap_32bit),
		cmocka_unit_test(test_ring_is_a_ck_ring),
	};

	setenv("RINGPROF_RING_EVENTS", "64", 1);
	setenv("RINGPROF_RINGS", "4", 1);
	mono = argc > 1 && strcmp(argv[1], "mono") == 0;
	if (mono)
		setenv("RINGPROF_CLOCK", "monotonic", 1);
	return cmocka_run_group_tests(tests, setup, teardown);
}
