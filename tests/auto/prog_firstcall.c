// SPDX-License-Identifier: MIT
/*
 * First calls: main calls 2,000 distinct functions once each (the first call of
 * each is a miss in ringprof-auto's address cache: its name looked up), then
 * warm() calls the same 2,000 again (all hits). main's self time and warm()'s are
 * the same work; the lookups must show in neither. The functions are macro-expanded
 * here: fn_0000 ... fn_1999.
 */
#include <stdio.h>

#define FN(p) unsigned fn_##p(unsigned x); __attribute__((noinline)) unsigned fn_##p(unsigned x) { return x * 3 + 1; }
#define FN10(p) FN(p##0) FN(p##1) FN(p##2) FN(p##3) FN(p##4) \
		FN(p##5) FN(p##6) FN(p##7) FN(p##8) FN(p##9)
#define FN100(p) FN10(p##0) FN10(p##1) FN10(p##2) FN10(p##3) FN10(p##4) \
		 FN10(p##5) FN10(p##6) FN10(p##7) FN10(p##8) FN10(p##9)
#define FN1000(p) FN100(p##0) FN100(p##1) FN100(p##2) FN100(p##3) FN100(p##4) \
		  FN100(p##5) FN100(p##6) FN100(p##7) FN100(p##8) FN100(p##9)

#define CALL(p) s = fn_##p(s);
#define CALL10(p) CALL(p##0) CALL(p##1) CALL(p##2) CALL(p##3) CALL(p##4) \
		  CALL(p##5) CALL(p##6) CALL(p##7) CALL(p##8) CALL(p##9)
#define CALL100(p) CALL10(p##0) CALL10(p##1) CALL10(p##2) CALL10(p##3) CALL10(p##4) \
		   CALL10(p##5) CALL10(p##6) CALL10(p##7) CALL10(p##8) CALL10(p##9)
#define CALL1000(p) CALL100(p##0) CALL100(p##1) CALL100(p##2) CALL100(p##3) \
		    CALL100(p##4) CALL100(p##5) CALL100(p##6) CALL100(p##7) \
		    CALL100(p##8) CALL100(p##9)

FN1000(0)
FN1000(1)

unsigned warm(unsigned s);
__attribute__((noinline)) unsigned warm(unsigned s)
{
	CALL1000(0)
	CALL1000(1)
	return s;
}

int main(void)
{
	unsigned s = 1;

	CALL1000(0)
	CALL1000(1)
	s = warm(s);
	printf("%u\n", s);
	return 0;
}
