// SPDX-License-Identifier: MIT
/*
 * bench_auto's workload: one deterministic call tree, built three ways (plain, with
 * -finstrument-functions + ringprof-auto, with -pg for `uftrace record`). Every
 * function is noinline so the three builds make the same calls.
 *
 *	workload F S L	fib(F) (recursion), S x tiny() (many small functions, each
 *			calling tiny2()), L x long_work() (a few long ones)
 *
 * Prints "cpu_ns wall_ns dropped": the CPU time this thread spent in the call tree
 * alone (CLOCK_THREAD_CPUTIME_ID: time it waited for a CPU on a busy machine is not
 * in it, nor a tracer's or the engine's work on other threads) and the wall time of
 * the same stretch (CLOCK_MONOTONIC: the slowdown the program sees), measured here, so
 * neither process start nor a tracer's setup and exit counts (nor, for ringprof,
 * the first touch of its ring pages: see warm_rings()); dropped is the events
 * ringprof could not record (0 in the other builds), and sent the records it wrote
 * into its rings (summarized or not: docs/summaries.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef WITH_RINGPROF
#include <ringprof/ringprof.h>
#endif

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;

NOINLINE static uint64_t fib(int n)
{
	return n < 2 ? (uint64_t)n : fib(n - 1) + fib(n - 2);
}

NOINLINE static void tiny2(uint64_t i)
{
	sink += i;
}

NOINLINE static void tiny(uint64_t i)
{
	tiny2(i ^ 1);
}

NOINLINE static void long_work(void)
{
	uint64_t x = 1;

	for (int i = 0; i < 2000000; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	sink += x;
}

NOINLINE static void run(int f, long s, int l)
{
	sink += fib(f);
	for (long i = 0; i < s; i++)
		tiny((uint64_t)i);
	for (int i = 0; i < l; i++)
		long_work();
}

static uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef WITH_RINGPROF
/* Fault in the segment's ring pages before the timed tree: a long-running program
 * touches them once, on the first lap, and never again. An atomic add of 0 writes
 * each page without changing a byte (the engine may be reading a published record). */
static void warm_rings(void)
{
	struct rp_wire_header *h;

	rp_init();
	h = rp_segment_header();
	if (!h)
		return;
	char *p = (char *)h + h->ring_data_offset;
	uint64_t len = (uint64_t)h->ring_count * h->ring_capacity * sizeof(struct rp_event);
	for (uint64_t off = 0; off < len; off += 4096)
		__atomic_fetch_add((uint32_t *)(p + off), 0, __ATOMIC_RELAXED);
}
#endif

int main(int argc, char **argv)
{
	uint64_t t0, t1, w0, w1, dropped = 0, sent = 0;

	if (argc != 4)
		return 2;
#ifdef WITH_RINGPROF
	warm_rings();
#endif
	w0 = now_ns(CLOCK_MONOTONIC);
	t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	run(atoi(argv[1]), atol(argv[2]), atoi(argv[3]));
	t1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	w1 = now_ns(CLOCK_MONOTONIC);
#ifdef WITH_RINGPROF
	dropped = rp_dropped();
	struct rp_wire_header *h = rp_segment_header();
	for (uint32_t r = 0; h && r < h->ring_count; r++) {
		const struct rp_wire_ring *d = (const struct rp_wire_ring *)((const char *)h +
			h->ring_desc_offset) + r;
		sent += __atomic_load_n(&d->ring.p_tail, __ATOMIC_RELAXED);
	}
#endif
	printf("%llu %llu %llu %llu\n", (unsigned long long)(t1 - t0),
	       (unsigned long long)(w1 - w0), (unsigned long long)dropped,
	       (unsigned long long)sent);
	return 0;
}
