/* SPDX-License-Identifier: MIT */
/*
 * What the test programs that count their own calls beside the profiler share
 * (prog_fine, auto/prog_native): per-thread counts, summed at the end and printed as
 * the tests read them ("fn NAME N", "edge CALLER CALLEE N": rp_test_parse_counts),
 * and the deterministic clock (det) that interposes on libringprof's. Define the
 * function indexes (F_N of them) and their names fname[] before including it.
 * Nothing here is traced: prog_native is built with -finstrument-functions, and a
 * hook in these would count calls the program does not.
 */
#ifndef RP_TESTS_PROG_COUNTS_H
#define RP_TESTS_PROG_COUNTS_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RP_NOTRACE __attribute__((no_instrument_function))

static uint64_t calls[F_N], edges[F_N][F_N]; /* summed from the threads at the end */
static __thread uint64_t my_calls[F_N], my_edges[F_N][F_N];
static int det;
static pthread_mutex_t sum_lock = PTHREAD_MUTEX_INITIALIZER;

/* The deterministic clock (det): interposes on libringprof's. Reads advance it. */
static __thread uint64_t fake_now __attribute__((tls_model("initial-exec")));
uint64_t rp_clock_monotonic(void) RP_NOTRACE;
uint64_t rp_clock_monotonic(void)
{
	struct timespec ts;

	if (det)
		return 1000000 + ++fake_now;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * det from the command line (the third argument "det") before main() runs: main is
 * traced (prog_native), so its entry reads the clock before its first line; on the
 * real clock, that one time (now) among the fake ones moved the rolling windows to
 * now, and whether a span kept its window row depended on when the engine merged it.
 * glibc calls .init_array functions with main's arguments.
 */
static RP_NOTRACE void det_from_args(int argc, char **argv, char **envp)
{
	(void)envp;
	det = argc > 3 && strcmp(argv[3], "det") == 0;
}
__attribute__((section(".init_array"), used)) static void (*const det_init)(int, char **,
									  char **) =
	det_from_args;

/* This thread's counts added to the program's (each thread once, at its end). */
static RP_NOTRACE void counts_collect(void)
{
	pthread_mutex_lock(&sum_lock);
	for (int f = 0; f < F_N; f++) {
		calls[f] += my_calls[f];
		for (int g = 0; g < F_N; g++)
			edges[f][g] += my_edges[f][g];
	}
	pthread_mutex_unlock(&sum_lock);
}

/* Every function's calls and every caller edge taken, on stdout. */
static RP_NOTRACE void counts_print(void)
{
	for (int f = 0; f < F_N; f++)
		printf("fn %s %llu\n", fname[f], (unsigned long long)calls[f]);
	for (int f = 0; f < F_N; f++)
		for (int g = 0; g < F_N; g++)
			if (edges[f][g])
				printf("edge %s %s %llu\n", fname[f], fname[g],
				       (unsigned long long)edges[f][g]);
}

#endif /* RP_TESTS_PROG_COUNTS_H */
