// SPDX-License-Identifier: MIT
/*
 * One thread, one ring, a 64-slot ring: a full ring drops exactly what does not fit
 * and counts it; records come out in order, whole, across many wrap-arounds of the
 * slot index and across the 32-bit wrap of the free-running indices.
 */
#include <pthread.h>
#include <string.h>

#include "ring_ck.h"
#include "support.h"

#define CAP 64u

static struct rp_segment *seg;
static uint32_t cid; /* a counter name */
static uint64_t next_seq;

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_full_drops_exact),
		cmocka_unit_test(test_ring_wraparound_in_order),
		cmocka_unit_test(test_ring_index_wrap_32bit),
		cmocka_unit_test(test_ring_is_a_ck_ring),
	};

	setenv("RINGPROF_RING_EVENTS", "64", 1);
	setenv("RINGPROF_RINGS", "4", 1);
	return cmocka_run_group_tests(tests, setup, teardown);
}
