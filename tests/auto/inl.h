/* SPDX-License-Identifier: MIT */
/*
 * prog_inline's header: a static function defined here is one copy per unit that
 * includes it, each unit spelling this file's path its own way (prog_inline.c).
 */
#ifndef RP_TESTS_INL_H
#define RP_TESTS_INL_H

/* Called through a volatile pointer (inl_call): an out-of-line copy per unit, traced
 * whatever the compiler would have inlined. */
static inline unsigned inl_twice(unsigned x)
{
	return 2 * x + 1;
}

static unsigned (*volatile inl_ptr)(unsigned) = inl_twice;
#define inl_call(x) inl_ptr(x)

unsigned inl_from_a(unsigned n);
unsigned inl_from_b(unsigned n);

#endif
