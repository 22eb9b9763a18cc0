// SPDX-License-Identifier: MIT
/* prog_inline: this unit finds the header through an include directory with a ".."
 * in it (CMakeLists.txt). */
#include <inl.h>

unsigned inl_from_b(unsigned n)
{
	unsigned s = 0;

	for (unsigned i = 0; i < n; i++)
		s += inl_call(i + 1);
	return s;
}
