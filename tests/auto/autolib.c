// SPDX-License-Identifier: MIT
/* The shared library of prog_auto: an exported function and a static one, which
 * only the library's .symtab names (dladdr sees exported symbols alone). */
int shlib_fn(int x);

static __attribute__((noinline)) int shlib_helper(int x)
{
	return x * 3 + 1;
}

int shlib_fn(int x)
{
	return shlib_helper(x);
}
