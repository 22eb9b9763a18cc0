// SPDX-License-Identifier: MIT
/*
 * Threads racing a consumer on shared memory. N producer threads write M records
 * each while a reader drains every ring concurrently; per ring, received + dropped
 * must equal what the thread wrote, in order. Rings are retired at thread exit and
 * reused only once drained; a thread that finds no ring drops and counts; a
 * sleeping consumer is woken by the doorbell.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "support.h"

#define RINGS 8u
#define CAP 1024u
#define NTHREADS 4
#define M 200000u

static struct rp_segment *seg;
static uint32_t nid;

struct producer {
	pthread_t th;
	unsigned idx;
	unsigned count;
	uint32_t ring; /* the ring this thread claimed */
};

/* This thread's ring index, from the producer's own mapping. */
static uint32_t own_ring_index(void)
{
	const struct rp_thread *t = &rp_thread_state;
	const char *base = (const char *)t->hdr + t->hdr->ring_desc_offset;

	return (uint32_t)(t->ring - (const struct rp_wire_ring *)base);
}

static void *produce(void *arg)
{
	struct producer *p = arg;

	for (unsigned i = 0; i < p->count; i++) {
		rp_async_begin(nid, p->idx, i); /* track = thread index, arg = sequence */
		if (i % 512 == 511) /* let the reader in: a mix of drained and dropped */
			sched_yield();
	}
	p->ring = own_ring_index();
	return NULL;
}

/* What the reader saw: per ring its current owner (track), per track the last
 * sequence and whether the track has handed its ring over. */
struct seen {
	uint64_t received[RINGS];
	int64_t owner[RINGS];
	int64_t last_seq[NTHREADS];
	bool gone[NTHREADS];
};

static void check_record(struct seen *s, uint32_t r, const struct rp_event *e)
{
	assert_int_equal(e->kind, RP_EV_ASYNC_BEGIN);
	assert_int_equal(e->name, nid);
	assert_true(e->track < NTHREADS);
	if (s->owner[r] != (int64_t)e->track) {
		/* A new owner: only after the old one's records were all read. */
		assert_false(s->gone[e->track]);
		if (s->owner[r] >= 0)
			s->gone[s->owner[r]] = true;
		s->owner[r] = (int64_t)e->track;
	}
	assert_true((int64_t)e->arg > s->last_seq[e->track]); /* in order; drops skip */
	s->last_seq[e->track] = (int64_t)e->arg;
	s->received[r]++;
}

/* Drains every ring; with `check`, each record must be test 1's sequence. */
static uint64_t drain_all(struct seen *seen, bool check)
{
	struct rp_event ev[256];
	uint64_t total = 0;
	unsigned n;

	for (uint32_t r = 0; r < RINGS; r++)
		while ((n = rp_segment_drain(seg, r, ev, 256, NULL)) > 0) {
			for (unsigned k = 0; check && k < n; k++)
				check_record(seen, r, &ev[k]);
			total += n;
		}
	return total;
}

static void reset_seen(struct seen *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned r = 0; r < RINGS; r++)
		s->owner[r] = -1;
	for (unsigned t = 0; t < NTHREADS; t++)
		s->last_seq[t] = -1;
}

/* Per ring, records received + records dropped == records its owners wrote. */
static void test_threads_received_plus_dropped_is_written(void **state)
{
	struct producer p[NTHREADS];
	struct seen seen;
	uint64_t dropped0[RINGS], written[RINGS] = { 0 }, total_dropped = 0;
	struct timespec pause = { 0, 20000 };
	bool joined[NTHREADS] = { false };
	int done = 0;

	(void)state;
	reset_seen(&seen);
	for (uint32_t r = 0; r < RINGS; r++)
		dropped0[r] = rp_test_ring(seg, r)->dropped;
	for (unsigned i = 0; i < NTHREADS; i++) {
		p[i] = (struct producer){ .idx = i, .count = M };
		assert_int_equal(pthread_create(&p[i].th, NULL, produce, &p[i]), 0);
	}
	/* Drain concurrently, pausing now and then so that rings do fill and drop. */
	while (done < NTHREADS) {
		drain_all(&seen, true);
		nanosleep(&pause, NULL);
		for (unsigned i = 0; i < NTHREADS; i++)
			if (!joined[i] && pthread_tryjoin_np(p[i].th, NULL) == 0) {
				joined[i] = true;
				done++;
			}
	}
	drain_all(&seen, true);
	for (unsigned i = 0; i < NTHREADS; i++)
		written[p[i].ring] += M;
	for (uint32_t r = 0; r < RINGS; r++) {
		uint64_t dropped = rp_test_ring(seg, r)->dropped - dropped0[r];
		assert_int_equal(seen.received[r] + dropped, written[r]);
		total_dropped += dropped;
	}
	print_message("    %u threads x %u: dropped %llu\n", NTHREADS, M,
		      (unsigned long long)total_dropped);
}

struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int open;
};

static struct gate gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
static atomic_int claimed;

static void *hold_ring(void *arg)
{
	(void)arg;
	rp_instant(nid); /* claims a ring */
	atomic_fetch_add(&claimed, 1);
	pthread_mutex_lock(&gate.mu);
	while (!gate.open)
		pthread_cond_wait(&gate.cv, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
	return NULL;
}

static void *emit_n(void *arg)
{
	unsigned n = *(unsigned *)arg;

	for (unsigned i = 0; i < n; i++)
		rp_instant(nid);
	return NULL;
}

static uint32_t count_state(uint32_t st)
{
	uint32_t n = 0;

	for (uint32_t r = 0; r < RINGS; r++)
		n += rp_test_ring(seg, r)->state == st;
	return n;
}

/* With every ring owned, a new thread's events are dropped and counted, exactly. */
static void test_threads_no_free_ring_counts(void **state)
{
	struct seen seen;
	pthread_t holders[RINGS], extra;
	unsigned n = 5000;
	uint64_t before;
	uint32_t active = count_state(RP_RING_ACTIVE);

	(void)state;
	reset_seen(&seen);
	drain_all(&seen, false); /* retired rings become claimable once drained */
	atomic_store(&claimed, 0);
	gate.open = 0;
	for (uint32_t i = 0; i < RINGS - active; i++)
		assert_int_equal(pthread_create(&holders[i], NULL, hold_ring, NULL), 0);
	while (atomic_load(&claimed) < (int)(RINGS - active))
		sched_yield();
	assert_int_equal(count_state(RP_RING_ACTIVE), RINGS);
	before = rp_test_hdr(seg)->noring_dropped;
	assert_int_equal(pthread_create(&extra, NULL, emit_n, &n), 0);
	assert_int_equal(pthread_join(extra, NULL), 0);
	assert_int_equal(rp_test_hdr(seg)->noring_dropped - before, n);
	pthread_mutex_lock(&gate.mu);
	gate.open = 1;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	for (uint32_t i = 0; i < RINGS - active; i++)
		assert_int_equal(pthread_join(holders[i], NULL), 0);
	assert_int_equal(count_state(RP_RING_RETIRED), RINGS - active);
}

/* A retired ring with records in it is not reused; once drained, it is, with a new
 * generation and owner, and the consumer tells the two owners apart. */
static void test_threads_retired_ring_reused_after_drain(void **state)
{
	struct seen seen;
	struct rp_event ev[64];
	struct rp_ring_info info;
	unsigned three = 3, four = 4;
	pthread_t th;
	uint32_t r0 = UINT32_MAX, gen0;

	(void)state;
	reset_seen(&seen);
	drain_all(&seen, false);
	assert_int_equal(pthread_create(&th, NULL, emit_n, &three), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (uint32_t r = 0; r < RINGS; r++)
		if (rp_segment_ring_pending(seg, r) == 3)
			r0 = r;
	assert_true(r0 != UINT32_MAX);
	assert_int_equal(rp_test_ring(seg, r0)->state, RP_RING_RETIRED);
	gen0 = rp_test_ring(seg, r0)->gen;
	/* Undrained: the next thread must take another ring. */
	assert_int_equal(pthread_create(&th, NULL, emit_n, &four), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(rp_segment_ring_pending(seg, r0), 3);
	assert_int_equal(rp_test_ring(seg, r0)->gen, gen0);
	assert_int_equal(rp_segment_drain(seg, r0, ev, 64, &info), 3);
	assert_int_equal(info.state, RP_RING_RETIRED);
	assert_int_equal(info.gen, gen0);
	drain_all(&seen, false);
	/* Drained: claimable again. */
	assert_int_equal(pthread_create(&th, NULL, emit_n, &four), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	uint32_t reused = 0;
	for (uint32_t r = 0; r < RINGS; r++)
		if (rp_segment_ring_pending(seg, r) == 4) {
			reused++;
			assert_int_equal(rp_segment_drain(seg, r, ev, 64, &info), 4);
			assert_int_equal(info.gen, rp_test_ring(seg, r)->gen);
		}
	assert_int_equal(reused, 1);
}

struct sleeper {
	int woke;
	uint64_t waited_ns;
};

static void *sleep_on_doorbell(void *arg)
{
	struct sleeper *s = arg;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	s->woke = rp_segment_sleep(seg, 10ull * 1000000000u);
	clock_gettime(CLOCK_MONOTONIC, &b);
	s->waited_ns = (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u +
		       (uint64_t)(b.tv_nsec - a.tv_nsec);
	return NULL;
}

/* The doorbell: no wake-up below 1/RP_DOORBELL_FRACTION of a ring, exactly one there. */
static void test_threads_doorbell_wakes_sleeping_consumer(void **state)
{
	struct seen seen;
	struct sleeper s = { 0, 0 };
	struct rp_wire_header *h = rp_test_hdr(seg);
	uint64_t rings0 = h->doorbell_rings;
	pthread_t th;

	(void)state;
	reset_seen(&seen);
	rp_instant(nid); /* this thread's ring */
	drain_all(&seen, false);
	assert_int_equal(pthread_create(&th, NULL, sleep_on_doorbell, &s), 0);
	while (__atomic_load_n(&h->consumer_sleeping, __ATOMIC_RELAXED) == 0)
		sched_yield();
	for (unsigned i = 0; i < CAP / RP_DOORBELL_FRACTION - 2; i++)
		rp_instant(nid);
	assert_int_equal(h->doorbell_rings, rings0); /* below the mark: silent */
	rp_instant(nid);
	rp_instant(nid);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(s.woke, 1);
	assert_int_equal(h->doorbell_rings, rings0 + 1);
	assert_int_equal(h->consumer_sleeping, 0);
	assert_true(s.waited_ns < 5ull * 1000000000u); /* woken, not timed out */
	drain_all(&seen, false);
}

static pthread_key_t late_key;

/* Runs after the library's own key destructor (keys destruct in creation order):
 * the ring is retired, so these events must be counted as dropped, not lost. */
static void late_destructor(void *arg)
{
	(void)arg;
	for (int i = 0; i < 5; i++)
		rp_instant(nid);
}

static void *record_then_exit(void *arg)
{
	(void)arg;
	rp_instant(nid);
	pthread_setspecific(late_key, (void *)1);
	return NULL;
}

static void test_threads_events_after_retire_are_counted(void **state)
{
	struct seen seen;
	uint64_t before = rp_test_hdr(seg)->noring_dropped, dropped0 = rp_dropped();
	pthread_t th;

	(void)state;
	reset_seen(&seen);
	assert_int_equal(pthread_key_create(&late_key, late_destructor), 0);
	assert_int_equal(pthread_create(&th, NULL, record_then_exit, NULL), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(rp_test_hdr(seg)->noring_dropped - before, 5);
	assert_int_equal(rp_dropped() - dropped0, 5);
	assert_int_equal(drain_all(&seen, false), 1);
	pthread_key_delete(late_key);
}

static int setup(void **state)
{
	(void)state;
	seg = rp_test_open_self();
	nid = rp_intern("work", "FUNCTION", __FILE__, __LINE__);
	return nid == 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	rp_segment_close(seg);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_received_plus_dropped_is_written),
		cmocka_unit_test(test_threads_no_free_ring_counts),
		cmocka_unit_test(test_threads_retired_ring_reused_after_drain),
		cmocka_unit_test(test_threads_doorbell_wakes_sleeping_consumer),
		cmocka_unit_test(test_threads_events_after_retire_are_counted),
	};

	setenv("RINGPROF_RING_EVENTS", "1024", 1);
	setenv("RINGPROF_RINGS", "8", 1);
	return cmocka_run_group_tests(tests, setup, teardown);
}
