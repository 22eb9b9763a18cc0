// SPDX-License-Identifier: MIT
/*
 * Functions whose symbols are named as compilers name the copies they make of a
 * function (gcc's "f.constprop.0", "f.isra.0.part.1", "f.cold", LLVM's
 * "f.llvm.<hash>", a C++ clone "_ZN4demo5cloneEl.constprop.3"), set with asm labels
 * so that every compiler gives them, and two names with a dot that is no copy's:
 * test_auto expects the copies under their source function's name, the others as
 * they are.
 *
 *	prog_clones N: main calls the i-th function (1..7) i x N times
 */
#include <stdio.h>
#include <stdlib.h>

#define COPY(fn, sym)                                                              \
	static __attribute__((noinline)) long fn(long x) __asm__(sym);             \
	static __attribute__((noinline)) long fn(long x)                           \
	{                                                                          \
		return x * 3 + 1;                                                  \
	}

COPY(work, "work.constprop.0")
COPY(split, "split.isra.0.part.1")
COPY(promoted, "promoted.llvm.8812345")
COPY(hot, "hot.cold")
COPY(cxx, "_ZN4demo5cloneEl.constprop.3")
COPY(dotted, "dotted.name")
COPY(almost, "almost.llvmx.1")

int main(int argc, char **argv)
{
	long (*const fns[])(long) = { work, split, promoted, hot, cxx, dotted, almost };
	volatile long sink = 0;
	long n;

	if (argc != 2) {
		fprintf(stderr, "usage: prog_clones N\n");
		return 2;
	}
	n = atol(argv[1]);
	for (int f = 0; f < 7; f++)
		for (long i = 0; i < (f + 1) * n; i++)
			sink += fns[f](i);
	return 0;
}
