// SPDX-License-Identifier: MIT
/*
 * Fine-grained names of the C API (rp_begin_fine, RP_SCOPE_FINE: docs/summaries.md)
 * mixed with plain spans, for test_fine: two threads each run W iterations of
 *
 *	fine_a (fine) -> 2 x fine_leaf, [mid (plain) -> fine_leaf]
 *	fine_b (RP_SCOPE_FINE) -> fine_leaf
 *
 * (mid one iteration in 16), 50 of them in each span of outer (plain), and in S of
 * the outer spans one fine_slow (fine, but longer than the threshold: a span) around
 * 10 fine_leaf, then one fine_jump (fine) whose fine_leaf longjmps back: outer's
 * rp_end heals both away by name. The
 * program counts what it calls and prints every function's calls ("fn NAME N") and
 * every caller edge ("edge CALLER CALLEE N"), as prog_native does.
 *
 *	prog_fine W S [det]
 * With det, the program supplies the library's monotonic clock (RINGPROF_CLOCK=
 * monotonic): a per-thread counter that advances by one at each read, so that two runs
 * see the very same times; fine_slow then reads it 12000 times rather than spin 50 us.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ringprof/ringprof.h>

#define NOINL __attribute__((noinline))

enum { F_OUTER, F_A, F_B, F_LEAF, F_MID, F_SLOW, F_JUMP, F_N };
static const char *const fname[F_N] = { "outer", "fine_a", "fine_b", "fine_leaf", "mid",
					 "fine_slow", "fine_jump" };
static uint32_t id[F_N];

#include "prog_counts.h"

static __thread jmp_buf jb;
static long groups, every;
#define GROUP 50 /* iterations per outer span */

static void call(int from, int to)
{
	my_calls[to]++;
	my_edges[from][to]++;
}

static NOINL void fine_leaf(int from)
{
	call(from, F_LEAF);
	rp_begin_fine(id[F_LEAF]);
	rp_end_fine(id[F_LEAF]);
}

/* With @mid, a plain span inside: its BEGIN writes fine_a's, which is a span then. */
static NOINL void fine_a(bool mid)
{
	call(F_OUTER, F_A);
	rp_begin_fine(id[F_A]);
	fine_leaf(F_A);
	fine_leaf(F_A);
	if (mid) {
		call(F_A, F_MID);
		rp_begin(id[F_MID]);
		fine_leaf(F_MID);
		rp_end(id[F_MID]);
	}
	rp_end_fine(id[F_A]);
}

static NOINL void fine_b(void)
{
	call(F_OUTER, F_B);
	RP_SCOPE_FINE(id[F_B]);
	fine_leaf(F_B);
}

static NOINL void fine_slow(void)
{
	struct timespec a, b;

	call(F_OUTER, F_SLOW);
	rp_begin_fine(id[F_SLOW]);
	for (int k = 0; k < 10; k++)
		fine_leaf(F_SLOW);
	if (det) { /* past the 10 us threshold */
		for (int k = 0; k < 12000; k++)
			rp_clock_monotonic();
	} else {
		clock_gettime(CLOCK_MONOTONIC, &a);
		do
			clock_gettime(CLOCK_MONOTONIC, &b);
		while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 50000);
	}
	rp_end_fine(id[F_SLOW]);
}

/* Left by longjmp from inside its fine_leaf: neither END is ever recorded. */
static NOINL void fine_jump(void)
{
	call(F_OUTER, F_JUMP);
	rp_begin_fine(id[F_JUMP]);
	call(F_JUMP, F_LEAF);
	rp_begin_fine(id[F_LEAF]);
	longjmp(jb, 1);
}

/* fine_slow, then fine_jump, whose longjmp lands here (a frame of its own). */
static NOINL void slow_and_jump(void)
{
	fine_slow();
	if (setjmp(jb) == 0)
		fine_jump();
}

/* Group @g: one outer around GROUP iterations of fine_a and fine_b (a plain parent's
 * summaries are written at its END: it holds many calls, as a real one does), then,
 * every @every groups, fine_slow and fine_jump, which outer's rp_end heals. */
static NOINL void group(long g)
{
	my_calls[F_OUTER]++;
	rp_begin(id[F_OUTER]);
	for (int k = 0; k < GROUP; k++) {
		fine_a(k % 16 == 0);
		fine_b();
	}
	if (g % every == every - 1)
		slow_and_jump();
	rp_end(id[F_OUTER]); /* heals fine_jump's levels away by name */
}

static void run(void)
{
	for (long g = 0; g < groups; g++)
		group(g);
	counts_collect();
}

static void *worker(void *arg)
{
	(void)arg;
	run();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;

	if (argc < 3) {
		fprintf(stderr, "usage: prog_fine ITERATIONS SLOW [det]\n");
		return 2;
	}
	groups = atol(argv[1]) / GROUP;
	every = groups / (atol(argv[2]) > 0 ? atol(argv[2]) : 1);
	every = every > 0 ? every : 1;
	/* (det was read from the arguments before main: prog_counts.h) */
	for (int f = 0; f < F_N; f++)
		id[f] = rp_intern(fname[f], "FUNCTION", "prog_fine.c", (uint32_t)f + 1);
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	run();
	pthread_join(th, NULL);
	counts_print();
	return 0;
}
