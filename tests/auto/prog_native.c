// SPDX-License-Identifier: MIT
/*
 * A known call tree at a native call rate, built with -finstrument-functions and
 * ringprof-auto (test_summaries): two threads each run W iterations of
 *
 *	nat_a() -> 2 x nat_b() -> nat_leaf();  nat_c() -> 2 x nat_leaf()
 *
 * (8 calls of a few ns each: tens of millions of calls per second per thread), and
 * every W / S iterations one nat_slow(), which spins about 50 us around 1000
 * nat_leaf() calls: long calls among the short ones. Each nat_slow() is inside a
 * span of the C API ("api", rp_begin/rp_end) and followed by a counter sample: the
 * records a thread writes beside its hooks' (docs/summaries.md). The program counts what it
 * calls (plain counters, not traced) and prints, at the end, every function's calls
 * ("fn NAME N"), every caller edge ("edge CALLER CALLEE N") and its peak RSS
 * ("rss_kib N"), for the test to compare with the engine's report.
 *
 *	prog_native W S [det]
 * With det, the program supplies the library's monotonic clock itself: a per-thread
 * counter that advances by one at each read (RINGPROF_CLOCK=monotonic), so that two
 * runs see the very same times, and nat_slow() spins 12000 reads rather than 50 us;
 * main then calls nat_a() and nat_slow() once before the worker starts (their names
 * resolved by then: see main()).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <ringprof/ringprof.h>

#define NOINL __attribute__((noinline))

enum { F_MAIN, F_WORKER, F_A, F_B, F_C, F_LEAF, F_SLOW, F_API, F_N };
static const char *const fname[F_N] = { "main", "nat_worker", "nat_a", "nat_b", "nat_c",
					 "nat_leaf", "nat_slow", "api" };
static uint32_t api_id, counter_id;

#include "../prog_counts.h"

static __thread volatile uint64_t sink;
static long iters, every;

#define CALL(from, to, expr)                                                           \
	do {                                                                           \
		my_edges[from][to]++;                                                  \
		expr;                                                                  \
	} while (0)

static NOINL void nat_leaf(uint64_t i)
{
	my_calls[F_LEAF]++;
	sink += i;
}

static NOINL void nat_b(uint64_t i)
{
	my_calls[F_B]++;
	CALL(F_B, F_LEAF, nat_leaf(i));
}

static NOINL void nat_c(uint64_t i)
{
	my_calls[F_C]++;
	CALL(F_C, F_LEAF, nat_leaf(i));
	CALL(F_C, F_LEAF, nat_leaf(i + 1));
}

static NOINL void nat_a(uint64_t i)
{
	my_calls[F_A]++;
	CALL(F_A, F_B, nat_b(i));
	CALL(F_A, F_B, nat_b(i + 1));
	CALL(F_A, F_C, nat_c(i));
}

static NOINL void nat_slow(uint64_t i)
{
	struct timespec a, b;

	my_calls[F_SLOW]++;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int k = 0; k < 1000; k++)
		CALL(F_SLOW, F_LEAF, nat_leaf(i + (uint64_t)k));
	if (det) { /* 12000 reads of the fake clock: past the 10 us threshold */
		for (int k = 0; k < 10000; k++)
			rp_clock_monotonic();
		return;
	}
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 50000);
}

/* Not traced: the edges go from main and nat_worker themselves. */
static __attribute__((no_instrument_function)) void run(int self)
{
	for (long i = 0; i < iters; i++) {
		CALL(self, F_A, nat_a((uint64_t)i));
		if (i % every == every - 1) {
			my_calls[F_API]++;
			my_edges[self][F_API]++;
			rp_begin(api_id);
			CALL(F_API, F_SLOW, nat_slow((uint64_t)i));
			rp_end(api_id);
			rp_counter(counter_id, i);
		}
	}
}

static NOINL void *nat_worker(void *arg)
{
	(void)arg;
	my_calls[F_WORKER]++;
	run(F_WORKER);
	counts_collect();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;
	struct rusage ru;

	if (argc < 3 || (iters = atol(argv[1])) < 1 || (every = atol(argv[2])) < 1) {
		fprintf(stderr, "usage: prog_native W S [det]\n");
		return 2;
	}
	/* (det was read from the arguments before main: prog_counts.h) */
	every = iters / every > 0 ? iters / every : 1;
	my_calls[F_MAIN]++;
	api_id = rp_intern("api", "", NULL, 0);
	counter_id = rp_intern("iteration", "", NULL, 0);
	/* With det, the functions both threads call are resolved here, before the worker
	 * starts: ringprof-auto's first call of a function resolves its name and records
	 * that as a span, reading the clock twice, on whichever thread misses first (or
	 * on both, at once). The threads' times would then depend on their race. */
	if (det) {
		CALL(F_MAIN, F_A, nat_a(0));
		CALL(F_MAIN, F_SLOW, nat_slow(0));
	}
	if (pthread_create(&th, NULL, nat_worker, NULL) != 0)
		return 1;
	run(F_MAIN);
	pthread_join(th, NULL);
	counts_collect();
	counts_print();
	getrusage(RUSAGE_SELF, &ru);
	printf("rss_kib %ld\n", ru.ru_maxrss);
	return 0;
}
