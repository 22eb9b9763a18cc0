// SPDX-License-Identifier: MIT
/*
 * A static inline function of a header (inl.h) compiled into three units that spell
 * the header's path three ways ("inl.h", "./inl.h", and through "<dir>/../auto"),
 * built with ringprof-auto (test_auto): each unit has its own copy, and each copy
 * must be the same function, one row, whatever the spelling. Each unit calls it N
 * times (argv[1]).
 */
#include <stdio.h>
#include <stdlib.h>

#include "inl.h"

static unsigned inl_from_main(unsigned n)
{
	unsigned s = 0;

	for (unsigned i = 0; i < n; i++)
		s += inl_call(i + 2);
	return s;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 100;

	printf("%u\n", inl_from_main(n) + inl_from_a(n) + inl_from_b(n));
	return 0;
}
