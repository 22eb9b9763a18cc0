// SPDX-License-Identifier: MIT
/*
 * longjmp out of functions traced by ringprof-auto (-finstrument-functions), then
 * ordinary calls: test_auto checks that every later call is counted and the depth
 * cap never hit (the nesting heals by frame: producers/shadow.c).
 *
 *	prog_longjmp J D N
 *	J times: dive(1) recurses to dive(D), which longjmps back to main;
 *	then N x work(i).
 */
#include <setjmp.h>
#include <stdlib.h>

static jmp_buf jb;
static int depth;
static volatile int sink;

static __attribute__((noinline)) void dive(int level)
{
	if (level == depth)
		longjmp(jb, 1);
	if (level < depth)
		dive(level + 1);
	sink = sink + 1; /* not a tail call */
}

static __attribute__((noinline)) void work(int i)
{
	sink = sink + i;
}

int main(int argc, char **argv)
{
	volatile int jumps = 0;
	int j, n;

	if (argc != 4)
		return 2;
	j = atoi(argv[1]);
	depth = atoi(argv[2]);
	n = atoi(argv[3]);
	if (setjmp(jb) != 0)
		jumps = jumps + 1;
	if (jumps < j)
		dive(1);
	for (int i = 0; i < n; i++)
		work(i);
	return 0;
}
