// SPDX-License-Identifier: MIT
/* prog_inline: this unit spells the header "./inl.h". */
#include "./inl.h"

unsigned inl_from_a(unsigned n)
{
	unsigned s = 0;

	for (unsigned i = 0; i < n; i++)
		s += inl_call(i);
	return s;
}
